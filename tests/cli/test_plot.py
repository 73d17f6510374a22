"""`divscope plot`: writes what the inputs allow, names what it skipped, fails in one line."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest
from typer.testing import CliRunner

from divscope.cli import app
from divscope.testing import synthetic_results, synthetic_tokens

matplotlib.use("Agg")

runner = CliRunner()


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("plot")
    paths = {
        "tokens": root / "rl.parquet",
        "sft": root / "sft.parquet",
        "xs": root / "xs.parquet",
        "step10": root / "rl-step-10.parquet",
    }
    synthetic_tokens().write_parquet(paths["tokens"])
    synthetic_tokens(scale=0.2, seed=4).write_parquet(paths["sft"])
    synthetic_tokens(scale=0.1, seed=5).write_parquet(paths["step10"])
    synthetic_results().write_parquet(paths["xs"])
    return paths


def test_plot_writes_chosen_figures_and_says_what_it_skipped(tables, tmp_path):
    out = tmp_path / "figs"
    result = runner.invoke(
        app,
        [
            "plot", str(tables["tokens"]), "--out", str(out), "--format", "png,svg",
            "--figure", "lorenz", "--figure", "compare_sparsity", "--figure", "evolution",
            "--figure", "cross_sampling_curves",
            "--compare", str(tables["sft"]), "--label", "SFT", "--n-boot", "20",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "  lorenz\n" in result.output
    assert "evolution: skipped, needs --evolution" in result.output
    assert "cross_sampling_curves: skipped, needs --cross-sample" in result.output
    assert "Wrote 2 figures (2 skipped)" in result.output
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "compare_sparsity.png", "compare_sparsity.svg", "index.md", "lorenz.png", "lorenz.svg",
    ]  # fmt: skip


def test_plot_with_evolution_and_cross_sample(tables, tmp_path):
    out = tmp_path / "figs"
    result = runner.invoke(
        app,
        [
            "plot", str(tables["tokens"]), "-o", str(out), "--format", "png",
            "--figure", "evolution", "--figure", "takeover_knee",
            "--evolution", str(tables["step10"]), "--evolution", f"100={tables['tokens']}",
            "--cross-sample", str(tables["xs"]), "--n-boot", "20",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert {p.name for p in out.iterdir()} == {"evolution.png", "takeover_knee.png", "index.md"}


@pytest.mark.parametrize(
    "arguments,message",
    [
        (["--figure", "nope"], "unknown figure(s) 'nope'"),
        (["--format", "gif"], "unknown format(s) 'gif'"),
        (["--label", "x"], "--label given 1 times but --compare only 0 times"),
        (["--evolution", "rl.parquet"], "cannot tell the training step"),
    ],
)
def test_plot_bad_arguments_exit_2_with_one_line(tables, tmp_path, arguments, message):
    out = tmp_path / "figs"
    result = runner.invoke(app, ["plot", str(tables["tokens"]), "--out", str(out), *arguments])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
    assert not out.exists()


def test_plot_refuses_an_existing_output(tables, tmp_path):
    out = tmp_path / "figs"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    arguments = ["plot", str(tables["tokens"]), "--out", str(out), "--figure", "lorenz"]
    result = runner.invoke(app, arguments)
    assert result.exit_code == 2 and "pass --overwrite" in result.output
    assert runner.invoke(app, [*arguments, "--overwrite"]).exit_code == 0
    assert not (out / "keep.txt").exists()


def test_plot_missing_table_is_one_line(tmp_path):
    result = runner.invoke(app, ["plot", str(tmp_path / "none.parquet"), "--out", str(tmp_path)])
    assert result.exit_code == 2 and "no such token table" in result.output


def test_plot_draws_each_paper_on_its_metric_and_metric_overrides_both(tables, tmp_path):
    base = ["plot", str(tables["tokens"]), "--format", "png"]
    figures = ["--figure", "percentile_curve", "--figure", "lorenz"]
    result = runner.invoke(app, [*base, *figures, "--out", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    index = (tmp_path / "a" / "index.md").read_text()
    assert "), on `js`" in index and "), on `ce_base_rl`" in index
    result = runner.invoke(app, [*base, *figures, "-o", str(tmp_path / "b"), "--metric", "js_full"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "b" / "index.md").read_text().count("), on `js_full`") == 2
    arguments = ["--takeover-metric", "kl_base_rl", "--core-metric", "js_full"]
    result = runner.invoke(app, [*base, *figures, "-o", str(tmp_path / "c"), *arguments])
    index = (tmp_path / "c" / "index.md").read_text()
    assert "), on `js_full`" in index and "), on `kl_base_rl`" in index


def test_plot_refuses_js_thresholds_on_another_core_metric_unless_rescaled(tables, tmp_path):
    arguments = [
        "plot", str(tables["tokens"]), "--format", "png", "--figure", "rank_reordering",
        "--core-metric", "ce_base_rl",
    ]  # fmt: skip
    result = runner.invoke(app, [*arguments, "-o", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    assert "rank_reordering: skipped, its thresholds (0.1) are JS values in nats" in result.output
    assert "Wrote 0 figures (1 skipped)" in result.output
    result = runner.invoke(app, [*arguments, "-o", str(tmp_path / "b"), "--rescale-thresholds"])
    assert result.exit_code == 0, result.output
    assert "Wrote 1 figures (0 skipped)" in result.output
    assert "0.1 → " in (tmp_path / "b" / "index.md").read_text()


def test_plot_draws_the_side_by_side_figures_with_compare(tables, tmp_path):
    out = tmp_path / "figs"
    names = ["compare_positional_profile", "compare_topk_overlap", "compare_tail_promotion"]
    result = runner.invoke(
        app,
        [
            "plot", str(tables["tokens"]), "-o", str(out), "--format", "png",
            *[a for name in names for a in ("--figure", name)],
            "--compare", str(tables["sft"]), "--label", "SFT",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert {p.name for p in out.iterdir()} == {f"{name}.png" for name in names} | {"index.md"}


def test_plot_recovery_options_need_the_cross_sample_results(tables, tmp_path):
    out = tmp_path / "figs"
    arguments = ["plot", str(tables["tokens"]), "-o", str(out), "--reference", "thinking"]
    result = runner.invoke(app, arguments)
    assert result.exit_code == 2
    assert "give the cross-sample results with --cross-sample" in result.output
    assert "Traceback" not in result.output and not out.exists()


@pytest.mark.parametrize("sampled", [True, False])
def test_plot_of_an_evolution_directory_alone(tmp_path, sampled):
    """An evolution directory (what divscope watch writes) is the checkpoints and, without
    TOKENS, its last step's table the token table; sampled responses leave the overlap out."""
    evolution = tmp_path / "evolution"
    evolution.mkdir()
    for i, step in enumerate((30, 60, 90)):
        # sampled: each step its own responses (seeded lengths and tokens); else one set of
        # responses scored at every step, its divergence growing
        table = synthetic_tokens(n_prompts=2, seed=i if sampled else 0, scale=0.1 * (i + 1))
        table.write_parquet(evolution / f"rl-step-{step}.parquet")
    out = tmp_path / "figs"
    arguments = ["--evolution", str(evolution), "--figure", "evolution", "--figure", "lorenz"]
    result = runner.invoke(app, ["plot", "-o", str(out), "--format", "png", *arguments])
    assert result.exit_code == 0, result.output
    assert {p.name for p in out.iterdir()} == {"evolution.png", "lorenz.png", "index.md"}
    index = (out / "index.md").read_text()
    assert f"Token table `{evolution / 'rl-step-90.parquet'}` (the last training step's)" in index
    note = "The tables of step(s) 30, 60 score other responses than the final step's"
    assert (note in index) is sampled
    assert "step 30 on rl trajectories" in index
