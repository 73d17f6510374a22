#!/usr/bin/env bash
# Every GPU check in one go, on a machine with one CUDA GPU, in under 10 minutes:
#   1. the GPU test suite (python -m pytest -m gpu): CUDA bf16 scoring against the float64
#      reference, a split device map, lockstep decoding invariants, each model on its own
#      GPU (tests/test_gpu_placement.py; both on cuda:0 with one GPU), vLLM where installed;
#   2. bench/score.py --device cuda: the scoring engine vs the naive path and bare forwards;
#   3. bench/decode.py --device cuda: forward cross-sampling vs model.generate, on a random
#      Llama, on a Qwen-sized vocabulary and on the lab models.
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
    timeout --signal=INT --kill-after=15 "$limit" "$@" 2>&1 | tee "$log"
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

step 01-pytest-gpu 240 "$PYTHON" -m pytest -m gpu -q -p no:cacheprovider
step 02-bench-score 150 "$PYTHON" bench/score.py --device cuda --lengths 512 2048 \
    --naive-lengths 512 --responses 4 --threads 4
step 03-bench-decode-random 60 "$PYTHON" bench/decode.py --device cuda --batches 1 8 32
step 04-bench-decode-qwen-vocab 60 "$PYTHON" bench/decode.py --device cuda --vocab 151936 \
    --hidden 1024 --layers 8 --batches 1 8 32
step 05-bench-decode-lab 60 "$PYTHON" bench/decode.py --device cuda --models fixtures/lab \
    --batches 1 8 32 --new-tokens 48

echo "== summary (logs in $LOGS)"
printf '%s\n' "${SUMMARY[@]}" | tee "$LOGS/summary.log"
exit $FAILED
