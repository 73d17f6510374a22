"""Benchmark: scoring with 1 and 2 processes, and what resumable parts cost against one file.

    python bench/scale.py                 # the lab's 512 trajectories x --copies 4, 3 repeats
    python bench/scale.py --copies 1 --repeats 1

Scoring throughput: `divscope score` on the lab models, side by side in one run, alternating,
each configuration a whole command (start-up and model loading included, as a user sees it):

- `1 process, 2 threads`: one process, torch's default threads on this machine's cores;
- `1 process, 1 thread`: OMP_NUM_THREADS=1;
- `torchrun 2 x 1 thread`: `torchrun --standalone --nproc-per-node 2 -m divscope score`,
  gloo, each rank one thread and its own share of the parts.

The tokens/s of each is the table's tokens over the command's wall time; `scoring tok/s` is the
rate the progress line reports over the scoring alone (for torchrun: the sum of the ranks'
rates, each over its own share). The tables of torchrun and of one process at one thread are
compared (identical expected); those of one and two threads may differ in the last bit of
`js_full`, a sum over the vocabulary that torch splits between the threads.

Parts against one file, in one process on tables already scored (the write path alone, median
of the repeats): the lab's token table written (a) as one Parquet file by `TokenTableWriter`
(what `score` did before parts), (b) as 16 checksummed parts plus the manifest, (c) as (b)
then assembled into one file; and read back (d) with polars alone, (e) through
`divscope.io.read_token_table`, which verifies every part's page checksums first.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "fixtures" / "lab"


def trajectories(copies: int, path: Path) -> Path:
    """The lab's trajectories, `copies` times over (sample ids shifted), as JSONL."""
    rows = [json.loads(line) for line in (LAB / "trajectories.jsonl").read_text().splitlines()]
    step = max(r["sample_id"] for r in rows) + 1
    with path.open("w") as out:
        for copy in range(copies):
            for row in rows:
                out.write(json.dumps(row | {"sample_id": row["sample_id"] + copy * step}) + "\n")
    return path


def run_score(mode: str, inputs: Path, out: Path) -> tuple[float, float]:
    """Wall seconds of one `divscope score`, and the scoring rate its progress lines report."""
    launcher = [sys.executable, "-m"]
    env = os.environ | {"PYTHONWARNINGS": "ignore"}
    if mode == "torchrun":
        launcher += ["torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m"]
        env["OMP_NUM_THREADS"] = "1"
    elif mode == "1 thread":
        env["OMP_NUM_THREADS"] = "1"
    else:
        env.pop("OMP_NUM_THREADS", None)
    command = [*launcher, "divscope", "score", str(inputs), "--base", str(LAB / "base"),
               "--rl", str(LAB / "rl"), "--out", str(out), "--overwrite"]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{mode} failed:\n{done.stdout}\n{done.stderr}")
    lines = [line for line in done.stderr.splitlines() if "(100.0%)" in line]
    rates = [float(re.search(r"([\d,.]+) tok/s", line)[1].replace(",", "")) for line in lines]
    return seconds, sum(rates)  # torchrun: each rank's last line, its own share's rate


def write_path(table_path: Path, root: Path, repeats: int) -> dict[str, float]:
    """Median seconds of the write and read paths (see the module docstring)."""
    import polars as pl

    from divscope.distributed import World
    from divscope.io import read_token_table
    from divscope.output import Parts, _verified
    from divscope.tables import TokenTableWriter, token_table_schema

    table = read_token_table(table_path)
    pieces = [table.slice(i * table.height // 16, table.height // 16 + 16) for i in range(16)]
    pieces = [p for p in pieces if p.height]
    schema = token_table_schema()
    times: dict[str, list[float]] = {}

    def timed(name, work):
        start = time.perf_counter()
        work()
        times.setdefault(name, []).append(time.perf_counter() - start)

    for repeat in range(repeats):
        one = root / f"one-{repeat}.parquet"
        directory = root / f"parts-{repeat}"
        single = root / f"assembled-{repeat}.parquet"

        def one_file(one=one):
            with TokenTableWriter(one, {"bench": True}) as writer:
                for piece in pieces:
                    writer.write(piece)

        def in_parts(out, finish=False):
            parts = Parts.start(out, "score", {"bench": True}, len(pieces), resume=False,
                                overwrite=False, world=World())  # fmt: skip
            for unit, piece in enumerate(pieces):
                parts.write(unit, piece, {"bench": True}, schema)
            if finish:
                parts.finish(World())

        timed("write: one file (TokenTableWriter)", one_file)
        timed("write: 16 parts + manifest", lambda d=directory: in_parts(d))
        timed("write: 16 parts, assembled into one file", lambda s=single: in_parts(s, True))
        timed("read: polars alone (one file)", lambda o=one: pl.read_parquet(o))
        _verified.cache_clear()  # as in a fresh process: nothing verified yet
        timed("read: read_token_table (parts, verified)", lambda d=directory: read_token_table(d))
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=4, help="copies of the lab trajectories")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from divscope.io import read_token_table

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        inputs = trajectories(args.copies, root / "trajectories.jsonl")
        modes = ["2 threads", "1 thread", "torchrun"]
        results: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
        for repeat in range(args.repeats):
            for mode in modes:
                out = root / f"{mode.replace(' ', '-')}.parquet"
                results[mode].append(run_score(mode, inputs, out))
                print(f"  repeat {repeat} {mode}: {results[mode][-1][0]:.1f} s", flush=True)
        tables = {m: read_token_table(root / f"{m.replace(' ', '-')}.parquet") for m in modes}
        same = tables["torchrun"].equals(tables["1 thread"])
        print(f"  torchrun's table identical to 1 process, 1 thread's: {same}")
        differ = [c for c in tables["1 thread"].columns
                  if not tables["1 thread"][c].equals(tables["2 threads"][c])]  # fmt: skip
        gap = max(((tables["1 thread"][c] - tables["2 threads"][c]).abs().max() for c in differ),
                  default=0.0)  # fmt: skip
        print(f"  1 thread vs 2 threads: columns that differ {differ or 'none'} (max {gap:.2g})")
        reference = tables["2 threads"]
        tokens = reference.height
        labels = {
            "2 threads": "1 process, 2 threads",
            "1 thread": "1 process, 1 thread",
            "torchrun": "torchrun, 2 x 1 thread",
        }
        base = statistics.median(s for s, _ in results["2 threads"])
        print(f"\nscoring {tokens:,} tokens ({args.copies} x the lab's 512 trajectories), "
              f"median of {args.repeats}:\n")  # fmt: skip
        print("| run | wall s | tok/s (wall) | scoring tok/s | speed-up (wall) |")
        print("|---|---:|---:|---:|---:|")
        for mode in modes:
            wall = statistics.median(s for s, _ in results[mode])
            rate = statistics.median(r for _, r in results[mode])
            print(f"| {labels[mode]} | {wall:.1f} | {tokens / wall:,.0f} | {rate:,.0f} | "
                  f"{base / wall:.2f}x |")  # fmt: skip
        times = write_path(root / "2-threads.parquet", root, args.repeats)
        first = times["write: one file (TokenTableWriter)"]
        read = times["read: polars alone (one file)"]
        print(f"\nwriting and reading the {tokens:,}-row table, median of {args.repeats}:\n")
        print("| path | ms | vs one file |")
        print("|---|---:|---:|")
        for name, seconds in times.items():
            ref = first if name.startswith("write") else read
            print(f"| {name} | {1000 * seconds:.0f} | {seconds / ref:.2f}x |")


if __name__ == "__main__":
    main()
