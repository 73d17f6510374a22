"""Settings of cross-sample results, and the controls matched to each of them.

Input: cross-sample results (docs/contracts.md, "Cross-sample results"). A setting is a policy, a
budget and the values of the `SETTING_COLUMNS` present, null as a value of its own; responses
of different settings are never pooled.

A control is a response of the base or RL model alone (policies `base`, `rl`) without a forced
opening (`force_prefix` null or absent). Controls have no budget or policy parameter, so a
control's setting keeps only its sampling: budget −1, and of the setting columns only
`temperature`, `top_p` and `max_new_tokens`. The responses of `early` with a `share` each have
their own budget (⌈share · length of the base response⌉); their setting is the share, so their
budget reads as −1. A control *matches* a setting when
`temperature`, `top_p`, `max_new_tokens` and `seed` agree (`MATCH_COLUMNS`; null is a value, an
absent column is ignored). A setting whose responses span several seeds (merged runs) is
matched by the control's responses at those seeds, and needs them at every one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from divscope.analyses._frames import Frame, checked_lazy
from divscope.errors import DivscopeError
from divscope.schema import SETTING_COLUMNS

SAMPLING_COLUMNS: tuple[str, ...] = ("temperature", "top_p", "max_new_tokens")
"""The setting columns that a control keeps: how its responses were sampled."""
MATCH_COLUMNS: tuple[str, ...] = (*SAMPLING_COLUMNS, "seed")
"""The columns on which a control must agree with a setting to match it."""
CONTROL_POLICIES: tuple[str, str] = ("base", "rl")
"""The single-model controls: the base and RL models sampling alone."""
NAMED_WHEN_SET: tuple[str, ...] = ("force_prefix", "stratum", "map_table")
"""Setting columns that labels name wherever they are set, even when every row shown has the
same value: a forced opening, a stratum of positions and a retrospective map change what the
rows are (a forced `base` is no longer a control)."""
UNNAMED_WHEN_NULL: tuple[str, ...] = ("match_tol",)
"""Setting columns that labels leave out of a row where they are null: parameters of one
variant only (the entropy-matched stratum's tolerance), which the other rows do not have."""

Selector = Mapping[str, Any] | str
"""A setting: column -> value (values may be text, as on the command line), or the text
`policy=rl-replace,force_prefix=Alright` (see `parse_setting`)."""


def format_value(value: object) -> str:
    """A setting value as labels and messages show it: floats in short form, null as `none`,
    a text with surrounding whitespace (a forced opening such as " Let") quoted.

    >>> format_value(0.050), format_value(None), format_value(-1), format_value(" Let")
    ('0.05', 'none', '-1', '" Let"')
    """
    if value is None:
        return "none"
    if isinstance(value, str) and value != value.strip():
        return '"' + value + '"'
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass(frozen=True)
class Setting:
    """One setting of cross-sample results: its key columns and their values."""

    names: tuple[str, ...]
    """`policy`, `budget` and the setting columns present, in `SETTING_COLUMNS` order."""
    values: tuple[Any, ...]
    """The value of each of `names` (None for null)."""
    seeds: tuple[Any, ...]
    """The seeds of its responses, sorted (None for an absent or null seed)."""

    def __getitem__(self, name: str) -> Any:
        return self.values[self.names.index(name)]

    @property
    def policy(self) -> str:
        return self["policy"]

    @property
    def sampling(self) -> dict[str, Any]:
        """The sampling columns present, with their values."""
        return {n: self[n] for n in SAMPLING_COLUMNS if n in self.names}

    def expression(self) -> pl.Expr:
        """True on the rows of this setting."""
        return pl.all_horizontal(
            pl.col(n).eq_missing(pl.lit(v)) for n, v in zip(self.names, self.values, strict=True)
        )

    def describe(self) -> str:
        """`policy=gated, budget=-1, eps=0.05 (temperature=1, top_p=0.7, seed=0)`: the policy,
        budget and non-null parameters, then the sampling and seed(s) in parentheses."""
        sampling = {**self.sampling, "seed": _seeds_text(self.seeds)}
        shown = [
            f"{n}={format_value(v)}"
            for n, v in zip(self.names, self.values, strict=True)
            if n not in sampling and (v is not None or n in ("policy", "budget"))
        ]
        inner = ", ".join(
            f"{n}={v if n == 'seed' else format_value(v)}" for n, v in sampling.items()
        )
        return f"{', '.join(shown)} ({inner})"


def _seeds_text(seeds: Sequence[Any]) -> str:
    return "/".join(format_value(s) for s in seeds)


class Settings:
    """Cross-sample results split into settings, with the controls normalized and matched.

    Args:
        results: cross-sample results.
        what: the caller's name, for error messages.
        required: columns needed besides `prompt_id`, `policy` and `budget`.
        optional: columns kept when present.
        controls: the control policies (base first).
        graded: keep only graded responses (`correct` not null; `correct` is then required).
    """

    def __init__(
        self,
        results: Frame,
        *,
        what: str,
        required: Sequence[str] = (),
        optional: Sequence[str] = (),
        controls: Sequence[str] = CONTROL_POLICIES,
        graded: bool = True,
    ) -> None:
        needed = ["prompt_id", "policy", "budget", *required, *(["correct"] if graded else [])]
        lazy = checked_lazy(results, needed, what=what, source="cross-sample results")
        names = lazy.collect_schema().names()
        self.what = what
        self.controls = tuple(controls)
        self.settings = [c for c in SETTING_COLUMNS if c in names]
        self.keys = ["policy", "budget", *self.settings]
        extra = ("seed", "sample_id", "benchmark", "force_prefix", "correct", *optional)
        columns = [*self.keys, *needed, *(c for c in extra if c in names)]
        if graded:
            lazy = lazy.drop_nulls("correct")
        frame = lazy.select(list(dict.fromkeys(columns))).collect()
        if "seed" not in frame.columns:
            frame = frame.with_columns(pl.lit(None, pl.Int64).alias("seed"))
        is_control = pl.col("policy").is_in(list(self.controls))
        if "force_prefix" in frame.columns:
            is_control = is_control & pl.col("force_prefix").is_null()
        # An `early` response with a share has its own budget, ⌈share · base length⌉: the
        # share, not the budget, is its setting.
        no_budget = is_control | (
            pl.col("share").is_not_null() if "share" in frame.columns else False
        )
        self.frame = frame.with_columns(
            pl.when(no_budget)
            .then(-1)
            .otherwise("budget")
            .cast(frame.schema["budget"])
            .alias("budget"),
            *(
                pl.when(is_control).then(None).otherwise(pl.col(c)).alias(c)
                for c in self.settings
                if c not in SAMPLING_COLUMNS
            ),
            is_control.alias("_control"),
        )

    @property
    def is_empty(self) -> bool:
        return self.frame.is_empty()

    def cells(self, frame: pl.DataFrame | None = None) -> list[Setting]:
        """Every setting (of `frame`, default all rows), sorted by policy, the setting columns
        (nulls last) and budget."""
        frame = self.frame if frame is None else frame
        grouped = (
            frame.group_by(self.keys)
            .agg(pl.col("seed").unique().sort(nulls_last=True))
            .sort("policy", *self.settings, "budget", nulls_last=True)
        )
        return [
            Setting(tuple(self.keys), tuple(row[: len(self.keys)]), tuple(row[-1]))
            for row in grouped.iter_rows()
        ]

    def rows(self, setting: Setting) -> pl.DataFrame:
        """The responses of one setting."""
        return self.frame.filter(setting.expression())

    def is_control(self, setting: Setting) -> bool:
        """Whether `setting` is a control's (the rows of a control policy, no forced opening)."""
        return (
            setting.policy in self.controls
            and setting["budget"] == -1
            and not ("force_prefix" in setting.names and setting["force_prefix"] is not None)
        )

    def matched(
        self, policy: str, setting: Setting, *, role: str = "control"
    ) -> pl.DataFrame | None:
        """The responses of `policy` (without a forced opening) that match `setting`.

        Args:
            policy: a control policy, or another policy used as a reference.
            setting: the setting to match.
            role: what `policy` is to the caller, for the error message.

        Returns:
            The matched responses; None when `policy` has no responses at all.

        Raises:
            DivscopeError: `policy` has responses, but none at the setting's sampling and seed
                (or not at every seed of it), or at several of its settings.
        """
        candidates = self.frame.filter(pl.col("policy") == policy)
        if "force_prefix" in candidates.columns:
            candidates = candidates.filter(pl.col("force_prefix").is_null())
        if candidates.is_empty():
            return None
        same = candidates.filter(
            *(pl.col(n).eq_missing(pl.lit(v)) for n, v in setting.sampling.items()),
            pl.col("seed").is_in(
                pl.Series(setting.seeds, dtype=candidates.schema["seed"]).implode(),
                nulls_equal=True,
            ),
        )
        missing = [s for s in setting.seeds if s not in set(same["seed"].to_list())]
        if missing:
            runs = (
                candidates.select(*setting.sampling, "seed")
                .unique()
                .sort(pl.all(), nulls_last=True)
            )
            at = "; ".join(
                ", ".join(f"{n}={format_value(v)}" for n, v in row.items())
                for row in runs.iter_rows(named=True)
            )
            columns = ", ".join(c for c in MATCH_COLUMNS if c in (*setting.sampling, "seed"))
            raise DivscopeError(
                f"{self.what}: no `{policy}` {role} matches the setting {setting.describe()}"
                f"{' at seed ' + _seeds_text(missing) if same.height else ''}; a {role} must "
                f"agree with it on {columns}. `{policy}` was run at: {at}. Run `{policy}` at "
                "this setting's sampling and seed (divscope cross-sample runs the controls once "
                "per sampling of its policies), or leave the setting out of the results."
            )
        found = self.cells(same)
        if len(found) > 1:
            raise DivscopeError(
                f"{self.what}: the {role} `{policy}` has {len(found)} settings that match "
                f"{setting.describe()}: {'; '.join(s.describe() for s in found)}. Keep one of "
                "them in the results."
            )
        return same

    def select(self, selector: Selector) -> Setting:
        """The one setting whose columns equal `selector`'s values.

        Values may be given as text (as parsed from the command line, or in a `parse_setting`
        string): they are converted to the column's type, and `none`/`null` selects null.

        Raises:
            DivscopeError: an unknown column, a value of the wrong type, or a selector that
                matches no setting or several.
        """
        if isinstance(selector, str):
            selector = parse_setting(selector)
        text = ", ".join(f"{k}={format_value(v)}" for k, v in selector.items())
        conditions = []
        for name, value in selector.items():
            if name not in self.keys:
                raise DivscopeError(
                    f"{self.what}: `{name}` in the selector {text!r} is not a setting column; "
                    f"choose from {', '.join(self.keys)}."
                )
            conditions.append(pl.col(name).eq_missing(self._typed(name, value, text)))
        found = self.cells(self.frame.filter(*conditions) if conditions else self.frame)
        if len(found) == 1:
            return found[0]
        if not found:
            present = "; ".join(s.describe() for s in self.cells())
            raise DivscopeError(
                f"{self.what}: the selector {text!r} matches no setting; settings present: "
                f"{present}."
            )
        raise DivscopeError(
            f"{self.what}: the selector {text!r} matches {len(found)} settings: "
            f"{'; '.join(s.describe() for s in found)}. Add the columns that tell them apart."
        )

    def _typed(self, name: str, value: Any, text: str) -> pl.Expr:
        dtype = self.frame.schema[name]
        if isinstance(value, str) and value.strip().lower() in ("none", "null"):
            return pl.lit(None, dtype)
        if isinstance(value, str) and dtype != pl.String:
            try:
                value = pl.Series([value.strip()]).cast(dtype, strict=True)[0]
            except (pl.exceptions.InvalidOperationError, pl.exceptions.ComputeError) as error:
                raise DivscopeError(
                    f"{self.what}: `{name}={value}` in the selector {text!r} is not a {dtype} "
                    "value."
                ) from error
        return pl.lit(value, dtype)

    def prompts(self) -> list[str]:
        """The prompt ids, sorted (the order of the bootstrap's problems)."""
        return self.frame["prompt_id"].unique().sort().to_list()

    def benchmarks(self) -> dict[str, str | None]:
        """prompt_id -> its benchmark (None without a `benchmark` column or for a null one).

        Raises:
            DivscopeError: a prompt with two benchmarks.
        """
        if "benchmark" not in self.frame.columns:
            return dict.fromkeys(self.prompts())
        return prompt_benchmarks(self.frame, what=self.what, source="cross-sample results")


def parse_setting(text: str) -> dict[str, str]:
    """`policy=rl-replace,force_prefix=Alright` -> {"policy": "rl-replace", ...}.

    Values may be quoted ('...' or "...") to hold a comma or " - "; `none` selects null.

    Raises:
        DivscopeError: a part without `=`, an empty column name, or a column given twice.

    >>> parse_setting('policy=base, force_prefix="Okay, so"')
    {'policy': 'base', 'force_prefix': 'Okay, so'}
    """
    selector: dict[str, str] = {}
    for part in _split(text, ","):
        name, equals, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not equals or not name:
            raise DivscopeError(
                f"setting {text!r}: {part.strip()!r} is not column=value; write e.g. "
                "policy=rl-replace,force_prefix=Alright."
            )
        if name in selector:
            raise DivscopeError(f"setting {text!r}: column {name!r} is given twice.")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        selector[name] = value
    return selector


def parse_difference(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """`"A - B"` (two `parse_setting` selectors around " - ") -> (A, B).

    Raises:
        DivscopeError: not exactly one " - " outside quotes.

    >>> parse_difference("policy=rl-replace,force_prefix=Alright - policy=base")
    ({'policy': 'rl-replace', 'force_prefix': 'Alright'}, {'policy': 'base'})
    """
    sides = _split(text, " - ")
    if len(sides) != 2:
        raise DivscopeError(
            f"difference {text!r}: write two settings separated by ' - ', e.g. "
            "'policy=rl-replace,force_prefix=Alright - policy=base,force_prefix=Alright'."
        )
    first, second = (parse_setting(side) for side in sides)
    return first, second


def _split(text: str, separator: str) -> list[str]:
    """`text` split at `separator` outside single or double quotes."""
    parts, current, quote, i = [], [], None, 0
    while i < len(text):
        char = text[i]
        if quote is None and text.startswith(separator, i):
            parts.append("".join(current))
            current, i = [], i + len(separator)
            continue
        if char in "'\"" and quote in (None, char):
            quote = None if quote == char else char
        current.append(char)
        i += 1
    parts.append("".join(current))
    return parts


def prompt_benchmarks(frame: pl.DataFrame, *, what: str, source: str) -> dict[str, str | None]:
    """prompt_id -> benchmark of a frame with both columns; a prompt's benchmark must be unique.

    >>> prompt_benchmarks(pl.DataFrame({"prompt_id": ["a", "a", "b"],
    ...     "benchmark": ["x", "x", None]}), what="demo", source="results")
    {'a': 'x', 'b': None}
    """
    pairs = frame.select("prompt_id", "benchmark").unique().sort("prompt_id", "benchmark")
    clash = pairs.filter(pl.col("prompt_id").is_duplicated())
    if clash.height:
        first = clash["prompt_id"][0]
        names = clash.filter(prompt_id=first)["benchmark"].to_list()
        raise DivscopeError(
            f"{what}: prompt {first!r} belongs to several benchmarks in the {source} "
            f"({', '.join(map(format_value, names))}); give each prompt one benchmark."
        )
    return dict(pairs.iter_rows())


def benchmark_codes(prompts: Sequence[str], benchmarks: Mapping[str, str | None]) -> np.ndarray:
    """The stratum code of each prompt: benchmarks in sorted order, null as one unnamed one."""
    names = sorted({benchmarks.get(p) for p in prompts}, key=lambda b: (b is None, b or ""))
    code = {name: i for i, name in enumerate(names)}
    return np.array([code[benchmarks.get(p)] for p in prompts], dtype=np.int64)
