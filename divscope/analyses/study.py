"""`Study`: the inputs that `analyze`, `plot` and `report` share, named once and read once.

A `Study` names the files (the token table, the tables it is compared with, the RL checkpoints,
the cross-sample results, the reference and the difficulty's graded responses); its `tables`
reads them, on first use and once: the token tables as lazy scans, the others into memory. Pass
one `Study` to the three commands and they share what it read.

>>> study = Study("runs/rl.parquet", compare=("runs/sft.parquet",), evolution=("40=s40.parquet",))
>>> study.compared, study.steps
({'sft': PosixPath('runs/sft.parquet')}, {40: PosixPath('s40.parquet')})
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any

import polars as pl

from divscope.analyses.populations import SourceRoles
from divscope.errors import DivscopeError
from divscope.params import Flag
from divscope.readers import Reading


@dataclass(frozen=True)
class Study:
    """The token table of a study and what it is read with.

    `compare` also takes a mapping label -> table, and `evolution` a mapping step -> table:
    they become the labelled tables and `STEP=PATH` specs of the command line. In Python the
    token table, the compared tables, the cross-sample results and the difficulty's responses
    may also be tables in memory (a polars DataFrame, a `pyarrow.Table`, a list of dicts):
    each is written once to a scratch file that the process removes when it exits, so that
    the commands read it as they read files (a `pyarrow.Table` keeps its `divscope` metadata,
    e.g. which `source` is which model). Without `tokens`
    the token table is the last `evolution` step's (e.g. of an evolution directory alone).

    >>> Study("rl.parquet", compare={"SFT": "sft.parquet"}).label
    ('SFT',)
    >>> Study(evolution={30: "rl-step-30.parquet", 60: "rl-step-60.parquet"}).tokens
    PosixPath('rl-step-60.parquet')
    """

    tokens: Annotated[Path | None, Flag(argument=True)] = None
    """Token table: a .parquet file or a directory of part-*.parquet; default: the last
    --evolution step's table."""
    compare: tuple[Path, ...] = ()
    """Another token table to compare with, e.g. the SFT control (repeat)."""
    label: tuple[str, ...] = ()
    """Label of each --compare table, in order (default: its name)."""
    evolution: tuple[str, ...] = ()
    """Token table of one RL checkpoint (repeat, at least two): a path whose name ends in the
    training step (rl-step-40.parquet), a table scored at a revision or subfolder that ends
    in it (--rl org/run@step-40), STEP=PATH, or an evolution directory (divscope watch's
    output: its rl-step-N.parquet tables). Drawn by plot and report (the training evolution,
    core Fig. 11); analyze reads it not."""
    cross_sample: Annotated[Path | None, Flag("--cross-sample", "--xs")] = None
    """Cross-sample results (Parquet or JSONL) for accuracy curves."""
    reference: str | None = None
    """The upper bound of recovery: graded results of a third model (a file, e.g. the thinking
    model's `divscope generate` + `grade` output) or a policy label of the cross-sample
    results; default: the matched rl control."""
    difficulty: Path | None = None
    """Graded base responses (divscope grade output, or cross-sample results with the base
    control): statistics and, with --cross-sample, recovery per base pass@1 tertile, in analyze's
    summary (plot and report show none of them)."""
    difficulty_model: str | None = None
    """The base model's `model` value when --difficulty holds several models' responses
    (e.g. base in the lab's trajectories.jsonl)."""
    difficulty_reading: Reading = Reading()
    """How --difficulty is read: its format (a verl dump, TRL completions, an eval log...) and
    the column that grades it (docs/inputs.md)."""

    def __post_init__(self) -> None:
        compare, label = self.compare, self.label
        if isinstance(compare, Mapping):
            compare, label = tuple(compare.values()), tuple(compare)
        evolution = self.evolution
        if isinstance(evolution, Mapping):
            evolution = tuple(f"{step}={path}" for step, path in evolution.items())
        set_ = object.__setattr__
        set_(self, "evolution", tuple(str(s) for s in evolution))
        compare = tuple(_file(table, f"compare-{i}", True) for i, table in enumerate(compare))
        set_(self, "tokens", _file(self.tokens, "tokens", True))
        for name in ("cross_sample", "difficulty"):
            set_(self, name, _file(getattr(self, name), name))
        tokens = self.tokens
        if tokens is None:
            if not self.evolution:
                raise DivscopeError(
                    "no token table: give TOKENS, or --evolution (the last step's table is then "
                    "the token table)."
                )
            tokens = self.steps[max(self.steps)]
        set_(self, "tokens", Path(tokens))
        set_(self, "compare", tuple(Path(p) for p in compare))
        set_(self, "label", tuple(label))
        for name in ("cross_sample", "difficulty"):
            if getattr(self, name) is not None:
                set_(self, name, Path(getattr(self, name)))
        if self.reference is not None:
            set_(self, "reference", str(self.reference))

    @classmethod
    def of(cls, study: str | os.PathLike | Study | Any) -> Study:
        """`study` as a `Study`: a study as it is, a token table alone: its path, or the table
        in memory (a polars DataFrame, a `pyarrow.Table` such as `score(out=None)` returns,
        or a list of dicts; see `__post_init__`)."""
        return study if isinstance(study, Study) else cls(study)

    @property
    def compared(self) -> dict[str, Path]:
        """The --compare tables by label: each --label in order, then each table's own name.

        Raises:
            DivscopeError: more --label than --compare.
        """
        from divscope.io import table_name

        if len(self.label) > len(self.compare):
            raise DivscopeError(
                f"--label given {len(self.label)} times but --compare only {len(self.compare)} "
                "times; give one --label per --compare table."
            )
        labels = [*self.label, *(table_name(p) for p in self.compare[len(self.label) :])]
        return dict(zip(labels, self.compare, strict=True))

    @property
    def steps(self) -> dict[int, Path]:
        """Training step -> token table of each --evolution checkpoint (`evolution_steps`)."""
        return evolution_steps(self.evolution)

    @property
    def name(self) -> str:
        """The token table's label beside the --compare tables: its file name."""
        from divscope.io import table_name

        return table_name(self.tokens)

    @cached_property
    def tables(self) -> StudyTables:
        """The inputs, read on first use and kept: the token tables scanned lazily."""
        from divscope.analyses.difficulty import difficulty_tertiles
        from divscope.io import read_reference, read_table, scan_token_table
        from divscope.readers import read_responses, require_graded

        compared = self.compared
        steps = self.steps
        return StudyTables(
            tokens=scan_token_table(self.tokens),
            compare={name: scan_token_table(path) for name, path in compared.items()},
            evolution={step: scan_token_table(path) for step, path in steps.items()},
            cross_sample=None if self.cross_sample is None else read_table(self.cross_sample),
            reference=read_reference(self.reference),
            difficulty=None
            if self.difficulty is None
            else difficulty_tertiles(
                pl.from_arrow(
                    require_graded(read_responses(self.difficulty, self.difficulty_reading))
                ),
                model=self.difficulty_model,
            ),
            roles=SourceRoles(
                tokens=source_roles(self.tokens),
                compare={name: source_roles(path) for name, path in compared.items()},
                evolution={step: source_roles(path) for step, path in steps.items()},
            ),
        )


@dataclass(frozen=True)
class StudyTables:
    """What a `Study` read: its tables, the token tables as lazy scans."""

    tokens: pl.LazyFrame
    """The token table."""
    compare: Mapping[str, pl.LazyFrame]
    """Label -> another token table on the same trajectories."""
    evolution: Mapping[int, pl.LazyFrame]
    """Training step -> token table of that RL checkpoint."""
    cross_sample: pl.DataFrame | None
    """The cross-sample results."""
    reference: str | pl.DataFrame | None
    """The upper bound of recovery: graded responses, a policy label, or None (the `rl`
    control)."""
    difficulty: pl.DataFrame | None
    """Per prompt its base pass@1 tertile (`difficulty_tertiles`)."""
    roles: SourceRoles = SourceRoles()
    """Each token table's `sources` metadata: which source values are the base model's and
    which the tuned model's (`divscope.analyses.populations`)."""


def _file(table: Any, name: str, tokens: bool = False) -> Any:
    """A table given in memory (the Python API: a polars DataFrame, a `pyarrow.Table` or a
    list of dicts) as a Parquet file in the scratch directory, named `name` (the label of a
    compared token table; a labelled one's label comes from `compare`'s mapping), a token
    table (`tokens`) in the token table's types; a path, or None, as it is."""
    from divscope.schema import TOKEN_TABLE_ARROW
    from divscope.tables import in_memory, scratch_file

    if table is None or not in_memory(table):
        return table
    return scratch_file(table, f"{name}.parquet", TOKEN_TABLE_ARROW if tokens else None)


def source_roles(path: str | os.PathLike) -> dict[str, str | None]:
    """The `sources` metadata of a token table (source value -> `base`, `rl` or None); empty
    when the table has no such metadata (written before trajectories had a source).

    >>> set(source_roles(lab_tokens).values()) <= {"base", "rl", None}
    True
    """
    from divscope.io import read_metadata

    try:
        metadata = read_metadata(path)
    except DivscopeError:
        return {}
    return dict(metadata.get("sources") or {})


def evolution_steps(specs: tuple[str, ...] | list[str]) -> dict[int, Path]:
    """Training step -> token table, ascending, from `STEP=PATH`, a path whose name ends in the
    step, a table whose RL model's revision or subfolder ends in it (`checkpoint_step`), or an
    evolution directory: each of its `rl-step-N.parquet` tables at step N
    (`divscope watch` and the monitor write one; a directory of `part-*.parquet` is one token
    table, named by the first two rules).

    >>> evolution_steps(["runs/rl-step-40.parquet", "100=final.parquet"])
    {40: PosixPath('runs/rl-step-40.parquet'), 100: PosixPath('final.parquet')}

    Raises:
        DivscopeError: a step that cannot be told, a step given twice, or an evolution
            directory without tables.
    """
    from divscope.io import evolution_tables

    steps: dict[int, Path] = {}
    for spec in specs:
        step_text, separator, path_text = spec.partition("=")
        if separator and step_text.strip().isdigit():
            found = {int(step_text): Path(path_text)}
        elif Path(spec).is_dir() and not any(Path(spec).glob("part-*.parquet")):
            found = evolution_tables(spec)
            if not found:
                raise DivscopeError(
                    f"--evolution {spec}: a directory without rl-step-N.parquet tables (an "
                    "evolution directory, as divscope watch writes) or part-*.parquet files (a "
                    "token table); give the directory that holds them."
                )
        else:
            path = Path(spec)
            match = re.search(r"(\d+)$", path.stem)
            step = int(match.group(1)) if match else checkpoint_step(spec)
            if step is None:
                raise DivscopeError(
                    f"--evolution {spec}: cannot tell the training step; name the table after "
                    "its step (e.g. rl-step-100.parquet), pass STEP=PATH (e.g. 100=rl.parquet) "
                    "or an evolution directory of rl-step-N.parquet tables."
                )
            found = {step: path}
        for step, path in found.items():
            if step in steps:
                raise DivscopeError(
                    f"--evolution: step {step} given twice ({steps[step]}, {path})."
                )
            steps[step] = path
    return dict(sorted(steps.items()))


def checkpoint_step(path: str | os.PathLike) -> int | None:
    """The training step of the RL checkpoint a token table was scored with, where its
    revision or subfolder ends in one (`--rl org/run@step-400`, `--subfolder
    global_step_400`; a commit hash is no step): the metadata's `models.rl`; None when it
    names none.

    >>> checkpoint_step(lab_tokens) is None  # the lab's final RL model, a local directory
    True
    """
    from divscope.io import read_metadata

    try:
        rl = (read_metadata(path).get("models") or {}).get("rl")
    except DivscopeError:
        return None
    named = [rl.get(key) for key in ("revision", "subfolder")] if isinstance(rl, dict) else []
    steps = [
        re.search(r"(\d+)/?$", text)
        for text in named
        if isinstance(text, str) and not re.fullmatch(r"[0-9a-f]{7,40}", text)
    ]
    return next((int(found.group(1)) for found in steps if found), None)


__all__ = ["Study", "StudyTables", "checkpoint_step", "evolution_steps", "source_roles"]
