"""`generate`: prompts and a model in, trajectories on disk out, streamed and resumable.

Responses are written one Parquet part per prompt (`part-NNNNNN.parquet`, N = the prompt's row
in the prompts file) as soon as all of its `n` samples are done, each part atomically, next to
a manifest of the settings (`divscope.output`). A rerun with `resume` and the same settings and
prompts skips the prompts whose part exists; one with other settings is refused. An output path
ending in `.parquet` or `.jsonl` is assembled from the parts (kept in a hidden sibling directory
until then) when the last prompt is done. Under torchrun or `--shard i/n` each process samples
its own share of the prompts (`divscope.distributed`).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import pyarrow as pa

from divscope.defaults import DEVICE, ENGINE
from divscope.distributed import World
from divscope.errors import DivscopeError
from divscope.generation.engine import (
    ENGINES,
    Engine,
    EngineName,
    Sampled,
    Sampling,
    VLLMOptions,
)
from divscope.memory_plan import format_bytes, parse_memory
from divscope.models.names import ModelName
from divscope.output import check_output, frame_digest, share_note, written
from divscope.params import (
    LIBRARY_ONLY,
    Chat,
    DecoderName,
    Flag,
    PartedOutput,
    SinglePlacement,
    check_decoder,
)
from divscope.progress import Progress, note
from divscope.schema import GENERATED_ARROW, arrow_schema
from divscope.tables import IDS


@dataclass(frozen=True)
class GenerateConfig:
    """How `generate` samples."""

    sampling: Sampling = Sampling()
    """n, temperature, top-p, length cap and seed."""
    engine: EngineName = ENGINE
    """hf (transformers, the lockstep decoder; any transformers model) or vllm (needs
    `divscope[vllm]`)."""
    chat: Chat = Chat()
    """The chat template and a system prompt (a `messages` column is always templated)."""
    batch_size: Annotated[int | None, Flag(min=1)] = None
    """Sequences decoded together (hf only: vLLM schedules its own batches over all prompts
    at once); on the CPU results do not depend on it. Default: as many as fit --max-memory
    (`memory_plan.plan_decoding`; the plan is printed); on the CPU without it, 32
    (`BATCH_SIZE`)."""
    max_memory: Annotated[int | None, Flag(parse=parse_memory, metavar="SIZE")] = None
    """Memory the run may use per device, e.g. 70GiB (hf only), weights included: chooses
    --batch-size where not given (the plan is printed). Default: the free memory of each GPU
    once the model is loaded; on the CPU, no plan."""
    vllm: VLLMOptions = VLLMOptions()
    """Tensor parallelism, GPU memory share and context length (vllm only)."""
    decoder: DecoderName = "speculative"
    """hf only: speculative: rows refilled as responses end, across all of a process's
    prompts; reference: batch by batch, every row to its batch's end (the same tokens on the
    CPU; docs/contracts.md, "The speculative decoder")."""

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise DivscopeError(f"--engine {self.engine!r}: use one of {', '.join(ENGINES)}.")
        if self.engine == "hf" and self.vllm != VLLMOptions():
            given = [
                f"--{name.replace('_', '-')} {value}"
                for name, value in asdict(self.vllm).items()
                if value != getattr(VLLMOptions(), name)
            ]
            raise DivscopeError(
                f"{', '.join(given)}: vLLM option(s), not used by --engine hf; pass --engine "
                "vllm or drop them."
            )
        if self.engine == "vllm" and self.batch_size is not None:
            raise DivscopeError(
                f"--batch-size {self.batch_size}: not used by --engine vllm, which schedules its "
                "own batches over all prompts at once; drop it (or use --engine hf)."
            )
        check_decoder(self.decoder)
        if self.engine == "vllm" and self.decoder != "speculative":
            raise DivscopeError(
                f"--decoder {self.decoder}: not used by --engine vllm, which decodes with its own "
                "engine; drop it (or use --engine hf)."
            )
        if self.engine == "vllm" and self.max_memory is not None:
            raise DivscopeError(
                f"--max-memory {format_bytes(self.max_memory)}: not used by --engine vllm, whose "
                "memory is set by --gpu-memory-utilization; drop it (or use --engine hf)."
            )
        if self.sampling.n < 1:
            raise DivscopeError(f"--n must be >= 1, got {self.sampling.n}.")
        if not self.sampling.temperature > 0:
            raise DivscopeError(f"--temperature must be > 0, got {self.sampling.temperature}.")
        if not 0 < self.sampling.top_p <= 1:
            raise DivscopeError(f"--top-p must be in (0, 1], got {self.sampling.top_p}.")
        if self.sampling.max_new_tokens is not None and self.sampling.max_new_tokens < 1:
            raise DivscopeError(
                f"--max-new-tokens must be >= 1, got {self.sampling.max_new_tokens}."
            )
        if self.batch_size is not None and self.batch_size < 1:
            raise DivscopeError(f"--batch-size must be >= 1, got {self.batch_size}.")
        if self.max_memory is not None and self.max_memory < 1:
            raise DivscopeError(f"--max-memory must be >= 1 byte, got {self.max_memory}.")


@dataclass(frozen=True)
class GenerateReport:
    """What one `generate` call did."""

    out: Path
    """Where the trajectories are."""
    n_prompts: int
    """Prompts in the prompts file."""
    n_resumed: int
    """Prompts already done by an earlier run, skipped."""
    n_responses: int
    """Responses generated by this call."""
    n_finished: int
    """Of them, those that ended with EOS."""
    n_tokens: int
    """Response tokens generated by this call."""
    complete: bool = True
    """Every prompt is done (false for a shard whose others are still running)."""
    world: World = World()
    """This process's share of the run (one process, a torchrun rank or a `--shard`)."""

    def format(self) -> str:
        """One line for the terminal."""
        resumed = f" ({self.n_resumed} done before, skipped)" if self.n_resumed else ""
        return (
            f"{self.n_prompts} prompts{share_note(self.world)}{resumed}: generated "
            f"{self.n_responses} responses, {self.n_tokens} tokens, {self.n_finished} ended "
            f"with EOS; {written(self.out, self.complete)}"
        )


def generate(
    prompts: str | os.PathLike,
    model: Annotated[str, Flag("--model", "-m")],
    out: PartedOutput | None = None,
    config: GenerateConfig = GenerateConfig(),
    placement: SinglePlacement = SinglePlacement(),  # noqa: B008 (frozen, hashable)
    *,
    progress: Annotated[bool, LIBRARY_ONLY] = True,
) -> GenerateReport | pa.Table:
    """Sample responses to every prompt from a model and write them as trajectories.

    --n responses per prompt of PROMPTS from --model, written to --out. Rows carry token ids and
    text (prompt_ids, response_ids, prompt, response), n_tokens, finished (ended with EOS) and the
    prompts' other columns (e.g. answer). Each prompt is written as soon as its --n responses are
    done; an interrupted run continues where it stopped with --resume. --engine vllm queues every
    prompt at once.

    Args:
        prompts: Prompts: Parquet or JSONL with prompt_id and prompt (text), messages (chat
            turns: a list of role, content) or prompt_ids, optional answer and other columns
            (carried into every response row).
        model: The model: a local directory or a hub id, also ID@REVISION (e.g.
            org/run@step-400) and ID/SUBFOLDER (a folder of the repository).
        out: the trajectories (or their path): a directory of per-prompt parts, or a `.parquet`
            / `.jsonl` file assembled when all prompts are done. `resume` skips the prompts
            already written, after checking that the settings and prompts are the same;
            `shard` `i/n` does share i of n of the prompts (a SLURM array; `out` must then be a
            directory; under torchrun each process takes its share by itself).
        config: sampling, engine, chat template and system prompt, batch size (`hf`) and
            vLLM options.
        placement: dtype, and device or device map (`hf`; vLLM places the model itself: use
            `config.vllm.tensor_parallel_size` for a model larger than one GPU).
        progress: show a progress bar over prompts on stderr.

    Returns:
        What was generated. Rows have the `divscope.schema.GENERATED`
        columns, then the prompts' other columns. In Python (docs/python.md, "Notebooks"),
        `prompts` may also be a table in memory and `model` one already loaded
        (`models.loading.given_model`; `hf` only), and with `out=None` the trajectories are
        written to a temporary file and returned: a `pyarrow.Table`.

    Raises:
        DivscopeError: bad prompts, a finished output or one made with other settings without
            `overwrite`, a prompt too long for the model, `device` or `device_map` given with
            `vllm`, or `vllm` not installed.

    Example (the lab in `fixtures/lab`, from the repository root):
        >>> import tempfile
        >>> import polars as pl
        >>> import divscope
        >>> tmp = tempfile.TemporaryDirectory()
        >>> prompts = f"{tmp.name}/prompts.jsonl"  # the first 2 of the lab's 256 eval prompts
        >>> pl.read_ndjson("fixtures/lab/prompts/eval.jsonl").head(2).write_ndjson(prompts)
        >>> report = divscope.generate(
        ...     prompts, "fixtures/lab/base", f"{tmp.name}/base.jsonl",
        ...     GenerateConfig(Sampling(n=2, max_new_tokens=64, seed=1)), progress=False)
        >>> report.n_prompts, report.n_responses, report.out.name
        (2, 4, 'base.jsonl')
        >>> tmp.cleanup()
    """
    from divscope.distributed import current_world
    from divscope.models.loading import given_model, model_name
    from divscope.models.tokenizers import load_tokenizer
    from divscope.output import Parts
    from divscope.prompts import chat_settings, read_prompts_arrow, tokenized_prompts
    from divscope.tables import input_name, scratch_table

    if out is None:
        return scratch_table("trajectories.parquet", lambda path: generate(
            prompts, model, path, config, placement, progress=progress
        ))  # fmt: skip
    out = PartedOutput.of(out)
    given, where = given_model(model), input_name(prompts, "prompts")
    name = model_name(model)
    runs = name if given is None else given[0]  # what the engine runs: a name or a model
    if given is not None and config.engine == "vllm":
        raise DivscopeError(
            "--engine vllm loads its model itself: give the model's directory or hub id, or "
            "use --engine hf with a model already loaded."
        )
    device, device_map = placement.device, placement.device_map
    if config.engine == "vllm" and (device != DEVICE or device_map is not None):
        flag = "--device-map" if device_map is not None else f"--device {device}"
        raise DivscopeError(
            f"{flag}: not used by --engine vllm, which places the model on the GPUs itself; "
            "drop it (and shard a large model with --tensor-parallel-size)."
        )
    world = current_world(out.shard, device, device_map)
    if config.engine == "vllm" and world.group:
        raise DivscopeError(
            "--engine vllm under torchrun: vLLM runs its own processes; start one generate per "
            "GPU (or per --tensor-parallel-size group) with --shard i/n instead."
        )
    check_output(out.path, world)
    frame = read_prompts_arrow(prompts)
    tokenizer = load_tokenizer(name) if given is None else given[1]
    texts, ids = tokenized_prompts(frame, tokenizer, source=where, chat=config.chat)
    keys = frame["prompt_id"].to_pylist()
    chat = chat_settings(frame, config.chat, source=where)
    parts = Parts.start(
        out.path, "generate", _settings(str(name), config, chat, keys, ids), len(keys),
        resume=out.resume, overwrite=out.overwrite, world=world,
    )  # fmt: skip
    mine = [] if parts.finished else world.share([len(x) for x in ids])
    done = parts.done(mine)
    todo = [i for i in mine if i not in done]
    carried = frame.drop_columns([c for c in frame.column_names if c in GENERATED_ARROW])
    requests = [(keys[i], ids[i]) for i in todo]
    engine = (
        _engine(
            runs, tokenizer, config, placement.dtype, world.device(device), device_map, progress
        )  # fmt: skip
        if todo
        else None
    )
    if engine is not None:
        note(engine.check(requests), enabled=progress)  # fail before any work, not midway
    metadata = parts.settings | {"models": {"model": name.describe()}}  # its commit, if known
    n_responses = n_finished = n_tokens = 0
    with Progress(
        len(mine),
        desc=f"generating{share_note(world)}",
        unit="prompt",
        initial=len(done),
        enabled=progress,
    ) as bar:
        for j, responses in engine.sample(requests) if engine is not None else ():
            i = todo[j]
            part = _part(keys[i], texts[i], ids[i], responses, tokenizer, str(name))
            extra = carried.take([i] * len(responses))  # the prompt's other columns, repeated
            rows = pa.Table.from_arrays(
                [*part.columns, *extra.columns], names=[*part.column_names, *extra.column_names]
            )
            parts.write(i, rows, metadata)
            n_responses += len(responses)
            n_finished += sum(r.finished for r in responses)
            n_tokens += sum(len(r.response_ids) for r in responses)
            bar.update(1)
    complete = parts.finish(world)
    return GenerateReport(
        out.path, len(keys), len(done), n_responses, n_finished, n_tokens, complete, world
    )


def _settings(
    model: str, config: GenerateConfig, chat: dict, keys: list[str], ids: list[list[int]]
) -> dict:
    """The settings that decide the output (`chat`: `prompts.chat_settings`); a resumed run
    must match them exactly.

    Of the vLLM options only the tensor-parallel size is recorded: it changes the model's
    arithmetic (sharded matmuls round differently). The memory share and the context length
    change how much vLLM holds and so how it schedules batches; vLLM's samples depend on its
    batches anyway (a resumed run queues fewer prompts), so they do not make a run another.
    """
    from divscope import __version__

    prompts = pa.table(
        {"prompt_id": pa.array(keys, pa.large_string()), "prompt_ids": pa.array(ids, IDS)}
    )
    digest = frame_digest(prompts)
    settings = asdict(config.sampling) | {"engine": config.engine}
    if config.engine == "hf":  # on a GPU the decoder decides the batches
        settings["decoder"] = config.decoder
    if config.engine == "vllm":
        settings["tensor_parallel_size"] = config.vllm.tensor_parallel_size
    settings |= chat | {"model": model, "prompts_sha256": digest}
    return settings | {"divscope_version": __version__}


def _engine(
    model: Any,  # a ModelName, or a model given loaded
    tokenizer: Any,
    config: GenerateConfig,
    dtype: str,
    device: str,
    device_map,
    progress: bool,
) -> Engine:
    from divscope.generation.engine import HFEngine, VLLMEngine
    from divscope.models.loading import load_model

    if config.engine == "vllm":
        return VLLMEngine(model, tokenizer, config.sampling, dtype=dtype, options=config.vllm)
    loaded = (
        load_model(model, dtype=dtype, device=device, device_map=device_map)
        if isinstance(model, ModelName)
        else model  # given loaded (`given_model`)
    )
    return HFEngine(
        loaded, tokenizer, config.sampling, config.batch_size, config.max_memory,
        decoder=config.decoder, progress=progress,
    )  # fmt: skip


def _part(
    prompt_id: str,
    prompt: str,
    prompt_ids: list[int],
    responses: list[Sampled],
    tokenizer: Any,
    model: str,
) -> pa.Table:
    """The trajectory rows of one prompt."""
    n = len(responses)
    texts = tokenizer.batch_decode([r.response_ids for r in responses], skip_special_tokens=True)
    columns: dict[str, Any] = {
        "prompt_id": [prompt_id] * n,
        "sample_id": list(range(n)),
        "prompt": [prompt] * n,
        "prompt_ids": [prompt_ids] * n,
        "response": texts,
        "response_ids": [r.response_ids for r in responses],
        "n_tokens": [len(r.response_ids) for r in responses],
        "finished": [r.finished for r in responses],
        "model": [model] * n,
    }
    return pa.Table.from_pydict(columns, schema=arrow_schema(GENERATED_ARROW))
