"""Text of the analyses' results: the tables and digests that the commands print.

Analyses compute (frames and frozen dataclasses); this module turns their results into text, and
nothing below it imports it. `digest` is what `divscope analyze` prints, `cross_sample_text` the
cross-sample report's tables within it, and `curve_text` the table of a `cross_sampling_curve`
that both print (`divscope cross-sample` prints it alone).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import polars as pl

from divscope.analyses._frames import percentile_label
from divscope.analyses.alignment import DeltaAlignment
from divscope.analyses.cross_sample import REFERENCE, TakeoverKnee, setting_labels
from divscope.analyses.cross_sample_report import CrossSampleReport
from divscope.analyses.difficulty import Difficulty
from divscope.analyses.distribution import MatchedThreshold
from divscope.analyses.populations import Population
from divscope.analyses.summary import CoreSection, Summary, TakeoverSection
from divscope.estimators import Interval
from divscope.schema import SETTING_COLUMNS

PAIRS_SHOWN = 5
"""Token pairs per setting that `cross_sample_text` prints (the report holds 20)."""


def _percent(share: float) -> str:
    return f"{100 * share:.2f}%"


def _heading(title: str) -> list[str]:
    return ["", title, "-" * len(title)]


def _tables(tables: Mapping[str, pl.DataFrame | None]) -> list[str]:
    """Each non-None table under its title, printed compactly."""
    lines: list[str] = []
    with pl.Config(
        tbl_hide_dataframe_shape=True,
        tbl_hide_column_data_types=True,
        float_precision=3,
        tbl_rows=50,
        tbl_cols=20,
        tbl_width_chars=160,
    ):
        for title, table in tables.items():
            if table is not None:
                lines += ["", f"{title}:", str(table)]
    return lines


def digest(result: Summary, *, source: str | os.PathLike) -> str:
    """The text `divscope analyze` prints: a few lines and small tables per paper's section.

    Where a statistic is undefined because its group is empty (no position above the
    threshold, no tail-promoted token, no planning word), it says `n/a` and why.

    Args:
        result: the summary.
        source: the token table's path, for the first line.
    """
    lines = [
        f"{source}: {result.n_tokens:,} tokens, {result.n_responses:,} responses, "
        f"{result.n_prompts:,} prompts"
    ]
    lines += _core_lines(result.core)
    lines += _takeover_lines(result.takeover)
    coverage = result.rast.path_coverage
    lines += _heading("RAST: path coverage")
    lines += population_lines(result.rast.population)
    lines.append(
        f"Base greedy token = trajectory token (PCR): {_interval(coverage.mean)} mean over "
        f"{coverage.n_responses:,} responses, {_interval(coverage.pooled)} pooled over "
        f"{coverage.n_tokens:,} tokens"
    )
    if result.cross_sample is not None:
        lines += _heading("Cross-sampling")
        lines.append(cross_sample_text(result.cross_sample))
    if result.difficulty is not None:
        lines += _difficulty_lines(result.difficulty, result.core.population)
    return "\n".join(lines)


def population_lines(population: Population) -> list[str]:
    """A section's population: what it read, how many responses, and the note when it is not
    the paper's.

    >>> used = Population("takeover", "base", "base", ("rl",), "rl trajectories", 4, 80,
    ...     note="on rl trajectories; the paper uses base rollouts")
    >>> for line in population_lines(used):
    ...     print(line)
    Population: rl trajectories, 4 responses, 80 tokens
    note: on rl trajectories; the paper uses base rollouts
    """
    lines = [
        f"Population: {population.description}, {population.n_responses:,} responses, "
        f"{population.n_tokens:,} tokens"
    ]
    return lines + ([f"note: {population.note}"] if population.note else [])


def _difficulty_lines(difficulty: Difficulty, population: Population) -> list[str]:
    """Sparsity, position and recovery per base pass@1 tertile, and easy − hard, on the core
    section's population."""
    m = difficulty.metric
    table = difficulty.sparsity
    shares = [f"share_above_{t:g}" for t in difficulty.thresholds]
    percentiles = [percentile_label(q) for q in difficulty.percentiles]
    lines = _heading(f"By difficulty (base pass@1 tertiles, {m}, {population.description})")
    for row in table.iter_rows(named=True):
        above = ", ".join(
            f"> {name.removeprefix('share_above_')} {interval_text(row, name)}" for name in shares
        )
        quantiles = ", ".join(f"{q} {row[q]:.3g}" for q in percentiles)
        rates = (
            ""
            if row["pass_at_1_min"] is None
            else f" (pass@1 {row['pass_at_1_min']:.2f}-{row['pass_at_1_max']:.2f})"
        )
        lines.append(
            f"{row['difficulty']}: {row['n_prompts']} prompts{rates}, {row['n_tokens']:,} "
            f"tokens; mean {row['mean']:.4g} [{row['mean_low']:.4g}, {row['mean_high']:.4g}]; "
            f"{above}; {quantiles}"
        )
    for row in difficulty.contrast.drop_nulls("difference").iter_rows(named=True):
        scale = 1 if row["statistic"] == "mean" else 100
        unit = "" if scale == 1 else " points"
        values = (row["difference"], row["difference_low"], row["difference_high"])
        low_high = ", ".join(f"{scale * v:+.3g}" for v in values[1:])
        lines.append(
            f"easy - hard, {row['statistic']}: {scale * values[0]:+.3g}{unit} [{low_high}]"
        )
    profile = difficulty.positional.pivot(
        on="difficulty", index=["bin_start", "bin_end"], values="mean"
    )
    early = difficulty.early_density.filter(pl.col("bin") == 0)
    density = ", ".join(f"{d} {v:.2f}" for d, v in early.select("difficulty", "density").rows())
    lines += _tables({f"Mean {m} by relative position": profile})
    lines.append(f"Top 1% in the first {early['bin_end'][0]:.0%} of responses: density {density}")
    if difficulty.recovery is not None:
        for (level,), curve in difficulty.recovery.partition_by(
            "difficulty", as_dict=True, maintain_order=True
        ).items():
            lines += ["", f"Recovery, {level} prompts:", curve_text(curve.drop("difficulty"))]
    return lines + [f"note: {note}" for note in difficulty.notes]


def _interval(interval: Interval) -> str:
    return f"{_percent(interval.estimate)} [{_percent(interval.low)}, {_percent(interval.high)}]"


def _core_lines(core: CoreSection) -> list[str]:
    m, s = core.metric, core.sparsity
    lines = _heading(f"Sparse but Critical ({m})") + population_lines(core.population)
    if core.rescaled is not None:
        lines.append(f"JS thresholds carried to {m} at the same quantile of this table:")
        lines += [
            f"  {t.reference} > {t.threshold:g} ({_percent(t.share_above)} of tokens) → "
            f"{t.metric} > {t.value:.4g}" + _tie_note(t)
            for t in core.rescaled
        ]
    below = ", ".join(f"{_percent(v)} < {t:.4g}" for t, v in s.share_below.items())
    profile = core.positional_profile.drop_nulls("mean")
    lines += [
        f"Sparsity: {below}; mean {s.mean:.4g}",
        "Percentiles: " + ", ".join(f"p{q:g} {v:.4g}" for q, v in s.percentiles.items()),
    ]
    if profile.height:
        first, last = profile.row(0, named=True), profile.row(-1, named=True)
        lines.append(
            f"Position: mean {m} {first['mean']:.4g} in [{first['bin_start']:.0%}, "
            f"{first['bin_end']:.0%}) of responses, {last['mean']:.4g} in "
            f"[{last['bin_start']:.0%}, {last['bin_end']:.0%}]"
        )
    lines += [_rank_line(core), _tail_line(core), _words_line(core)]
    lines += _tables(
        {
            "Entropy by divergence": core.entropy_by_divergence,
            "Top-k overlap above thresholds": core.topk_overlap,
            "Comparison": core.comparison,
        }
    )
    for name, side in (core.comparison_populations or {}).items():
        lines.append(f"Comparison, {name}: {side.text}")
    return lines


def _tie_note(matched: MatchedThreshold) -> str:
    if matched.metric_share_above == matched.share_above:
        return ""
    return f" ({_percent(matched.metric_share_above)} of tokens: values tie there)"


def _takeover_lines(takeover: TakeoverSection) -> list[str]:
    m, lz = takeover.metric, takeover.lorenz
    mass = ", ".join(
        f"{q:.0%} of the mass in {_percent(v)} of tokens"
        for q, v in lz.token_share_for_mass.items()
    )
    first_bin = takeover.early_density.row(0, named=True)
    iou = "; ".join(
        f"top {row['share']:.0%} {row['iou']:.3f} (chance {row['chance_iou']:.3f})"
        for row in takeover.entropy_iou.drop_nulls("iou").iter_rows(named=True)
    )
    lines = _heading(f"Decision-token takeover ({m})") + population_lines(takeover.population)
    lines += [
        f"Concentration: Gini {lz.gini:.3f}; {mass}",
        f"Position: the top 1% sit at density {first_bin['density']:.2f} in the first "
        f"{first_bin['bin_end']:.0%} of responses (all tokens {first_bin['density_all']:.2f})",
        _planning_line(takeover),
    ]
    if takeover.failure_auroc is not None:
        f = takeover.failure_auroc
        lines.append(
            f"Failure AUROC (top-{f.top_n} mean, {f.n_failures}/{f.n_responses} wrong): {m} "
            f"{f.divergence.estimate:.3f} [{f.divergence.low:.3f}, {f.divergence.high:.3f}], "
            f"base entropy {f.entropy.estimate:.3f} [{f.entropy.low:.3f}, {f.entropy.high:.3f}]"
        )
    lines.append(f"IoU with the top base-entropy tokens: {iou or 'n/a (no tokens)'}")
    return lines + list(takeover.notes)


def _rank_line(core: CoreSection) -> str:
    rank = core.rank_reordering
    head = f"High divergence ({core.metric} > {rank.threshold:.4g}): {rank.n_positions:,} positions"
    if not rank.n_positions:
        return f"{head}; RL top-1 rank in base n/a (no position above the threshold)"
    return (
        f"{head}; RL top-1 is base top-1 at {_percent(rank.within_base_top1[1])}, within base "
        f"top-3 at {_percent(rank.within_base_top3[1])}"
    )


def _tail_line(core: CoreSection) -> str:
    tail = core.tail_promotion
    if not tail.n_positions:
        return "Tail promotion: no high-divergence positions"
    mean = f"{tail.tail_rl_prob_mean:.3f}" if tail.n_tail else "n/a (no tail positions)"
    return (
        f"Tail promotion: {tail.n_tail:,} positions ({_percent(tail.n_tail / tail.n_positions)}) "
        f"take an RL top-1 with base probability < {tail.tail_cutoff:g}; their mean RL "
        f"probability {mean}"
    )


def _words_line(core: CoreSection, top: int = 8) -> str:
    t, words = core.thresholds, core.word_frequencies
    groups = []
    for group, sign, threshold in (("high", ">", t.words_high), ("low", "<", t.words_low)):
        rows = words.filter(group=group).head(top)
        listed = ", ".join(f"{w!r} {_percent(s)}" for w, s in rows.select("word", "share").rows())
        groups.append(f"{core.metric} {sign} {threshold:.4g}: {listed or 'n/a (no words)'}")
    return "Words: " + "; ".join(groups)


def _planning_line(takeover: TakeoverSection) -> str:
    plan = takeover.planning_enrichment
    paper = f"the paper: {plan.paper_share_all:.1%} of all tokens, with its own lexicon"
    if not plan.share_all > 0:  # zero, or NaN for an empty table
        return f"Planning words: n/a (no planning words in the table; {paper})"
    return (
        f"Planning words ({plan.n_words}-word lexicon): {_percent(plan.share_top)} of the top "
        f"{plan.top_share:.0%} vs {_percent(plan.share_all)} of all tokens "
        f"(x{plan.enrichment:.2f}; {paper})"
    )


def cross_sample_text(report: CrossSampleReport) -> str:
    """The cross-sample report as compact text tables, one section per part present."""
    measure = "mean@n" if report.recovery_at is None else f"pass@{report.recovery_at}"
    sections = [
        f"Cross-sample results: recovery = (P - P_base) / (P_ref - P_base) on {measure}, "
        f"reference: {report.reference}.\n" + curve_text(report.curve)
    ]
    if report.takeover_recovery is not None:
        sections.append(report.takeover_recovery)
    if report.curve_per_benchmark is not None:
        sections.append("Per benchmark:\n" + curve_text(report.curve_per_benchmark))
    if report.pass_at_k is not None:
        sections.append("pass@k and majority@k:\n" + _pass_at_k_text(report.pass_at_k))
    if report.differences is not None:
        sections.append(
            f"Differences ({measure}, points):\n" + _differences_text(report.differences)
        )
    if report.flips is not None:
        sections.append("Flips against the matched base control:\n" + _flips_text(report.flips))
    if report.threshold_sensitivity is not None:
        sections.append(
            "Threshold sensitivity (effective: independent draw / coupled draw):\n"
            + _sensitivity_text(report.threshold_sensitivity)
        )
    if report.map_agreement is not None:
        sections.append(
            "Map agreement (switch positions whose online JS exceeds eps):\n"
            + _agreement_text(report.map_agreement)
        )
    if report.switch_pairs is not None:
        sections.append(
            "Switched token pairs (primary -> emitted):\n" + _pairs_text(report.switch_pairs)
        )
    if report.takeover_planning is not None:
        sections.append(
            "Planning words in the takeover set:\n" + _planning_text(report.takeover_planning)
        )
    if report.knee is not None:
        sections.append(knee_text(report.knee))
    if report.delta_alignment is not None:
        sections.append(
            "Delta alignment (cosine of the small and large pairs' logit deltas):\n"
            + _alignment_text(report.delta_alignment)
        )
    sections += [f"note: {note}" for note in report.notes]
    return "\n\n".join(sections)


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
    intervals (labelled pooled beside the per-benchmark averages, where present), the
    per-benchmark averages, and the switched and effective shares of generated tokens
    (pooled), effective against an independent draw of the primary (the papers' count) and,
    where present, against its coupled draw.

    >>> curve = pl.DataFrame({"policy": ["base", "forward"], "budget": [-1, 2],
    ...     "n_responses": [4, 4], "accuracy": [0.25, 0.75], "accuracy_low": [0.0, 0.5],
    ...     "accuracy_high": [0.5, 1.0], "recovery": [0.0, 0.5], "recovery_low": [0.0, 0.2],
    ...     "recovery_high": [0.0, 0.9], "switch_share_pooled": [0.0, 0.05],
    ...     "effective_share_pooled": [0.0, 0.02]})
    >>> print(curve_text(curve))
    policy   budget  n  accuracy [95% CI]   recovery [95% CI]  switched  effective
    base        inf  4   25.0% [0.0, 50.0]   0.00 [0.00, 0.00]     0.00%      0.00%
    forward       2  4  75.0% [50.0, 100.0]  0.50 [0.20, 0.90]     5.00%      2.00%
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
    pooled = ", pooled" if macro else ""
    header += [*(["benchmark"] if benchmark else []), "budget", "n", f"accuracy{pooled} [95% CI]"]
    header += [f"pass@k{pooled} [95% CI]"] if pass_k else []
    header += [f"recovery{pooled} [95% CI]"]
    header += ["acc. per benchmark", "recovery per benchmark"] if macro else []
    header += ["switched", "effective"]
    coupled = "effective_coupled_share_pooled" in curve.columns
    header += ["eff. coupled"] if coupled else []
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
        cells += [share_text(row.get("effective_coupled_share_pooled"))] if coupled else []
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
                ("effective_per_response", "effective_coupled_per_response", "{:.1f}".format),
                ("effective_ratio", "effective_coupled_ratio", lambda v: share_text(v, 1)),
                ("effective_token_share", "effective_coupled_token_share", share_text),
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


def knee_text(knee: TakeoverKnee) -> str:
    """The knee's line: the point (its rate), ρ̄, the measure and the recovery, averaged as the
    knee says (pooled ones labelled), and what the recovery is against."""
    measure = "accuracy" if knee.k is None else f"pass@{knee.k}"
    if knee.knee_index is None:
        return (
            f"Takeover knee of `{knee.policy}`: none ({knee.curve.height} settings, {measure}; "
            f"recovery {knee.recovery_against})."
        )
    point = knee.curve.row(knee.knee_index, named=True)
    budgets = knee.curve["budget"].n_unique() > 1
    at = point["setting"] or (f"budget {budget_text(point['budget'])}" if budgets else "")
    at = f" at {at}" if at else ""
    macro = knee.average == "benchmarks"
    average = " per benchmark" if macro else ""
    pooled = (
        f" (pooled {interval_text(point, f'{knee.measure}_pooled')}, recovery "
        f"{interval_text(point, 'recovery_pooled', percent=False)})"
        if macro
        else ""
    )
    return (
        f"Takeover knee of `{knee.policy}`{at}: mean takeover rate "
        f"{share_text(point['rho_mean'])} (pooled {share_text(point['switch_share'])}), "
        f"{measure}{average} {interval_text(point, knee.measure)}, recovery{average} "
        f"{interval_text(point, 'recovery', percent=False)}{pooled}, {knee.recovery_against}."
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
