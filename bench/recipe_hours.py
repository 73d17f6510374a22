"""GPU-hours of the paper recipes (docs/recipes.md), with the reference and the speculative decoder.

    python bench/recipe_hours.py                    # the Time tables of docs/recipes.md
    python bench/recipe_hours.py --occupancy 0.9    # a measured occupancy instead of the assumed
    python bench/recipe_hours.py --reference-batches  # what-if: no memory reserved for drafts

No GPU and no download: arithmetic on divscope's memory plans (`divscope.memory_plan`, models
built on the meta device from the real configs, as `bench/memory.py`) and on the speculative
decoder's own choice of draft length (`divscope.decoding.speculative.draft_length`). The
assumptions are printed above the tables (`assumptions`); the papers' numbers that feed them
are the constants below. About 4 s of CPU, most of it importing torch and transformers.

A cell reads `H100 · H200` GPU-hours, for each step and each setting, in five columns:

- reference, to the cap: `--decoder reference`, every batch runs to the length cap (the
  estimates docs/recipes.md gave before the speculative decoder);
- reference, mean length: the same batches, responses of the paper's mean length (a batch
  still runs until its longest response, taken at the cap);
- speculative, to the cap: every response runs to the cap (the upper estimate);
- speculative, mean length: responses average the paper's mean length (the cap where the
  paper gives none), finished rows refilled within a unit: `UNIT_PARTS` parts of 64 responses
  (`PART_ROWS`) of one setting for cross-sample, a process's whole share for generate;
- the same with units of each process's whole share of a setting (what larger units give).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, replace
from functools import cache, partial

import torch
from memory import GPUS, MODELS, VOCAB  # bench/memory.py: Qwen2.5 configs, GPU memory
from transformers import AutoModelForCausalLM, Qwen3Config

from divscope.decoding.cross_sample import PART_ROWS, UNIT_PARTS
from divscope.decoding.speculative import draft_length, speculative_memory
from divscope.memory_plan import SCORING_BUFFERS, kv_bytes_per_token, plan_decoding, weight_bytes

QWEN3 = {
    "Qwen3-8B": Qwen3Config(
        vocab_size=151_936, hidden_size=4_096, intermediate_size=12_288, num_hidden_layers=36,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, tie_word_embeddings=False,
        max_position_embeddings=40_960,
    ),
    "Qwen3-4B": Qwen3Config(
        vocab_size=151_936, hidden_size=2_560, intermediate_size=9_728, num_hidden_layers=36,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True,
        max_position_embeddings=40_960,
    ),
    "Qwen3-0.6B": Qwen3Config(
        vocab_size=151_936, hidden_size=1_024, intermediate_size=3_072, num_hidden_layers=28,
        num_attention_heads=16, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True,
        max_position_embeddings=40_960,
    ),
}  # fmt: skip
BANDWIDTH = {"80 GB": 3.35e12, "141 GB": 4.8e12}
"""HBM bandwidth, bytes/s: H100 SXM, H200."""
READ_SHARE = 0.5
"""Share of the bandwidth a decoding step is assumed to reach."""
LAUNCH_FLOOR = 0.3e-3
"""Seconds per decoder layer per forward at least (eager PyTorch launches each layer's kernels)."""
PEAK, COMPUTE_SHARE = 989e12, 0.4
"""bf16 dense peak FLOP/s (H100 and H200 alike) and the share of it assumed reached."""
PROMPT = 192
"""Prompt tokens."""
OCCUPANCY = 1.0
"""Live rows over capacity while requests wait: waiting requests take every free row each round,
so a row that ends within a round leaves its place empty for the rest of that round only (a few
steps of thousands); the prefills are not counted. `--occupancy` takes a measured one."""

# The core paper (Table 1, AIME 2024, Qwen2.5-32B vs DAPO): effective switches per response and
# their share of the tokens; the SimpleRL row gives the share of all switches to effective ones.
DAPO_FORWARD = (280, 0.078)
DAPO_REVERSE = (173, 0.101)
SIMPLERL_ALL_PER_EFFECTIVE = 75 / 38
# rl-replace's paper: about 4% of the tokens replaced.
RL_REPLACE_RATE = 0.04
FIRST_PASS = (1, 4, 16, 64, 256, -1)
"""The budgets of the core recipe's first pass (docs/recipes.md), with -n 8; -1 keeps the
controls too."""


@dataclass(frozen=True)
class Setting:
    """One decoded setting: the primary model, the models that verify it, and how its rows
    break drafts and spend budgets."""

    name: str
    primary: str
    """Role of the primary model (the `models` key of its job)."""
    others: tuple[str, ...] = ()
    """Roles of the other models (none for the controls and `generate`)."""
    breaks: float = 1.0
    """q, the rate at which a verified row's draft breaks (a switch to another token)."""
    switches: float = 1.0
    """s, switches per token, identity swaps included: a budget b is spent after b / s tokens."""
    budget: int = -1
    """Switch budget (-1: none)."""
    verified_share: float = 1.0
    """Share of a response decoded while the row needs the other models, besides its budget
    (`early`: the first rho of it)."""

    def verified(self, length: float) -> float:
        """Tokens of a `length`-token response decoded with the other models."""
        if not self.others or self.budget == 0:
            return 0.0
        tokens = length * self.verified_share
        return tokens if self.budget < 0 else min(tokens, self.budget / self.switches)


@dataclass(frozen=True)
class Job:
    """One decoding step of a recipe (a `generate` or `cross-sample` command)."""

    step: str
    work: str
    models: dict[str, str]
    """Model name per role."""
    placement: dict[str, str]
    """Device per role within a process (the plan's GPUs)."""
    settings: list[Setting]
    prompts: int
    n: int
    cap: int
    """--max-new-tokens."""
    length: float
    """Mean response length (tokens) of the expected case."""
    processes: int
    """Processes the recipe's command runs (a share is a process's part of each setting)."""
    gpus: int
    """GPUs each process holds."""
    generate: bool = False
    """`generate` (one unit: the process's whole share) rather than `cross-sample` (parts)."""
    decoder: str | None = None
    """The command's `--decoder` where it names one (every column then uses it)."""

    @property
    def responses(self) -> int:
        return self.prompts * self.n


@dataclass(frozen=True)
class Scoring:
    """One `score` command: every response scored under both models."""

    work: str
    models: tuple[str, ...]
    responses: int
    cap: int
    length: float
    gpus: int


@dataclass
class Recipe:
    """A recipe of docs/recipes.md: its decoding jobs and its scoring."""

    title: str
    jobs: list[Job]
    scoring: list[Scoring] = field(default_factory=list)


@dataclass(frozen=True)
class Model:
    """What a forward of one model reads and computes."""

    weights: int
    kv: int
    """KV-cache bytes per token."""
    layers: int
    query: int
    """Query size (heads x head dim), for attention FLOPs."""


@dataclass(frozen=True)
class Case:
    """One column of the tables."""

    title: str
    decoder: str
    """`reference` or `speculative`."""
    mean: bool = False
    """Responses of the paper's mean length (else every one to the cap)."""
    share: bool = False
    """Units of each process's whole share of a setting (else cross-sample's units of
    `UNIT_PARTS` parts of `PART_ROWS` responses)."""


CASES = (
    Case("reference, to the cap", "reference"),
    Case("reference, mean length", "reference", mean=True),
    Case("speculative, to the cap", "speculative"),
    Case("speculative, mean length", "speculative", mean=True),
    Case("speculative, mean length, units of a process's share", "speculative", True, True),
)


def forward_seconds(model: Model, gpu: str, rows: float, context: float, positions: int = 1):
    """One forward of `rows` rows at `positions` new positions each over `context` tokens of
    KV cache: the larger of the bytes read (weights and KV) at `READ_SHARE` of the bandwidth,
    the FLOPs at `COMPUTE_SHARE` of the peak, and the launch floor."""
    read = (model.weights + rows * context * model.kv) / (READ_SHARE * BANDWIDTH[gpu])
    # bf16: 2 bytes a parameter, so the weight bytes are the 2 FLOPs per parameter and position
    flops = rows * positions * (model.weights + 2 * model.layers * model.query * context)
    return max(read, flops / (COMPUTE_SHARE * PEAK), model.layers * LAUNCH_FLOOR)


def draft(setting: Setting) -> tuple[int, float]:
    """k (the decoder's `draft_length` at break rate q) and E = (1 - (1 - q)^k) / q, the tokens
    a round emits per verified row."""
    q, positions = setting.breaks, 1_000_000
    k = draft_length(round(q * positions), positions, len(setting.others))
    return k, (1 - (1 - q) ** k) / q if q else float(k)


@cache
def meta_model(name: str) -> torch.nn.Module:
    """`name` on the meta device, in bf16 (no weights allocated)."""
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config({**MODELS, **QWEN3}[name], dtype=torch.bfloat16)


@cache
def facts(name: str) -> Model:
    """What a forward of `name` reads and computes."""
    model, config = meta_model(name), {**MODELS, **QWEN3}[name]
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return Model(
        weight_bytes(model), kv_bytes_per_token(model, 2), config.num_hidden_layers,
        config.num_attention_heads * head_dim,
    )  # fmt: skip


class Estimator:
    """The arithmetic of every job on both GPUs, for both decoders."""

    def __init__(self, occupancy: float, reference_batches: bool = False) -> None:
        self.occupancy, self.reference_batches = occupancy, reference_batches
        self.plans: dict[tuple[str, str, str], int] = {}

    def batch(self, job: Job, gpu: str, decoder: str) -> int:
        """The planner's `--batch-size` for `job` on `gpu` with `decoder`."""
        if self.reference_batches:
            decoder = "reference"
        key = (job.step + job.work, gpu, decoder)
        if key in self.plans:
            return self.plans[key]
        models = {role: meta_model(name) for role, name in job.models.items()}
        plan = plan_decoding(
            models, VOCAB, max_memory=GPUS[gpu], longest=PROMPT + job.cap, prompt=PROMPT,
            batch_size=None, placement=job.placement,
            **(speculative_memory(len(models)) if decoder == "speculative" else {}),
        )  # fmt: skip
        self.plans[key] = plan.batch_size
        return plan.batch_size

    def units(self, job: Job, batch: int, share: bool) -> list[int]:
        """Responses of each unit decoded in one call: `UNIT_PARTS` parts of `PART_ROWS`
        responses, or with `share` (and for `generate`, which decodes its share in one call)
        each process's whole share."""
        if share or job.generate:
            size = -(-job.responses // job.processes)
        else:
            size = UNIT_PARTS * -(-PART_ROWS // job.n) * job.n
        return [min(size, job.responses - i) for i in range(0, job.responses, size)]

    def seconds(self, job: Job, setting: Setting, gpu: str, case: Case) -> float:
        """Seconds of one process decoding every unit of `setting` (GPUs held: `hours`)."""
        decoder = job.decoder or case.decoder
        batch = self.batch(job, gpu, decoder)
        length = job.length if case.mean else job.cap
        context = PROMPT + length / 2
        primary = facts(job.models[setting.primary])
        others = [facts(job.models[role]) for role in setting.others]
        k, emitted = draft(setting) if decoder == "speculative" else (1, 1.0)

        def row_steps(tokens: float) -> tuple[float, float]:
            """Primary steps of a response, and those of them in rounds it is verified in."""
            if decoder == "reference":  # every model, every step
                return tokens, tokens if others else 0.0
            verified = setting.verified(tokens) * k / emitted
            return verified + tokens - setting.verified(tokens), verified

        at_cap, _ = row_steps(job.cap)
        work, verified = row_steps(length)
        busy = verified / work if work else 0.0  # a row's share of verified steps

        def cost(steps: float, rows: float) -> float:
            """Seconds of `steps` primary steps of `rows` rows, with a verifying forward of
            the other models in each round that has a verified row."""
            rounds = steps / k * (1 - (1 - busy) ** rows)
            verify = sum(forward_seconds(m, gpu, rows, context, k) for m in others)
            return steps * forward_seconds(primary, gpu, rows, context) + rounds * verify

        total = 0.0
        for size in self.units(job, batch, case.share):
            batches = -(-size // batch)
            seconds = cost(batches * at_cap, size / batches)  # batches run to the cap
            if case.mean and decoder == "speculative":  # refilled: Graham's bound
                rows = min(batch, size)
                refilled = size * work / (rows * self.occupancy) + at_cap
                seconds = min(seconds, cost(refilled, rows))
            total += seconds
        return total

    def hours(self, job: Job, setting: Setting, gpu: str, case: Case) -> float:
        """GPU-hours of `setting` of `job`: every unit's time on each process's GPUs."""
        return self.seconds(job, setting, gpu, case) * job.gpus / 3600

    def scoring_hours(self, scoring: Scoring, gpu: str, case: Case) -> float:
        """GPU-hours of a `score` command: FLOPs per token and model at `COMPUTE_SHARE` of the
        peak (the models one after the other), plus the statistics' `SCORING_BUFFERS` float32
        `[rows, V]` buffers written and read once per token."""
        length = scoring.length if case.mean else scoring.cap
        sequence = PROMPT + length
        per_token = sum(
            (m.weights + 2 * m.layers * m.query * sequence) / (COMPUTE_SHARE * PEAK)
            for m in map(facts, scoring.models)
        ) + SCORING_BUFFERS * 4 * VOCAB * 2 / (READ_SHARE * BANDWIDTH[gpu])
        return scoring.responses * sequence * per_token * scoring.gpus / 3600


def recipes() -> list[Recipe]:
    """The four recipes of docs/recipes.md, their commands as jobs and settings."""
    grid = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, -1)
    alone = {"base": "cuda:0"}
    one_gpu = {"base": "cuda:0", "rl": "cuda:0"}
    two_gpus = {"base": "cuda:0", "rl": "cuda:1"}
    controls = [Setting("base", "base"), Setting("rl", "rl")]

    def sweep(name: str, primary: str, other: str, rate: float) -> list[Setting]:
        """`name` at every budget of the grid, breaking drafts at the effective `rate`."""
        s = rate * SIMPLERL_ALL_PER_EFFECTIVE
        return [Setting(f"{name} {b}", primary, (other,), rate, s, b) for b in grid]

    forward_length = DAPO_FORWARD[0] / DAPO_FORWARD[1]
    reverse_length = DAPO_REVERSE[0] / DAPO_REVERSE[1]
    pair32 = {"base": "Qwen2.5-32B", "rl": "Qwen2.5-32B"}
    core = dict(prompts=30, n=32, cap=8000)
    sparse = Recipe(
        "1. Sparse but Critical",
        [
            Job(
                "`generate`", "960 responses of DAPO", {"base": "Qwen2.5-32B"}, alone,
                [Setting("rl", "base")], **core, length=reverse_length, processes=8, gpus=1,
                generate=True,
            ),
            Job(
                "`cross-sample` forward", "2 controls + 11 budgets x 960", pair32, two_gpus,
                controls + sweep("forward", "base", "rl", DAPO_FORWARD[1]), **core,
                length=forward_length, processes=4, gpus=2,
            ),
            Job(
                "`cross-sample` reverse", "the same", pair32, two_gpus,
                controls + sweep("reverse", "rl", "base", DAPO_REVERSE[1]), **core,
                length=reverse_length, processes=4, gpus=2,
            ),
        ],
        [Scoring("960 responses, 2 GPUs", ("Qwen2.5-32B",) * 2, 960, 8000, reverse_length, 2)],
    )  # fmt: skip
    guided = {"base": "Qwen3-0.6B", "rl": "Qwen3-8B"}
    small = {"base": "Qwen3-0.6B"}
    takeover_settings = [
        *controls,
        *(Setting(f"gated {r}", "base", ("rl",), r) for r in (0.02, 0.04, 0.08, 0.13)),
        Setting("entropy 0.04", "base", ("rl",), 0.04),
        Setting("random 0.25", "base", ("rl",), 0.25),
        Setting("early 0.25", "base", ("rl",), 1.0, verified_share=0.25),
        Setting("early's base pass", "base"),
    ]
    uncapped = dict(cap=8000, length=8000, processes=8, gpus=1)
    takeover = Recipe(
        "2. Decision-token takeover",
        [
            Job(
                "`generate` calibration", "240 responses of the 0.6B base", small, alone,
                [Setting("base", "base")], prompts=60, n=4, **uncapped, generate=True,
            ),
            Job(
                "`generate` base, thinking", "2 x 4,480 responses of a 0.6B", small, alone,
                [Setting("base", "base"), Setting("thinking", "base")], prompts=560, n=8,
                **uncapped, generate=True,
            ),
            Job(
                "`cross-sample`", "controls, 4 gates, entropy, random, early (+ its base pass)",
                guided, one_gpu, takeover_settings, prompts=560, n=8, **uncapped,
            ),
        ],
        [Scoring("240 + 4,480 responses", ("Qwen3-0.6B", "Qwen3-8B"), 4720, 8000, 8000, 1)],
    )  # fmt: skip
    twins = {"base": "Qwen3-4B", "rl": "Qwen3-4B"}
    replace_settings = [
        *controls,
        Setting("forced base", "base"),
        *(
            Setting(name, "base", ("rl",), RL_REPLACE_RATE)
            for name in ("rl-replace", "base-greedy", "forced rl-replace")
        ),
        Setting("mixture", "base", ("rl",), 1.0),
    ]
    sixteen = dict(prompts=120, n=16, cap=8192, length=8192, processes=8, gpus=1)
    replace = Recipe(
        "3. rl-replace",
        [
            Job(
                "`cross-sample`", "3 one-model controls, 4 two-model settings x 1,920", twins,
                one_gpu, replace_settings, **sixteen,
            ),
            Job(
                "`generate`", "1,920 responses of the 4B", {"base": "Qwen3-4B"}, alone,
                [Setting("rl", "base")], **sixteen, generate=True,
            ),
        ],
        [Scoring("1,920 responses", ("Qwen3-4B",) * 2, 1920, 8192, 8192, 1)],
    )  # fmt: skip
    steered = {"base": "Qwen2.5-32B", "rast_base": "Qwen2.5-7B", "rast_rl": "Qwen2.5-7B"}
    pair = ("rast_base", "rast_rl")
    four = ("rl", *pair)
    rast_runs = dict(cap=8000, length=8000)
    rast = Recipe(
        "4. RAST",
        [
            Job(
                "`generate`", "4,240 responses of SimpleRL-32B", {"base": "Qwen2.5-32B"},
                alone, [Setting("rl", "base")], prompts=530, n=8, **rast_runs, processes=8,
                gpus=1, generate=True,
            ),
            Job(
                "`cross-sample` (`--decoder reference`)", "base and rast x 4,240", steered,
                {"base": "cuda:0", "rast_base": "cuda:1", "rast_rl": "cuda:1"},
                [Setting("base", "base"), Setting("rast", "base", pair, 1.0)], prompts=530,
                n=8, **rast_runs, processes=4, gpus=2, decoder="reference",
            ),
            Job(
                "`--delta-alignment`", "2 x 100 responses, four models", {**pair32, **steered},
                {"base": "cuda:0", "rl": "cuda:1", "rast_base": "cuda:2", "rast_rl": "cuda:2"},
                [Setting("base", "base", four, 0.0), Setting("rast", "base", four, 1.0)],
                prompts=100, n=1, **rast_runs, processes=2, gpus=4,
            ),
        ],
        [Scoring("4,240 responses, 2 GPUs", ("Qwen2.5-32B",) * 2, 4240, 8000, 8000, 2)],
    )  # fmt: skip
    return [sparse, takeover, replace, rast]


def assumptions(occupancy: float) -> str:
    """What the estimates assume, printed above the tables."""
    forward, reverse = DAPO_FORWARD, DAPO_REVERSE
    lf, lr, ratio = forward[0] / forward[1], reverse[0] / reverse[1], SIMPLERL_ALL_PER_EFFECTIVE
    return f"""\
Assumptions (every number below follows from these and the memory plans):
- Batch sizes: the planner's (`divscope.memory_plan.plan_decoding`, the GPU's whole memory,
  prompts of {PROMPT} tokens, responses at the cap), for each decoder: the speculative one
  reserves its drafts' statistics and masked KV slots ({speculative_memory(2)} with
  other models to verify; {speculative_memory(1)} for one model alone), so it plans fewer
  rows.
- A forward takes the larger of: weights + rows x context x KV per token read at
  {READ_SHARE} of the HBM bandwidth (3.35 TB/s H100, 4.8 TB/s H200); 2 FLOPs per parameter
  and position plus attention at {COMPUTE_SHARE} of the {PEAK / 1e12:.0f} TFLOP/s peak;
  {LAUNCH_FLOOR * 1e3} ms per layer. The context is the prompt plus half the response (the cap's,
  or the mean length's). Models on two GPUs are counted one after the other (an upper bound).
- Reference decoder: every model forwards every step; a batch runs to the cap; a unit (a
  cross-sample unit of {UNIT_PARTS} parts of {PART_ROWS} responses; generate's whole share)
  takes ceil(unit / batch) batches.
- Speculative rounds: k primary steps, then one forward of each other model over the k
  drafted positions of the verified rows, counted as one step of that model (its KV read
  once; the FLOPs of k positions). A round emits E = (1 - (1 - q)^k) / q tokens per verified
  row; k is the decoder's own choice (`draft_length`) at the break rate q. q: the core
  paper's effective switch rates, {forward[1]:.1%} of tokens forward and {reverse[1]:.1%} reverse
  (Table 1, AIME 2024, DAPO); rl-replace's {RL_REPLACE_RATE:.0%} of tokens replaced (also for
  base-greedy); the calibrated rate r for the gates and rho for `random` (every switch a
  break: an upper bound); q = 1 (k = 1) for policies that switch at every step (`rast`,
  `mixture`, `early` while it writes: an upper bound, a switch to the drafted token keeps the
  draft going); q = 0 for `--delta-alignment`'s base rows.
- Budgets: a row needs the other models until it has made b switches; switches, identity
  swaps included, come at s = {ratio:.2f} x the effective rate (the core paper's
  SimpleRL row: 75 switches for 38 effective); then the primary decodes it alone. Budget 0
  and the controls never use the other models. A round pays the verifying forward while any
  row of the batch is verified (rows at independent points of their responses).
- To the cap: every response runs to the cap, the rows of a batch in lockstep.
- Mean length: responses average L (the core paper: {forward[0]} effective switches at
  {forward[1]:.1%} of the tokens, L = {lf:,.0f} forward; {reverse[0]} at {reverse[1]:.1%},
  L = {lr:,.0f} reverse, also for DAPO's own responses; the cap where a paper
  gives no length); finished rows are refilled within a unit, occupancy {occupancy:.3f} while
  requests wait (the prefills not counted); a unit's steps are at most its work
  over the rows / occupancy + one response at the cap (Graham's bound of list scheduling:
  the last row may start last and run to the cap), and at most its steps to the cap.
- Units: cross-sample's {UNIT_PARTS} parts of {PART_ROWS} responses of one setting, or (the
  last column) each process's whole share of a setting; generate decodes its whole share in
  one call (every column).
- Scoring (not changed by the decoder): FLOPs per token and model at {COMPUTE_SHARE} of the
  peak plus the statistics' {SCORING_BUFFERS} float32 [rows, V] buffers written and read once per
  token; every response at the cap (or its mean length). Grading (CPU) is not counted.
"""


HEADER = "| {first} | " + " | ".join(case.title for case in CASES) + " |"


def number(hours: float) -> str:
    """GPU-hours as docs/recipes.md writes them: 1,412; 134; 1.6."""
    return f"{hours:,.0f}" if hours >= 9.95 else f"{hours:.1f}"


def cell(pair: tuple[float, float]) -> str:
    """`H100 · H200`."""
    return f"{number(pair[0])} · {number(pair[1])}"


def columns(hours) -> list[tuple[float, float]]:
    """`hours(gpu, case)` of every column, H100 and H200 each."""
    return [tuple(hours(gpu, case) for gpu in GPUS) for case in CASES]


def add(rows) -> list[tuple[float, float]]:
    """Column sums of `rows` (lists of `(H100, H200)` pairs)."""
    return [tuple(map(sum, zip(*pairs, strict=True))) for pairs in zip(*rows, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--occupancy", type=float, default=OCCUPANCY,
        help="live rows over capacity while requests wait (measured: bench/decode.py)",
    )  # fmt: skip
    parser.add_argument(
        "--reference-batches", action="store_true",
        help="the speculative decoder at the reference's batch sizes (what-if: no memory "
        "reserved for its drafts and masked KV slots)",
    )  # fmt: skip
    args = parser.parse_args()
    estimator = Estimator(args.occupancy, args.reference_batches)
    print(assumptions(args.occupancy))
    summary = []
    for recipe in recipes():
        print(f"## {recipe.title} (GPU-hours H100 · H200)\n")
        plans = []
        for job in recipe.jobs:
            sizes = [
                "/".join(str(estimator.batch(job, gpu, d)) for d in ("reference", "speculative"))
                for gpu in GPUS
            ]
            plans.append(f"{job.step} {' · '.join(sizes)}")
        print("Batch sizes (reference/speculative, H100 · H200): " + "; ".join(plans) + "\n")
        print(HEADER.format(first="setting | q | k | E") + "\n|" + "---|" * (4 + len(CASES)))
        totals = []
        for job in recipe.jobs:
            rows = []
            for setting in job.settings:
                hours = columns(partial(estimator.hours, job, setting))
                rows.append(hours)
                k, emitted = draft(setting)
                drafts = (
                    f"{setting.breaks:.3g} | {k} | {emitted:.2f}" if setting.others else "- | - | -"
                )
                print(
                    f"| {job.step} {setting.name} | {drafts} | "
                    + " | ".join(map(cell, hours))
                    + " |"
                )
            totals.append((job.step, job.work, add(rows)))
        for scoring in recipe.scoring:
            hours = columns(partial(estimator.scoring_hours, scoring))
            totals.append(("`score`", scoring.work, hours))
        print("\n" + HEADER.format(first="step | work") + "\n|" + "---|" * (2 + len(CASES)))
        for step, work, hours in totals:
            print(f"| {step} | {work} | " + " | ".join(map(cell, hours)) + " |")
        total = add([hours for _, _, hours in totals])
        node = [f"{cell(pair)}: {cell((pair[0] / 8, pair[1] / 8))} h a node" for pair in total]
        print(f"| total | | {' | '.join(node)} |\n")
        summary.append((recipe.title, total))
    print(HEADER.format(first="recipe") + "\n|" + "---|" * (1 + len(CASES)))
    for title, total in summary:
        print(f"| {title} | " + " | ".join(map(cell, total)) + " |")
    print()
    core_levers(args.occupancy)


def core_levers(occupancy: float) -> None:
    """The core recipe's H200-hours at the paper's mean lengths, lever by lever (what the 60
    H200-hour target of issue 28 needs), and its first pass."""
    core = recipes()[0]
    mean, share = CASES[3], CASES[4]

    def h200(estimator: Estimator, case: Case, reuse_controls: bool = False) -> float:
        """H200-hours of the recipe; `reuse_controls`: the reverse run decodes no control."""
        total = estimator.scoring_hours(core.scoring[0], "141 GB", case)
        for job in core.jobs:
            for setting in job.settings:
                if reuse_controls and job is core.jobs[2] and not setting.others:
                    continue  # the forward run's base and rl stand in
                total += estimator.hours(job, setting, "141 GB", case)
        return total

    planned, wider = Estimator(occupancy), Estimator(occupancy, reference_batches=True)
    print("The core recipe at the paper's mean lengths, H200-hours:")
    print(f"- units of {UNIT_PARTS} parts of {PART_ROWS} responses: {number(h200(planned, mean))}")
    print(f"- each process's share of a setting as one unit: {number(h200(planned, share))}")
    print(f"- and the reference's batch sizes: {number(h200(wider, share))}")
    print(f"- and the reverse run's controls not decoded again: {number(h200(wider, share, True))}")
    first = [
        replace(job, n=8, settings=[s for s in job.settings if s.budget in FIRST_PASS])
        for job in core.jobs[1:]
    ]
    for case in (CASES[2], mean):
        hours = [sum(planned.hours(j, s, g, case) for j in first for s in j.settings) for g in GPUS]
        print(f"First pass (-n 8, budgets {FIRST_PASS}), cross-sampling, {case.title}: "
              f"{cell(tuple(hours))} GPU-hours")  # fmt: skip


if __name__ == "__main__":
    main()
