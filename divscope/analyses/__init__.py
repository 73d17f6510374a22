"""Pure analyses of token tables and cross-sample results.

Every function takes a polars DataFrame or LazyFrame and returns a frame or a small frozen
dataclass: no torch, no printing, no files. `metric` defaults to `js` and accepts any divergence
column of the token table. Each statistic is defined here exactly once; the generic estimators
(pass@k, majority@k, AUROC, the problem bootstrap) live in `divscope.estimators`.
`divscope.analyze` (in `divscope.analyses.analyze`) runs `summary` file to file for
`divscope analyze`.
"""

from divscope.analyses.alignment import DeltaAlignment, delta_alignment
from divscope.analyses.controls import Setting, Settings, parse_difference, parse_setting
from divscope.analyses.coverage import PathCoverage, path_coverage
from divscope.analyses.cross_sample import (
    Reference,
    TakeoverKnee,
    cross_sampling_curve,
    majority_at_k_curve,
    pass_at_k_curve,
    recovery_reference,
    setting_difference,
    setting_differences,
    setting_labels,
    takeover_knee,
)
from divscope.analyses.cross_sample_report import CrossSampleReport, cross_sample_report
from divscope.analyses.difficulty import (
    DIFFICULTY,
    Difficulty,
    by_difficulty,
    difficulty_tertiles,
)
from divscope.analyses.distribution import (
    Histogram,
    Lorenz,
    MatchedThreshold,
    Sparsity,
    compare,
    histogram,
    lorenz,
    matched_thresholds,
    sparsity,
)
from divscope.analyses.evolution import evolution, shared_trajectories
from divscope.analyses.failure import (
    FailureAUROC,
    failure_auroc,
    failure_roc,
    response_scores,
    roc_points,
)
from divscope.analyses.flips import base_flips, flip_counts, flips
from divscope.analyses.populations import Population, SourceRoles, population
from divscope.analyses.position import early_density, example_response, positional_profile
from divscope.analyses.sampling import Sample, high_divergence_sample, sample_rows
from divscope.analyses.shift import (
    EntropyDensity,
    RankReordering,
    TailPromotion,
    entropy_by_divergence,
    entropy_density,
    entropy_iou,
    rank_reordering,
    tail_promotion,
    topk_overlap,
)
from divscope.analyses.summary import (
    CoreSection,
    CoreThresholds,
    Metrics,
    RastSection,
    Summary,
    TakeoverSection,
    core_thresholds,
    summary,
    to_jsonable,
)
from divscope.analyses.switches import (
    map_agreement,
    switch_pairs,
    takeover_planning,
    threshold_curves,
    threshold_sensitivity,
)
from divscope.analyses.tokens import (
    PAPER_PLANNING_SHARE,
    PLANNING_WORDS,
    PlanningEnrichment,
    most_frequent_words,
    normalized_token,
    planning_enrichment,
    read_planning_words,
    token_profile,
    word_frequencies,
)

__all__ = [
    "DIFFICULTY",
    "PAPER_PLANNING_SHARE",
    "PLANNING_WORDS",
    "CoreSection",
    "CoreThresholds",
    "CrossSampleReport",
    "DeltaAlignment",
    "Difficulty",
    "EntropyDensity",
    "FailureAUROC",
    "Histogram",
    "Lorenz",
    "MatchedThreshold",
    "Metrics",
    "PathCoverage",
    "Population",
    "PlanningEnrichment",
    "RankReordering",
    "RastSection",
    "Reference",
    "Sample",
    "SourceRoles",
    "Setting",
    "Settings",
    "Sparsity",
    "Summary",
    "TailPromotion",
    "TakeoverKnee",
    "TakeoverSection",
    "base_flips",
    "by_difficulty",
    "compare",
    "core_thresholds",
    "cross_sample_report",
    "cross_sampling_curve",
    "delta_alignment",
    "difficulty_tertiles",
    "early_density",
    "entropy_by_divergence",
    "entropy_density",
    "entropy_iou",
    "evolution",
    "example_response",
    "failure_auroc",
    "failure_roc",
    "flip_counts",
    "flips",
    "high_divergence_sample",
    "histogram",
    "lorenz",
    "majority_at_k_curve",
    "map_agreement",
    "matched_thresholds",
    "most_frequent_words",
    "normalized_token",
    "parse_difference",
    "parse_setting",
    "pass_at_k_curve",
    "path_coverage",
    "planning_enrichment",
    "population",
    "positional_profile",
    "rank_reordering",
    "read_planning_words",
    "recovery_reference",
    "response_scores",
    "roc_points",
    "sample_rows",
    "setting_difference",
    "setting_differences",
    "setting_labels",
    "shared_trajectories",
    "sparsity",
    "summary",
    "switch_pairs",
    "tail_promotion",
    "takeover_knee",
    "takeover_planning",
    "threshold_curves",
    "threshold_sensitivity",
    "to_jsonable",
    "token_profile",
    "topk_overlap",
    "word_frequencies",
]
