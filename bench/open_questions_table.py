"""The table of docs/lab.md, section "Open questions, measured on the lab", from the outputs of
`bash bench/open_questions.sh` and `python bench/weighted_grpo.py` (issue 17). Every interval is
a 95% problem bootstrap (1,000 resamples, seed 0) unless the row says otherwise.

    python bench/open_questions_table.py [OUT_DIR] [--grpo runs/weighted-grpo/results.json]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from divscope.analyses import (
    by_difficulty,
    cross_sampling_curve,
    difficulty_tertiles,
    map_agreement,
    threshold_curves,
)
from divscope.io import read_table, read_token_table

BUDGETS = (1, 2, 4, -1)
"""The budgets each cross-sampling row reports (−1: unlimited)."""


def interval(value: float, low: float, high: float, digits: int = 2, scale: float = 1.0) -> str:
    """`0.26 [0.20, 0.33]`."""
    v, lo, hi = (round(x * scale, digits) for x in (value, low, high))
    return f"{v:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def ci(row: Mapping[str, Any], name: str, digits: int = 2, scale: float = 1.0) -> str:
    """`interval` of a row's `name`, `name_low`, `name_high` (or a summary's mean, low, high)."""
    if name in row and isinstance(row[name], Mapping):
        row, keys = row[name], ("mean", "low", "high")
    else:
        keys = (name, f"{name}_low", f"{name}_high")
    return interval(*(row[k] for k in keys), digits=digits, scale=scale)


def recovery_cells(curve: pl.DataFrame, budgets: Iterable[int] = BUDGETS) -> str:
    """Recovery at each budget: `b=1: 0.26 [0.20, 0.33]; ...; b=∞: ...`."""
    cells = []
    for budget in budgets:
        row = curve.filter(pl.col("budget") == budget)
        if row.height != 1:
            raise SystemExit(f"expected one row at budget {budget}, got {row.height}")
        r = row.row(0, named=True)
        name = "∞" if budget < 0 else str(budget)
        cells.append(f"b={name}: {ci(r, 'recovery')}")
    return "; ".join(cells)


def agreement_cell(share: Mapping[str, Any]) -> str:
    """A `map_agreement` row as the table's third cell."""
    return (
        f"switches still above ε online: {ci(share, 'agreement', 1, 100)}%"
        f" ({share['n_above']} of {share['n_switches']})"
    )


def select(frame: pl.DataFrame, **where: Any) -> pl.DataFrame:
    """The rows whose columns equal the given values (None: null)."""
    for column, value in where.items():
        frame = frame.filter(pl.col(column).is_null() if value is None else pl.col(column) == value)
    return frame


def strata_rows(out: Path) -> list[tuple[str, str, str]]:
    curve = cross_sampling_curve(read_table(out / "xs-strata.parquet"))
    rows = []
    for policy in ("forward", "reverse"):
        for stratum in (None, "rerank", "tail", "entropy-matched"):
            points = select(curve, policy=policy, stratum=stratum)
            unlimited = select(points, budget=-1).row(0, named=True)
            rows.append((
                f"1. strata: {policy}, {stratum or 'all divergent (none)'}",
                recovery_cells(points),
                f"{unlimited['switch_share_pooled']:.2%} of tokens switched",
            ))  # fmt: skip
    return rows


def map_rows(out: Path) -> list[tuple[str, str, str]]:
    results = read_table(out / "xs-maps.parquet")
    curve = cross_sampling_curve(results)
    agreement = map_agreement(results)
    rows = []
    tables = [None] + [
        str(out / f"map-{name}.parquet")
        for name in ("rl", "rl-step-30", "rl-step-60", "rl-step-90", "rl-step-120")
    ]
    for table in tables:
        points = select(curve, policy="forward", map_table=table)
        if table is None:
            what, question = "online (JS > ε on the mixed prefix)", "2. maps"
        else:
            source = Path(table).stem.removeprefix("map-")
            question = "2. maps" if source == "rl" else "7. transfer"
            what = f"retrospective, map of {source}"
        share = select(agreement, policy="forward", map_table=table, budget=-1).row(0, named=True)
        rows.append((
            f"{question}: forward, {what}",
            recovery_cells(points),
            agreement_cell(share),
        ))  # fmt: skip
    return rows


def independent_map_rows(out: Path) -> list[tuple[str, str, str]]:
    results = read_table(out / "xs-map-independent.parquet")
    points = select(cross_sampling_curve(results), policy="forward")
    share = select(map_agreement(results), policy="forward", budget=-1).row(0, named=True)
    return [(
        "2. maps: forward, retrospective, map of rl along independent (seed 1) samples",
        recovery_cells(points),
        agreement_cell(share),
    )]  # fmt: skip


def eps_rows(out: Path) -> list[tuple[str, str, str]]:
    curves = threshold_curves(read_table(out / "xs-eps.parquet"))
    rows = []
    for eps in sorted(curves["eps"].unique().to_list()):
        points = select(curves, policy="forward", eps=eps)
        unlimited = select(points, budget=-1).row(0, named=True)
        rows.append((
            f"3. threshold: forward, ε = {eps:g}",
            recovery_cells(points),
            f"effective/total at b=∞: {unlimited['effective_ratio']:.1%} "
            f"(coupled {unlimited['effective_coupled_ratio']:.1%})",
        ))  # fmt: skip
    return rows


def difficulty_rows(out: Path) -> list[tuple[str, str, str]]:
    tertiles = difficulty_tertiles(read_table(out / "xs-controls-seed1.parquet"))
    study = by_difficulty(
        read_token_table(out / "map-rl.parquet"), tertiles,
        results=read_table(out / "xs-strata.parquet").filter(pl.col("stratum").is_null()),
    )  # fmt: skip
    rows = []
    sizes = tertiles.group_by("difficulty").len()
    for level in ("hard", "medium", "easy"):
        s = select(study.sparsity, difficulty=level).row(0, named=True)
        n = select(sizes, difficulty=level)["len"][0]
        points = select(study.recovery, difficulty=level, policy="forward")
        rows.append((
            f"4. difficulty: {level} ({n} prompts)",
            f"share JS > 0.1: {ci(s, 'share_above_0.1', 2, 100)}%",
            "forward recovery " + recovery_cells(points, (1, 2)),
        ))  # fmt: skip
    c = select(study.contrast, statistic="share_above_0.1").row(0, named=True)
    rows.append((
        "4. difficulty: easy − hard",
        f"share JS > 0.1: {ci(c, 'difference', 2, 100)} points",
        "paired problem bootstrap",
    ))  # fmt: skip
    return rows


def weight_rows(out: Path) -> list[tuple[str, str, str]]:
    document = json.loads((out / "weights.json").read_text())
    sigma: Mapping[str, float] = document["total"]["sigma"]
    return [(
        "5. weight gap ratio σ (total)",
        ", ".join(f"σ({label}) = {value:.4g}" for label, value in sigma.items()),
        "exact (no interval): one pair of checkpoints each",
    )]  # fmt: skip


def grpo_rows(path: Path) -> list[tuple[str, str, str]]:
    document = json.loads(path.read_text())
    rows = []
    for variant, summary in document["summary"].items():
        seeds = ", ".join(map(str, summary["seeds"]))
        versus = summary.get("minus_plain")
        rows.append((
            f"6. GRPO {document['steps']} rounds, {variant} (seeds {seeds})",
            f"accuracy {ci(summary, 'accuracy', 1, 100)}%"
            + (f"; − plain {ci(summary, 'minus_plain', 1, 100)} points" if versus else ""),
            f"share JS > 0.1: {ci(summary, 'share_js_above_0.1', 2, 100)}% (t-interval, seeds)",
        ))  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="runs/open-questions", type=Path)
    parser.add_argument("--grpo", default=Path("runs/weighted-grpo/results.json"), type=Path)
    args = parser.parse_args()
    rows = [
        *strata_rows(args.out), *map_rows(args.out), *independent_map_rows(args.out),
        *eps_rows(args.out), *difficulty_rows(args.out), *weight_rows(args.out),
        *grpo_rows(args.grpo),
    ]  # fmt: skip
    print("| question, setting | measured [95% CI] | also |")
    print("|---|---|---|")
    for row in sorted(rows, key=lambda r: r[0][:2]):
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
