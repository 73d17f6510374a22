"""Policy construction and its errors, and the --policies/--budgets strings that name them."""

from __future__ import annotations

import pytest

from divscope.decoding.calibration import Calibration, Gate
from divscope.decoding.policies import (
    POLICIES,
    Base,
    EntropyGated,
    Forward,
    Gated,
    RLReplace,
    build_policy,
)
from divscope.decoding.settings import parse_budgets, parse_policies
from divscope.errors import DivscopeError


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
        ("random", {"rate": 1.5}, r"--rate .* must be in \[0.0, 1.0\], got 1.5"),
        ("mixture", {}, "needs --alpha"),
        ("gated", {"tau": 1.0}, "needs --lam, or --calibration"),
        ("gated", {"tau": 1.0, "lam": 1.0, "window": 0}, "--window must be >= 1"),
    ],
)
def test_build_policy_errors(name, params, message):
    with pytest.raises(DivscopeError, match=message):
        build_policy(name, **params)


def test_every_policy_is_registered():
    assert list(POLICIES) == [
        "base", "rl", "forward", "reverse", "random", "rl-replace", "gated", "entropy",
        "mixture", "rast",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "text,expected", [("0,1,2,-1", (0, 1, 2, -1)), ("4", (4,)), (" 0, 8 ", (0, 8))]
)
def test_parse_budgets(text, expected):
    assert parse_budgets(text) == expected


@pytest.mark.parametrize("text", ["", "1,,2", "a,b", "1.5", "-2"])
def test_parse_budgets_errors(text):
    with pytest.raises(DivscopeError, match="--budgets"):
        parse_budgets(text)


def test_parse_policies(tmp_path):
    path = tmp_path / "gate.json"
    gates = {"gated": Gate(tau=2.0, lam=1.5), "entropy": Gate(tau=0.5, lam=3.0)}
    Calibration(rate=0.1, window=8, gates=gates, n_tokens=10, source="t").to_json(path)
    policies = parse_policies(
        " base, rl-replace,gated,entropy ", lam=2.5, calibration=path, replace_top_p=0.9
    )
    assert policies == [
        Base(),
        RLReplace(temperature=0.6, top_p=0.9),
        Gated(tau=2.0, lam=2.5, window=8),
        EntropyGated(tau=0.5, lam=2.5, window=8),
    ]


@pytest.mark.parametrize(
    "text,message", [("base,rl,base", "a policy appears twice"), ("forward", "needs --eps")]
)
def test_parse_policies_errors(text, message):
    with pytest.raises(DivscopeError, match=message):
        parse_policies(text)
