"""Counter-based uniforms and the inverse-CDF draw."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from divscope.decoding.randomness import Stream, inverse_cdf, prompt_key, uniforms
from divscope.scoring.metrics import StatsConfig, truncate


def test_uniforms_depend_only_on_their_key():
    together = uniforms(7, ["a", "b", "a"], [0, 0, 1], 50)
    alone = uniforms(7, ["b"], [0], 20)
    np.testing.assert_array_equal(together[1, :20], alone[0])
    assert not np.array_equal(together[0], together[2])  # another sample
    assert not np.array_equal(together, uniforms(8, ["a", "b", "a"], [0, 0, 1], 50))
    assert not np.array_equal(together, uniforms(7, ["a", "b", "a"], [0, 0, 1], 50, Stream.SWITCH))


def test_uniforms_are_uniform_and_stable_across_processes():
    values = uniforms(0, ["p"] * 200, list(range(200)), 100)
    assert values.min() >= 0.0 and values.max() < 1.0
    counts, _ = np.histogram(values, bins=10, range=(0, 1))
    assert counts.min() > 1800 and counts.max() < 2200
    # Golden values: changing the hash changes every result ever written with a seed.
    assert prompt_key("p") == 0x1F69F389BDD5720D
    np.testing.assert_array_equal(
        uniforms(0, ["p"], [0], 3), [[0.04963304869717022, 0.4304767903568403, 0.3690245676559357]]
    )


def test_inverse_cdf_orders_by_probability_then_id():
    # probabilities 0.3, 0.4, 0.3 at T=1: order (1, 0, 2); top-p 0.6 keeps 1 and 0 (0.4 + 0.3).
    logits = torch.log(torch.tensor([[0.3, 0.4, 0.3]]))
    dist = truncate(logits, StatsConfig(top_p=0.6))
    picks = [
        int(inverse_cdf(dist, torch.tensor([u], dtype=torch.float64))[0])
        for u in (0.0, 0.5, 0.57, 0.58, 0.99)
    ]
    assert picks == [1, 1, 1, 0, 0]  # 0.4 / 0.7 = 0.571...


@pytest.mark.parametrize("top_p,temperature", [(0.7, 1.0), (0.9, 0.5), (1.0, 1.3)])
def test_inverse_cdf_samples_the_renormalized_nucleus(top_p, temperature):
    torch.manual_seed(0)
    logits = torch.randn(1, 30) * 2
    dist = truncate(logits, StatsConfig(top_p=top_p, temperature=temperature))
    draws = 40_000
    u = torch.from_numpy(uniforms(1, ["x"] * draws, list(range(draws)), 1)[:, 0])
    picks = inverse_cdf(
        type(dist)(
            ids=dist.ids.expand(draws, -1),
            sorted_probs=dist.sorted_probs.expand(draws, -1),
            probs=dist.probs.expand(draws, -1),
            nucleus=type(dist.nucleus)(*(t.expand(draws) for t in vars(dist.nucleus).values())),
        ),
        u,
    )
    size = int(dist.nucleus.size[0])
    kept = dist.ids[0, :size]
    expected = torch.zeros(30, dtype=torch.float64)
    expected[kept] = dist.sorted_probs[0, :size].double() / dist.sorted_probs[0, :size].sum()
    observed = torch.bincount(picks, minlength=30).double() / draws
    assert set(picks.unique().tolist()) <= set(kept.tolist())
    torch.testing.assert_close(observed, expected, atol=0.01, rtol=0)


def test_the_streams_keep_their_values():
    """A new stream never renumbers an old one: every result written with a seed stays."""
    assert [int(s) for s in Stream] == [0, 1, 2, 3]
    assert Stream.PRIMARY == 3
    one = ["p"], [0], 50
    streams = [uniforms(0, *one, stream)[0] for stream in Stream]
    assert all(not np.array_equal(a, b) for i, a in enumerate(streams) for b in streams[i + 1 :])


def test_identity_swap_rate_coupled_and_independent():
    """The issue's example: base [A .5, B .3, C .2], RL [B .5, A .3, C .2]. Coupled (one
    uniform, inverse CDF over each model's order) they draw the same token only for u in
    [.8, 1), where both pick C: 0.20. Drawn independently: Σ p_b p_r = .5·.3 + .3·.5 + .2·.2
    = 0.34."""
    top_p = StatsConfig(top_p=1.0)
    base = truncate(torch.log(torch.tensor([[0.5, 0.3, 0.2]])), top_p)  # ids A=0, B=1, C=2
    rl = truncate(torch.log(torch.tensor([[0.3, 0.5, 0.2]])), top_p)

    def draws(dist, u: torch.Tensor) -> torch.Tensor:
        n = u.shape[0]
        rows = type(dist)(
            ids=dist.ids.expand(n, -1),
            sorted_probs=dist.sorted_probs.expand(n, -1),
            probs=dist.probs.expand(n, -1),
            nucleus=type(dist.nucleus)(*(t.expand(n) for t in vars(dist.nucleus).values())),
        )
        return inverse_cdf(rows, u)

    grid = (torch.arange(10_000, dtype=torch.float64) + 0.5) / 10_000  # a fine grid of u
    coupled = (draws(base, grid) == draws(rl, grid)).double().mean()
    assert abs(float(coupled) - 0.20) < 1e-3
    fine = (torch.arange(1_000, dtype=torch.float64) + 0.5) / 1_000
    u_base, u_rl = torch.cartesian_prod(fine, fine).unbind(-1)  # independent pairs of uniforms
    independent = (draws(base, u_base) == draws(rl, u_rl)).double().mean()
    assert abs(float(independent) - (0.5 * 0.3 + 0.3 * 0.5 + 0.2 * 0.2)) < 1e-3  # 0.34
    # The decoder's two streams are such independent uniforms.
    n = 20_000
    u_sample = uniforms(0, ["x"] * n, list(range(n)), 1, Stream.SAMPLE)[:, 0]
    u_primary = uniforms(0, ["x"] * n, list(range(n)), 1, Stream.PRIMARY)[:, 0]
    same = draws(base, torch.from_numpy(u_primary)) == draws(rl, torch.from_numpy(u_sample))
    assert abs(float(same.double().mean()) - 0.34) < 0.015
