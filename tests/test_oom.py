"""The memory guard: sizes, the per-token and per-row arithmetic, the plans and their wiring."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen2Config
from typer.testing import CliRunner

from divscope.cli import app
from divscope.decoding.lockstep import DecodeConfig, planned
from divscope.decoding.speculative import speculative_memory
from divscope.defaults import BATCH_SIZE
from divscope.errors import DivscopeError
from divscope.io import read_trajectories
from divscope.memory_plan import (
    MAX_CHUNK_ROWS,
    SAFETY,
    DeviceBudget,
    MemoryPlan,
    activation_bytes_per_token,
    announce,
    decoding_bytes_per_row,
    format_bytes,
    kv_bytes_per_token,
    parse_memory,
    plan_decoding,
    plan_scoring,
    scoring_bytes_per_row,
    weight_bytes,
)
from divscope.models.loading import load_models
from divscope.models.tokenizers import load_tokenizer
from divscope.scoring.engine import ScoreConfig, score_table
from divscope.scoring.engine import planned as planned_scoring

LAB = Path(__file__).parents[1] / "fixtures" / "lab"
QWEN_7B = Qwen2Config(
    vocab_size=152_064, hidden_size=3_584, intermediate_size=18_944, num_hidden_layers=28,
    num_attention_heads=28, num_key_value_heads=4, tie_word_embeddings=False,
)  # fmt: skip


@pytest.mark.parametrize(
    "text,size",
    [
        ("70GiB", 70 * 2**30),
        ("80GB", 80 * 10**9),
        ("512MiB", 512 * 2**20),
        ("1.5TiB", 3 * 2**39),
        ("4096", 4096),
        (" 2 gib ", 2 * 2**30),
        ("70G", 70 * 2**30),
        ("10kB", 10_000),
        ("3B", 3),
    ],
)
def test_parse_memory(text, size):
    assert parse_memory(text) == size


@pytest.mark.parametrize("text", ["", "abc", "70 GiBs", "-1GB", "0", "0.1B", "1.2.3GB", "nan"])
def test_parse_memory_refuses_what_is_not_a_size(text):
    with pytest.raises(DivscopeError, match="--max-memory"):
        parse_memory(text)


def test_the_arithmetic_of_qwen_7b():
    assert kv_bytes_per_token(QWEN_7B, 2) == 57_344  # 2 x 28 layers x 4 KV heads x 128 x 2 B
    assert format_bytes(kv_bytes_per_token(QWEN_7B, 2)) == "56 KiB"
    # 4d + 3I elements: the MLP outweighs the attention's 5q + 2k.
    assert activation_bytes_per_token(QWEN_7B, 2) == (4 * 3_584 + 3 * 18_944) * 2
    assert scoring_bytes_per_row(151_665) == 32 * 4 * 151_665
    assert decoding_bytes_per_row(151_665) == 24 * 4 * 151_665


def test_weight_bytes_of_a_meta_model():
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(QWEN_7B, dtype=torch.bfloat16)
    assert weight_bytes(model) == 7_615_616_512 * 2
    assert kv_bytes_per_token(model, 2) == 57_344  # a model reads as its config


@pytest.fixture(scope="module")
def lab():
    """The committed lab pair on the CPU (float32), its vocabulary and weights' bytes."""
    models = load_models(
        {"base": str(LAB / "base"), "rl": str(LAB / "rl")},
        dtype="float32", device="cpu", device_map=None,
    )  # fmt: skip
    vocab = len(load_tokenizer(str(LAB / "base")))
    return models, vocab, sum(weight_bytes(m) for m in models.values())


def _scoring(lab, max_memory, **given):
    models, vocab, _ = lab
    values = {"chunk_rows": None, "batch_tokens": None, **given}
    return plan_scoring(models, vocab, max_memory=max_memory, longest=100, **values)


def test_scoring_plan_fits_the_budget(lab):
    models, vocab, weights = lab
    plan = _scoring(lab, weights + 64 * 2**20)
    room = int(SAFETY * 64 * 2**20)
    base = models["base"]
    kept = 2 * base.config.hidden_size * 4  # both models' final hidden states, float32
    forward = activation_bytes_per_token(base, 4) + 100 + kept
    assert plan.batch_tokens * forward <= room < (plan.batch_tokens + 1024) * forward
    chunk = plan.chunk_rows * scoring_bytes_per_row(vocab)
    assert plan.batch_tokens * kept + chunk <= room
    assert plan.batch_tokens * kept + chunk + 64 * scoring_bytes_per_row(vocab) > room
    assert plan.chunk_bytes == chunk and plan.given == frozenset()
    assert plan.format().startswith(
        f"memory plan (cpu: {format_bytes(weights + 64 * 2**20)} limit, "
        f"{format_bytes(weights)} of weights): --chunk-rows {plan.chunk_rows:,} ("
    )


def test_decoding_plan_fits_the_budget(lab):
    models, vocab, weights = lab
    plan = plan_decoding(models, vocab, max_memory=weights + 256 * 2**20, longest=300,
                         prompt=50, batch_size=None)  # fmt: skip
    room = int(SAFETY * 256 * 2**20)
    kv = sum(kv_bytes_per_token(m, 4) for m in models.values())
    per_row = 300 * kv + max(
        50 * (activation_bytes_per_token(models["base"], 4) + 50),
        decoding_bytes_per_row(vocab) + 250 * 25,
    )
    assert plan.batch_size >= 8 and plan.batch_size * per_row <= room
    assert room < (plan.batch_size + 8) * per_row
    assert "--batch-size" in plan.format()


def test_given_values_are_kept(lab):
    models, vocab, weights = lab
    plan = _scoring(lab, weights + 64 * 2**20, chunk_rows=100)
    assert plan.chunk_rows == 100 and plan.given == {"chunk_rows"}
    assert "--chunk-rows 100 (given, " in plan.format()
    assert _scoring(lab, weights + 64 * 2**20, chunk_rows=100, batch_tokens=512) is None
    assert plan_decoding(models, vocab, max_memory=weights + 2**30, longest=300, prompt=50,
                         batch_size=7) is None  # fmt: skip


def test_cpu_without_max_memory_plans_nothing(lab):
    models, vocab, _ = lab
    assert _scoring(lab, None) is None
    assert plan_decoding(models, vocab, max_memory=None, longest=300, prompt=50,
                         batch_size=None) is None  # fmt: skip


def test_too_small_a_budget_is_refused(lab):
    models, vocab, weights = lab
    with pytest.raises(DivscopeError, match=r"--max-memory .* does not fit one sequence of 100"):
        _scoring(lab, weights + 2**10)
    with pytest.raises(DivscopeError, match=r"--max-memory .* leaves no room on cpu"):
        _scoring(lab, weights // 2)
    with pytest.raises(DivscopeError, match=r"--max-memory .* does not fit one sequence of 300"):
        plan_decoding(models, vocab, max_memory=weights + 2**20, longest=300, prompt=50,
                      batch_size=None)  # fmt: skip


def test_the_plan_is_printed_once(capsys):
    plan = MemoryPlan((DeviceBudget("cpu", 5 * 2**30, 2**30, True),), batch_size=12,
                      kv_per_token=1_024, tokens=777)  # fmt: skip
    announce(plan, enabled=False)
    announce(plan)
    announce(plan)
    assert capsys.readouterr().err == (
        "note: memory plan (cpu: 5 GiB limit, 1 GiB of weights): --batch-size 12 "
        "(KV cache 1 KiB/token x 777 tokens x 12 = 9.1 MiB)\n"
    )


def test_decode_config_batch_size_is_planned(lab):
    models, vocab, weights = lab
    prompts = [("a", [5, 6, 7]), ("b", list(range(5, 40)))]
    assert planned(DecodeConfig(), models, prompts, vocab=vocab, progress=False).batch_size == (
        BATCH_SIZE
    )
    config = DecodeConfig(max_new_tokens=20, max_memory=weights + 8 * 2**20)
    common = {"max_memory": config.max_memory, "longest": 55, "prompt": 35, "batch_size": None}
    # the speculative decoder holds a draft's statistics and masked KV slots besides
    expected = plan_decoding(models, vocab, **common, **speculative_memory(2)).batch_size
    assert planned(config, models, prompts, vocab=vocab, progress=False).batch_size == expected
    # one model alone (`generate`, a run of the controls) verifies nothing: one position's
    # statistics at a time, so more rows than with a draft's held for verification
    alone = {"base": models["base"]}
    expected_alone, drafted = (
        plan_decoding(alone, vocab, **common, **speculative_memory(m)).batch_size for m in (1, 2)
    )
    assert expected_alone > drafted
    assert planned(config, alone, prompts, vocab=vocab, progress=False).batch_size == (
        expected_alone
    )
    reference = replace(config, decoder="reference")
    expected_reference = plan_decoding(models, vocab, **common).batch_size
    assert expected_reference > expected
    assert planned(reference, models, prompts, vocab=vocab, progress=False).batch_size == (
        expected_reference
    )
    kept = DecodeConfig(batch_size=3, max_memory=1)
    assert planned(kept, models, prompts, vocab=vocab, progress=False) is kept


def test_scoring_with_a_budget_gives_the_same_table(lab):
    models, vocab, weights = lab
    tokenizer = load_tokenizer(str(LAB / "base"))
    trajectories = read_trajectories(LAB / "trajectories.jsonl").head(16)
    budget = weights + 4 * 2**20  # a few hundred batch tokens and chunk rows
    config = ScoreConfig(max_memory=budget)
    plan = _scoring(lab, budget)
    assert plan.batch_tokens < 16_384 and plan.chunk_rows < 12_000  # not the CPU defaults
    keys = ["prompt_id", "sample_id", "position"]
    tables = [
        score_table(
            trajectories, models["base"], models["rl"], tokenizer, c, vocab=vocab, progress=False
        ).sort(keys)  # fmt: skip
        for c in (ScoreConfig(), config)
    ]
    floats = [name for name, dtype in tables[0].schema.items() if dtype.is_float()]
    others = [name for name in tables[0].columns if name not in floats]
    assert tables[0].select(others).equals(tables[1].select(others))
    # Other batch shapes sum in another order: float32 rounding, 1e-5 of the value's magnitude
    # (at least 1). On AVX-512 kernels a cross-entropy of 3.35 moved by 1.0e-5 (AVX2: less).
    for name in floats:
        one, other = (table[name].to_numpy() for table in tables)
        difference = np.abs(one - other) / np.maximum(np.abs(one), 1.0)
        assert difference.max() <= 1e-5, name


def test_cli_refuses_a_bad_max_memory(tmp_path):
    result = CliRunner().invoke(
        app, ["score", str(tmp_path / "t.jsonl"), "--base", "b", "--rl", "r", "--out",
              str(tmp_path / "o.parquet"), "--max-memory", "lots"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--max-memory 'lots'" in result.output


def test_chunk_rows_are_capped_whatever_room_is_left(lab):
    models, vocab, weights = lab
    assert _scoring(lab, weights + 2**34).chunk_rows == MAX_CHUNK_ROWS  # 16 GiB of room
    trajectories = read_trajectories(LAB / "trajectories.jsonl").head(4)
    cpu = planned_scoring(ScoreConfig(), trajectories, *models.values(), vocab, progress=False)
    assert 24 * 2**20 // (4 * vocab) > MAX_CHUNK_ROWS == cpu.chunk_rows  # the CPU's rule, capped
    given = ScoreConfig(chunk_rows=5000, max_memory=weights + 2**34)
    assert planned_scoring(given, trajectories, *models.values(), vocab, progress=False) == (
        replace(given, batch_tokens=_scoring(lab, given.max_memory, chunk_rows=5000).batch_tokens)
    )
