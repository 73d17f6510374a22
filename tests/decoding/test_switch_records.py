"""What the lockstep decoder records besides the tokens: the primary model's own draw at each
switch (`switch_primary_ids`, and with it `n_effective`), the effective switches against an
independent draw of the primary (`n_effective`), the delta alignment
(`delta_cosine`), and how `cross-sample` writes them with the switch tokens' text and the
prompts' benchmark. Each is recomputed directly from the models."""

from __future__ import annotations

import copy
import json

import polars as pl
import pytest
import torch
from typer.testing import CliRunner

from divscope.cli import app
from divscope.decoding import DecodeConfig, Request, Stream, build_policy, uniforms
from divscope.decoding.cross_sample import CrossSampleModels, Grid, cross_sample
from divscope.decoding.policies import POLICIES, Base, Forward, StepView
from divscope.decoding.randomness import inverse_cdf
from divscope.defaults import REPLACE_TEMPERATURE, REPLACE_TOP_P
from divscope.errors import DivscopeError
from divscope.params import ModelPair
from divscope.schema import CROSS_SAMPLE
from divscope.scoring.metrics import StatsConfig, truncate
from tests.decoding.helpers import VOCAB, tiny_decode, tiny_requests
from tests.tinymodels import make_model, make_tokenizer

SAMPLING = StatsConfig(temperature=1.0, top_p=0.7)
CONFIG = DecodeConfig(SAMPLING, max_new_tokens=16, batch_size=4, seed=5)
PROMPTS = {"a": (5, 6, 7), "b": (8,), "c": (9, 10, 11, 12)}
REPLACE = StatsConfig(top_p=REPLACE_TOP_P, temperature=REPLACE_TEMPERATURE)


@pytest.fixture(scope="module")
def models():
    return {
        name: make_model("llama", vocab_size=48, seed=seed)
        for seed, name in enumerate(("base", "rl", "rast_base", "rast_rl"))
    }


def _requests(budget=-1, samples=2):
    return tiny_requests((budget,), samples, PROMPTS)


def _run(models, policy, requests, config=CONFIG, *, suppressed=(), **params):
    return tiny_decode(models, policy, requests, config, suppressed=suppressed, **params)


def _teacher_forced(model, request, response, suppressed=()) -> torch.Tensor:
    """`[n, VOCAB]` the logits that predict each response token, from one plain forward."""
    ids = [*request.prompt_ids, *response]
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([ids])).logits[0, :, :VOCAB]
    logits = logits[len(request.prompt_ids) - 1 : len(ids) - 1].clone()  # [n, VOCAB]
    logits[:, list(suppressed)] = -torch.inf
    return logits


def _draw(logits: torch.Tensor, config: StatsConfig, u: float) -> int:
    """The inverse-CDF draw of uniform `u` from one row of logits."""
    dist = truncate(logits[None], config)
    return int(inverse_cdf(dist, torch.tensor([u], dtype=torch.float64))[0])


@pytest.mark.parametrize(
    "policy,params,budget,primary,config",
    [
        ("forward", {"eps": 0.1}, 3, "base", SAMPLING),
        ("forward", {"eps": 0.1}, -1, "base", SAMPLING),
        ("reverse", {"eps": 0.1}, -1, "rl", SAMPLING),
        ("random", {"rate": 0.3}, -1, "base", SAMPLING),
        ("rl-replace", {}, -1, "base", REPLACE),
        ("rast", {"lam": 1.0}, -1, "base", SAMPLING),
    ],
)
def test_switch_records_are_the_primary_models_own_draws(
    models, policy, params, budget, primary, config
):
    """At each switch position p: the primary model fed prompt + response[:p] and truncated at
    its sampling gives, with the step's coupled uniform, `switch_primary_ids`; with the
    uniform of `Stream.PRIMARY`, the independent draw that `n_effective` counts against."""
    requests = _requests(budget)
    decoded = _run(models, policy, requests, **params)
    switches = 0
    for request, d in zip(requests, decoded, strict=True):
        key = ([request.prompt_id], [request.sample_id], len(d.response_ids))
        coupled = uniforms(CONFIG.seed, *key, Stream.SAMPLE)[0]
        independent = uniforms(CONFIG.seed, *key, Stream.PRIMARY)[0]
        logits = _teacher_forced(models[primary], request, d.response_ids)
        emitted = [d.response_ids[p] for p in d.switch_positions]
        expected_primary = [_draw(logits[p], config, coupled[p]) for p in d.switch_positions]
        drawn = [_draw(logits[p], config, independent[p]) for p in d.switch_positions]
        assert d.switch_primary_ids == expected_primary
        assert len(d.switch_primary_ids) == d.n_switches == len(d.switch_positions)
        coupled_count = sum(a != b for a, b in zip(expected_primary, emitted, strict=True))
        assert d.n_effective_coupled == coupled_count
        assert d.n_effective == sum(a != b for a, b in zip(drawn, emitted, strict=True))
        assert d.delta_cosine is None
        switches += d.n_switches
    assert switches > 0


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_policys_primary_draw_comes_from_its_primary_config(name):
    """`Policy.primary` and `Policy.primary_config` name the distribution of the coupled draw
    `Proposal.primary`, which is the one the independent draw is taken from."""
    params = {"eps": 0.1, "rate": 0.3, "alpha": 0.5, "tau": 0.1, "lam": 1.0, "window": 4}
    policy = build_policy(name, **params)
    generator = torch.Generator().manual_seed(0)
    logits = {
        model: torch.randn(6, VOCAB, generator=generator) * 3
        for model in ("base", "rl", "rast_base", "rast_rl")
    }
    u = torch.rand(6, dtype=torch.float64, generator=generator)
    view = StepView(logits, u, u, SAMPLING)
    requests = [Request("p", row, (1,), switches=1) for row in range(6)]
    proposal = policy.propose(view, policy.init_state(u, requests, steps=1))
    dist = truncate(logits[policy.primary], policy.primary_config(view))
    assert torch.equal(proposal.primary, inverse_cdf(dist, u))


def test_coupled_and_independent_counts_differ(models):
    """rast switches at every step; with a small weight the steered distribution is close to
    the base model's, and the coupling makes the base's own draw agree with the emitted token
    more often than an independent draw does."""
    decoded = _run(models, "rast", _requests(samples=3), lam=0.1)
    coupled = sum(d.n_effective_coupled for d in decoded)
    independent = sum(d.n_effective for d in decoded)
    assert coupled < independent <= sum(d.n_switches for d in decoded)


def test_controls_record_no_switch(models):
    for d in _run(models, "base", _requests()):
        assert (d.switch_primary_ids, d.n_effective, d.n_effective_coupled) == ([], 0, 0)


def test_delta_cosine_matches_a_float64_reference(models):
    """Per response position t, cos(rast_rl − rast_base, rl − base) over the ids finite in
    every model, from the logits predicting token t (teacher-forced, float64)."""
    config = DecodeConfig(**{**CONFIG.__dict__, "delta_alignment": True})
    suppressed = (40,)  # −inf in every model: left out of the cosine
    doubles = {name: copy.deepcopy(model).double() for name, model in models.items()}
    for policy, params in (("forward", {"eps": 0.1}), ("base", {})):
        requests = _requests()
        decoded = _run(models, policy, requests, config, suppressed=suppressed, **params)
        for request, d in zip(requests, decoded, strict=True):
            logits = {
                name: _teacher_forced(model, request, d.response_ids, suppressed)
                for name, model in doubles.items()
            }
            small = logits["rast_rl"] - logits["rast_base"]  # [n, VOCAB] float64
            large = logits["rl"] - logits["base"]
            kept = torch.ones(VOCAB, dtype=torch.bool)
            kept[list(suppressed)] = False
            small, large = small[:, kept], large[:, kept]
            expected = (small * large).sum(-1) / (small.norm(dim=-1) * large.norm(dim=-1))
            got = torch.tensor(d.delta_cosine, dtype=torch.float64)
            assert got.shape == (len(d.response_ids),)
            torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


def test_a_zero_delta_has_no_cosine(models):
    config = DecodeConfig(**{**CONFIG.__dict__, "delta_alignment": True})
    same = {**models, "rast_rl": models["rast_base"]}  # the small pair's difference is 0
    for d in _run(same, "base", _requests(samples=1), config):
        assert d.delta_cosine == [None] * len(d.response_ids)


def test_delta_alignment_changes_no_token_or_count(models):
    # The reference decoder: bit for bit (the speculative decoder's float records move in their
    # last bits with its draft lengths, which depend on the models it runs:
    # tests/decoding/test_speculative.py compares it with the reference).
    off = DecodeConfig(**{**CONFIG.__dict__, "decoder": "reference"})
    on = DecodeConfig(**{**off.__dict__, "delta_alignment": True})
    for policy, params in (("forward", {"eps": 0.1}), ("rl", {}), ("rast", {"lam": 1.0})):
        plain = _run(models, policy, _requests(2), off, **params)
        aligned = _run(models, policy, _requests(2), on, **params)
        assert [d.delta_cosine is not None for d in aligned] == [True] * len(aligned)
        assert [{**vars(d), "delta_cosine": None} for d in aligned] == [vars(d) for d in plain]


def test_delta_alignment_needs_all_four_models(models):
    config = DecodeConfig(**{**CONFIG.__dict__, "delta_alignment": True})
    pair = {name: models[name] for name in ("base", "rl")}
    missing = r"--delta-alignment needs the model\(s\) rast_base, rast_rl"
    with pytest.raises(DivscopeError, match=missing):
        _run(pair, "forward", _requests(), config, eps=0.1)


# ------------------------------------------------------------------- cross-sample end to end


@pytest.fixture(scope="module")
def rast_pair(tmp_path_factory):
    """Paths of a saved tiny small-pair (rast_base, rast_rl) sharing `tiny_pair`'s tokenizer."""
    root = tmp_path_factory.mktemp("rast_pair")
    paths = []
    for name, seed in (("rast_base", 2), ("rast_rl", 3)):
        make_model("llama", vocab_size=48, seed=seed).save_pretrained(root / name)
        make_tokenizer().save_pretrained(root / name)
        paths.append(root / name)
    return paths


def _prompts(path, benchmark: bool):
    rows = [
        {"prompt_id": "p0", "prompt": "w1 w2 w3", "benchmark": "math"},
        {"prompt_id": "p1", "prompt": "w9", "benchmark": "aime"},
        {"prompt_id": "p2", "prompt": "w4 w5", "benchmark": "math"},
    ]
    rows = [r if benchmark else {k: v for k, v in r.items() if k != "benchmark"} for r in rows]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_cross_sample_writes_the_switch_records(tmp_path, tiny_pair, rast_pair):
    base, rl = tiny_pair
    # the reference decoder: its records are bit for bit the same with and without the
    # alignment's models (the speculative decoder's within rounding: test_speculative.py)
    config = DecodeConfig(SAMPLING, max_new_tokens=12, batch_size=4, seed=2, decoder="reference")
    common = {"grid": Grid(n=2), "progress": False}
    policies = [Base(), Forward(eps=0.1)]
    four = CrossSampleModels(str(base), str(rl), rast_base=str(rast_pair[0]),
                             rast_rl=str(rast_pair[1]))  # fmt: skip
    aligned = pl.from_arrow(cross_sample(
        _prompts(tmp_path / "bench.jsonl", True), four, policies, tmp_path / "a.parquet",
        DecodeConfig(**{**config.__dict__, "delta_alignment": True}), **common,
    ))  # fmt: skip
    plain = pl.from_arrow(cross_sample(
        _prompts(tmp_path / "plain.jsonl", False), ModelPair(str(base), str(rl)), policies,
        tmp_path / "p.parquet", config, **common,
    ))  # fmt: skip
    assert list(aligned.columns[: len(CROSS_SAMPLE)]) == list(CROSS_SAMPLE)
    assert aligned.schema["delta_cosine"] == pl.List(pl.Float32())
    tokenizer = make_tokenizer()
    forward = aligned.filter(pl.col("policy") == "forward")
    assert forward["n_switches"].sum() > 0
    for row in forward.iter_rows(named=True):
        emitted = [row["response_ids"][p] for p in row["switch_positions"]]
        assert row["switch_tokens"] == tokenizer.convert_ids_to_tokens(emitted)
        assert row["switch_primary_tokens"] == tokenizer.convert_ids_to_tokens(
            row["switch_primary_ids"]
        )
        assert len(row["delta_cosine"]) == row["n_tokens"]
    benchmarks = dict(zip(aligned["prompt_id"], aligned["benchmark"], strict=True))
    assert benchmarks == {"p0": "math", "p1": "aime", "p2": "math"}
    # Without a benchmark column or --delta-alignment: the columns are there, null.
    assert plain["benchmark"].null_count() == plain["delta_cosine"].null_count() == plain.height
    key = ["policy", "prompt_id", "sample_id"]
    same = [c for c in CROSS_SAMPLE if c not in ("delta_cosine", "benchmark")]
    assert aligned.sort(key).select(same).equals(plain.sort(key).select(same))


def test_delta_alignment_names_the_missing_model_flag(tmp_path, tiny_pair):
    base, rl = tiny_pair
    prompts = _prompts(tmp_path / "prompts.jsonl", False)
    with pytest.raises(DivscopeError, match=r"--delta-alignment \(all four models\) needs --rast"):
        cross_sample(
            prompts, ModelPair(str(base), str(rl)), [Base()], tmp_path / "r.parquet",
            DecodeConfig(delta_alignment=True), progress=False,
        )  # fmt: skip
    result = CliRunner().invoke(app, [
        "cross-sample", str(prompts), "--base", str(base), "--rl", str(rl), "--policy", "base",
        "--delta-alignment", "--out", str(tmp_path / "r.parquet"),
    ])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "needs --rast-base" in result.output
