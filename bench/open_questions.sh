#!/usr/bin/env bash
# The lab results of the README section "Open questions, measured on the lab" (issue 17): which
# kind of divergent token carries the recovery (--stratify), online vs retrospective divergence
# maps (--map) and the transfer of a checkpoint's map to the final RL model, the threshold sweep,
# difficulty-stratified statistics, and the weight-level gap ratio. First 128 eval prompts × 4
# samples, T 1, top-p 0.7, 224 new tokens, as bench/lab.sh. The weighted-GRPO experiment is
# bench/weighted_grpo.py; bench/open_questions_table.py prints the README's table from both.
# Run from the repository root (about 40 minutes on 2 cores):  bash bench/open_questions.sh [OUT_DIR]
set -euo pipefail
# One torch thread: the numbers are reproducible bit for bit whatever else runs (two threads on
# two shared cores made decoding 10x slower here, as OpenMP threads wait for each other).
export OMP_NUM_THREADS=1
LAB=${LAB:-fixtures/lab}
OUT=${1:-runs/open-questions}
EPS=0.05
mkdir -p "$OUT"
head -n 128 "$LAB/prompts/eval.jsonl" > "$OUT/eval-128.jsonl"
models=(--base "$LAB/base" --rl "$LAB/rl" --n 4 --max-new-tokens 224 --grader lab --overwrite)

# 5. Weight-level gap ratio σ of RL and SFT.
divscope weights "$LAB/base" "$LAB/rl" "$LAB/sft" --label RL --label SFT --json "$OUT/weights.json" --overwrite

# The controls at seeds 0 and 1. Their rl responses are the RL reference trajectories of the
# retrospective maps (seed 0: the same draws as the cross-sampling runs; seed 1: independent
# samples); the seed-1 base responses rate each prompt's difficulty independently of the runs.
for seed in 0 1; do
    divscope cross-sample "$OUT/eval-128.jsonl" "${models[@]}" --seed "$seed" --policy base,rl \
        -o "$OUT/xs-controls-seed$seed.parquet"
    python bench/reference_trajectories.py "$OUT/xs-controls-seed$seed.parquet" \
        "$OUT/eval-128.jsonl" "$LAB/base" "$OUT/reference-seed$seed.jsonl"
done
# The maps: divergence along the reference trajectories, from the final RL model and from each
# checkpoint (seed 0), and from the final RL model along the independent samples (seed 1).
for rl in rl rl-step-30 rl-step-60 rl-step-90 rl-step-120; do
    divscope score "$OUT/reference-seed0.jsonl" --base "$LAB/base" --rl "$LAB/$rl" \
        -o "$OUT/map-$rl.parquet" --overwrite
done
divscope score "$OUT/reference-seed1.jsonl" --base "$LAB/base" --rl "$LAB/rl" \
    -o "$OUT/map-rl-seed1.parquet" --overwrite

# 1. Strata of divergent positions, budgets matched across strata.
divscope cross-sample "$OUT/eval-128.jsonl" "${models[@]}" --seed 0 --policy base,rl,forward,reverse \
    --eps "$EPS" --stratify none,rerank,tail,entropy-matched --budgets 1,2,4,-1 -o "$OUT/xs-strata.parquet"

# 2. Online vs retrospective maps, and 7. each checkpoint's map used with the final RL model.
maps=$(printf "$OUT/map-%s.parquet," rl rl-step-30 rl-step-60 rl-step-90 rl-step-120)
divscope cross-sample "$OUT/eval-128.jsonl" "${models[@]}" --seed 0 --policy base,rl,forward \
    --eps "$EPS" --map online,retrospective --map-table "${maps%,}" --budgets 1,2,4,-1 \
    -o "$OUT/xs-maps.parquet"
divscope cross-sample "$OUT/eval-128.jsonl" "${models[@]}" --seed 0 --policy base,rl,forward \
    --eps "$EPS" --map retrospective --map-table "$OUT/map-rl-seed1.parquet" --budgets 1,2,4,-1 \
    -o "$OUT/xs-map-independent.parquet"

# 3. Threshold sweep: recovery per eps over the budget grid (budget 0 decoded once for all eps).
divscope cross-sample "$OUT/eval-128.jsonl" "${models[@]}" --seed 0 --policy base,rl,forward \
    --eps 0.01,0.05,0.1,0.2 --budgets 0,1,2,4,-1 -o "$OUT/xs-eps.parquet"

# 4. Difficulty tertiles from the independent (seed 1) graded base samples.
divscope analyze "$OUT/map-rl.parquet" --difficulty "$OUT/xs-controls-seed1.parquet" \
    --cross-sample "$OUT/xs-strata.parquet" -o "$OUT/difficulty.json" --overwrite
