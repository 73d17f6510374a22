"""`DivergenceCallback`: the monitor inside a `transformers` Trainer (TRL's `GRPOTrainer`
included).

At the start of training (step 0, the policy before its first update: the baseline) and then
every `config.every` optimizer steps (and at the last step), the callback scores the current
policy on the probe against the frozen base (`ProbeScorer`), computes `step_statistics`, and
logs them, with its own time as `divscope/seconds`, through the trainer's logging: into
`state.log_history` and to every logger that `report_to` names. With `out`, it writes the step's
token table and summary line to the evolution directory (`EvolutionDir`), which
`divscope plot --evolution` draws.

Everything that can be wrong with the probe or the tokenizer is checked when the callback is
built (`attach`), before the first training step.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from transformers import Trainer, TrainerCallback

from divscope.monitor.evolution import EvolutionDir
from divscope.monitor.probe import Probe, ProbeConfig, ProbeScorer
from divscope.monitor.statistics import PREFIX, step_statistics
from divscope.scoring.engine import ScoreConfig

SECONDS = f"{PREFIX}seconds"
"""The logged name of a measurement's own wall time (sampling, scoring, statistics, writing)."""


class DivergenceCallback(TrainerCallback):
    """Score the training policy against its frozen base every `config.every` steps and log it.

    Args:
        trainer: the trainer whose policy is watched and whose loggers receive the statistics.
        base: the frozen base model: a directory or hub id (loaded once, on the trainer's
            device), or a loaded model.
        probe: the probe set (`Probe.read`: a file, a frame or rows of prompts or
            trajectories).
        config: how probe prompts are sampled, and `every`.
        out: the evolution directory; None: nothing is written.
        score: top-p, temperature and batching of the scoring.
        device: where a base given by path is loaded; None: the trainer's device.

    Raises:
        DivscopeError: a bad probe, or a trainer tokenizer (`processing_class`) whose ordinary
            vocabulary differs from the base's: before training starts.

    Build it with `attach` (its example), which also adds it to the trainer.
    """

    def __init__(
        self,
        trainer: Any,
        base: str | os.PathLike | Any,
        probe: Probe | str | os.PathLike | Any,
        config: ProbeConfig = ProbeConfig(),  # noqa: B008 (frozen, hashable)
        out: str | os.PathLike | None = None,
        *,
        score: ScoreConfig = ScoreConfig(),  # noqa: B008 (frozen, hashable)
        device: str | None = None,
    ) -> None:
        self.trainer = trainer
        tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
        device = device if device is not None else str(trainer.args.device)
        self.scorer = ProbeScorer(
            base, probe, config, tokenizer=tokenizer, score=score, device=device
        )
        self.config = config
        self.evolution = EvolutionDir(out) if out is not None else None
        self.measured: list[int] = []
        """The steps measured so far, in order."""

    def on_train_begin(self, args, state, control, **kwargs):
        """Measure the policy before its first update (or at the step a resumed run starts
        from, when that step is due)."""
        if state.global_step % self.config.every == 0:
            self.measure(kwargs["model"], state, control)

    def on_step_end(self, args, state, control, **kwargs):
        """Measure every `config.every` steps, and at the last step."""
        step = state.global_step
        if step % self.config.every == 0 or step == state.max_steps:
            self.measure(kwargs["model"], state, control)

    def measure(self, model: Any, state: Any, control: Any = None) -> dict[str, float]:
        """Score `model` (unwrapped) at `state.global_step`, log the statistics, write the
        step's table; the logged values. Only the main process measures (a no-op elsewhere:
        every process holds the same weights). `control`'s `should_log` is left as it was: the
        trainer's own log of this step still happens."""
        step = state.global_step
        if step in self.measured or not state.is_world_process_zero:
            return {}
        start = time.perf_counter()
        policy = self._unwrapped(model)
        with _own_precision(policy):
            tokens = self.scorer.score(policy, step)
        statistics = step_statistics(tokens)
        if self.evolution is not None:
            metadata = self.scorer.metadata(step, policy)
            elapsed = time.perf_counter() - start
            self.evolution.write(step, tokens, statistics, elapsed, metadata)
        seconds = time.perf_counter() - start
        logs = {**statistics, SECONDS: seconds}
        # The base class's `log`: the log history and every `report_to` logger (the
        # integrations are callbacks of `on_log`). A subclass's own `log` may do more: TRL's
        # merges and clears the metrics it has gathered since its last log, which would move
        # them into this entry.
        # The handler's `on_log` clears `should_log`, which the trainer's own log of this step
        # (due after `on_step_end`) needs: it is put back.
        control = self.trainer.control if control is None else control
        should_log = control.should_log
        Trainer.log(self.trainer, dict(logs))
        control.should_log = self.trainer.control.should_log = should_log
        self.measured.append(step)
        return logs

    def _unwrapped(self, model: Any) -> Any:
        accelerator = getattr(self.trainer, "accelerator", None)
        if accelerator is not None:
            return accelerator.unwrap_model(model)
        return getattr(model, "module", model)


@contextmanager
def _own_precision(model: Any) -> Iterator[None]:
    """Run `model` in its weights' own dtype: under mixed precision (`bf16=True`, `fp16=True`)
    accelerate wraps the model's `forward` in autocast and keeps the original as
    `_original_forward`; the monitor scores the policy as it is saved (its weights' dtype, the
    checkpoint that `divscope score` would read), so the wrapper is set aside while it runs."""
    original = model.__dict__.get("_original_forward")
    wrapped = model.__dict__.get("forward")
    if original is None or wrapped is None:
        yield
        return
    model.forward = original
    try:
        yield
    finally:
        model.forward = wrapped


def attach(
    trainer: Any,
    base: str | os.PathLike | Any,
    probe: Probe | str | os.PathLike | Any,
    config: ProbeConfig = ProbeConfig(),  # noqa: B008 (frozen, hashable)
    out: str | os.PathLike | None = None,
    *,
    score: ScoreConfig = ScoreConfig(),  # noqa: B008 (frozen, hashable)
) -> DivergenceCallback:
    """Build a `DivergenceCallback` for `trainer` and add it (`trainer.add_callback`).

    Args:
        trainer: a `transformers.Trainer`, TRL's `GRPOTrainer` included.
        base: the frozen base model (a directory or hub id, or a loaded model).
        probe: the probe set: a file, a frame or rows of prompts or trajectories.
        config: how probe prompts are sampled, and how often (`every`).
        out: the evolution directory; None: nothing is written.
        score: top-p, temperature and batching of the scoring (as `divscope score`'s).

    Returns:
        The callback: its `measured` steps, its `scorer`.

    Raises:
        DivscopeError: a bad probe, or a tokenizer that differs from the base's.

    Example (a plain `Trainer` on the lab's base model, from the repository root;
    docs/monitor.md has the TRL one):
        >>> import tempfile
        >>> from transformers import Trainer, TrainingArguments
        >>> from divscope.models.loading import load_model
        >>> from divscope.models.tokenizers import load_tokenizer
        >>> tmp = tempfile.TemporaryDirectory()
        >>> args = TrainingArguments(tmp.name, max_steps=2, use_cpu=True, report_to="none")
        >>> trainer = Trainer(load_model("fixtures/lab/base"), args,
        ...                   processing_class=load_tokenizer("fixtures/lab/base"))
        >>> probe = [{"prompt_id": "p", "prompt": "Ana has 3 coins."}]
        >>> callback = attach(trainer, "fixtures/lab/base", probe, ProbeConfig(every=2,
        ...                   max_new_tokens=8))
        >>> callback in trainer.callback_handler.callbacks
        True
        >>> tmp.cleanup()
    """
    callback = DivergenceCallback(trainer, base, probe, config, out, score=score)
    trainer.add_callback(callback)
    return callback
