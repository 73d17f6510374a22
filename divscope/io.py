"""Readers, writers and validation for divscope's tables.

This module gives them as polars frames, for the analyses; `score`, `generate` and
`cross-sample` read and write with pyarrow alone (`divscope.tables`, which validates the
trajectories for both). Trajectories and prompts come as Parquet or JSONL; token tables are
Parquet, either one file (a path ending in `.parquet`) or a directory of `part-*.parquet`
files. Outputs are written under a temporary name and moved into place only when complete, so
an interrupted run never leaves a file that looks finished.

The examples read `lab_tokens`: the token table of the lab's first 8 trajectories (731 tokens),
scored once per pytest session (conftest.py at the repository root).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from divscope.errors import DivscopeError
from divscope.output import (
    INVOCATION_KEY,
    JSONL_SUFFIXES,
    METADATA_KEY,
    PARQUET_SUFFIXES,
    check_target,
    invocation,
    write_atomically,
)
from divscope.progress import note
from divscope.schema import CROSS_SAMPLE, TOKEN_TABLE_ARROW, require_columns
from divscope.tables import (
    attach_ids,
    is_hub_path,
    read_file,
    read_trajectories_arrow,
    token_table_files,
)


def read_table(path: str | os.PathLike) -> pl.DataFrame:
    """Read a Parquet file, a directory of Parquet parts, or a JSONL file.

    Raises:
        DivscopeError: the path does not exist, has an unknown suffix or cannot be parsed.

    >>> read_table("fixtures/lab/prompts/eval.jsonl").height  # from the repository root
    256
    """
    return read_file(
        path,
        parts=pl.read_parquet,
        parquet=pl.read_parquet,
        jsonl=_ndjson,
    )


def _ndjson(path: Path) -> pl.DataFrame:
    frame = pl.read_ndjson(path, infer_schema_length=None)
    return frame.select(_first_line_order(path, frame.columns))


def _first_line_order(path: Path, columns: list[str]) -> list[str]:
    """`columns` in the key order of the JSONL file's first record, then the keys that only
    later records hold: polars infers the schema of more than 32 keys in hash order."""
    with path.open(encoding="utf-8") as lines:
        first = next((line for line in lines if line.strip()), "{}")
    keys = [k for k in json.loads(first) if k in columns]
    return [*keys, *(c for c in columns if c not in keys)]


def write_table(frame: pl.DataFrame, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write `frame` atomically: Parquet (`.parquet`), JSONL (`.jsonl`) or a one-part directory.

    The table is written under a hidden temporary name and renamed into place, so a reader
    never sees a half-written output; replacing the file that `frame` was read from is safe.
    Parquet keeps the invocation being recorded (`divscope.output.recording`), in the file's
    key-value metadata.

    Raises:
        DivscopeError: the output exists and `overwrite` is False.

    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = write_table(pl.DataFrame({"prompt_id": ["a"], "answer": ["12"]}),
    ...                    f"{tmp.name}/answers.parquet")
    >>> path.name, read_table(path).rows()
    ('answers.parquet', [('a', '12')])
    >>> tmp.cleanup()
    """
    path = check_target(path, overwrite=overwrite)
    recorded = invocation()
    metadata = None if recorded is None else {INVOCATION_KEY.decode(): json.dumps(recorded)}

    def write(tmp: Path) -> None:
        if path.suffix in PARQUET_SUFFIXES:
            frame.write_parquet(tmp, compression="zstd", metadata=metadata)
        elif path.suffix in JSONL_SUFFIXES:
            frame.write_ndjson(tmp)
        else:
            tmp.mkdir()
            frame.write_parquet(tmp / "part-00000.parquet", compression="zstd", metadata=metadata)

    write_atomically(path, write)
    return path


def table_name(path: str | os.PathLike) -> str:
    """The default label of a token table: its file stem, or its directory's name.

    >>> table_name("runs/rl.parquet"), table_name("runs/sft")
    ('rl', 'sft')
    """
    return Path(path).stem  # a directory of parts has no suffix: its stem is its name


EVOLUTION_TABLE = re.compile(r"rl-step-(\d+)\.parquet")
"""The name of an evolution directory's token table of one training step (its step in it)."""


def evolution_tables(directory: str | os.PathLike) -> dict[int, Path]:
    """Training step -> token table of an evolution directory (`divscope watch` and the
    monitor's output, `lab build`'s tokens/evolution): its `rl-step-N.parquet` files, ascending.
    Other files (a summary, a table being written under a temporary name) are not read.

    >>> sorted(evolution_tables("fixtures/lab"))
    []
    """
    found = {}
    for path in Path(directory).iterdir():
        match = EVOLUTION_TABLE.fullmatch(path.name)
        if match is not None and path.is_file():
            found[int(match.group(1))] = path
    return dict(sorted(found.items()))


# ---------------------------------------------------------------- trajectories


def read_trajectories(
    path: str | os.PathLike | pl.DataFrame, *, source: str | None = None
) -> pl.DataFrame:
    """Read and validate a trajectory file (docs/contracts.md, "Trajectories"), as a polars
    frame: `divscope.tables.read_trajectories_arrow`, whose rules and errors it has.

    >>> trajectories = read_trajectories("fixtures/lab/trajectories.jsonl")  # the lab's
    >>> trajectories.height, trajectories.schema["sample_id"]
    (512, Int32)
    """
    return pl.from_arrow(read_trajectories_arrow(path, source=source))


def attach_token_ids(frame: pl.DataFrame, tokenizer: Any) -> pl.DataFrame:
    """`divscope.tables.attach_ids` on a polars frame: `prompt_ids` and `response_ids`, the
    text tokenized if needed.

    >>> from divscope.models.tokenizers import load_tokenizer
    >>> frame = pl.DataFrame({"prompt_id": ["a"], "sample_id": [0],
    ...                       "prompt": ["Ana has 3 coins."], "response": [" 3 + 4 = 7."]})
    >>> with_ids = attach_token_ids(frame, load_tokenizer("fixtures/lab/base"))
    >>> with_ids.select(pl.col("prompt_ids", "response_ids").list.len()).row(0)
    (5, 6)
    """
    return pl.from_arrow(attach_ids(frame.to_arrow(), tokenizer))


# ---------------------------------------------------------------- token tables


def scan_token_table(path: str | os.PathLike) -> pl.LazyFrame:
    """Lazily scan a token table (one Parquet file or a directory of parts).

    A table written before the token table had a `source` column gets one, null (after
    `sample_id`, as in the contract), so that every reader can rely on it.

    Raises:
        DivscopeError: the path is missing or the table lacks token-table columns.

    >>> scan_token_table(lab_tokens).select("prompt_id", "sample_id").unique().collect().height
    8
    """
    files = token_table_files(path)
    try:
        frame = pl.scan_parquet(files)
        columns = frame.collect_schema().names()
    except Exception as error:
        raise DivscopeError(f"{path}: not a readable Parquet token table ({error}).") from error
    require_columns(
        columns,
        (c for c in TOKEN_TABLE_ARROW if c != "source"),
        source=str(path),
        what="a token table",
    )
    if "source" not in columns:
        at = columns.index("sample_id") + 1
        source = pl.lit(None, pl.String()).alias("source")
        frame = frame.select(*columns[:at], source, *columns[at:])
    return frame


def read_token_table(path: str | os.PathLike) -> pl.DataFrame:
    """Read a whole token table into memory (see `scan_token_table`).

    >>> read_token_table(lab_tokens).height
    731
    """
    return scan_token_table(path).collect()


def read_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The `divscope` metadata (models, top_p, temperature, ...) of a token table.

    >>> metadata = read_metadata(lab_tokens)
    >>> metadata["top_p"], metadata["temperature"]
    (0.7, 1.0)
    """
    first = token_table_files(path)[0]
    try:
        metadata = pq.read_schema(first).metadata or {}
    except Exception as error:
        raise DivscopeError(f"{first}: not a readable Parquet file ({error}).") from error
    if METADATA_KEY not in metadata:
        raise DivscopeError(f"{first}: no 'divscope' metadata; was it written by divscope score?")
    return json.loads(metadata[METADATA_KEY])


# ---------------------------------------------------------------- cross-sample results


LEGACY_EFFECTIVE = "n_effective_independent"
"""The column that marks cross-sample results written before `n_effective` meant the count
against an independent draw (`upgrade_effective`)."""


def upgrade_effective(
    results: pl.DataFrame | pl.LazyFrame, *, source: str = "cross-sample results"
) -> tuple[pl.DataFrame | pl.LazyFrame, str | None]:
    """Cross-sample results with the effective counts of this version, and a note when they
    were renamed (None otherwise; the note is also printed on stderr).

    Results written before this version counted `n_effective` against the primary's coupled
    draw and the papers' count in `n_effective_independent`; they are read with
    `n_effective` -> `n_effective_coupled` and `n_effective_independent` -> `n_effective`, so
    that every unqualified `effective` is the count against an independent draw.

    >>> old = pl.DataFrame({"n_effective": [1], "n_effective_independent": [2]})
    >>> new, message = upgrade_effective(old)  # the note goes to stderr
    >>> new.rows(named=True), upgrade_effective(new)[1]
    ([{'n_effective_coupled': 1, 'n_effective': 2}], None)
    """
    names = results.collect_schema().names()
    if LEGACY_EFFECTIVE not in names:
        return results, None
    renamed = {LEGACY_EFFECTIVE: "n_effective"}
    if "n_effective" in names:
        renamed["n_effective"] = "n_effective_coupled"
    message = (
        f"{source}: written before `n_effective` meant the switches whose token differs from "
        "an independent draw of the primary model; read with their `n_effective_independent` "
        "as `n_effective` (the papers' count) and their `n_effective` (then against the "
        "primary's coupled draw) as `n_effective_coupled`."
    )
    note(message)
    return results.rename(renamed), message


def read_cross_sample(path: str | os.PathLike) -> pl.DataFrame:
    """Read cross-sample results (Parquet or JSONL), checking the contract columns.

    Raises:
        DivscopeError: the file is unreadable or lacks a contract column.

    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> from divscope.schema import CROSS_SAMPLE
    >>> row = {"top_p": 0.7} | dict.fromkeys(CROSS_SAMPLE) | {"prompt_id": "a", "sample_id": 0,
    ...     "policy": "base", "budget": -1}
    >>> path = write_table(pl.DataFrame([row]), f"{tmp.name}/results.jsonl")
    >>> read_cross_sample(path).select("prompt_id", "policy", "budget").rows()
    [('a', 'base', -1)]
    >>> tmp.cleanup()
    """
    frame, _ = upgrade_effective(read_table(path), source=str(path))
    require_columns(frame.columns, CROSS_SAMPLE, source=str(path), what="cross-sample results")
    return frame.with_columns(pl.col(c).cast(t) for c, t in CROSS_SAMPLE.items())


def read_reference(reference: str | os.PathLike | None) -> str | pl.DataFrame | None:
    """`--reference`: the graded responses of an existing file, else a policy label; a missing
    file that is plainly a path (a directory part or a table suffix) is an error, not a label.

    >>> read_reference("rl")  # a policy label of the results
    'rl'
    >>> read_reference("fixtures/lab/trajectories.jsonl").height  # graded responses
    512
    """
    if reference is None:
        return None
    path = Path(reference)
    if is_hub_path(reference) or path.exists():
        return read_table(reference)
    suffixes = (*PARQUET_SUFFIXES, *JSONL_SUFFIXES)
    if isinstance(reference, os.PathLike) or len(path.parts) > 1 or path.suffix in suffixes:
        raise DivscopeError(
            f"--reference {reference}: no such file; give graded responses (.parquet, .jsonl or "
            "a directory of parts) or a policy label of the cross-sample results."
        )
    return str(reference)
