"""`forward` and `reverse` restricted to one stratum of positions (`--stratify`): each switch
position, re-scored teacher-forced through both models, satisfies its stratum's condition;
the gates switch exactly where their definition says; budgets hold; the state survives the
batch's dropped rows; a seeded rerun is the same."""

from __future__ import annotations

import math
from dataclasses import replace

import polars as pl
import pytest

from divscope.decoding import DecodeConfig
from divscope.defaults import RERANK_TOP_K, TAIL_P
from divscope.scoring import ScoreConfig, StatsConfig, score_table
from tests.decoding.helpers import assert_same_decodes, tiny_decode, tiny_requests
from tests.tinymodels import make_tokenizer

CONFIG = DecodeConfig(
    StatsConfig(temperature=1.0, top_p=0.7), max_new_tokens=16, batch_size=5, seed=3
)
EPS = 0.3  # near the median JS of the pair below, so both sides occur
MATCH_TOL = 0.3
CLOSE = 1e-4  # values this close to a threshold are too close to call across float32 paths


@pytest.fixture(scope="module")
def models(twin_pair):
    return twin_pair


def _requests(budgets=(-1,), samples=4):
    return tiny_requests(budgets, samples)


def _run(models, policy, requests, config=CONFIG, **params):
    return tiny_decode(models, policy, requests, config, **params)


def _stratum(stratum):
    return {"stratum": stratum, "match_tol": MATCH_TOL if stratum == "entropy-matched" else None}


def _rescored(models, policy, requests, decoded):
    """Per response, its positions re-scored teacher-forced, as columns: `js`, `rank` (the
    intervener's top-1 under the primary), `p_emitted` (the emitted token's probability under
    the primary) and `entropy` (the base model's), full distributions at T=1 but `js`."""
    primary, intervener = ("base", "rl") if policy == "forward" else ("rl", "base")
    trajectories = pl.DataFrame(
        {
            "prompt_id": [f"{r.prompt_id}/{r.budget}" for r in requests],
            "sample_id": pl.Series([r.sample_id for r in requests], dtype=pl.Int32),
            "prompt_ids": [list(r.prompt_ids) for r in requests],
            "response_ids": [d.response_ids for d in decoded],
        }
    )
    # Scored with the primary as "base": the rank and logp columns are then the primary's.
    table = score_table(
        trajectories, models[primary], models[intervener], make_tokenizer(),
        ScoreConfig(stats=CONFIG.sampling), progress=False,
    )  # fmt: skip
    entropy = "entropy_base" if primary == "base" else "entropy_rl"
    out = []
    for request in requests:
        key = (pl.col("prompt_id") == f"{request.prompt_id}/{request.budget}") & (
            pl.col("sample_id") == request.sample_id
        )
        rows = table.filter(key).sort("position")
        out.append(
            {
                "js": rows["js"].to_list(),
                "rank": rows["rl_top1_rank_in_base"].to_list(),
                "p_emitted": rows["logp_base"].exp().to_list(),
                "entropy": rows[entropy].to_list(),
            }
        )
    return out


@pytest.mark.parametrize("policy", ["forward", "reverse"])
@pytest.mark.parametrize("stratum", ["rerank", "tail", "entropy-matched"])
def test_every_switch_position_satisfies_its_stratum(models, policy, stratum):
    budgets = (2, -1)
    requests = _requests(budgets)
    decoded = _run(models, policy, requests, eps=EPS, **_stratum(stratum))
    scored = _rescored(models, policy, requests, decoded)
    checked = 0
    for request, d, s in zip(requests, decoded, scored, strict=True):
        assert len(s["js"]) == len(d.response_ids)
        assert request.budget < 0 or d.n_switches <= request.budget
        assert len(d.switch_js) == d.n_switches
        for p, online in zip(d.switch_positions, d.switch_js, strict=True):
            assert online == pytest.approx(s["js"][p], abs=1e-5)  # the prefix is the emitted one
            if stratum == "rerank":
                assert s["js"][p] > EPS - CLOSE and s["rank"][p] <= RERANK_TOP_K
            elif stratum == "tail":
                assert s["js"][p] > EPS - CLOSE and s["p_emitted"][p] < TAIL_P + CLOSE
            else:
                assert s["js"][p] <= EPS + CLOSE
                assert any(
                    s["js"][q] > EPS - CLOSE
                    and abs(s["entropy"][q] - s["entropy"][p]) <= MATCH_TOL + CLOSE
                    for q in range(p)
                )
            checked += 1
    assert checked >= 5


def _expected(stratum, s, budget):
    """The switch positions a gate's definition gives on re-scored values, and whether every
    comparison was clear of its threshold (else the rest is not checked)."""
    switches, pending = [], None
    for t, js in enumerate(s["js"]):
        if 0 <= budget <= len(switches):
            break
        values = [abs(js - EPS)]
        divergent = js > EPS
        if stratum == "rerank":
            want = divergent and s["rank"][t] <= RERANK_TOP_K
        else:  # entropy-matched
            gap = abs(s["entropy"][t] - pending) if pending is not None else math.inf
            values.append(abs(gap - MATCH_TOL))
            want = not divergent and gap <= MATCH_TOL
            if divergent and pending is None:
                pending = s["entropy"][t]
            if want:
                pending = None
        if min(values) < CLOSE:
            return switches, False
        if want:
            switches.append(t)
    return switches, True


@pytest.mark.parametrize("policy", ["forward", "reverse"])
@pytest.mark.parametrize("stratum", ["rerank", "entropy-matched"])
def test_the_gate_switches_exactly_where_its_definition_says(models, policy, stratum):
    requests = _requests((1, -1))
    decoded = _run(models, policy, requests, eps=EPS, **_stratum(stratum))
    scored = _rescored(models, policy, requests, decoded)
    complete = 0
    for request, d, s in zip(requests, decoded, scored, strict=True):
        expected, clear = _expected(stratum, s, request.budget)
        switches = d.switch_positions
        assert switches[: len(expected)] == expected
        if clear:
            assert switches == expected
            complete += 1
    assert complete >= len(requests) // 2


def test_budget_zero_is_the_primary_alone_in_every_stratum(models):
    base = _run(models, "base", _requests())
    for stratum in ("rerank", "tail", "entropy-matched"):
        zero = _run(models, "forward", _requests((0,)), eps=EPS, **_stratum(stratum))
        assert [d.response_ids for d in zero] == [d.response_ids for d in base]
        for d in zero:
            assert d.n_switches == 0 and d.switch_js == []


@pytest.mark.parametrize("stratum", ["rerank", "tail", "entropy-matched"])
def test_strata_do_not_depend_on_batch_size_or_dropped_rows(models, stratum):
    requests = _requests((2, -1), samples=2)
    reference = _run(models, "forward", requests, eps=EPS, **_stratum(stratum))
    assert _run(models, "forward", requests, eps=EPS, **_stratum(stratum)) == reference  # rerun
    for batch_size, drop in ((1, True), (64, True), (3, False)):
        config = replace(CONFIG, batch_size=batch_size, drop_finished=drop)
        decoded = _run(models, "forward", requests, config, eps=EPS, **_stratum(stratum))
        assert_same_decodes(decoded, reference, (batch_size, drop))
