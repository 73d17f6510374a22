"""The targets of the lab (fixtures/lab/README.md) from the tables `bench/lab.sh` wrote.

Every number is computed with `divscope.analyses` on `divscope score` / `divscope cross-sample`
output; nothing is tuned here. Prints one line per target with the measured value and the target.

    python bench/lab_targets.py runs/lab-bench
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root
from divscope import analyses  # noqa: E402
from divscope.analyses.tokens import normalized_token  # noqa: E402
from divscope.io import read_table, read_token_table  # noqa: E402

HIGH = 0.1  # "high-divergence" tokens: JS > 0.1 nats


def _line(name: str, value: str, target: str, met: bool) -> None:
    print(f"{name}: {value}   (target {target}: {'met' if met else 'NOT met'})")


def main(out: Path) -> None:
    tokens = read_token_table(out / "rl.parquet")
    sft = read_token_table(out / "sft.parquet")
    # trajectories.jsonl holds base's and rl's samples; each statistic on its paper's population
    # (the token table's `source`): the core paper's on rl's trajectories, the takeover paper's
    # on base's rollouts. SFT is scored on its own samples.
    rl_own, _ = analyses.population(tokens, "core")
    base_own, _ = analyses.population(tokens, "takeover")
    lengths = rl_own.group_by("prompt_id", "sample_id").len()["len"]
    print(
        f"RL response length: median {lengths.median():.0f}, range {lengths.min()}-{lengths.max()} "
        f"tokens ({len(lengths)} responses)"
    )
    below = analyses.sparsity(rl_own).share_below[0.001]
    _line("share of RL-vs-base tokens with JS < 1e-3 (rl's trajectories)", f"{below:.1%}",
          ">= 80%", below >= 0.8)  # fmt: skip

    high = rl_own.filter(pl.col("js") > HIGH)
    counts = high.group_by("token").len().sort("len", descending=True)
    top = counts.row(0, named=True)
    share = top["len"] / high.height
    shares = ", ".join(
        f"{r['token']!r} {r['len'] / high.height:.0%}" for r in counts.head(6).iter_rows(named=True)
    )
    _line(f"largest token-string share of the {high.height} tokens with JS > 0.1 (rl's)", shares,
          "<= 40%", share <= 0.4)  # fmt: skip
    quintiles = (
        high.select((pl.col("rel_position") * 5).floor().clip(0, 4).cast(pl.Int32).alias("q"))
        .group_by("q").len().sort("q")
    )  # fmt: skip
    per_quintile = dict(zip(quintiles["q"], quintiles["len"], strict=True))
    occupied = sum(1 for q in range(5) if per_quintile.get(q, 0) > 0)
    counts_by_quintile = [per_quintile.get(q, 0) for q in range(5)]
    _line("rel_position quintiles holding JS > 0.1 tokens (rl's trajectories)",
          f"{occupied} of 5 ({counts_by_quintile})", ">= 3", occupied >= 3)  # fmt: skip

    pairs = (("rl", rl_own), ("sft", sft))
    dense = {name: frame.select((pl.col("js") > 0.01).mean()).item() for name, frame in pairs}
    ratio = dense["sft"] / dense["rl"]
    shares = f"{dense['sft']:.1%} / {dense['rl']:.1%} = {ratio:.1f}x"
    _line("share of tokens with JS > 0.01, SFT / RL (each on its own samples)", shares, ">= 2x",
          ratio >= 2)  # fmt: skip
    overlap = {name: frame["overlap_1"].mean() for name, frame in pairs}
    _line("mean overlap_1, SFT vs RL", f"{overlap['sft']:.3f} vs {overlap['rl']:.3f}",
          "SFT lower", overlap["sft"] < overlap["rl"])  # fmt: skip
    p80 = {name: frame["js"].quantile(0.8) for name, frame in pairs}
    print(f"80th percentile of JS, SFT / RL: {p80['sft']:.2e} / {p80['rl']:.2e}")

    enrichment = analyses.planning_enrichment(base_own)
    _line("planning-word enrichment among the top 1% by JS (base rollouts, the takeover paper's)",
          f"{enrichment.share_top:.1%} / {enrichment.share_all:.1%} = {enrichment.enrichment:.1f}x",
          ">= 2x", enrichment.enrichment >= 2)  # fmt: skip
    top_words = (
        base_own.sort("js", descending=True).head(enrichment.n_top)
        .with_columns(normalized_token()).group_by("token").len().sort("len", descending=True)
    )  # fmt: skip
    print("top 1% by JS, words:", ", ".join(f"{w} {n}" for w, n in top_words.head(8).iter_rows()))

    xs = out / "xs.parquet"
    if xs.exists():
        curve = analyses.cross_sampling_curve(read_table(xs))
        with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=200):
            print(curve.select(
                "policy", "budget", "accuracy", "accuracy_low", "accuracy_high", "recovery",
                "recovery_low", "recovery_high", "switch_share_pooled", "effective_share_pooled",
            ))  # fmt: skip


if __name__ == "__main__":
    main(Path(sys.argv[1]))
