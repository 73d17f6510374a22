"""`calibrate`: a token table, or prompts and two models, in; the gates' calibration JSON out.

What `divscope calibrate` runs. From prompts, the base model samples responses with the
lockstep decoder (`base` policy) and the scoring engine scores them against the RL model in
memory; the calibration itself is `gates.calibrate_table`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Annotated

import pyarrow as pa

from divscope.decoding.gates import Calibration, calibrate_table
from divscope.decoding.lockstep import DecodeConfig
from divscope.decoding.request import Request
from divscope.decoding.settings import parse_floats
from divscope.defaults import CALIBRATION_SAMPLES, GATE_WINDOW, TAKEOVER_RATES
from divscope.errors import DivscopeError
from divscope.params import LIBRARY_ONLY, Flag, ModelPair, Output


@dataclass(frozen=True)
class CalibrationModels(ModelPair):
    """The models that sample and score calibration prompts; none for a token table.

    >>> CalibrationModels().base is None
    True
    """

    base: str | None = None  # type: ignore[assignment] (optional here: a token table needs none)
    """Base model (SOURCE is then calibration prompts)."""


def parse_rates(text: str) -> tuple[float, ...]:
    """Parse `--rate`: one target takeover rate r in (0, 1), or several, comma-separated.

    >>> parse_rates("0.05"), parse_rates("0.01, 0.02,0.05")
    ((0.05,), (0.01, 0.02, 0.05))

    Raises:
        DivscopeError: a value that is not a number, outside (0, 1), or given twice.
    """
    rates = parse_floats(text, "--rate", "0.01,0.02,0.05,0.1 (rates in (0, 1))")
    bad = [r for r in rates if not 0.0 < r < 1.0]
    if bad:
        raise DivscopeError(f"--rate {text!r}: {bad[0]} is not in (0, 1).")
    return rates


@dataclass(frozen=True)
class Target:
    """What the gates are calibrated for, and on how many base samples.

    >>> Target(rate=0.05, window=16).rate  # one rate, or several
    (0.05,)
    >>> Target().rate, Target().n  # the defaults: 4 base samples per calibration prompt
    ((0.01, 0.02, 0.05, 0.1), 4)
    """

    rate: Annotated[tuple[float, ...], Flag("--rate", parse=parse_rates, metavar="R[,R...]")] = (
        TAKEOVER_RATES
    )
    """Target takeover rates r in (0, 1), comma-separated: one (tau, lambda) per gate and
    rate (the points of `cross-sample --policy gated`'s knee)."""
    window: Annotated[int, Flag(min=1)] = GATE_WINDOW
    """W, previous steps of the gate's recent mean."""
    n: Annotated[int, Flag("--n", "-n", min=1)] = CALIBRATION_SAMPLES
    """Responses sampled per calibration prompt (prompts only)."""

    def __post_init__(self) -> None:
        if isinstance(self.rate, int | float):
            object.__setattr__(self, "rate", (float(self.rate),))


def calibrate(
    source: str | os.PathLike,
    out: Output,
    target: Target = Target(),  # noqa: B008 (frozen, hashable)
    models: CalibrationModels = CalibrationModels(),  # noqa: B008 (frozen, hashable)
    config: Annotated[DecodeConfig, Flag(omit=("window", "delta_alignment"))] = DecodeConfig(),  # noqa: B008
    *,
    progress: Annotated[bool, LIBRARY_ONLY] = True,
) -> Calibration:
    """Calibrate the `gated` (CE) and `entropy` (base entropy) gates and write their JSON.

    For each takeover rate r of --rate: tau is the (1 - r) quantile of the scores s, and
    lambda is the mean of the scores above tau over the mean score; the scores are a token
    table's rows, or --n base samples per calibration prompt scored against --rl (sampled and
    scored once for all the rates). Writes a JSON that `cross-sample --calibration` reads:
    `gated` and `entropy` then run once per rate.

    Args:
        source: A token table from `divscope score`, or calibration prompts (with --base and
            --rl): then the base model samples `n` responses per prompt (lockstep decoder,
            `base` policy) and the scoring engine scores them against the RL model.
        out: the calibration JSON (or its path).
        target: the takeover rates, the gates' window and the samples per prompt.
        models: the base and the RL model (prompts only; a `ModelPair` will do), and where
            they run.
        config: sampling, length cap, stop tokens, chat template and system prompt of the
            calibration responses (prompts only).
        progress: show progress bars on stderr.

    Returns:
        The calibration as written.

    Raises:
        DivscopeError: an existing output without `overwrite`, only one of `base`/`rl`, a
            source that is neither, or a degenerate calibration set.

    Example (`lab_tokens`: the token table of the lab's first 8 trajectories, see conftest.py):
        >>> import tempfile
        >>> import divscope
        >>> from divscope.decoding.calibrate import Target
        >>> tmp = tempfile.TemporaryDirectory()
        >>> calibration = divscope.calibrate(
        ...     lab_tokens, f"{tmp.name}/gates.json", Target(rate=(0.02, 0.05), window=16),
        ...     progress=False)
        >>> sorted(calibration.gates), calibration.n_tokens, len(calibration.gates_of("gated"))
        (['entropy', 'gated'], 731, 2)
        >>> tmp.cleanup()
    """
    from divscope.decoding.gates import SCORE_COLUMNS
    from divscope.output import check_target
    from divscope.tables import read_columns

    out = Output.of(out)
    check_target(out.path, overwrite=out.overwrite)
    base, rl = models.base, models.rl
    if (base is None) != (rl is None):
        raise DivscopeError(
            "calibrate: give both --base and --rl (SOURCE is then calibration prompts) or "
            "neither (SOURCE is then a token table from `divscope score`)."
        )
    if base is None:
        table = read_columns(source, SCORE_COLUMNS.values(), what="calibration")
        description = str(source)
    else:
        table, chat = _score_base_samples(source, models, target.n, config, progress)
        description = f"{source}: {target.n} base samples per prompt (base={base}, rl={rl}{chat})"
    calibration = calibrate_table(table, target.rate, target.window, description)
    calibration.to_json(out.path)
    return calibration


def _score_base_samples(
    prompts: str | os.PathLike, models: ModelPair, n: int, config: DecodeConfig, progress: bool
) -> tuple[pa.Table, str]:
    """The token table of `n` base-policy responses per prompt, scored against the RL model,
    and a note of the chat settings for the calibration's description ("" without a
    template)."""
    from divscope.decoding.inputs import load, note_length_cap
    from divscope.decoding.lockstep import decode
    from divscope.decoding.policies import Base
    from divscope.models.pair import open_pair
    from divscope.prompts import chat_settings, read_prompts_arrow
    from divscope.scoring.engine import ScoreConfig, score_trajectories

    frame = read_prompts_arrow(prompts)
    chat = chat_settings(frame, config.chat, source=str(prompts))  # a system prompt: templated
    note = "; chat template" if chat["chat_template"] else ""
    if chat["system_prompt"] is not None:
        note += f", system prompt {chat['system_prompt']!r}"
    loaded = load(frame, str(prompts), open_pair(models), stop=config.stop, chat=config.chat)
    keys = frame["prompt_id"].to_pylist()
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
    trajectories = pa.table(
        {
            "prompt_id": pa.array([r.prompt_id for r in requests], pa.large_string()),
            "sample_id": pa.array([r.sample_id for r in requests], pa.int32()),
            "prompt_ids": [list(r.prompt_ids) for r in requests],
            "response_ids": [d.response_ids for d in decoded],
        }
    )
    batches: list[pa.Table] = []
    score_trajectories(
        trajectories,
        loaded.models["base"],
        loaded.models["rl"],
        loaded.tokenizer,
        ScoreConfig(
            stats=config.sampling,
            head_dtype=config.head_dtype,
            max_memory=config.max_memory,
            source="base",  # base rollouts; a table in memory has no metadata: the role's name
        ),
        sink=batches.append,
        vocab=loaded.vocab,
        progress=progress,
    )
    return pa.concat_tables(batches), note
