"""`curve_text`: the table `divscope cross-sample` prints; `cross_sample`'s controls at
rl-replace's sampling, `early` with a share, and the forced prefix."""

from __future__ import annotations

import math

import polars as pl
import pytest

from divscope.analyses.cross_sample import cross_sampling_curve
from divscope.errors import DivscopeError
from divscope.formatting import curve_text


def results(forward_eps: list[float]) -> pl.DataFrame:
    """Controls and `forward` at budget 2 for each eps, two prompts with two responses each."""
    rows = []
    for prompt in ("a", "b"):
        rows += [(prompt, "base", -1, None, c) for c in (False, False)]
        rows += [(prompt, "rl", -1, None, c) for c in (True, True)]
        for eps in forward_eps:
            rows += [(prompt, "forward", 2, eps, c) for c in (eps > 0.02, True)]
    frame = pl.DataFrame(
        rows, schema=["prompt_id", "policy", "budget", "eps", "correct"], orient="row"
    )
    return frame.with_columns(n_tokens=10, n_switches=1, n_effective=0)


@pytest.mark.parametrize(
    "forward_eps,expected_rows",
    [
        # One setting per policy: no setting column, the table as before.
        (
            [0.05],
            [
                ("policy", "budget", "n", "accuracy"),
                ("base", "inf", "4", "0.0%"),
                ("forward", "2", "4", "100.0%"),
                ("rl", "inf", "4", "100.0%"),
            ],
        ),
        (
            [0.05, 0.01],
            [
                ("policy", "setting", "budget", "n", "accuracy"),
                ("base", "-", "inf", "4", "0.0%"),
                ("forward", "eps=0.01", "2", "4", "50.0%"),  # a: 1/2, b: 1/2
                ("forward", "eps=0.05", "2", "4", "100.0%"),
                ("rl", "-", "inf", "4", "100.0%"),
            ],
        ),
    ],
)
def test_curve_text_names_the_setting_only_when_a_policy_has_several(forward_eps, expected_rows):
    table = curve_text(cross_sampling_curve(results(forward_eps), n_boot=10))
    width = len(expected_rows[0])
    assert [tuple(line.split()[:width]) for line in table.splitlines()] == expected_rows


def test_stop_tokens_are_never_suppressed():
    """A special token that only one tokenizer defines is never emitted, unless it is a stop
    token (an RL twin's own `<|im_end|>` must still end its responses)."""
    from divscope.decoding.inputs import Loaded
    from divscope.models.pair import Pair
    from divscope.params import ModelPair
    from divscope.vocab import Compatibility

    compatibility = Compatibility(
        ("base", "rl"), (50, 50), 50, suppressed=(45, 46), special=(), ordinary=()
    )
    pair = Pair(ModelPair("base", "rl"), {}, {}, compatibility)
    loaded = Loaded(pair, [], {}, stop=[2, 46])
    assert loaded.suppressed == (45,)


# ------------------------------------------------- cross_sample: controls, early share, prefix


@pytest.fixture
def prompts(tiny_prompts):
    return tiny_prompts


def _cross_sample(prompts, tiny_pair, out, policies, resume=False, **grid):
    from divscope.decoding import DecodeConfig
    from divscope.decoding.cross_sample import Grid, cross_sample
    from divscope.params import ModelPair, PartedOutput

    base, rl = tiny_pair
    results = cross_sample(
        prompts, ModelPair(str(base), str(rl)), policies, PartedOutput(out, resume=resume),
        DecodeConfig(max_new_tokens=10, batch_size=4),
        Grid(**{"n": 2, "budgets": (-1,), **grid}), progress=False,
    )  # fmt: skip
    return pl.from_arrow(results)  # a pyarrow Table


def _by_key(frame: pl.DataFrame) -> dict[tuple[str, int], dict]:
    return {(row["prompt_id"], row["sample_id"]): row for row in frame.iter_rows(named=True)}


def test_rl_replace_brings_its_controls_at_its_own_sampling(tmp_path, prompts, tiny_pair):
    results = _cross_sample(
        prompts, tiny_pair, tmp_path / "r.parquet", "base,rl-replace,base-greedy"
    )
    settings = results.group_by("policy", "temperature", "top_p").len().sort(pl.all())
    assert settings.rows() == [
        ("base", 0.6, 0.95, 6), ("base", 1.0, 0.7, 6), ("base-greedy", 0.6, 0.95, 6),
        ("rl", 0.6, 0.95, 6), ("rl-replace", 0.6, 0.95, 6),
    ]  # fmt: skip
    at = {  # the controls decoded at rl-replace's sampling, by their own run's sampling
        t: results.filter((pl.col("policy") == "base") & (pl.col("temperature") == t))
        for t in (0.6, 1.0)
    }
    assert at[0.6]["response_ids"].to_list() != at[1.0]["response_ids"].to_list()


def test_early_share_gives_each_response_the_share_of_its_base_length(tmp_path, prompts, tiny_pair):
    from divscope.decoding.policies import RL, Base, Early

    policies = [Base(), RL(), Early(share=0.5)]
    results = _cross_sample(prompts, tiny_pair, tmp_path / "r.parquet", policies, budgets=(0, 2))
    rows = {p: _by_key(results.filter(pl.col("policy") == p)) for p in ("base", "rl", "early")}
    assert {row["budget"] for row in rows["early"].values()} == {-1}  # runs once, budgets unused
    assert {row["share"] for row in rows["early"].values()} == {0.5}
    written = []
    for key, early in rows["early"].items():
        budget = math.ceil(0.5 * rows["base"][key]["n_tokens"])
        n = min(budget, early["n_tokens"])
        assert early["n_switches"] == n and early["switch_positions"] == list(range(n))
        assert early["response_ids"][:n] == rows["rl"][key]["response_ids"][:n]
        written.append(n)
    assert max(written) > 1


def test_forced_prefix_opens_the_response_and_decoding_continues_after_it(
    tmp_path, prompts, tiny_pair
):
    from divscope.decoding import DecodeConfig, Request, decode
    from divscope.decoding.inputs import load
    from divscope.decoding.policies import Base, Forward
    from divscope.models.pair import open_pair
    from divscope.params import ModelPair, Placement
    from divscope.prompts import read_prompts

    policies = [Base(), Forward(eps=0.1)]
    results = _cross_sample(prompts, tiny_pair, tmp_path / "r.parquet", policies,
                            force_prefix="w7 w8", forced_policies=["forward"])  # fmt: skip
    labels = results.group_by("policy", "force_prefix").len().sort(pl.all(), nulls_last=True)
    assert labels.rows() == [("base", None, 6), ("forward", "w7 w8", 6), ("forward", None, 6)]
    forced = _by_key(results.filter(pl.col("force_prefix").is_not_null()))

    base, rl = tiny_pair
    frame = read_prompts(prompts)
    pair = open_pair(ModelPair(str(base), str(rl), Placement(dtype="float32", device="cpu")))
    loaded = load(frame, "prompts", pair, force_prefix="w7 w8")
    assert loaded.prefix_ids == (11, 12)  # w7, w8 after the four specials
    requests = [
        Request(key, sample, (*ids, 11, 12))
        for key, ids in zip(frame["prompt_id"], loaded.prompt_ids, strict=True)
        for sample in range(2)
    ]
    decoded = decode(loaded.models, requests, Forward(eps=0.1),
                     DecodeConfig(max_new_tokens=10, batch_size=4), vocab=loaded.vocab,
                     eos_ids=loaded.stop, pad_id=loaded.pad_id)  # fmt: skip
    switches = 0
    for request, d in zip(requests, decoded, strict=True):
        row = forced[(request.prompt_id, request.sample_id)]
        assert row["response_ids"] == [11, 12, *d.response_ids]
        assert row["n_tokens"] == 2 + len(d.response_ids)
        assert row["switch_positions"] == [2 + p for p in d.switch_positions]
        assert row["response"].startswith("w7 w8")
        switches += d.n_switches
    assert switches > 0


def test_resume_refuses_another_forced_prefix(tmp_path, prompts, tiny_pair):
    from divscope.decoding.policies import Base

    out = tmp_path / "parts"
    _cross_sample(prompts, tiny_pair, out, [Base()], n=1, force_prefix="w7")
    next(out.glob("part-*.parquet")).unlink()
    with pytest.raises(DivscopeError, match="runs"):
        _cross_sample(prompts, tiny_pair, out, [Base()], n=1, force_prefix="w8", resume=True)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"forced_policies": ["base"]}, "--forced-policies needs --force-prefix"),
        ({"force_prefix": "w7", "forced_policies": ["rl"]}, "'rl' is not a policy of this run"),
        ({"force_prefix": ""}, "--force-prefix is empty"),
        ({"force_prefix": "   "}, "tokenizes to no token"),
        ({"force_prefix": "w7 <eos>"}, r"holds id 2, a stop token"),
    ],
)
def test_bad_forced_prefix(tmp_path, prompts, tiny_pair, kwargs, message):
    from divscope.decoding.policies import Base

    with pytest.raises(DivscopeError, match=message):
        _cross_sample(prompts, tiny_pair, tmp_path / "r.parquet", [Base()], **kwargs)


def test_forward_at_budget_zero_is_decoded_once_for_every_eps_and_stratum(
    tmp_path, prompts, tiny_pair, monkeypatch
):
    """The budget-0 rows of every eps and stratum are one decode per unit, relabelled: the
    same responses as the base control's, each row with its own setting."""
    from divscope.decoding import lockstep
    from divscope.decoding.policies import Base, Forward

    calls = []
    decode_stream = lockstep.decode_stream

    def counted(models, requests, policy, *args, **kwargs):
        calls.append((policy, requests[0].budget))
        return decode_stream(models, requests, policy, *args, **kwargs)

    monkeypatch.setattr(lockstep, "decode_stream", counted)
    policies = [
        Base(),
        *(Forward(eps=eps, stratum=stratum) for eps in (0.1, 0.3) for stratum in (None, "tail")),
    ]
    results = _cross_sample(prompts, tiny_pair, tmp_path / "r.parquet", policies, budgets=(0, 2))
    assert [budget for _, budget in calls].count(0) == 1  # one unit, decoded once
    assert len(calls) == 1 + 1 + 4  # base, the shared budget 0, each forward setting at 2
    key = ["prompt_id", "sample_id"]
    control = results.filter(pl.col("policy") == "base").sort(key)["response_ids"]
    zero = results.filter(pl.col("budget") == 0)
    assert zero.group_by("eps", "stratum").len().height == 4
    for (_, _), rows in zero.group_by("eps", "stratum"):
        assert rows.sort(key)["response_ids"].equals(control)
        assert (rows["n_switches"] == 0).all()


def test_a_unit_is_decoded_with_the_same_requests_whole_sharded_or_resumed(
    tmp_path, tiny_pair, monkeypatch
):
    """`UNIT_PARTS` consecutive parts of one setting are decoded in one call (the decoder
    refills its rows from all of their responses) and written part by part. Whichever process
    decodes a unit, and a resumed run that lost parts of two units, call the decoder with the
    same requests in the same order (so a GPU decodes the same batches), each unit once; the
    results are the whole run's."""
    import json
    import shutil

    from divscope.decoding import DecodeConfig, lockstep
    from divscope.decoding.cross_sample import UNIT_PARTS, Grid, cross_sample
    from divscope.decoding.policies import Base, Forward
    from divscope.io import read_cross_sample
    from divscope.output import part_name
    from divscope.params import ModelPair, PartedOutput

    assert UNIT_PARTS == 4
    prompts = tmp_path / "prompts.jsonl"
    words = [" ".join(f"w{1 + (k + j) % 9}" for j in range(k % 4 + 1)) for k in range(10)]
    rows = [{"prompt_id": f"q{k}", "prompt": text} for k, text in enumerate(words)]
    prompts.write_text("".join(json.dumps(row) + "\n" for row in rows))
    calls = []
    decode_stream = lockstep.decode_stream

    def recorded(models, requests, policy, *args, **kwargs):
        calls.append((policy.name, tuple((r.prompt_id, r.sample_id, r.budget) for r in requests)))
        return decode_stream(models, requests, policy, *args, **kwargs)

    monkeypatch.setattr(lockstep, "decode_stream", recorded)
    base, rl = tiny_pair

    def run(out: PartedOutput) -> None:
        cross_sample(
            prompts, ModelPair(str(base), str(rl)), [Base(), Forward(eps=0.1)], out,
            DecodeConfig(max_new_tokens=10, batch_size=3, seed=2),
            Grid(n=2, budgets=(2,)), part_rows=2, progress=False,
        )  # fmt: skip

    run(PartedOutput(tmp_path / "whole"))
    whole = list(calls)
    # 10 chunks of one prompt (2 responses): units of 4, 4 and 2 chunks, for each setting
    assert sorted(len(requests) for _, requests in whole) == [4, 4, 8, 8, 8, 8]
    assert len(set(whole)) == 6
    expected = read_cross_sample(tmp_path / "whole")
    assert expected.height == 10 * 2 * 2

    calls.clear()
    for shard in ("0/2", "1/2"):  # shards of one run: each with --resume
        run(PartedOutput(tmp_path / "sharded", resume=True, shard=shard))
    assert sorted(calls) == sorted(whole)
    assert read_cross_sample(tmp_path / "sharded").equals(expected)

    calls.clear()
    shutil.copytree(tmp_path / "whole", tmp_path / "resumed")
    for part in (1, 10 + 9):  # base's first unit; forward's last (chunks 8 and 9)
        (tmp_path / "resumed" / part_name(part)).unlink()
    run(PartedOutput(tmp_path / "resumed", resume=True))
    assert sorted(calls) == sorted([whole[0], whole[5]])  # the two units, whole
    assert read_cross_sample(tmp_path / "resumed").equals(expected)


def test_units_of_several_parts_decode_what_units_of_one_do(tmp_path, tiny_pair, monkeypatch):
    """Every path that works per unit (forward at budget 0 decoded once for every eps,
    random-effective taking forward's effective counts, early's base pre-pass, a forced
    opening) gives the same decisions whether a unit holds 4 parts or 1 (on the CPU a row's
    tokens do not depend on the rows beside it; `switch_js` may move in its last bits)."""
    import json

    from divscope.decoding import DecodeConfig
    from divscope.decoding import cross_sample as module
    from divscope.decoding.policies import Base, Early, Forward, RandomEffective
    from divscope.params import ModelPair, PartedOutput

    prompts = tmp_path / "prompts.jsonl"
    words = [" ".join(f"w{1 + (k + j) % 9}" for j in range(k % 3 + 1)) for k in range(9)]
    rows = [{"prompt_id": f"q{k}", "prompt": text} for k, text in enumerate(words)]
    prompts.write_text("".join(json.dumps(row) + "\n" for row in rows))
    base, rl = tiny_pair
    policies = [Base(), Forward(eps=0.1), Forward(eps=0.3), RandomEffective(eps=0.1),
                Early(share=0.25)]  # fmt: skip
    tables = {}
    for parts in (1, 4):
        monkeypatch.setattr(module, "UNIT_PARTS", parts)
        results = module.cross_sample(
            prompts, ModelPair(str(base), str(rl)), policies, PartedOutput(tmp_path / f"u{parts}"),
            DecodeConfig(max_new_tokens=10, batch_size=3, seed=4),
            module.Grid(n=2, budgets=(0, 2), force_prefix="w7", forced_policies=["forward"]),
            part_rows=2, progress=False,
        )  # fmt: skip
        tables[parts] = pl.from_arrow(results).drop("switch_js", "delta_cosine")
    assert tables[1].height == 9 * 2 * (1 + 2 * 2 + 2 + 1 + 2 * 2)  # the forced forward too
    assert tables[4].equals(tables[1])
    assert tables[1].filter(pl.col("n_switches") > 0).height > 20
