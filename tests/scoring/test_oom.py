"""The scoring engine out of GPU memory, on the CPU: `torch.cuda.OutOfMemoryError` is raised on
purpose (a forward over more than a few sequences, or a chunk of statistics), as CUDA raises it.

A forward that runs out of memory runs again on each half of its batch, padded to the batch's
width, and the token table comes out identical, bit for bit and row for row; the run warns
once. A sequence whose forward does not fit alone, and a chunk that does not fit, are clear
errors naming what to change.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

import divscope.oom
import divscope.scoring.engine as engine
from divscope.errors import DivscopeError, DivscopeWarning
from divscope.io import read_trajectories
from divscope.models.loading import load_model
from divscope.models.tokenizers import load_tokenizer
from divscope.scoring import ScoreConfig, score_table

LAB = Path(__file__).resolve().parents[2] / "fixtures" / "lab"
# One batch of 6 lab trajectories (about 150 tokens each), two output-head chunks.
CONFIG = ScoreConfig(batch_tokens=4096, chunk_rows=400)


@pytest.fixture(scope="module")
def lab():
    """The lab's tokenizer, base and rl models, and 6 of its trajectories."""
    models = [load_model(str(LAB / name), device="cpu") for name in ("base", "rl")]
    trajectories = read_trajectories(LAB / "trajectories.jsonl").head(6)
    return load_tokenizer(str(LAB / "base")), *models, trajectories


@pytest.fixture(scope="module")
def want(lab):
    """The token table of `lab`, scored with memory to spare."""
    table, warned = _score(lab)
    assert not warned
    return table


@pytest.fixture(autouse=True)
def no_split_yet(monkeypatch):
    """A process that has not split a batch yet: its next split warns."""
    monkeypatch.setattr(divscope.oom, "_warned", set())


def _forward_fitting(rows: int, seen: list[int] | None = None):
    """`_response_hidden` that runs out of memory on more than `rows` sequences (every batch
    size tried goes to `seen`)."""
    real = engine._response_hidden

    def forward(model, prompts, responses, width=0):
        if seen is not None:
            seen.append(len(prompts))
        if len(prompts) > rows:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (injected by the test)")
        return real(model, prompts, responses, width)

    return forward


def _score(lab):
    tokenizer, base, rl, trajectories = lab
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = score_table(trajectories, base, rl, tokenizer, CONFIG, progress=False)
    return table, [str(w.message) for w in caught if issubclass(w.category, DivscopeWarning)]


def test_a_forward_out_of_memory_runs_in_halves_and_gives_the_same_table(lab, want, monkeypatch):
    seen: list[int] = []
    monkeypatch.setattr(engine, "_response_hidden", _forward_fitting(2, seen))
    got, warned = _score(lab)
    assert got.equals(want)  # exact, in the same row order
    assert seen == [6, 3, 1, 2, 3, 1, 2] * 2  # 6 -> 3 + 3 -> (1 + 2) + (1 + 2), base then rl
    assert len(warned) == 1, warned
    assert warned[0].startswith(
        "out of GPU memory on the base model's forward pass over a batch of 6 sequences"
    )
    assert "lower --batch-tokens" in warned[0]
    again, quiet = _score(lab)  # the same process: said once
    assert again.equals(want) and not quiet


def test_a_sequence_that_does_not_fit_alone_is_a_clear_error(lab, monkeypatch):
    monkeypatch.setattr(engine, "_response_hidden", _forward_fitting(0))
    with pytest.raises(DivscopeError) as error:
        _score(lab)
    message = str(error.value)
    assert message.startswith(
        "out of GPU memory in the base model's forward pass over prompt_id='eval-000', "
        "sample_id=0 alone (48 prompt + "
    )
    assert "--base-device/--rl-device" in message and "--device-map auto" in message


def test_a_chunk_that_does_not_fit_names_chunk_rows(lab, monkeypatch):
    def pair_stats(*args, **kwargs):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory (injected by the test)")

    monkeypatch.setattr(engine, "pair_stats", pair_stats)
    with pytest.raises(DivscopeError, match=r"statistics of 400 positions at once: lower "
                       r"--chunk-rows .*--base-device/--rl-device"):  # fmt: skip
        _score(lab)
