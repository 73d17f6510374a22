"""Arrow tables: what `score`, `generate` and `cross-sample` read and write, with pyarrow alone.

Every input path may also be a file of a Hub repository, `hf://datasets/ORG/NAME[@REV]/PATH`
(`local_path`: downloaded into the Hub cache, or found there offline).

The scoring, generation and decoding path reads its inputs (trajectories, prompts) and writes
its outputs (token tables, trajectories, cross-sample results) as `pyarrow.Table`s, so that it
runs where polars is not installed (a GPU image: torch, transformers and pyarrow). Column types
come from `divscope.schema` (`*_ARROW`). The analyses read the same files with polars
(`divscope.io`). `TokenTableWriter` streams a token table to disk.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
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
)
from divscope.schema import (
    TOKEN_TABLE_ARROW,
    TRAJECTORY_IDS,
    TRAJECTORY_KEY,
    TRAJECTORY_OPTIONAL_ARROW,
    TRAJECTORY_TEXT,
    arrow_schema,
    require_columns,
)

IDS = pa.large_list(pa.int64())
"""Token ids as read: prompts' and trajectories' `prompt_ids` and `response_ids`."""


def as_arrow(table: Any) -> pa.Table:
    """`table` as a `pyarrow.Table`: itself, a polars DataFrame's `to_arrow()`, or a list of
    dicts (one per row) as `pa.Table.from_pylist` reads it.

    Raises:
        DivscopeError: a list of anything but dicts, or another kind of object.

    >>> as_arrow(pa.table({"a": [1]})).num_rows
    1
    >>> as_arrow([{"a": 1}, {"a": 2}])["a"].to_pylist()
    [1, 2]
    """
    if isinstance(table, pa.Table):
        return table
    if isinstance(table, list | tuple):
        if not all(isinstance(row, Mapping) for row in table):
            raise DivscopeError(
                "a list given as a table must hold one dict per row (column -> value)."
            )
        return pa.Table.from_pylist(list(table))
    if not hasattr(table, "to_arrow"):
        raise DivscopeError(
            f"a table of type {type(table).__name__}: give a path (Parquet or JSONL), a polars "
            "DataFrame, a pyarrow Table or a list of dicts (one per row)."
        )
    return table.to_arrow()


def in_memory(value: Any) -> bool:
    """Whether an input is a table already in memory (a `pyarrow.Table`, a polars DataFrame or
    a list of dicts) rather than a path: what every reader of a table input accepts.

    >>> in_memory("fixtures/lab/trajectories.jsonl"), in_memory([{"prompt_id": "a"}])
    (False, True)
    """
    return not isinstance(value, str | os.PathLike)


def input_name(value: Any, what: str = "input") -> str:
    """How messages and metadata name an input: its path as given (an `hf://` path with its
    `//`, which the command line's `Path` collapsed), or `what` (in memory).

    >>> input_name("prompts.jsonl", "prompts"), input_name([], "prompts")
    ('prompts.jsonl', 'prompts (in memory)')
    >>> input_name(Path("hf://datasets/org/name/x.parquet"))
    'hf://datasets/org/name/x.parquet'
    """
    if in_memory(value):
        return f"{what} (in memory)"
    return re.sub(r"^hf:/+", "hf://", str(value)) if is_hub_path(value) else str(value)


def scratch_table(name: str, run: Callable[[Path], Any]) -> pa.Table:
    """What a command given no output (`out=None`, the Python API) returns: `run(path)` writes
    to `path`, a file `name` in a fresh temporary directory, and the table written there is read
    back (its `divscope` metadata kept) before the directory is removed; `run`'s own result
    where it is a table already.

    >>> scratch_table("t.parquet", lambda path: pq.write_table(pa.table({"a": [1]}), path)).num_rows
    1
    """
    with tempfile.TemporaryDirectory(prefix="divscope-") as directory:
        path = Path(directory, name)
        result = run(path)
        return result if isinstance(result, pa.Table) else pq.read_table(path)


def scratch_file(table: Any, name: str, types: Mapping[str, pa.DataType] | None = None) -> Path:
    """A table in memory (`in_memory`) written to a Parquet file `name` in this process's
    scratch directory (removed when the process exits), for the readers that scan files (a
    `Study`'s token tables); a `pyarrow.Table`'s `divscope` metadata is kept, and the columns
    of `types` it holds are cast to their types (a list of dicts has Python's: int64, float64).

    Raises:
        DivscopeError: a column of `types` whose values do not cast.

    >>> pq.read_table(scratch_file([{"a": 1}], "a.parquet", {"a": pa.int32()})).schema
    a: int32
    """
    table = as_arrow(table)
    if types:
        present = {c: t for c, t in types.items() if c in table.column_names}
        table = cast_table(table, present, source=f"{name} (in memory)")
    directory = Path(tempfile.mkdtemp(prefix="divscope-", dir=_scratch_root()))
    path = directory / name
    pq.write_table(table, path)
    return path


@functools.cache
def _scratch_root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="divscope-scratch-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


def read_arrow(path: str | os.PathLike) -> pa.Table:
    """Read a Parquet file, a directory of Parquet parts, or a JSONL file; text and list
    columns as `large_string` and `large_list` (`large`), the types divscope writes.

    Raises:
        DivscopeError: the path does not exist, has an unknown suffix or cannot be parsed.

    >>> read_arrow("fixtures/lab/prompts/eval.jsonl").num_rows  # from the repository root
    256
    """
    return read_file(
        path,
        parts=lambda files: pa.concat_tables(
            [large(pq.read_table(part)) for part in files], promote_options="permissive"
        ),
        parquet=lambda file: large(pq.read_table(file)),
        jsonl=lambda file: large(pa_json.read_json(file)),
    )


HUB_PATH = re.compile(
    r"hf:/+(?:(?P<kind>datasets|spaces)/)?(?P<repo>[^/@]+/[^/@]+)"
    r"(?:@(?P<revision>refs/pr/\d+|refs/convert/parquet|[^/]+))?/(?P<file>.+)"
)
"""A file of a Hub repository, as polars and `huggingface_hub.HfFileSystem` name it:
`hf://datasets/ORG/NAME[@REVISION]/PATH` (`hf://ORG/NAME/...` for a model repository; a
revision may be URL-quoted, `refs%2Fpr%2F1`, and `~parquet` is the Hub's Parquet conversion,
`refs/convert/parquet`)."""


def is_hub_path(path: Any) -> bool:
    """Whether `path` names a Hub file (`hf://...`; `Path` collapses it to `hf:/...`).

    >>> is_hub_path(Path("hf://datasets/org/name/x.parquet")), is_hub_path("runs/x.parquet")
    (True, False)
    """
    return isinstance(path, str | os.PathLike) and os.fspath(path).startswith("hf:/")


def local_path(path: str | os.PathLike) -> Path:
    """`path` on this machine: a local path as it is, or an `hf://` file (`HUB_PATH`) from the
    Hub cache, downloaded there first when it is missing and the Hub can be reached
    (`huggingface_hub.hf_hub_download`, which honours `HF_HUB_OFFLINE` and `HF_HUB_CACHE`).

    >>> local_path("fixtures/lab/prompts/eval.jsonl").name
    'eval.jsonl'

    Raises:
        DivscopeError: an `hf://` path that does not name a repository's file, or one that
            could not be reached (offline, no network, no such repository, revision or file),
            with the command that downloads a local copy.
    """
    if not is_hub_path(path):
        return Path(path)
    text = input_name(path)
    found = HUB_PATH.fullmatch(text)
    if found is None:
        raise DivscopeError(
            f"{text}: not a Hub file; write hf://datasets/ORG/NAME[@REVISION]/PATH (e.g. "
            "hf://datasets/openai/gsm8k/main/test-00000-of-00001.parquet)."
        )
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    kind = (found["kind"] or "models").removesuffix("s")
    revision = found["revision"] and unquote(found["revision"])
    revision = "refs/convert/parquet" if revision == "~parquet" else revision
    try:
        return Path(
            hf_hub_download(found["repo"], found["file"], repo_type=kind, revision=revision)
        )
    except (OSError, EntryNotFoundError, ValueError) as error:
        option = f" --revision {shlex.quote(revision)}" if revision else ""
        raise DivscopeError(
            f"{text}: could not be reached ({type(error).__name__}: {error}). Pass a local copy "
            "instead: download it where the Hub can be reached,\n"
            f"    hf download {found['repo']} {shlex.quote(found['file'])} --repo-type {kind}"
            f"{option} --local-dir DIR\n"
            f"and pass DIR/{found['file']} (or set HF_HUB_CACHE to a cache that holds it)."
        ) from error


def read_file(path: str | os.PathLike, *, parts, parquet, jsonl):
    """Read `path` with the reader of its kind: `parts(files)` for a directory of Parquet parts,
    `parquet(path)` or `jsonl(path)` by suffix; a missing path, an unknown suffix or a reader's
    error raised as a `DivscopeError` naming the file (what every table reader shares). An
    `hf://` path is read from the Hub cache (`local_path`).

    >>> read_file("fixtures/lab/prompts/eval.jsonl", parts=None, parquet=None,
    ...           jsonl=lambda file: file.name)
    'eval.jsonl'
    """
    path = local_path(path)
    if not path.exists():
        raise DivscopeError(f"{path}: no such file or directory.")
    try:
        if path.is_dir():
            return parts(part_files(path))
        if path.suffix in PARQUET_SUFFIXES:
            return parquet(path)
        if path.suffix in JSONL_SUFFIXES:
            return jsonl(path)
    except DivscopeError:
        raise
    except Exception as error:  # polars and pyarrow raise many types for corrupt input
        reason = f"{type(error).__name__}: {error}"
        raise DivscopeError(f"{path}: could not be read ({reason}).") from error
    raise DivscopeError(
        f"{path}: unknown file type {path.suffix!r}; use .parquet or .jsonl "
        "(or a directory of part-*.parquet files)."
    )


def large(table: pa.Table) -> pa.Table:
    """`table` with its text as `large_string` and its lists as `large_list` (nested too), as
    polars reads and writes them; its schema metadata is dropped.

    >>> large(pa.table({"a": ["x"], "b": [[1]]})).schema
    a: large_string
    b: large_list<item: int64>
      child 0, item: int64
    """
    fields = [pa.field(f.name, _large_type(f.type)) for f in table.schema]
    return table.cast(pa.schema(fields))


def _large_type(dtype: pa.DataType) -> pa.DataType:
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or dtype == pa.string_view():
        return pa.large_string()
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return pa.large_list(_large_type(dtype.value_type))
    return dtype


def part_files(directory: Path) -> list[Path]:
    """The parts of a directory: those its manifest lists, verified, in unit order (a run of
    `score`, `generate` or `cross-sample`), else every `part-*.parquet` in name order.

    Raises:
        DivscopeError: a directory without parts, or an incomplete or damaged run.
    """
    listed = manifest_files(directory)
    if listed is not None:
        return listed
    parts = sorted(directory.glob("part-*.parquet"))
    if not parts:
        raise DivscopeError(f"{directory}: directory holds no part-*.parquet files.")
    return parts


def cast_table(table: pa.Table, types: Mapping[str, pa.DataType], *, source: str) -> pa.Table:
    """`table` with each column of `types` cast strictly (no overflow, no truncation).

    Raises:
        DivscopeError: naming the first column whose values do not cast, its type and the
            type expected.

    >>> cast_table(pa.table({"prompt_id": [1, 2]}), {"prompt_id": pa.large_string()},
    ...            source="prompts.jsonl")["prompt_id"].to_pylist()
    ['1', '2']
    >>> cast_table(pa.table({"sample_id": ["a"]}), {"sample_id": pa.int32()},
    ...            source="trajectories.jsonl")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    divscope.errors.DivscopeError: trajectories.jsonl: column 'sample_id' has the wrong type: ...
    """
    for column, dtype in types.items():
        at = table.schema.get_field_index(column)
        try:
            table = table.set_column(at, column, pc.cast(table[column], dtype, safe=True))
        except Exception as error:
            reason = str(error).splitlines()[0]
            raise DivscopeError(
                f"{source}: column {column!r} has the wrong type: {table.schema.field(at).type}, "
                f"expected {dtype} ({reason})."
            ) from error
    return table


def conform(
    table: pa.Table, types: Mapping[str, pa.DataType], *, source: str, what: str
) -> pa.Table:
    """`table` with the contract columns of `types` first, cast to their types, and its other
    columns after, in their order.

    Raises:
        DivscopeError: a missing contract column.

    >>> conform(pa.table({"x": [1], "k": [2]}), {"k": pa.int32()}, source="t", what="k").schema
    k: int32
    x: int64
    """
    require_columns(table.column_names, types, source=source, what=what)
    extra = [c for c in table.column_names if c not in types]
    return cast_table(table.select([*types, *extra]), types, source=source)


def first_row(table: pa.Table, mask: Any) -> dict[str, Any] | None:
    """The first row of `table` where `mask` (a boolean array) is true, or None.

    >>> first_row(pa.table({"a": [1, 2]}), pa.array([False, True]))
    {'a': 2}
    """
    mask = pc.fill_null(mask, False)
    at = pc.index(mask, True).as_py()
    return None if at < 0 else table.slice(at, 1).to_pylist()[0]


def key_of(row: Mapping[str, Any]) -> str:
    """How messages name a trajectory.

    >>> key_of({"prompt_id": "a", "sample_id": 0})
    "prompt_id='a', sample_id=0"
    """
    return f"prompt_id={row.get('prompt_id')!r}, sample_id={row.get('sample_id')!r}"


def first_duplicate(table: pa.Table, key: Iterable[str]) -> dict[str, Any] | None:
    """The first row of `table` whose `key` another row has too, or None.

    >>> first_duplicate(pa.table({"k": ["a", "b", "b"], "x": [1, 2, 3]}), ["k"])
    {'k': 'b', 'x': 2}
    """
    key = list(key)
    values = list(zip(*(table[c].to_pylist() for c in key), strict=True))
    seen: dict[tuple, int] = {}
    first = None
    for i, value in enumerate(values):
        if value in seen:
            first = min(first if first is not None else seen[value], seen[value])
        else:
            seen[value] = i
    return None if first is None else table.slice(first, 1).to_pylist()[0]


def read_trajectories_arrow(
    path: str | os.PathLike | Any, *, source: str | None = None
) -> pa.Table:
    """Read and validate a trajectory file (docs/contracts.md, "Trajectories"):
    key + ids or key + text. `path` may also be a table already in memory (`in_memory`),
    validated the same way; `source` names it in the messages (default: the path).

    Returns the table with `prompt_id` as text and `sample_id` as int32, ids as lists of int64
    when present, and the optional columns cast to their contract types.

    Raises:
        DivscopeError: a missing column, a duplicate key, a null value or an empty response.

    >>> trajectories = read_trajectories_arrow("fixtures/lab/trajectories.jsonl")  # the lab's
    >>> trajectories.num_rows, trajectories.schema.field("sample_id").type
    (512, DataType(int32))
    """
    table = as_arrow(path) if in_memory(path) else read_arrow(path)
    source = source or input_name(path, "trajectories")
    columns = table.column_names
    require_columns(columns, TRAJECTORY_KEY, source=source, what="trajectories")
    has_ids = all(c in columns for c in TRAJECTORY_IDS)
    has_text = all(c in columns for c in TRAJECTORY_TEXT)
    if not (has_ids or has_text):
        raise DivscopeError(
            f"{source}: trajectories need either 'prompt_ids' + 'response_ids' (token ids, "
            f"preferred) or 'prompt' + 'response' (text); present: {', '.join(columns)}."
        )
    casts: dict[str, pa.DataType] = {"prompt_id": pa.large_string(), "sample_id": pa.int32()}
    if has_ids:
        casts |= dict.fromkeys(TRAJECTORY_IDS, IDS)
    casts |= {c: t for c, t in TRAJECTORY_OPTIONAL_ARROW.items() if c in columns}
    table = cast_table(table, casts, source=source)
    for column in [*TRAJECTORY_KEY, *(TRAJECTORY_IDS if has_ids else TRAJECTORY_TEXT)]:
        row = first_row(table, pc.is_null(table[column]))
        if row is not None:
            raise DivscopeError(f"{source}: column {column!r} is null for {key_of(row)}.")
    duplicated = first_duplicate(table, TRAJECTORY_KEY)
    if duplicated is not None:
        raise DivscopeError(
            f"{source}: duplicate key {key_of(duplicated)}; (prompt_id, sample_id) must be unique."
        )
    return table


def attach_ids(table: pa.Table, tokenizer: Any) -> pa.Table:
    """Make sure `table` has `prompt_ids` and `response_ids`, tokenizing the text of each that
    it lacks.

    Text prompts are tokenized as the model would see them (special tokens added, e.g. BOS);
    responses with `add_special_tokens=False`. The scoring engine validates the ids (empty
    sequences, ids outside the vocabulary), whichever way they were made.

    >>> from divscope.models.tokenizers import load_tokenizer
    >>> table = pa.table({"prompt_id": ["a"], "sample_id": [0],
    ...                   "prompt": ["Ana has 3 coins."], "response": [" 3 + 4 = 7."]})
    >>> with_ids = attach_ids(table, load_tokenizer("fixtures/lab/base"))
    >>> len(with_ids["prompt_ids"][0]), len(with_ids["response_ids"][0])
    (5, 6)
    """
    if "prompt_ids" not in table.column_names:
        prompts = [tokenizer(text)["input_ids"] for text in table["prompt"].to_pylist()]
        table = table.append_column("prompt_ids", pa.array(prompts, IDS))
    if "response_ids" not in table.column_names:
        responses = [
            tokenizer(text, add_special_tokens=False)["input_ids"]
            for text in table["response"].to_pylist()
        ]
        table = table.append_column("response_ids", pa.array(responses, IDS))
    return table


def list_lengths(column: Any) -> np.ndarray:
    """The length of each list of a list column, as int64.

    >>> list_lengths(pa.chunked_array([[[1, 2], [3]]])).tolist()
    [2, 1]
    """
    return pc.list_value_length(column).to_numpy(zero_copy_only=False).astype(np.int64)


def token_table_schema(metadata: Mapping[str, Any] | None = None) -> pa.Schema:
    """The Arrow schema of the token table, with the `divscope` metadata attached.

    >>> schema = token_table_schema({"top_p": 0.7})
    >>> schema.field("token").type, schema.metadata
    (DataType(large_string), {b'divscope': b'{"top_p": 0.7}'})
    """
    schema = arrow_schema(TOKEN_TABLE_ARROW)
    if metadata is None:
        return schema
    return schema.with_metadata({METADATA_KEY: json.dumps(dict(metadata), default=str)})


def token_table_files(path: str | os.PathLike) -> list[Path]:
    """The Parquet files of a token table: the file itself (an `hf://` file from the Hub
    cache, `local_path`), or a directory's parts.

    Raises:
        DivscopeError: no such token table, or an incomplete or damaged directory.
    """
    path = local_path(path)
    if not path.exists():
        raise DivscopeError(
            f"{path}: no such token table (a .parquet file or a directory of parts)."
        )
    return part_files(path) if path.is_dir() else [path]


def read_columns(path: str | os.PathLike, columns: Iterable[str], *, what: str) -> pa.Table:
    """Some columns of a token table (a file or a directory of parts); `what` they are for
    names them in the message of a missing one.

    Raises:
        DivscopeError: no such table, or a missing column.

    >>> read_columns(lab_tokens, ["js"], what="the summary").num_rows
    731
    """
    files, columns = token_table_files(path), list(columns)
    for file in files:
        require_columns(pq.read_schema(file).names, columns, source=str(file), what=what)
    return pa.concat_tables(pq.read_table(f, columns=columns) for f in files)


class TokenTableWriter:
    """Stream a token table to Parquet; the output appears only when complete.

    A path ending in `.parquet` becomes one file, written one row group per `write` call. Any
    other path becomes a directory of `part-NNNNN.parquet` files of about `rows_per_part` rows.
    Everything is written under a hidden temporary name next to the output and renamed into
    place on a clean exit; on an exception the temporary output is removed and an existing
    output (replaced only with `overwrite=True`) is left untouched.

    Example (a row of nulls stands in for scored rows; `write` takes a `pyarrow.Table`, as
    `score_trajectories` gives them, or a polars frame):
        >>> import tempfile
        >>> from divscope.schema import TOKEN_TABLE_ARROW
        >>> tmp = tempfile.TemporaryDirectory()
        >>> with TokenTableWriter(f"{tmp.name}/tokens.parquet", {"top_p": 0.7}) as writer:
        ...     writer.write(pa.table({c: pa.nulls(1, t) for c, t in TOKEN_TABLE_ARROW.items()}))
        >>> writer.rows_written, pq.read_schema(writer.path).metadata[b"divscope"]
        (1, b'{"top_p": 0.7}')
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
        self.schema = token_table_schema(metadata)
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

    def write(self, frame: Any) -> None:
        """Append rows (any column order; cast to the token-table types)."""
        table = as_arrow(frame)
        require_columns(
            table.column_names, TOKEN_TABLE_ARROW, source="scored batch", what="the token table"
        )
        table = table.select(list(TOKEN_TABLE_ARROW)).cast(self.schema)
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
