"""Every analysis names the column it lacks."""

from __future__ import annotations

import polars as pl
import pytest

from divscope import analyses
from divscope.errors import DivscopeError

TOKENS = pl.DataFrame({"js": [0.1]})


@pytest.mark.parametrize(
    "call,column",
    [
        (lambda: analyses.sparsity(TOKENS, "ce_base_rl"), "ce_base_rl"),
        (lambda: analyses.histogram(TOKENS, "kl_base_rl"), "kl_base_rl"),
        (lambda: analyses.lorenz(TOKENS, "js_full"), "js_full"),
        (lambda: analyses.compare({"x": TOKENS}, "kl_rl_base"), "kl_rl_base"),
        (lambda: analyses.positional_profile(TOKENS), "position"),
        (lambda: analyses.early_density(TOKENS.with_columns(position=0)), "n_tokens"),
        (lambda: analyses.entropy_by_divergence(TOKENS), "entropy_base"),
        (lambda: analyses.topk_overlap(TOKENS), "overlap_1"),
        (lambda: analyses.rank_reordering(TOKENS), "rl_top1_rank_in_base"),
        (lambda: analyses.tail_promotion(TOKENS), "p_base_of_rl_top1"),
        (lambda: analyses.failure_auroc(TOKENS), "prompt_id"),
        (lambda: analyses.planning_enrichment(TOKENS), "token"),
        (lambda: analyses.word_frequencies(TOKENS), "token"),
        (lambda: analyses.token_profile(TOKENS, "the"), "token"),
        (lambda: analyses.evolution({0: TOKENS}), "prompt_id"),
        (lambda: analyses.cross_sampling_curve(TOKENS), "policy"),
        (lambda: analyses.pass_at_k_curve(TOKENS), "correct"),
        (lambda: analyses.summary(TOKENS), "sample_id"),
    ],
)
def test_missing_column_is_named(call, column):
    with pytest.raises(DivscopeError, match=f"missing column.*'{column}'"):
        call()


def test_non_frame_input_is_rejected():
    with pytest.raises(DivscopeError, match="expected a polars DataFrame or LazyFrame, got dict"):
        analyses.sparsity({"js": [0.1]})
