"""Study files: a run's options as TOML, read by `--config` and written back by `divscope config`.

A study file holds the options of one or several commands: a section per command (`[score]`,
`[cross-sample]`, `[lab.build]`), each key an option's name without `--` (`top-p` or `top_p`),
and keys before the first section that every command having that option shares (`base`, `rl`).
The command line reads it (`divscope.cli.command`: `--config`, where options given on the command
line win); here it is parsed (`read_study`), and an output's recorded invocation
(`divscope.output.recording`) is read (`read_invocation`) and written back as one
(`study_text`, `config`), so that a run can be replayed.

>>> text = study_text({"command": "score", "options": {"top-p": 0.7, "rl": None}})
>>> print(text)
[score]
top-p = 0.7
<BLANKLINE>
>>> import tomllib
>>> tomllib.loads(text)
{'score': {'top-p': 0.7}}
"""

from __future__ import annotations

import json
import math
import os
import tomllib
from pathlib import Path
from typing import Annotated, Any

import pyarrow.parquet as pq

from divscope.errors import DivscopeError
from divscope.output import (
    INVOCATION_KEY,
    JSONL_SUFFIXES,
    MANIFEST,
    PARQUET_SUFFIXES,
    check_target,
    write_atomically,
)
from divscope.params import RUN_ONLY, Flag


def config(
    output: str | os.PathLike,
    out: Annotated[str | os.PathLike | None, Flag("--out", "-o")] = None,
    overwrite: Annotated[bool, RUN_ONLY] = False,
) -> str:
    """Write the study file that replays the run that made an output.

    Reads the invocation the output recorded (the command and every option's value, as
    resolved; options about the run, such as --overwrite, --resume and --shard, are not
    recorded) and writes it as TOML: `divscope COMMAND --config study.toml` replays the run
    (options given on that command line win, e.g. another --out). Outputs of `score`,
    `generate` and `cross-sample` record it (Parquet metadata and the parts' manifest; a
    `.jsonl` output keeps none), as do `grade`'s Parquet and the JSON of `analyze`,
    `calibrate` and `weights`, when run from the command line.

    Args:
        output: an output of a divscope command: a `.parquet` file, a directory of parts, or a
            JSON file.
        out: where to write the study file; default: print it.
        overwrite: replace `out` if it exists.

    Returns:
        The study file's text.

    Raises:
        DivscopeError: `output` is missing, is not a divscope output, or recorded no
            invocation; an existing `out` without `overwrite`.

    Example (an analysis of `lab_tokens`, recorded as `divscope analyze` records it):
        >>> import tempfile
        >>> import divscope
        >>> from divscope.output import recording
        >>> tmp = tempfile.TemporaryDirectory()
        >>> summary = f"{tmp.name}/summary.json"
        >>> run = {"command": "analyze", "options": {"tokens": "t.parquet", "n-boot": 20}}
        >>> with recording(run):
        ...     _ = divscope.analyze(lab_tokens, summary)
        >>> print(config(summary))
        [analyze]
        tokens = "t.parquet"
        n-boot = 20
        <BLANKLINE>
        >>> tmp.cleanup()
    """
    text = study_text(read_invocation(output))
    if out is not None:
        target = check_target(out, overwrite=overwrite)
        write_atomically(target, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return text


def read_study(path: str | os.PathLike) -> dict[str, Any]:
    """The contents of the study file `path`, as TOML parses them.

    Raises:
        DivscopeError: the file is missing or is not valid TOML (naming the line).
    """
    path = Path(path)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise DivscopeError(f"{path}: no such study file (--config).") from error
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise DivscopeError(f"{path}: not a TOML study file ({error}).") from error


def read_invocation(output: str | os.PathLike) -> dict[str, Any]:
    """The invocation recorded by `output` (`divscope.output.recording`): `{"command": ...,
    "options": {...}}`.

    Raises:
        DivscopeError: `output` is missing, unreadable, or recorded no invocation.
    """
    path = Path(output)
    if not path.exists():
        raise DivscopeError(f"{path}: no such output.")
    if path.suffix in JSONL_SUFFIXES and path.suffix != ".json":
        raise DivscopeError(
            f"{path}: a JSONL output keeps no metadata, so it recorded no invocation; write "
            "the output as .parquet or a directory to keep it."
        )
    try:
        if path.is_dir():
            manifest = path / MANIFEST
            if manifest.is_file():
                recorded = json.loads(manifest.read_text()).get("invocation")
            else:
                first = min(path.glob("*.parquet"), default=None)
                recorded = _parquet_invocation(first) if first else None
        elif path.suffix in PARQUET_SUFFIXES:
            recorded = _parquet_invocation(path)
        else:
            recorded = json.loads(path.read_text()).get("invocation")
    except Exception as error:  # pyarrow's and json's errors alike: the file is not readable
        raise DivscopeError(
            f"{path}: not a readable divscope output ({type(error).__name__}: {error})."
        ) from error
    if not isinstance(recorded, dict) or "command" not in recorded:
        raise DivscopeError(
            f"{path}: records no invocation: it was written from Python rather than the "
            "command line, by another program, or by divscope before study files; nothing to "
            "replay."
        )
    return recorded


def _parquet_invocation(path: Path) -> dict[str, Any] | None:
    """The invocation of a Parquet file's key-value metadata (pyarrow's schema metadata is
    there too), or None."""
    metadata = pq.read_metadata(path).metadata or {}
    return json.loads(metadata[INVOCATION_KEY]) if INVOCATION_KEY in metadata else None


def study_text(invocation: dict[str, Any]) -> str:
    """`invocation` as a study file: one section, the command's, with one key per option (an
    option whose value is None, its default then, is left out)."""
    names = invocation["command"].split()  # none: a command that is its own app
    lines = [f"[{'.'.join(_key(name) for name in names)}]"] if names else []
    for name, value in invocation.get("options", {}).items():
        if value is not None:
            lines.append(f"{_key(name)} = {_value(value)}")
    return "\n".join(lines) + "\n"


def _key(name: str) -> str:
    """A TOML key: bare where it can be (`top-p`), else quoted."""
    bare = name and all(c.isascii() and (c.isalnum() or c in "-_") for c in name)
    return name if bare else _string(name)


def _value(value: Any) -> str:
    """A TOML value of a JSON value (no null: the caller leaves it out)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(item) for item in value if item is not None) + "]"
    return _string(str(value))


def _string(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, DEL included.

    >>> _string('a "b"\\x7f')
    '"a \\\\"b\\\\"\\\\u007f"'
    """
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


__all__ = ["config", "read_invocation", "read_study", "study_text"]
