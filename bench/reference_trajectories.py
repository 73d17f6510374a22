"""The `rl` control's responses of a cross-sample results file as trajectories for `divscope
score`: the RL reference trajectories of a retrospective divergence map (issue 17, items 2 and 7).
The prompts are tokenized as `divscope cross-sample` tokenizes them, so a token table scored from
these trajectories has the positions the decoder steps through.

    python bench/reference_trajectories.py RESULTS PROMPTS TOKENIZER_DIR OUT.jsonl [--policy rl]
"""

from __future__ import annotations

import argparse

import polars as pl

from divscope.io import read_table
from divscope.models.tokenizers import load_tokenizer
from divscope.prompts import prompt_token_ids, read_prompts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results")
    parser.add_argument("prompts")
    parser.add_argument("tokenizer")
    parser.add_argument("out")
    parser.add_argument("--policy", default="rl", help="the control whose responses to keep")
    args = parser.parse_args()
    prompts = read_prompts(args.prompts)
    ids = prompt_token_ids(prompts, load_tokenizer(args.tokenizer), source=args.prompts)
    prompts = prompts.with_columns(pl.Series("prompt_ids", ids, dtype=pl.List(pl.Int32)))
    results = read_table(args.results).filter(
        (pl.col("policy") == args.policy) & pl.col("force_prefix").is_null()
    )
    if results.is_empty():
        raise SystemExit(f"{args.results}: no {args.policy!r} rows without a forced prefix.")
    trajectories = (
        results.select("prompt_id", "sample_id", "response_ids", "correct")
        .join(prompts.select("prompt_id", "prompt_ids", "answer"), on="prompt_id", how="inner")
        .sort("prompt_id", "sample_id")
    )
    trajectories.write_ndjson(args.out)
    print(f"{args.out}: {trajectories.height} trajectories of policy {args.policy!r}")


if __name__ == "__main__":
    main()
