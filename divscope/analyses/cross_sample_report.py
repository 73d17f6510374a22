"""Everything divscope computes from cross-sample results, in one report (`divscope analyze --xs`).

`cross_sample_report` runs each analysis of cross-sample results that the data allow and notes
why the others were skipped; `CrossSampleReport.to_text` prints compact tables, and
`divscope.analyses.summary.to_jsonable` turns the report into JSON. `curve_text` is the table of
a `cross_sampling_curve` that both the report and `divscope cross-sample` print.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from divscope.analyses._frames import Frame, checked_lazy
from divscope.analyses.alignment import DeltaAlignment, delta_alignment
from divscope.analyses.controls import Selector
from divscope.analyses.cross_sampling import (
    REFERENCE,
    Reference,
    TakeoverKnee,
    cross_sampling_curve,
    majority_at_k_curve,
    pass_at_k_curve,
    setting_differences,
    setting_labels,
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
from divscope.errors import DivscopeError
from divscope.estimators import Interval
from divscope.schema import SETTING_COLUMNS

TAKEOVER_POLICY = "gated"
"""The policy of the takeover paper's knee and planning enrichment."""
PAIRS_SHOWN = 5
"""Token pairs per setting that `to_text` prints (the report holds 20)."""


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
    delta_alignment: DeltaAlignment | None
    """`delta_alignment` of the responses decoded with `--delta-alignment`."""
    notes: tuple[str, ...]
    """Why a part was skipped."""

    def to_text(self) -> str:
        """The report as compact text tables, one section per part present."""
        measure = "mean@n" if self.recovery_at is None else f"pass@{self.recovery_at}"
        sections = [
            f"Cross-sample results: recovery = (P - P_base) / (P_ref - P_base) on {measure}, "
            f"reference: {self.reference}.\n" + curve_text(self.curve)
        ]
        if self.curve_per_benchmark is not None:
            sections.append("Per benchmark:\n" + curve_text(self.curve_per_benchmark))
        if self.pass_at_k is not None:
            sections.append("pass@k and majority@k:\n" + _pass_at_k_text(self.pass_at_k))
        if self.differences is not None:
            sections.append(
                f"Differences ({measure}, points):\n" + _differences_text(self.differences)
            )
        if self.flips is not None:
            sections.append("Flips against the matched base control:\n" + _flips_text(self.flips))
        if self.threshold_sensitivity is not None:
            sections.append(
                "Threshold sensitivity (effective: coupled draw / independent draw):\n"
                + _sensitivity_text(self.threshold_sensitivity)
            )
        if self.map_agreement is not None:
            sections.append(
                "Map agreement (switch positions whose online JS exceeds eps):\n"
                + _agreement_text(self.map_agreement)
            )
        if self.switch_pairs is not None:
            sections.append(
                "Switched token pairs (primary -> emitted):\n" + _pairs_text(self.switch_pairs)
            )
        if self.takeover_planning is not None:
            sections.append(
                "Planning words in the takeover set:\n" + _planning_text(self.takeover_planning)
            )
        if self.knee is not None:
            sections.append(_knee_text(self.knee))
        if self.delta_alignment is not None:
            sections.append(
                "Delta alignment (cosine of the small and large pairs' logit deltas):\n"
                + _alignment_text(self.delta_alignment)
            )
        sections += [f"note: {note}" for note in self.notes]
        return "\n\n".join(sections)


def cross_sample_report(
    results: Frame,
    *,
    reference: Reference = None,
    recovery_at: int | None = None,
    differences: Iterable[str | tuple[Selector, Selector]] = (),
    tokens: Frame | None = None,
    base_policy: str = "base",
    rl_policy: str = "rl",
    n_boot: int = 1000,
    seed: int = 0,
) -> CrossSampleReport:
    """Run every analysis of cross-sample results that the data allow.

    Args:
        results: cross-sample results (docs/contracts.md, "Cross-sample results").
        reference: the recovery's upper bound (`cross_sampling_curve`): None for the matched
            RL control, a policy label, or a third model's graded responses.
        recovery_at: None for recovery on mean@n, or the k of pass@k.
        differences: pairs of settings for `setting_differences` (e.g. `"policy=rl-replace,
            force_prefix=Alright - policy=base,force_prefix=Alright"`).
        tokens: a token table (the scored base rollouts) for the global planning share.
        base_policy: the base-model control.
        rl_policy: the RL-model control.
        n_boot: bootstrap resamples of every interval.
        seed: seed of every bootstrap.

    Returns:
        A `CrossSampleReport`.

    Raises:
        DivscopeError: what `cross_sampling_curve` and `setting_differences` raise (no graded
            responses, unmatched controls, an unknown reference or selector).

    >>> results = pl.DataFrame({"prompt_id": ["a", "a", "b", "b"] * 2,
    ...     "policy": ["base"] * 4 + ["rl"] * 4, "budget": [-1] * 8,
    ...     "correct": [False, True, False, False, True, True, True, False],
    ...     "n_tokens": [10] * 8, "n_switches": [0] * 8, "n_effective": [0] * 8})
    >>> report = cross_sample_report(results, n_boot=20)
    >>> report.curve["accuracy"].to_list(), report.knee is None
    ([0.25, 0.75], True)
    """
    names = checked_lazy(results, [], what="cross_sample_report").collect_schema().names()
    bootstrap = {"n_boot": n_boot, "seed": seed}
    controls = {"base_policy": base_policy, "rl_policy": rl_policy}
    common = {"reference": reference, "recovery_at": recovery_at, **controls, **bootstrap}
    notes: list[str] = []
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
    planning = knee = None
    if has_takeover and "switch_tokens" in names:
        planning = takeover_planning(results, tokens, policy=TAKEOVER_POLICY)
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
        delta_alignment=alignment,
        notes=tuple(notes),
    )


def _any(results: Frame, condition: pl.Expr) -> bool:
    return bool(results.lazy().select(condition.any()).collect().item())


def _reference_text(reference: Reference, rl_policy: str) -> str:
    if reference is None:
        return f"the matched `{rl_policy}` control"
    if isinstance(reference, str):
        return f"policy `{reference}`, matched like a control"
    return f"a third model's graded responses (row `{REFERENCE}`)"


def _pass_and_majority(
    results: Frame, keys: Sequence[str], names: Sequence[str], bootstrap: dict[str, int]
) -> pl.DataFrame:
    """pass@k per setting and k, joined with majority@k when the responses' text is there."""
    table = pass_at_k_curve(results, by=keys, **bootstrap)
    if "response" not in names:
        return table
    majority = majority_at_k_curve(
        results, table["k"].unique().sort().to_list(), by=keys, **bootstrap
    )
    return table.join(majority.drop("n_prompts"), on=[*keys, "k"], how="left", nulls_equal=True)


def _text_table(header: Sequence[str], rows: Iterable[Sequence[str]], *, left: int = 1) -> str:
    """Columns padded to their widest cell: the first `left` aligned left, the rest right."""
    rows = [list(header), *(list(r) for r in rows)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(
            cell.ljust(width) if i < left else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    )


def interval_text(row: dict[str, Any], name: str, *, percent: bool = True) -> str:
    """`62.5% [50.0, 75.0]`, or `0.67 [0.40, 0.90]` without `percent`; `-` when null."""
    value = row.get(name)
    if value is None or math.isnan(value):
        return "-"
    values = (value, row[f"{name}_low"], row[f"{name}_high"])
    if any(v is None or math.isnan(v) for v in values[1:]):
        return f"{100 * value:.1f}%" if percent else f"{value:.2f}"
    if percent:
        value, low, high = (100 * v for v in values)
        return f"{value:.1f}% [{low:.1f}, {high:.1f}]"
    # Rounded first, then + 0.0: a value in (-0.005, 0] prints "0.00", never "-0.00".
    value, low, high = (round(v, 2) + 0.0 for v in values)
    return f"{value:.2f} [{low:.2f}, {high:.2f}]"


def share_text(value: float | None, digits: int = 2) -> str:
    """A share as a percentage with `digits` decimals; `-` when null or NaN."""
    return "-" if value is None or math.isnan(value) else f"{100 * value:.{digits}f}%"


def budget_text(value: int | None) -> str:
    """A budget as the tables print it: `inf` for unlimited (−1), `-` when null."""
    return "-" if value is None else "inf" if value < 0 else str(value)


def labelled(frame: pl.DataFrame, *, exclude: Sequence[str] = ()) -> pl.DataFrame:
    """`frame` with its `setting` label column, sorted as the tables print it."""
    settings = [c for c in SETTING_COLUMNS if c in frame.columns]
    unlimited_last = pl.when(pl.col("budget") < 0).then(None).otherwise(pl.col("budget"))
    return frame.with_columns(setting_labels(frame, exclude=exclude)).sort(
        "policy", *settings, unlimited_last, nulls_last=True, maintain_order=True
    )


def curve_text(curve: pl.DataFrame) -> str:
    """A fixed-width text table of a `cross_sampling_curve`.

    Columns: `policy`; `setting` (the setting columns that vary within the policy, e.g.
    `eps=0.05`) when some policy has several settings; `T` and `top-p` when the curve holds
    several samplings (then the controls' rows, one per sampling, show which setting each
    matches); `budget`, `n` (responses), accuracy, pass@k and recovery with their 95%
    intervals, the per-benchmark averages where present, and the switched and effective
    shares of generated tokens (pooled), effective under the coupled draw and, where present,
    under an independent draw.

    >>> curve = pl.DataFrame({"policy": ["base", "forward"], "budget": [-1, 2],
    ...     "n_responses": [4, 4], "accuracy": [0.25, 0.75], "accuracy_low": [0.0, 0.5],
    ...     "accuracy_high": [0.5, 1.0], "recovery": [0.0, 0.5], "recovery_low": [0.0, 0.2],
    ...     "recovery_high": [0.0, 0.9], "switch_share_pooled": [0.0, 0.05],
    ...     "effective_share_pooled": [0.0, 0.02]})
    >>> print(curve_text(curve))
    policy   budget  n  accuracy [95% CI]   recovery [95% CI]  switched  eff. coupled
    base        inf  4   25.0% [0.0, 50.0]   0.00 [0.00, 0.00]     0.00%         0.00%
    forward       2  4  75.0% [50.0, 100.0]  0.50 [0.20, 0.90]     5.00%         2.00%
    """
    samplings = [c for c in ("temperature", "top_p") if c in curve.columns]
    several = (
        samplings
        and curve.filter(pl.col("policy") != REFERENCE).select(samplings).unique().height > 1
    )
    shown = samplings if several else []
    curve = labelled(curve, exclude=shown)
    has_setting = bool((curve["setting"].str.len_chars() > 0).any())
    pass_k = "pass_at_k" in curve.columns
    macro = "accuracy_macro" in curve.columns
    benchmark = "benchmark" in curve.columns
    header = ["policy", *(["setting"] if has_setting else [])]
    header += [{"temperature": "T", "top_p": "top-p"}[c] for c in shown]
    header += [*(["benchmark"] if benchmark else []), "budget", "n", "accuracy [95% CI]"]
    header += ["pass@k [95% CI]"] if pass_k else []
    header += ["recovery [95% CI]"]
    header += ["acc. per benchmark", "recovery per benchmark"] if macro else []
    header += ["switched", "eff. coupled"]
    independent = "effective_independent_share_pooled" in curve.columns
    header += ["eff. indep."] if independent else []
    rows = []
    for row in curve.iter_rows(named=True):
        cells = [row["policy"], *([row["setting"] or "-"] if has_setting else [])]
        cells += ["-" if row[c] is None else f"{row[c]:g}" for c in shown]
        cells += [str(row["benchmark"] or "-")] if benchmark else []
        cells += [
            budget_text(row["budget"]),
            str(row["n_responses"]),
            interval_text(row, "accuracy"),
        ]
        cells += [interval_text(row, "pass_at_k")] if pass_k else []
        cells += [interval_text(row, "recovery", percent=False)]
        if macro:
            cells += [
                interval_text(row, "accuracy_macro"),
                interval_text(row, "recovery_macro", percent=False),
            ]
        cells += [
            share_text(row.get("switch_share_pooled")),
            share_text(row.get("effective_share_pooled")),
        ]
        cells += [share_text(row.get("effective_independent_share_pooled"))] if independent else []
        rows.append(cells)
    left = 1 + has_setting + (1 if benchmark else 0)
    return _text_table(header, rows, left=left)


def _setting_cells(row: dict[str, Any], has_setting: bool) -> list[str]:
    return [
        row["policy"],
        *([row["setting"] or "-"] if has_setting else []),
        budget_text(row["budget"]),
    ]


def _pass_at_k_text(table: pl.DataFrame) -> str:
    table = labelled(table)
    has_setting = bool((table["setting"].str.len_chars() > 0).any())
    majority = "majority_at_k" in table.columns
    header = ["policy", *(["setting"] if has_setting else []), "budget", "k", "pass@k [95% CI]"]
    header += ["majority@k [95% CI]"] if majority else []
    rows = [
        [
            *_setting_cells(row, has_setting),
            str(row["k"]),
            interval_text(row, "pass_at_k"),
            *([interval_text(row, "majority_at_k")] if majority else []),
        ]
        for row in table.iter_rows(named=True)
    ]
    return _text_table(header, rows, left=1 + has_setting)


def _differences_text(table: pl.DataFrame) -> str:
    lines = []
    for row in table.iter_rows(named=True):
        value = "-"
        if row["difference"] is not None:
            interval = Interval(
                row["difference"], row["difference_low"], row["difference_high"], 0.95
            )
            value = difference_text(interval)
        lines.append(f"{row['a']}\n  - {row['b']}\n  = {value} ({row['n_prompts']} prompts)")
    return "\n".join(lines)


def _flips_text(table: pl.DataFrame) -> str:
    table = labelled(table)
    has_setting = bool((table["setting"].str.len_chars() > 0).any())
    header = ["policy", *(["setting"] if has_setting else []), "budget"]
    header += ["samples", "wrong->right", "right->wrong", "prompts", "wrong->right", "right->wrong"]
    rows = [
        [
            *_setting_cells(row, has_setting),
            *(
                str(row[f"{level}_{c}"])
                for level in ("sample", "prompt")
                for c in ("n", "wrong_to_right", "right_to_wrong")
            ),
        ]
        for row in table.iter_rows(named=True)
    ]
    return _text_table(header, rows, left=1 + has_setting)


def _sensitivity_text(table: pl.DataFrame) -> str:
    table = labelled(table, exclude=["eps"])
    has_setting = bool((table["setting"].str.len_chars() > 0).any())
    header = ["policy", *(["setting"] if has_setting else []), "budget", "eps", "n", "accuracy"]
    header += ["recovery [95% CI]", "switches/resp.", "effective/resp.", "eff./switches"]
    header += ["eff. % tokens"]
    rows = []
    for row in table.iter_rows(named=True):
        pair = [
            ("-" if row[a] is None else fmt(row[a]))
            + " / "
            + ("-" if row[b] is None else fmt(row[b]))
            for a, b, fmt in (
                ("effective_per_response", "effective_independent_per_response", "{:.1f}".format),
                ("effective_ratio", "effective_independent_ratio", lambda v: share_text(v, 1)),
                ("effective_token_share", "effective_independent_token_share", share_text),
            )
        ]
        rows.append(
            [
                *_setting_cells(row, has_setting),
                f"{row['eps']:g}",
                str(row["n_responses"]),
                share_text(row["accuracy"], 1),
                interval_text(row, "recovery", percent=False),
                f"{row['switches_per_response']:.1f}",
                *pair,
            ]
        )
    return _text_table(header, rows, left=1 + has_setting)


def _agreement_text(table: pl.DataFrame) -> str:
    table = labelled(table)
    has_setting = bool((table["setting"].str.len_chars() > 0).any())
    header = ["policy", *(["setting"] if has_setting else []), "budget", "switches", "above eps"]
    header += ["agreement [95% CI]"]
    rows = [
        [
            *_setting_cells(row, has_setting),
            str(row["n_switches"]),
            str(row["n_above"]),
            interval_text(row, "agreement"),
        ]
        for row in table.iter_rows(named=True)
    ]
    return _text_table(header, rows, left=1 + has_setting)


def _pairs_text(table: pl.DataFrame) -> str:
    table = labelled(table)
    keys = [c for c in ("policy", "budget", *SETTING_COLUMNS) if c in table.columns]
    blocks = []
    for _, group in table.group_by(keys, maintain_order=True):
        first = group.row(0, named=True)
        title = f"{first['policy']}" + (f" ({first['setting']})" if first["setting"] else "")
        title += f", budget {budget_text(first['budget'])}, {first['n_switches']} switches:"
        lines = [
            f"  {row['primary_token']!r} -> {row['token']!r}  {row['count']} "
            f"({share_text(row['pair_share'], 1)})"
            for row in group.head(PAIRS_SHOWN).iter_rows(named=True)
        ]
        blocks.append("\n".join([title, *lines]))
    return "\n".join(blocks)


def _planning_text(table: pl.DataFrame) -> str:
    table = labelled(table)
    has_setting = bool((table["setting"].str.len_chars() > 0).any())
    header = ["policy", *(["setting"] if has_setting else []), "budget", "takeovers"]
    header += ["planning", "global", "enrichment"]
    rows = [
        [
            *_setting_cells(row, has_setting),
            str(row["n_takeovers"]),
            share_text(row["share_takeover"], 1),
            share_text(row["share_global"], 1),
            "-" if row["enrichment"] is None else f"{row['enrichment']:.1f}x",
        ]
        for row in table.iter_rows(named=True)
    ]
    return _text_table(header, rows, left=1 + has_setting)


def _knee_text(knee: TakeoverKnee) -> str:
    measure = "accuracy" if knee.k is None else f"pass@{knee.k}"
    if knee.knee_index is None:
        return f"Takeover knee of `{knee.policy}`: none ({knee.curve.height} settings, {measure})."
    point = knee.curve.row(knee.knee_index, named=True)
    return (
        f"Takeover knee of `{knee.policy}`: mean takeover rate {share_text(point['rho_mean'])} "
        f"(pooled {share_text(point['switch_share'])}), {measure} "
        f"{interval_text(point, knee.measure)}."
    )


def _alignment_text(alignment: DeltaAlignment) -> str:
    table = labelled(alignment.summary)
    has_setting = bool((table["setting"].str.len_chars() > 0).any())
    header = ["policy", *(["setting"] if has_setting else []), "budget", "n", "cosine [95% CI]"]
    rows = [
        [
            *_setting_cells(row, has_setting),
            str(row["n_responses"]),
            interval_text(row, "delta_cosine", percent=False),
        ]
        for row in table.iter_rows(named=True)
    ]
    return _text_table(header, rows, left=1 + has_setting)


def difference_text(interval: Interval) -> str:
    """A difference of scores in points: `+5.21 [+3.12, +7.55]`.

    >>> difference_text(Interval(0.0521, 0.0312, 0.0755, 0.95))
    '+5.21 [+3.12, +7.55]'
    """
    return f"{100 * interval.estimate:+.2f} [{100 * interval.low:+.2f}, {100 * interval.high:+.2f}]"
