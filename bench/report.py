"""Benchmark `divscope report` on a synthetic token table (targets: 10M rows, 60 s, 25 MB, 2 cores).

Writes the synthetic table of `bench/analyze.py` (`--rows` rows as 1M-row Parquet parts, or
reuses `--table`), runs the real command in a subprocess, and prints its wall time, peak
resident memory and the report's size beside the targets.

    python bench/report.py                   # 10M rows
    python bench/report.py --rows 200000     # a quick check
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: the analyze benchmark
from analyze import run_command, synthetic_or_given  # noqa: E402  (its table builder and runner)

TARGET_SECONDS = 60.0
TARGET_MB = 25.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows of the synthetic table")
    parser.add_argument("--table", type=Path, help="reuse this token table instead")
    parser.add_argument("--responses", type=int, help="--responses of the report (default its own)")
    parser.add_argument("--keep", type=Path, help="copy the report here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="divscope-bench-") as tmp:
        table, n = synthetic_or_given(args.rows, args.table, Path(tmp))
        out = Path(tmp) / "report.html"
        extra = ["--responses", str(args.responses)] if args.responses else []
        wall, peak, output = run_command("report", table, "--out", out, *extra)
        size = out.stat().st_size / 1e6
        print(output.strip())
        print(f"\ndivscope report on {n:,} rows ({len(os.sched_getaffinity(0))} CPUs)")
        print(
            f"  wall time  {wall:6.1f} s    target {TARGET_SECONDS:.0f} s    "
            f"ratio {wall / TARGET_SECONDS:.2f}"
        )
        ratio = size / TARGET_MB
        print(f"  size       {size:6.1f} MB   target {TARGET_MB:.0f} MB    ratio {ratio:.2f}")
        print(f"  peak RSS   {peak:6.2f} GiB")
        if args.keep is not None:
            args.keep.write_bytes(out.read_bytes())


if __name__ == "__main__":
    main()
