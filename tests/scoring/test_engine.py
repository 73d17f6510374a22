"""The teacher-forced engine against the float64 reference on tiny real models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
import torch

from divscope.errors import DivscopeError
from divscope.schema import TOKEN_TABLE
from divscope.scoring import ScoreConfig, StatsConfig, score_trajectories
from tests.scoring.reference import (
    DISCRETE_COLUMNS,
    FLOAT_COLUMNS,
    compare,
    reference_row,
    rl_twin,
    tie_rows,
)
from tests.tinymodels import make_model, make_tokenizer

VOCAB = 301  # tokenizer size: not a multiple of the window (64) or the chunk rows (7)
HEAD_ROWS = 320  # padded output head; rows 301..319 must be dropped
CONTEXT = 256  # the models' context length
# Identical head rows in both models: exact probability ties everywhere. The rows are 64
# apart because BLAS matrix-vector kernels may round output rows in different lanes differently.
TIED = (5, 69, 261)


@pytest.fixture(scope="module")
def tokenizer():
    return make_tokenizer([f"t{i}" for i in range(VOCAB)], specials=False)


@pytest.fixture(scope="module", params=["qwen2", "llama"])
def pair(request):
    base = make_model(request.param, HEAD_ROWS, seed=0, max_positions=CONTEXT, logit_scale=12.0)
    rl = rl_twin(base, seed=1)
    for model in (base, rl):
        tie_rows(model, TIED)
    return base, rl


def _trajectories(n: int, seed: int, max_prompt: int = 8, max_response: int = 24) -> pl.DataFrame:
    g = torch.Generator().manual_seed(seed)

    def ids(lo: int, hi: int) -> list[int]:
        length = int(torch.randint(lo, hi + 1, (1,), generator=g))
        return torch.randint(0, VOCAB, (length,), generator=g).tolist()

    return pl.DataFrame(
        {
            "prompt_id": [f"p{i // 2}" for i in range(n)],
            "sample_id": [i % 2 for i in range(n)],
            "prompt_ids": [ids(1, max_prompt) for _ in range(n)],
            "response_ids": [ids(1, max_response) for _ in range(n)],
            "correct": [bool(i % 3) if i % 4 else None for i in range(n)],
        }
    )


def _score(trajectories, base, rl, tokenizer, **config) -> tuple[pl.DataFrame, object]:
    frames: list[pa.Table] = []  # the sink gets Arrow batches
    stats = StatsConfig(
        **{k: config.pop(k) for k in ("top_p", "temperature", "window") if k in config}
    )
    summary = score_trajectories(
        trajectories,
        base,
        rl,
        tokenizer,
        ScoreConfig(stats, **config),
        sink=frames.append,
        progress=False,
    )
    table = pl.from_arrow(pa.concat_tables(frames)) if frames else pl.DataFrame(schema=TOKEN_TABLE)
    return table.sort("prompt_id", "sample_id", "position"), summary


def _reference_logits(model, prompt: list[int], response: list[int]) -> torch.Tensor:
    """The model's own full forward, unbatched: row t predicts response token t."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt + response])).logits[0, :, :VOCAB]  # [P+T, V]
    return logits[len(prompt) - 1 : len(prompt) - 1 + len(response)]  # [T, V]


def _compare_with_reference(
    table: pl.DataFrame, trajectories: pl.DataFrame, base, rl, top_p: float, temperature: float
) -> tuple[int, int]:
    """Every row of `table` against the float64 reference (asserting on each column).

    Returns:
        Discrete values skipped as near-ties, and discrete values compared.
    """
    skipped = compared = 0
    for traj in trajectories.iter_rows(named=True):
        rows = table.filter(
            (pl.col("prompt_id") == traj["prompt_id"]) & (pl.col("sample_id") == traj["sample_id"])
        ).to_dicts()
        logits_b = _reference_logits(base, traj["prompt_ids"], traj["response_ids"])
        logits_r = _reference_logits(rl, traj["prompt_ids"], traj["response_ids"])
        for t, (token, row) in enumerate(zip(traj["response_ids"], rows, strict=True)):
            want, tie = reference_row(logits_b[t], logits_r[t], token, top_p, temperature)
            skipped += compare(row, want, tie, where=f"{traj['prompt_id']}/{traj['sample_id']}@{t}")
            compared += len(DISCRETE_COLUMNS)
    return skipped, compared


@pytest.mark.parametrize(
    "top_p,temperature,batch_tokens,chunk_rows",
    [(0.7, 1.0, 64, 7), (0.9, 0.7, 1, 64)],
)
def test_every_column_matches_float64_reference(
    pair, tokenizer, top_p, temperature, batch_tokens, chunk_rows
):
    base, rl = pair
    trajectories = _trajectories(8, seed=0)
    table, summary = _score(
        trajectories,
        base,
        rl,
        tokenizer,
        top_p=top_p,
        temperature=temperature,
        batch_tokens=batch_tokens,
        chunk_rows=chunk_rows,
        window=64,
    )
    assert table.height == summary.tokens == trajectories["response_ids"].list.len().sum()
    # Both paths ran: rows within the 64-wide window and rows redone with the full sort.
    assert 0 < summary.fallback_rows < summary.tokens
    skipped, compared = _compare_with_reference(table, trajectories, base, rl, top_p, temperature)
    assert skipped <= 0.05 * compared


def test_table_layout_keys_and_correct(pair, tokenizer):
    base, rl = pair
    trajectories = _trajectories(5, seed=1)
    table, _ = _score(trajectories, base, rl, tokenizer, batch_tokens=40)
    assert table.schema == pl.Schema(TOKEN_TABLE)
    for traj in trajectories.iter_rows(named=True):
        rows = table.filter(
            (pl.col("prompt_id") == traj["prompt_id"]) & (pl.col("sample_id") == traj["sample_id"])
        )
        n = len(traj["response_ids"])
        assert rows["position"].to_list() == list(range(n))
        assert rows["n_tokens"].unique().to_list() == [n]
        assert np.allclose(rows["rel_position"].to_numpy(), np.arange(n) / n)
        assert rows["token_id"].to_list() == traj["response_ids"]
        assert rows["token"].to_list() == [f"t{i}" for i in traj["response_ids"]]
        assert rows["correct"].unique().to_list() == [traj["correct"]]
    without = _score(trajectories.drop("correct"), base, rl, tokenizer)[0]
    assert without["correct"].null_count() == without.height


def test_source_is_the_model_column_else_the_configs(pair, tokenizer):
    base, rl = pair

    def sources(models: list[str | None], source: str | None = None) -> list[str | None]:
        trajectories = _trajectories(5, seed=1).with_columns(pl.Series("model", models))
        table, _ = _score(trajectories, base, rl, tokenizer, source=source, batch_tokens=40)
        by_trajectory = table.group_by("prompt_id", "sample_id", maintain_order=True)
        return by_trajectory.agg(pl.col("source").unique())["source"].explode().to_list()

    two = ["base", None, "rl", None, "base"]
    assert sources(two) == two
    assert sources(["rl", None, "rl", None, None], source="rl") == ["rl"] * 5
    with pytest.raises(DivscopeError, match=r"'model' says \['base', 'rl'\], but --source is 'rl'"):
        sources(two, source="rl")
    # The source is a column beside the scores: without it, every other column is the same.
    trajectories = _trajectories(5, seed=1)
    plain, _ = _score(trajectories, base, rl, tokenizer, batch_tokens=40)
    named, _ = _score(trajectories, base, rl, tokenizer, source="sft", batch_tokens=40)
    assert plain["source"].null_count() == plain.height and set(named["source"]) == {"sft"}
    assert plain.drop("source").equals(named.drop("source"))


def test_batching_does_not_change_results(pair, tokenizer):
    """One sequence per batch and chunk vs packed batches of mixed lengths."""
    base, rl = pair
    trajectories = _trajectories(10, seed=2, max_response=40)
    alone, _ = _score(trajectories, base, rl, tokenizer, batch_tokens=1, chunk_rows=1)
    packed, summary = _score(trajectories, base, rl, tokenizer, batch_tokens=4096, chunk_rows=50)
    assert summary.sequences == 10
    for name in FLOAT_COLUMNS:
        assert np.allclose(alone[name], packed[name], atol=1e-5, rtol=0), name
    assert alone["token_id"].to_list() == packed["token_id"].to_list()
    # Discrete columns are equal except at near-ties, which the reference names.
    differ = pl.any_horizontal(pl.col(c) != packed[c] for c in DISCRETE_COLUMNS)
    for row in alone.with_row_index().filter(differ).iter_rows(named=True):
        traj = trajectories.filter(
            (pl.col("prompt_id") == row["prompt_id"]) & (pl.col("sample_id") == row["sample_id"])
        ).row(0, named=True)
        t = row["position"]
        logits_b = _reference_logits(base, traj["prompt_ids"], traj["response_ids"])[t]
        logits_r = _reference_logits(rl, traj["prompt_ids"], traj["response_ids"])[t]
        _, tie = reference_row(logits_b, logits_r, None, 0.7, 1.0)
        for name in DISCRETE_COLUMNS:
            assert row[name] == packed[row["index"], name] or tie[name], (name, row)


def test_divergence_is_attributed_to_the_position_after_the_trigger(tokenizer):
    """The twins differ only in the input embedding of TRIGGER, and attention is cut off
    (o_proj = 0), so their next-token distributions differ exactly where the *input* token
    is TRIGGER: at response position t iff token t − 1 (or the prompt's last token for t = 0)
    is TRIGGER. An off-by-one would show divergence at the trigger itself."""
    trigger = 42
    base = make_model("qwen2", HEAD_ROWS, seed=3, max_positions=CONTEXT, layers=1, logit_scale=30.0)
    with torch.no_grad():
        base.model.layers[0].self_attn.o_proj.weight.zero_()
    rl = rl_twin(base, seed=0, noise=0.0)
    with torch.no_grad():
        rl.get_input_embeddings().weight[trigger] = torch.randn(32)
    responses = [[1, 2, trigger, 3, 4, trigger, trigger, 5], [trigger, 6, 7], [8, 9, trigger]]
    trajectories = pl.DataFrame(
        {
            "prompt_id": ["a", "b", "c"],
            "sample_id": [0, 0, 0],
            "prompt_ids": [[10, 11], [12, trigger], [13]],
            "response_ids": responses,
        }
    )
    table, _ = _score(trajectories, base, rl, tokenizer, batch_tokens=64)
    for traj in trajectories.iter_rows(named=True):
        rows = table.filter(pl.col("prompt_id") == traj["prompt_id"])
        previous = [traj["prompt_ids"][-1], *traj["response_ids"][:-1]]
        expected = [token == trigger for token in previous]
        assert (rows["js_full"] > 1e-3).to_list() == expected, traj["prompt_id"]
        assert (rows["kl_base_rl"] > 1e-3).to_list() == expected
        assert rows.filter(~pl.Series(expected))["js_full"].max() == 0.0


def test_final_logit_softcapping_is_applied(tokenizer):
    from transformers import AutoModelForCausalLM, Gemma2Config

    config = Gemma2Config(
        vocab_size=HEAD_ROWS,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=128,
        final_logit_softcapping=2.0,
    )
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    with torch.no_grad():
        base.get_output_embeddings().weight.mul_(20.0)  # logits well beyond the cap
    rl = rl_twin(base, seed=1)
    trajectories = _trajectories(3, seed=4)
    table, _ = _score(trajectories, base, rl, tokenizer)
    traj = trajectories.row(0, named=True)
    logits_b = _reference_logits(base, traj["prompt_ids"], traj["response_ids"])
    logits_r = _reference_logits(rl, traj["prompt_ids"], traj["response_ids"])
    rows = table.filter((pl.col("prompt_id") == "p0") & (pl.col("sample_id") == 0)).to_dicts()
    for t, token in enumerate(traj["response_ids"]):
        want, tie = reference_row(logits_b[t], logits_r[t], token, 0.7, 1.0)
        compare(rows[t], want, tie, where=f"t={t}")


def test_unknown_logit_transform_is_refused(pair, tokenizer):
    base, rl = pair
    rescaled = rl_twin(rl, seed=0, noise=0.0)
    forward = rescaled.forward

    def doubled(*args, **kwargs):
        out = forward(*args, **kwargs)
        out.logits = 2 * out.logits
        return out

    rescaled.forward = doubled
    with pytest.raises(DivscopeError, match="transforms its logits"):
        _score(_trajectories(2, seed=5), base, rescaled, tokenizer)


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda f: f.drop("response_ids"), "missing column.*'response_ids'"),
        (
            lambda f: f.with_columns(pl.Series("response_ids", [[], [1]], dtype=pl.List(pl.Int64))),
            "empty response for prompt_id='p0', sample_id=0",
        ),
        (
            lambda f: f.with_columns(pl.Series("prompt_ids", [[1], [VOCAB]])),
            f"token id {VOCAB} of prompt_id='p0', sample_id=1 is outside",
        ),
        (
            lambda f: f.with_columns(pl.Series("response_ids", [[1] * 256, [1]])),
            r"prompt_id='p0', sample_id=0 is too long for the base model: \d+ prompt \+ 256 "
            r"response tokens need \d+ positions, its context is 256",
        ),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(pair, tokenizer, change, message):
    base, rl = pair
    with pytest.raises(DivscopeError, match=message):
        _score(change(_trajectories(2, seed=6)), base, rl, tokenizer)


def test_summary_matches_the_table(pair, tokenizer):
    base, rl = pair
    table, summary = _score(_trajectories(6, seed=7), base, rl, tokenizer)
    js = table["js"].to_numpy()
    assert summary.tokens == table.height and summary.sequences == 6
    assert dict(summary.js_quantiles)[0.5] == pytest.approx(float(np.quantile(js, 0.5)))
    assert summary.near_zero_js_share == pytest.approx(float((js < 1e-3).mean()))
    assert "tokens/s" in summary.format()


@pytest.mark.slow
@pytest.mark.parametrize(
    "top_p,temperature,window", [(0.95, 1.3, 100), (1.0, 1.0, 64), (0.5, 0.5, 1024)]
)
def test_reference_on_more_trajectories(pair, tokenizer, top_p, temperature, window):
    """The fast reference test's comparison over more, longer trajectories and settings."""
    base, rl = pair
    trajectories = _trajectories(24, seed=8, max_prompt=16, max_response=64)
    table, _ = _score(
        trajectories, base, rl, tokenizer, top_p=top_p, temperature=temperature, window=window
    )
    skipped, compared = _compare_with_reference(table, trajectories, base, rl, top_p, temperature)
    assert skipped <= 0.05 * compared


def _padded_batch(vocab: int, seed: int) -> tuple[list[list[int]], list[list[int]]]:
    """Prompts and responses of uneven lengths: a batch with much right-padding."""
    g = torch.Generator().manual_seed(seed)
    sizes = [(7, 12), (1, 3), (3, 1), (12, 9), (2, 5)]
    prompts = [torch.randint(1, vocab, (p,), generator=g).tolist() for p, _ in sizes]
    responses = [torch.randint(1, vocab, (r,), generator=g).tolist() for _, r in sizes]
    return prompts, responses


def _masked_hidden(model, prompts, responses, width: int) -> torch.Tensor:
    """`_response_hidden`'s states as the forward with a padding mask gives them."""
    inputs = [p + r[:-1] for p, r in zip(prompts, responses, strict=True)]
    input_ids = torch.zeros(len(inputs), width, dtype=torch.int64)
    mask = torch.zeros(len(inputs), width, dtype=torch.int64)
    for i, x in enumerate(inputs):
        input_ids[i, : len(x)], mask[i, : len(x)] = torch.tensor(x), 1
    with torch.inference_mode():
        hidden = model.get_decoder()(input_ids=input_ids, attention_mask=mask).last_hidden_state
    return torch.cat(
        [
            hidden[i, len(p) - 1 : len(p) - 1 + len(r)]
            for i, (p, r) in enumerate(zip(prompts, responses, strict=True))
        ]
    )


@pytest.mark.parametrize("model", ["qwen2", "llama", "lab/base", "lab/rl"])
def test_right_padded_batches_need_no_padding_mask(model):
    """Without a padding mask, the states at every response position (and so the logits) are
    the masked forward's, bit for bit in float32 and in float64; in float64 they are also each
    row's own unpadded forward's at input index prompt_len + t - 1 (the positions line up)."""
    from transformers import AutoModelForCausalLM

    from divscope.scoring.engine import _response_hidden

    if model.startswith("lab/"):
        path = Path(__file__).resolve().parents[2] / "fixtures" / model
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    else:
        model = make_model(model, HEAD_ROWS, seed=0, max_positions=CONTEXT, logit_scale=12.0)
    prompts, responses = _padded_batch(min(model.config.vocab_size, VOCAB), seed=0)
    width = 24  # wider than the longest input (20): padding in every row
    masks = []
    model.get_decoder().register_forward_pre_hook(
        lambda module, args, kwargs: masks.append(kwargs.get("attention_mask")), with_kwargs=True
    )
    with torch.inference_mode():
        _response_hidden(model, prompts, responses, width)
    assert masks == [None]  # the engine's forward: no padding mask
    for dtype in (torch.float32, torch.float64):
        model = model.to(dtype)
        masked = _masked_hidden(model, prompts, responses, width)
        with torch.inference_mode():
            hidden = _response_hidden(model, prompts, responses, width)  # [N, d]
            head = model.get_output_embeddings()
            assert hidden.dtype == dtype and torch.equal(hidden, masked)
            assert torch.equal(head(hidden), head(masked))
    with torch.inference_mode():
        rows = []
        for p, r in zip(prompts, responses, strict=True):
            alone = model.get_decoder()(input_ids=torch.tensor([p + r[:-1]])).last_hidden_state[0]
            rows.append(alone[len(p) - 1 : len(p) - 1 + len(r)])
    assert torch.allclose(hidden, torch.cat(rows), atol=1e-12, rtol=0)


def test_the_forwards_run_at_once_on_separate_gpus_with_the_same_table(
    pair, tokenizer, monkeypatch
):
    """Where the models sit on separate GPUs the two forwards run on threads of their own
    (`concurrently`); the table is the one-after-the-other run's (here on the CPU, told that
    the models are on separate GPUs: the threaded path itself runs)."""
    from divscope.scoring import engine

    base, rl = pair
    trajectories = _trajectories(6, seed=9)
    alone, _ = _score(trajectories, base, rl, tokenizer, batch_tokens=64, chunk_rows=16)
    calls, concurrently = [], engine.concurrently

    def counted(work):
        calls.append(len(work))
        return concurrently(work)

    monkeypatch.setattr(engine, "on_separate_gpus", lambda first, second: True)
    monkeypatch.setattr(engine, "concurrently", counted)
    at_once, _ = _score(trajectories, base, rl, tokenizer, batch_tokens=64, chunk_rows=16)
    assert calls and set(calls) == {2}
    assert at_once.equals(alone)
