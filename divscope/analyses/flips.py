"""Sample-level flips between two settings: which responses turn from wrong to right, and back.

The takeover paper counts, over 400 questions, 152 that flip from wrong to right and 3 from
right to wrong. The lockstep decoder draws the k-th sample of a prompt from the same hashed
uniforms under every policy of a run, so responses with the same (`prompt_id`, `sample_id`,
`seed`) under two settings are paired: they differ only by the intervention.
"""

from __future__ import annotations

import polars as pl

from divscope.analyses._frames import Frame
from divscope.analyses.controls import Selector, Settings

FLIP_COLUMNS: tuple[str, ...] = (
    "n", "wrong_to_right", "right_to_wrong", "both_right", "both_wrong",
)  # fmt: skip
"""The counts of a flip table, in order."""
PAIR_KEY: tuple[str, ...] = ("prompt_id", "sample_id", "seed")
"""What pairs a response of one setting with a response of another."""


def flip_counts(before: pl.DataFrame, after: pl.DataFrame) -> pl.DataFrame:
    """Flip counts from the graded responses `before` to the paired responses `after`.

    Args:
        before: responses with `prompt_id`, `sample_id`, `seed`, `correct`.
        after: the same columns.

    Returns:
        Two rows, `level` `sample` then `prompt`, with `n` and the counts of `FLIP_COLUMNS`.
        At the sample level a pair is one (prompt_id, sample_id, seed) graded in both; at the
        prompt level a prompt is right when any of its paired responses is right, so both
        sides are judged on the same number of attempts.

    >>> before = pl.DataFrame({"prompt_id": ["a", "a", "b"], "sample_id": [0, 1, 0],
    ...     "seed": [0, 0, 0], "correct": [False, False, True]})
    >>> after = before.with_columns(correct=pl.Series([True, False, False]))
    >>> flip_counts(before, after).rows()
    [('sample', 3, 1, 1, 0, 1), ('prompt', 2, 1, 1, 0, 0)]
    """
    pairs = before.select(*PAIR_KEY, "correct").join(
        after.select(*PAIR_KEY, "correct"), on=list(PAIR_KEY), suffix="_after", nulls_equal=True
    )
    prompts = pairs.group_by("prompt_id").agg(
        pl.col("correct").any(), pl.col("correct_after").any()
    )
    rows = []
    for level, frame in (("sample", pairs), ("prompt", prompts)):
        was, now = frame["correct"], frame["correct_after"]
        rows.append(
            (
                level,
                frame.height,
                int((~was & now).sum()),
                int((was & ~now).sum()),
                int((was & now).sum()),
                int((~was & ~now).sum()),
            )
        )
    return pl.DataFrame(rows, schema=["level", *FLIP_COLUMNS], orient="row")


def flips(results: Frame, a: Selector, b: Selector) -> pl.DataFrame:
    """Flips from setting `a` to setting `b`, per paired response and per prompt.

    Args:
        results: cross-sample results with `prompt_id`, `sample_id`, `policy`, `budget`,
            `correct` (optionally `seed` and the setting columns).
        a: the setting before (a selector, as in `setting_difference`), e.g. `policy=base`.
        b: the setting after, e.g. `policy=gated,eps=0.05`.

    Returns:
        `flip_counts` of the two settings' graded responses: `level`, `n`, `wrong_to_right`
        (wrong under `a`, right under `b`), `right_to_wrong`, `both_right`, `both_wrong`.

    Raises:
        DivscopeError: a selector that matches no setting or several.

    >>> results = pl.DataFrame({"prompt_id": ["a", "a"] * 2, "sample_id": [0, 1] * 2,
    ...     "policy": ["base", "base", "gated", "gated"], "budget": [-1] * 4,
    ...     "correct": [False, True, True, True]})
    >>> flips(results, "policy=base", "policy=gated").row(0)
    ('sample', 2, 1, 0, 1, 0)
    """
    settings = Settings(results, what="flips", required=("sample_id",))
    first, second = (settings.select(s) for s in (a, b))
    return flip_counts(settings.rows(first), settings.rows(second))


def base_flips(
    results: Frame, *, base_policy: str = "base", rl_policy: str = "rl"
) -> pl.DataFrame | None:
    """Flips from the matched base control to every other setting.

    Args:
        results: cross-sample results with `prompt_id`, `sample_id`, `policy`, `budget`,
            `correct`.
        base_policy: the base-model control.
        rl_policy: the RL-model control (its rows are settings like any other here).

    Returns:
        One row per setting other than the base control: its key columns (as
        `cross_sampling_curve`), then `sample_<count>` and `prompt_<count>` for each count of
        `FLIP_COLUMNS`; None when the results have no base control.

    Raises:
        DivscopeError: base controls present but none matching a setting.

    >>> results = pl.DataFrame({"prompt_id": ["a", "b"] * 3, "sample_id": [0] * 6,
    ...     "policy": ["base"] * 2 + ["rl"] * 2 + ["forward"] * 2, "budget": [-1] * 4 + [2] * 2,
    ...     "correct": [False, True, True, True, True, False]})
    >>> flips = base_flips(results)
    >>> flips.select("policy", "sample_wrong_to_right", "sample_right_to_wrong").rows()
    [('forward', 1, 1), ('rl', 1, 0)]
    """
    settings = Settings(
        results, what="base_flips", required=("sample_id",), controls=(base_policy, rl_policy)
    )
    rows = []
    for setting in settings.cells():
        if setting.policy == base_policy and settings.is_control(setting):
            continue
        base = settings.matched(base_policy, setting)
        if base is None:
            return None
        counts = flip_counts(base, settings.rows(setting))
        row = dict(zip(setting.names, setting.values, strict=True))
        for level in counts.iter_rows(named=True):
            row |= {f"{level['level']}_{c}": level[c] for c in FLIP_COLUMNS}
        rows.append(row)
    types = {c: settings.frame.schema[c] for c in settings.keys}
    counts = {f"{level}_{c}": pl.Int64() for level in ("sample", "prompt") for c in FLIP_COLUMNS}
    return pl.DataFrame(rows, schema={**types, **counts})
