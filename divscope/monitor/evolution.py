"""The evolution directory: one token table per measured training step, and a summary.

    DIR/rl-step-{step}.parquet   the probe's token table at that step (token-table metadata)
    DIR/summary.jsonl            one line per step: {"step", **statistics, "seconds"}

Each table is written atomically (`TokenTableWriter`), so `steps()` lists only complete ones,
and `divscope.io.scan_token_table` and `divscope plot --evolution DIR` read them. The summary
is rewritten atomically at each step, its lines sorted by step; a step written again (a resumed
run) replaces its line.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from divscope.errors import DivscopeError

SUMMARY = "summary.jsonl"
"""The name of the summary."""


class EvolutionDir:
    """The evolution directory at `path` (created on the first `write`).

    >>> import tempfile
    >>> from divscope.schema import TOKEN_TABLE
    >>> tmp = tempfile.TemporaryDirectory()
    >>> evolution = EvolutionDir(tmp.name)
    >>> row = pl.DataFrame([dict.fromkeys(TOKEN_TABLE)], schema=TOKEN_TABLE)
    >>> evolution.write(10, row, {"divscope/js_mean": 0.1}, seconds=2.5).name
    'rl-step-10.parquet'
    >>> evolution.steps(), evolution.summary().rows()
    ([10], [(10, 0.1, 2.5)])
    >>> tmp.cleanup()
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise DivscopeError(
                f"{self.path}: an evolution directory must be a directory, not a file; "
                "name another path."
            )

    def table(self, step: int) -> Path:
        """The path of step `step`'s token table."""
        return self.path / f"rl-step-{step}.parquet"

    def write(
        self,
        step: int,
        tokens: pl.DataFrame,
        statistics: Mapping[str, float],
        seconds: float,
        metadata: Mapping[str, Any] | None = None,
    ) -> Path:
        """Write step `step`'s token table (with `metadata` as its `divscope` metadata, `step`
        added) and its summary line; a step written before is replaced. Returns the table."""
        from divscope.tables import TokenTableWriter

        if step < 0:
            raise DivscopeError(f"evolution directory: step must be >= 0, got {step}.")
        path = self.table(step)
        with TokenTableWriter(path, {**(metadata or {}), "step": step}, overwrite=True) as out:
            out.write(tokens)
        lines = {row["step"]: row for row in self._lines()}
        lines[step] = {"step": step, **{k: float(v) for k, v in statistics.items()},
                       "seconds": float(seconds)}  # fmt: skip
        self._write_summary([lines[s] for s in sorted(lines)])
        return path

    def steps(self) -> list[int]:
        """The steps whose token table is complete, ascending."""
        if not self.path.is_dir():
            return []
        from divscope.io import evolution_tables

        return list(evolution_tables(self.path))

    def summary(self) -> pl.DataFrame:
        """`summary.jsonl` as a frame, one row per step, ascending (no rows when empty)."""
        rows = [{k: math.nan if v is None else v for k, v in row.items()} for row in self._lines()]
        if not rows:
            return pl.DataFrame(schema={"step": pl.Int64(), "seconds": pl.Float64()})
        frame = pl.DataFrame(rows, infer_schema_length=None)
        columns = ["step", *(c for c in frame.columns if c not in ("step", "seconds")), "seconds"]
        return frame.select(columns).sort("step")

    def _lines(self) -> list[dict[str, Any]]:
        path = self.path / SUMMARY
        if not path.is_file():
            return []
        rows = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise DivscopeError(
                    f"{path}, line {number}: not JSON ({error}); delete the line (its step's "
                    "table is rescored by rerunning that step) or the file."
                ) from error
        return rows

    def _write_summary(self, rows: list[dict[str, Any]]) -> None:
        from divscope.output import write_atomically

        def finite(value: Any) -> Any:
            return None if isinstance(value, float) and not math.isfinite(value) else value

        text = "".join(json.dumps({k: finite(v) for k, v in row.items()}) + "\n" for row in rows)
        write_atomically(self.path / SUMMARY, lambda tmp: tmp.write_text(text, encoding="utf-8"))
