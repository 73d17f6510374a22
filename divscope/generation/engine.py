"""Sampling engines: `hf` (the lockstep decoder's single-model policy) and `vllm`.

Both return token ids straight from the engine, never re-tokenized from text, and yield each
prompt's `n` responses as soon as they are all done. `hf` draws with the decoder's coupled
randomness, so a response depends only on the seed, the prompt id, the sample index and the
model: not on the batch size, nor on which prompts were already done when a run resumed.
`vllm` queues every prompt at once and seeds each prompt's request from (seed, prompt id),
which makes it repeatable on the same hardware, vLLM version and set of prompts, but its
samples differ from `hf`'s.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol

from divscope.defaults import (
    SAMPLES,
    SEED,
    TEMPERATURE,
    TOP_P,
    VLLM_GPU_MEMORY_UTILIZATION,
    VLLM_MAX_MODEL_LEN,
    VLLM_TENSOR_PARALLEL_SIZE,
)
from divscope.errors import DivscopeError
from divscope.models.names import ModelName
from divscope.params import DecoderName, Flag

EngineName = Literal["hf", "vllm"]
ENGINES: tuple[str, ...] = ("hf", "vllm")


@dataclass(frozen=True)
class Sampling:
    """What every engine needs to sample responses."""

    n: Annotated[int, Flag("--n", "-n", min=1)] = SAMPLES
    """Responses sampled per prompt, sample ids 0..n-1 (write -n under torchrun, which takes
    --n for an abbreviation of its own options)."""
    temperature: Annotated[float, Flag(min=0.0)] = TEMPERATURE
    """Sampling temperature (> 0)."""
    top_p: Annotated[float, Flag(min=0.0, max=1.0)] = TOP_P
    """Sampling top-p, HF/vLLM semantics (docs/contracts.md, "Definitions")."""
    max_new_tokens: Annotated[int | None, Flag(min=1)] = None
    """Longest response in tokens; longer ones are cut there (`finished` false). Default:
    8000, capped prompt by prompt by the model's context (the cap is printed)."""
    seed: int = SEED
    """Seed of the sampling; the same seed, the same output."""
    stop: tuple[str, ...] = ()
    """Another token that ends a response, besides the model's EOS tokens (tokenizer and
    generation config): a token id or a string that is one token, e.g. '<|im_end|>' (repeat
    for several)."""


@dataclass(frozen=True)
class VLLMOptions:
    """Where vLLM puts the model and how much memory it takes (`--engine vllm` only).

    >>> VLLMOptions(gpu_memory_utilization=0.5).tensor_parallel_size
    1
    """

    tensor_parallel_size: Annotated[int, Flag(min=1)] = VLLM_TENSOR_PARALLEL_SIZE
    """GPUs the model is sharded over (vllm only); it changes the arithmetic, so samples differ
    from one size to another."""
    gpu_memory_utilization: Annotated[float, Flag(min=0.0, max=1.0)] = VLLM_GPU_MEMORY_UTILIZATION
    """Share of each GPU's memory that vLLM takes for weights, activations and KV cache (vllm
    only); lower it when something else shares the GPU."""
    max_model_len: Annotated[int | None, Flag(min=1)] = VLLM_MAX_MODEL_LEN
    """Longest prompt + response vLLM reserves KV cache for (vllm only; default: the model's
    context); lower it when the full context does not fit in memory."""

    def __post_init__(self) -> None:
        if self.tensor_parallel_size < 1:
            raise DivscopeError(
                f"--tensor-parallel-size must be >= 1, got {self.tensor_parallel_size}."
            )
        if not 0 < self.gpu_memory_utilization <= 1:
            raise DivscopeError(
                f"--gpu-memory-utilization must be in (0, 1], got {self.gpu_memory_utilization}."
            )
        if self.max_model_len is not None and self.max_model_len < 1:
            raise DivscopeError(f"--max-model-len must be >= 1, got {self.max_model_len}.")


@dataclass(frozen=True)
class Sampled:
    """One sampled response."""

    response_ids: list[int]
    """The generated tokens, the EOS token included when the response finished."""
    finished: bool
    """Ended with EOS (not at the length cap)."""


class Engine(Protocol):
    """Samples `n` responses for each of several prompts."""

    def check(self, prompts: Sequence[tuple[str, list[int]]]) -> str | None:
        """Raise a `DivscopeError` before any work if some prompt cannot be sampled; the line
        saying how the default length cap was capped by the context, if it was."""
        ...

    def sample(
        self, prompts: Sequence[tuple[str, list[int]]]
    ) -> Iterator[tuple[int, list[Sampled]]]:
        """For each `(prompt_id, prompt token ids)`, its index in `prompts` and its `n`
        responses (sample ids 0..n-1), as soon as all of them are done, in no fixed order."""
        ...


class HFEngine:
    """A transformers causal LM sampled by the lockstep decoder's `base` policy.

    Every prompt's `n` requests are decoded in one call (`decoding.decode_stream`): the
    speculative decoder keeps its batch full across prompts, refilling each row as a response
    ends, and a prompt is yielded as soon as its `n` responses are done (in the order of their
    prompts' lengths, shortest first).

    Args:
        model: the loaded model.
        tokenizer: its tokenizer.
        sampling: n, temperature, top-p, length cap and seed.
        batch_size: sequences decoded together; on the CPU results do not depend on it. None:
            planned when the prompts are known (`check`, `sample`; see `DecodeConfig`).
        max_memory: bytes the run may use per device, the budget of a planned batch size.
        decoder: `DecodeConfig.decoder` (the reference decoder yields each prompt once its
            batches end).
        progress: print the memory plan (once per process).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        sampling: Sampling,
        batch_size: int | None,
        max_memory: int | None = None,
        *,
        decoder: DecoderName = "speculative",
        progress: bool = False,
    ) -> None:
        from divscope.decoding import DecodeConfig, build_policy
        from divscope.models.tokenizers import stop_ids
        from divscope.scoring.metrics import StatsConfig

        self.model, self.sampling, self.vocab = model, sampling, len(tokenizer)
        self.policy = build_policy("base")
        self.config = DecodeConfig(
            StatsConfig(top_p=sampling.top_p, temperature=sampling.temperature),
            max_new_tokens=sampling.max_new_tokens,
            seed=sampling.seed,
            batch_size=batch_size,
            max_memory=max_memory,
            decoder=decoder,
        )
        self.progress = progress
        self.eos_ids = stop_ids(
            {"model": tokenizer}, {"model": model}, sampling.stop, vocab=self.vocab
        )
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def check(self, prompts: Sequence[tuple[str, list[int]]]) -> str | None:
        from divscope.models.lengths import context_length, length_note, new_token_limits

        contexts = {"model": context_length(self.model)}
        new_token_limits(prompts, self.sampling.max_new_tokens, contexts)
        self._plan(prompts)
        return length_note(prompts, self.sampling.max_new_tokens, contexts)

    def _plan(self, prompts: Sequence[tuple[str, list[int]]]) -> None:
        """Decide the batch size for `prompts`, where it is not given or decided yet."""
        from divscope.decoding.lockstep import planned

        self.config = planned(
            self.config, {"base": self.model}, prompts, vocab=self.vocab, progress=self.progress
        )

    def sample(
        self, prompts: Sequence[tuple[str, list[int]]]
    ) -> Iterator[tuple[int, list[Sampled]]]:
        from divscope.decoding import Request, decode_stream

        n = self.sampling.n
        self._plan(prompts)
        requests = [
            Request(prompt_id, sample_id, tuple(ids))
            for prompt_id, ids in prompts
            for sample_id in range(n)
        ]
        waiting: dict[int, dict[int, Sampled]] = {}  # prompt -> its responses done so far
        for i, response in decode_stream(
            {"base": self.model},
            requests,
            self.policy,
            self.config,
            vocab=self.vocab,
            eos_ids=self.eos_ids,
            pad_id=self.pad_id,
        ):
            done = waiting.setdefault(i // n, {})
            done[i % n] = Sampled(response.response_ids, response.finished)
            if len(done) == n:
                yield i // n, [done[sample] for sample in range(n)]
                del waiting[i // n]


class VLLMEngine:
    """A vLLM `LLM` whose engine is stepped directly; needs the optional extra `divscope[vllm]`.

    `sample` queues every prompt's request up front, so that vLLM's scheduler keeps the GPU
    busy across prompts instead of waiting on each batch's longest response, then steps the
    engine and yields each prompt as soon as its `n` samples are done (`LLM.generate` would
    return only once the last prompt is done). It is the loop `LLM.generate` runs itself:
    `llm_engine.add_request` with `RequestOutputKind.FINAL_ONLY`, then `step` while
    `has_unfinished_requests`. Responses stop at the ids the `hf` engine stops at (the
    tokenizer's and the generation config's EOS ids and `sampling.stop`), the EOS included, and
    at the length cap of `divscope.models.lengths.new_token_limits` for vLLM's context.

    Args:
        model: a local directory or a hub id, with its revision (`divscope.models.names`).
        tokenizer: its tokenizer.
        sampling: n, temperature, top-p, length cap, stop tokens and seed.
        dtype: `auto`, `float32`, `bfloat16` or `float16`.
        options: tensor parallelism, GPU memory share and context length.

    Raises:
        DivscopeError: vLLM is not installed, or refused the model or the options; a model in
            a subfolder of a repository (which vLLM cannot read); a `--stop` value that is not
            one token.
    """

    def __init__(
        self,
        model: str | ModelName,
        tokenizer: Any,
        sampling: Sampling,
        dtype: str = "auto",
        options: VLLMOptions = VLLMOptions(),  # noqa: B008 (frozen, hashable)
    ) -> None:
        from types import SimpleNamespace

        from transformers import AutoConfig, GenerationConfig

        from divscope.models.tokenizers import stop_ids

        name = ModelName.of(model)
        if name.subfolder:
            raise DivscopeError(
                f"--engine vllm cannot load {str(name)!r}: vLLM reads no subfolder of a "
                f"repository. Download it (hf download {name.id} --include "
                f"'{name.subfolder}/*' --local-dir DIR) and pass --model DIR/{name.subfolder}."
            )

        try:
            import vllm
        except ImportError as error:
            raise DivscopeError(
                "--engine vllm needs vLLM: pip install 'divscope[vllm]' (or use --engine hf)."
            ) from error
        try:
            generation = GenerationConfig.from_pretrained(name.id, **name.options())
        except OSError:  # no generation_config.json: transformers derives one from config.json
            config = AutoConfig.from_pretrained(name.id, **name.options())
            generation = GenerationConfig.from_model_config(config)
        unloaded = SimpleNamespace(generation_config=generation)  # all stop_ids reads of a model
        self.stop_ids = stop_ids(
            {"model": tokenizer}, {"model": unloaded}, sampling.stop, vocab=len(tokenizer)
        )
        try:
            from vllm.sampling_params import RequestOutputKind
        except ImportError:  # an early 0.6 vLLM: its finished output holds all n samples
            self.output_kind = {}
        else:  # one output per prompt, once all of its n samples are done
            self.output_kind = {"output_kind": RequestOutputKind.FINAL_ONLY}
        self.vllm, self.sampling, self.calls = vllm, sampling, itertools.count()
        revision = name.revision
        at = {"revision": revision, "tokenizer_revision": revision} if revision else {}
        try:
            self.llm = vllm.LLM(
                model=name.id,
                dtype=dtype,
                seed=sampling.seed,
                tensor_parallel_size=options.tensor_parallel_size,
                gpu_memory_utilization=options.gpu_memory_utilization,
                max_model_len=options.max_model_len,
                **at,
            )
        except ValueError as error:  # vLLM's configuration errors
            raise DivscopeError(
                f"vLLM could not load {str(name)!r} with --tensor-parallel-size "
                f"{options.tensor_parallel_size}, --gpu-memory-utilization "
                f"{options.gpu_memory_utilization}, --max-model-len {options.max_model_len} "
                f"({error}); change those options or --dtype."
            ) from error

    def check(self, prompts: Sequence[tuple[str, list[int]]]) -> str | None:
        from divscope.models.lengths import length_note

        self._limits(prompts)
        return length_note(prompts, self.sampling.max_new_tokens, self._contexts())

    def _contexts(self) -> dict[str, int]:
        return {"model": self.llm.llm_engine.model_config.max_model_len}

    def _limits(self, prompts: Sequence[tuple[str, list[int]]]) -> list[int]:
        """Each prompt's length cap within vLLM's context (--max-model-len or the model's)."""
        from divscope.models.lengths import new_token_limits

        return new_token_limits(prompts, self.sampling.max_new_tokens, self._contexts())

    def sample(
        self, prompts: Sequence[tuple[str, list[int]]]
    ) -> Iterator[tuple[int, list[Sampled]]]:
        from divscope.decoding.randomness import prompt_key

        s, engine = self.sampling, self.llm.llm_engine
        call = next(self.calls)  # request ids stay unique across calls on one engine
        pending: dict[str, int] = {}
        try:
            for index, ((prompt_id, ids), limit) in enumerate(
                zip(prompts, self._limits(prompts), strict=True)
            ):
                params = self.vllm.SamplingParams(
                    n=s.n,
                    temperature=s.temperature,
                    top_p=s.top_p,
                    max_tokens=limit,
                    seed=(s.seed ^ prompt_key(prompt_id)) % 2**63,
                    stop_token_ids=self.stop_ids,
                    detokenize=False,  # generate decodes the ids itself
                    **self.output_kind,
                )
                request_id = f"divscope-{call}-{index}"
                engine.add_request(request_id, {"prompt_token_ids": list(ids)}, params)
                pending[request_id] = index
            while pending and engine.has_unfinished_requests():
                for output in engine.step():
                    if output.finished and output.request_id in pending:
                        done = sorted(output.outputs, key=lambda c: c.index)
                        samples = [
                            Sampled(list(c.token_ids), c.finish_reason == "stop") for c in done
                        ]
                        yield pending.pop(output.request_id), samples
            if pending:
                first = prompts[next(iter(pending.values()))][0]
                raise DivscopeError(
                    f"vLLM {self.vllm.__version__} stopped without returning {len(pending)} "
                    f"prompt(s), e.g. prompt_id={first!r}; please file an issue naming this "
                    "vLLM version."
                )
        finally:  # an interrupted run leaves no request behind in the engine
            if pending:
                engine.abort_request(list(pending))
