"""plot, report and the `--population` option on a table of two sources: each figure is drawn on
its section's population and its caption names it."""

from __future__ import annotations

import io
import json

import matplotlib
import polars as pl
import pytest
from typer.testing import CliRunner

import divscope
from divscope import figures
from divscope.analyses.study import Study
from divscope.analyses.summary import Metrics
from divscope.cli import app
from divscope.figures.gallery import FIGURES, PlotInputs, figure_caption, save_figure
from divscope.params import Recovery
from divscope.testing import synthetic_tokens

matplotlib.use("Agg")


def two_sources() -> pl.DataFrame:
    """4 prompts × 4 base rollouts and 4 RL trajectories; the RL rows diverge five times less."""
    rows = synthetic_tokens(4, 4, 30, min_length=30, seed=0)
    other = synthetic_tokens(4, 4, 30, min_length=30, seed=1, scale=0.2)
    return pl.concat(
        [
            rows.with_columns(source=pl.lit("base")),
            other.with_columns(pl.col("sample_id") + 4, source=pl.lit("rl")),
        ]
    )


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = tmp_path_factory.mktemp("populations") / "tokens.parquet"
    two_sources().write_parquet(path)
    return path


def png(figure) -> bytes:
    return save_figure(figure, io.BytesIO(), format="png").getvalue()


def test_each_figure_is_drawn_on_its_sections_population():
    frame = two_sources()
    inputs = PlotInputs(frame)
    base, rl = (frame.filter(source=s) for s in ("base", "rl"))
    lorenz = png(FIGURES["lorenz"].draw(inputs))
    assert lorenz == png(figures.lorenz(base, metric="ce_base_rl"))
    assert lorenz != png(figures.lorenz(frame, metric="ce_base_rl"))
    curve = png(FIGURES["percentile_curve"].draw(inputs))
    assert curve == png(figures.percentile_curve(rl, metric="js"))
    assert figure_caption(FIGURES["lorenz"], inputs).endswith(
        " On base rollouts: 16 responses, 480 tokens."
    )
    assert figure_caption(FIGURES["percentile_curve"], inputs).endswith(
        " On rl trajectories: 16 responses, 480 tokens."
    )
    # An override moves the figure to the other population and the caption says so.
    moved = PlotInputs(frame, metrics=Metrics(population=("takeover=rl",)))
    assert png(FIGURES["lorenz"].draw(moved)) == png(figures.lorenz(rl, metric="ce_base_rl"))
    assert figure_caption(FIGURES["lorenz"], moved).endswith(
        " On rl trajectories: 16 responses, 480 tokens (the paper uses base rollouts)."
    )


def test_the_comparison_figures_name_each_sides_trajectories():
    frame = two_sources()
    sft = frame.with_columns(pl.col("js") * 0.5)
    inputs = PlotInputs(frame, label="rl", compare={"sft": sft})
    assert inputs.tables["rl"].equals(frame.filter(source="rl"))
    assert inputs.tables["sft"].equals(sft.filter(source="rl"))
    assert figure_caption(FIGURES["compare_sparsity"], inputs).endswith(
        " rl on rl trajectories: 16 responses, 480 tokens; sft on rl trajectories: 16 "
        "responses, 480 tokens."
    )


def test_plot_names_each_sections_population_in_the_index(table, tmp_path):
    out = tmp_path / "figures"
    divscope.plot(table, out, names=["lorenz", "percentile_curve"], formats=["png"])
    index = (out / "index.md").read_text()
    drawn = "The figures of the token table are drawn on"
    assert f"{drawn} rl trajectories: 16 responses, 480 tokens." in index
    assert f"{drawn} base rollouts: 16 responses, 480 tokens." in index
    assert index.count(drawn) == 2  # RAST's figures read only cross-sample results
    assert "On base rollouts: 16 responses, 480 tokens." in index  # lorenz's caption


def test_report_names_each_sections_population(table, tmp_path):
    out = tmp_path / "report.html"
    metrics = Metrics(population=("rast=base",))
    divscope.report(Study(table), out, metrics, Recovery(n_boot=20), responses=2, progress=False)
    html = out.read_text("utf-8")
    assert '<p class="population">On base rollouts: 16 responses, 480 tokens.</p>' in html
    assert '<p class="population">On rl trajectories: 16 responses, 480 tokens.</p>' in html
    assert "Population: on base rollouts; the paper uses rl trajectories." in html
    assert "(takeover): " in html and "On base rollouts: 16 responses, 480 tokens." in html


def test_cli_population_overrides_the_takeover_section(table, tmp_path):
    out = tmp_path / "summary.json"
    args = ["analyze", str(table), "--out", str(out), "--n-boot", "10"]
    result = CliRunner().invoke(app, [*args, "--population", "takeover=rl"])
    assert result.exit_code == 0, result.output
    assert "note: on rl trajectories; the paper uses base rollouts" in result.output
    document = json.loads(out.read_text())
    assert document["takeover"]["population"]["sources"] == ["rl"]
    assert document["takeover"]["population"]["n_responses"] == 16
    expected = divscope.analyses.lorenz(two_sources().filter(source="rl"), "ce_base_rl").gini
    assert document["takeover"]["lorenz"]["gini"] == pytest.approx(expected, rel=1e-12)
    for bad, message in [
        ("takeover=sft", "its sources: 'base', 'rl'"),
        ("knee=rl", "unknown section 'knee'"),
    ]:
        result = CliRunner().invoke(app, [*args, "--overwrite", "--population", bad])
        assert result.exit_code == 2 and message in result.output, result.output
    result = CliRunner().invoke(app, ["plot", "--help"])
    assert "--population" in result.output


def test_the_evolution_checkpoints_are_read_on_the_core_populations_trajectories():
    frame = two_sources()
    steps = {10: frame.with_columns(pl.col("js") * 0.1), 20: frame.drop("source")}
    inputs = PlotInputs(frame, evolution=steps)
    assert inputs.checkpoints[10].equals(steps[10].filter(source="rl"))
    assert inputs.checkpoints[20].equals(steps[20])  # no source: every trajectory, said
    caption = figure_caption(FIGURES["evolution"], inputs)
    assert "step 10 on rl trajectories: 16 responses, 480 tokens;" in caption
    assert "step 20 on all trajectories (no source column: populations unknown): 32 responses" in (
        caption
    )
