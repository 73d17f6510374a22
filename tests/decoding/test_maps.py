"""Retrospective maps (`--map retrospective`): which trajectory a response reads, the errors,
and the decoder intervening at exactly the precomputed positions while its prefix is the
reference trajectory's."""

from __future__ import annotations

import polars as pl
import pytest

from divscope.decoding import DecodeConfig, Request, build_policy, decode
from divscope.decoding.maps import DivergenceMap, read_map
from divscope.errors import DivscopeError
from divscope.scoring import ScoreConfig, StatsConfig, score_table
from tests.decoding.helpers import EOS, VOCAB, tiny_decode, tiny_requests
from tests.tinymodels import make_tokenizer

CONFIG = DecodeConfig(
    StatsConfig(temperature=1.0, top_p=0.7), max_new_tokens=16, batch_size=5, seed=4
)
EPS = 0.3


@pytest.fixture(scope="module")
def models(twin_pair):
    return twin_pair


def _table(rows):
    return pl.DataFrame(rows, schema=["prompt_id", "sample_id", "position", "js"], orient="row")


def test_a_response_reads_its_own_trajectory_else_sample_id_mod_k():
    table = _table(
        [("a", 0, 0, 0.5), ("a", 0, 1, 0.0), ("a", 2, 0, 0.0), ("a", 2, 3, 0.9), ("b", 5, 1, 0.2)]
    )
    divergence_map = DivergenceMap(table, source="t.parquet")
    assert [divergence_map.reference("a", s) for s in range(5)] == [0, 2, 2, 2, 0]
    assert divergence_map.steps("a", 0, eps=0.1) == (0,)
    assert divergence_map.steps("a", 3, eps=0.1) == (3,)  # 3 mod 2 = 1: the second, sample 2
    assert divergence_map.steps("a", 0, eps=-1.0) == (0, 1)
    assert divergence_map.steps("b", 7, eps=0.1) == (1,)
    assert divergence_map.steps("b", 7, eps=0.2) == ()
    with pytest.raises(
        DivscopeError, match=r"--map-table t.parquet: no trajectory of prompt_id 'z'"
    ):
        divergence_map.check_prompts(["a", "z"])
    with pytest.raises(DivscopeError, match="missing column"):
        DivergenceMap(table.drop("js"), source="t.parquet")


def _scored(models, requests, decoded) -> pl.DataFrame:
    trajectories = pl.DataFrame(
        {
            "prompt_id": [r.prompt_id for r in requests],
            "sample_id": pl.Series([r.sample_id for r in requests], dtype=pl.Int32),
            "prompt_ids": [list(r.prompt_ids) for r in requests],
            "response_ids": [d.response_ids for d in decoded],
        }
    )
    return score_table(
        trajectories, models["base"], models["rl"], make_tokenizer(),
        ScoreConfig(stats=CONFIG.sampling), progress=False,
    )  # fmt: skip


@pytest.mark.parametrize("budget", [-1, 2])
def test_retrospective_forward_intervenes_at_the_map_while_the_prefix_matches(
    tmp_path, models, budget
):
    """The map of the `rl` control's own responses (same seed): forward switches at exactly
    the map's positions as long as its prefix is the RL response (a switch there emits the RL
    model's token: the prefix still matches), and the JS it records there is the map's."""
    requests = tiny_requests((budget,), samples=4)
    rl = tiny_decode(models, "rl", requests, CONFIG)
    _scored(models, requests, rl).write_parquet(tmp_path / "rl-tokens.parquet")
    divergence_map = read_map(tmp_path / "rl-tokens.parquet", eps=EPS)
    mapped = [
        Request(r.prompt_id, r.sample_id, r.prompt_ids, budget,
                divergence_map.steps(r.prompt_id, r.sample_id, eps=EPS))
        for r in requests
    ]  # fmt: skip
    policy = build_policy("forward", eps=EPS, map_table="rl-tokens.parquet")
    decoded = decode(models, mapped, policy, CONFIG, vocab=VOCAB, eos_ids=EOS)
    table = pl.read_parquet(tmp_path / "rl-tokens.parquet")
    diverged = switched = 0
    for request, d, reference in zip(mapped, decoded, rl, strict=True):
        ours, theirs = d.response_ids, reference.response_ids
        same = next(
            (t for t, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b),
            min(len(ours), len(theirs)),
        )  # the first position whose token differs; the positions before it match
        expected = [p for p in request.map_steps if p <= same]
        if budget >= 0:
            expected = expected[:budget]
        assert [p for p in d.switch_positions if p <= same] == expected
        js = table.filter(
            (pl.col("prompt_id") == request.prompt_id) & (pl.col("sample_id") == request.sample_id)
        ).sort("position")["js"]
        for p, online in zip(d.switch_positions, d.switch_js, strict=True):
            if p <= same:
                assert online == pytest.approx(js[p], abs=1e-5)
        diverged += same < len(theirs)
        switched += len(expected)
    assert switched >= 10 and diverged >= 3


def test_retrospective_policy_needs_the_map_steps(models):
    policy = build_policy("forward", eps=EPS, map_table="t.parquet")
    with pytest.raises(DivscopeError, match="prompt_id='a', sample_id=0 has no map steps"):
        decode(models, [Request("a", 0, (5, 6))], policy, CONFIG, vocab=VOCAB, eos_ids=EOS)
