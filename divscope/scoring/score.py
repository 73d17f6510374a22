"""`score`: a trajectory file and two models in, a token table on disk out.

This is what `divscope score` runs: read and validate the trajectories, load both models and
their (shared) tokenizer, stream the engine's batches into a `TokenTableWriter` with the run's
provenance as metadata.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from divscope.defaults import DEVICE, DTYPE
from divscope.scoring.engine import ScoreConfig, ScoreSummary


def score(
    trajectories: str | os.PathLike,
    *,
    base: str,
    rl: str,
    out: str | os.PathLike,
    config: ScoreConfig = ScoreConfig(),  # noqa: B008 (frozen, hashable)
    dtype: str = DTYPE,
    device: str = DEVICE,
    device_map: str | None = None,
    overwrite: bool = False,
    progress: bool = True,
    allow_tokenizer_mismatch: bool = False,
) -> ScoreSummary:
    """Score every response token of a trajectory file under a base and an RL model.

    Args:
        trajectories: Parquet or JSONL trajectories, ids or text (docs/contracts.md,
            "Trajectories").
        base: the base model, a local directory or a hub id.
        rl: the RL-fine-tuned model; its tokenizer's ordinary vocabulary must be the base
            model's (`divscope.vocab.check_tokenizers`: differing special tokens only warn).
        out: the token table: a path ending in `.parquet` is one file, any other path a
            directory of `part-*.parquet` files. Written atomically.
        config: top-p, temperature, batching and chunking.
        dtype: weights dtype of both models, `auto` (float32 on CPU, the base checkpoint's on a
            GPU), `float32`, `bfloat16` or `float16`.
        device: `auto`, `cpu`, `cuda` or `cuda:N`.
        device_map: passed to `from_pretrained` for models larger than one GPU.
        overwrite: replace an existing output.
        progress: show a progress bar on stderr.
        allow_tokenizer_mismatch: score models whose ordinary vocabularies differ (with a
            warning): at the ids whose tokens differ the divergences compare different strings.

    Returns:
        The run's summary (sequences, tokens, JS percentiles, fallback count).

    Raises:
        DivscopeError: bad trajectories, an existing output without `overwrite`, models that
            cannot be loaded or whose ordinary vocabularies differ (unless
            `allow_tokenizer_mismatch`), or a sequence beyond a context.

    Example:
        >>> import divscope
        >>> summary = divscope.score(  # doctest: +SKIP
        ...     "fixtures/lab/trajectories.jsonl", base="fixtures/lab/base",
        ...     rl="fixtures/lab/rl", out="runs/lab-tokens.parquet")
    """
    from divscope import __version__
    from divscope.io import TokenTableWriter, attach_token_ids, read_trajectories
    from divscope.models import describe_model, load_models, load_tokenizer
    from divscope.scoring.engine import score_trajectories
    from divscope.vocab import check_tokenizers

    # Cheap checks first: a bad file or an existing output should not wait for model loading.
    TokenTableWriter.check_target(out, overwrite=overwrite)
    frame = read_trajectories(trajectories)
    tokenizer = load_tokenizer(base)
    compatibility = check_tokenizers(
        {"base": tokenizer, "rl": load_tokenizer(rl)}, allow_mismatch=allow_tokenizer_mismatch
    )
    frame = attach_token_ids(frame, tokenizer)
    models = load_models({"base": base, "rl": rl}, dtype=dtype, device=device,
                         device_map=device_map)  # fmt: skip
    metadata = {
        "models": {
            name: describe_model(model, path)
            for (name, model), path in zip(models.items(), (base, rl), strict=True)
        },
        "trajectories": str(Path(trajectories)),
        "tokenizers": compatibility.metadata(),
        "top_p": config.stats.top_p,
        "temperature": config.stats.temperature,
        "window": config.stats.window,
        "dtype": dtype,
        "head_dtype": config.head_dtype,
        "device": device if device_map is None else f"device_map={device_map}",
        "divscope_version": __version__,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    with TokenTableWriter(out, metadata, overwrite=overwrite) as writer:
        return score_trajectories(
            frame,
            models["base"],
            models["rl"],
            tokenizer,
            config,
            sink=writer.write,
            progress=progress,
            vocab=compatibility.vocab,
        )
