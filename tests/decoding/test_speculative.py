"""The speculative decoder (`DecodeConfig.decoder`, "speculative") against the step-by-step
reference ("reference"): for every policy of `POLICIES` (each stratum, a retrospective map, the
budget sweeps) and every budget, on tiny random fp32 pairs and on the lab's models, the same
`Decoded` per request; with `delta_alignment` too; whatever the batch size and the order of
the requests (batches refill); the decoder's counters (`DecodeStats`); and the switch
positions against a teacher-forced recomputation. The coupling invariants run on both decoders
in test_lockstep.py."""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import torch

from divscope.decoding import POLICIES, Decoded, Request, build_policy
from divscope.decoding.lockstep import DecodeConfig, DecodeStats, decode, decode_stream
from divscope.decoding.policies import STRATA, Early, Policy, RandomEffective
from divscope.decoding.randomness import Stream, inverse_cdf, uniforms
from divscope.decoding.speculative import DRAFT_LENGTHS
from divscope.scoring.metrics import StatsConfig, truncate, truncated_js
from tests.decoding.helpers import assert_same_decodes, twin
from tests.tinymodels import make_model

LAB = Path(__file__).resolve().parents[2] / "fixtures" / "lab"
DECODERS = ("reference", "speculative")
BUDGETS = (0, 1, 2, 4, -1)
MAP = "map.parquet"  # a retrospective map's name: the requests carry its steps (`map_steps`)
MATCH_TOL = 0.3
TINY_PROMPTS = {f"p{i}": tuple(range(5 + i, 5 + i + n)) for i, n in enumerate((1, 3, 6, 2, 9, 4))}
"""Prompts of six lengths over the tiny vocabulary."""


def _cases(eps: float, ce: float, entropy: float) -> dict[str, tuple[str, dict[str, Any]]]:
    """Every policy, stratum, map and budget sweep, by case id: `(policy, parameters)`, with
    thresholds (`eps`, the gates' tau on CE and on the base entropy) near the median of the
    setting's statistics, so that each switches at some steps and not at others."""
    cases: dict[str, tuple[str, dict[str, Any]]] = {"base": ("base", {}), "rl": ("rl", {})}
    for policy in ("forward", "reverse"):
        cases[policy] = (policy, {"eps": eps})
        for stratum in STRATA[1:]:
            tol = MATCH_TOL if stratum == "entropy-matched" else None
            cases[f"{policy}-{stratum}"] = (
                policy,
                {"eps": eps, "stratum": stratum, "match_tol": tol},
            )
        cases[f"{policy}-map"] = (policy, {"eps": eps, "map_table": MAP})
    for gate, tau in (("gated", ce), ("entropy", entropy)):
        cases[gate] = (gate, {"tau": tau, "lam": 1.0, "window": 3})
        cases[f"{gate}-budget-sweep"] = (
            gate,
            {"tau": tau, "lam": 1.0, "window": 3, "budget_sweep": True},
        )
    return cases | {
        "random": ("random", {"rate": 0.2}),
        "random-effective": ("random-effective", {"eps": eps}),
        "early": ("early", {}),
        "early-share": ("early", {"share": 0.3}),
        "rl-replace": ("rl-replace", {}),
        "base-greedy": ("base-greedy", {}),
        "mixture": ("mixture", {"alpha": 0.5}),
        "rast": ("rast", {"lam": 1.5}),
        # policies that sample at their own temperature and top-p (not the run's)
        "base-own-sampling": ("base", {"temperature": 0.6, "top_p": 0.95}),
        "rl-own-sampling": ("rl", {"temperature": 1.3}),
        "mixture-own-sampling": ("mixture", {"alpha": 0.5, "temperature": 0.6, "top_p": 0.95}),
        "rl-replace-own-sampling": ("rl-replace", {"temperature": 1.2, "top_p": 0.8}),
    }


TINY_CASES = _cases(eps=0.3, ce=2.8, entropy=0.6)  # the twin pair's medians at top-p 0.7
LAB_CASES = _cases(eps=0.02, ce=0.001, entropy=0.001)
LAB_DEFAULT = {"forward", "reverse-map", "gated", "rl-replace", "rast"}
"""The lab's cases in the default tier (each exercised); the others are `slow`."""
CONTROLS = {"base", "rl", "base-own-sampling", "rl-own-sampling"}
"""The single-model cases: no intervener, no switch."""
SWITCHES_EVERYWHERE = {"early", "early-share", "mixture", "mixture-own-sampling", "rast"}
"""Cases whose switches do not depend on a step's statistics (every step, or a whole response)."""


@dataclass
class Run:
    """One case decoded by both decoders."""

    requests: list[Request]
    decoded: dict[str, list[Decoded]]
    stats: dict[str, DecodeStats]


@dataclass
class Setting:
    """Models, prompts and decoding settings of one comparison; its runs are kept by case (the
    statistics tests read the equality tests' runs; `random-effective` reads forward's)."""

    models: Mapping[str, torch.nn.Module]
    prompts: Mapping[str, tuple[int, ...]]
    samples: int
    config: DecodeConfig
    vocab: int
    eos_ids: tuple[int, ...]
    pad_id: int
    cases: Mapping[str, tuple[str, dict[str, Any]]]
    suppressed: tuple[int, ...] = ()
    runs: dict[str, Run] = field(default_factory=dict)

    def decode(
        self, policy: Policy, requests: list[Request], config: DecodeConfig, decoder: str
    ) -> tuple[list[Decoded], DecodeStats]:
        """`requests` decoded by `decoder`, and its counters."""
        stats = DecodeStats()
        decoded = decode(
            self.models, requests, policy, replace(config, decoder=decoder), vocab=self.vocab,
            eos_ids=self.eos_ids, pad_id=self.pad_id, suppressed=self.suppressed, stats=stats,
        )  # fmt: skip
        return decoded, stats

    def both(
        self, policy: Policy, requests: list[Request], config: DecodeConfig | None = None
    ) -> Run:
        """`requests` decoded by both decoders."""
        runs = {d: self.decode(policy, requests, config or self.config, d) for d in DECODERS}
        return Run(requests, {d: r[0] for d, r in runs.items()}, {d: r[1] for d, r in runs.items()})

    def run(self, case: str) -> Run:
        """The case's requests (`requests`) decoded by both decoders, once per module."""
        if case not in self.runs:
            name, params = self.cases[case]
            policy = build_policy(name, **params)
            self.runs[case] = self.both(policy, self.requests(policy))
        return self.runs[case]

    def requests(self, policy: Policy, budgets: tuple[int, ...] | None = None) -> list[Request]:
        """Every prompt's samples at each budget (the policy's: `BUDGETS` where budgeted), with
        what the policy needs: map steps, forward's effective counts, early's share."""
        mapped = getattr(policy, "map_table", None) is not None
        steps = self.config.max_new_tokens or 64
        requests = [
            Request(
                prompt_id,
                sample,
                ids,
                budget,
                _map_steps(prompt_id, sample, steps) if mapped else None,
            )
            for budget in budgets or (BUDGETS if policy.budgeted else (-1,))
            for prompt_id, ids in self.prompts.items()
            for sample in range(self.samples)
        ]
        if isinstance(policy, RandomEffective):  # forward's requests are the same, in order
            forward = self.run("forward").decoded["reference"]
            requests = [
                replace(r, switches=d.n_effective) for r, d in zip(requests, forward, strict=True)
            ]
        if isinstance(policy, Early) and policy.share is not None:
            base = self.run("base").decoded["reference"]
            requests = [
                replace(r, budget=policy.budget_for(len(d.response_ids)))
                for r, d in zip(requests, base, strict=True)
            ]
        return requests


def _map_steps(prompt_id: str, sample: int, steps: int) -> tuple[int, ...]:
    """A retrospective map's steps for one response: about a third of them, fixed by its key."""
    pick = random.Random(f"{prompt_id}/{sample}")
    return tuple(t for t in range(steps) if pick.random() < 0.35)


@pytest.fixture(scope="module")
def tiny(twin_pair) -> Setting:
    """The twin pair (peaked, JS spread around 0.3) with a random small pair for RAST; prompts
    of six lengths, 2 samples, batches of 7 (fewer than the requests: batches refill), and two
    stop tokens that end the rows at many different steps."""
    models = {
        **twin_pair,
        "rast_base": make_model("llama", vocab_size=48, seed=2, logit_scale=20.0),
        "rast_rl": make_model("llama", vocab_size=48, seed=3, logit_scale=20.0),
    }
    config = DecodeConfig(StatsConfig(top_p=0.7), max_new_tokens=16, batch_size=7, seed=3)
    return Setting(
        models, TINY_PROMPTS, 2, config, vocab=44, eos_ids=(6, 36), pad_id=0, cases=TINY_CASES
    )


@pytest.fixture(scope="module")
def qwen2_short() -> Setting:
    """A Qwen2 `twin` pair (attention biases) with eager attention (the decoder adds its
    masks), a context of 24 tokens and no --max-new-tokens (each prompt's length cap is what
    its context leaves, 15 to 23 tokens), sampled at temperature 0.8, top-p 0.9."""
    models = twin("qwen2", seed=4, max_positions=24)
    for model in models.values():
        model.set_attn_implementation("eager")
    config = DecodeConfig(StatsConfig(top_p=0.9, temperature=0.8), batch_size=5, seed=7)
    return Setting(
        models, TINY_PROMPTS, 2, config, vocab=44, eos_ids=(6, 36), pad_id=0, cases=TINY_CASES
    )


@pytest.fixture(scope="module")
def lab() -> Setting:
    """The lab's base and RL models, with its SFT model and first RL checkpoint as RAST's small
    pair; 3 evaluation prompts (three lengths) × 2 samples, batches of 4."""
    from divscope.models.loading import load_model
    from divscope.models.tokenizers import load_tokenizer
    from divscope.prompts import prompt_token_ids, read_prompts

    tokenizer = load_tokenizer(str(LAB / "base"))
    names = {"base": "base", "rl": "rl", "rast_base": "sft", "rast_rl": "rl-step-30"}
    models = {name: load_model(str(LAB / path), device="cpu") for name, path in names.items()}
    prompts = read_prompts(LAB / "prompts" / "eval.jsonl").head(3)
    ids = prompt_token_ids(prompts, tokenizer, source="eval")
    config = DecodeConfig(StatsConfig(top_p=0.9), max_new_tokens=20, batch_size=4, seed=5)
    return Setting(
        models, {k: tuple(i) for k, i in zip(prompts["prompt_id"], ids, strict=True)}, 2, config,
        vocab=len(tokenizer), eos_ids=(tokenizer.eos_token_id,), pad_id=tokenizer.pad_token_id,
        cases=LAB_CASES,
    )  # fmt: skip


def test_the_cases_cover_every_policy_and_stratum():
    for cases in (TINY_CASES, LAB_CASES):
        assert {name for name, _ in cases.values()} == set(POLICIES)
        strata = {params.get("stratum") for _, params in cases.values()}
        assert strata >= {None, *STRATA[1:]}
        assert any(params.get("map_table") for _, params in cases.values())


def _assert_same(case: str, run: Run) -> None:
    """The speculative decoder decoded as the reference, and did run its rounds (no fallback
    to the reference): drafts verified wherever a row needs another model."""
    stats = run.stats["speculative"]
    if case not in CONTROLS and any(r.budget != 0 for r in run.requests):
        assert stats.draft >= 1, (case, stats)
    assert_same_decodes(run.decoded["speculative"], run.decoded["reference"], case, run.requests)


def _assert_exercised(case: str, run: Run) -> None:
    """The reference run is no degenerate case: a policy with an intervener switches, budgets
    bind, and a gate leaves some steps alone."""
    decoded = run.decoded["reference"]
    if case in CONTROLS:
        return
    assert sum(d.n_switches for d in decoded) > 0, case
    at_one = [d for r, d in zip(run.requests, decoded, strict=True) if r.budget == 1]
    assert not at_one or any(d.n_switches == 1 for d in at_one), case
    if case not in SWITCHES_EVERYWHERE:
        assert any(
            d.n_switches < len(d.response_ids)
            for r, d in zip(run.requests, decoded, strict=True)
            if r.budget < 0
        ), case


@pytest.mark.parametrize("case", TINY_CASES)
def test_speculative_decodes_as_the_reference_on_tiny_pairs(tiny, case):
    run = tiny.run(case)
    _assert_exercised(case, run)
    _assert_same(case, run)


def test_the_tiny_rows_end_at_many_steps(tiny):
    lengths = [len(d.response_ids) for d in tiny.run("forward").decoded["reference"]]
    assert len(set(lengths)) > 5 and max(lengths) == tiny.config.max_new_tokens


@pytest.mark.parametrize("case", ["forward", "reverse-tail", "gated-budget-sweep", "rl-replace"])
def test_speculative_decodes_as_the_reference_at_each_prompts_length_cap(qwen2_short, case):
    assert qwen2_short.models["base"].config._attn_implementation == "eager"
    run = qwen2_short.run(case)
    _assert_exercised(case, run)
    lengths = {len(d.response_ids) for d in run.decoded["reference"] if not d.finished}
    assert len(lengths) > 2  # rows cut at different caps
    _assert_same(case, run)


@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=() if c in LAB_DEFAULT else pytest.mark.slow) for c in LAB_CASES]
)
def test_speculative_decodes_as_the_reference_on_the_lab(lab, case):
    run = lab.run(case)
    if case in LAB_DEFAULT:
        _assert_exercised(case, run)
    _assert_same(case, run)


@pytest.fixture(scope="module")
def tiny_grid(tiny) -> Setting:
    """The tiny pair on a larger grid: 16 prompts of 1 to 20 random tokens × 3 samples, up to
    40 new tokens, batches of 11."""
    pick = random.Random(0)
    prompts = {
        f"q{i}": tuple(pick.randrange(4, 44) for _ in range(pick.randint(1, 20))) for i in range(16)
    }
    config = replace(tiny.config, max_new_tokens=40, batch_size=11)
    return replace(tiny, prompts=prompts, samples=3, config=config, runs={})


@pytest.mark.slow
@pytest.mark.parametrize("case", TINY_CASES)
def test_speculative_decodes_as_the_reference_on_a_larger_grid(tiny_grid, case):
    _assert_same(case, tiny_grid.run(case))


@pytest.mark.parametrize("case", TINY_CASES)
def test_decode_stats(tiny, case):
    """The counters of both decoders: the speculative one forwards the intervener at most as
    often as the reference; occupancy in (0, 1]; every emitted token counted; and the
    speculative rounds did run (no fallback to the reference): drafts were verified, except
    in the single-model controls, which never run another model."""
    run = tiny.run(case)
    reference, speculative = run.stats["reference"], run.stats["speculative"]
    assert speculative.intervener_forwards <= reference.intervener_forwards, case
    for decoder, stats in run.stats.items():
        emitted = sum(len(d.response_ids) for d in run.decoded[decoder])
        assert stats.emitted == emitted, (case, decoder)
        assert stats.steps > 0 and 0 < stats.occupancy <= 1, (case, decoder, stats)
        assert 0 <= stats.intervener_forwards <= stats.intervener_tokens, (case, decoder, stats)
    assert reference.draft == 0, case
    if case in CONTROLS:
        assert speculative.draft == 0 and speculative.intervener_forwards == 0, case
    else:
        assert 1 <= speculative.draft <= max(DRAFT_LENGTHS), (case, speculative)


@pytest.mark.parametrize(
    "case",
    [
        "base",
        "rl",
        "forward",
        "reverse-entropy-matched",
        "forward-map",
        "random",
        "early",
        "gated-budget-sweep",
    ],
)
def test_budget_zero_never_forwards_the_intervener(tiny, case):
    """With every budget 0 (and in the single-model controls) the intervener can change no
    token: the speculative decoder never runs it, and emits the reference's responses."""
    name, params = tiny.cases[case]
    policy = build_policy(name, **params)
    run = tiny.both(policy, tiny.requests(policy, budgets=(0,)))
    _assert_same(case, run)
    assert all(d.n_switches == 0 for d in run.decoded["reference"])
    stats = run.stats["speculative"]
    assert stats.intervener_forwards == 0 and stats.intervener_tokens == 0, (case, stats)


@pytest.mark.parametrize("case", ["base", "forward", "reverse-tail", "gated", "rast"])
def test_delta_alignment_records_the_same(tiny, case):
    """`delta_alignment` decodes every policy with all four models: the same responses and
    the same per-token `delta_cosine` from both decoders."""
    name, params = tiny.cases[case]
    policy = build_policy(name, **params)
    config = replace(tiny.config, delta_alignment=True)
    run = tiny.both(policy, tiny.requests(policy, budgets=(0, 1, -1)), config)
    reference = run.decoded["reference"]
    assert all(d.delta_cosine is not None for d in reference)
    _assert_same(case, run)


@pytest.mark.parametrize(
    "case", ["forward", "reverse-entropy-matched", "gated-budget-sweep", "mixture"]
)
def test_outputs_do_not_depend_on_which_requests_share_a_batch(tiny, case):
    """Batches of 1, 3, 7 and 64 (more than the requests), and the requests shuffled: each
    request's response is the reference's (per-row gate states, budgets and draws travel with
    the row when batches refill)."""
    name, params = tiny.cases[case]
    policy = build_policy(name, **params)
    requests = tiny.requests(policy, budgets=(0, 2, -1) if policy.budgeted else (-1,))
    want = tiny.decode(policy, requests, tiny.config, "reference")[0]
    order = list(range(len(requests)))
    random.Random(0).shuffle(order)
    for batch_size in (1, 3, 7, 64):
        config = replace(tiny.config, batch_size=batch_size)
        got = tiny.decode(policy, requests, config, "speculative")[0]
        assert_same_decodes(got, want, (case, batch_size), requests)
    shuffled = tiny.decode(policy, [requests[i] for i in order], tiny.config, "speculative")[0]
    got = [None] * len(requests)
    for i, decoded in zip(order, shuffled, strict=True):
        got[i] = decoded
    assert_same_decodes(got, want, (case, "shuffled"), requests)


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("case", ["base", "forward", "gated"])
def test_the_stream_yields_each_response_once_as_soon_as_it_is_done(tiny, case, decoder):
    """`decode_stream` over 24 to 72 requests in batches of 4: every request's response once, the
    one `decode` returns, the first long before the work is done (the speculative decoder
    yields a response in the round it finishes, the reference each batch as it ends); and
    between yields the caller's code is not in inference mode."""
    name, params = tiny.cases[case]
    policy = build_policy(name, **params)
    requests = tiny.requests(policy, budgets=(0, 2, -1) if policy.budgeted else (-1,))
    requests = [replace(r, sample_id=r.sample_id + 10 * k) for k in range(2) for r in requests]
    config = replace(tiny.config, batch_size=4, decoder=decoder)
    want = tiny.decode(policy, requests, config, decoder)[0]
    stats = DecodeStats()
    got: dict[int, Decoded] = {}
    emitted_then = []
    for i, response in decode_stream(
        tiny.models, requests, policy, config, vocab=tiny.vocab, eos_ids=tiny.eos_ids,
        pad_id=tiny.pad_id, stats=stats,
    ):  # fmt: skip
        assert not torch.is_inference_mode_enabled()
        assert i not in got
        got[i] = response
        emitted_then.append(stats.emitted)
    assert len(requests) >= 24 and sorted(got) == list(range(len(requests)))
    assert_same_decodes([got[i] for i in range(len(requests))], want, case, requests)
    assert emitted_then[0] < stats.emitted / 4  # the first response came early


def test_the_outputs_take_the_batch_s_memory_not_the_requests(tiny):
    """The speculative decoder's outputs hold one slot per row of the batch, whatever the
    number of requests (the memory plan counts them per row): 36 requests in batches of 3."""
    from divscope.decoding import speculative

    policy = build_policy("forward", eps=0.1)
    requests = tiny.requests(policy, budgets=(0, 2, -1))
    shapes = []
    unit = speculative._Unit

    class Watched(unit):
        def _read(self, requests, slots):
            shapes.append(tuple(self.tokens.shape))
            super()._read(requests, slots)

    config = replace(tiny.config, batch_size=3)
    want = tiny.decode(policy, requests, config, "speculative")[0]
    speculative._Unit = Watched
    try:
        got = tiny.decode(policy, requests, config, "speculative")[0]
    finally:
        speculative._Unit = unit
    assert len(requests) == 36 and {rows for rows, _ in shapes} == {3}
    assert_same_decodes(got, want, "forward", requests)


@pytest.mark.parametrize("batch_size", [2, 3])
@pytest.mark.parametrize("case", ["forward", "gated"])
def test_a_long_prompt_joins_a_batch_of_short_ones(tiny, case, batch_size):
    """Short prompts first (the queue is sorted by prompt length), then a 40-token prompt that
    takes a finished row's place while the others decode: its prompt is longer than the
    batch's KV so far, which makes room for it; the same responses."""
    prompts = {"s0": (5,), "s1": (7,), "s2": (9, 10), "long": tuple(range(4, 44))}
    config = replace(tiny.config, batch_size=batch_size)
    setting = replace(tiny, prompts=prompts, samples=3, config=config, runs={})
    run = setting.run(case)
    _assert_same(case, run)


@pytest.mark.parametrize("max_new_tokens", [1, 2, 5])
@pytest.mark.parametrize("case", ["forward", "gated-budget-sweep", "early"])
def test_length_caps_shorter_than_a_draft(tiny, case, max_new_tokens):
    """Responses capped at 1, 2 or 5 tokens: drafts cut at the cap, the same responses."""
    name, params = tiny.cases[case]
    policy = build_policy(name, **params)
    config = replace(tiny.config, max_new_tokens=max_new_tokens)
    run = tiny.both(policy, tiny.requests(policy, budgets=(1, -1)), config)
    assert max(len(d.response_ids) for d in run.decoded["reference"]) == max_new_tokens
    _assert_same(case, run)


@pytest.mark.parametrize("case", ["forward", "reverse-rerank", "rl-replace", "rast"])
def test_suppressed_tokens(tiny, case):
    """Ids no model may emit (−inf logits in every model): the same responses."""
    common = [t for d in tiny.run("base").decoded["reference"] for t in d.response_ids]
    banned = tuple(sorted(set(common) - set(tiny.eos_ids))[:4])
    setting = replace(tiny, suppressed=banned, runs={})
    run = setting.run(case)
    assert not {t for d in run.decoded["reference"] for t in d.response_ids} & set(banned)
    _assert_same(case, run)


@pytest.mark.parametrize("top_p", [0.7, 1.0])
def test_identical_models(tiny, top_p):
    """The RL model a copy of the base model (a null control; docs/contracts.md, "The
    speculative decoder"): the reference's JS is exactly 0 at every step, the speculative
    decoder's about 1e-13 (its intervener reads k positions in one forward), so forward at
    eps 0 switches there, to the same token: the responses stay the same. From eps 1e-6 on,
    everything is the reference's, and with the delta alignment's models the tokens are."""
    models = {**tiny.models, "rl": copy.deepcopy(tiny.models["base"])}
    config = replace(tiny.config, sampling=StatsConfig(top_p=top_p))
    for eps, delta_alignment in ((0.0, False), (1e-6, False), (0.3, True)):
        cases = {"forward": ("forward", {"eps": eps})}
        setting = replace(
            tiny, models=models, config=replace(config, delta_alignment=delta_alignment),
            cases=cases, runs={},
        )  # fmt: skip
        run = setting.run("forward")
        assert all(d.n_switches == 0 for d in run.decoded["reference"])
        tokens = [[d.response_ids for d in run.decoded[k]] for k in ("speculative", "reference")]
        assert tokens[0] == tokens[1]
        if eps == 0.0:
            assert any(d.n_switches for d in run.decoded["speculative"])  # the known difference
        elif not delta_alignment:
            _assert_same("forward", run)


@pytest.mark.parametrize("case", ["forward", "reverse"])
def test_switch_positions_index_the_intervener_token(tiny, case):
    """Recomputed from one teacher-forced forward of each final sequence per model (no KV
    cache) and the request's uniforms: at every switch position p, `response_ids[p]` is the
    intervener's draw there, `switch_primary_ids` the primary's and `switch_js` the JS; at
    every other position the primary's draw."""
    run = tiny.run(case)
    primary, intervener = ("base", "rl") if case == "forward" else ("rl", "base")
    sampling, steps = tiny.config.sampling, tiny.config.max_new_tokens
    checked = 0
    for request, d in zip(run.requests, run.decoded["speculative"], strict=True):
        u = uniforms(
            tiny.config.seed, [request.prompt_id], [request.sample_id], steps, Stream.SAMPLE
        )[0]
        sequence = torch.tensor([[*request.prompt_ids, *d.response_ids]])
        start, n = len(request.prompt_ids) - 1, len(d.response_ids)
        with torch.inference_mode():
            logits = {
                name: tiny.models[name](input_ids=sequence).logits[
                    0, start : start + n, : tiny.vocab
                ]
                for name in (primary, intervener)
            }  # [n, V] each: the logits that predicted each response token
        truncated = {name: truncate(value, sampling) for name, value in logits.items()}
        draws = {
            name: inverse_cdf(value, torch.from_numpy(u[:n])).tolist()
            for name, value in truncated.items()
        }
        js = truncated_js(truncated["base"], truncated["rl"]).tolist()
        for p, token in enumerate(d.response_ids):
            if p in d.switch_positions:
                k = d.switch_positions.index(p)
                assert token == draws[intervener][p], (request, p)
                assert d.switch_primary_ids[k] == draws[primary][p], (request, p)
                assert d.switch_js[k] == pytest.approx(js[p], abs=1e-5), (request, p)
                checked += 1
            else:
                assert token == draws[primary][p], (request, p)
    assert checked > 20
