"""Everything divscope computes from cross-sample results, in one report
(`divscope analyze --cross-sample`).

`cross_sample_report` runs each analysis of cross-sample results that the data allow and notes
why the others were skipped; `divscope.formatting.cross_sample_text` prints it as compact
tables, and `divscope.analyses.summary.to_jsonable` turns the report into JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from divscope.analyses._frames import Frame, checked_lazy
from divscope.analyses.alignment import DeltaAlignment, delta_alignment
from divscope.analyses.controls import Selector
from divscope.analyses.cross_sample import (
    REFERENCE,
    Reference,
    TakeoverKnee,
    cross_sampling_curve,
    majority_at_k_curve,
    pass_at_k_curve,
    recovery_reference,
    setting_differences,
    takeover_knee,
)
from divscope.analyses.flips import base_flips
from divscope.analyses.switches import (
    PAIR_COLUMNS,
    map_agreement,
    switch_pairs,
    takeover_planning,
    threshold_curves,
)
from divscope.analyses.tokens import PLANNING_WORDS
from divscope.errors import DivscopeError
from divscope.io import upgrade_effective
from divscope.params import Recovery
from divscope.schema import SETTING_COLUMNS

TAKEOVER_POLICY = "gated"
"""The policy of the takeover paper's knee and planning enrichment."""
TAKEOVER_POLICIES: tuple[str, ...] = ("gated", "entropy")
"""The takeover paper's policies: the rows whose recovery `takeover_recovery` labels."""


@dataclass(frozen=True)
class CrossSampleReport:
    """The analyses of one set of cross-sample results; a part is None where the data do not
    allow it, with the reason in `notes`."""

    recovery_at: int | None
    """None: recovery on mean@n; k: on pass@k."""
    reference: str
    """What the recovery's upper bound is."""
    curve: pl.DataFrame
    """`cross_sampling_curve`: one row per setting, the matched controls per sampling."""
    curve_per_benchmark: pl.DataFrame | None
    """`cross_sampling_curve(per_benchmark=True)`; None with a single benchmark."""
    pass_at_k: pl.DataFrame | None
    """`pass_at_k_curve` per setting and k, with `majority_at_k_curve`'s columns when the
    results hold the responses' text."""
    differences: pl.DataFrame | None
    """`setting_differences` of the requested pairs; None when none was requested."""
    flips: pl.DataFrame | None
    """`base_flips`: each setting against its matched base control."""
    threshold_sensitivity: pl.DataFrame | None
    """`threshold_curves` of the settings with an `eps`: `threshold_sensitivity` with the
    recovery of each point (one curve over the budgets per eps)."""
    map_agreement: pl.DataFrame | None
    """`map_agreement`: the share of switch positions still above eps online, per setting
    (results with `switch_js`)."""
    switch_pairs: pl.DataFrame | None
    """`switch_pairs`: the most frequent (primary, emitted) token pairs per setting."""
    takeover_planning: pl.DataFrame | None
    """`takeover_planning` of the `gated` policy."""
    knee: TakeoverKnee | None
    """`takeover_knee` of the `gated` policy."""
    takeover_recovery: str | None
    """What the recovery of the takeover rows (`TAKEOVER_POLICIES`) and of the knee is
    measured against, and which average is their headline; None without takeover rows."""
    delta_alignment: DeltaAlignment | None
    """`delta_alignment` of the responses decoded with `--delta-alignment`."""
    notes: tuple[str, ...]
    """Why a part was skipped, and how results of an earlier version were read
    (`divscope.io.upgrade_effective`)."""


def cross_sample_report(
    results: Frame,
    recovery: Recovery = Recovery(),  # noqa: B008 (frozen, hashable)
    *,
    reference: Reference = None,
    differences: Iterable[str | tuple[Selector, Selector]] = (),
    tokens: Frame | None = None,
    lexicon: Iterable[str] = PLANNING_WORDS,
) -> CrossSampleReport:
    """Run every analysis of cross-sample results that the data allow.

    Args:
        results: cross-sample results (docs/contracts.md, "Cross-sample results").
        recovery: the measure (mean@n, or pass@k at `recovery_at`), the base and RL
            controls, and the bootstrap of every interval.
        reference: the recovery's upper bound (`cross_sampling_curve`): None for the matched
            RL control, a policy label, or a third model's graded responses.
        differences: pairs of settings for `setting_differences` (e.g. `"policy=rl-replace,
            force_prefix=Alright - policy=base,force_prefix=Alright"`).
        tokens: a token table (the scored base rollouts) for the global planning share.
        lexicon: the planning words of `takeover_planning` (`Metrics.lexicon`).

    Returns:
        A `CrossSampleReport`.

    Raises:
        DivscopeError: what `cross_sampling_curve` and `setting_differences` raise (no graded
            responses, unmatched controls, an unknown reference or selector).

    >>> results = pl.DataFrame({"prompt_id": ["a", "a", "b", "b"] * 2,
    ...     "policy": ["base"] * 4 + ["rl"] * 4, "budget": [-1] * 8,
    ...     "correct": [False, True, False, False, True, True, True, False],
    ...     "n_tokens": [10] * 8, "n_switches": [0] * 8, "n_effective": [0] * 8})
    >>> report = cross_sample_report(results, Recovery(n_boot=20))
    >>> report.curve["accuracy"].to_list(), report.knee is None
    ([0.25, 0.75], True)
    """
    results, legacy = upgrade_effective(results)
    names = checked_lazy(results, [], what="cross_sample_report").collect_schema().names()
    recovery_at, base_policy, rl_policy = (
        recovery.recovery_at,
        recovery.base_policy,
        recovery.rl_policy,
    )
    bootstrap = {
        "n_boot": recovery.n_boot,
        "seed": recovery.seed,
        "confidence": recovery.confidence,
    }
    controls = {"base_policy": base_policy, "rl_policy": rl_policy}
    common = {"reference": reference, "recovery_at": recovery_at, **controls, **bootstrap}
    notes: list[str] = [] if legacy is None else [legacy]
    curve = cross_sampling_curve(results, **common)
    per_benchmark = None
    if "benchmark" in names:
        per_benchmark = cross_sampling_curve(results, per_benchmark=True, **common)
        if per_benchmark["benchmark"].n_unique() < 2:
            per_benchmark = None
    keys = ["policy", "budget", *(c for c in SETTING_COLUMNS if c in names)]

    def attempt(name: str, run: Callable[[], Any]) -> Any:
        try:
            return run()
        except DivscopeError as error:
            notes.append(f"{name} skipped: {error}")
            return None

    pass_at_k = attempt("pass@k", lambda: _pass_and_majority(results, keys, names, bootstrap))
    difference_pairs = list(differences)
    difference_table = (
        setting_differences(results, difference_pairs, recovery_at=recovery_at, **bootstrap)
        if difference_pairs
        else None
    )
    flips = None
    if "sample_id" in names:
        flips = base_flips(results, **controls)
        if flips is None:
            notes.append(f"flips skipped: no `{base_policy}` control in the results.")
    else:
        notes.append("flips skipped: the results have no `sample_id` column.")
    sensitivity = None
    if "eps" in names and _any(results, pl.col("eps").is_not_null()):
        sensitivity = threshold_curves(results, **common)
    agreement = None
    if {"eps", "switch_js"} <= set(names) and _any(
        results, pl.col("eps").is_not_null() & pl.col("switch_js").is_not_null()
    ):
        agreement = map_agreement(results, **bootstrap)
    pairs = None
    if all(c in names for c in PAIR_COLUMNS):
        pairs = switch_pairs(results)
        if pairs.is_empty():
            pairs = None
    else:
        notes.append(
            "switch pairs skipped: the results predate the switch columns "
            "(switch_primary_ids, switch_primary_tokens, switch_tokens)."
        )
    has_takeover = _any(results, pl.col("policy") == TAKEOVER_POLICY)
    takeover_recovery = None
    if _any(results, pl.col("policy").is_in(TAKEOVER_POLICIES)):
        takeover_recovery = _takeover_recovery(reference, "recovery_macro" in curve.columns)
    planning = knee = None
    if has_takeover and "switch_tokens" in names:
        planning = takeover_planning(results, tokens, policy=TAKEOVER_POLICY, lexicon=lexicon)
        if tokens is None:
            notes.append("takeover planning: no token table given, so no global share.")
    if has_takeover:
        knee = attempt(
            "takeover knee",
            lambda: takeover_knee(results, TAKEOVER_POLICY, **common),
        )
    alignment = None
    if "delta_cosine" in names and _any(results, pl.col("delta_cosine").is_not_null()):
        alignment = delta_alignment(results, **bootstrap)
    return CrossSampleReport(
        recovery_at=recovery_at,
        reference=_reference_text(reference, rl_policy),
        curve=curve,
        curve_per_benchmark=per_benchmark,
        pass_at_k=pass_at_k,
        differences=difference_table,
        flips=flips,
        threshold_sensitivity=sensitivity,
        map_agreement=agreement,
        switch_pairs=pairs,
        takeover_planning=planning,
        knee=knee,
        takeover_recovery=takeover_recovery,
        delta_alignment=alignment,
        notes=tuple(notes),
    )


def _any(results: Frame, condition: pl.Expr) -> bool:
    return bool(results.lazy().select(condition.any()).collect().item())


def _takeover_recovery(reference: Reference, macro: bool) -> str:
    """The label of the takeover rows' and the knee's recovery: against what, which average."""
    names = ", ".join(f"`{p}`" for p in TAKEOVER_POLICIES)
    average = (
        "headline: the per-benchmark average (the paper's: the curve's `*_macro` columns, the "
        "knee's `accuracy`/`recovery`); the average over prompts is labelled pooled"
        if macro
        else "averaged over prompts (a single benchmark)"
    )
    return f"Takeover rows ({names}) and knee: recovery {recovery_reference(reference)}; {average}."


def _reference_text(reference: Reference, rl_policy: str) -> str:
    if reference is None:
        return f"the matched `{rl_policy}` control"
    if isinstance(reference, str):
        return f"policy `{reference}`, matched like a control"
    return f"a third model's graded responses (row `{REFERENCE}`)"


def _pass_and_majority(
    results: Frame, keys: Sequence[str], names: Sequence[str], bootstrap: dict[str, Any]
) -> pl.DataFrame:
    """pass@k per setting and k, joined with majority@k when the responses' text is there."""
    table = pass_at_k_curve(results, by=keys, **bootstrap)
    if "response" not in names:
        return table
    majority = majority_at_k_curve(
        results, table["k"].unique().sort().to_list(), by=keys, **bootstrap
    )
    return table.join(majority.drop("n_prompts"), on=[*keys, "k"], how="left", nulls_equal=True)
