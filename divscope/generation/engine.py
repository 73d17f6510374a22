"""Sampling engines: `hf` (the lockstep decoder's single-model policy) and `vllm`.

Both return token ids straight from the engine, never re-tokenized from text. `hf` draws with
the decoder's coupled randomness, so a response depends only on the seed, the prompt id, the
sample index and the model: not on the batch size, nor on which prompts were already done when
a run resumed. `vllm` seeds each prompt's request from (seed, prompt id), which makes it
repeatable on the same hardware and vLLM version, but its samples differ from `hf`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from divscope.defaults import SAMPLES, SEED, TEMPERATURE, TOP_P
from divscope.errors import DivscopeError

EngineName = Literal["hf", "vllm"]
ENGINES: tuple[str, ...] = ("hf", "vllm")


@dataclass(frozen=True)
class Sampling:
    """What every engine needs to sample responses."""

    n: int = SAMPLES
    """Responses per prompt (sample ids 0..n-1)."""
    temperature: float = TEMPERATURE
    """Sampling temperature (> 0)."""
    top_p: float = TOP_P
    """Sampling top-p, HF/vLLM semantics (docs/contracts.md, "Definitions")."""
    max_new_tokens: int | None = None
    """Length cap of a response; a capped response has `finished` false. None: 8,000,
    capped prompt by prompt by the model's context."""
    seed: int = SEED
    """Seed of the sampling."""
    stop: tuple[str, ...] = ()
    """Tokens that end a response besides the model's EOS tokens (tokenizer and generation
    config): ids or single-token strings (--stop)."""


@dataclass(frozen=True)
class Sampled:
    """One sampled response."""

    response_ids: list[int]
    """The generated tokens, the EOS token included when the response finished."""
    finished: bool
    """Ended with EOS (not at the length cap)."""


class Engine(Protocol):
    """Samples `n` responses for each of several prompts."""

    def check(self, prompts: Sequence[tuple[str, list[int]]]) -> None:
        """Raise a `DivscopeError` before any work if some prompt cannot be sampled."""
        ...

    def sample(self, prompts: Sequence[tuple[str, list[int]]]) -> list[list[Sampled]]:
        """`n` responses (sample ids 0..n-1) for each `(prompt_id, prompt token ids)`."""
        ...


class HFEngine:
    """A transformers causal LM sampled by the lockstep decoder's `base` policy.

    Args:
        model: the loaded model.
        tokenizer: its tokenizer.
        sampling: n, temperature, top-p, length cap and seed.
        batch_size: sequences decoded together; results do not depend on it.
    """

    def __init__(self, model: Any, tokenizer: Any, sampling: Sampling, batch_size: int) -> None:
        from divscope.decoding import DecodeConfig, build_policy
        from divscope.models import stop_ids
        from divscope.scoring.stats import StatsConfig

        self.model, self.sampling, self.vocab = model, sampling, len(tokenizer)
        self.policy = build_policy("base")
        self.config = DecodeConfig(
            StatsConfig(top_p=sampling.top_p, temperature=sampling.temperature),
            max_new_tokens=sampling.max_new_tokens,
            seed=sampling.seed,
            batch_size=batch_size,
        )
        self.eos_ids = stop_ids(
            {"model": tokenizer}, {"model": model}, sampling.stop, vocab=self.vocab
        )
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def check(self, prompts: Sequence[tuple[str, list[int]]]) -> None:
        from divscope.models import context_length, new_token_limits

        contexts = {"model": context_length(self.model)}
        new_token_limits(prompts, self.sampling.max_new_tokens, contexts)

    def sample(self, prompts: Sequence[tuple[str, list[int]]]) -> list[list[Sampled]]:
        from divscope.decoding import Request, decode

        n = self.sampling.n
        requests = [
            Request(prompt_id, sample_id, tuple(ids))
            for prompt_id, ids in prompts
            for sample_id in range(n)
        ]
        decoded = decode(
            {"base": self.model},
            requests,
            self.policy,
            self.config,
            vocab=self.vocab,
            eos_ids=self.eos_ids,
            pad_id=self.pad_id,
        )
        flat = [Sampled(d.response_ids, d.finished) for d in decoded]
        return [flat[i : i + n] for i in range(0, len(flat), n)]


class VLLMEngine:
    """A vLLM `LLM`; needs the optional extra `divscope[vllm]`.

    Args:
        model: a local directory or a hub id.
        sampling: n, temperature, top-p, length cap and seed.
        dtype: `auto`, `float32`, `bfloat16` or `float16`.
    """

    def __init__(self, model: str, sampling: Sampling, dtype: str = "auto") -> None:
        try:
            import vllm
        except ImportError as error:
            raise DivscopeError(
                "--engine vllm needs vLLM: pip install 'divscope[vllm]' (or use --engine hf)."
            ) from error
        self.vllm, self.sampling = vllm, sampling
        self.llm = vllm.LLM(model=model, dtype=dtype, seed=sampling.seed)

    def check(self, prompts: Sequence[tuple[str, list[int]]]) -> None:
        from divscope.models import check_context

        limit = self.llm.llm_engine.model_config.max_model_len
        check_context(prompts, self.sampling.max_new_tokens, limit)

    def sample(self, prompts: Sequence[tuple[str, list[int]]]) -> list[list[Sampled]]:
        from divscope.decoding.randomness import prompt_key

        s = self.sampling
        params = [
            self.vllm.SamplingParams(
                n=s.n,
                temperature=s.temperature,
                top_p=s.top_p,
                max_tokens=s.max_new_tokens,
                seed=(s.seed ^ prompt_key(prompt_id)) % 2**63,
            )
            for prompt_id, _ in prompts
        ]
        outputs = self.llm.generate(
            [{"prompt_token_ids": list(ids)} for _, ids in prompts], params, use_tqdm=False
        )
        return [
            [
                Sampled(list(c.token_ids), c.finish_reason == "stop")
                for c in sorted(output.outputs, key=lambda c: c.index)
            ]
            for output in outputs
        ]
