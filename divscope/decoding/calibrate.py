"""`calibrate`: a token table, or prompts and two models, in; the gates' calibration JSON out.

What `divscope calibrate` runs. From prompts, the base model samples responses with the
lockstep decoder (`base` policy) and the scoring engine scores them against the RL model in
memory; the calibration itself is `calibration.calibrate_table`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import polars as pl

from divscope.decoding.calibration import Calibration, calibrate_table
from divscope.decoding.lockstep import DecodeConfig, Request
from divscope.defaults import (
    CALIBRATION_SAMPLES,
    DEVICE,
    DTYPE,
    GATE_WINDOW,
    TAKEOVER_RATE,
)
from divscope.errors import DivscopeError


def calibrate(
    source: str | os.PathLike,
    *,
    out: str | os.PathLike,
    rate: float = TAKEOVER_RATE,
    window: int = GATE_WINDOW,
    base: str | None = None,
    rl: str | None = None,
    n: int = CALIBRATION_SAMPLES,
    config: DecodeConfig = DecodeConfig(),  # noqa: B008 (frozen, hashable)
    dtype: str = DTYPE,
    device: str = DEVICE,
    device_map: str | None = None,
    base_device: str | None = None,
    rl_device: str | None = None,
    stop: Sequence[str] = (),
    chat_template: bool = False,
    allow_tokenizer_mismatch: bool = False,
    overwrite: bool = False,
    progress: bool = True,
) -> Calibration:
    """Calibrate the `gated` (CE) and `entropy` (base entropy) gates and write their JSON.

    The JSON is what `cross-sample` reads (`--calibration`).

    Args:
        source: a token table (without `base`/`rl`), or calibration prompts (with them): then
            the base model samples `n` responses per prompt (lockstep decoder, `base` policy)
            and the scoring engine scores them against the RL model.
        out: the calibration JSON.
        rate: target takeover rate r in (0, 1).
        window: W of the gates' recent mean.
        base: the base model (prompts only).
        rl: the RL model (prompts only).
        n: responses per calibration prompt.
        config: sampling of the calibration responses.
        dtype: weights dtype.
        device: `auto`, `cpu`, `cuda` or `cuda:N`.
        device_map: passed to `from_pretrained`.
        base_device: the base model's own device (e.g. `cuda:0`), overriding `device` for it;
            the statistics are computed on the base model's device (prompts only).
        rl_device: the RL model's own device (e.g. `cuda:1`), overriding `device` for it.
        stop: extra stop tokens of the base samples (ids or single-token strings).
        chat_template: wrap each raw calibration question in the base tokenizer's template.
        allow_tokenizer_mismatch: compare models whose ordinary vocabularies differ.
        overwrite: replace an existing output.
        progress: show progress bars on stderr.

    Returns:
        The calibration as written.

    Raises:
        DivscopeError: an existing output without `overwrite`, only one of `base`/`rl`, a
            source that is neither, or a degenerate calibration set.

    Example (`lab_tokens`: the token table of the lab's first 8 trajectories, see conftest.py):
        >>> import tempfile
        >>> import divscope
        >>> tmp = tempfile.TemporaryDirectory()
        >>> calibration = divscope.calibrate(
        ...     lab_tokens, out=f"{tmp.name}/gates.json", rate=0.05, window=16, progress=False)
        >>> sorted(calibration.gates), calibration.n_tokens
        (['entropy', 'gated'], 731)
        >>> tmp.cleanup()
    """
    from divscope.io import TokenTableWriter, scan_token_table

    TokenTableWriter.check_target(out, overwrite=overwrite)
    if (base is None) != (rl is None):
        raise DivscopeError(
            "calibrate: give both --base and --rl (SOURCE is then calibration prompts) or "
            "neither (SOURCE is then a token table from `divscope score`)."
        )
    if base is None:
        table = scan_token_table(source)
        description = str(source)
    else:
        assert rl is not None
        table = _score_base_samples(
            source, base, rl, n, config, dtype, device, device_map, progress, stop,
            chat_template, allow_tokenizer_mismatch, base_device=base_device, rl_device=rl_device,
        )  # fmt: skip
        description = f"{source}: {n} base samples per prompt (base={base}, rl={rl})"
    calibration = calibrate_table(table, rate, window, description)
    calibration.to_json(out)
    return calibration


def _score_base_samples(
    prompts, base, rl, n, config, dtype, device, device_map, progress, stop, chat_template,
    allow_tokenizer_mismatch, *, base_device, rl_device,
) -> pl.DataFrame:  # fmt: skip
    """The token table of `n` base-policy responses per prompt, scored against the RL model."""
    from divscope.decoding.cross_sample import load, note_length_cap
    from divscope.decoding.lockstep import decode
    from divscope.decoding.policies import Base
    from divscope.io import read_prompts
    from divscope.scoring.engine import ScoreConfig, score_table

    frame = read_prompts(prompts)
    loaded = load(
        frame, str(prompts), {"base": base, "rl": rl}, dtype=dtype, device=device,
        device_map=device_map, base_device=base_device, rl_device=rl_device, stop=stop,
        chat_template=chat_template, allow_tokenizer_mismatch=allow_tokenizer_mismatch,
    )  # fmt: skip
    keys = frame["prompt_id"].to_list()
    note_length_cap(keys, loaded.prompt_ids, config.max_new_tokens, loaded.models,
                    enabled=progress)  # fmt: skip
    requests = [
        Request(prompt_id, sample, tuple(ids))
        for prompt_id, ids in zip(keys, loaded.prompt_ids, strict=True)
        for sample in range(n)
    ]
    decoded = decode(
        loaded.models, requests, Base(), config, vocab=loaded.vocab, eos_ids=loaded.stop,
        pad_id=loaded.pad_id, suppressed=loaded.suppressed, progress=progress,
    )  # fmt: skip
    trajectories = pl.DataFrame(
        {
            "prompt_id": [r.prompt_id for r in requests],
            "sample_id": pl.Series([r.sample_id for r in requests], dtype=pl.Int32()),
            "prompt_ids": [list(r.prompt_ids) for r in requests],
            "response_ids": [d.response_ids for d in decoded],
        }
    )
    return score_table(
        trajectories,
        loaded.models["base"],
        loaded.models["rl"],
        loaded.tokenizer,
        ScoreConfig(
            stats=config.sampling, head_dtype=config.head_dtype, max_memory=config.max_memory
        ),
        vocab=loaded.vocab,
        progress=progress,
    )
