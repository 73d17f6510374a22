"""`divscope quickstart --fast` end to end on the committed lab: every promised artifact exists and
holds something, the headline is printed, and a second run skips every stage.

The two runs take about 55 s on 2 idle cores (about 95 s with the cores shared by another
job): an end-to-end test (marker `e2e`), out of the default tier; CI runs it once with `-m e2e`.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from divscope.cli import app
from divscope.io import read_table, read_token_table
from divscope.lab_study import QuickstartConfig

LAB = Path(__file__).parents[2] / "fixtures" / "lab"
pytestmark = pytest.mark.e2e
STAGES = 13
HEADLINE = (
    "sparsity (core paper, on rl trajectories",
    "concentration (takeover paper, on base rollouts",
    "failure AUROC (takeover paper, ",
    "gated takeover over calibration rates 0.01, 0.02, 0.05, 0.1: ",
    "forward cross-sampling over switch budgets: ",
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The first run and the second (resumed) run of `quickstart --fast`, and the output."""
    out = tmp_path_factory.mktemp("quickstart") / "study"
    command = ["quickstart", "--fast", "--out", str(out), "--lab", str(LAB)]
    runner = CliRunner()
    first = runner.invoke(app, command)
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, command)
    assert second.exit_code == 0, second.output
    return first, second, out


class Page(HTMLParser):
    """The tags of a page, and its embedded images."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.images = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.images += tag == "img" and dict(attrs).get("src", "").startswith("data:image/png")


def test_progress_per_stage_and_the_headline_are_printed(runs):
    first, _, out = runs
    for i in range(1, STAGES + 1):
        assert f"stage {i}/{STAGES} " in first.stderr
    assert f"stage {STAGES}/{STAGES} report: done in " in first.stderr
    assert f"divscope quickstart: {STAGES} stages run in " in first.stdout
    for line in HEADLINE:
        assert line in first.stdout
    assert "knee at budget " in first.stdout  # forward's curve has a knee on the lab
    assert "knee at r = " in first.stdout  # and so has gated's over the calibration rates
    assert f"Open {out / 'report.html'} in a browser." in first.stdout


def test_a_second_run_skips_every_stage_and_prints_the_same_headline(runs):
    first, second, _ = runs
    assert second.stderr.count("done before with the same settings, skipped") == STAGES
    assert f"0 stages run in 0 s, {STAGES} done before and skipped" in second.stdout
    headline = [line for line in first.stdout.splitlines() if line.startswith(HEADLINE, 2)]
    assert len(headline) == len(HEADLINE)
    assert all(line in second.stdout for line in headline)


def test_every_table_has_rows(runs):
    _, _, out = runs
    fast = QuickstartConfig.fast()
    responses = fast.eval_prompts * fast.samples
    for model in ("base", "rl", "sft"):
        graded = read_table(out / "trajectories" / f"{model}.parquet")
        assert graded.height == responses and graded["correct"].null_count() == 0
    both = read_table(out / "trajectories" / "base-and-rl.parquet")
    assert both.height == 2 * responses and both.select("prompt_id", "sample_id").is_unique().all()
    tables = [out / "tokens" / "rl.parquet", out / "tokens" / "sft.parquet"]
    tables += sorted((out / "tokens" / "evolution").glob("rl-step-*.parquet"))
    assert len(tables) == 2 + 5  # four checkpoints and the final model
    for table in tables:
        assert read_token_table(table).height > 0, table
    results = read_table(out / "cross-sample.parquet")
    policies = set(results["policy"])
    assert {"base", "rl", "forward", "reverse", "random", "rl-replace", "gated"} <= policies
    assert results["correct"].null_count() == 0
    assert set(results.filter(pl.col("policy") == "forward")["budget"]) == set(fast.budgets)
    gates = json.loads((out / "gates.json").read_text())
    assert gates["gates"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_tokens"] > 0 and summary["cross_sample"] is not None
    assert summary["core"]["comparison"]  # RL against the SFT control
    assert (out / "summary.txt").read_text().count("\n") > 10


def test_every_figure_has_content(runs):
    _, _, out = runs
    figures = sorted((out / "figures").glob("*.png"))
    assert len(figures) >= 20
    for figure in figures:
        data = figure.read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5_000, figure
    index = (out / "figures" / "index.md").read_text()
    assert all(figure.name in index for figure in figures)
    assert "evolution.png" in index and "takeover_knee.png" in index


def test_the_report_parses_as_html_with_every_figure(runs):
    _, _, out = runs
    html = (out / "report.html").read_text("utf-8")
    page = Page()
    page.feed(html)
    page.close()
    assert html.startswith("<!DOCTYPE html>")
    assert {"html", "head", "body", "table", "script"} <= set(page.tags)
    assert page.images == len(list((out / "figures").glob("*.png")))
