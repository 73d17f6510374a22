"""The statistics kernel against the float64 reference, on handcrafted logits."""

from __future__ import annotations

import math

import pytest
import torch
from transformers.generation.logits_process import TopPLogitsWarper

from divscope.errors import DivscopeError
from divscope.scoring.metrics import (
    StatsConfig,
    pair_stats,
    sorted_window,
    top_p_nucleus,
)
from tests.scoring.reference import DISCRETE_COLUMNS, compare, reference_row

VOCAB = 301  # not a multiple of any window or chunk size used here


def _rows(stats, n: int) -> list[dict[str, float]]:
    columns = {name: value.tolist() for name, value in stats.columns().items()}
    return [{name: values[i] for name, values in columns.items()} for i in range(n)]


def _hard_logits(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Base and RL logits `[n, VOCAB]` covering the paths of the kernel: peaked rows (window),
    flat rows (nucleus wider than the window: full-sort fallback), exact tie groups cut by the
    window's edge, a tie for the argmax, identical rows, and tokens of probability 0."""
    g = torch.Generator().manual_seed(seed)
    base = 3.0 * torch.randn(12, VOCAB, generator=g)  # peaked: nucleus inside the window
    rl = base + 1.5 * torch.randn(12, VOCAB, generator=g)
    flat = torch.zeros(2, VOCAB)  # uniform: every token ties, nucleus of 211 > window
    flat_rl = 0.01 * torch.randn(2, VOCAB, generator=g)
    # Ties straddling the window edge: 10 high tokens, 120 tied ones, the rest low.
    ties = torch.full((2, VOCAB), -3.0)
    perm = torch.randperm(VOCAB, generator=g)
    ties[:, perm[:10]] = 2.0
    ties[:, perm[10:130]] = 1.0
    ties_rl = ties.clone()
    ties_rl[1, perm[5:15]] = 2.5
    # The argmax tied between three ids; the RL model's top-3 tied in the base.
    argmax_tie = 2.0 * torch.randn(2, VOCAB, generator=g)
    argmax_tie[:, [7, 250, 33]] = 9.0
    argmax_tie_rl = argmax_tie.clone()
    argmax_tie_rl[:, [7, 250, 33]] = 8.0
    argmax_tie_rl[:, [100, 4]] = 9.5
    same = 2.0 * torch.randn(1, VOCAB, generator=g)
    # Masked tokens (probability exactly 0 in both): 0·log 0 = 0, no ε.
    masked = 2.0 * torch.randn(1, VOCAB, generator=g)
    masked[:, :40] = -math.inf
    masked_rl = masked + torch.where(masked.isinf(), 0.0, torch.randn(1, VOCAB, generator=g))
    return (
        torch.cat([base, flat, ties, argmax_tie, same, masked]),
        torch.cat([rl, flat_rl, ties_rl, argmax_tie_rl, same, masked_rl]),
    )


@pytest.mark.parametrize(
    "top_p,temperature,window",
    [(0.7, 1.0, 64), (0.9, 0.6, 64), (0.95, 1.3, 100), (0.5, 1.0, VOCAB), (1.0, 1.0, 64)],
)
def test_every_column_matches_float64_reference(top_p, temperature, window):
    base, rl = _hard_logits(seed=1)
    tokens = torch.randint(40, VOCAB, (base.shape[0],), generator=torch.Generator().manual_seed(2))
    config = StatsConfig(top_p=top_p, temperature=temperature, window=window)
    got = _rows(pair_stats(base, rl, tokens, config), base.shape[0])
    skipped = 0
    for i, row in enumerate(got):
        want, tie = reference_row(base[i], rl[i], int(tokens[i]), top_p, temperature)
        skipped += compare(row, want, tie, where=f"row {i}")
    # Near-ties (< 1e-6 apart, not equal) come from the nearly flat RL rows and the tiny
    # probabilities under a dominant tie; exact ties are always compared.
    assert skipped <= 0.1 * len(got) * len(DISCRETE_COLUMNS)


@pytest.mark.parametrize("window", [64, 128])
def test_window_cascade_and_fallback_rows_are_exact(window):
    base, rl = _hard_logits(seed=3)
    # Nuclei of about 84 tokens: past the first window (64), inside a window of 128.
    g = torch.Generator().manual_seed(7)
    medium = 0.1 * torch.randn(3, VOCAB, generator=g)
    medium[:, :120] += 5.0
    base, rl = torch.cat([base, medium]), torch.cat([rl, medium.flip(-1)])
    windowed = pair_stats(base, rl, None, StatsConfig(top_p=0.7, window=window))
    full = pair_stats(base, rl, None, StatsConfig(top_p=0.7, window=VOCAB))
    # Flat rows (nucleus 211) and ties cut by the window's edge need the full sort; the
    # medium rows too when the window is 64.
    assert windowed.nucleus_base[-3:].gt(64).all() and windowed.nucleus_base[-3:].lt(128).all()
    assert windowed.fallback_rows == 4 + 3 * (window == 64)
    assert full.fallback_rows == 0
    for name, value in windowed.columns().items():
        assert torch.equal(value, full.columns()[name]), name


def test_sorted_window_orders_ties_by_id():
    g = torch.Generator().manual_seed(0)
    probs = torch.randint(0, 4, (5, VOCAB), generator=g).float()  # heavy ties
    probs /= probs.sum(-1, keepdim=True)
    for width in (VOCAB, 150):
        ids, sorted_probs = sorted_window(probs, width)
        for row in range(probs.shape[0]):
            p = probs[row].tolist()
            expected = sorted(range(VOCAB), key=lambda v: (-p[v], v))
            # Exact up to the window's last probability (a tie group there is cut arbitrarily).
            exact = (
                int((sorted_probs[row] > sorted_probs[row, -1]).sum()) if width < VOCAB else width
            )
            assert ids[row, :exact].tolist() == expected[:exact]
            assert sorted_probs[row].tolist() == sorted(p, reverse=True)[:width]


@pytest.mark.parametrize("top_p", [0.1, 0.5, 0.7, 0.9, 0.95])
@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_top_p_membership_matches_transformers(top_p, temperature):
    g = torch.Generator().manual_seed(4)
    logits = 2.5 * torch.randn(64, VOCAB, generator=g)
    scaled = logits / temperature
    probs = torch.softmax(scaled, dim=-1)
    ours = top_p_nucleus(probs, top_p, window=32).mask(probs)
    theirs = TopPLogitsWarper(top_p)(None, scaled.clone()) != -math.inf
    # Skip rows where some token's preceding mass is within 1e-5 of top_p: transformers sums
    # float32 probabilities in the other direction, so rounding decides those boundaries.
    sorted_probs = probs.double().sort(-1, descending=True).values
    before = sorted_probs.cumsum(-1) - sorted_probs
    clear = ((before - top_p).abs() > 1e-5).all(-1)
    assert clear.sum() >= 60
    assert torch.equal(ours[clear], theirs[clear])


def test_nucleus_keeps_the_crossing_token_and_at_least_one():
    probs = torch.tensor([[0.5, 0.3, 0.2], [0.9, 0.05, 0.05], [0.25, 0.5, 0.25]])
    nucleus = top_p_nucleus(probs, 0.6)
    assert nucleus.size.tolist() == [2, 1, 2]
    # Ties by id: token 0 precedes token 2 at 0.25.
    assert nucleus.mask(probs)[2].tolist() == [True, True, False]


def test_small_vocabulary_overlap_is_one():
    g = torch.Generator().manual_seed(5)
    base, rl = torch.randn(3, 4, generator=g), torch.randn(3, 4, generator=g)
    stats = pair_stats(base, rl, None, StatsConfig(window=2))
    for i, row in enumerate(_rows(stats, 3)):
        want, tie = reference_row(base[i], rl[i], None, 0.7, 1.0)
        compare(row, want, tie, where=f"row {i}")
        assert row["overlap_5"] == row["overlap_50"] == 1.0


def test_identical_distributions_do_not_diverge():
    logits = 3.0 * torch.randn(8, VOCAB, generator=torch.Generator().manual_seed(6))
    stats = pair_stats(logits, logits.clone(), None, StatsConfig(top_p=0.9, temperature=0.7))
    for name in ("js", "js_full", "kl_base_rl", "kl_rl_base"):
        assert stats.columns()[name].eq(0).all(), name
    assert torch.equal(stats.ce_base_rl, stats.entropy_base)
    assert stats.overlap.eq(1).all() and stats.rl_top_rank_in_base[:, 0].eq(1).all()
    assert stats.logp_base is None


def test_config_is_validated():
    with pytest.raises(DivscopeError, match=r"top_p must be in \(0, 1\], got 0.0; set --top-p"):
        StatsConfig(top_p=0.0)
    with pytest.raises(DivscopeError, match="temperature must be > 0, got 0.0; set --temperature"):
        StatsConfig(temperature=0.0)
