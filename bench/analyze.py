"""Benchmark `divscope analyze`, `plot` and `report` on synthetic token tables of growing size.

For each size of `--rows` (default 10 M, 40 M and 100 M rows) and each command of
`--commands` (default all three), runs the real command in a fresh subprocess, one at a time,
and prints a table of its wall time and peak resident memory (that child's own `ru_maxrss`,
from `os.wait4`) beside the issue-32 targets:

- peak RSS at most 2 GiB at every size, and the largest size's at most 1.25x the smallest's;
- wall time at most 1.1x linear in rows (the largest size's against the smallest's), and the
  same of the CPU time (user + system), which other processes on a shared machine disturb less;
- `analyze` of 10 M rows at most 12.3 s, `plot` of 10 M rows at most 20 s;
- the report at most 25 MB.

The synthetic tables are directories of 1 M-row Parquet parts made by `divscope.testing.token_rows`
(the builder the tests use): part k holds 3 prompts x 32 samples whose lengths sum to 1 M rows,
drawn with seed (`--seed`, k), so every part is written on its own (memory bounded by one part)
and a table of N rows is the first N/1M parts of any larger one. The parts are cached under
`--cache` and each table is a directory of links to them: the 100 M table costs about 7.5 GB of
disk (75 MB per part) and also holds the 10 M and 40 M ones. `--table` benchmarks a table of
your own instead.

    python bench/analyze.py                                   # 10 M, 40 M, 100 M rows
    python bench/analyze.py --rows 10000000 --commands analyze --breakdown
    python bench/analyze.py --rows 1000000 --json results.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root
from divscope.testing import token_rows  # noqa: E402  (the builder the tests use: one synthetic table)

COMMANDS = ("analyze", "plot", "report")
SIZES = (10_000_000, 40_000_000, 100_000_000)
ROWS_PER_PART = 1_000_000
PROMPTS_PER_PART, SAMPLES = 3, 32
TARGET_GIB = 2.0
"""Peak RSS at every size."""
TARGET_FLAT = 1.25
"""Peak RSS of the largest size over the smallest's."""
TARGET_LINEAR = 1.1
"""Wall time of the largest size over the smallest's, over the ratio of their rows."""
TARGET_SECONDS = {("analyze", 10_000_000): 12.3, ("plot", 10_000_000): 20.0}
TARGET_REPORT_MB = 25.0
CACHE = Path(tempfile.gettempdir()) / "divscope-bench-tables"
# A realistic vocabulary size for the word analyses.
WORDS = [" wait", " so", " the", " let", " we", " check", "\n", " x", " =", " 2", " but"]
WORDS += [f" w{i}" for i in range(5000)]


def part_lengths(rows: int, rng: np.random.Generator) -> np.ndarray:
    """Lengths of one part's PROMPTS_PER_PART × SAMPLES responses that sum to `rows`."""
    weights = rng.uniform(0.3, 1.7, PROMPTS_PER_PART * SAMPLES)
    lengths = np.maximum(1, np.floor(weights / weights.sum() * rows)).astype(np.int64)
    lengths[-1] += rows - lengths.sum()
    return lengths


def write_part(index: int, rows: int, path: Path, seed: int) -> None:
    """Write part `index` of the synthetic table: `rows` rows of its own prompts."""
    rng = np.random.default_rng([seed, index])
    lengths = part_lengths(rows, rng)
    first = index * PROMPTS_PER_PART * SAMPLES
    frame = token_rows(lengths, rng, n_samples=SAMPLES, first=first, words=WORDS)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    frame.write_parquet(tmp)
    tmp.rename(path)


def synthetic_table(rows: int, cache: Path, seed: int = 0) -> Path:
    """A directory of `rows` rows of synthetic parts under `cache`, writing the missing parts."""
    pool = cache / f"seed-{seed}"
    pool.mkdir(parents=True, exist_ok=True)
    table = cache / f"rows-{rows}-seed-{seed}"
    table.mkdir(exist_ok=True)
    start, written = time.perf_counter(), 0
    for index, first in enumerate(range(0, rows, ROWS_PER_PART)):
        size = min(ROWS_PER_PART, rows - first)
        part = pool / f"part-{index:05d}-{size}.parquet"
        if not part.exists():
            write_part(index, size, part, seed)
            written += 1
        link = table / f"part-{index:05d}.parquet"
        if not link.exists():
            link.symlink_to(part)
    if written:
        print(f"wrote {written} parts of {rows:,} rows in {time.perf_counter() - start:.1f} s")
    return table


def count_rows(table: Path) -> int:
    parts = sorted(table.glob("part-*.parquet")) if table.is_dir() else table
    return pl.scan_parquet(parts).select(pl.len()).collect().item()


def run_command(command: str, *args: str | Path) -> dict[str, float]:
    """Run `divscope COMMAND ARGS` in a fresh process: its wall seconds (`wall`), CPU seconds
    (`cpu`: user + system, which the other processes on a shared machine inflate less than the
    wall time) and its own peak RSS in GiB (`peak`)."""
    argv = [sys.executable, "-c", "from divscope.cli import app; app()", command]
    argv += [str(arg) for arg in args]
    with tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, text=True)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode:
            err.seek(0)
            raise SystemExit(f"divscope {command} failed ({child.returncode}):\n{err.read()}")
    cpu = usage.ru_utime + usage.ru_stime
    return {"wall": wall, "cpu": cpu, "peak": usage.ru_maxrss / 2**20}  # ru_maxrss: KiB


def measure(command: str, table: Path, tmp: Path) -> dict[str, float]:
    """Wall and CPU seconds and peak RSS of one command on `table` (and the report's size)."""
    if command == "analyze":
        return run_command("analyze", table, "--out", tmp / "summary.json", "--overwrite")
    if command == "plot":
        out = tmp / "figures"
        return run_command("plot", table, "--out", out, "--format", "png,pdf", "--overwrite")
    out = tmp / "report.html"
    result = run_command("report", table, "--out", out, "--overwrite")
    return result | {"mb": out.stat().st_size / 1e6}


def breakdown(table: Path) -> None:
    """Time each analysis of `summary` in this process on the lazily scanned table."""
    from divscope import analyses
    from divscope.io import scan_token_table

    lazy = scan_token_table(table)
    for name in (
        "sparsity", "lorenz", "positional_profile", "early_density", "entropy_by_divergence",
        "topk_overlap", "rank_reordering", "tail_promotion", "planning_enrichment",
        "word_frequencies", "failure_auroc", "entropy_iou", "path_coverage",
    ):  # fmt: skip
        start = time.perf_counter()
        getattr(analyses, name)(lazy)
        print(f"  {name:<24}{time.perf_counter() - start:8.2f} s")


def verdicts(results: dict[tuple[str, int], dict[str, float]]) -> list[str]:
    """Each target against the measured numbers, one line each."""
    lines = []
    for command in COMMANDS:
        sizes = sorted(n for c, n in results if c == command)
        if not sizes:
            continue
        peaks = [results[command, n]["peak"] for n in sizes]
        worst = max(peaks)
        lines.append(
            f"{command}: peak RSS ≤ {TARGET_GIB:g} GiB: {_ok(worst <= TARGET_GIB)} "
            f"(max {worst:.2f} GiB)"
        )
        small, large = sizes[0], sizes[-1]
        if large > small:
            flat = results[command, large]["peak"] / results[command, small]["peak"]
            lines.append(
                f"{command}: peak RSS {large / 1e6:g} M / {small / 1e6:g} M = {flat:.2f} "
                f"≤ {TARGET_FLAT}: {_ok(flat <= TARGET_FLAT)}"
            )
            for kind in ("wall", "cpu"):
                ratio = results[command, large][kind] / results[command, small][kind]
                linear = ratio / (large / small)
                lines.append(
                    f"{command}: {kind} time {large / 1e6:g} M / {small / 1e6:g} M over the rows' "
                    f"ratio = {linear:.2f} ≤ {TARGET_LINEAR}: {_ok(linear <= TARGET_LINEAR)}"
                )
        for (target_command, rows), seconds in TARGET_SECONDS.items():
            if target_command == command and (command, rows) in results:
                wall = results[command, rows]["wall"]
                lines.append(
                    f"{command}: {rows / 1e6:g} M rows ≤ {seconds:g} s: {_ok(wall <= seconds)} "
                    f"({wall:.1f} s)"
                )
        if command == "report":
            mb = max(results[command, n]["mb"] for n in sizes)
            lines.append(
                f"report: ≤ {TARGET_REPORT_MB:g} MB: {_ok(mb <= TARGET_REPORT_MB)} "
                f"(max {mb:.1f} MB)"
            )
    return lines


def _ok(passed: bool) -> str:
    return "met" if passed else "MISSED"


def table_text(results: dict[tuple[str, int], dict[str, float]]) -> str:
    """The Markdown table: one row per size, wall (CPU) time and peak RSS of each command."""
    commands = [c for c in COMMANDS if any(key[0] == c for key in results)]
    sizes = sorted({n for _, n in results})
    header = "| rows | " + " | ".join(f"`{c}` wall (CPU) | `{c}` peak RSS" for c in commands)
    header += " |"
    lines = [header, "|---" * (1 + 2 * len(commands)) + "|"]
    for n in sizes:
        cells = []
        for c in commands:
            r = results.get((c, n))
            time_cell = f"{r['wall']:.1f} s ({r['cpu']:.0f} s)" if r else ""
            cells += [time_cell, f"{r['peak']:.2f} GiB"] if r else ["", ""]
        lines.append(f"| {n / 1e6:g} M | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=list(SIZES), help="table sizes")
    parser.add_argument("--commands", nargs="+", choices=COMMANDS, default=list(COMMANDS))
    parser.add_argument("--table", type=Path, help="benchmark this token table instead")
    parser.add_argument("--cache", type=Path, default=CACHE, help="where the parts are kept")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic parts")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--breakdown", action="store_true", help="also time each analysis")
    args = parser.parse_args()
    results: dict[tuple[str, int], dict[str, float]] = {}
    cpus = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory(prefix="divscope-bench-") as tmp:
        for size in [None] if args.table else args.rows:
            table = args.table or synthetic_table(size, args.cache, args.seed)
            n = count_rows(table)
            for command in args.commands:
                load = os.getloadavg()[0]
                result = measure(command, table, Path(tmp)) | {"load": load}
                results[command, n] = result
                extra = f", {result['mb']:.1f} MB" if "mb" in result else ""
                print(
                    f"divscope {command} on {n:,} rows ({cpus} CPUs): {result['wall']:.1f} s, "
                    f"{result['cpu']:.1f} s CPU, "
                    f"{result['peak']:.2f} GiB peak RSS{extra} (load average {load:.1f} before)",
                    flush=True,
                )
            if args.breakdown:
                print(f"\nin-process breakdown on {n:,} rows:")
                breakdown(table)
    print("\n" + table_text(results) + "\n")
    print("\n".join(verdicts(results)))
    if args.json:
        rows = [{"command": c, "rows": n, **r} for (c, n), r in results.items()]
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
