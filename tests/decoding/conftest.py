"""Fixtures of the decoder's tests."""

from __future__ import annotations

import copy

import pytest
import torch

from tests.tinymodels import make_model


@pytest.fixture(scope="session")
def twin_pair():
    """A peaked tiny base model (trained-like entropies, some tail tokens) and an RL twin
    whose output head is the base's plus noise: at T=1, top-p 0.7 the median JS is about
    0.24, so `forward` with eps 0.3 finds both sides, and every stratum occurs."""
    base = make_model("llama", vocab_size=48, seed=0, logit_scale=60.0)
    rl = copy.deepcopy(base)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        head = rl.lm_head.weight
        head.add_(torch.randn(head.shape, generator=generator) * 0.7 * head.std())
    return {"base": base, "rl": rl}
