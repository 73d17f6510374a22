"""`hf://` inputs (`divscope.tables.local_path`): prompts, trajectories and token tables read
from a Hub dataset in the Hub cache offline (`offline_hub`), and the error, with the download
command, when one cannot be reached."""

from __future__ import annotations

from pathlib import Path

import pytest

from divscope.errors import DivscopeError
from divscope.io import read_metadata, read_reference, read_table, scan_token_table
from divscope.prompts import read_prompts_arrow
from divscope.tables import input_name, local_path, read_trajectories_arrow

LAB = Path("fixtures/lab")


def test_hf_prompts_and_trajectories_are_read_from_the_hub_cache(offline_hub):
    offline_hub.add("org/study", LAB / "prompts/eval.jsonl", folder="data/eval.jsonl",
                    kind="dataset")  # fmt: skip
    offline_hub.add("org/study", LAB / "trajectories.jsonl", folder="rollouts/t.jsonl",
                    kind="dataset", revision="v2")  # fmt: skip
    assert read_prompts_arrow("hf://datasets/org/study/data/eval.jsonl").num_rows == 256
    trajectories = read_trajectories_arrow("hf://datasets/org/study@v2/rollouts/t.jsonl")
    assert trajectories.num_rows == 512
    # As the command line passes it: a Path, which collapses the `//`.
    assert read_table(Path("hf://datasets/org/study/data/eval.jsonl")).height == 256
    assert read_reference("hf://datasets/org/study@v2/rollouts/t.jsonl").height == 512
    # The Hub's Parquet conversion, by its alias and its quoted name.
    offline_hub.add("org/study", LAB / "prompts/eval.jsonl", folder="default/test/0.jsonl",
                    kind="dataset", revision="refs/convert/parquet")  # fmt: skip
    for revision in ("~parquet", "refs%2Fconvert%2Fparquet", "refs/convert/parquet"):
        given = f"hf://datasets/org/study@{revision}/default/test/0.jsonl"
        assert read_prompts_arrow(given).num_rows == 256


def test_an_hf_token_table_is_read_with_its_metadata(offline_hub, lab_tokens_path):
    lab_tokens = lab_tokens_path
    offline_hub.add("org/study", Path(lab_tokens), folder="tokens.parquet", kind="dataset")
    given = "hf://datasets/org/study/tokens.parquet"
    assert scan_token_table(given).collect().height == scan_token_table(lab_tokens).collect().height
    assert read_metadata(given) == read_metadata(lab_tokens)


@pytest.mark.parametrize(
    "given, command",
    [
        ("hf://datasets/org/study/data/absent.jsonl",
         "hf download org/study data/absent.jsonl --repo-type dataset --local-dir DIR\n"
         "and pass DIR/data/absent.jsonl"),
        ("hf://datasets/org/other@v3/x.parquet",
         "hf download org/other x.parquet --repo-type dataset --revision v3 --local-dir DIR"),
    ],
)  # fmt: skip
def test_an_unreachable_hf_path_says_how_to_pass_a_local_copy(offline_hub, given, command):
    offline_hub.add("org/study", LAB / "prompts/eval.jsonl", folder="data/eval.jsonl",
                    kind="dataset")  # fmt: skip
    with pytest.raises(DivscopeError) as raised:
        read_prompts_arrow(given)
    message = str(raised.value)
    assert message.startswith(f"{given}: could not be reached (")
    assert command in message


def test_hf_paths_are_named_as_given():
    assert input_name(Path("hf://datasets/org/s/x.parquet")) == "hf://datasets/org/s/x.parquet"
    assert input_name("runs/x.parquet") == "runs/x.parquet"
    assert local_path(Path("runs/x.parquet")) == Path("runs/x.parquet")
    with pytest.raises(DivscopeError, match="not a Hub file; write hf://datasets/ORG/NAME"):
        local_path("hf://datasets/org-only")
