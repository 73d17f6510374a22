"""`Study`: the shared inputs of analyze, plot and report, and the --evolution step names."""

from __future__ import annotations

from pathlib import Path

import pytest

from divscope.analyses.study import evolution_steps
from divscope.errors import DivscopeError


def test_evolution_steps():
    assert evolution_steps(["a/rl-step-40.parquet", "100=b/final.parquet", "c/ckpt7"]) == {
        40: Path("a/rl-step-40.parquet"),
        100: Path("b/final.parquet"),
        7: Path("c/ckpt7"),
    }
    with pytest.raises(DivscopeError, match="cannot tell the training step"):
        evolution_steps(["rl.parquet"])
    with pytest.raises(DivscopeError, match="step 4 given twice"):
        evolution_steps(["x-4.parquet", "4=y.parquet"])
