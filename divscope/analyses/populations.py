"""Which trajectories each paper's section reads: its population, resolved in one place.

A token table's `source` column names the model that generated each trajectory; its `divscope`
metadata's `sources` says which values are the base model's and which the tuned (rl) model's
(`SourceRoles`; without metadata a value that is literally `base` or `rl` has that role). Each
paper computes its statistics on one population (`PAPER_POPULATIONS`):

- the core paper (*Sparse but Critical*) on the RL model's own trajectories;
- the takeover paper on base rollouts;
- RAST's path coverage on RL trajectories.

`Metrics.population` (`--population SECTION=SOURCE`) overrides a section's population with a
role (`base`, `rl`), a literal source value, or `all`. `population` filters a table to a section's
population and says what it used (`Population`). Where the paper's population is absent (a table
of RL trajectories only, or one without `source`), the section is computed on what is there and
`Population.note` says so; an explicit override that names what is absent is refused.

Other token tables read beside the main one (the --compare tables, the --evolution checkpoints)
are read on the main core population's trajectories where they hold them, else on their own
tuned model's trajectories, else on all of them (`companion_population`).

>>> frame = pl.DataFrame({"prompt_id": ["a", "a", "b"], "sample_id": [0, 1, 0],
...     "source": ["base", "rl", "rl"]})
>>> table, used = population(frame, "takeover")
>>> table.height, used.description, used.note
(1, 'base rollouts', None)
>>> population(frame.drop("source"), "core")[1].note
'on all 3 responses (no source column: populations unknown); the paper uses rl trajectories'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import polars as pl

from divscope.analyses._frames import Frame
from divscope.analyses._streaming import collect
from divscope.errors import DivscopeError

Section = Literal["core", "takeover", "rast"]
SECTIONS: tuple[Section, ...] = ("core", "takeover", "rast")
"""The sections of a summary that read token tables."""
ROLES: tuple[str, ...] = ("base", "rl")
"""The roles a source value can have: the base model's or the tuned (rl) model's."""
ALL = "all"
"""The population of every trajectory of a table, whoever generated it."""
PAPER_POPULATIONS: dict[Section, str] = {"core": "rl", "takeover": "base", "rast": "rl"}
"""The role of the trajectories each section's paper reads."""
ROLE_TEXT: dict[str, str] = {"base": "base rollouts", "rl": "rl trajectories"}
"""How a role's trajectories are named in notes and captions."""
SOURCE = "source"
"""The token-table column naming the model that generated each trajectory."""
_KEY = ("prompt_id", "sample_id")


@dataclass(frozen=True)
class SourceRoles:
    """The `sources` metadata of each token table of a study: source value -> role (`base`,
    `rl` or None), for the main table, each --compare table and each --evolution checkpoint.
    A table without metadata has an empty mapping (then `base`/`rl` values name their role).

    >>> SourceRoles({"Qwen-7B": "base"}).tokens
    {'Qwen-7B': 'base'}
    """

    tokens: Mapping[str, str | None] = field(default_factory=dict)
    compare: Mapping[str, Mapping[str, str | None]] = field(default_factory=dict)
    evolution: Mapping[int, Mapping[str, str | None]] = field(default_factory=dict)


@dataclass(frozen=True)
class Population:
    """The trajectories one section was computed on."""

    section: str
    """`core`, `takeover` or `rast`."""
    wanted: str
    """What was asked: a role (`base`, `rl`), a source value, or `all`."""
    paper: str
    """The role of the paper's population (`PAPER_POPULATIONS`)."""
    sources: tuple[str, ...]
    """The source values of the trajectories used; empty when the table names none."""
    description: str
    """The trajectories used, in words (e.g. `base rollouts`)."""
    n_responses: int
    """Distinct (prompt_id, sample_id) used."""
    n_tokens: int
    """Token rows used."""
    note: str | None = None
    """Set when the population is not the paper's: what was used and what the paper uses."""

    @property
    def text(self) -> str:
        """One line for digests and captions.

        >>> Population("core", "rl", "rl", ("rl",), "rl trajectories", 4, 90).text
        'on rl trajectories: 4 responses, 90 tokens'
        """
        responses = f"{self.n_responses:,} response" + "s" * (self.n_responses != 1)
        line = f"on {self.description}: {responses}, {self.n_tokens:,} tokens"
        return line if self.note is None else f"{line} (the paper uses {ROLE_TEXT[self.paper]})"


def parse_populations(specs: Sequence[str]) -> dict[Section, str]:
    """Each section's population, from `SECTION=SOURCE` specs over the papers' defaults.

    Raises:
        DivscopeError: a spec without `=`, an unknown section, or a section given twice.

    >>> parse_populations(["takeover=rl"])
    {'core': 'rl', 'takeover': 'rl', 'rast': 'rl'}
    """
    chosen: dict[Section, str] = {}
    for spec in specs:
        section, separator, source = (part.strip() for part in spec.partition("="))
        if not separator or not source:
            raise DivscopeError(
                f"--population {spec!r}: expected SECTION=SOURCE, e.g. takeover=base (SECTION: "
                f"{', '.join(SECTIONS)}; SOURCE: base, rl, a source value, or all)."
            )
        if section not in SECTIONS:
            raise DivscopeError(
                f"--population {spec!r}: unknown section {section!r}; choose from "
                f"{', '.join(SECTIONS)}."
            )
        if section in chosen:
            raise DivscopeError(f"--population: section {section!r} given twice.")
        chosen[section] = source  # type: ignore[index]
    return PAPER_POPULATIONS | chosen


def with_source(frame: Frame) -> Frame:
    """`frame` with a `source` column: all null when the table has none (a table written
    before trajectories had a source, or a hand-made one).

    >>> with_source(pl.DataFrame({"js": [0.1]}))["source"].to_list()
    [None]
    """
    if SOURCE in frame.lazy().collect_schema().names():
        return frame
    return frame.with_columns(pl.lit(None, dtype=pl.String).alias(SOURCE))


def role_of(value: str, roles: Mapping[str, str | None]) -> str | None:
    """The role of a source value: the metadata's, else the value itself when it is a role.

    >>> role_of("Qwen-7B", {"Qwen-7B": "base"}), role_of("rl", {}), role_of("sft", {})
    ('base', 'rl', None)
    """
    if value in roles:
        return roles[value]
    return value if value in ROLES else None


def response_rows(frame: Frame) -> pl.DataFrame:
    """Token rows per (source, prompt_id, sample_id) of a token table, by one streaming
    aggregation: what `population` counts a population's responses and tokens from.

    >>> frame = pl.DataFrame({"prompt_id": ["a", "a", "b"], "sample_id": [0, 0, 0],
    ...     "source": ["rl", "rl", "base"]})
    >>> response_rows(frame).sort("prompt_id").rows()
    [('rl', 'a', 0, 2), ('base', 'b', 0, 1)]
    """
    lazy = with_source(frame).lazy()
    return collect(lazy.group_by(SOURCE, *_KEY).agg(pl.len().cast(pl.Int64).alias("rows")))


def population(
    frame: Frame,
    section: str,
    wanted: str | None = None,
    roles: Mapping[str, str | None] | None = None,
    *,
    responses: pl.DataFrame | None = None,
) -> tuple[Frame, Population]:
    """`frame` filtered to a section's population, and what that population is.

    The paper's population (`wanted` None) falls back to every trajectory when the table holds
    none of it, with a note; an explicit `wanted` (a role, a source value or `all`) must be
    there.

    Args:
        frame: a token table (with or without `source`).
        section: `core`, `takeover` or `rast`.
        wanted: a role (`base`, `rl`), a source value, or `all`; default: the paper's.
        roles: the table's `sources` metadata (source value -> role).
        responses: `response_rows(frame)`, when the caller has it (else computed here).

    Returns:
        (the rows of the population, a `Population`).

    Raises:
        DivscopeError: an explicit `wanted` that the table does not hold (the message names the
            sources present).

    >>> frame = pl.DataFrame({"prompt_id": ["a", "b"], "sample_id": [0, 0],
    ...     "source": ["Qwen-7B", "Qwen-7B-RL"]})
    >>> rows, used = population(frame, "core", roles={"Qwen-7B": "base", "Qwen-7B-RL": "rl"})
    >>> rows["prompt_id"].to_list(), used.description, used.sources
    (['b'], 'rl trajectories (Qwen-7B-RL)', ('Qwen-7B-RL',))
    >>> try:  # without metadata no value is a role
    ...     population(frame, "core", "rl")
    ... except DivscopeError as error:
    ...     print(str(error).split("; ")[1])
    its sources: 'Qwen-7B', 'Qwen-7B-RL'. Pass one of them, base, rl or all.
    """
    roles = roles or {}
    paper = PAPER_POPULATIONS[section]  # type: ignore[index]
    explicit = wanted is not None
    wanted = paper if wanted is None else wanted
    responses = response_rows(frame) if responses is None else responses
    values = sorted(v for v in responses[SOURCE].unique().to_list() if v is not None)
    if wanted == ALL:
        chosen = values
    elif wanted in ROLES:
        chosen = [v for v in values if role_of(v, roles) == wanted]
    else:
        chosen = [v for v in values if v == wanted]
    if not chosen and explicit and wanted != ALL:
        listed = ", ".join(map(repr, values)) if values else "none (no source column)"
        raise DivscopeError(
            f"--population {section}={wanted}: the token table holds no trajectory of that "
            f"source; its sources: {listed}. Pass one of them, base, rl or all."
        )
    fallback = not chosen
    rows = frame if fallback or wanted == ALL else frame.filter(pl.col(SOURCE).is_in(chosen))
    used = values if fallback else chosen
    mine = (
        responses if fallback or wanted == ALL else responses.filter(pl.col(SOURCE).is_in(chosen))
    )
    counts = mine.select(
        pl.struct(*_KEY).n_unique().alias("responses"), pl.col("rows").sum().alias("tokens")
    ).row(0, named=True)
    n_responses, n_tokens = int(counts["responses"]), int(counts["tokens"] or 0)
    used_roles = {role_of(v, roles) for v in used}
    pooled = None
    if not used:
        pooled = "(no source column: populations unknown)"
    elif len(used_roles) == 1 and None not in used_roles:
        (role,) = used_roles
        named = [v for v in used if v != role]
        description = ROLE_TEXT[role] + (f" ({', '.join(named)})" if named else "")
    elif len(used) == 1:
        description = f"trajectories of {used[0]}"
    else:
        pooled = f"({', '.join(used)})"
    if pooled is not None:
        description = f"all trajectories {pooled}"
    note = None
    if used_roles != {paper}:
        subject = description if pooled is None else f"all {n_responses:,} responses {pooled}"
        note = f"on {subject}; the paper uses {ROLE_TEXT[paper]}"
    return rows, Population(
        section=section,
        wanted=wanted,
        paper=paper,
        sources=tuple(used),
        description=description,
        n_responses=n_responses,
        n_tokens=n_tokens,
        note=note,
    )


def companion_population(
    frame: Frame,
    section: str,
    main: Population,
    roles: Mapping[str, str | None] | None = None,
) -> tuple[Frame, Population]:
    """A table read beside the main one (a --compare table, an --evolution checkpoint), on the
    same trajectories as the main table's `main` population where it holds them, else on its
    own tuned model's trajectories (`rl`), else on all of them (with the note).

    >>> other = pl.DataFrame({"prompt_id": ["a", "b"], "sample_id": [0, 0],
    ...     "source": ["rl", "sft"]})
    >>> main = Population("core", "rl", "rl", ("rl",), "rl trajectories", 1, 1)
    >>> rows, used = companion_population(other, "core", main)
    >>> rows["source"].to_list(), used.description
    (['rl'], 'rl trajectories')
    """
    if main.sources and main.wanted != ALL:
        present = collect(with_source(frame).lazy().select(pl.col(SOURCE).unique()))[SOURCE]
        shared = [v for v in main.sources if v in present.to_list()]
        if shared:
            rows = frame.filter(pl.col(SOURCE).is_in(shared))
            return rows, population(rows, section, ALL, roles)[1]
    return population(frame, section, ALL if main.wanted == ALL else None, roles)


__all__ = [
    "ALL",
    "PAPER_POPULATIONS",
    "ROLES",
    "SECTIONS",
    "Population",
    "SourceRoles",
    "companion_population",
    "parse_populations",
    "population",
    "response_rows",
    "role_of",
    "with_source",
]
