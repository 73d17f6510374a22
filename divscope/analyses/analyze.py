"""`analyze`: a token table (and optional comparisons) in, the `Summary` as JSON on disk out.

What `divscope analyze` runs: `summary` over the tables read from files, written atomically
with the token table's provenance; `digest` is the text the command prints. Unlike the other
analyses, `analyze` reads and writes files; `digest` is pure.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import polars as pl

from divscope.analyses.summary import Summary, summary
from divscope.defaults import METRIC, N_BOOT, SEED
from divscope.errors import DivscopeError


def analyze(
    tokens: str | os.PathLike,
    out: str | os.PathLike,
    *,
    compare: Mapping[str, str | os.PathLike] | None = None,
    cross_sample: str | os.PathLike | None = None,
    metric: str = METRIC,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    overwrite: bool = False,
) -> Summary:
    """Summarize a token table and write the summary as JSON.

    The JSON holds `tokens` (the path), `metadata` (the token table's `divscope` metadata, or
    null when it has none) and every field of the `Summary`, frames as lists of rows and NaN as
    null.

    Args:
        tokens: the token table (a .parquet file or a directory of parts).
        out: the JSON file, written atomically.
        compare: label -> another token table on the same trajectories (e.g. the SFT control),
            for side-by-side sparsity; `tokens` is labelled by its file name.
        cross_sample: cross-sample results (Parquet or JSONL) for accuracy and recovery.
        metric: the divergence column.
        n_boot: bootstrap resamples of every interval.
        seed: seed of every bootstrap.
        overwrite: replace an existing `out`.

    Returns:
        The `Summary` as written.

    Raises:
        DivscopeError: an existing `out` without `overwrite`, a missing table or column.

    Example:
        >>> import divscope
        >>> result = divscope.analyze(  # doctest: +SKIP
        ...     "runs/lab-tokens.parquet", "runs/summary.json", cross_sample="runs/xs.parquet")
        >>> print(digest(result, source="runs/lab-tokens.parquet"))  # doctest: +SKIP
    """
    from divscope.io import (
        TokenTableWriter,
        read_metadata,
        read_table,
        scan_token_table,
        table_name,
        write_json,
    )

    TokenTableWriter.check_target(out, overwrite=overwrite)
    result = summary(
        scan_token_table(tokens),
        metric,
        label=table_name(tokens),
        compare_with={name: scan_token_table(path) for name, path in (compare or {}).items()},
        cross_sample=read_table(cross_sample) if cross_sample is not None else None,
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


def digest(result: Summary, *, source: str | os.PathLike) -> str:
    """The text `divscope analyze` prints: a few lines and small tables.

    Where a statistic is undefined because its group is empty (no position above the
    threshold, no tail-promoted token, no planning word), it says `n/a` and why.

    Args:
        result: the summary.
        source: the token table's path, for the first line.
    """
    m = result.metric
    s, lz = result.sparsity, result.lorenz
    below = ", ".join(f"{_percent(v)} < {t:g}" for t, v in s.share_below.items())
    mass = ", ".join(
        f"{q:.0%} of the mass in {_percent(v)} of tokens"
        for q, v in lz.token_share_for_mass.items()
    )
    first_bin = result.early_density.row(0, named=True)
    lines = [
        f"{source}: {result.n_tokens:,} tokens, {result.n_responses:,} responses, "
        f"{result.n_prompts:,} prompts; metric {m}",
        f"Sparsity: {below}; mean {s.mean:.4g}",
        "Percentiles: " + ", ".join(f"p{q:g} {v:.4g}" for q, v in s.percentiles.items()),
        f"Concentration: Gini {lz.gini:.3f}; {mass}",
        f"Position: the top 1% sit at density {first_bin['density']:.2f} in the first "
        f"{first_bin['bin_end']:.0%} of responses (all tokens {first_bin['density_all']:.2f})",
        _rank_line(result),
        _tail_line(result),
        _planning_line(result),
    ]
    if result.failure_auroc is not None:
        f = result.failure_auroc
        lines.append(
            f"Failure AUROC (top-{f.top_n} mean, {f.n_failures}/{f.n_responses} wrong): {m} "
            f"{f.divergence.estimate:.3f} [{f.divergence.low:.3f}, {f.divergence.high:.3f}], "
            f"base entropy {f.entropy.estimate:.3f} [{f.entropy.low:.3f}, {f.entropy.high:.3f}]"
        )
    lines += list(result.notes)
    tables = {
        "Entropy by divergence": result.entropy_by_divergence,
        "Top-k overlap above thresholds": result.topk_overlap,
        "Comparison": result.comparison,
        "Cross-sampling": result.cross_sampling,
    }
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
    return "\n".join(lines)


def _rank_line(result: Summary) -> str:
    rank = result.rank_reordering
    head = f"High divergence ({result.metric} > {rank.threshold:g}): {rank.n_positions:,} positions"
    if not rank.n_positions:
        return f"{head}; RL top-1 rank in base n/a (no position above the threshold)"
    return (
        f"{head}; RL top-1 is base top-1 at {_percent(rank.within_base_top1[1])}, within base "
        f"top-3 at {_percent(rank.within_base_top3[1])}"
    )


def _tail_line(result: Summary) -> str:
    tail = result.tail_promotion
    if not tail.n_positions:
        return "Tail promotion: no high-divergence positions"
    mean = f"{tail.tail_rl_prob_mean:.3f}" if tail.n_tail else "n/a (no tail positions)"
    return (
        f"Tail promotion: {tail.n_tail:,} positions ({_percent(tail.n_tail / tail.n_positions)}) "
        f"take an RL top-1 with base probability < {tail.tail_cutoff:g}; their mean RL "
        f"probability {mean}"
    )


def _planning_line(result: Summary) -> str:
    plan = result.planning_enrichment
    if not plan.share_all > 0:  # zero, or NaN for an empty table
        return "Planning words: n/a (no planning words in the table)"
    return (
        f"Planning words: {_percent(plan.share_top)} of the top {plan.top_share:.0%} vs "
        f"{_percent(plan.share_all)} of all tokens (x{plan.enrichment:.2f})"
    )
