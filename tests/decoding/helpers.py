"""Helpers of the decoder's tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from divscope.decoding import Decoded


def assert_same_decodes(got: Sequence[Decoded], want: Sequence[Decoded], what: object = "") -> None:
    """The same tokens, switches and counts bit for bit, and the recorded `switch_js` to float32
    rounding: a batch of another shape sums in another order, which moves the last bits of a
    statistic but (on the CPU) no draw."""
    assert [replace(d, switch_js=None) for d in got] == [
        replace(d, switch_js=None) for d in want
    ], what
    for g, w in zip(got, want, strict=True):
        assert (g.switch_js is None) == (w.switch_js is None), what
        if g.switch_js is not None:
            assert g.switch_js == pytest.approx(w.switch_js, abs=1e-5), what
