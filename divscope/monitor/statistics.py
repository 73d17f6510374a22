"""The statistics the monitor logs at each measurement, computed with the analyses that
`divscope analyze` runs (`divscope.analyses`), on the probe's token table of one step.

Each is defined once, in the analysis it comes from; this module only names and picks them:

- `divscope/js_above_0.1`: share of tokens with js > 0.1 (`topk_overlap`'s count at 0.1 over
  the tokens; the core paper's high-divergence cut, Figs. 9 and 11).
- `divscope/js_below_0.001`: share of tokens with js < 1e-3 (`sparsity`'s `share_below`).
- `divscope/js_mean`, `divscope/js_p50`, `_p90`, `_p95`, `_p99`: mean and percentiles of js
  (`sparsity`; NumPy's linear interpolation).
- `divscope/ce_gini`: Gini coefficient of ce_base_rl (`lorenz`; the takeover paper's
  concentration).
- `divscope/planning_share_top_1pct`: share of planning words among the top 1% of tokens by
  ce_base_rl (`planning_enrichment(..., top_share=0.01).share_top`).
- `divscope/overlap_1`: mean overlap_1 (the base and policy top-1 tokens agree) over all tokens,
  and `divscope/overlap_1_js_above_0.1` over the tokens with js > 0.1 (`topk_overlap`, Fig. 9;
  NaN when there are none).
- `divscope/n_tokens`, `divscope/n_responses`: the size of the probe's table.
"""

from __future__ import annotations

import math

import polars as pl

from divscope.analyses import lorenz, planning_enrichment, sparsity, topk_overlap

JS_HIGH = 0.1
"""js above this counts as a high-divergence token (the core paper's threshold)."""
JS_NEAR_ZERO = 1e-3
"""js below this counts as near zero."""
PERCENTILES: tuple[float, ...] = (50, 90, 95, 99)
"""The js percentiles logged."""
TOP_SHARE = 0.01
"""Share of tokens, by ce_base_rl, whose planning words are counted."""
PREFIX = "divscope/"
"""Prefix of every logged name."""

STATISTICS: tuple[str, ...] = (
    f"{PREFIX}js_above_{JS_HIGH:g}",
    f"{PREFIX}js_below_{JS_NEAR_ZERO:g}",
    f"{PREFIX}js_mean",
    *(f"{PREFIX}js_p{q:g}" for q in PERCENTILES),
    f"{PREFIX}ce_gini",
    f"{PREFIX}planning_share_top_1pct",
    f"{PREFIX}overlap_1",
    f"{PREFIX}overlap_1_js_above_{JS_HIGH:g}",
    f"{PREFIX}n_tokens",
    f"{PREFIX}n_responses",
)
"""The names `step_statistics` returns, in order (the callback adds `divscope/seconds`)."""


def step_statistics(tokens: pl.DataFrame | pl.LazyFrame) -> dict[str, float]:
    """The monitor's statistics of one step's token table (see the module's docstring).

    Args:
        tokens: a token table (`js`, `ce_base_rl`, `token`, `overlap_1`, `prompt_id`,
            `sample_id`), e.g. `ProbeScorer.score`'s.

    Returns:
        `STATISTICS` -> value, as floats (NaN where a statistic has no tokens).

    >>> frame = pl.DataFrame({
    ...     "prompt_id": ["a"] * 4, "sample_id": [0] * 4, "token": [" the", " Wait", " x", " so"],
    ...     "js": [0.0, 0.0005, 0.2, 0.4], "ce_base_rl": [0.0, 0.0, 0.0, 1.0],
    ...     "overlap_1": [1.0, 1.0, 0.0, 1.0]})
    >>> stats = step_statistics(frame)
    >>> stats["divscope/js_above_0.1"], stats["divscope/js_below_0.001"], stats["divscope/ce_gini"]
    (0.5, 0.5, 0.75)
    >>> stats["divscope/overlap_1"], stats["divscope/overlap_1_js_above_0.1"]
    (0.75, 0.5)
    """
    frame = tokens.collect() if isinstance(tokens, pl.LazyFrame) else tokens
    spread = sparsity(frame, "js", thresholds=(JS_NEAR_ZERO,), percentiles=PERCENTILES)
    overlap = topk_overlap(frame, "js", thresholds=(-math.inf, JS_HIGH), ks=(1,))
    counts, means = overlap["count"].to_list(), overlap["overlap_1"].to_list()
    n = spread.n_tokens
    values = {
        f"js_above_{JS_HIGH:g}": counts[1] / n if n else math.nan,
        f"js_below_{JS_NEAR_ZERO:g}": spread.share_below[JS_NEAR_ZERO],
        "js_mean": spread.mean,
        **{f"js_p{q:g}": spread.percentiles[float(q)] for q in PERCENTILES},
        "ce_gini": lorenz(frame, "ce_base_rl").gini if n else math.nan,
        "planning_share_top_1pct": planning_enrichment(
            frame, "ce_base_rl", top_share=TOP_SHARE
        ).share_top,
        "overlap_1": means[0],
        f"overlap_1_js_above_{JS_HIGH:g}": means[1],
        "n_tokens": n,
        "n_responses": frame.select("prompt_id", "sample_id").n_unique() if frame.height else 0,
    }
    return {
        f"{PREFIX}{name}": math.nan if value is None else float(value)
        for name, value in values.items()
    }
