"""Figures of the papers, drawn from your own token tables and cross-sample results.

One function per figure: `(data, ax=None, **options) -> matplotlib.figure.Figure`. Each calls
the analyses in `divscope.analyses` and only draws; the style (palette, sizes, labels) lives in
`divscope.figures.style`. `ax` is one Axes, or a sequence of Axes for a multi-panel figure; by
default a new figure sized for a two-column paper is made. `divscope.figures.gallery` lists
every figure and writes them all (the `divscope plot` command). `data` is a token table
(`divscope.io.scan_token_table("tokens.parquet")`) or any frame with the columns it reads:

>>> import polars as pl
>>> from divscope.figures import percentile_curve
>>> figure = percentile_curve(pl.DataFrame({"js": [0.0, 0.001, 0.02, 0.3]}))
>>> figure.axes[0].get_ylabel()  # then figure.savefig("p.pdf")
'JS divergence, top-p (nats)'
"""

from divscope.figures.cross_sample import (
    cross_sampling_curves,
    delta_alignment,
    takeover_knee,
    threshold_recovery,
    threshold_sensitivity,
    token_pairs,
)
from divscope.figures.distribution import (
    compare_sparsity,
    divergence_histogram,
    lorenz,
    percentile_curve,
    token_profile,
)
from divscope.figures.evolution import evolution
from divscope.figures.failure import failure_roc
from divscope.figures.position import (
    compare_positional_profile,
    early_density,
    positional_profile,
    token_trajectory,
)
from divscope.figures.shift import (
    compare_entropy,
    compare_rank_reordering,
    compare_tail_promotion,
    compare_topk_overlap,
    entropy_by_divergence,
    rank_reordering,
    tail_promotion,
    topk_overlap,
)
from divscope.figures.tokens import wordclouds

__all__ = [
    "compare_entropy",
    "compare_positional_profile",
    "compare_rank_reordering",
    "compare_sparsity",
    "compare_tail_promotion",
    "compare_topk_overlap",
    "cross_sampling_curves",
    "divergence_histogram",
    "delta_alignment",
    "early_density",
    "entropy_by_divergence",
    "evolution",
    "failure_roc",
    "lorenz",
    "percentile_curve",
    "positional_profile",
    "rank_reordering",
    "tail_promotion",
    "takeover_knee",
    "threshold_recovery",
    "threshold_sensitivity",
    "token_pairs",
    "token_profile",
    "token_trajectory",
    "topk_overlap",
    "wordclouds",
]
