import math

import pytest
import torch

from divscope.lab.grpo import group_advantages, grpo_loss, pack, token_logprobs
from divscope.lab.model import ModelConfig, new_model
from divscope.lab.task import TaskConfig
from divscope.lab.tokenizer import build_tokenizer


def test_group_advantages_by_hand():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    # group 1: mean 0.25, sample std sqrt((0.75² + 3 * 0.25²) / 3) = 0.5; group 2: std 0.
    expected = torch.tensor([[1.5, -0.5, -0.5, -0.5], [0.0, 0.0, 0.0, 0.0]])
    torch.testing.assert_close(group_advantages(rewards), expected, atol=1e-3, rtol=0)


def test_grpo_loss_and_gradient_by_hand():
    ratios = torch.tensor([[1.5, 0.9, 5.0], [1.1, 0.5, 1.0]], dtype=torch.float64)
    old_logp = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -1.2, -2.2]], dtype=torch.float64)
    logp = (old_logp + ratios.log()).requires_grad_()
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
    advantages = torch.tensor([1.0, -1.0], dtype=torch.float64)

    loss = grpo_loss(logp, old_logp, advantages, mask, clip_eps=0.2)
    loss.backward()

    # Response 0 (A = +1): -min(1.5, 1.2) = -1.2 (clipped), -min(0.9, 0.9) = -0.9, third masked.
    # Response 1 (A = -1): -min(-1.1, -1.1) = 1.1, -min(-0.5, -0.8) = 0.8 (clipped), 1.0.
    expected = ((-1.2 - 0.9) / 2 + (1.1 + 0.8 + 1.0) / 3) / 2
    assert loss.item() == pytest.approx(expected, abs=1e-12)
    # d loss / d logp_t = -A ρ_t / (n_tokens · n_responses) where unclipped, 0 where clipped or
    # masked.
    expected_grad = torch.tensor(
        [[0.0, -0.9 / 4, 0.0], [1.1 / 6, 0.0, 1.0 / 6]], dtype=torch.float64
    )
    torch.testing.assert_close(logp.grad, expected_grad, atol=1e-12, rtol=0)


def test_ratio_one_gives_the_plain_policy_gradient():
    logp = torch.tensor([[-0.7, -1.3]], requires_grad=True)
    loss = grpo_loss(logp, logp.detach(), torch.tensor([2.0]), torch.ones(1, 2), clip_eps=0.2)
    loss.backward()
    assert loss.item() == pytest.approx(-2.0)
    torch.testing.assert_close(logp.grad, torch.tensor([[-1.0, -1.0]]))


def test_pack_marks_response_targets():
    ids, mask = pack([[5, 6], [7]], [[8, 1], [9, 9, 1]], pad_id=0)
    assert ids.tolist() == [[5, 6, 8, 1], [7, 9, 9, 1]]
    assert mask.tolist() == [[0, 1, 1], [1, 1, 1]]
    ids, mask = pack([[5, 6], [7]], [[1], [9, 1]], pad_id=0)
    assert ids.tolist() == [[5, 6, 1], [7, 9, 1]]
    assert mask.tolist() == [[0, 1], [1, 1]]


def test_token_logprobs_are_next_token_logprobs():
    tokenizer = build_tokenizer(TaskConfig(), n_problems=200)
    config = ModelConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1)
    model = new_model(config, tokenizer, seed=0).eval()
    ids = torch.tensor([[3, 20, 30, 6, 7, 1]])
    with torch.no_grad():
        got = token_logprobs(model, ids)
        for t in range(ids.shape[1] - 1):
            logits = model(input_ids=ids[:, : t + 1]).logits[0, -1]
            want = torch.log_softmax(logits, -1)[ids[0, t + 1]]
            assert got[0, t].item() == pytest.approx(want.item(), abs=1e-5)
    assert math.isfinite(got.sum().item())
