"""The divergence-weighted advantage of the lab's GRPO (core paper §5; issue 17, item 6)."""

import copy
import json
import math
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from divscope.errors import DivscopeError
from divscope.lab.grpo import GRPOConfig, grpo_loss, token_divergence, token_weights, train_grpo
from divscope.models.threads import torch_threads

LAB = Path(__file__).resolve().parents[2] / "fixtures" / "lab"


def test_weighted_loss_and_gradient_by_hand():
    ratios = torch.tensor([[1.5, 0.9, 5.0], [1.1, 0.5, 1.0]], dtype=torch.float64)
    old_logp = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -1.2, -2.2]], dtype=torch.float64)
    logp = (old_logp + ratios.log()).requires_grad_()
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
    advantages = torch.tensor([1.0, -1.0], dtype=torch.float64)
    weights = torch.tensor([[1.1, 0.9, 1.3], [0.85, 1.15, 1.0]], dtype=torch.float64)

    loss = grpo_loss(logp, old_logp, advantages, mask, clip_eps=0.2, weights=weights)
    loss.backward()

    # A_t = w_t A. Response 0 (A = +1): -min(1.5·1.1, 1.2·1.1) = -1.32 (clipped),
    # -min(0.9·0.9, 0.9·0.9) = -0.81, third masked.
    # Response 1 (A = -1): -min(-1.1·0.85, -1.1·0.85) = 0.935, -min(-0.5·1.15, -0.8·1.15) = 0.92
    # (clipped), -min(-1.0, -1.0) = 1.0.
    expected = ((-1.32 - 0.81) / 2 + (0.935 + 0.92 + 1.0) / 3) / 2
    assert loss.item() == pytest.approx(expected, abs=1e-12)
    # d loss / d logp_t = -A_t ρ_t / (n_tokens · n_responses) where unclipped, else 0.
    expected_grad = torch.tensor(
        [[0.0, -0.9 * 0.9 / 4, 0.0], [0.85 * 1.1 / 6, 0.0, 1.0 / 6]], dtype=torch.float64
    )
    torch.testing.assert_close(logp.grad, expected_grad, atol=1e-12, rtol=0)


def test_unit_weights_give_the_plain_loss():
    logp = torch.tensor([[-0.7, -1.3, -0.2]], dtype=torch.float64)
    old_logp = torch.tensor([[-0.9, -1.0, -0.2]], dtype=torch.float64)
    args = (logp, old_logp, torch.tensor([1.5], dtype=torch.float64), torch.ones(1, 3), 0.2)
    ref_logp = torch.tensor([[-0.5, -1.1, -0.4]], dtype=torch.float64)
    plain = grpo_loss(*args, ref_logp, 0.04)
    weighted = grpo_loss(*args, ref_logp, 0.04, weights=torch.ones(1, 3, dtype=torch.float64))
    assert weighted.item() == plain.item()


def test_token_weights_by_hand():
    divergence = torch.tensor([[0.0, 0.02, 0.1]], dtype=torch.float64, requires_grad=True)
    # 1 + 0.3·(sigmoid(50·D) − 0.5): sigmoid(0) = 0.5, sigmoid(1), sigmoid(5).
    sig1, sig5 = 1 / (1 + math.exp(-1)), 1 / (1 + math.exp(-5))
    high = token_weights(divergence, alpha=50.0, scale=0.3)
    assert high[0].tolist() == pytest.approx([1.0, 1 + 0.3 * (sig1 - 0.5), 1 + 0.3 * (sig5 - 0.5)])
    assert high[0, 2].item() == pytest.approx(1.147992145, abs=1e-9)
    low = token_weights(divergence, alpha=-50.0, scale=0.3)  # the mirror image around 1
    assert low[0].tolist() == pytest.approx([1.0, 1 - 0.3 * (sig1 - 0.5), 1 - 0.3 * (sig5 - 0.5)])
    assert not high.requires_grad  # D_t is detached: the weights only scale the advantage
    assert (token_weights(divergence, alpha=0.0, scale=0.3) == 1).all()


def test_alpha_ramps_linearly_after_its_start():
    config = GRPOConfig(steps=40, alpha_start=20, alpha_max=-50.0)
    assert [config.alpha(s) for s in (1, 20, 21, 30, 40)] == [0.0, 0.0, -2.5, -25.0, -50.0]
    assert GRPOConfig(steps=40, alpha_start=40).alpha(40) == 0.0


def test_unknown_weighting_is_an_error():
    with pytest.raises(DivscopeError, match="'kl'.*none, base-js, old-kl"):
        GRPOConfig(weighting="kl")


def test_old_kl_is_k3_of_the_sampled_token():
    # ids [[7, 1, 2]]: position 0 predicts token 1, position 1 predicts token 2.
    ids = torch.tensor([[7, 1, 2]])
    logprobs = torch.log(torch.tensor([[[0.2, 0.4, 0.4], [0.1, 0.1, 0.8]]]))
    old_logp = torch.log(torch.tensor([[0.2, 0.8]]))
    got = token_divergence("old-kl", logprobs, ids, old_logp, None)
    # x = log(π_θ/π_old): log 2 at position 0 (k3 = 2 − ln 2 − 1), 0 at position 1.
    torch.testing.assert_close(got, torch.tensor([[1 - math.log(2), 0.0]]), atol=1e-6, rtol=0)


def test_base_js_matches_a_float64_reference_per_position():
    generator = torch.Generator().manual_seed(0)
    logprobs = torch.log_softmax(torch.randn(2, 3, 5, generator=generator), dim=-1)
    ref_logprobs = torch.log_softmax(torch.randn(2, 3, 5, generator=generator), dim=-1)
    logprobs[1, 2] = ref_logprobs[1, 2]  # identical distributions at one position: JS 0
    got = token_divergence(
        "base-js", logprobs, torch.zeros(2, 4, dtype=torch.long), None, ref_logprobs
    )
    assert got.shape == (2, 3)
    for i in range(2):
        for t in range(3):
            p, q = ref_logprobs[i, t].double().exp(), logprobs[i, t].double().exp()
            m = (p + q) / 2
            js = 0.5 * (p * (p / m).log()).sum() + 0.5 * (q * (q / m).log()).sum()
            assert got[i, t].item() == pytest.approx(js.item(), abs=1e-6)
    assert got[1, 2].item() == 0.0


def _train(config: GRPOConfig, base, tokenizer, rows) -> tuple[dict, list]:
    policy = copy.deepcopy(base)
    history = train_grpo(
        policy,
        base,
        tokenizer,
        [r["prompt"] for r in rows],
        [r["answer"] for r in rows],
        config,
        seed=3,
        log=lambda line: None,
        on_checkpoint=lambda step: None,
    )
    return policy.state_dict(), history


@pytest.mark.slow
def test_weighting_at_alpha_zero_trains_exactly_like_plain_grpo():
    with torch_threads(2):
        tokenizer = AutoTokenizer.from_pretrained(LAB / "base")
        base = AutoModelForCausalLM.from_pretrained(LAB / "base").eval()
        rows = [json.loads(line) for line in (LAB / "prompts" / "train.jsonl").open()][:64]
        small = dict(steps=2, prompts_per_step=4, group_size=4, checkpoint_every=2, alpha_start=0)
        plain, plain_history = _train(GRPOConfig(**small), base, tokenizer, rows)
        assert any(0 < r.reward < 1 for r in plain_history)  # some advantages are not 0
        assert all(r.weight_mean == 1.0 and r.divergence_mean is None for r in plain_history)
        for weighting in ("base-js", "old-kl"):
            config = GRPOConfig(weighting=weighting, alpha_max=0.0, **small)
            weights, history = _train(config, base, tokenizer, rows)
            assert all(torch.equal(weights[k], plain[k]) for k in plain), weighting
            assert all(r.weight_min == r.weight_max == 1.0 for r in history)
        boosted, history = _train(
            GRPOConfig(weighting="base-js", alpha_max=50.0, **small), base, tokenizer, rows
        )
        assert history[-1].alpha == 50.0 and history[-1].weight_max > 1.0
        assert not all(torch.equal(boosted[k], plain[k]) for k in plain)
