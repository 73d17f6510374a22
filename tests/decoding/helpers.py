"""Helpers of the decoder's tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import pytest

from divscope.decoding import DecodeConfig, Decoded, Request, build_policy, decode

VOCAB = 44  # make_tokenizer()'s size; the tiny models' heads have 48 rows
EOS = [2]
PROMPTS = {"a": (5, 6, 7), "b": (8,), "c": (9, 10, 11, 12, 13, 14), "d": (15, 16)}


def tiny_requests(
    budgets: Sequence[int] = (-1,),
    samples: int = 1,
    prompts: Mapping[str, tuple[int, ...]] = PROMPTS,
) -> list[Request]:
    """`samples` requests of every prompt at each budget, budget by budget."""
    return [
        Request(prompt_id, sample, ids, budget)
        for budget in budgets
        for prompt_id, ids in prompts.items()
        for sample in range(samples)
    ]


def tiny_decode(
    models, policy: str, requests: Sequence[Request], config: DecodeConfig, *,
    suppressed: Sequence[int] = (), **params,
) -> list[Decoded]:  # fmt: skip
    """`decode` over the tiny models' vocabulary and EOS, the policy built from its name and
    `params`."""
    return decode(
        models, requests, build_policy(policy, **params), config, vocab=VOCAB, eos_ids=EOS,
        suppressed=suppressed,
    )  # fmt: skip


def assert_same_decodes(got: Sequence[Decoded], want: Sequence[Decoded], what: object = "") -> None:
    """The same tokens, switches and counts bit for bit, and the recorded `switch_js` to float32
    rounding: a batch of another shape sums in another order, which moves the last bits of a
    statistic but (on the CPU) no draw."""
    assert [replace(d, switch_js=None) for d in got] == [
        replace(d, switch_js=None) for d in want
    ], what
    for g, w in zip(got, want, strict=True):
        assert (g.switch_js is None) == (w.switch_js is None), what
        if g.switch_js is not None:
            assert g.switch_js == pytest.approx(w.switch_js, abs=1e-5), what
