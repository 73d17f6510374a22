"""The lockstep decoder: KV-cache exactness, the coupled-randomness invariants, batch-size
independence, the switch bookkeeping, and a cross-check of every policy gate against the
teacher-forced scoring engine; the decoder's tests run on both decoders (`DecodeConfig.decoder`:
the speculative one and the step-by-step reference)."""

from __future__ import annotations

from dataclasses import replace

import polars as pl
import pytest
import torch

from divscope.decoding import DecodeConfig, Lockstep, Request, build_policy, decode
from divscope.errors import DivscopeError
from divscope.scoring import ScoreConfig, StatsConfig, score_table
from tests.decoding.helpers import (
    EOS,
    VOCAB,
    assert_same_decodes,
    tiny_decode,
    tiny_requests,
)
from tests.tinymodels import make_model, make_tokenizer

CONFIG = DecodeConfig(
    StatsConfig(temperature=1.0, top_p=0.7), max_new_tokens=12, batch_size=5, seed=3
)


@pytest.fixture(scope="module")
def models():
    return {
        "base": make_model("llama", vocab_size=48, seed=0),
        "rl": make_model("llama", vocab_size=48, seed=1),
        "rast_base": make_model("llama", vocab_size=48, seed=2),
        "rast_rl": make_model("llama", vocab_size=48, seed=3),
    }


@pytest.fixture(params=("reference", "speculative"))
def decoder(request) -> str:
    """Each decoder (`DecodeConfig.decoder`): the invariants hold on both."""
    return request.param


@pytest.fixture
def run(models, decoder):
    """`_run` with the models and `decoder`."""

    def run(policy, requests, config=CONFIG, **params):
        return _run(models, policy, requests, replace(config, decoder=decoder), **params)

    return run


def _requests(budgets=(-1,), samples=3):
    return tiny_requests(budgets, samples)


def _run(models, policy, requests, config=CONFIG, **params):
    return tiny_decode(models, policy, requests, config, **params)


def _tokens(decoded):
    return [d.response_ids for d in decoded]


def test_kv_cached_step_logits_equal_a_full_forward_float64(models):
    doubles = {name: models[name].double() for name in ("base", "rl")}
    try:
        prompts = [[5, 6, 7], [8], [9, 10, 11, 12, 13, 14]]
        stepper = Lockstep(doubles, prompts, VOCAB, pad_id=0)
        fed = torch.tensor([[20, 21, 22, 23], [24, 25, 26, 27], [28, 29, 30, 31]])
        for t in range(fed.shape[1] + 1):
            for name, model in doubles.items():
                for i, prompt in enumerate(prompts):
                    prefix = torch.tensor([prompt + fed[i, :t].tolist()])
                    with torch.inference_mode():
                        expected = model(input_ids=prefix).logits[0, -1, :VOCAB]
                    got = stepper.logits[name][i]
                    assert got.dtype == torch.float64
                    torch.testing.assert_close(got, expected, rtol=0, atol=1e-10)
            if t < fed.shape[1]:
                stepper.advance(fed[:, t])
    finally:
        for name in ("base", "rl"):
            models[name].float()


def test_budget_zero_forward_reproduces_base_sampling(run):
    base = run("base", _requests())
    forward = run("forward", _requests(budgets=(0,)), eps=-1.0)
    assert _tokens(forward) == _tokens(base)
    assert all(d.n_switches == 0 for d in forward)


def test_unlimited_forward_with_negative_eps_reproduces_rl_sampling(run):
    rl = run("rl", _requests())
    forward = run("forward", _requests(budgets=(-1,)), eps=-1.0)
    assert _tokens(forward) == _tokens(rl)
    assert all(d.n_switches == len(d.response_ids) for d in forward)
    assert _tokens(rl) != _tokens(run("base", _requests()))


def test_reverse_is_the_mirror_of_forward(run):
    rl = run("rl", _requests())
    base = run("base", _requests())
    assert _tokens(run("reverse", _requests(budgets=(0,)), eps=-1.0)) == _tokens(rl)
    assert _tokens(run("reverse", _requests(budgets=(-1,)), eps=-1.0)) == _tokens(base)


@pytest.mark.parametrize(
    "policy,params,same_as",
    [
        ("random", {"rate": 0.0}, "base"),
        ("random", {"rate": 1.0}, "rl"),
        ("mixture", {"alpha": 0.0}, "base"),
        ("mixture", {"alpha": 1.0}, "rl"),
        ("rast", {"lam": 0.0}, "base"),
        ("gated", {"tau": 1e9, "lam": 1.0}, "base"),
        ("gated", {"tau": -1.0, "lam": 0.0}, "rl"),
    ],
)
def test_degenerate_parameters_reproduce_a_single_model(run, policy, params, same_as):
    expected = run(same_as, _requests())
    assert _tokens(run(policy, _requests(), **params)) == _tokens(expected)


def test_rast_with_weight_steers_away_from_base(run):
    base = run("base", _requests())
    rast = run("rast", _requests(), lam=2.0)
    assert _tokens(rast) != _tokens(base)
    assert all(d.n_switches == len(d.response_ids) for d in rast)
    assert any(d.n_effective > 0 for d in rast)


def test_mixture_chooses_per_response(run):
    mixed = run("mixture", _requests(samples=8), alpha=0.5)
    chose_rl = {d.n_switches == len(d.response_ids) for d in mixed}
    assert chose_rl == {True, False}
    assert all(d.n_switches in (0, len(d.response_ids)) for d in mixed)


@pytest.mark.parametrize("policy,params", [("forward", {"eps": 0.1}), ("random", {"rate": 0.3})])
def test_results_do_not_depend_on_batch_size_or_order(run, policy, params):
    requests = _requests(budgets=(0, 2, -1))
    reference = run(policy, requests, **params)
    for batch_size in (1, 4, 64):
        config = DecodeConfig(**{**CONFIG.__dict__, "batch_size": batch_size})
        assert_same_decodes(run(policy, requests, config, **params), reference)
    reversed_run = run(policy, requests[::-1], **params)
    assert_same_decodes(reversed_run[::-1], reference)


def test_switch_bookkeeping(run):
    budgets = (0, 1, 2, 4, -1)
    decoded = run("forward", _requests(budgets=budgets), eps=0.05)
    for request, d in zip(_requests(budgets=budgets), decoded, strict=True):
        assert d.n_switches == len(d.switch_positions)
        assert request.budget < 0 or d.n_switches <= request.budget
        assert d.n_effective <= d.n_switches
        assert all(0 <= p < len(d.response_ids) for p in d.switch_positions)
        assert d.finished == (d.response_ids[-1] in EOS)
        assert d.finished or len(d.response_ids) == CONFIG.max_new_tokens
    assert any(d.n_effective < d.n_switches for d in decoded)
    assert any(d.n_effective > 0 for d in decoded)


def _scored(models, requests, decoded, config=CONFIG) -> pl.DataFrame:
    """The scoring engine's token table of the emitted sequences."""
    trajectories = pl.DataFrame(
        {
            "prompt_id": [f"{r.prompt_id}/{r.budget}" for r in requests],
            "sample_id": pl.Series([r.sample_id for r in requests], dtype=pl.Int32),
            "prompt_ids": [list(r.prompt_ids) for r in requests],
            "response_ids": [d.response_ids for d in decoded],
        }
    )
    config = ScoreConfig(stats=config.sampling)
    return score_table(
        trajectories, models["base"], models["rl"], make_tokenizer(), config, progress=False
    )


def _rows(table, request):
    key = (pl.col("prompt_id") == f"{request.prompt_id}/{request.budget}") & (
        pl.col("sample_id") == request.sample_id
    )
    return table.filter(key).sort("position")


@pytest.mark.parametrize("temperature,top_p,eps", [(1.0, 0.7, 0.22), (0.7, 0.9, 0.08)])
def test_forward_switches_exactly_where_the_scoring_engine_sees_js_above_eps(
    models, run, temperature, top_p, eps
):
    """eps near the median JS of these models at each setting, so both cases occur."""
    sampling = StatsConfig(temperature=temperature, top_p=top_p)
    config = DecodeConfig(sampling, max_new_tokens=12, batch_size=7)
    tolerance = 1e-5
    requests = _requests(budgets=(3, -1))
    decoded = run("forward", requests, config, eps=eps)
    table = _scored(models, requests, decoded, config)
    checked_switches = checked_others = 0
    for request, d in zip(requests, decoded, strict=True):
        js = _rows(table, request)["js"].to_list()
        assert len(js) == len(d.response_ids)
        exhausted = request.budget >= 0 and d.n_switches == request.budget
        horizon = d.switch_positions[-1] if exhausted else len(js) - 1
        for position in range(horizon + 1):
            if position in d.switch_positions:
                assert js[position] > eps - tolerance
                checked_switches += 1
            else:
                assert js[position] <= eps + tolerance
                checked_others += 1
    assert checked_switches > 10 and checked_others > 10


def test_rl_replace_emits_the_rl_argmax_at_every_disagreement(models, run):
    requests = _requests()
    decoded = run("rl-replace", requests)
    table = _scored(models, requests, decoded)
    disagreements = 0
    for request, d in zip(requests, decoded, strict=True):
        rows = _rows(table, request)
        disagree = (rows["top1_base"] != rows["top1_rl"]).to_list()
        assert d.switch_positions == [p for p, flag in enumerate(disagree) if flag]
        for position in d.switch_positions:
            assert d.response_ids[position] == rows["top1_rl"][position]
        disagreements += sum(disagree)
    assert disagreements > 10


@pytest.mark.parametrize("policy,column", [("gated", "ce_base_rl"), ("entropy", "entropy_base")])
def test_dual_gate_matches_its_definition_on_scored_sequences(models, run, policy, column):
    requests = _requests()
    window, lam = 3, 1.05
    scores = _scored(models, requests, run("base", requests))[column]
    tau = float(scores.quantile(0.5))
    decoded = run(policy, requests, tau=tau, lam=lam, window=window)
    table = _scored(models, requests, decoded)
    for request, d in zip(requests, decoded, strict=True):
        s = _rows(table, request)[column].to_list()
        for t, value in enumerate(s):
            previous = s[max(0, t - window) : t]
            threshold = max(tau, lam * sum(previous) / len(previous) if previous else tau)
            if abs(value - threshold) < 1e-4:
                continue  # too close to call across float32 paths
            assert (t in d.switch_positions) == (value > threshold)


def test_prompt_plus_length_beyond_context_is_refused(models):
    config = DecodeConfig(max_new_tokens=60)
    with pytest.raises(DivscopeError, match="context of 64.*--max-new-tokens"):
        _run(models, "base", _requests(), config)


def test_missing_model_is_refused(models):
    with pytest.raises(DivscopeError, match="needs the model"):
        decode({"base": models["base"]}, _requests(), build_policy("forward", eps=0.1),
               CONFIG, vocab=VOCAB, eos_ids=EOS)  # fmt: skip


@pytest.mark.parametrize(
    "policy,params,batch_sizes",
    [
        ("forward", {"eps": 0.05}, (1, 7, 64)),
        ("gated", {"tau": 0.5, "lam": 1.2}, (7, 64)),  # per-row state is dropped with the row
        ("mixture", {"alpha": 0.5}, (7, 64)),
    ],
)
def test_dropping_finished_rows_changes_no_token(models, decoder, policy, params, batch_sizes):
    """Rows that finish leave the batch and the KV caches; every other row's tokens, switches
    and finish flags are those of a run that keeps all rows to the end, at batch sizes 1, 7
    and 64 (two stop tokens, so that rows finish at many different steps)."""
    stops = [2, 3]
    requests = [
        Request(f"p{i}", sample, tuple(range(7 + i % 5, 12 + i % 7)), budget=4)
        for i in range(8)
        for sample in range(3)
    ]
    policy_object = build_policy(policy, **params)
    runs = {}
    for batch_size in batch_sizes:
        for drop in (True, False):
            config = DecodeConfig(
                CONFIG.sampling, max_new_tokens=30, batch_size=batch_size, drop_finished=drop,
                decoder=decoder,
            )  # fmt: skip
            runs[batch_size, drop] = decode(
                models, requests, policy_object, config, vocab=VOCAB, eos_ids=stops
            )
    reference = runs[64, False]
    lengths = {len(d.response_ids) for d in reference}
    assert len(lengths) > 5 and any(not d.finished for d in reference)  # rows end at many steps
    assert any(d.finished for d in reference)
    for key, decoded in runs.items():
        assert_same_decodes(decoded, reference, key)


def test_default_length_is_capped_by_each_prompt_and_the_context(run):
    """No --max-new-tokens: 8,000 capped, prompt by prompt, by the context (64 tokens)."""
    config = DecodeConfig(CONFIG.sampling, batch_size=4, seed=3)
    decoded = run("forward", _requests(), config, eps=0.1)
    for request, d in zip(_requests(), decoded, strict=True):
        room = 64 - len(request.prompt_ids)
        assert len(d.response_ids) <= room
        assert d.finished or len(d.response_ids) == room


def test_suppressed_tokens_are_never_emitted(run):
    """Ids masked out (special tokens the tokenizers do not share) are never drawn."""
    common = [t for d in run("forward", _requests(), eps=0.1) for t in d.response_ids]
    banned = sorted({t for t in common if t not in EOS})[:5]
    decoded = run("forward", _requests(), suppressed=banned, eps=0.1)
    assert not {t for d in decoded for t in d.response_ids} & set(banned)


def test_a_model_whose_logits_the_output_head_cannot_reproduce_is_refused(models):
    """The decoder computes logits from the final hidden states with `OutputHead`, as the
    scorer does; a causal-LM class that transforms its logits otherwise is refused."""
    doubled = make_model("llama", vocab_size=48, seed=1)
    forward = doubled.forward

    def twice(*args, **kwargs):
        out = forward(*args, **kwargs)
        out.logits = 2 * out.logits
        return out

    doubled.forward = twice
    with pytest.raises(DivscopeError, match="the rl model .* transforms its logits"):
        _run({"base": models["base"], "rl": doubled}, "forward", _requests(), eps=0.1)
