"""The Python API in a notebook: `score`, `analyze`, `generate` and `cross_sample` read tables in
memory (a polars DataFrame, a pyarrow Table, a list of dicts) as they read the same table from a
file, run models already loaded as they run the same models named, and return their table when
given no output (`out=None`); the command line still requires `--out`.

On the committed lab (`fixtures/lab`): a few trajectories and prompts, a few tokens each.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import divscope
from divscope.analyses.summary import to_jsonable
from divscope.decoding import DecodeConfig
from divscope.decoding.cross_sample import Grid
from divscope.errors import DivscopeError
from divscope.generation import GenerateConfig
from divscope.generation.engine import Sampling
from divscope.models.loading import given_model, load_model
from divscope.models.tokenizers import load_tokenizer
from divscope.params import ModelPair, SinglePlacement
from divscope.tables import as_arrow

LAB = Path("fixtures/lab")
NAMES = ModelPair(str(LAB / "base"), str(LAB / "rl"))
FORMS = ("polars", "arrow", "dicts")


def as_form(frame: pl.DataFrame, form: str):
    """`frame` as a notebook may hold it."""
    return {"polars": frame, "arrow": frame.to_arrow(), "dicts": frame.to_dicts()}[form]


@pytest.fixture(scope="module")
def trajectories() -> pl.DataFrame:
    """Two of the lab's trajectories: base's sample 0 and RL's sample 4 of one prompt."""
    frame = pl.read_ndjson(LAB / "trajectories.jsonl")
    return frame.filter((pl.col("prompt_id") == "eval-000") & pl.col("sample_id").is_in([0, 4]))


@pytest.fixture(scope="module")
def prompts() -> pl.DataFrame:
    """The first two of the lab's eval prompts."""
    return pl.read_ndjson(LAB / "prompts" / "eval.jsonl").head(2)


@pytest.fixture(scope="module")
def loaded() -> dict:
    """The lab's models, loaded as a notebook loads them (on the CPU, in their float32)."""
    return {name: load_model(str(LAB / name), device="cpu") for name in ("base", "rl")}


@pytest.fixture(scope="module")
def scored(tmp_path_factory, trajectories) -> pa.Table:
    """The token table of `trajectories` read from a file and written to one."""
    folder = tmp_path_factory.mktemp("scored")
    trajectories.write_ndjson(folder / "trajectories.jsonl")
    divscope.score(folder / "trajectories.jsonl", NAMES, folder / "tokens.parquet", progress=False)
    return pq.read_table(folder / "tokens.parquet")


@pytest.mark.parametrize("form", FORMS)
def test_score_reads_trajectories_in_memory_and_returns_the_table(scored, trajectories, form):
    tokens = divscope.score(as_form(trajectories, form), NAMES, progress=False)
    assert isinstance(tokens, pa.Table)
    assert tokens.equals(scored)
    metadata = json.loads(tokens.schema.metadata[b"divscope"])
    assert metadata["trajectories"] == "trajectories (in memory)"
    assert metadata["sources"] == {"base": "base", "rl": "rl"}


def test_score_runs_models_already_loaded(scored, trajectories, loaded):
    rl_pair = (loaded["rl"], load_tokenizer(str(LAB / "rl")))  # a (model, tokenizer) pair
    tokens = divscope.score(trajectories, ModelPair(loaded["base"], rl_pair), progress=False)
    assert tokens.equals(scored)
    models = json.loads(tokens.schema.metadata[b"divscope"])["models"]
    assert models["base"]["name_or_path"] == models["rl"]["name_or_path"].replace("rl", "base")


def test_a_model_given_loaded_is_a_model_or_a_pair():
    with pytest.raises(DivscopeError, match="a \\(model, tokenizer\\) pair"):
        given_model(("a", "b", "c"))
    with pytest.raises(DivscopeError, match="name_or_path"):
        given_model(object())


def test_a_list_of_anything_but_rows_is_refused():
    with pytest.raises(DivscopeError, match="one dict per row"):
        as_arrow([1, 2])
    with pytest.raises(DivscopeError, match="a table of type dict: give a path"):
        divscope.score({"prompt_id": ["a"]}, NAMES)


@pytest.mark.parametrize("form", FORMS)
def test_analyze_reads_a_token_table_in_memory_and_writes_nothing(
    lab_head_tokens_path, tmp_path, form
):
    expected = divscope.analyze(lab_head_tokens_path, tmp_path / "summary.json")
    given = as_form(pl.read_parquet(lab_head_tokens_path), form)
    if form == "arrow":  # as `score(out=None)` returns it: with its metadata
        given = pq.read_table(lab_head_tokens_path)
    result = divscope.analyze(given)
    assert to_jsonable(result.to_dict()) == to_jsonable(expected.to_dict())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


@pytest.fixture(scope="module")
def generated(tmp_path_factory, prompts) -> pa.Table:
    """Two responses to each of `prompts` from the lab's base, read from and written to files."""
    folder = tmp_path_factory.mktemp("generated")
    prompts.write_ndjson(folder / "prompts.jsonl")
    divscope.generate(
        folder / "prompts.jsonl", str(LAB / "base"), folder / "base.parquet", GENERATE,
        SinglePlacement(device="cpu"), progress=False,
    )  # fmt: skip
    return pq.read_table(folder / "base.parquet")


GENERATE = GenerateConfig(Sampling(n=2, max_new_tokens=16, seed=1))


@pytest.mark.parametrize("form", FORMS)
def test_generate_reads_prompts_in_memory_and_returns_the_trajectories(generated, prompts, form):
    rows = divscope.generate(
        as_form(prompts, form), str(LAB / "base"), None, GENERATE, SinglePlacement(device="cpu"),
        progress=False,
    )  # fmt: skip
    assert rows.equals(generated)


def test_generate_runs_a_model_already_loaded(generated, prompts, loaded):
    rows = divscope.generate(prompts, loaded["base"], config=GENERATE, progress=False)
    assert rows.equals(generated)


@pytest.fixture(scope="module")
def decoded(tmp_path_factory, prompts) -> pa.Table:
    """The lab's base and rl controls on `prompts`, graded, from and to files."""
    folder = tmp_path_factory.mktemp("decoded")
    prompts.write_ndjson(folder / "prompts.jsonl")
    return divscope.cross_sample(
        folder / "prompts.jsonl", NAMES, "base,rl", folder / "xs.parquet", DECODE, GRID,
        progress=False,
    )  # fmt: skip


DECODE = DecodeConfig(max_new_tokens=16)
GRID = Grid(n=1, grader="lab")


@pytest.mark.parametrize("form", FORMS)
def test_cross_sample_reads_prompts_in_memory_and_returns_the_results(decoded, prompts, form):
    results = divscope.cross_sample(
        as_form(prompts, form), NAMES, "base,rl", None, DECODE, GRID, progress=False
    )
    assert results.equals(decoded)


def test_cross_sample_runs_models_already_loaded(decoded, prompts, loaded):
    models = ModelPair(loaded["base"], loaded["rl"])
    results = divscope.cross_sample(prompts, models, "base,rl", None, DECODE, GRID, progress=False)
    assert results.equals(decoded)


@pytest.mark.parametrize("command", ["score", "generate", "cross-sample", "analyze"])
def test_the_command_line_still_requires_its_output(command):
    from typer.testing import CliRunner

    from divscope.cli import app

    models = {"score": ["--base", "b", "--rl", "r"], "generate": ["-m", "b"],
              "cross-sample": ["--base", "b", "--rl", "r", "--policy", "base"]}  # fmt: skip
    arguments = [command, "in.jsonl", *models.get(command, [])]
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 2
    assert "Missing option" in result.output and "--out" in result.output
