#!/usr/bin/env bash
# Every measured number of fixtures/lab/README.md, from divscope's own commands on the committed
# family. Run from the repository root:  bash bench/lab.sh [OUT_DIR]   (about 15 minutes on 2 cores)
set -euo pipefail
LAB=${LAB:-fixtures/lab}
OUT=${1:-runs/lab-bench}
mkdir -p "$OUT"
# RL vs base on the reference trajectories (base's and rl's own samples), and SFT vs base on sft's.
divscope score "$LAB/trajectories.jsonl" --base "$LAB/base" --rl "$LAB/rl" -o "$OUT/rl.parquet" --overwrite
divscope score "$LAB/trajectories-sft.jsonl" --base "$LAB/base" --rl "$LAB/sft" -o "$OUT/sft.parquet" --overwrite
divscope analyze "$OUT/rl.parquet" --compare "$OUT/sft.parquet" --label SFT -o "$OUT/summary.json" --overwrite
# Gradual causality: forward and reverse cross-sampling over a budget grid, with the controls
# (budget 0 of forward is base sampling, of reverse rl sampling), on the first 128 eval prompts.
head -n 128 "$LAB/prompts/eval.jsonl" > "$OUT/eval-128.jsonl"
divscope cross-sample "$OUT/eval-128.jsonl" --base "$LAB/base" --rl "$LAB/rl" \
    --policy base,rl,forward,reverse --eps 0.05 --budgets 1,2,4,8,16,32 --n 4 \
    --max-new-tokens 224 --grader lab --seed 0 -o "$OUT/xs.parquet" --overwrite
python bench/lab_targets.py "$OUT"
