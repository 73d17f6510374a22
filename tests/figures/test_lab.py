"""Every token-table figure on a table scored from the committed lab models (real divergences)."""

from __future__ import annotations

import pytest

from divscope.figures.gallery import FIGURES, PlotInputs, write_figures
from divscope.params import Recovery

pytestmark = pytest.mark.slow


def test_every_token_figure_renders_on_the_lab_table(lab_tokens_path, tmp_path):
    from divscope.io import read_token_table

    lab_tokens = read_token_table(lab_tokens_path)
    token_figures = [name for name, spec in FIGURES.items() if spec.needs == "tokens"]
    inputs = PlotInputs(lab_tokens, recovery=Recovery(n_boot=50))
    report = write_figures(inputs, tmp_path / "lab", names=token_figures, formats=["png"])
    # The lab's trajectories are graded, so nothing may be skipped.
    assert report.skipped == {}
    assert list(report.written) == token_figures
