"""Benchmark `divscope analyze` on a synthetic token table (target: 10M rows, 60 s, 4 GB, 2 cores).

Writes a synthetic table of `--rows` rows as a directory of 1M-row Parquet parts (or reuses
`--table`), runs the real command in a subprocess, and prints its whole-process wall time and
peak resident memory beside the targets. `--breakdown` also times each analysis in-process.

    python bench/analyze.py                       # 10M rows
    python bench/analyze.py --rows 1000000 --breakdown
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

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root
from divscope.testing import token_rows  # noqa: E402  (the builder the tests use: one synthetic table)

TARGET_SECONDS = 60.0
TARGET_GIB = 4.0
ROWS_PER_PART = 1_000_000
PROMPTS, SAMPLES = 30, 32
# A realistic vocabulary size for the word analyses.
WORDS = [" wait", " so", " the", " let", " we", " check", "\n", " x", " =", " 2", " but"]
WORDS += [f" w{i}" for i in range(5000)]


def response_lengths(rows: int, rng: np.random.Generator) -> np.ndarray:
    """Lengths of PROMPTS × SAMPLES responses that sum to `rows`."""
    weights = rng.uniform(0.3, 1.7, PROMPTS * SAMPLES)
    lengths = np.maximum(1, np.floor(weights / weights.sum() * rows)).astype(np.int64)
    lengths[-1] += rows - lengths.sum()
    return lengths


def write_table(rows: int, directory: Path, seed: int = 0) -> Path:
    """Write a synthetic token table of `rows` rows as part-*.parquet files under `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    lengths = response_lengths(rows, rng)
    ends = np.cumsum(lengths)
    part, first = 0, 0
    while first < lengths.size:
        # Whole responses per part, about ROWS_PER_PART rows each.
        last = int(np.searchsorted(ends, ends[first] - lengths[first] + ROWS_PER_PART)) + 1
        last = min(max(last, first + 1), lengths.size)
        frame = token_rows(lengths[first:last], rng, n_samples=SAMPLES, first=first, words=WORDS)
        frame.write_parquet(directory / f"part-{part:05d}.parquet")
        part, first = part + 1, last
    return directory


def synthetic_or_given(rows: int, table: Path | None, tmp: Path) -> tuple[Path, int]:
    """`table`, or a new synthetic table of `rows` rows under `tmp`; and its row count."""
    if table is None:
        start = time.perf_counter()
        table = write_table(rows, tmp / "tokens")
        print(f"wrote {rows:,}-row synthetic table in {time.perf_counter() - start:.1f} s")
    parts = pl.scan_parquet(sorted(table.glob("part-*.parquet")) if table.is_dir() else table)
    return table, parts.select(pl.len()).collect().item()


def run_command(command: str, *args: str | Path) -> tuple[float, float, str]:
    """Run `divscope COMMAND ARGS` in a fresh process: wall seconds, peak RSS in GiB, its output."""
    argv = [sys.executable, "-c", "from divscope.cli import app; app()", command]
    argv += [str(arg) for arg in args]
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"divscope {command} failed ({done.returncode}):\n{done.stderr}")
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
    return wall, peak_kib / 2**20, done.stdout


def breakdown(table: Path) -> None:
    """Time each analysis of `summary` in this process on the in-memory columns."""
    from divscope import analyses
    from divscope.analyses.summary import SUMMARY_COLUMNS
    from divscope.io import scan_token_table

    start = time.perf_counter()
    columns = [*SUMMARY_COLUMNS, "js", "ce_base_rl"]
    frame = scan_token_table(table).select(columns).collect(engine="streaming")
    print(f"  {'read columns':<24}{time.perf_counter() - start:8.2f} s")
    for name in (
        "sparsity", "lorenz", "positional_profile", "early_density", "entropy_by_divergence",
        "topk_overlap", "rank_reordering", "tail_promotion", "planning_enrichment",
        "word_frequencies", "failure_auroc", "entropy_iou", "path_coverage",
    ):  # fmt: skip
        start = time.perf_counter()
        getattr(analyses, name)(frame)
        print(f"  {name:<24}{time.perf_counter() - start:8.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows of the synthetic table")
    parser.add_argument("--table", type=Path, help="reuse this token table instead")
    parser.add_argument("--breakdown", action="store_true", help="also time each analysis")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="divscope-bench-") as tmp:
        table, n = synthetic_or_given(args.rows, args.table, Path(tmp))
        wall, peak, output = run_command("analyze", table, "--out", Path(tmp) / "summary.json")
        print(output.split("\n\n")[0])
        print(f"\ndivscope analyze on {n:,} rows ({len(os.sched_getaffinity(0))} CPUs)")
        print(
            f"  wall time  {wall:6.1f} s    target {TARGET_SECONDS:.0f} s    "
            f"ratio {wall / TARGET_SECONDS:.2f}"
        )
        print(
            f"  peak RSS   {peak:6.2f} GiB  target {TARGET_GIB:.0f} GiB  "
            f"ratio {peak / TARGET_GIB:.2f}"
        )
        print(f"  throughput {n / wall / 1e6:6.2f} M rows/s")
        if args.breakdown:
            print("\nin-process breakdown:")
            breakdown(table)


if __name__ == "__main__":
    main()
