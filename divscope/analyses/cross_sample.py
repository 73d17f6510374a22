"""Accuracy, pass@k and recovery per setting of cross-sampling, differences between settings,
the takeover knee, and pass@k and majority@k curves (Table 1).

Input: cross-sample results, one row per generated response (docs/contracts.md, "Cross-sample
results"). A setting is a policy, a budget and the values of the `SETTING_COLUMNS` present;
responses of different settings are never pooled. Controls (`base`, `rl`) are matched to each
setting on its sampling and seed (`divscope.analyses.controls`).

P, the score of a setting, is computed per prompt and averaged over prompts: mean@n (the share
of the prompt's responses that are correct: the core paper, rl-replace) or, with
`recovery_at=k`, the unbiased pass@k (the takeover paper's Pass@8). recovery = (P_setting −
P_base) / (P_reference − P_base) on the prompts all three share, where the reference is the
matched RL control, another policy of the results, or a third model's graded responses. With a
`benchmark` column, P is also averaged per benchmark (macro: each benchmark's mean over its
prompts, benchmarks weighted equally; the recovery from those averages).

Every interval resamples prompts with one shared set of bootstrap weights (`PairedBootstrap`;
within each benchmark when there are several), so the intervals of different settings, of the
controls and of a difference between settings are paired.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import polars as pl

from divscope.analyses._frames import Frame, checked_lazy
from divscope.analyses.controls import (
    NAMED_WHEN_SET,
    SAMPLING_COLUMNS,
    UNNAMED_WHEN_NULL,
    Selector,
    Setting,
    Settings,
    benchmark_codes,
    format_value,
    parse_difference,
    prompt_benchmarks,
)
from divscope.answers import final_answer, last_boxed
from divscope.errors import DivscopeError
from divscope.estimators import (
    MAJORITY_SUBSETS,
    Interval,
    PairedBootstrap,
    Resampled,
    interval_columns,
    majority_at_k,
    pass_at_k,
)
from divscope.schema import SETTING_COLUMNS

CURVE_COLUMNS: tuple[str, ...] = (
    "prompt_id", "policy", "budget", "correct", "n_tokens", "n_switches", "n_effective",
)  # fmt: skip
REFERENCE = "reference"
"""The `policy` of the curve's row for a third-model reference (`reference` given as a frame)."""
SHARES: tuple[tuple[str, str], ...] = (
    ("switch", "n_switches"),
    ("effective", "n_effective"),
    ("effective_coupled", "n_effective_coupled"),
)
"""Curve share columns (`<name>_share_pooled`, `<name>_share_mean`) and their count column."""

Reference = str | pl.DataFrame | pl.LazyFrame | None
"""The upper bound of a recovery: None (the matched `rl` control), a policy label of the results,
or a third model's graded responses (`prompt_id`, `correct`, optionally `benchmark`)."""


class _Outcomes:
    """Graded results split into settings, with per-prompt scores and one paired bootstrap."""

    def __init__(
        self,
        results: Frame,
        *,
        what: str,
        reference: Reference = None,
        recovery_at: int | None = None,
        base_policy: str | None = "base",
        rl_policy: str = "rl",
        n_boot: int = 1000,
        seed: int = 0,
        confidence: float = 0.95,
        required: Sequence[str] = (),
    ) -> None:
        if recovery_at is not None and recovery_at < 1:
            raise DivscopeError(f"{what}: recovery_at must be a k >= 1, got {recovery_at}.")
        self.what, self.k, self.confidence = what, recovery_at, confidence
        self.base_policy, self.rl_policy = base_policy, rl_policy
        self.settings = Settings(
            results,
            what=what,
            required=required,
            optional=("n_effective_coupled",),
            controls=() if base_policy is None else (base_policy, rl_policy),
        )
        if self.settings.is_empty:
            raise DivscopeError(f"{what}: no graded responses (all `correct` are null).")
        self.prompts = self.settings.prompts()
        self.index = {p: i for i, p in enumerate(self.prompts)}
        benchmarks = self.settings.benchmarks()
        self.reference = reference
        self.third: pl.DataFrame | None = None
        if isinstance(reference, pl.DataFrame | pl.LazyFrame):
            self.third = self._third_model(reference, benchmarks)
        elif isinstance(reference, str) and reference not in set(self.settings.frame["policy"]):
            present = ", ".join(sorted(set(self.settings.frame["policy"])))
            raise DivscopeError(
                f"{what}: the reference policy {reference!r} has no graded responses in the "
                f"cross-sample results (policies: {present}); name one of them, or pass the "
                "reference model's graded responses."
            )
        codes = benchmark_codes(self.prompts, benchmarks)
        self.benchmarks = sorted(set(benchmarks.values()), key=lambda b: (b is None, b or ""))
        self.has_benchmarks = len(self.benchmarks) > 1  # one benchmark: macro = pooled
        self.codes = codes
        self.bootstrap = PairedBootstrap.drawn(codes, n_boot=n_boot, seed=seed)

    def _third_model(self, reference: Frame, benchmarks: dict[str, str | None]) -> pl.DataFrame:
        """The reference model's graded responses on the results' prompts; fills `benchmarks`."""
        source = "reference responses"
        lazy = checked_lazy(reference, ["prompt_id", "correct"], what=self.what, source=source)
        columns = ["prompt_id", "correct"]
        if "benchmark" in lazy.collect_schema().names():
            columns.append("benchmark")
        frame = (
            lazy.select(columns)
            .drop_nulls("correct")
            .filter(pl.col("prompt_id").is_in(pl.Series(self.prompts).implode()))
            .collect()
        )
        if frame.is_empty():
            raise DivscopeError(
                f"{self.what}: the reference responses have no graded response to a prompt of "
                "the cross-sample results; grade them (divscope grade) on the same prompts."
            )
        if "benchmark" in columns:
            for prompt, benchmark in prompt_benchmarks(
                frame, what=self.what, source=source
            ).items():
                known = benchmarks.get(prompt)
                if known is not None and benchmark is not None and known != benchmark:
                    raise DivscopeError(
                        f"{self.what}: prompt {prompt!r} is in benchmark {known!r} in the "
                        f"cross-sample results but {benchmark!r} in the reference responses."
                    )
                if known is None:
                    benchmarks[prompt] = benchmark
        return frame

    def values(self, rows: pl.DataFrame, k: int | None, label: str) -> np.ndarray:
        """Per prompt (in `self.prompts` order) mean@n, or pass@k for a k; NaN where absent."""
        counts = rows.group_by("prompt_id").agg(
            pl.len().alias("n"), pl.col("correct").cast(pl.Int64).sum().alias("c")
        )
        values = np.full(len(self.prompts), np.nan)
        for prompt, n, c in counts.iter_rows():
            if k is not None and n < k:
                raise DivscopeError(
                    f"{self.what}: prompt {prompt!r} has {n} graded response(s) in {label}, "
                    f"fewer than k={k}; draw at least {k} samples per prompt or lower k."
                )
            values[self.index[prompt]] = c / n if k is None else pass_at_k(n, c, k)
        return values

    def controls(self, setting: Setting) -> tuple[pl.DataFrame | None, pl.DataFrame | None]:
        """The base responses and the reference responses matched to `setting` (None: absent)."""
        if self.base_policy is None:
            return None, None
        base = self.settings.matched(self.base_policy, setting)
        if self.third is not None:
            return base, self.third
        if self.reference is None:
            return base, self.settings.matched(self.rl_policy, setting)
        return base, self.settings.matched(self.reference, setting, role="reference")

    def scores(
        self, values: np.ndarray, only: np.ndarray | None = None, *, macro: bool = False
    ) -> Resampled:
        """The mean of per-prompt values over the prompts in `only` (default all)."""
        if only is not None:
            values = np.where(only, values, np.nan)
        return self.bootstrap.mean(values, macro=macro)

    def recovery(
        self,
        setting: np.ndarray,
        base: np.ndarray | None,
        reference: np.ndarray | None,
        *,
        macro: bool,
    ) -> Resampled | None:
        """(P − P_base) / (P_ref − P_base) on the prompts all three share; None without both."""
        if base is None or reference is None:
            return None
        shared = ~np.isnan(setting) & ~np.isnan(base) & ~np.isnan(reference)
        if not shared.any():
            return None
        p, b, r = (self.scores(v, shared, macro=macro) for v in (setting, base, reference))
        return (p - b) / (r - b)

    def row(self, setting: Setting, only: np.ndarray | None = None) -> dict[str, Any] | None:
        """One curve row: the setting's scores (over the prompts in `only`), recovery, shares."""
        rows = self.settings.rows(setting)
        if only is not None:
            chosen = [p for p, keep in zip(self.prompts, only, strict=True) if keep]
            rows = rows.filter(
                pl.col("prompt_id").is_in(pl.Series(chosen, dtype=pl.String).implode())
            )
        if rows.is_empty():
            return None
        label = f"the setting {setting.describe()}"
        base_rows, reference_rows = self.controls(setting)
        macro = self.has_benchmarks and only is None
        out: dict[str, Any] = {
            **dict(zip(setting.names, setting.values, strict=True)),
            "n_prompts": rows["prompt_id"].n_unique(),
            "n_responses": rows.height,
            **self.measures(rows, label, macro=macro),
        }
        recovery_values = self.values(rows, self.k, label)
        base, reference = (
            None if frame is None else self.values(frame, self.k, f"the controls of {label}")
            for frame in (base_rows, reference_rows)
        )
        for suffix, flag in (("", False), ("_macro", True)) if macro else (("", False),):
            recovery = self.recovery(recovery_values, base, reference, macro=flag)
            interval = None if recovery is None else recovery.interval(self.confidence)
            out |= interval_columns(f"recovery{suffix}", interval)
        out.update(_shares(rows))
        return out

    def reference_row(self) -> dict[str, Any]:
        """The curve row of a third-model reference: its scores, no recovery or shares."""
        assert self.third is not None
        out: dict[str, Any] = {
            "policy": REFERENCE,
            "budget": -1,
            "n_prompts": self.third["prompt_id"].n_unique(),
            "n_responses": self.third.height,
            **self.measures(self.third, "the reference responses", macro=self.has_benchmarks),
        }
        return out

    def measures(self, rows: pl.DataFrame, label: str, *, macro: bool) -> dict[str, Any]:
        """`accuracy` (and `pass_at_k`) of responses with intervals, `_macro` ones with `macro`."""
        out: dict[str, Any] = {}
        for name, k in (("accuracy", None), *((("pass_at_k", self.k),) if self.k else ())):
            values = self.values(rows, k, label)
            out |= interval_columns(name, self.scores(values).interval(self.confidence))
            if macro:
                macro_mean = self.scores(values, macro=True)
                out |= interval_columns(f"{name}_macro", macro_mean.interval(self.confidence))
        return out

    def curve(self, *, per_benchmark: bool = False) -> pl.DataFrame:
        """Every setting's row (per benchmark with `per_benchmark`), sorted, with typed columns."""
        rows = []
        for setting in self.settings.cells():
            if per_benchmark:
                for code, name in enumerate(self.benchmarks):
                    row = self.row(setting, self.codes == code)
                    if row is not None:
                        rows.append({**row, "benchmark": name})
            else:
                rows.append(self.row(setting))
        if self.third is not None and not per_benchmark:
            rows.append(self.reference_row())
        schema = self.columns(per_benchmark=per_benchmark)
        frame = pl.DataFrame(rows, schema=schema)
        order = ["policy", *self.settings.settings, "budget"]
        return frame.sort(*order, *(["benchmark"] if per_benchmark else []), nulls_last=True)

    def columns(self, *, per_benchmark: bool) -> dict[str, pl.DataType]:
        """The curve's columns and types, in order."""
        keys = {c: self.settings.frame.schema[c] for c in self.settings.keys}
        schema: dict[str, pl.DataType] = {**keys}
        if per_benchmark:
            schema["benchmark"] = pl.String()
        schema |= {"n_prompts": pl.Int64(), "n_responses": pl.Int64()}
        names = ["accuracy", *(["pass_at_k"] if self.k is not None else []), "recovery"]
        macro = self.has_benchmarks and not per_benchmark
        for suffix in ("", "_macro") if macro else ("",):
            for name in names:
                for end in ("", "_low", "_high"):
                    schema[f"{name}{suffix}{end}"] = pl.Float64()
        for name, column in SHARES:
            if column in self.settings.frame.columns:
                schema[f"{name}_share_pooled"] = pl.Float64()
                schema[f"{name}_share_mean"] = pl.Float64()
        return schema

    def difference(
        self, a: Setting, b: Setting, *, average: Literal["prompts", "benchmarks"]
    ) -> tuple[Interval | None, int]:
        """P(a) − P(b) on the prompts both share, and how many they share; refused for two
        settings sampled differently (`temperature` or `top_p`)."""
        if average not in ("prompts", "benchmarks"):
            raise DivscopeError(
                f"{self.what}: average must be prompts or benchmarks, got {average!r}."
            )
        samplings = [{c: s[c] for c in ("temperature", "top_p") if c in s.names} for s in (a, b)]
        if samplings[0] != samplings[1]:
            first, second = (sampling_label(s) for s in samplings)
            raise DivscopeError(
                f"{self.what}: {a.describe()} was sampled at {first} and {b.describe()} at "
                f"{second}; a difference compares two settings sampled alike. Run both at one "
                "sampling (divscope cross-sample runs mixture beside rl-replace at its sampling, "
                "and the controls at every sampling of the run)."
            )
        values = [self.values(self.settings.rows(s), self.k, s.describe()) for s in (a, b)]
        shared = ~np.isnan(values[0]) & ~np.isnan(values[1])
        if not shared.any():
            return None, 0
        first, second = (self.scores(v, shared, macro=average == "benchmarks") for v in values)
        return (first - second).interval(self.confidence), int(shared.sum())


def _shares(rows: pl.DataFrame) -> dict[str, float | None]:
    """Pooled (Σ count / Σ n_tokens) and mean per-response (count / n_tokens) shares."""
    tokens = rows["n_tokens"].sum()
    lengths = rows.filter(pl.col("n_tokens") > 0)
    out: dict[str, float | None] = {}
    for name, column in SHARES:
        if column in rows.columns:
            out[f"{name}_share_pooled"] = rows[column].sum() / tokens if tokens else None
            out[f"{name}_share_mean"] = (
                (lengths[column] / lengths["n_tokens"]).mean() if lengths.height else None
            )
    return out


def cross_sampling_curve(
    results: Frame,
    *,
    reference: Reference = None,
    recovery_at: int | None = None,
    base_policy: str | None = "base",
    rl_policy: str = "rl",
    per_benchmark: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pl.DataFrame:
    """Per setting: accuracy (and pass@k), recovery of the gain, and switched-token shares.

    A setting is a policy, a budget and the values of every `SETTING_COLUMNS` column present
    (`eps`, `rate`, `tau`, `temperature`, ...; a null is a value of its own), so a policy run at
    two `eps` gives two rows per budget. The controls (`base_policy`, `rl_policy` without a
    forced opening) get one row per sampling (temperature, top_p, max_new_tokens), their
    budgets and seeds pooled.

    recovery = (P − P_base) / (P_ref − P_base) on the prompts shared by the setting, its matched
    base control and the reference, where P is mean@n, or the mean over prompts of the unbiased
    pass@k with `recovery_at=k`; 0 means no gain over the base model, 1 the reference's score.
    A control matches a setting when temperature, top_p, max_new_tokens and seed agree
    (`divscope.analyses.controls`). Ungraded responses (`correct` null) are skipped.

    Args:
        results: cross-sample results with `prompt_id`, `policy`, `budget`, `correct`,
            `n_tokens`, `n_switches`, `n_effective`, and optionally setting columns, `seed`,
            `force_prefix`, `benchmark` and `n_effective_coupled`.
        reference: the upper bound: None for the matched `rl_policy` control; a policy label
            of `results` (its responses without a forced opening, matched like a control); or
            a third model's graded responses (`prompt_id`, `correct`, optionally `benchmark`;
            e.g. `divscope generate` then `divscope grade` of a thinking model), used as they
            are on the prompts they share with `results`, and shown as a row of policy
            `reference` (its recovery null: it is the 100% point).
        recovery_at: None for mean@n, or the k of pass@k.
        base_policy: the policy name of the base-model control; None for no controls and no
            recovery (every policy's rows are then settings like any other).
        rl_policy: the policy name of the RL-model control.
        per_benchmark: one row per setting and benchmark (scores and recovery within it; no
            `_macro` columns) instead of one per setting.
        n_boot: bootstrap resamples of prompts.
        seed: seed of the bootstrap.
        confidence: coverage of the intervals.

    Returns:
        One row per setting, sorted by `policy`, the setting columns (nulls last) and `budget`:
        `policy`, `budget`, the setting columns present in `results` (in `SETTING_COLUMNS`
        order, with their input types), [`benchmark` with `per_benchmark`], `n_prompts`,
        `n_responses`, `accuracy` (mean@n), `accuracy_low`, `accuracy_high`, with
        `recovery_at` `pass_at_k` (+ `_low`, `_high`), `recovery` (+ `_low`, `_high`; null when
        a control is absent from the results or the reference ties the base); when the
        prompts span several benchmarks (the `benchmark` column of `results` or `reference`;
        null is one unnamed benchmark) the same scores and recovery averaged per benchmark,
        suffixed `_macro` (`accuracy_macro`, `accuracy_macro_low`, ...); then
        `switch_share_pooled` (Σ n_switches / Σ n_tokens), `switch_share_mean` (mean of
        per-response shares, ρ̄), `effective_share_pooled`, `effective_share_mean` (the same
        for `n_effective`: switches whose token differs from an independent draw of the
        primary, the papers' count) and, when present, `effective_coupled_share_pooled`,
        `effective_coupled_share_mean` (the same for `n_effective_coupled`).

    Raises:
        DivscopeError: no graded responses; controls present but none matching a setting's
            sampling and seed; an unknown reference label; a prompt with fewer than
            `recovery_at` graded responses.

    >>> results = pl.DataFrame({"prompt_id": ["a", "a", "b", "b"] * 3,
    ...     "policy": ["base"] * 4 + ["rl"] * 4 + ["forward"] * 4, "budget": [-1] * 8 + [2] * 4,
    ...     "correct": [False, False, True, False, True, True, True, True,
    ...                 True, False, True, True],
    ...     "n_tokens": [10] * 12, "n_switches": [0] * 8 + [1, 2, 0, 1], "n_effective": [0] * 12})
    >>> curve = cross_sampling_curve(results, n_boot=20)
    >>> curve.filter(policy="forward").select("accuracy", "recovery", "switch_share_pooled").row(0)
    (0.75, 0.6666666666666666, 0.1)
    """
    outcomes = _Outcomes(
        results,
        what="cross_sampling_curve",
        reference=reference,
        recovery_at=recovery_at,
        base_policy=base_policy,
        rl_policy=rl_policy,
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
        required=CURVE_COLUMNS[3:],
    )
    return outcomes.curve(per_benchmark=per_benchmark)


def setting_difference(
    results: Frame,
    a: Selector,
    b: Selector,
    *,
    recovery_at: int | None = None,
    average: Literal["prompts", "benchmarks"] = "prompts",
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Interval:
    """P(a) − P(b), the difference of two settings' scores, with a paired bootstrap interval.

    P is mean@n (or pass@k with `recovery_at=k`) averaged over the prompts both settings share;
    the interval resamples those prompts with the same weights for both settings (and the same
    weights as `cross_sampling_curve` with the same seed). The rl-replace paper's "after the
    forced opening, later replacements add 5.21 points [3.12, 7.55]" is
    `setting_difference(results, "policy=rl-replace,force_prefix=Alright",
    "policy=base,force_prefix=Alright")`.

    Args:
        results: cross-sample results with `prompt_id`, `policy`, `budget`, `correct`.
        a: the first setting (a selector that must match exactly one setting).
        b: the second setting.
        recovery_at: None for mean@n, or the k of pass@k.
        average: `prompts` (pooled over prompts) or `benchmarks` (each benchmark's mean, then
            their mean).
        n_boot: bootstrap resamples of prompts.
        seed: seed of the bootstrap.
        confidence: coverage of the interval.

    Returns:
        The difference (in [−1, 1]) and its interval.

    Raises:
        DivscopeError: a selector that matches no setting or several; settings without a
            shared prompt.

    >>> results = pl.DataFrame({"prompt_id": ["a", "a", "b", "b"] * 2,
    ...     "policy": ["base"] * 4 + ["rl"] * 4, "budget": [-1] * 8,
    ...     "correct": [False, True, False, False, True, True, True, False]})
    >>> setting_difference(results, "policy=rl", {"policy": "base"}, n_boot=50).estimate
    0.5
    """
    outcomes = _Outcomes(
        results,
        what="setting_difference",
        recovery_at=recovery_at,
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
    )
    first, second = (outcomes.settings.select(s) for s in (a, b))
    interval, _ = outcomes.difference(first, second, average=average)
    if interval is None:
        raise DivscopeError(
            f"setting_difference: {first.describe()} and {second.describe()} share no graded "
            "prompt."
        )
    return interval


def setting_differences(
    results: Frame,
    differences: Iterable[str | tuple[Selector, Selector]],
    *,
    recovery_at: int | None = None,
    average: Literal["prompts", "benchmarks"] = "prompts",
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pl.DataFrame:
    """`setting_difference` of several pairs of settings, one bootstrap shared by all.

    Args:
        results: cross-sample results with `prompt_id`, `policy`, `budget`, `correct`.
        differences: each a text `"A - B"` (`parse_difference`) or a pair of selectors.
        recovery_at: None for mean@n, or the k of pass@k.
        average: `prompts` or `benchmarks`, as in `setting_difference`.
        n_boot: bootstrap resamples of prompts.
        seed: seed of the bootstrap.
        confidence: coverage of the intervals.

    Returns:
        One row per pair, in order: `a`, `b` (the settings, described), `difference`,
        `difference_low`, `difference_high` (null without a shared prompt), `n_prompts`.

    >>> results = pl.DataFrame({"prompt_id": ["a", "b"] * 2, "policy": ["base"] * 2 + ["rl"] * 2,
    ...     "budget": [-1] * 4, "correct": [False, False, True, False]})
    >>> setting_differences(results, ["policy=rl - policy=base"], n_boot=20)["difference"][0]
    0.5
    """
    outcomes = _Outcomes(
        results,
        what="setting_differences",
        recovery_at=recovery_at,
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
    )
    rows = []
    for pair in differences:
        a, b = parse_difference(pair) if isinstance(pair, str) else pair
        first, second = (outcomes.settings.select(s) for s in (a, b))
        interval, shared = outcomes.difference(first, second, average=average)
        rows.append(
            {
                "a": first.describe(),
                "b": second.describe(),
                **interval_columns("difference", interval),
                "n_prompts": shared,
            }
        )
    schema = {"a": pl.String(), "b": pl.String()}
    schema |= {f"difference{e}": pl.Float64() for e in ("", "_low", "_high")}
    return pl.DataFrame(rows, schema={**schema, "n_prompts": pl.Int64()})


def setting_labels(
    curve: pl.DataFrame, *, separator: str = "=", exclude: Iterable[str] = ()
) -> pl.Series:
    """Per row of a curve, the setting columns that vary within its policy, with their values.

    Only the columns of `SETTING_COLUMNS` that take more than one value (null counts as one)
    among the policy's rows are named, so a policy run at a single setting gets "", except the
    columns of `NAMED_WHEN_SET` (a forced opening, a stratum, a retrospective map's table),
    named wherever they are set: they change what the rows are (a forced `base` is no longer a
    control), even when every row shown has them.

    Args:
        curve: a frame with `policy` and setting columns, e.g. `cross_sampling_curve`'s.
        separator: between a column's name and its value.
        exclude: setting columns never named (e.g. those a table shows as columns).

    Returns:
        A String series `setting`, aligned with `curve`'s rows.

    >>> curve = pl.DataFrame({"policy": ["forward", "forward", "random"],
    ...     "eps": [0.01, 0.05, None], "rate": [None, None, 0.1]})
    >>> setting_labels(curve).to_list()
    ['eps=0.01', 'eps=0.05', '']
    >>> setting_labels(pl.DataFrame({"policy": ["base"], "force_prefix": ["Alright"]})).to_list()
    ['force_prefix=Alright']
    >>> setting_labels(pl.DataFrame({"policy": ["forward"], "stratum": ["tail"]})).to_list()
    ['stratum=tail']
    >>> strata = pl.DataFrame({"policy": ["forward"] * 2, "stratum": ["tail", "entropy-matched"],
    ...                        "match_tol": [None, 0.1]})
    >>> setting_labels(strata).to_list()
    ['stratum=tail', 'stratum=entropy-matched, match_tol=0.1']
    """
    skipped = set(exclude)
    settings = [c for c in SETTING_COLUMNS if c in curve.columns and c not in skipped]
    varying = {
        policy: [
            c
            for c in settings
            if rows[c].n_unique() > 1
            or (c in NAMED_WHEN_SET and rows[c].null_count() < rows.height)
        ]
        for (policy,), rows in curve.group_by("policy")
    }
    labels = [
        ", ".join(
            f"{c}{separator}{format_value(row[c])}"
            for c in varying[row["policy"]]
            if not (c in UNNAMED_WHEN_NULL and row[c] is None)
        )
        for row in curve.iter_rows(named=True)
    ]
    return pl.Series("setting", labels, dtype=pl.String())


def sampling_label(row: Mapping[str, Any]) -> str:
    """`T 0.6, top-p 0.95` for a curve row: its temperature and top-p where present.

    >>> sampling_label({"temperature": 0.6, "top_p": 0.95, "max_new_tokens": None})
    'T 0.6, top-p 0.95'
    """
    names = {"temperature": "T", "top_p": "top-p", "max_new_tokens": "max tokens"}
    return ", ".join(
        f"{names[c]} {format_value(row[c])}"
        for c in SAMPLING_COLUMNS
        if c in row and (c != "max_new_tokens" or row[c] is not None)
    )


GUIDE_REFERENCE = "against the guide model (the paper: a same-size thinking model)"
"""What a takeover recovery is measured against without a reference: the matched control of the
model that takes over (the guide), which the takeover paper replaces by a thinking model of the
base model's size."""


def recovery_reference(reference: Reference) -> str:
    """What a takeover recovery is measured against, as its label says it.

    >>> recovery_reference(None)
    'against the guide model (the paper: a same-size thinking model)'
    >>> recovery_reference("thinking")
    'against policy `thinking`, matched like a control'
    """
    if reference is None:
        return GUIDE_REFERENCE
    if isinstance(reference, str):
        return f"against policy `{reference}`, matched like a control"
    return f"against a third model's graded responses (row `{REFERENCE}`)"


@dataclass(frozen=True)
class TakeoverKnee:
    """P (accuracy or pass@k) against the mean takeover rate ρ̄, and where more stops paying."""

    policy: str
    """The takeover policy, e.g. `gated`."""
    measure: str
    """The y column: `accuracy` (mean@n) or `pass_at_k`."""
    k: int | None
    """The k of pass@k (None for accuracy)."""
    average: Literal["benchmarks", "prompts"]
    """What the measure and `recovery` average: `benchmarks` (each benchmark's mean over its
    prompts, then their mean: the paper's, with at least two benchmarks) or `prompts`."""
    recovery_against: str
    """What `recovery` is measured against (`recovery_reference`)."""
    curve: pl.DataFrame
    """One row per setting (one per calibrated rate for `gated` over a calibration): `budget`
    and the `SETTING_COLUMNS` present (`rate`, `tau`, ...), `setting` (the setting columns
    that vary, e.g. `rate=0.05`: each point's label), `rho_mean` (ρ̄: the mean over
    responses of n_switches / n_tokens), `switch_share` (pooled: Σ n_switches / Σ n_tokens),
    the measure with `_low`, `_high`, `recovery` (+ `_low`, `_high`), both averaged as
    `average` says; with `average="benchmarks"`, the same pooled over prompts as
    `<measure>_pooled` and `recovery_pooled` (+ `_low`, `_high`); `n_responses`; sorted by
    `rho_mean`, then the setting."""
    knee_index: int | None
    """Row of `curve` at the knee; None with fewer than three settings or a flat curve."""
    base_value: float | None
    """The measure of the matched base control (None when absent)."""
    reference_value: float | None
    """The measure of the reference (the matched RL control by default; None when absent)."""


def takeover_knee(
    results: Frame,
    policy: str = "gated",
    *,
    reference: Reference = None,
    recovery_at: int | None = None,
    base_policy: str = "base",
    rl_policy: str = "rl",
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> TakeoverKnee:
    """The takeover paper's knee: Pass@k (or accuracy) against ρ̄, the mean takeover rate.

    Each setting of `policy` (its `budget` and the `SETTING_COLUMNS` present, as in
    `cross_sampling_curve`) is one point at ρ̄ = the mean over its responses of the
    per-response takeover rate n_switches / n_tokens (the paper's ρ̄; the pooled share is kept
    as `switch_share`). `gated` over a calibration of several rates (`divscope calibrate
    --rate 0.01,0.02,0.05,0.1`, unbudgeted) is the paper's sweep: one point per calibration
    rate r, labelled by it. The knee is the Kneedle point of the curve sorted by ρ̄: with ρ̄
    and the measure rescaled to [0, 1] between the first and the last point, the point
    furthest above the chord (largest measure − ρ̄). With at least two benchmarks the measure
    and the recovery are the per-benchmark averages (the paper's), the pooled ones kept as
    `_pooled`. Without `reference` the recovery is against the guide model's matched control
    (`recovery_against`; the paper's is a same-size thinking model).

    Args:
        results: cross-sample results (docs/contracts.md, "Cross-sample results"), holding
            `policy` rows and the controls, all at one sampling.
        policy: the takeover policy.
        reference: the upper bound, as in `cross_sampling_curve`.
        recovery_at: None for accuracy (mean@n), or the k of pass@k (the paper's Pass@8).
        base_policy: the base-model control.
        rl_policy: the RL-model control.
        n_boot: bootstrap resamples of prompts.
        seed: seed of the bootstrap.
        confidence: coverage of the intervals.

    Returns:
        A `TakeoverKnee`.

    Raises:
        DivscopeError: no graded responses of `policy`, or `policy` run at several samplings.

    >>> settings = [("base", None, 0, (False, False)), ("rl", None, 0, (True, True)),
    ...     ("gated", 0.01, 1, (False, False)), ("gated", 0.02, 5, (True, False)),
    ...     ("gated", 0.05, 10, (True, True)), ("gated", 0.1, 50, (True, True))]
    >>> results = pl.DataFrame([{"prompt_id": prompt, "policy": policy, "budget": -1,
    ...     "rate": rate, "n_tokens": 100, "n_switches": n, "n_effective": n, "correct": right}
    ...     for policy, rate, n, rights in settings for prompt, right in zip("ab", rights)])
    >>> knee = takeover_knee(results, n_boot=20)
    >>> knee.curve.select("setting", "rho_mean", "recovery").row(knee.knee_index)
    ('rate=0.05', 0.1, 1.0)
    """
    lazy = checked_lazy(results, CURVE_COLUMNS, what="takeover_knee", source="cross-sample results")
    graded = lazy.filter((pl.col("policy") == policy) & pl.col("correct").is_not_null())
    if graded.select(pl.len()).collect().item() == 0:
        present = lazy.select(pl.col("policy").unique().sort()).collect()["policy"].to_list()
        raise DivscopeError(
            f"takeover_knee: no graded responses of policy {policy!r} in the cross-sample "
            f"results (policies: {', '.join(map(str, present)) or 'none'}); pass `policy=`."
        )
    # The policy, the controls and a reference label in one curve: one bootstrap pairs them.
    kept = [policy, base_policy, rl_policy, *([reference] if isinstance(reference, str) else [])]
    curve = cross_sampling_curve(
        lazy.filter(pl.col("policy").is_in(kept)),
        reference=reference,
        recovery_at=recovery_at,
        base_policy=base_policy,
        rl_policy=rl_policy,
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
    )
    settings = [c for c in SETTING_COLUMNS if c in curve.columns]
    sampling = [c for c in SAMPLING_COLUMNS if c in curve.columns]
    measure = "accuracy" if recovery_at is None else "pass_at_k"
    macro = f"{measure}_macro" in curve.columns
    own = curve.filter(pl.col("policy") == policy)
    samplings = own.select(sampling).unique()
    if sampling and samplings.height > 1:
        shown = "; ".join(sampling_label(row) for row in samplings.iter_rows(named=True))
        raise DivscopeError(
            f"takeover_knee: policy {policy!r} was run at {samplings.height} samplings "
            f"({shown}); keep one sampling in the results."
        )

    def scores(name: str, suffix: str, alias: str) -> list[pl.Expr]:
        return [pl.col(f"{name}{suffix}{e}").alias(f"{alias}{e}") for e in ("", "_low", "_high")]

    headline = "_macro" if macro else ""
    pooled = [*scores(measure, "", f"{measure}_pooled"), *scores("recovery", "", "recovery_pooled")]
    # Over a calibration, each point is named by its rate alone (its tau and lambda follow).
    calibrated = "rate" in own.columns and own["rate"].null_count() == 0
    labels = setting_labels(own, exclude=("tau", "lam") if calibrated else ())
    points = (
        own.with_columns(labels)
        .select(
            "budget",
            *settings,
            "setting",
            pl.col("switch_share_mean").alias("rho_mean"),
            pl.col("switch_share_pooled").alias("switch_share"),
            *scores(measure, headline, measure),
            *scores("recovery", headline, "recovery"),
            *(pooled if macro else []),
            "n_responses",
        )
        .sort("rho_mean", "budget", *settings, nulls_last=True)
    )
    at = own.row(0, named=True)

    def value(name: str) -> float | None:
        same = pl.col("policy") == name
        if name != REFERENCE and sampling:
            same = same & pl.all_horizontal(pl.col(c).eq_missing(at[c]) for c in sampling)
        rows = curve.filter(same)
        return float(rows[f"{measure}{headline}"][0]) if rows.height == 1 else None

    reference_name = (
        rl_policy if reference is None else reference if isinstance(reference, str) else REFERENCE
    )
    return TakeoverKnee(
        policy=policy,
        measure=measure,
        k=recovery_at,
        average="benchmarks" if macro else "prompts",
        recovery_against=recovery_reference(reference),
        curve=points,
        knee_index=_kneedle(points["rho_mean"].to_numpy(), points[measure].to_numpy()),
        base_value=value(base_policy),
        reference_value=value(reference_name),
    )


def _kneedle(x: np.ndarray, y: np.ndarray) -> int | None:
    """Index of the point furthest above the chord of an increasing curve, rescaled to [0, 1]."""
    if x.size < 3 or x[-1] == x[0] or y[-1] == y[0]:
        return None
    gain = (y - y[0]) / (y[-1] - y[0]) - (x - x[0]) / (x[-1] - x[0])
    index = int(np.argmax(gain))
    return index if gain[index] > 0 else None


def pass_at_k_curve(
    results: Frame,
    ks: Sequence[int] | None = None,
    *,
    by: Sequence[str] = ("policy", "budget"),
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pl.DataFrame:
    """Mean unbiased pass@k over prompts, per group (e.g. per setting), with paired intervals.

    The intervals resample prompts with one set of weights shared by every group and k
    (within each benchmark when `results` has a `benchmark` column with several).

    Args:
        results: graded responses with `prompt_id`, `correct` and the `by` columns.
        ks: the k values; default the powers of two up to the fewest samples of any prompt.
        by: the grouping columns (may be empty).
        n_boot: bootstrap resamples of prompts.
        seed: seed of the bootstrap.
        confidence: coverage of the intervals.

    Returns:
        One row per group and k: the `by` columns, `k`, `pass_at_k`, `pass_at_k_low`,
        `pass_at_k_high`, `n_prompts`.

    Raises:
        DivscopeError: a k exceeds the graded samples of some prompt in a group.

    >>> results = pl.DataFrame({"prompt_id": ["a"] * 4 + ["b"] * 4,
    ...                         "correct": [True, False, False, False] + [False] * 4})
    >>> pass_at_k_curve(results, by=(), n_boot=20)["pass_at_k"].to_list()
    [0.125, 0.25, 0.5]
    """
    return _per_prompt_curve(
        results,
        ks,
        by=by,
        name="pass_at_k",
        required=(),
        score=lambda group, k: [pass_at_k(n, c, k) for n, c in zip(*_counts(group), strict=True)],
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
    )


def majority_at_k_curve(
    results: Frame,
    ks: Sequence[int] | None = None,
    *,
    by: Sequence[str] = ("policy", "budget"),
    n_subsets: int = MAJORITY_SUBSETS,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pl.DataFrame:
    """Mean majority@k over prompts, per group, with paired intervals (as `pass_at_k_curve`).

    A response's answer is `divscope.answers.final_answer` of its `response` when the
    response has a complete `\\boxed{}`; a response without one is unanswered and votes for
    nothing. Per prompt, majority@k is `divscope.estimators.majority_at_k` over the
    prompt's responses in `sample_id` order (when present): exact when the prompt has at most
    `n_subsets` k-subsets (always for k = n), otherwise the mean over `n_subsets` random
    k-subsets drawn with a generator seeded from `seed`, the prompt and k, so that the settings
    of one prompt are scored on the same subsets of sample ids.

    Args:
        results: graded responses with `prompt_id`, `correct`, `response` and the `by` columns.
        ks: the k values; default the powers of two up to the fewest samples of any prompt.
        by: the grouping columns (may be empty).
        n_subsets: most k-subsets scored per prompt.
        n_boot: bootstrap resamples of prompts.
        seed: seed of the subsets and of the bootstrap.
        confidence: coverage of the intervals.

    Returns:
        One row per group and k: the `by` columns, `k`, `majority_at_k`, `majority_at_k_low`,
        `majority_at_k_high`, `n_prompts`.

    Raises:
        DivscopeError: a k exceeds the graded samples of some prompt in a group.

    >>> results = pl.DataFrame({"prompt_id": ["a"] * 3,
    ...     "response": ["\\\\boxed{4}", "\\\\boxed{4}", "\\\\boxed{5}"],
    ...     "correct": [False, False, True]})
    >>> majority_at_k_curve(results, [3], by=(), n_boot=10)["majority_at_k"].to_list()
    [0.0]
    """

    def score(group: pl.DataFrame, k: int) -> list[float]:
        scores = []
        for prompt, answers, correct in group.iter_rows():
            stream = zlib.crc32(f"{prompt}\0{k}".encode())
            scores.append(
                majority_at_k(answers, correct, k, n_subsets=n_subsets, seed=seed * 2**32 + stream)
            )
        return scores

    return _per_prompt_curve(
        results,
        ks,
        by=by,
        name="majority_at_k",
        required=("response",),
        score=score,
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
    )


def _answer(response: str | None) -> str | None:
    """The answer a response votes for: its final answer when it has a complete box."""
    if response is None or last_boxed(response) is None:
        return None
    return final_answer(response)


def _counts(group: pl.DataFrame) -> tuple[list[int], list[int]]:
    """Per prompt of a group (rows of prompt_id, answers, correct lists): n and c."""
    grades = group["correct"].to_list()
    return [len(g) for g in grades], [sum(g) for g in grades]


def _per_prompt_curve(
    results: Frame,
    ks: Sequence[int] | None,
    *,
    by: Sequence[str],
    name: str,
    required: Sequence[str],
    score: Callable[[pl.DataFrame, int], list[float]],
    n_boot: int,
    seed: int,
    confidence: float,
) -> pl.DataFrame:
    """Mean over prompts of a per-prompt score at each k, per group, with paired intervals.

    `score(group, k)` gets the group's rows (`prompt_id`, `answers`, `correct`: one row per
    prompt, lists in `sample_id` order) and returns one score per row.
    """
    what = f"{name}_curve"
    lazy = checked_lazy(
        results, ["prompt_id", "correct", *required, *by], what=what, source="results"
    )
    names = lazy.collect_schema().names()
    graded = lazy.drop_nulls("correct")
    if "sample_id" in names:
        graded = graded.sort("sample_id")
    answers = (
        pl.col("response").map_elements(_answer, return_dtype=pl.String)
        if "response" in required
        else pl.lit(None, pl.String)
    )
    frame = graded.select(
        *by,
        "prompt_id",
        answers.alias("answer"),
        "correct",
        *(["benchmark"] if "benchmark" in names else []),
    ).collect()
    if frame.is_empty():
        raise DivscopeError(f"{what}: no graded responses (all `correct` are null).")
    per_prompt = frame.group_by(*by, "prompt_id", maintain_order=True).agg(
        pl.col("answer").alias("answers"), pl.col("correct")
    )
    prompts = frame["prompt_id"].unique().sort().to_list()
    index = {p: i for i, p in enumerate(prompts)}
    benchmarks = (
        prompt_benchmarks(frame, what=what, source="results")
        if "benchmark" in frame.columns
        else {}
    )
    bootstrap = PairedBootstrap.drawn(
        benchmark_codes(prompts, benchmarks), n_boot=n_boot, seed=seed
    )
    sizes = per_prompt["correct"].list.len()
    if ks is None:
        fewest = int(sizes.min())
        ks = [2**i for i in range(fewest.bit_length())]
    rows = []
    groups = per_prompt.group_by(*by, maintain_order=True) if by else [((), per_prompt)]
    for key, group in groups:
        group = group.select("prompt_id", "answers", "correct")
        where = np.array([index[p] for p in group["prompt_id"]])
        for k in ks:
            short = group.filter(pl.col("correct").list.len() < k)
            if short.height:
                where_text = ", ".join(
                    f"{c}={format_value(v)}" for c, v in zip(by, key, strict=True)
                )
                raise DivscopeError(
                    f"{what}: prompt {short['prompt_id'][0]!r} has "
                    f"{short['correct'].list.len()[0]} graded response(s)"
                    f"{' in ' + where_text if by else ''}, fewer than k={k}; draw more "
                    "samples or lower k."
                )
            values = np.full(len(prompts), np.nan)
            values[where] = score(group, k)
            interval = bootstrap.mean(values).interval(confidence)
            row = {**dict(zip(by, key, strict=True)), "k": k, "n_prompts": group.height}
            row |= interval_columns(name, interval)
            rows.append(row)
    columns = [*by, "k", name, f"{name}_low", f"{name}_high", "n_prompts"]
    out = pl.DataFrame(rows).select(columns)
    return out.sort(*by, "k", nulls_last=True) if by else out
