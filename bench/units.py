"""Benchmark: `cross-sample`'s unit of work, 4 parts of a setting against 1, side by side.

    python bench/units.py                        # the lab, 64 eval prompts x 4 (about 1 minute)
    python bench/units.py --prompts 32 --repeats 1
    python bench/units.py --device cuda          # the same on a GPU

`divscope cross-sample` decodes `UNIT_PARTS` (4) parts of 64 responses of one setting in one
call, its rows refilled from all of their responses (`divscope.decoding.cross_sample`). Before,
a part was the unit: each call decoded 64 responses, and its batch emptied while the part's
longest responses finished. This script runs the same `cross_sample` on the lab (`fixtures/lab`
base/ and rl/, the first `--prompts` eval prompts x `--samples`, `base` and `forward` at eps
0.05 with budgets 4 and unbudgeted, 224 new tokens at most, the CPU's default batch of 32 rows,
graded by the lab's grader) with `UNIT_PARTS` = 1 and = 4 in this process, alternating, 1
first, `--repeats` times (the best wall time kept: the first run of each pays the process's
one-time costs), and prints each one's wall time, the speed-up, and how many responses differ
between the two: in a decision (any column but the float records `switch_js` and
`delta_cosine`), or only in `switch_js` (the largest difference given). Decisions should not
move on the CPU; the float records can, by rounding: a unit's draft lengths k follow its own
rows' breaks, and the intervener reads k positions in one forward.

On the CPU a forward costs by the rows it computes, so the rows a unit's tail leaves idle cost
little and larger units gain little; on a GPU a step of a batch costs about the same at any
occupancy (weights and KV cache read once), which is what `bench/recipe_hours.py` models. The
parts' `decoder.occupancy` is not a measure of this: it counts the rows only while requests
wait, and a unit's tail, where none wait, is what larger units shorten.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import polars as pl
import torch

import divscope
from divscope.decoding import cross_sample as module
from divscope.decoding.cross_sample import Grid
from divscope.io import read_cross_sample
from divscope.params import ModelPair, Placement

LAB = Path(__file__).resolve().parent.parent / "fixtures" / "lab"


def run(prompts: Path, out: Path, parts_per_unit: int, samples: int, device: str) -> float:
    """Wall seconds of one `cross_sample` into the directory `out` with `parts_per_unit`."""
    module.UNIT_PARTS = parts_per_unit
    pair = ModelPair(str(LAB / "base"), str(LAB / "rl"), placement=Placement(device=device))
    start = time.perf_counter()
    divscope.cross_sample(
        prompts, pair, "base,forward:eps=0.05", out,
        divscope.DecodeConfig(max_new_tokens=224, seed=0),
        Grid(budgets=(4, -1), n=samples, grader="lab"), progress=False,
    )  # fmt: skip
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=64, help="eval prompts of the lab")
    parser.add_argument("--samples", type=int, default=4, help="responses per prompt (--n)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each (best kept)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        prompts = Path(tmp) / "prompts.jsonl"
        pl.read_ndjson(LAB / "prompts" / "eval.jsonl").head(args.prompts).write_ndjson(prompts)
        best: dict[int, float] = {}
        tables: dict[int, pl.DataFrame] = {}
        for repeat in range(args.repeats):
            for parts in (1, 4):
                out = Path(tmp) / f"units-{parts}-{repeat}"
                seconds = run(prompts, out, parts, args.samples, args.device)
                best[parts] = min(best.get(parts, seconds), seconds)
                tables[parts] = read_cross_sample(out)
    print(
        f"lab cross-sample: {args.prompts} prompts x {args.samples}, base and forward (eps "
        f"0.05, budgets 4 and unbudgeted), on {args.device}, the default batch (32 rows on the "
        f"CPU), {torch.get_num_threads()} threads"
    )
    for parts in (1, 4):
        print(f"  units of {parts} part(s): {best[parts]:.1f} s")
    moved, rounded, largest = differences(tables[1], tables[4])
    print(
        f"  speed-up of units of 4 parts: {best[1] / best[4]:.2f}x; of {tables[1].height} "
        f"responses, {moved} differ in a decision, {rounded} only in switch_js (at most "
        f"{largest:.1e})"
    )


def differences(one: pl.DataFrame, other: pl.DataFrame) -> tuple[int, int, float]:
    """Responses (rows, in the same order) that differ in a decision, those that differ only
    in a float record, and the largest `switch_js` difference among these."""
    floats = ("switch_js", "delta_cosine")
    decisions = [c for c in one.columns if c not in floats]
    moved = rounded = 0
    largest = 0.0
    for a, b in zip(one.iter_rows(named=True), other.iter_rows(named=True), strict=True):
        if any(a[c] != b[c] for c in decisions):
            moved += 1
            continue
        pairs = zip(a["switch_js"] or [], b["switch_js"] or [], strict=True)
        gap = max((abs(x - y) for x, y in pairs), default=0.0)
        if gap > 0 or a["delta_cosine"] != b["delta_cosine"]:
            rounded += 1
            largest = max(largest, gap)
    return moved, rounded, largest


if __name__ == "__main__":
    main()
