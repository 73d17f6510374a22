"""Where outputs are written: the target checked before any work (`check_target`,
`check_output`), written atomically (`write_atomically`), and in parts, so that nothing finished
is ever lost.

`score`, `generate` and `cross-sample` cut their work into units (`divscope.distributed`) and
write one Parquet part per unit, `part-NNNNNN.parquet`, as soon as the unit is done: under a
temporary name, then renamed, so a part exists only when complete. Next to the parts,
`manifest.json` records the command, the settings that decide the output and the number of
parts; a rerun with `--resume` checks the settings and skips the parts present, and one with
other settings is refused instead of mixed in.

A run started from the command line also records its invocation (`recording`): the command and
every option's value as resolved, in the manifest, in each part's metadata (`INVOCATION_KEY`) and
in JSON outputs (`with_invocation`); `divscope config` writes it back as a study file.

Every part carries Parquet page checksums and, in its metadata, its unit and the digest of the
settings that made it: a truncated, corrupted or foreign part is found, and named, both when a
run resumes and when the output is read. A directory output is the parts themselves (it reads
as one table once complete); a `.parquet` or `.jsonl` output is assembled from a hidden sibling
directory `.NAME.parts` when the last part is written, and that directory is then removed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from divscope.distributed import World
from divscope.errors import DivscopeError

MANIFEST = "manifest.json"
METADATA_KEY = b"divscope"
"""Schema metadata: the run's provenance (models, settings, versions), a JSON object."""
PART_KEY = b"divscope.part"
"""Schema metadata of a part: its unit and the digest of the settings that made it."""
INVOCATION_KEY = b"divscope.invocation"
"""Schema metadata: the command line that made the output (`recording`), a JSON object."""
_INVOCATION: ContextVar[dict[str, Any] | None] = ContextVar("divscope_invocation", default=None)
PARQUET_SUFFIXES = (".parquet", ".pq")
JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")


def is_single_file(path: str | os.PathLike) -> bool:
    """Whether an output path names one file (`.parquet`, `.jsonl`) rather than a directory."""
    return Path(path).suffix in (*PARQUET_SUFFIXES, *JSONL_SUFFIXES)


def part_name(unit: int) -> str:
    """The file name of unit `unit`'s part.

    >>> part_name(7)
    'part-000007.parquet'
    """
    return f"part-{unit:06d}.parquet"


def settings_digest(settings: Any) -> str:
    """A digest of the settings that decide an output (JSON with sorted keys)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()


def frame_digest(frame: Any) -> str:
    """A digest of a table's values (a `pyarrow.Table`, or a polars DataFrame), for inputs too
    large for `settings_digest`: list columns hash their flattened values and their lengths
    (fast on millions of token ids). Types are named as polars names them, so that a digest
    does not change with the library that read the table.

    >>> a = pa.table({"k": ["x"], "ids": [[1, 2]]})
    >>> frame_digest(a) == frame_digest(a.take([0])), frame_digest(a) == frame_digest(a[:0])
    (True, False)
    """
    table = frame if isinstance(frame, pa.Table) else frame.to_arrow()
    digest = hashlib.sha256()
    for name, column in zip(table.column_names, table.columns, strict=True):
        dtype = column.type
        digest.update(f"{name}:{_polars_name(dtype)}:{len(column)}".encode())
        if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
            lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
            digest.update(lengths.astype(np.uint32).tobytes())
            column, dtype = pc.list_flatten(column), dtype.value_type
        if pa.types.is_integer(dtype) or pa.types.is_floating(dtype):
            digest.update(column.to_numpy().tobytes())
        else:
            digest.update(json.dumps(column.to_pylist(), default=str).encode())
    return digest.hexdigest()


def _polars_name(dtype: pa.DataType) -> str:
    """How polars prints the dtype it reads `dtype` as (`List(Int64)`, `String`, ...)."""
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return f"List({_polars_name(dtype.value_type)})"
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or dtype == pa.string_view():
        return "String"
    if pa.types.is_boolean(dtype):
        return "Boolean"
    if pa.types.is_null(dtype):
        return "Null"
    if pa.types.is_integer(dtype):
        return f"{'Int' if pa.types.is_signed_integer(dtype) else 'UInt'}{dtype.bit_width}"
    if pa.types.is_floating(dtype):
        return f"Float{dtype.bit_width}"
    return str(dtype)


@contextmanager
def recording(invocation: Mapping[str, Any]) -> Iterator[None]:
    """Within the block, the outputs written record `invocation` (`{"command": "score",
    "options": {"top-p": 0.7, ...}}`, as `divscope.cli.command` builds it for the command line).

    >>> with recording({"command": "analyze", "options": {"seed": 0}}):
    ...     with_invocation({"n_tokens": 3})["invocation"]["command"]
    'analyze'
    >>> with_invocation({"n_tokens": 3})  # outside: nothing recorded
    {'n_tokens': 3}
    """
    token = _INVOCATION.set(json.loads(json.dumps(dict(invocation), default=str)))
    try:
        yield
    finally:
        _INVOCATION.reset(token)


def invocation() -> dict[str, Any] | None:
    """The invocation being recorded (`recording`); None outside a command line run."""
    return _INVOCATION.get()


def with_invocation(document: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON output's `document` with the invocation being recorded, under `invocation`."""
    recorded = invocation()
    return dict(document) if recorded is None else {**document, "invocation": recorded}


@dataclass(frozen=True)
class Parts:
    """The parts of one command's output: where they go and what makes them belong."""

    out: Path
    """The output the user named."""
    directory: Path
    """Where the parts are: `out` itself, or the hidden `.NAME.parts` of a single-file output."""
    command: str
    """The divscope command writing them (`score`, `generate`, `cross-sample`)."""
    settings: dict[str, Any]
    """What decides the output; a resumed run must have the same."""
    n_parts: int
    """Parts of the complete output (one per unit of work)."""
    invocation: dict[str, Any] | None = None
    """The command line that writes them (`recording`), kept in the manifest and the parts'
    metadata; not a setting (a resumed run may have other run options)."""

    @property
    def digest(self) -> str:
        return settings_digest(self.settings)

    @property
    def finished(self) -> bool:
        """A single-file output that already exists: an earlier run completed it."""
        return self.out != self.directory and self.out.exists()

    @staticmethod
    def start(
        out: str | os.PathLike,
        command: str,
        settings: Mapping[str, Any],
        n_parts: int,
        *,
        resume: bool,
        overwrite: bool,
        world: World,
    ) -> Parts:
        """Make the output ready for parts (rank 0 does it; every rank gets the same answer).

        Without `resume` the output must not exist (`overwrite` removes it first); with
        `resume` it may, and then its manifest must match `settings`. The directory and its
        manifest are made with the first part.

        Raises:
            DivscopeError: an existing output without `resume` or `overwrite`; a manifest with
                other settings, a missing manifest, or a directory divscope did not write;
                `overwrite` with `--shard` (each shard would remove the others' parts).
        """
        out = Path(out)
        directory = out.with_name(f".{out.name}.parts") if is_single_file(out) else out
        settings = json.loads(json.dumps(dict(settings), default=str))  # as read back
        parts = Parts(out, directory, command, settings, n_parts, invocation())
        if n_parts < 1:
            raise DivscopeError(f"{command}: the input holds no rows; nothing to write to {out}.")
        if overwrite and resume:
            raise DivscopeError("--overwrite and --resume: give one (start over, or continue).")
        if overwrite and world.size > 1 and not world.group:
            raise DivscopeError(
                f"--overwrite with --shard {world.rank}/{world.size}: each shard would remove "
                f"the others' parts; remove {out} once, then run every shard with --resume."
            )
        world.on_main(lambda: parts._prepare(resume=resume, overwrite=overwrite))
        return parts

    def _prepare(self, *, resume: bool, overwrite: bool) -> None:
        if overwrite:
            for path in (self.out, self.directory):
                remove(path)
        if self.finished:
            if not resume:
                raise DivscopeError(
                    f"{self.out}: output exists; pass --overwrite to replace it (or --resume, "
                    "which finds it complete)."
                )
            remove(self.directory)  # left over by a run killed right after assembling
            return
        manifest = self.directory / MANIFEST
        if not resume and manifest.is_file() and not any(self.directory.glob("part-*.parquet")):
            remove(manifest)  # a run that failed before its first part: nothing to keep
        if self.directory.exists():
            if not manifest.is_file():
                if self.directory.is_file() or any(self.directory.iterdir()):
                    what = "was not written by divscope" if not resume else "has no manifest"
                    raise DivscopeError(
                        f"{self.directory}: exists and {what} ({MANIFEST} missing), so it "
                        "cannot be resumed; pass --overwrite to replace it or choose another "
                        "--out."
                    )
            elif not resume:
                raise DivscopeError(
                    f"{self.out}: output exists (an earlier run's parts); pass --resume to "
                    "continue it or --overwrite to start over (shards of one run: pass --resume "
                    "to every shard)."
                )
            else:
                self._check_manifest(manifest)

    def _create(self) -> None:
        """Write the manifest, with the first part: bad input found before any part is
        written leaves nothing behind."""
        manifest = self.directory / MANIFEST
        if manifest.is_file():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        document = {
            "command": self.command,
            "parts": self.n_parts,
            "settings_sha256": self.digest,
            "settings": self.settings,
        }
        if self.invocation is not None:
            document["invocation"] = self.invocation
        write_atomically(manifest, lambda tmp: tmp.write_text(json.dumps(document, indent=2)))
        self._check_manifest(manifest)  # another shard may have written its own meanwhile

    def _check_manifest(self, manifest: Path) -> None:
        try:
            previous = json.loads(manifest.read_text())
            settings, n_parts = previous["settings"], previous["parts"]
        except (ValueError, KeyError, TypeError) as error:
            raise DivscopeError(
                f"{manifest}: not a readable divscope manifest ({error}); pass --overwrite to "
                "start over."
            ) from error
        if previous.get("command") != self.command:
            raise DivscopeError(
                f"{self.directory}: holds the output of divscope {previous.get('command')}, not "
                f"of divscope {self.command}; choose another --out."
            )
        changed = sorted(
            k for k in {*settings, *self.settings} if settings.get(k) != self.settings.get(k)
        )
        if changed or n_parts != self.n_parts:
            was = (
                ", ".join(
                    f"{k}: was {_short(settings.get(k))}, now {_short(self.settings.get(k))}"
                    for k in changed[:4]
                )
                or f"parts: was {n_parts}, now {self.n_parts}"
            )
            raise DivscopeError(
                f"{self.directory}: an earlier run used other settings or inputs ({was}); rerun "
                "with those to resume, or pass --overwrite to start over."
            )

    def done(self, units: Iterable[int]) -> set[int]:
        """Which of `units` have their part; each such part is verified whole (page checksums,
        unit, settings). Stale temporary files of `units` (a killed run's) are removed.

        Raises:
            DivscopeError: naming a truncated, corrupted or foreign part.
        """
        present = set()
        for unit in units:
            path = self.directory / part_name(unit)
            for stale in self.directory.glob(f".{path.name}.tmp-*"):
                remove(stale)
            if path.exists():
                check_part(path, unit, self.digest)
                present.add(unit)
        return present

    def write(self, unit: int, frame: Any, metadata: Mapping[str, Any],
              schema: pa.Schema | None = None) -> None:  # fmt: skip
        """Write unit `unit`'s part (a `pyarrow.Table`, or a polars DataFrame) atomically, with
        page checksums, the run's `metadata` and the part's own record (its unit and the
        settings digest); `schema` (e.g. the token table's) fixes the column types."""
        table = frame if isinstance(frame, pa.Table) else frame.to_arrow()
        if schema is not None:
            table = table.cast(schema.remove_metadata())
        recorded = {} if self.invocation is None else {INVOCATION_KEY: json.dumps(self.invocation)}
        table = table.replace_schema_metadata(
            {
                METADATA_KEY: json.dumps(dict(metadata), default=str),
                PART_KEY: json.dumps({"unit": unit, "settings_sha256": self.digest}),
                **recorded,
            }
        )
        self._create()
        path = self.directory / part_name(unit)
        write_atomically(path, lambda tmp: _write_parquet(table, tmp))

    def finish(self, world: World) -> bool:
        """After this rank's work: wait for the others (torchrun), then on rank 0, if every part
        is there, assemble a single-file output. Whether the output is complete."""
        world.wait()
        return world.on_main(self._assemble)

    def _assemble(self) -> bool:
        if self.finished:
            return True
        missing = [u for u in range(self.n_parts) if not (self.directory / part_name(u)).exists()]
        if missing:
            return False
        if self.out != self.directory:
            files = [self.directory / part_name(u) for u in range(self.n_parts)]
            write_atomically(self.out, lambda tmp: _assemble(files, tmp, self.out.suffix))
            remove(self.directory)
        return True


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


def check_target(path: str | os.PathLike, *, overwrite: bool) -> Path:
    """Raise unless `path` is free or may be replaced; call early to fail fast."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise DivscopeError(
            f"{path}: output exists; pass --overwrite (overwrite=True) to replace it."
        )
    return path


def check_output(out: str | os.PathLike, world: World) -> None:
    """Refuse, before any work, an output that independent shards cannot share.

    Raises:
        DivscopeError: a single-file output under `--shard`.
    """
    if world.size > 1 and not world.group and is_single_file(out):
        raise DivscopeError(
            f"--shard {world.rank}/{world.size} with --out {out}: independent shards write "
            "parts, so --out must be a directory (it reads back as one table once every shard "
            "is done)."
        )


def share_note(world: World) -> str:
    """` (share i of n)` for one process of several, else nothing; for the closing lines.

    >>> share_note(World(rank=1, size=4))
    ' (share 1 of 4)'
    """
    return f" (share {world.rank} of {world.size})" if world.size > 1 else ""


def written(out: Path, complete: bool) -> str:
    """What the closing line says of the output."""
    if complete:
        return f"wrote {out}"
    return (
        f"wrote this share's parts to {out}; the output is complete once every share is done "
        "(rerun a failed one with --resume)."
    )


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def check_part(path: Path, unit: int, digest: str) -> None:
    """Verify one part: every page against its checksum, and its record (its unit and the
    settings digest) against `unit` and `digest`. Done once per process for a file left
    unchanged.

    Raises:
        DivscopeError: a truncated or corrupted part, or one from another unit or settings.
    """
    try:
        stat = path.stat()
        record = _verified(path, stat.st_size, stat.st_mtime_ns)
    except Exception as error:  # pyarrow raises OSError/ArrowInvalid for damaged files
        raise DivscopeError(
            f"{path}: part is truncated or corrupted ({type(error).__name__}: "
            f"{' '.join(str(error).split())}); delete "
            "it and rerun with --resume to recompute it."
        ) from error
    if record.get("settings_sha256") != digest:
        raise DivscopeError(
            f"{path}: part was made with other settings or inputs than its directory's "
            f"{MANIFEST}; delete it and rerun with --resume, or start over with --overwrite."
        )
    if record.get("unit") != unit:
        raise DivscopeError(
            f"{path}: part holds unit {record.get('unit')}, not {unit}: it was renamed or "
            "copied from elsewhere; delete it and rerun with --resume."
        )


@functools.lru_cache(maxsize=4096)
def _verified(path: Path, size: int, mtime_ns: int) -> dict:
    """The record of a part read whole with page checksums; cached by size and modification
    time, so a table read several times is verified once."""
    handle = pq.ParquetFile(path, page_checksum_verification=True)
    for group in range(handle.num_row_groups):
        handle.read_row_group(group)
    return json.loads((handle.schema_arrow.metadata or {}).get(PART_KEY, b"{}"))


def manifest_files(directory: Path) -> list[Path] | None:
    """The parts of a directory that has a manifest, in unit order, each verified; None when it
    has no manifest (parts made by hand are read as they are).

    Raises:
        DivscopeError: an incomplete run (naming the missing parts), or a damaged or foreign
            part.
    """
    manifest = directory / MANIFEST
    if not manifest.is_file():
        return None
    try:
        document = json.loads(manifest.read_text())
        n_parts, digest, command = (
            document["parts"],
            document["settings_sha256"],
            document["command"],
        )
    except (ValueError, KeyError, TypeError) as error:
        raise DivscopeError(f"{manifest}: not a readable divscope manifest ({error}).") from error
    files = [directory / part_name(u) for u in range(n_parts)]
    missing = [f.name for f in files if not f.exists()]
    if missing:
        raise DivscopeError(
            f"{directory}: incomplete output of divscope {command}: {len(missing)} of "
            f"{n_parts} parts missing (e.g. {missing[0]}); finish it by rerunning the command "
            "with --resume."
        )
    for unit, path in enumerate(files):
        check_part(path, unit, digest)
    return files


def _write_parquet(table: pa.Table, path: Path) -> None:
    pq.write_table(table, path, compression="zstd", write_page_checksum=True)


def _assemble(files: list[Path], target: Path, suffix: str) -> None:
    """Concatenate the parts into one file (Parquet: streamed, one row group per part)."""
    if suffix in JSONL_SUFFIXES:
        import polars as pl  # JSONL is written by polars (the lean path writes Parquet)

        pl.read_parquet(files).write_ndjson(target)
        return
    first = pq.read_schema(files[0])
    kept = {k: v for k, v in (first.metadata or {}).items() if k in (METADATA_KEY, INVOCATION_KEY)}
    schema = first.remove_metadata().with_metadata(kept) if kept else first
    with pq.ParquetWriter(target, schema, compression="zstd", write_page_checksum=True) as writer:
        for path in files:
            writer.write_table(pq.read_table(path).cast(schema))


def temporary(path: Path) -> Path:
    """The hidden name next to `path` that an output is written under before it is complete."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def write_atomically(path: Path, write: Callable[[Path], Any]) -> None:
    """Call `write` on `path`'s temporary name, then rename the result to `path` (replacing
    what was there); if `write` fails, remove the temporary output and leave `path` as it was."""
    tmp = temporary(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove(tmp)
    try:
        write(tmp)
    except BaseException:
        remove(tmp)
        raise
    if path.is_dir() or tmp.is_dir():  # a rename replaces a file, not a directory
        remove(path)
    tmp.replace(path)


def remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
