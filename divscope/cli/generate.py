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
        int,
        typer.Option(
            "--batch-size",
            min=1,
            help="Sequences decoded together (hf) or handed to vLLM per call; results do not "
            "depend on it under hf.",
        ),
    ] = defaults.BATCH_SIZE,
    dtype: options.DType = defaults.DTYPE,
    device: options.Device = defaults.DEVICE,
    device_map: options.DeviceMap = None,
    overwrite: options.Overwrite = False,
) -> None:
    """Sample --n responses per prompt of PROMPTS from --model and write trajectories to --out.

    Rows carry token ids and text (prompt_ids, response_ids, prompt, response), n_tokens,
    finished (ended with EOS) and the prompts' other columns (e.g. answer). An interrupted run
    resumes where it stopped when rerun with the same settings.
    """
    from divscope.generation import GenerateConfig, Sampling
    from divscope.generation.generate import generate as run

    sampling = Sampling(
        n=n,
        temperature=temperature,
        top_p=top_p,
        max_new_tokens=max_new_tokens,
        seed=seed,
        stop=tuple(stop or ()),
    )
    config = GenerateConfig(
        sampling=sampling, engine=engine, chat_template=chat_template, batch_size=batch_size
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
    )
    typer.echo(report.format())
