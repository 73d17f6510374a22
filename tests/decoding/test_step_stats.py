"""The decoder's per-step statistics are the scoring engine's: same values as `pair_stats`."""

from __future__ import annotations

import pytest
import torch

from divscope.scoring.metrics import (
    StatsConfig,
    entropy_and_cross_entropy,
    pair_stats,
    top1,
    truncate,
    truncated_js,
)


@pytest.mark.parametrize(
    "top_p,temperature,window",
    [(0.7, 1.0, 1024), (0.9, 0.6, 1024), (0.95, 1.0, 4), (1.0, 1.0, 1024), (0.5, 1.5, 8)],
)
def test_step_statistics_equal_pair_stats(top_p, temperature, window):
    torch.manual_seed(0)
    logits_b = torch.randn(16, 300) * 3
    logits_r = logits_b + torch.randn(16, 300)
    logits_r[3] = logits_b[3]  # identical rows: JS exactly 0
    config = StatsConfig(top_p=top_p, temperature=temperature, window=window)
    reference = pair_stats(logits_b, logits_r, config=config)
    base, rl = truncate(logits_b, config), truncate(logits_r, config)
    torch.testing.assert_close(truncated_js(base, rl), reference.js, rtol=1e-5, atol=1e-7)
    assert truncated_js(base, rl)[3] == 0.0
    torch.testing.assert_close(base.nucleus.size, reference.nucleus_base)
    torch.testing.assert_close(rl.nucleus.size, reference.nucleus_rl)
    entropy, ce = entropy_and_cross_entropy(logits_b, logits_r)
    torch.testing.assert_close(entropy, reference.entropy_base)
    torch.testing.assert_close(ce, reference.ce_base_rl)
    assert torch.equal(top1(logits_b), reference.top1_base)
    assert torch.equal(top1(logits_r), reference.top1_rl)


def test_truncate_falls_back_to_a_full_sort_when_the_window_is_too_narrow():
    logits = torch.zeros(2, 50)  # flat, 0.02 each: the 0.91 nucleus holds 46 tokens
    logits[1, 7] = 10.0  # peaked: one token
    narrow = truncate(logits, StatsConfig(top_p=0.91, window=4))
    assert narrow.nucleus.size.tolist() == [46, 1]
    assert narrow.ids[0, :46].tolist() == list(range(46))  # ties by id ascending
