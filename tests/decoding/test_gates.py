"""The gate calibration (tau, lambda), hand-computed, and its JSON file."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

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
