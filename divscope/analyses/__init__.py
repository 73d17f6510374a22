"""Pure analyses of token tables and cross-sample results.

Every function takes a polars DataFrame or LazyFrame and returns a frame or a small frozen
dataclass: no torch, no printing, no files. `metric` defaults to `js` and accepts any divergence
column of the token table. Each statistic is defined here exactly once. `divscope.analyze`
(in `divscope.analyses.analyze`) runs `summary` file to file for `divscope analyze`.
"""

from divscope.analyses.cross_sampling import (
    TakeoverKnee,
    cross_sampling_curve,
    pass_at_k_curve,
    pooled_controls,
    setting_labels,
    takeover_knee,
)
from divscope.analyses.distribution import (
    Histogram,
    Lorenz,
    Sparsity,
    compare,
    histogram,
    lorenz,
    sparsity,
)
from divscope.analyses.evolution import evolution
from divscope.analyses.failure import (
    FailureAUROC,
    failure_auroc,
    failure_roc,
    response_scores,
    roc_points,
)
from divscope.analyses.position import early_density, example_response, positional_profile
from divscope.analyses.sampling import Sample, high_divergence_sample, sample_rows
from divscope.analyses.shift import (
    EntropyDensity,
    RankReordering,
    TailPromotion,
    entropy_by_divergence,
    entropy_density,
    rank_reordering,
    tail_promotion,
    topk_overlap,
)
from divscope.analyses.stats import (
    Interval,
    auroc,
    bootstrap_ci,
    pass_at_k,
    percentile_interval,
    problem_bootstrap_weights,
    weighted_auroc,
)
from divscope.analyses.summary import Summary, summary, to_jsonable
from divscope.analyses.tokens import (
    PLANNING_WORDS,
    PlanningEnrichment,
    most_frequent_words,
    normalized_token,
    planning_enrichment,
    token_profile,
    word_frequencies,
)

__all__ = [
    "PLANNING_WORDS",
    "EntropyDensity",
    "FailureAUROC",
    "Histogram",
    "Interval",
    "Lorenz",
    "PlanningEnrichment",
    "RankReordering",
    "Sample",
    "Sparsity",
    "Summary",
    "TailPromotion",
    "TakeoverKnee",
    "auroc",
    "bootstrap_ci",
    "compare",
    "cross_sampling_curve",
    "early_density",
    "entropy_by_divergence",
    "entropy_density",
    "evolution",
    "example_response",
    "failure_auroc",
    "failure_roc",
    "high_divergence_sample",
    "histogram",
    "lorenz",
    "most_frequent_words",
    "normalized_token",
    "pass_at_k",
    "pass_at_k_curve",
    "percentile_interval",
    "planning_enrichment",
    "pooled_controls",
    "positional_profile",
    "problem_bootstrap_weights",
    "rank_reordering",
    "response_scores",
    "roc_points",
    "sample_rows",
    "setting_labels",
    "sparsity",
    "summary",
    "tail_promotion",
    "takeover_knee",
    "to_jsonable",
    "token_profile",
    "topk_overlap",
    "weighted_auroc",
    "word_frequencies",
]
