"""Every default that a command-line option stands for, defined once.

The library's configuration classes and entry points take their defaults from here, and so do
the CLI's options; `tests/cli/test_defaults.py` checks that each option's default is the
library's. This module imports nothing, so that `divscope --help` stays instant.
"""

# Distributions (scoring, decoding, generation).
TOP_P = 0.7
"""Nucleus mass of the truncated distributions behind `js`, and of sampling."""
TEMPERATURE = 1.0
"""Temperature dividing the logits before top-p."""
WINDOW = 1024
"""Width of the sorted top-K window for top-p, top-k and ranks (exact full-sort fallback)."""

# Models.
DTYPE = "auto"
"""Weights dtype of every model of a run: float32 on CPU, the first model's checkpoint half
precision on a GPU."""
DEVICE = "auto"
"""CUDA when present, else CPU."""

# Scoring.
BATCH_TOKENS = 16384
"""Padded tokens per forward batch of the scoring engine."""

# Sampling and decoding.
SEED = 0
"""Seed of every random stream: sampling, bootstraps, the lab's training."""
SAMPLES = 32
"""Responses per prompt of `generate` and `cross-sample`."""
BATCH_SIZE = 32
"""Sequences decoded together."""
MAX_NEW_TOKENS = 8000
"""Length cap of a response (`generate`, `cross-sample`, `calibrate`) when --max-new-tokens is
not given, as in the papers; capped, prompt by prompt, by the models' context."""
ENGINE = "hf"
"""The `generate` engine."""
VLLM_TENSOR_PARALLEL_SIZE = 1
"""`generate --engine vllm`: GPUs the model is sharded over (vLLM's default)."""
VLLM_GPU_MEMORY_UTILIZATION = 0.9
"""`generate --engine vllm`: share of each GPU's memory vLLM takes (vLLM's default)."""
VLLM_MAX_MODEL_LEN: int | None = None
"""`generate --engine vllm`: context vLLM reserves KV cache for; None: the model's own."""
BUDGETS: tuple[int, ...] = (0, 1, 2, 4, 8, 16, 32, 64, -1)
"""Switch budgets of the budgeted `cross-sample` policies (−1 = unlimited)."""
REPLACE_TEMPERATURE = 0.6
"""`rl-replace` and `base-greedy`: temperature of the base model's samples (and of their
`base` and `rl` controls)."""
REPLACE_TOP_P = 0.95
"""`rl-replace` and `base-greedy`: top-p of the base model's samples (and of their controls)."""
RAST_LAM = 1.0
"""`rast`: λ, the weight of the small pair's logit difference."""
STRATIFY = "none"
"""`cross-sample --stratify`: the class of positions `forward` and `reverse` may switch at
(`none`: every divergent one)."""
RERANK_TOP_K = 3
"""Stratum `rerank`: the intervener's top-1 token must rank within the primary's top-k."""
TAIL_P = 0.01
"""Stratum `tail`: the intervener's sampled token has probability below this under the
primary model (full distribution, T=1)."""
MATCH_TOL = 0.1
"""Stratum `entropy-matched`: the largest base-entropy difference (nats) between a divergent
position and the low-divergence position matched to it."""
MAP = "online"
"""`cross-sample --map`: where `forward` and `reverse` find divergence (`online`: on the mixed
prefix; `retrospective`: precomputed along reference trajectories, `--map-table`)."""

# Gates of `gated` and `entropy`, and their calibration.
GATE_WINDOW = 16
"""W: previous steps of a gate's recent mean."""
TAKEOVER_RATES: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1)
"""Target takeover rates r of `calibrate`: the points of the gated policy's knee."""
CALIBRATION_SAMPLES = 4
"""Base responses per calibration prompt."""

# Grading.
GRADER = "math"
"""The grader of `divscope grade`."""
GRADE_TIMEOUT = 10.0
"""Wall-clock seconds to grade one response."""

# Analyses and figures.
METRIC = "js"
"""The divergence column of the analyses and figures."""
CORE_METRIC = "js"
"""The divergence column of the core paper's statistics and figures (its thresholds are on JS)."""
TAKEOVER_METRIC = "ce_base_rl"
"""The divergence column of the takeover paper's statistics and figures: s_t = CE(p_b, p_r)."""
N_BOOT = 1000
"""Bootstrap resamples of every interval."""
FORMATS: tuple[str, ...] = ("png", "pdf")
"""File formats of `divscope plot`."""
REPORT_RESPONSES = 20
"""Responses the token viewer of `divscope report` embeds: the most divergent half and a
seeded random sample of the others."""

# The quickstart.
LAB = "fixtures/lab"
"""The lab family of `divscope quickstart` (from the repository root, where it is committed)."""
QUICKSTART_OUT = "runs/quickstart"
"""The output directory of `divscope quickstart`."""

# Logs.
PROGRESS_EVERY = 30.0
"""Seconds between two progress lines when stderr is not a terminal (CI, SLURM logs)."""
