"""Policy construction and its errors, and what the new policies and the controls at their
own sampling decode (`base-greedy`, `early`, `Base`/`RL` with a temperature and top-p)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from divscope.decoding import DecodeConfig, decode
from divscope.decoding.policies import (
    POLICIES,
    RL,
    Base,
    BaseGreedy,
    Early,
    Forward,
    Gated,
    RLReplace,
    build_policy,
)
from divscope.errors import DivscopeError
from divscope.scoring.metrics import StatsConfig, top1
from tests.decoding.helpers import EOS, VOCAB, tiny_requests
from tests.tinymodels import make_model


@pytest.mark.parametrize(
    "name,params,expected",
    [
        ("forward", {"eps": 0.1, "rate": 0.5}, Forward(eps=0.1)),
        ("gated", {"tau": 2.0, "lam": 1.5}, Gated(tau=2.0, lam=1.5, window=16)),
        ("rl-replace", {}, RLReplace(temperature=0.6, top_p=0.95)),
    ],
)
def test_build_policy(name, params, expected):
    assert build_policy(name, **params) == expected


@pytest.mark.parametrize(
    "name,params,message",
    [
        ("beam", {}, "unknown policy 'beam'; known policies: base, rl, forward"),
        ("forward", {}, "needs --eps"),
        ("reverse", {"eps": None}, "needs --eps"),
        ("random", {}, "needs --rate"),
        ("random", {"rate": 1.5}, r"--rate must be in \[0.0, 1.0\], got 1.5"),
        ("mixture", {}, "needs --alpha"),
        ("gated", {"tau": 1.0}, "needs --gate-lam, or --calibration"),
        ("entropy", {"lam": 1.0}, "needs --entropy-tau, or --calibration"),
        ("gated", {"tau": 1.0, "lam": 1.0, "window": 0}, "--gate-window must be >= 1"),
        ("early", {"share": -0.1}, r"--early-share must be in \[0.0, 1.0\]"),
    ],
)
def test_build_policy_errors(name, params, message):
    with pytest.raises(DivscopeError, match=message):
        build_policy(name, **params)


def test_every_policy_is_registered():
    assert list(POLICIES) == [
        "base", "rl", "forward", "reverse", "random", "random-effective", "early", "rl-replace",
        "base-greedy", "gated", "entropy", "mixture", "rast",
    ]  # fmt: skip


# ---------------------------------------------------------------- decoding with the new policies

CONFIG = DecodeConfig(StatsConfig(temperature=1.0, top_p=0.7), max_new_tokens=12, batch_size=5)


@pytest.fixture(scope="module")
def models():
    return {name: make_model("llama", vocab_size=48, seed=seed) for name, seed in
            (("base", 0), ("rl", 1))}  # fmt: skip


def _decode(models, policy, budget=-1, config=CONFIG):
    requests = tiny_requests((budget,), samples=3)
    return requests, decode(models, requests, policy, config, vocab=VOCAB, eos_ids=EOS)


def test_base_greedy_emits_the_base_argmax_exactly_where_the_argmaxes_disagree(models):
    requests, decoded = _decode(models, BaseGreedy())
    disagreements = 0
    for request, d in zip(requests, decoded, strict=True):
        ids = torch.tensor([[*request.prompt_ids, *d.response_ids]])
        start = len(request.prompt_ids) - 1  # logits at index prompt_len + t − 1 predict t
        with torch.inference_mode():
            argmax = {
                name: top1(model(input_ids=ids).logits[0, start:-1, :VOCAB])
                for name, model in models.items()
            }  # [T] each
        disagree = (argmax["base"] != argmax["rl"]).tolist()
        assert d.switch_positions == [t for t, flag in enumerate(disagree) if flag]
        for t in d.switch_positions:
            assert d.response_ids[t] == argmax["base"][t]
        disagreements += sum(disagree)
    assert disagreements > 5


def test_early_writes_exactly_the_first_budget_tokens_of_the_rl_control(models):
    rl = [d.response_ids for d in _decode(models, RL())[1]]
    base = [d.response_ids for d in _decode(models, Base())[1]]
    for budget in (0, 1, 3, -1):
        early = _decode(models, Early(), budget)[1]
        for d, rl_ids in zip(early, rl, strict=True):
            written = len(d.response_ids) if budget < 0 else min(budget, len(d.response_ids))
            assert d.response_ids[:written] == rl_ids[:written]
            assert d.switch_positions == list(range(written))
        if budget == 0:
            assert [d.response_ids for d in early] == base
        if budget < 0:
            assert [d.response_ids for d in early] == rl
    assert rl != base


@pytest.mark.parametrize("control", [Base, RL])
def test_a_control_at_its_own_sampling_samples_as_a_run_at_that_sampling(models, control):
    own = _decode(models, control(temperature=0.6, top_p=0.95))[1]
    run = replace(CONFIG, sampling=StatsConfig(temperature=0.6, top_p=0.95))
    assert own == _decode(models, control(), config=run)[1]
    assert own != _decode(models, control())[1]


@pytest.mark.parametrize(
    "share,n_base,budget", [(0.1, 30, 3), (0.5, 7, 4), (0.0, 10, 0), (1.0, 10, 10), (0.3, 0, 0)]
)
def test_early_share_budget_is_the_ceiling_of_the_share_of_the_base_length(share, n_base, budget):
    assert Early(share=share).budget_for(n_base) == budget
    assert not Early(share=share).budgeted and Early().budgeted


def test_controls_record_only_the_sampling_they_set():
    assert Base().params() == {} and repr(RL()) == "RL()"
    assert RL(temperature=0.6, top_p=0.95).params() == {"temperature": 0.6, "top_p": 0.95}
