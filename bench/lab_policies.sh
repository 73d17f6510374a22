#!/usr/bin/env bash
# The other policies of the README's cross-sampling table on the lab (forward and reverse come from
# bench/lab.sh): random and mixture at forward's switch share (mixture at rl-replace's sampling,
# beside it); random-effective at forward's effective count; rl-replace and its base-greedy
# control, with their own base/rl controls at T 0.6 / top-p 0.95, and a forced opening " Let"
# alone and followed by rl-replace; the early-only baseline (RL writes the first k tokens, or the
# first 3.3% of each response); forward's threshold sweep; and the CE and entropy gates calibrated
# at takeover rates 0.02 and 0.10. First 128 eval prompts × 4 samples, T 1, top-p 0.7, 224 new
# tokens, seed 0. Run from the repository root (about 12 minutes on 2 cores):
#     bash bench/lab_policies.sh [OUT_DIR]
set -euo pipefail
LAB=${LAB:-fixtures/lab}
OUT=${1:-runs/lab-policies}
mkdir -p "$OUT"
head -n 128 "$LAB/prompts/eval.jsonl" > "$OUT/eval-128.jsonl"
head -n 256 "$LAB/prompts/train.jsonl" > "$OUT/train-256.jsonl"
common=(--base "$LAB/base" --rl "$LAB/rl" --n 4 --max-new-tokens 224 --grader lab --seed 0 --overwrite)
for rate in 0.02 0.10; do
    divscope calibrate "$OUT/train-256.jsonl" --base "$LAB/base" --rl "$LAB/rl" --rate "$rate" \
        --n 1 --max-new-tokens 224 -o "$OUT/gates-$rate.json" --overwrite
done
divscope cross-sample "$OUT/eval-128.jsonl" "${common[@]}" \
    --policy base,rl,random,rl-replace,base-greedy,mixture --rate 0.033 --alpha 0.033 --budgets -1 \
    --force-prefix " Let" --forced-policies base,rl-replace -o "$OUT/xs-other.parquet"
divscope cross-sample "$OUT/eval-128.jsonl" "${common[@]}" \
    --policy base,rl,forward,random-effective --eps 0.05 --budgets -1 \
    -o "$OUT/xs-random-effective.parquet"
divscope cross-sample "$OUT/eval-128.jsonl" "${common[@]}" \
    --policy base,rl,early --budgets 1,2,4 -o "$OUT/xs-early.parquet"
divscope cross-sample "$OUT/eval-128.jsonl" "${common[@]}" \
    --policy base,rl,early --early-share 0.033 -o "$OUT/xs-early-share.parquet"
divscope cross-sample "$OUT/eval-128.jsonl" "${common[@]}" \
    --policy base,rl,forward --eps 0.01,0.05,0.1,0.2 --budgets -1 -o "$OUT/xs-eps.parquet"
for rate in 0.02 0.10; do
    divscope cross-sample "$OUT/eval-128.jsonl" "${common[@]}" \
        --policy base,rl,gated,entropy --calibration "$OUT/gates-$rate.json" --budgets -1 \
        -o "$OUT/xs-gates-$rate.parquet"
done
