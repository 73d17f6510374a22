#!/usr/bin/env bash
# Every GPU check in one go, on a machine with one CUDA GPU (an H200: about 31 GB of it for
# the 7B-shaped pair), in at most 9 minutes (the steps' limits and grace periods add up to it):
#   1. the GPU test suite (python -m pytest -m gpu): CUDA bf16 scoring against the float64
#      reference, a split device map, lockstep decoding invariants, each model on its own
#      GPU (tests/test_gpu_placement.py; both on cuda:0 with one GPU), vLLM where installed;
#   2. bench/score.py --device cuda: the scoring engine vs the naive path and bare forwards;
#   3. bench/decode.py --device cuda --quick: the speculative decoder against the reference
#      (wall time, intervener forwards per token, occupancy, responses that differ) on the
#      lab's grid and on a random 20M pair;
#   4. bench/gpu_pair.py: a 7B-shaped bf16 pair built on the GPU (Qwen2.5-7B's shapes, random
#      weights, no download): pair-tokens/s of each decoder, ms, host syncs, kernel launches
#      and kernels per step; the scoring engine against two bare forwards on the same padded
#      batches.
#
#   bash bench/gpu.sh                 # from the repository root; OUT=dir keeps each step's log
#
# divscope must be importable (pip install -e . done, or run from the repository root: the
# script puts it on PYTHONPATH). Each step prints a one-line summary and the script goes on
# past a failed one; it exits non-zero if any step failed. Without a CUDA device it stops
# after printing the versions.
set -u

if [[ ! -f pyproject.toml || ! -d divscope ]]; then
    echo "gpu.sh: run from the divscope repository root (bash bench/gpu.sh)" >&2
    exit 2
fi
PYTHON=${PYTHON:-$(command -v python || command -v python3)}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
LOGS=${OUT:-$(mktemp -d)}
mkdir -p "$LOGS"

{
    echo "== nvidia-smi"
    nvidia-smi || echo "nvidia-smi: not available"
    echo "== versions"
    "$PYTHON" - <<'EOF'
import sys

import torch
import transformers

print(f"python {sys.version.split()[0]}, torch {torch.__version__} (CUDA {torch.version.cuda}), "
      f"transformers {transformers.__version__}")
count = torch.cuda.device_count() if torch.cuda.is_available() else 0
print(f"CUDA devices visible to torch: {count}")
for i in range(count):
    print(f"  cuda:{i} {torch.cuda.get_device_name(i)}")
for name in ("vllm", "accelerate"):
    try:
        print(f"{name} {__import__(name).__version__}")
    except ImportError:
        print(f"{name}: not installed (its tests are skipped)")
EOF
} 2>&1 | tee "$LOGS/00-environment.log"

if ! "$PYTHON" -c "import sys, torch; sys.exit(not torch.cuda.is_available())"; then
    echo "gpu.sh: no CUDA device (torch sees none); nothing was run. Run it on a GPU machine." >&2
    exit 1
fi

declare -a SUMMARY=()
FAILED=0

# step NAME SECONDS COMMAND...: run COMMAND under a time limit, its output shown and logged.
step() {
    local name=$1 limit=$2
    shift 2
    local log="$LOGS/$name.log" start=$SECONDS status last line
    echo "== $name: $*"
    timeout --signal=INT --kill-after=10 "$limit" "$@" 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    last=$(grep -v '^[[:space:]]*$' "$log" | tail -n 1 | cut -c1-120)
    last=${last:-no output}
    if [[ $status -eq 0 ]]; then
        line="$name: ok in $((SECONDS - start)) s; $last"
    elif [[ $status -eq 124 ]]; then
        line="$name: TIMED OUT after ${limit} s; $last"
        FAILED=1
    else
        line="$name: FAILED (status $status) in $((SECONDS - start)) s; $last"
        FAILED=1
    fi
    echo "== $line"
    SUMMARY+=("$line")
}

# Limits: 150 + 80 + 90 + 170 s, each with 10 s of grace after the interrupt: 530 s at most.
step 01-pytest-gpu 150 "$PYTHON" -m pytest -m gpu -q -p no:cacheprovider
step 02-bench-score 80 "$PYTHON" bench/score.py --device cuda --lengths 512 2048 \
    --naive-lengths 512 --responses 4 --threads 4
step 03-bench-decode 90 "$PYTHON" bench/decode.py --device cuda --quick
step 04-bench-7b-pair 170 "$PYTHON" bench/gpu_pair.py --device cuda

echo "== summary (logs in $LOGS)"
printf '%s\n' "${SUMMARY[@]}" | tee "$LOGS/summary.log"
exit $FAILED
