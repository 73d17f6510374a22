"""Readers, writers and validation for divscope's tables.

Trajectories and prompts come as Parquet or JSONL; token tables are Parquet, either one file
(a path ending in `.parquet`) or a directory of `part-*.parquet` files. Outputs are written
under a temporary name and moved into place only when complete, so an interrupted run never
leaves a file that looks finished.

The examples read `lab_tokens`: the token table of the lab's first 8 trajectories (731 tokens),
scored once per pytest session (conftest.py at the repository root).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from divscope.errors import DivscopeError
from divscope.output import (
    JSONL_SUFFIXES,
    METADATA_KEY,
    PARQUET_SUFFIXES,
    check_target,
    manifest_files,
    remove,
    temporary,
    write_atomically,
)
from divscope.progress import note
from divscope.schema import (
    CROSS_SAMPLE,
    TOKEN_TABLE,
    TRAJECTORY_IDS,
    TRAJECTORY_KEY,
    TRAJECTORY_OPTIONAL,
    TRAJECTORY_TEXT,
    require_columns,
)


def read_table(path: str | os.PathLike) -> pl.DataFrame:
    """Read a Parquet file, a directory of Parquet parts, or a JSONL file.

    Raises:
        DivscopeError: the path does not exist, has an unknown suffix or cannot be parsed.

    >>> read_table("fixtures/lab/prompts/eval.jsonl").height  # from the repository root
    256
    """
    path = Path(path)
    if not path.exists():
        raise DivscopeError(f"{path}: no such file or directory.")
    try:
        if path.is_dir():
            return pl.read_parquet(_part_files(path))
        if path.suffix in PARQUET_SUFFIXES:
            return pl.read_parquet(path)
        if path.suffix in JSONL_SUFFIXES:
            frame = pl.read_ndjson(path, infer_schema_length=None)
            return frame.select(_first_line_order(path, frame.columns))
    except DivscopeError:
        raise
    except Exception as error:  # polars/pyarrow raise many types for corrupt input
        reason = f"{type(error).__name__}: {error}"
        raise DivscopeError(f"{path}: could not be read ({reason}).") from error
    raise DivscopeError(
        f"{path}: unknown file type {path.suffix!r}; use .parquet or .jsonl "
        "(or a directory of part-*.parquet files)."
    )


def _first_line_order(path: Path, columns: list[str]) -> list[str]:
    """`columns` in the key order of the JSONL file's first record, then the keys that only
    later records hold: polars infers the schema of more than 32 keys in hash order."""
    with path.open(encoding="utf-8") as lines:
        first = next((line for line in lines if line.strip()), "{}")
    keys = [k for k in json.loads(first) if k in columns]
    return [*keys, *(c for c in columns if c not in keys)]


def _part_files(directory: Path) -> list[Path]:
    """The parts of a directory: those its manifest lists, verified, in unit order (a run of
    `score`, `generate` or `cross-sample`), else every `part-*.parquet` in name order."""
    listed = manifest_files(directory)
    if listed is not None:
        return listed
    parts = sorted(directory.glob("part-*.parquet"))
    if not parts:
        raise DivscopeError(f"{directory}: directory holds no part-*.parquet files.")
    return parts


def write_table(frame: pl.DataFrame, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write `frame` atomically: Parquet (`.parquet`), JSONL (`.jsonl`) or a one-part directory.

    The table is written under a hidden temporary name and renamed into place, so a reader
    never sees a half-written output; replacing the file that `frame` was read from is safe.

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

    def write(tmp: Path) -> None:
        if path.suffix in PARQUET_SUFFIXES:
            frame.write_parquet(tmp, compression="zstd")
        elif path.suffix in JSONL_SUFFIXES:
            frame.write_ndjson(tmp)
        else:
            tmp.mkdir()
            frame.write_parquet(tmp / "part-00000.parquet", compression="zstd")

    write_atomically(path, write)
    return path


def write_json(document: Any, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write `document` as indented JSON atomically (temporary name, then rename).

    Raises:
        DivscopeError: the output exists and `overwrite` is False.

    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> print(write_json({"gini": 0.97}, f"{tmp.name}/summary.json").read_text())
    {
      "gini": 0.97
    }
    >>> tmp.cleanup()
    """
    path = check_target(path, overwrite=overwrite)
    text = json.dumps(document, indent=2) + "\n"
    write_atomically(path, lambda tmp: tmp.write_text(text))
    return path


def table_name(path: str | os.PathLike) -> str:
    """The default label of a token table: its file stem, or its directory's name.

    >>> table_name("runs/rl.parquet"), table_name("runs/sft")
    ('rl', 'sft')
    """
    return Path(path).stem  # a directory of parts has no suffix: its stem is its name


# ---------------------------------------------------------------- trajectories


def read_trajectories(
    path: str | os.PathLike | pl.DataFrame, *, source: str | None = None
) -> pl.DataFrame:
    """Read and validate a trajectory file (docs/contracts.md, "Trajectories"):
    key + ids or key + text. `path` may also be a frame already in memory, validated the same
    way; `source` names it in the messages (default: the path).

    Returns the frame with `prompt_id` as string and `sample_id` as Int32, ids as list[int64]
    when present, and the optional columns cast to their contract types.

    Raises:
        DivscopeError: a missing column, a duplicate key, a null value or an empty response.

    >>> trajectories = read_trajectories("fixtures/lab/trajectories.jsonl")  # the lab's
    >>> trajectories.height, trajectories.schema["sample_id"]
    (512, Int32)
    """
    frame = path if isinstance(path, pl.DataFrame) else read_table(path)
    source = source or ("trajectories" if isinstance(path, pl.DataFrame) else str(path))
    require_columns(frame.columns, TRAJECTORY_KEY, source=source, what="trajectories")
    has_ids = all(c in frame.columns for c in TRAJECTORY_IDS)
    has_text = all(c in frame.columns for c in TRAJECTORY_TEXT)
    if not (has_ids or has_text):
        raise DivscopeError(
            f"{source}: trajectories need either 'prompt_ids' + 'response_ids' (token ids, "
            f"preferred) or 'prompt' + 'response' (text); present: {', '.join(frame.columns)}."
        )
    casts: dict[str, pl.DataType] = {"prompt_id": pl.String(), "sample_id": pl.Int32()}
    if has_ids:
        casts |= {c: pl.List(pl.Int64()) for c in TRAJECTORY_IDS}
    casts |= {c: t for c, t in TRAJECTORY_OPTIONAL.items() if c in frame.columns}
    frame = cast_columns(frame, casts, source=source)
    needed = [*TRAJECTORY_KEY, *(TRAJECTORY_IDS if has_ids else TRAJECTORY_TEXT)]
    for column in needed:
        nulls = frame.filter(pl.col(column).is_null())
        if nulls.height:
            raise DivscopeError(
                f"{source}: column {column!r} is null for {_key_of(nulls.row(0, named=True))}."
            )
    duplicated = frame.filter(pl.struct(TRAJECTORY_KEY).is_duplicated())
    if duplicated.height:
        raise DivscopeError(
            f"{source}: duplicate key {_key_of(duplicated.row(0, named=True))}; "
            "(prompt_id, sample_id) must be unique."
        )
    return frame


def cast_columns(
    frame: pl.DataFrame, casts: Mapping[str, pl.DataType], *, source: str
) -> pl.DataFrame:
    """`frame` with each column of `casts` cast strictly to its type.

    Raises:
        DivscopeError: naming the first column whose values do not cast, its type and the
            type expected.

    >>> cast_columns(pl.DataFrame({"prompt_id": [1, 2]}), {"prompt_id": pl.String()},
    ...              source="prompts.jsonl")["prompt_id"].to_list()
    ['1', '2']
    >>> cast_columns(pl.DataFrame({"sample_id": ["a"]}), {"sample_id": pl.Int64()},
    ...              source="trajectories.jsonl")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    divscope.errors.DivscopeError: trajectories.jsonl: column 'sample_id' has the wrong type: ...
    """
    for column, dtype in casts.items():
        try:
            frame = frame.with_columns(pl.col(column).cast(dtype, strict=True))
        except Exception as error:
            reason = str(error).splitlines()[0]  # polars appends the failing expression
            raise DivscopeError(
                f"{source}: column {column!r} has the wrong type: {frame.schema[column]}, "
                f"expected {dtype} ({reason})."
            ) from error
    return frame


def attach_token_ids(frame: pl.DataFrame, tokenizer: Any) -> pl.DataFrame:
    """Make sure `frame` has `prompt_ids` and `response_ids`, tokenizing text if needed.

    Text prompts are tokenized as the model would see them (special tokens added, e.g. BOS);
    responses with `add_special_tokens=False`. The scoring engine validates the ids (empty
    sequences, ids outside the vocabulary), whichever way they were made.

    >>> from divscope.models.tokenizers import load_tokenizer
    >>> frame = pl.DataFrame({"prompt_id": ["a"], "sample_id": [0],
    ...                       "prompt": ["Ana has 3 coins."], "response": [" 3 + 4 = 7."]})
    >>> with_ids = attach_token_ids(frame, load_tokenizer("fixtures/lab/base"))
    >>> with_ids.select(pl.col("prompt_ids", "response_ids").list.len()).row(0)
    (5, 6)
    """
    if all(c in frame.columns for c in TRAJECTORY_IDS):
        return frame
    prompts = [tokenizer(text)["input_ids"] for text in frame["prompt"].to_list()]
    responses = [
        tokenizer(text, add_special_tokens=False)["input_ids"]
        for text in frame["response"].to_list()
    ]
    return frame.with_columns(
        pl.Series("prompt_ids", prompts, dtype=pl.List(pl.Int64())),
        pl.Series("response_ids", responses, dtype=pl.List(pl.Int64())),
    )


def _key_of(row: Mapping[str, Any]) -> str:
    return f"prompt_id={row.get('prompt_id')!r}, sample_id={row.get('sample_id')!r}"


# ---------------------------------------------------------------- token tables


def token_table_arrow_schema(metadata: Mapping[str, Any] | None = None) -> pa.Schema:
    """The Arrow schema of the token table, with the `divscope` metadata attached.

    >>> schema = token_table_arrow_schema({"top_p": 0.7})
    >>> "js" in schema.names, schema.metadata
    (True, {b'divscope': b'{"top_p": 0.7}'})
    """
    schema = pl.Schema(TOKEN_TABLE).to_arrow()
    if metadata is None:
        return schema
    return schema.with_metadata({METADATA_KEY: json.dumps(dict(metadata), default=str)})


class TokenTableWriter:
    """Stream a token table to Parquet; the output appears only when complete.

    A path ending in `.parquet` becomes one file, written one row group per `write` call. Any
    other path becomes a directory of `part-NNNNN.parquet` files of about `rows_per_part` rows.
    Everything is written under a hidden temporary name next to the output and renamed into
    place on a clean exit; on an exception the temporary output is removed and an existing
    output (replaced only with `overwrite=True`) is left untouched.

    Example (a row of nulls stands in for scored rows):
        >>> import tempfile
        >>> from divscope.schema import TOKEN_TABLE
        >>> tmp = tempfile.TemporaryDirectory()
        >>> with TokenTableWriter(f"{tmp.name}/tokens.parquet", {"top_p": 0.7}) as writer:
        ...     writer.write(pl.DataFrame([dict.fromkeys(TOKEN_TABLE)], schema=TOKEN_TABLE))
        >>> writer.rows_written, read_metadata(writer.path)
        (1, {'top_p': 0.7})
        >>> tmp.cleanup()
    """

    def __init__(
        self,
        path: str | os.PathLike,
        metadata: Mapping[str, Any],
        *,
        overwrite: bool = False,
        rows_per_part: int = 1_000_000,
    ) -> None:
        self.path = check_target(path, overwrite=overwrite)
        self.single_file = self.path.suffix in PARQUET_SUFFIXES
        self.schema = token_table_arrow_schema(metadata)
        self.rows_per_part = rows_per_part
        self.rows_written = 0
        self._tmp = temporary(self.path)
        self._writer: pq.ParquetWriter | None = None
        self._part_rows = 0
        self._n_parts = 0

    def __enter__(self) -> TokenTableWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        remove(self._tmp)
        if not self.single_file:
            self._tmp.mkdir()
        return self

    def write(self, frame: pl.DataFrame) -> None:
        """Append rows (any column order; cast to the token-table types)."""
        require_columns(frame.columns, TOKEN_TABLE, source="scored batch", what="the token table")
        table = frame.select(pl.col(c).cast(t) for c, t in TOKEN_TABLE.items()).to_arrow()
        table = table.cast(self.schema)
        if self._writer is None or (not self.single_file and self._part_rows >= self.rows_per_part):
            self._open_next()
        assert self._writer is not None
        self._writer.write_table(table)
        self._part_rows += table.num_rows
        self.rows_written += table.num_rows

    def _open_next(self) -> None:
        if self._writer is not None:
            self._writer.close()
        target = self._tmp if self.single_file else self._tmp / f"part-{self._n_parts:05d}.parquet"
        self._writer = pq.ParquetWriter(target, self.schema, compression="zstd")
        self._n_parts += 1
        self._part_rows = 0

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._writer is None and exc_type is None:
            self._open_next()  # an empty but valid table
        if self._writer is not None:
            self._writer.close()
        if exc_type is not None:
            remove(self._tmp)
            return
        remove(self.path)
        self._tmp.rename(self.path)


def _token_table_files(path: Path) -> list[Path]:
    if not path.exists():
        raise DivscopeError(
            f"{path}: no such token table (a .parquet file or a directory of parts)."
        )
    return _part_files(path) if path.is_dir() else [path]


def scan_token_table(path: str | os.PathLike) -> pl.LazyFrame:
    """Lazily scan a token table (one Parquet file or a directory of parts).

    A table written before the token table had a `source` column gets one, null (after
    `sample_id`, as in the contract), so that every reader can rely on it.

    Raises:
        DivscopeError: the path is missing or the table lacks token-table columns.

    >>> scan_token_table(lab_tokens).select("prompt_id", "sample_id").unique().collect().height
    8
    """
    files = _token_table_files(Path(path))
    try:
        frame = pl.scan_parquet(files)
        columns = frame.collect_schema().names()
    except Exception as error:
        raise DivscopeError(f"{path}: not a readable Parquet token table ({error}).") from error
    require_columns(
        columns, (c for c in TOKEN_TABLE if c != "source"), source=str(path), what="a token table"
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
    first = _token_table_files(Path(path))[0]
    try:
        metadata = pq.read_schema(first).metadata or {}
    except Exception as error:
        raise DivscopeError(f"{first}: not a readable Parquet file ({error}).") from error
    if METADATA_KEY not in metadata:
        raise DivscopeError(f"{first}: no 'divscope' metadata; was it written by divscope score?")
    return json.loads(metadata[METADATA_KEY])


# ---------------------------------------------------------------- cross-sample results


def cross_sample_frame(frame: pl.DataFrame) -> pl.DataFrame:
    """Cross-sample results as written: the contract columns cast to their `CROSS_SAMPLE` types
    and first, other columns (policy parameters) after.

    Raises:
        DivscopeError: a missing contract column.

    >>> from divscope.schema import CROSS_SAMPLE
    >>> row = {"top_p": 0.7} | dict.fromkeys(CROSS_SAMPLE) | {"prompt_id": "a", "sample_id": 0,
    ...     "policy": "base", "budget": -1}
    >>> results = cross_sample_frame(pl.DataFrame([row]))
    >>> results.columns[0], results.columns[-1], results.schema["budget"]
    ('prompt_id', 'top_p', Int32)
    """
    require_columns(frame.columns, CROSS_SAMPLE, source="results", what="cross-sample results")
    extra = [c for c in frame.columns if c not in CROSS_SAMPLE]
    return frame.select(*(pl.col(c).cast(t) for c, t in CROSS_SAMPLE.items()), *extra)


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
    if path.exists():
        return read_table(path)
    suffixes = (*PARQUET_SUFFIXES, *JSONL_SUFFIXES)
    if isinstance(reference, os.PathLike) or len(path.parts) > 1 or path.suffix in suffixes:
        raise DivscopeError(
            f"--reference {reference}: no such file; give graded responses (.parquet, .jsonl or "
            "a directory of parts) or a policy label of the cross-sample results."
        )
    return str(reference)
