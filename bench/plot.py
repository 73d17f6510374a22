"""Benchmark `divscope plot` on a synthetic token table (target: 10M rows in 120 s on 2 cores).

Writes the synthetic table of `bench/analyze.py` (`--rows` rows as 1M-row Parquet parts, or
reuses `--table`), runs the real command in a subprocess, and prints its whole-process wall
time and peak resident memory beside the target, with the command's own per-figure output.

    python bench/plot.py                     # 10M rows, png + pdf
    python bench/plot.py --rows 1000000 --format png
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
from analyze import write_table  # bench/analyze.py: the shared synthetic token table

TARGET_SECONDS = 120.0


def run_command(table: Path, out: Path, formats: str) -> tuple[float, float, str]:
    """Run `divscope plot` in a fresh process: wall seconds, peak RSS in GiB, its output."""
    command = [sys.executable, "-c", "from divscope.cli import app; app()", "plot"]
    command += [str(table), "--out", str(out), "--format", formats, "--overwrite"]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"divscope plot failed ({done.returncode}):\n{done.stderr}")
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
    return wall, peak_kib / 2**20, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows of the synthetic table")
    parser.add_argument("--table", type=Path, help="reuse this token table instead")
    parser.add_argument("--format", default="png,pdf", help="formats passed to divscope plot")
    parser.add_argument("--out", type=Path, help="keep the figures here (default: discarded)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="divscope-bench-") as tmp:
        table = args.table
        if table is None:
            start = time.perf_counter()
            table = write_table(args.rows, Path(tmp) / "tokens")
            print(f"wrote {args.rows:,}-row synthetic table in {time.perf_counter() - start:.1f} s")
        rows = pl.scan_parquet(sorted(table.glob("part-*.parquet")) if table.is_dir() else table)
        n = rows.select(pl.len()).collect().item()
        out = args.out or Path(tmp) / "figures"
        wall, peak, output = run_command(table, out, args.format)
        print(output.rstrip())
        print(f"\ndivscope plot on {n:,} rows ({len(os.sched_getaffinity(0))} CPUs, {args.format})")
        print(
            f"  wall time  {wall:6.1f} s    target {TARGET_SECONDS:.0f} s    "
            f"ratio {wall / TARGET_SECONDS:.2f}"
        )
        print(f"  peak RSS   {peak:6.2f} GiB")


if __name__ == "__main__":
    main()
