"""`divscope report` end to end: synthetic tables, the lab's scored trajectories, the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import divscope
from divscope.analyses.study import Study
from divscope.analyses.summary import Metrics
from divscope.cli import app
from divscope.errors import DivscopeError
from divscope.params import ModelPair, Output, Recovery
from divscope.reporting import page
from divscope.reporting.report import ReportSummary
from divscope.testing import synthetic_results, synthetic_tokens

LAB = Path(__file__).parents[2] / "fixtures" / "lab"


def embedded(html: str) -> dict:
    match = re.search(r'<script type="application/json" id="divscope-data">(.*?)</script>', html,
                      re.S)  # fmt: skip
    return json.loads(match.group(1))


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("report")
    paths = {name: root / f"{name}.parquet" for name in ("tokens", "sft", "xs")}
    synthetic_tokens(n_prompts=6, n_samples=4, length=40).write_parquet(paths["tokens"])
    synthetic_tokens(n_prompts=6, n_samples=4, length=40, scale=0.2, seed=4).write_parquet(
        paths["sft"]
    )
    synthetic_results().write_parquet(paths["xs"])
    return paths


def test_report_writes_one_self_contained_page(tables, tmp_path, capsys):
    out = tmp_path / "report.html"
    study = Study(tables["tokens"], cross_sample=tables["xs"], compare={"sft": tables["sft"]})
    result = divscope.report(study, out, recovery=Recovery(n_boot=20), responses=5)
    assert isinstance(result, ReportSummary)
    html = out.read_text("utf-8")
    assert result.out == out and result.bytes == len(html.encode("utf-8"))
    assert result.n_responses == 5
    assert "lorenz" in result.figures and "compare_sparsity" in result.figures
    assert "cross_sampling_curves" in result.figures
    assert "evolution" in result.skipped
    assert html.count('<img src="data:image/png;base64,') == len(result.figures)
    assert "http://" not in html and "https://" not in html
    assert 'id="cross-sampling"' in html and 'id="summary"' in html
    doc = embedded(html)
    assert len(doc["responses"]) == 5 and doc["included"]["responses_total"] == 24
    # No metadata, no tokenizer: top-1 tokens are ids, and the header says why.
    assert doc["strings"][doc["responses"][0]["top1_rl"][0]].startswith("id ")
    assert "Top-1 tokens are shown as ids" in html
    assert "note: figure lorenz" in capsys.readouterr().err


def test_existing_output_is_refused_without_overwrite(tables, tmp_path):
    out = tmp_path / "report.html"
    out.write_text("keep me")
    few = Recovery(n_boot=10)
    with pytest.raises(DivscopeError, match="--overwrite"):
        divscope.report(tables["tokens"], out, recovery=few, responses=2, progress=False)
    assert out.read_text() == "keep me"
    divscope.report(tables["tokens"], Output(out, overwrite=True), recovery=few, responses=2,
                    progress=False)  # fmt: skip
    assert out.read_text("utf-8").startswith("<!DOCTYPE html>")
    assert not list(tmp_path.glob(".report.html.tmp-*"))


def test_cli_report(tables, tmp_path):
    out = tmp_path / "cli.html"
    runner = CliRunner()
    args = ["report", str(tables["tokens"]), "--out", str(out), "--responses", "3",
            "--evolution", f"10={tables['sft']}", "--evolution", f"20={tables['tokens']}",
            "--n-boot", "10", "--seed", "2"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "3 responses in the token viewer" in result.output
    html = out.read_text("utf-8")
    assert len(embedded(html)["responses"]) == 3
    assert 'id="figure-evolution"' in html and "step 10" in html
    again = runner.invoke(app, args)
    assert again.exit_code == 2 and "--overwrite" in again.output


def test_report_and_analyze_agree_on_one_study(tables, tmp_path):
    """The page's summary and cross-sampling tables are `analyze`'s for the same study, metrics
    and recovery; the command line's --reference, --recovery-at and --metric reach them."""
    thinking = tmp_path / "thinking.parquet"
    synthetic_results().filter(policy="rl").write_parquet(thinking)
    study = Study(tables["tokens"], cross_sample=tables["xs"], reference=thinking)
    metrics = Metrics("kl_rl_base", rescale_thresholds=True)
    recovery = Recovery(recovery_at=2, n_boot=20, seed=3)
    summary = divscope.analyze(study, tmp_path / "summary.json", metrics, recovery)
    divscope.report(study, tmp_path / "lib.html", metrics, recovery, responses=2, progress=False)
    html = (tmp_path / "lib.html").read_text("utf-8")
    assert page.summary_html(summary) in html and page.cross_sampling_html(summary) in html
    assert summary.core.metric == summary.takeover.metric == "kl_rl_base"
    default = divscope.analyze(
        Study(tables["tokens"], cross_sample=tables["xs"]), tmp_path / "default.json",
        recovery=Recovery(n_boot=20, seed=3),
    )  # fmt: skip
    assert page.cross_sampling_html(default) not in html
    args = ["report", tables["tokens"], "--out", tmp_path / "cli.html", "--cross-sample",
            tables["xs"], "--reference", thinking, "--recovery-at", "2", "--metric",
            "kl_rl_base", "--rescale-thresholds", "--n-boot", "20", "--seed", "3",
            "--responses", "2"]  # fmt: skip
    result = CliRunner().invoke(app, [str(arg) for arg in args])
    assert result.exit_code == 0, result.output
    created = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC")
    cli = (tmp_path / "cli.html").read_text("utf-8")
    assert created.sub("", cli) == created.sub("", html)


def test_lab_report_decodes_the_top1_tokens(tmp_path):
    trajectories = tmp_path / "six.jsonl"
    lines = (LAB / "trajectories.jsonl").read_text().splitlines()[:6]
    trajectories.write_text("\n".join(lines) + "\n")
    tokens = tmp_path / "tokens.parquet"
    divscope.score(trajectories, ModelPair(str(LAB / "base"), str(LAB / "rl")), tokens,
                   progress=False)  # fmt: skip
    out = tmp_path / "lab.html"
    result = divscope.report(tokens, out, recovery=Recovery(n_boot=20), responses=4,
                             progress=False)  # fmt: skip
    html = out.read_text("utf-8")
    doc = embedded(html)
    assert result.n_responses == len(doc["responses"]) == 4
    texts = {doc["strings"][i] for r in doc["responses"] for i in r["top1_rl"]}
    assert texts and not any(t.startswith("id ") for t in texts)
    assert "Top-1 tokens are shown as ids" not in html


def test_report_of_parts_is_the_report_of_the_table_in_memory(lab_head_tokens_path, tmp_path):
    """`report` scans the table lazily: of the lab's table as one file or as parts that cut
    responses in two, the same page (but for the path and the time); its summary and token
    viewer are those computed from the table in memory."""
    from divscope.analyses.summary import summary
    from divscope.io import read_token_table
    from divscope.reporting import data
    from divscope.reporting.report import decoder
    from tests.figures.test_out_of_core import write_parts

    parts = write_parts(lab_head_tokens_path, tmp_path / "tokens")
    recovery = Recovery(n_boot=20)
    pages = {}
    for path in (lab_head_tokens_path, parts):
        out = tmp_path / f"{path.name}.html"
        divscope.report(path, out, recovery=recovery, responses=4, progress=False)
        html = out.read_text("utf-8").replace(str(path), "PATH")
        pages[path] = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", "", html)
    assert pages[lab_head_tokens_path] == pages[parts]
    frame = read_token_table(lab_head_tokens_path)
    assert page.summary_html(summary(frame, recovery=recovery, label="tokens")) in pages[parts]
    decode, _ = decoder(lab_head_tokens_path, None)
    document = data.viewer_document(frame, responses=4, seed=recovery.seed, decode=decode)
    assert embedded(pages[parts]) == json.loads(data.embed_json(document))
