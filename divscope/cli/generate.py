"""`divscope generate`: sample n responses per prompt from one model, as trajectories."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from divscope import defaults
from divscope.cli import options


def generate(
    prompts: Annotated[
        Path,
        typer.Argument(help="Prompts: Parquet or JSONL with prompt_id and prompt or prompt_ids."),
    ],
    model: Annotated[
        str, typer.Option("--model", "-m", help="The model: a local directory or a hub id.")
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Trajectories: a directory of per-prompt parts (resumable), or a .parquet / "
            ".jsonl file assembled when all prompts are done.",
        ),
    ],
    n: options.Samples = defaults.SAMPLES,
    temperature: options.Temperature = defaults.TEMPERATURE,
    top_p: options.TopP = defaults.TOP_P,
    max_new_tokens: options.MaxNewTokens = None,
    stop: options.Stop = None,
    seed: options.Seed = defaults.SEED,
    engine: Annotated[
        str,
        typer.Option(
            "--engine", help="hf (transformers, the lockstep decoder) or vllm (divscope[vllm])."
        ),
    ] = defaults.ENGINE,
    chat_template: Annotated[
        bool,
        typer.Option(
            "--chat-template", help="Wrap each raw question in the tokenizer's chat template."
        ),
    ] = False,
    batch_size: Annotated[
        int | None,
        typer.Option(
            "--batch-size",
            min=1,
            help="Sequences decoded together (hf only; vLLM schedules its own batches); on the "
            "CPU results do not depend on it. Default: as many as fit --max-memory (the plan "
            "is printed); on the CPU without it, 32.",
        ),
    ] = None,
    max_memory: options.MaxMemory = None,
    tensor_parallel_size: options.TensorParallelSize = defaults.VLLM_TENSOR_PARALLEL_SIZE,
    gpu_memory_utilization: options.GPUMemoryUtilization = defaults.VLLM_GPU_MEMORY_UTILIZATION,
    max_model_len: options.MaxModelLen = defaults.VLLM_MAX_MODEL_LEN,
    dtype: options.DType = defaults.DTYPE,
    device: options.Device = defaults.DEVICE,
    device_map: options.DeviceMap = None,
    overwrite: options.Overwrite = False,
    resume: options.Resume = False,
    shard: options.Shard = None,
) -> None:
    """Sample responses to every prompt from a model and write them as trajectories.

    --n responses per prompt of PROMPTS from --model, written to --out. Rows carry token ids and
    text (prompt_ids, response_ids, prompt, response), n_tokens, finished (ended with EOS) and the
    prompts' other columns (e.g. answer). Each prompt is written as soon as its --n responses are
    done; an interrupted run continues where it stopped with --resume. --engine vllm queues every
    prompt at once.
    """
    from divscope.generation import GenerateConfig, Sampling, VLLMOptions
    from divscope.generation.generate import generate as run

    sampling = Sampling(
        n=n,
        temperature=temperature,
        top_p=top_p,
        max_new_tokens=max_new_tokens,
        seed=seed,
        stop=tuple(stop or ()),
    )
    vllm = VLLMOptions(
        tensor_parallel_size=tensor_parallel_size,
        gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=max_model_len,
    )
    config = GenerateConfig(
        sampling=sampling,
        engine=engine,
        chat_template=chat_template,
        batch_size=batch_size,
        max_memory=options.memory(max_memory),
        vllm=vllm,
    )
    report = run(
        prompts,
        model,
        out,
        config,
        dtype=dtype,
        device=device,
        device_map=device_map,
        overwrite=overwrite,
        resume=resume,
        shard=shard,
    )
    typer.echo(report.format())
