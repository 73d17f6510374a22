"""The gate calibration (tau, lambda), hand-computed, and its JSON file."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from divscope.decoding.calibrate import parse_rates
from divscope.decoding.gates import Calibration, Gate, calibrate_scores, calibrate_table
from divscope.errors import DivscopeError


def test_calibration_by_hand():
    # s = 1..10, r = 0.2: tau = the 0.8 quantile = 8.2 (linear), s > tau: {9, 10},
    # lambda = mean(9, 10) / mean(1..10) = 9.5 / 5.5.
    gate = calibrate_scores(np.arange(1.0, 11.0), rate=0.2)
    assert gate.tau == pytest.approx(8.2)
    assert gate.lam == pytest.approx(9.5 / 5.5)


def test_calibrate_table_and_json_round_trip(tmp_path):
    table = pl.DataFrame({"ce_base_rl": [1.0, 2.0, 3.0, 4.0], "entropy_base": [4.5, 1.0, 2.0, 0.5]})
    calibration = calibrate_table(table, rates=0.25, window=8, source="hand")
    assert calibration.gates["gated"] == (Gate(rate=0.25, tau=3.25, lam=pytest.approx(4.0 / 2.5)),)
    # entropy: tau = 0.75 quantile of (0.5, 1, 2, 4.5) = 2 + 0.25 · 2.5; above it: 4.5.
    entropy = Gate(rate=0.25, tau=2.625, lam=pytest.approx(4.5 / 2.0))
    assert calibration.gates["entropy"] == (entropy,)
    assert calibration.n_tokens == 4 and calibration.window == 8 and calibration.rates == (0.25,)
    calibration.to_json(tmp_path / "c.json")
    assert Calibration.from_json(tmp_path / "c.json") == calibration


def test_several_rates_each_as_one_rate_alone(tmp_path):
    """One (tau, lambda) per gate and rate, in the order given, each the one-rate calibration;
    s = 1..10: r = 0.2 gives tau 8.2 and lambda 9.5 / 5.5 (as by hand above), r = 0.5 gives
    tau 5.5 and lambda mean(6..10) / 5.5 = 8 / 5.5."""
    table = pl.DataFrame(
        {"ce_base_rl": np.arange(1.0, 11.0), "entropy_base": np.arange(10.0, 0, -1)}
    )
    calibration = calibrate_table(table, rates=(0.5, 0.2), window=4, source="hand")
    assert calibration.rates == (0.5, 0.2)
    gated = calibration.gates_of("gated")
    assert [g.rate for g in gated] == [0.5, 0.2]
    assert gated[0].tau == pytest.approx(5.5) and gated[0].lam == pytest.approx(8 / 5.5)
    assert gated[1].tau == pytest.approx(8.2) and gated[1].lam == pytest.approx(9.5 / 5.5)
    for rate, gate in zip((0.5, 0.2), calibration.gates_of("entropy"), strict=True):
        alone = calibrate_table(table, rates=rate, window=4, source="hand")
        assert alone.gates_of("entropy") == (gate,)
    calibration.to_json(tmp_path / "c.json")
    assert Calibration.from_json(tmp_path / "c.json") == calibration
    with pytest.raises(DivscopeError, match="give each rate once"):
        calibrate_table(table, rates=(0.2, 0.2), window=4, source="hand")


def test_a_one_rate_json_written_before_several_rates_still_loads(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(
        '{"rate": 0.05, "window": 16, "n_tokens": 731, "source": "lab.parquet", "gates": '
        '{"gated": {"tau": 2.5, "lam": 3.0}, "entropy": {"tau": 1.25, "lam": 2.0}}}'
    )
    calibration = Calibration.from_json(path)
    assert calibration.rates == (0.05,) and calibration.window == 16
    assert calibration.gates_of("gated") == (Gate(rate=0.05, tau=2.5, lam=3.0),)
    assert calibration.gates_of("entropy") == (Gate(rate=0.05, tau=1.25, lam=2.0),)


def test_calibration_errors(tmp_path):
    with pytest.raises(DivscopeError, match="--rate must be in"):
        calibrate_scores(np.ones(4), rate=0.0)
    with pytest.raises(DivscopeError, match="no score exceeds"):
        calibrate_scores(np.ones(4), rate=0.5)
    with pytest.raises(DivscopeError, match="missing column"):
        calibrate_table(pl.DataFrame({"js": [0.1]}), rates=0.1, window=4, source="t")
    constant = pl.DataFrame({"ce_base_rl": [1.0] * 4, "entropy_base": [1.0] * 4})
    with pytest.raises(DivscopeError, match="t, column 'ce_base_rl': no score exceeds"):
        calibrate_table(constant, rates=0.5, window=4, source="t")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(DivscopeError, match="not a calibration"):
        Calibration.from_json(tmp_path / "bad.json")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0.05,x", r"--rate '0.05,x': expected a number"),
        ("0.02,0.02", "a value appears twice"),
        ("0.05,1.0", r"1.0 is not in \(0, 1\)"),
        ("0", r"0.0 is not in \(0, 1\)"),
    ],
)
def test_a_bad_rate_list_is_refused(text, message):
    with pytest.raises(DivscopeError, match=message):
        parse_rates(text)
    assert parse_rates("0.1, 0.01") == (0.1, 0.01)  # in the order given
