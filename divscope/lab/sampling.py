"""Batched decoding for the lab models: T=1 sampling or greedy, with a KV cache.

Prompts of different lengths share a batch, left-padded, stepped by the lockstep decoder's
`Lockstep` (one model): the attention mask hides the padding and position ids count real tokens
only, so a prompt's response does not depend on its batch mates beyond float rounding. The
generator makes sampling reproducible; thread count is fixed by the caller (`build`).
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel

from divscope.decoding.lockstep import Lockstep


@torch.no_grad()
def generate(
    model: PreTrainedModel,
    prompts: list[list[int]],
    *,
    eos_id: int,
    max_new_tokens: int,
    temperature: float | None,
    generator: torch.Generator | None = None,
    batch_size: int = 256,
) -> list[list[int]]:
    """Continue each prompt until EOS or `max_new_tokens`.

    Args:
        model: a causal LM.
        prompts: token ids of each prompt.
        eos_id: the end-of-sequence id; it is kept as the last id of a finished response.
        max_new_tokens: length cap of a response.
        temperature: sampling temperature (pure softmax sampling, no top-k/top-p), or None for
            greedy decoding (argmax, ties to the lowest id).
        generator: random source for sampling.
        batch_size: prompts decoded together.

    Returns:
        The response ids of each prompt, in input order.
    """
    model.eval()
    responses: list[list[int]] = []
    for start in range(0, len(prompts), batch_size):
        chunk = prompts[start : start + batch_size]
        responses += _decode(model, chunk, eos_id, max_new_tokens, temperature, generator)
    return responses


def _decode(
    model: PreTrainedModel,
    prompts: list[list[int]],
    eos_id: int,
    max_new_tokens: int,
    temperature: float | None,
    generator: torch.Generator | None,
) -> list[list[int]]:
    stepper = Lockstep(
        {"model": model}, prompts, vocab=model.config.vocab_size, pad_id=eos_id,
        max_new_tokens=max_new_tokens,
    )  # fmt: skip
    done = torch.zeros(len(prompts), dtype=torch.bool)
    new_tokens = []
    for _ in range(max_new_tokens):
        logits = stepper.logits["model"]  # [batch, vocab], float32
        if temperature is None:
            token = logits.argmax(dim=-1)
        else:
            probs = torch.softmax(logits / temperature, dim=-1)
            token = torch.multinomial(probs, 1, generator=generator).squeeze(1)
        token = torch.where(done, torch.full_like(token, eos_id), token)
        new_tokens.append(token)
        done |= token == eos_id
        if bool(done.all()):
            break
        stepper.advance(token)
    rows = torch.stack(new_tokens, dim=1).tolist()  # [batch, new]
    return [row[: row.index(eos_id) + 1] if eos_id in row else row for row in rows]
