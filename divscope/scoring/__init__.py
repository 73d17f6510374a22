"""The teacher-forced scoring engine and its per-position statistics kernel.

The file-to-file entry point is `divscope.score` (in `divscope.scoring.score`); the
weight-level gap ratio σ is `divscope.weights` (in `divscope.scoring.weights`).
"""

from divscope.scoring.engine import ScoreConfig, ScoreSummary, score_table, score_trajectories
from divscope.scoring.metrics import Nucleus, PairStats, StatsConfig, pair_stats, top_p_nucleus

__all__ = [
    "Nucleus",
    "PairStats",
    "ScoreConfig",
    "ScoreSummary",
    "StatsConfig",
    "pair_stats",
    "score_table",
    "score_trajectories",
    "top_p_nucleus",
]
