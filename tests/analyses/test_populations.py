"""Each paper's section on its own population: core and RAST on RL trajectories, takeover on base
rollouts, `--population` overrides, and what a table without that population says."""

from __future__ import annotations

import json

import polars as pl
import pyarrow.parquet as pq
import pytest

import divscope
from divscope import analyses
from divscope.analyses import Metrics, summary, to_jsonable
from divscope.analyses.populations import (
    PAPER_POPULATIONS,
    companion_population,
    parse_populations,
    population,
)
from divscope.errors import DivscopeError
from divscope.formatting import digest
from divscope.params import Recovery
from divscope.testing import synthetic_tokens

N_BOOT = 30


def two_sources(base: str = "base", rl: str = "rl") -> pl.DataFrame:
    """3 prompts × 4 base rollouts and 4 RL trajectories of 30 tokens; the RL rows diverge
    five times less (`scale`) and are drawn from another seed, so every statistic differs."""
    rows = synthetic_tokens(3, 4, 30, min_length=30, seed=0)
    other = synthetic_tokens(3, 4, 30, min_length=30, seed=1, scale=0.2)
    other = other.with_columns(pl.col("sample_id") + 4)
    return pl.concat(
        [
            rows.with_columns(source=pl.lit(base)),
            other.with_columns(source=pl.lit(rl)),
        ]
    ).select("prompt_id", "sample_id", "source", pl.exclude("prompt_id", "sample_id", "source"))


def only(frame: pl.DataFrame, *values: str) -> pl.DataFrame:
    return frame.filter(pl.col("source").is_in(values))


def same(a, b) -> bool:
    return to_jsonable(a) == to_jsonable(b)


def test_each_section_is_computed_on_its_papers_population():
    frame = two_sources()
    result = summary(frame, recovery=Recovery(n_boot=N_BOOT))
    rl, base = only(frame, "rl"), only(frame, "base")
    assert result.core.sparsity == analyses.sparsity(rl, "js", thresholds=(1e-4, 1e-3, 1e-2))
    assert result.core.sparsity != analyses.sparsity(frame, "js", thresholds=(1e-4, 1e-3, 1e-2))
    assert result.core.positional_profile.equals(analyses.positional_profile(rl, "js"))
    assert result.takeover.lorenz.gini == analyses.lorenz(base, "ce_base_rl").gini
    assert result.takeover.lorenz.gini != analyses.lorenz(frame, "ce_base_rl").gini
    failure = analyses.failure_auroc(base, "ce_base_rl", top_n=100, n_boot=N_BOOT)
    assert result.takeover.failure_auroc == failure
    assert same(result.takeover.planning_enrichment, analyses.planning_enrichment(
        base, "ce_base_rl", top_share=0.01))  # fmt: skip
    assert result.rast.path_coverage == analyses.path_coverage(rl, n_boot=N_BOOT)
    assert result.rast.path_coverage != analyses.path_coverage(base, n_boot=N_BOOT)
    # The table's sizes stay the whole table's; each section counts what it read.
    assert (result.n_responses, result.n_tokens) == (24, 720)
    for section, role in PAPER_POPULATIONS.items():
        used = getattr(result, section).population
        counts = (used.wanted, used.sources, used.n_responses, used.n_tokens)
        assert counts == (role, (role,), 12, 360)
        assert used.note is None


def test_population_overrides_a_section():
    frame = two_sources()
    metrics = Metrics(population=("takeover=rl", "core=all"))
    result = summary(frame, metrics, Recovery(n_boot=N_BOOT))
    assert result.takeover.lorenz.gini == analyses.lorenz(only(frame, "rl"), "ce_base_rl").gini
    assert result.core.sparsity == analyses.sparsity(frame, "js", thresholds=(1e-4, 1e-3, 1e-2))
    assert result.takeover.population.note == "on rl trajectories; the paper uses base rollouts"
    assert result.core.population.description == "all trajectories (base, rl)"
    assert result.core.population.note == (
        "on all 24 responses (base, rl); the paper uses rl trajectories"
    )
    assert result.core.population.note.endswith("the paper uses rl trajectories")
    assert result.rast.population.note is None  # not overridden


def test_sources_named_by_the_metadata_take_their_roles():
    frame = two_sources("Qwen2.5-Math-7B", "Oat-Zero-7B")
    roles = analyses.SourceRoles({"Qwen2.5-Math-7B": "base", "Oat-Zero-7B": "rl"})
    result = summary(frame, recovery=Recovery(n_boot=N_BOOT), roles=roles)
    base = only(frame, "Qwen2.5-Math-7B")
    assert result.takeover.lorenz.gini == analyses.lorenz(base, "ce_base_rl").gini
    assert result.takeover.population.description == "base rollouts (Qwen2.5-Math-7B)"
    # A literal source value as the population.
    metrics = Metrics(population=("core=Qwen2.5-Math-7B",))
    core = summary(frame, metrics, Recovery(n_boot=N_BOOT), roles=roles).core
    assert core.sparsity == analyses.sparsity(base, "js", thresholds=(1e-4, 1e-3, 1e-2))
    assert core.population.note == (
        "on base rollouts (Qwen2.5-Math-7B); the paper uses rl trajectories"
    )


def test_an_absent_population_is_computed_on_what_is_there_and_said():
    rl_only = only(two_sources(), "rl")
    result = summary(rl_only, recovery=Recovery(n_boot=N_BOOT))
    assert result.takeover.lorenz.gini == analyses.lorenz(rl_only, "ce_base_rl").gini
    assert result.takeover.population.note == "on rl trajectories; the paper uses base rollouts"
    assert result.takeover.population.n_responses == 12
    assert result.core.population.note is None
    text = digest(result, source="rl.parquet")
    assert "note: on rl trajectories; the paper uses base rollouts" in text
    document = result.to_dict()
    assert document["takeover"]["population"]["note"] == (
        "on rl trajectories; the paper uses base rollouts"
    )
    assert document["core"]["population"]["n_responses"] == 12


def test_a_table_without_source_is_read_whole_and_says_so():
    frame = two_sources().drop("source")
    result = summary(frame, recovery=Recovery(n_boot=N_BOOT))
    assert result.takeover.lorenz.gini == analyses.lorenz(frame, "ce_base_rl").gini
    for section in ("core", "takeover", "rast"):
        used = getattr(result, section).population
        assert used.sources == ()
        assert used.n_responses == 24
        assert used.description == "all trajectories (no source column: populations unknown)"
    assert result.takeover.population.note == (
        "on all 24 responses (no source column: populations unknown); the paper uses base rollouts"
    )
    text = digest(result, source="old.parquet")
    assert text.count("Population: all trajectories (no source column") == 3


def test_an_override_naming_what_is_absent_is_refused_with_the_sources_present():
    frame = two_sources()
    with pytest.raises(DivscopeError, match=r"takeover=sft.*its sources: 'base', 'rl'"):
        summary(frame, Metrics(population=("takeover=sft",)), Recovery(n_boot=N_BOOT))
    with pytest.raises(DivscopeError, match=r"core=base.*its sources: none \(no source column\)"):
        population(frame.drop("source"), "core", "base")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("takeover", "expected SECTION=SOURCE"),
        ("planning=base", "unknown section 'planning'; choose from core, takeover, rast"),
        ("core=", "expected SECTION=SOURCE"),
    ],
)
def test_a_malformed_population_is_refused(spec, message):
    with pytest.raises(DivscopeError, match=message):
        Metrics(population=(spec,))
    with pytest.raises(DivscopeError, match="given twice"):
        parse_populations(["core=rl", "core=base"])


def test_the_comparison_states_which_trajectories_each_side_uses():
    frame = two_sources()
    # The SFT table scores the same trajectories with another tuned model.
    sft = frame.with_columns(pl.col("js") * 0.5)
    result = summary(frame, recovery=Recovery(n_boot=N_BOOT), compare_with={"sft": sft.lazy()})
    sides = result.core.comparison_populations
    assert list(sides) == ["main", "sft"]
    assert sides["main"].sources == sides["sft"].sources == ("rl",)
    assert sides["sft"].n_responses == 12
    expected = analyses.compare(
        {"main": only(frame, "rl"), "sft": only(sft, "rl")}, "js", thresholds=(1e-4, 1e-3, 1e-2)
    )
    assert result.core.comparison.equals(expected)
    text = digest(result, source="rl.parquet")
    assert "Comparison, sft: on rl trajectories: 12 responses, 360 tokens" in text
    assert to_jsonable(result)["core"]["comparison_populations"]["sft"]["sources"] == ["rl"]


def test_a_compared_table_without_the_main_trajectories_uses_its_own_tuned_model():
    frame = two_sources()
    main = population(frame, "core")[1]
    sft = two_sources(rl="sft").drop("source")
    rows, used = companion_population(sft, "core", main)
    assert rows.height == sft.height
    assert used.note.startswith("on all 24 responses (no source column")


def test_difficulty_is_read_on_the_core_population():
    frame = two_sources()
    graded = only(frame, "base").group_by("prompt_id", "sample_id").agg(pl.col("correct").first())
    tertiles = analyses.difficulty_tertiles(graded)
    result = summary(frame, recovery=Recovery(n_boot=N_BOOT), difficulty=tertiles)
    by_hand = analyses.by_difficulty(only(frame, "rl"), tertiles, recovery=Recovery(n_boot=N_BOOT))
    assert result.difficulty.sparsity.equals(by_hand.sparsity)
    assert "By difficulty (base pass@1 tertiles, js, rl trajectories)" in digest(result, source="x")


def write_with_sources(frame: pl.DataFrame, path, sources: dict) -> None:
    """A token table as `divscope score` writes one: its `divscope` metadata names the roles."""
    table = frame.to_arrow()
    metadata = {b"divscope": json.dumps({"sources": sources}).encode()}
    pq.write_table(table.replace_schema_metadata(metadata), path)


def test_analyze_reads_the_roles_from_the_metadata(tmp_path):
    frame = two_sources("Qwen2.5-Math-7B", "Oat-Zero-7B")
    path = tmp_path / "tokens.parquet"
    write_with_sources(frame, path, {"Qwen2.5-Math-7B": "base", "Oat-Zero-7B": "rl"})
    result = divscope.analyze(path, tmp_path / "summary.json", recovery=Recovery(n_boot=N_BOOT))
    base = only(frame, "Qwen2.5-Math-7B")
    assert result.takeover.lorenz.gini == analyses.lorenz(base, "ce_base_rl").gini
    document = json.loads((tmp_path / "summary.json").read_text())
    assert document["takeover"]["population"]["sources"] == ["Qwen2.5-Math-7B"]
    assert document["rast"]["population"]["description"] == "rl trajectories (Oat-Zero-7B)"
