"""Helpers of the decoder's tests."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace

import pytest
import torch

from divscope.decoding import DecodeConfig, Decoded, Request, build_policy, decode
from tests.tinymodels import make_model

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


def assert_same_decodes(
    got: Sequence[Decoded],
    want: Sequence[Decoded],
    what: object = "",
    requests: Sequence[Request] | None = None,
) -> None:
    """The same tokens, switches and counts bit for bit, and the recorded floats (`switch_js`,
    `delta_cosine`) to float32 rounding: a batch of another shape, or k positions scored in
    one forward instead of one by one, sums in another order, which moves the last bits of a
    statistic but (on the CPU) no draw. A failure names the first request that differs (from
    `requests`, in the same order), its first differing field and position."""
    assert len(got) == len(want), what
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        named = f"{what} request {requests[i]!r}" if requests is not None else f"{what} row {i}"
        assert replace(g, switch_js=None, delta_cosine=None) == replace(
            w, switch_js=None, delta_cosine=None
        ), f"{named}: {first_difference(g, w)}"
        for field in ("switch_js", "delta_cosine"):
            a, b = getattr(g, field), getattr(w, field)
            assert (a is None) == (b is None), f"{named}: {field} {a} != {b}"
            if a is not None:
                assert [x is None for x in a] == [x is None for x in b], f"{named}: {field}"
                close = [x for x in a if x is not None], [x for x in b if x is not None]
                assert close[0] == pytest.approx(close[1], abs=1e-5), f"{named}: {field}"


def first_difference(got: Decoded, want: Decoded) -> str:
    """Where `got` first departs from `want`: the first field that differs (in `Decoded`'s
    order) and, for a list, its first differing index with both values."""
    for field in fields(Decoded):
        a, b = getattr(got, field.name), getattr(want, field.name)
        if a == b:
            continue
        if isinstance(a, list) and isinstance(b, list):
            pairs = enumerate(zip(a, b, strict=False))
            index = next((k for k, (x, y) in pairs if x != y), min(len(a), len(b)))
            values = [v[index] if index < len(v) else "(ended)" for v in (a, b)]
            return (
                f"{field.name} first differs at index {index}: {values[0]} (got) != "
                f"{values[1]} (want); lengths {len(a)}, {len(b)}"
            )
        return f"{field.name}: {a} (got) != {b} (want)"
    return "equal"


def twin(arch: str = "llama", *, seed: int = 0, max_positions: int = 64) -> dict:
    """A peaked tiny base model (trained-like entropies, some tail tokens) and an RL twin
    whose output head is the base's plus noise: at T=1, top-p 0.7 the median JS is about
    0.24, so `forward` with eps 0.3 finds both sides, and every stratum occurs."""
    base = make_model(arch, vocab_size=48, seed=seed, max_positions=max_positions, logit_scale=60.0)
    rl = copy.deepcopy(base)
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        head = rl.lm_head.weight
        head.add_(torch.randn(head.shape, generator=generator) * 0.7 * head.std())
    return {"base": base, "rl": rl}
