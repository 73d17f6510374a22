"""The lockstep decoder out of GPU memory, on the CPU: `torch.cuda.OutOfMemoryError` is raised
on purpose by a model's forward over more than a few rows, as CUDA raises it.

The reference decoder decodes a batch that runs out of memory again from the start as two
halves, each left-padded to the batch's prompt width; the speculative decoder keeps the
responses already finished and restarts the rows in flight at half the capacity. Either way
every policy gives the same responses and switches as with memory to spare, and the run warns.
A request that does not fit alone is a clear error.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import divscope.oom
from divscope.decoding import DecodeConfig, Lockstep, Request, build_policy, decode
from divscope.errors import DivscopeError, DivscopeWarning
from divscope.scoring import StatsConfig
from tests.decoding.helpers import assert_same_decodes

LAB = Path(__file__).resolve().parents[2] / "fixtures" / "lab"
CONFIG = DecodeConfig(
    StatsConfig(temperature=1.0, top_p=0.7), max_new_tokens=12, batch_size=8, seed=3,
    decoder="reference",
)  # fmt: skip
SPECULATIVE = replace(CONFIG, decoder="speculative")


@pytest.fixture(scope="module")
def lab():
    """The lab's base and rl models, 8 requests (4 eval prompts x 2 samples, budget 2), the
    vocabulary and the stop ids."""
    from divscope.models.loading import load_model
    from divscope.models.tokenizers import load_tokenizer
    from divscope.prompts import prompt_token_ids, read_prompts

    tokenizer = load_tokenizer(str(LAB / "base"))
    models = {name: load_model(str(LAB / name), device="cpu") for name in ("base", "rl")}
    prompts = read_prompts(LAB / "prompts" / "eval.jsonl").head(4)
    ids = prompt_token_ids(prompts, tokenizer, source="eval")
    requests = [
        Request(key, sample, tuple(prompt), budget=2)
        for key, prompt in zip(prompts["prompt_id"].to_list(), ids, strict=True)
        for sample in range(2)
    ]
    return models, requests, len(tokenizer), [tokenizer.eos_token_id]


@pytest.fixture(autouse=True)
def no_split_yet(monkeypatch):
    """A process that has not split a batch yet: its next split warns."""
    monkeypatch.setattr(divscope.oom, "_warned", set())


def _fitting(monkeypatch, rows: int) -> list[int]:
    """Make every model's forward run out of memory on more than `rows` rows; returns the
    batch sizes of the prefills tried."""
    real, prefills = Lockstep._forward, []

    def forward(self, name, input_ids, positions):
        if input_ids.shape[1] > 1:
            prefills.append(input_ids.shape[0])
        if input_ids.shape[0] > rows:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (injected by the test)")
        return real(self, name, input_ids, positions)

    monkeypatch.setattr(Lockstep, "_forward", forward)
    return prefills


def _decode(lab, policy, config=CONFIG, **params):
    models, requests, vocab, eos = lab
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        decoded = decode(
            models, requests, build_policy(policy, **params), config, vocab=vocab, eos_ids=eos
        )
    return decoded, [str(w.message) for w in caught if issubclass(w.category, DivscopeWarning)]


POLICIES = [
    ("base", {}),
    ("forward", {"eps": 0.05}),
    ("random", {"rate": 0.3}),
]


@pytest.fixture(scope="module")
def want(lab):
    """Each policy's responses with memory to spare."""
    return {policy: _decode(lab, policy, **params)[0] for policy, params in POLICIES}


def test_a_batch_out_of_memory_is_decoded_in_halves_with_the_same_responses(lab, want, monkeypatch):
    prefills = _fitting(monkeypatch, rows=4)
    said = []
    for policy, params in POLICIES:
        got, warned = _decode(lab, policy, **params)
        assert_same_decodes(got, want[policy], policy)
        said += warned
    assert any(d.n_switches for d in want["forward"])  # the budget of 2 was used
    # 8 -> 4 + 4: the base policy prefills its one model, the others base then rl
    assert prefills == [8, 4, 4] + [8, 4, 4, 4, 4] * (len(POLICIES) - 1)
    assert len(said) == 1, said
    assert said[0].startswith("out of GPU memory on a batch of 8 sequences (prompts of up to ")
    assert "up to 12 new tokens): split it in two and retried; lower --batch-size" in said[0]


def test_a_request_that_does_not_fit_alone_is_a_clear_error(lab, monkeypatch):
    _fitting(monkeypatch, rows=0)
    models, requests, *_ = lab
    first = min(requests, key=lambda r: len(r.prompt_ids))  # the batch is sorted by length
    with pytest.raises(DivscopeError) as error:
        _decode(lab, "base")
    assert str(error.value) == (
        f"out of GPU memory decoding prompt_id={first.prompt_id!r}, sample_id="
        f"{first.sample_id} alone ({len(first.prompt_ids)} prompt tokens, up to 12 new ones): "
        "lower --max-new-tokens, or put the models on separate GPUs with "
        "--base-device/--rl-device, or spread them over several with --device-map auto."
    )


def _rows_fitting(monkeypatch, lab, rows: int) -> None:
    """Make the models' decoders run out of memory on more than `rows` rows, when decoding
    (with a cache)."""
    for model in lab[0].values():
        decoder = model.get_decoder()
        real = decoder.forward

        def forward(*args, real=real, **kwargs):
            if kwargs.get("use_cache") and kwargs["input_ids"].shape[0] > rows:
                raise torch.cuda.OutOfMemoryError("CUDA out of memory (injected by the test)")
            return real(*args, **kwargs)

        monkeypatch.setattr(decoder, "forward", forward)


def test_the_speculative_decoder_restarts_the_rows_in_flight_at_half_the_capacity(
    lab, want, monkeypatch
):
    _rows_fitting(monkeypatch, lab, rows=4)
    said = []
    for policy, params in POLICIES:
        got, warned = _decode(lab, policy, SPECULATIVE, **params)
        assert_same_decodes(got, want[policy], policy)
        said += warned
    assert len(said) == len(POLICIES), said  # one restart per policy: 8 rows -> 4
    assert said[0] == (
        "out of GPU memory decoding 8 sequences: they restart from their first token, 4 at a "
        "time from now on (the responses already finished are kept); lower --batch-size to "
        "avoid the recomputation."
    )


def test_the_speculative_decoder_names_a_request_that_does_not_fit_alone(lab, monkeypatch):
    _rows_fitting(monkeypatch, lab, rows=0)
    with pytest.raises(DivscopeError, match=r"out of GPU memory decoding prompt_id="):
        _decode(lab, "base", SPECULATIVE)
