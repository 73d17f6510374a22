"""`divscope analyze`: prints a digest, writes JSON, reports bad input in one line."""

from __future__ import annotations

import dataclasses
import importlib
import json

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from divscope import formatting
from divscope.cli import app
from divscope.schema import TOKEN_TABLE


def write_token_table(
    path, *, seed: int = 0, n_prompts: int = 3, samples: int = 4, length: int = 25
):
    """Write a complete random token table (every contract column) to `path`."""
    rng = np.random.default_rng(seed)
    n_responses = n_prompts * samples
    n = n_responses * length
    response = np.repeat(np.arange(n_responses), length)
    columns = {
        name: rng.random(n) if dtype.is_float() else rng.integers(1, 6, n)
        for name, dtype in TOKEN_TABLE.items()
        if dtype.is_numeric()
    }
    columns |= {
        "prompt_id": [f"p{r // samples}" for r in response],
        "sample_id": response % samples,
        "source": ["rl"] * n,
        "position": np.tile(np.arange(length), n_responses),
        "n_tokens": np.full(n, length),
        "js": rng.random(n) ** 4 * 0.69,
        "token": rng.choice([" wait", " the", " x"], n),
        "correct": np.repeat(rng.random(n_responses) < 0.5, length),
    }
    frame = pl.DataFrame(columns).select(pl.col(c).cast(d) for c, d in TOKEN_TABLE.items())
    frame.write_parquet(path)
    return path


D1 = "policy=rl-replace,force_prefix=Alright - policy=base,force_prefix=Alright"
D2 = "policy=forward,budget=4 - policy=random,budget=4"
POLICIES = [("base", -1, 1, 0), ("rl", -1, 2, 0), ("forward", 4, 2, 4)]


@pytest.fixture
def tokens(tmp_path):
    return write_token_table(tmp_path / "rl.parquet")


def run(*args: str):
    return CliRunner().invoke(app, ["analyze", *map(str, args)])


def test_analyze_prints_a_digest_and_writes_json(tokens, tmp_path):
    out = tmp_path / "out" / "summary.json"
    result = run(tokens, "--out", out, "--n-boot", "20")
    assert result.exit_code == 0, result.output
    assert "300 tokens, 12 responses, 3 prompts" in result.output
    assert "Sparse but Critical (js)" in result.output
    assert "Decision-token takeover (ce_base_rl)" in result.output
    assert "Gini" in result.output and "Failure AUROC" in result.output
    document = json.loads(out.read_text())
    assert document["tokens"] == str(tokens)
    assert document["n_tokens"] == 300
    assert 0 <= document["takeover"]["lorenz"]["gini"] <= 1
    assert len(document["core"]["positional_profile"]) == 20


def test_planning_words_from_a_file(tokens, tmp_path):
    words = tmp_path / "words.txt"
    words.write_text(" The\nx\n", encoding="utf-8")
    out = tmp_path / "summary.json"
    result = run(tokens, "--out", out, "--n-boot", "10", "--planning-words", words)
    assert result.exit_code == 0, result.output
    assert "Planning words (2-word lexicon): " in result.output
    stored = json.loads(out.read_text())["takeover"]["planning_enrichment"]
    table = pl.read_parquet(tokens)
    share = table["token"].is_in([" the", " x"]).mean()
    assert (stored["n_words"], stored["share_all"]) == (2, pytest.approx(share))


def test_analyze_with_compare_and_cross_sample_results(tokens, tmp_path):
    sft = write_token_table(tmp_path / "sft.parquet", seed=1)
    other = write_token_table(tmp_path / "other.parquet", seed=2)
    xs = tmp_path / "xs.jsonl"
    rows = [
        {"prompt_id": f"p{p}", "sample_id": s, "policy": policy, "budget": budget,
         "correct": (p + s) % 3 < level, "n_tokens": 20, "n_switches": sw, "n_effective": sw // 2}
        for p in range(3)
        for s in range(4)
        for policy, budget, level, sw in POLICIES
    ]  # fmt: skip
    xs.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "summary.json"
    args = ["--compare", sft, "--label", "SFT", "--compare", other, "--xs", xs, "--n-boot", "10"]
    result = run(tokens, "--out", out, *args)
    assert result.exit_code == 0, result.output
    assert "Comparison:" in result.output and "\nCross-sampling\n" in result.output
    document = json.loads(out.read_text())
    assert [row["label"] for row in document["core"]["comparison"]] == ["rl", "SFT", "other"]
    assert document["cross_sample"] is not None


def test_analyze_of_other_metrics_per_section(tokens, tmp_path):
    args = ["--out", tmp_path / "s.json", "--n-boot", "5", "--takeover-metric", "kl_base_rl"]
    result = run(tokens, *args, "--core-metric", "js_full")
    assert result.exit_code == 0, result.output
    assert "Sparse but Critical (js_full)" in result.output
    assert "Decision-token takeover (kl_base_rl)" in result.output
    document = json.loads((tmp_path / "s.json").read_text())
    assert (document["core"]["metric"], document["takeover"]["metric"]) == ("js_full", "kl_base_rl")


@pytest.mark.parametrize("flags", [["--metric", "ce_base_rl"], ["--core-metric", "ce_base_rl"]])
def test_js_thresholds_on_ce_are_refused_without_rescaling(tokens, tmp_path, flags):
    out = tmp_path / "s.json"
    result = run(tokens, "--out", out, "--n-boot", "5", *flags)
    assert result.exit_code == 2
    assert "the core paper's thresholds (near-zero 0.0001/0.001/0.01" in result.output
    assert "--takeover-metric the takeover section alone" in result.output
    assert "pass --rescale-thresholds (rescale_thresholds=True)" in result.output
    assert "Traceback" not in result.output and not out.exists()


def test_rescaled_thresholds_are_printed_and_stored(tokens, tmp_path):
    out = tmp_path / "s.json"
    flags = ["--metric", "ce_base_rl", "--rescale-thresholds", "--n-boot", "5"]
    result = run(tokens, "--out", out, *flags)
    assert result.exit_code == 0, result.output
    frame = pl.read_parquet(tokens)
    js, ce = frame["js"].to_numpy(), np.sort(frame["ce_base_rl"].to_numpy())
    share = np.mean(js > 0.1)
    value = ce[ce.size - int((js > 0.1).sum()) - 1]
    assert f"js > 0.1 ({100 * share:.2f}% of tokens) → ce_base_rl > {value:.4g}" in result.output
    assert "Sparse but Critical (ce_base_rl)" in result.output
    assert "Decision-token takeover (ce_base_rl)" in result.output
    document = json.loads(out.read_text())
    stored = {row["threshold"]: row for row in document["core"]["rescaled"]}[0.1]
    assert stored["value"] == pytest.approx(float(value))
    assert stored["share_above"] == pytest.approx(share)
    assert document["core"]["rank_reordering"]["threshold"] == pytest.approx(float(value))


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--metric", "nope"], "missing column(s) 'nope'"),
        (["--label", "x"], "--label given 1 times but --compare only 0 times"),
        (["--compare", "missing.parquet"], "no such token table"),
        (["--recovery-at", "8"], "pass the results too (--cross-sample)"),
        (["--planning-words", "missing.txt"], "--planning-words 'missing.txt': cannot read it"),
        (["--cross-sample", "xs.parquet", "--reference", "runs/thinking.parquet"], "no such file"),
    ],
)
def test_analyze_bad_input_is_one_line_with_status_2(tokens, tmp_path, extra, message):
    result = run(tokens, "--out", tmp_path / "s.json", *extra)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_analyze_refuses_an_existing_output_without_overwrite(tokens, tmp_path):
    out = tmp_path / "summary.json"
    out.write_text("{}\n")
    result = run(tokens, "--out", out, "--n-boot", "5")
    assert result.exit_code == 2
    assert f"{out}: output exists; pass --overwrite" in result.output
    assert out.read_text() == "{}\n"
    result = run(tokens, "--out", out, "--n-boot", "5", "--overwrite")
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["n_tokens"] == 300


def test_the_cross_sample_flags_reach_the_report(tokens, tmp_path, monkeypatch):
    calls = []

    @dataclasses.dataclass(frozen=True)
    class Report:
        pass

    def report(results, recovery, **kwargs):
        calls.append({"recovery": recovery, **kwargs})
        return Report()

    summary_module = importlib.import_module("divscope.analyses.summary")
    monkeypatch.setattr(summary_module, "cross_sample_report", report)
    monkeypatch.setattr(formatting, "cross_sample_text", lambda report: "REPORT TEXT")
    xs = tmp_path / "xs.jsonl"
    xs.write_text(json.dumps({"prompt_id": "p0", "policy": "rl", "correct": True}) + "\n")
    thinking = tmp_path / "thinking.jsonl"
    thinking.write_text(json.dumps({"prompt_id": "p0", "correct": True}) + "\n")
    args = ["--cross-sample", xs, "--recovery-at", "8", "--difference", D1, "--difference", D2]
    for reference in (thinking, "rl"):
        out = tmp_path / f"{len(calls)}.json"
        result = run(tokens, "--out", out, *args, "--reference", reference, "--n-boot", "5")
        assert result.exit_code == 0, result.output
        assert "Cross-sampling\n--------------\nREPORT TEXT" in result.output
    from_file, label = calls
    assert from_file["reference"].to_dicts() == [{"prompt_id": "p0", "correct": True}]
    assert label["reference"] == "rl"
    assert label["recovery"].recovery_at == 8 and label["recovery"].n_boot == 5
    assert label["differences"] == (D1, D2)


def test_analyze_by_difficulty_with_graded_base_samples(tokens, tmp_path):
    graded = tmp_path / "graded.jsonl"
    # Base pass@1: p0 0/4 (hard), p1 2/4 (medium), p2 4/4 (easy); the rl rows are left out.
    rows = [
        {"prompt_id": f"p{p}", "sample_id": s, "model": model,
         "correct": model == "rl" or s < 2 * p}
        for p in range(3)
        for s in range(4)
        for model in ("base", "rl")
    ]  # fmt: skip
    graded.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "s.json"
    result = run(tokens, "--out", out, "--n-boot", "10", "--difficulty", graded)
    assert result.exit_code == 2
    assert "several models (base, rl)" in result.output and "--difficulty-model" in result.output
    flags = ["--difficulty", graded, "--difficulty-model", "base", "--n-boot", "10"]
    result = run(tokens, "--out", out, *flags)
    assert result.exit_code == 0, result.output
    # The breakdown is read on the core section's population, named in its heading.
    heading = "By difficulty (base pass@1 tertiles, js, rl trajectories)"
    assert heading in result.output
    assert "hard: 1 prompts (pass@1 0.00-0.00), 100 tokens" in result.output
    assert "easy - hard, share_above_0.1:" in result.output
    document = json.loads(out.read_text())
    sparsity = document["difficulty"]["sparsity"]
    assert [row["difficulty"] for row in sparsity] == ["hard", "medium", "easy"]
    frame = pl.read_parquet(tokens).filter(prompt_id="p2")
    assert sparsity[2]["share_above_0.1"] == pytest.approx((frame["js"] > 0.1).mean())
    assert document["difficulty"]["recovery"] is None


def test_analyze_by_difficulty_recovery_from_the_base_control(tokens, tmp_path):
    xs = tmp_path / "xs.jsonl"
    rows = [
        {"prompt_id": f"p{p}", "sample_id": s, "policy": policy, "budget": budget,
         "correct": s < level + p, "n_tokens": 20, "n_switches": sw, "n_effective": sw // 2}
        for p in range(3)
        for s in range(4)
        for policy, budget, level, sw in POLICIES
    ]  # fmt: skip
    xs.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "s.json"
    result = run(tokens, "--out", out, "--cross-sample", xs, "--difficulty", xs, "--n-boot", "10")
    assert result.exit_code == 0, result.output
    for level in ("hard", "medium", "easy"):
        assert f"Recovery, {level} prompts:" in result.output
    recovery = json.loads(out.read_text())["difficulty"]["recovery"]
    assert {(row["difficulty"], row["policy"]) for row in recovery} >= {("easy", "forward")}


def test_max_memory_bounds_the_analyses_and_leaves_the_numbers(tokens, tmp_path, monkeypatch):
    from divscope.analyses import _streaming

    limits = []
    value_limit = _streaming.value_limit
    # Record the value limit each out-of-core statistic runs under (the cap is applied inside).
    monkeypatch.setattr(
        _streaming, "value_limit", lambda: limits.append(value_limit()) or limits[-1]
    )
    plain = run(tokens, "--out", tmp_path / "plain.json", "--n-boot", "10")
    capped = run(
        tokens, "--out", tmp_path / "capped.json", "--n-boot", "10", "--max-memory", "8MiB"
    )
    assert plain.exit_code == 0 and capped.exit_code == 0, capped.output
    assert set(limits) == {_streaming.DEFAULT_VALUE_LIMIT, (8 << 20) // _streaming.BYTES_PER_VALUE}
    documents = [json.loads((tmp_path / f"{n}.json").read_text()) for n in ("plain", "capped")]
    for document in documents:  # the command lines differ (--out, --max-memory)
        assert document.pop("invocation")["command"] == "analyze"
    assert documents[0] == documents[1]
    bad = run(tokens, "--out", tmp_path / "bad.json", "--max-memory", "lots")
    assert bad.exit_code != 0 and "--max-memory 'lots'" in bad.output
