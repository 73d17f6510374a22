"""`analyze`: a token table (and optional comparisons) in, the `Summary` as JSON on disk out.

What `divscope analyze` runs: `summary` over the tables read from files, written atomically
with the token table's provenance; `digest` is the text the command prints. Unlike the other
analyses, `analyze` reads and writes files; `digest` is pure.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import polars as pl

from divscope.analyses._frames import percentile_label
from divscope.analyses.cross_sample_report import curve_text, interval_text
from divscope.analyses.difficulty import Difficulty, difficulty_tertiles
from divscope.analyses.distribution import MatchedThreshold
from divscope.analyses.stats import Interval
from divscope.analyses.summary import CoreSection, Summary, TakeoverSection, summary
from divscope.defaults import CORE_METRIC, N_BOOT, SEED, TAKEOVER_METRIC
from divscope.errors import DivscopeError


def analyze(
    tokens: str | os.PathLike,
    out: str | os.PathLike,
    *,
    compare: Mapping[str, str | os.PathLike] | None = None,
    cross_sample: str | os.PathLike | None = None,
    reference: str | os.PathLike | None = None,
    recovery_at: int | None = None,
    differences: Sequence[str] | None = None,
    difficulty: str | os.PathLike | None = None,
    difficulty_model: str | None = None,
    metric: str | None = None,
    core_metric: str = CORE_METRIC,
    takeover_metric: str = TAKEOVER_METRIC,
    rescale_thresholds: bool = False,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    overwrite: bool = False,
) -> Summary:
    """Summarize a token table paper by paper and write the summary as JSON.

    The JSON holds `tokens` (the path), `metadata` (the token table's `divscope` metadata, or
    null when it has none) and every field of the `Summary`: `n_tokens`, `n_responses`,
    `n_prompts`, the sections `core`, `takeover` and `rast` (each with its metric and paper),
    `cross_sample` (null without results) and `difficulty` (null without `difficulty`),
    frames as lists of rows and NaN as null.

    Args:
        tokens: the token table (a .parquet file or a directory of parts).
        out: the JSON file, written atomically.
        compare: label -> another token table on the same trajectories (e.g. the SFT control),
            for side-by-side sparsity; `tokens` is labelled by its file name.
        cross_sample: cross-sample results (Parquet or JSONL) for accuracy and recovery.
        reference: the upper bound of recovery: an existing file of graded responses of a third
            model (read with `read_table`), else a policy label of the results; default the
            matched `rl` control.
        recovery_at: recovery on pass@k at this k instead of mean@n.
        differences: pairs of settings to compare with paired CIs, "A - B" with each side
            column=value[,column=value], e.g. "policy=rl-replace - policy=base-greedy".
        difficulty: graded base responses (`divscope grade` output, or cross-sample results
            with the `base` control) whose per-prompt pass@1 tertiles (`difficulty_tertiles`)
            split the statistics (`by_difficulty`; recovery too with `cross_sample`).
        difficulty_model: the base model's `model` value when `difficulty` holds several
            models' responses.
        metric: the divergence column of both sections; overrides `core_metric` and
            `takeover_metric` when given.
        core_metric: the core paper's statistics' column.
        takeover_metric: the takeover paper's statistics' column.
        rescale_thresholds: carry the core paper's JS thresholds to a non-JS core metric at
            the same quantile instead of refusing.
        n_boot: bootstrap resamples of every interval.
        seed: seed of every bootstrap.
        overwrite: replace an existing `out`.

    Returns:
        The `Summary` as written.

    Raises:
        DivscopeError: an existing `out` without `overwrite`, a missing table, file or column,
            or JS thresholds on another core metric without `rescale_thresholds`.

    Example (`lab_tokens`: the token table of the lab's first 8 trajectories, see conftest.py):
        >>> import tempfile
        >>> import divscope
        >>> tmp = tempfile.TemporaryDirectory()
        >>> result = divscope.analyze(lab_tokens, f"{tmp.name}/summary.json")
        >>> result.n_responses, result.core.metric, result.takeover.metric
        (8, 'js', 'ce_base_rl')
        >>> tmp.cleanup()
    """
    from divscope.io import (
        TokenTableWriter,
        read_metadata,
        read_reference,
        read_table,
        scan_token_table,
        table_name,
        write_json,
    )

    TokenTableWriter.check_target(out, overwrite=overwrite)
    result = summary(
        scan_token_table(tokens),
        metric,
        core_metric=core_metric,
        takeover_metric=takeover_metric,
        rescale_thresholds=rescale_thresholds,
        label=table_name(tokens),
        compare_with={name: scan_token_table(path) for name, path in (compare or {}).items()},
        cross_sample=read_table(cross_sample) if cross_sample is not None else None,
        reference=read_reference(reference),
        recovery_at=recovery_at,
        differences=tuple(differences or ()),
        difficulty=None
        if difficulty is None
        else difficulty_tertiles(read_table(difficulty), model=difficulty_model),
        n_boot=n_boot,
        seed=seed,
    )
    try:
        metadata = read_metadata(tokens)
    except DivscopeError:
        metadata = None
    document = {"tokens": str(tokens), "metadata": metadata, **result.to_dict()}
    write_json(document, out, overwrite=overwrite)
    return result


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
    lines.append(
        f"Base greedy token = trajectory token (PCR; RAST reads it on the RL model's "
        f"trajectories): {_interval(coverage.mean)} mean over {coverage.n_responses:,} "
        f"responses, {_interval(coverage.pooled)} pooled over {coverage.n_tokens:,} tokens"
    )
    if result.cross_sample is not None:
        lines += _heading("Cross-sampling")
        lines.append(result.cross_sample.to_text())
    if result.difficulty is not None:
        lines += _difficulty_lines(result.difficulty)
    return "\n".join(lines)


def _difficulty_lines(difficulty: Difficulty) -> list[str]:
    """Sparsity, position and recovery per base pass@1 tertile, and easy − hard."""
    m = difficulty.metric
    table = difficulty.sparsity
    shares = [f"share_above_{t:g}" for t in difficulty.thresholds]
    percentiles = [percentile_label(q) for q in difficulty.percentiles]
    lines = _heading(f"By difficulty (base pass@1 tertiles, {m})")
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
    lines = _heading(f"Sparse but Critical ({m})")
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
    lines = _heading(f"Decision-token takeover ({m})")
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
    if not plan.share_all > 0:  # zero, or NaN for an empty table
        return "Planning words: n/a (no planning words in the table)"
    return (
        f"Planning words: {_percent(plan.share_top)} of the top {plan.top_share:.0%} vs "
        f"{_percent(plan.share_all)} of all tokens (x{plan.enrichment:.2f})"
    )
