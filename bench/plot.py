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
import tempfile
from pathlib import Path

from analyze import run_command, synthetic_or_given  # bench/analyze.py: shared with this bench

TARGET_SECONDS = 120.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows of the synthetic table")
    parser.add_argument("--table", type=Path, help="reuse this token table instead")
    parser.add_argument("--format", default="png,pdf", help="formats passed to divscope plot")
    parser.add_argument("--out", type=Path, help="keep the figures here (default: discarded)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="divscope-bench-") as tmp:
        table, n = synthetic_or_given(args.rows, args.table, Path(tmp))
        out = args.out or Path(tmp) / "figures"
        options = ["--out", out, "--format", args.format, "--overwrite"]
        wall, peak, output = run_command("plot", table, *options)
        print(output.rstrip())
        print(f"\ndivscope plot on {n:,} rows ({len(os.sched_getaffinity(0))} CPUs, {args.format})")
        print(
            f"  wall time  {wall:6.1f} s    target {TARGET_SECONDS:.0f} s    "
            f"ratio {wall / TARGET_SECONDS:.2f}"
        )
        print(f"  peak RSS   {peak:6.2f} GiB")


if __name__ == "__main__":
    main()
