"""Policy construction errors and the gate calibration, hand-computed."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from divscope.decoding.calibration import Calibration, Gate, calibrate_scores, calibrate_table
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


def test_calibration_by_hand():
    # s = 1..10, r = 0.2: tau = the 0.8 quantile = 8.2 (linear), s > tau: {9, 10},
    # lambda = mean(9, 10) / mean(1..10) = 9.5 / 5.5.
    gate = calibrate_scores(np.arange(1.0, 11.0), rate=0.2)
    assert gate.tau == pytest.approx(8.2)
    assert gate.lam == pytest.approx(9.5 / 5.5)


def test_calibrate_table_and_json_round_trip(tmp_path):
    table = pl.DataFrame({"ce_base_rl": [1.0, 2.0, 3.0, 4.0], "entropy_base": [4.5, 1.0, 2.0, 0.5]})
    calibration = calibrate_table(table, rate=0.25, window=8, source="hand")
    assert calibration.gates["gated"] == Gate(tau=3.25, lam=pytest.approx(4.0 / 2.5))
    # entropy: tau = 0.75 quantile of (0.5, 1, 2, 4.5) = 2 + 0.25 · 2.5; above it: 4.5.
    assert calibration.gates["entropy"] == Gate(tau=2.625, lam=pytest.approx(4.5 / 2.0))
    assert calibration.n_tokens == 4 and calibration.window == 8
    calibration.to_json(tmp_path / "c.json")
    assert Calibration.from_json(tmp_path / "c.json") == calibration


def test_calibration_errors(tmp_path):
    with pytest.raises(DivscopeError, match="--rate must be in"):
        calibrate_scores(np.ones(4), rate=0.0)
    with pytest.raises(DivscopeError, match="no score exceeds"):
        calibrate_scores(np.ones(4), rate=0.5)
    with pytest.raises(DivscopeError, match="missing column"):
        calibrate_table(pl.DataFrame({"js": [0.1]}), rate=0.1, window=4, source="t")
    constant = pl.DataFrame({"ce_base_rl": [1.0] * 4, "entropy_base": [1.0] * 4})
    with pytest.raises(DivscopeError, match="t, column 'ce_base_rl': no score exceeds"):
        calibrate_table(constant, rate=0.5, window=4, source="t")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(DivscopeError, match="not a calibration"):
        Calibration.from_json(tmp_path / "bad.json")
