"""`divscope analyze`: the headline statistics of a token table, printed and saved as JSON."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from divscope.cli import options

if TYPE_CHECKING:
    from divscope.analyses import Summary


def analyze(
    tokens: options.TokenTable,
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the JSON summary.")],
    compare: options.Compare = None,
    label: options.Label = None,
    xs: options.CrossSample = None,
    metric: options.Metric = "js",
    n_boot: options.NBoot = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of every bootstrap.")] = 0,
) -> None:
    """Summarize where the RL model departs from the base: sparsity, concentration, position,
    entropy, top-k overlap, rank reordering, tail promotion, planning words, failure AUROC;
    with --compare, side-by-side sparsity; with --xs, accuracy and recovery per setting (policy,
    budget, eps and the policy parameters).
    """
    import json

    from divscope.analyses import summary
    from divscope.errors import DivscopeError
    from divscope.io import read_metadata, read_table, scan_token_table

    tables = options.compared_tables(compare, label)
    result = summary(
        scan_token_table(tokens),
        metric,
        label=options.table_name(tokens),
        compare_with={name: scan_token_table(path) for name, path in tables.items()},
        cross_sample=read_table(xs) if xs is not None else None,
        n_boot=n_boot,
        seed=seed,
    )
    try:
        metadata = read_metadata(tokens)
    except DivscopeError:
        metadata = None
    document = {"tokens": str(tokens), "metadata": metadata, **result.to_dict()}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n")
    typer.echo(_format(result, source=tokens))
    typer.echo(f"\nWrote {out}")


def _percent(share: float) -> str:
    return f"{100 * share:.2f}%"


def _format(result: Summary, *, source: Path) -> str:
    """The printed digest: a few lines and small tables."""
    import polars as pl

    m = result.metric
    s, lz = result.sparsity, result.lorenz
    rank, tail = result.rank_reordering, result.tail_promotion
    below = ", ".join(f"{_percent(v)} < {t:g}" for t, v in s.share_below.items())
    mass = ", ".join(
        f"{q:.0%} of the mass in {_percent(v)} of tokens"
        for q, v in lz.token_share_for_mass.items()
    )
    first_bin = result.early_density.row(0, named=True)
    plan = result.planning_enrichment
    lines = [
        f"{source}: {result.n_tokens:,} tokens, {result.n_responses:,} responses, "
        f"{result.n_prompts:,} prompts; metric {m}",
        f"Sparsity: {below}; mean {s.mean:.4g}",
        "Percentiles: " + ", ".join(f"p{q:g} {v:.4g}" for q, v in s.percentiles.items()),
        f"Concentration: Gini {lz.gini:.3f}; {mass}",
        f"Position: the top 1% sit at density {first_bin['density']:.2f} in the first "
        f"{first_bin['bin_end']:.0%} of responses (all tokens {first_bin['density_all']:.2f})",
        f"High divergence ({m} > {rank.threshold:g}): {rank.n_positions:,} positions; RL top-1 is "
        f"base top-1 at {_percent(rank.within_base_top1[1])}, within base top-3 at "
        f"{_percent(rank.within_base_top3[1])}",
        f"Tail promotion: {tail.n_tail:,} positions ({_percent(tail.n_tail / tail.n_positions)}) "
        f"take an RL top-1 with base probability < {tail.tail_cutoff:g}; their mean RL "
        f"probability {tail.tail_rl_prob_mean:.3f}"
        if tail.n_positions
        else "Tail promotion: no high-divergence positions",
        f"Planning words: {_percent(plan.share_top)} of the top {plan.top_share:.0%} vs "
        f"{_percent(plan.share_all)} of all tokens (x{plan.enrichment:.2f})",
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
