"""`format_summary`: the table `divscope cross-sample` prints."""

from __future__ import annotations

import polars as pl
import pytest

from divscope.analyses.cross_sampling import cross_sampling_curve
from divscope.decoding.cross_sample import format_summary


def results(forward_eps: list[float]) -> pl.DataFrame:
    """Controls and `forward` at budget 2 for each eps, two prompts with two responses each."""
    rows = []
    for prompt in ("a", "b"):
        rows += [(prompt, "base", -1, None, c) for c in (False, False)]
        rows += [(prompt, "rl", -1, None, c) for c in (True, True)]
        for eps in forward_eps:
            rows += [(prompt, "forward", 2, eps, c) for c in (eps > 0.02, True)]
    frame = pl.DataFrame(
        rows, schema=["prompt_id", "policy", "budget", "eps", "correct"], orient="row"
    )
    return frame.with_columns(n_tokens=10, n_switches=1, n_effective=0)


@pytest.mark.parametrize(
    "forward_eps,expected_rows",
    [
        # One setting per policy: no setting column, the table as before.
        (
            [0.05],
            [
                ("policy", "budget", "n", "accuracy"),
                ("base", "inf", "4", "0.0%"),
                ("forward", "2", "4", "100.0%"),
                ("rl", "inf", "4", "100.0%"),
            ],
        ),
        (
            [0.05, 0.01],
            [
                ("policy", "setting", "budget", "n", "accuracy"),
                ("base", "-", "inf", "4", "0.0%"),
                ("forward", "eps=0.01", "2", "4", "50.0%"),  # a: 1/2, b: 1/2
                ("forward", "eps=0.05", "2", "4", "100.0%"),
                ("rl", "-", "inf", "4", "100.0%"),
            ],
        ),
    ],
)
def test_format_summary_names_the_setting_only_when_a_policy_has_several(
    forward_eps, expected_rows
):
    table = format_summary(cross_sampling_curve(results(forward_eps), n_boot=10))
    width = len(expected_rows[0])
    assert [tuple(line.split()[:width]) for line in table.splitlines()] == expected_rows


def test_stop_tokens_are_never_suppressed():
    """A special token that only one tokenizer defines is never emitted, unless it is a stop
    token (an RL twin's own `<|im_end|>` must still end its responses)."""
    from divscope.decoding.cross_sample import Loaded
    from divscope.vocab import Compatibility

    compatibility = Compatibility(
        ("base", "rl"), (50, 50), 50, suppressed=(45, 46), special=(), ordinary=()
    )
    loaded = Loaded(None, [], {}, stop=[2, 46], compatibility=compatibility, vocab=50)
    assert loaded.suppressed == (45,)
