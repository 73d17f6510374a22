"""`divscope watch`: score each Hugging Face checkpoint a trainer saves, against the frozen base.

For trainers that are not `transformers` Trainers (verl, OpenRLHF; or any run after the fact):
each checkpoint directory under CHECKPOINTS is scored on the probe with the frozen base, loaded
once (`ProbeScorer`), in step order, into an evolution directory (`EvolutionDir`: one token
table per step and `summary.jsonl`) that `divscope plot --evolution OUT` draws as Fig. 11.

A checkpoint is a subdirectory whose name ends in its training step (`checkpoint-500`,
`global_step_500`, `step-500`, `rl-step-500`) holding a Hugging Face model: `config.json` and
its weights (`*.safetensors` or `pytorch_model*.bin`, every shard its index names), directly or,
as verl's merger writes it, under `actor/huggingface`. With `--follow` it must also be complete: its
weights files' names and sizes unchanged for `--every-seconds` (two polls at least), so that a
checkpoint still being written is scored on a later poll. Steps already in OUT are skipped (a
restart resumes).
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import polars as pl

from divscope.defaults import DEVICE
from divscope.errors import DivscopeError
from divscope.monitor.evolution import EvolutionDir
from divscope.monitor.probe import Probe, ProbeConfig
from divscope.params import LIBRARY_ONLY, Flag

STEP_NAME = re.compile(r"^(?:.*?[-_])?(\d+)$")
"""A checkpoint directory's name: anything, then `-` or `_`, then the step (or digits alone)."""
VERL_MODEL = Path("actor", "huggingface")
"""Where verl's model merger writes the Hugging Face model inside `global_step_N`."""
SHARDS = ("*rank*.pt", "*.distcp")
"""Files of a sharded FSDP/DCP checkpoint (verl's `model_world_size_W_rank_R.pt`)."""
POLL_SLICE = 0.25
"""Seconds between two looks at a stop request while --follow waits (how fast Ctrl-C ends it)."""
OUT_NAME = "divscope-evolution"
"""The default evolution directory, inside CHECKPOINTS."""


@dataclass(frozen=True)
class Watched:
    """The directory of checkpoints watched, and whether `watch` keeps polling it.

    >>> Watched.of("runs/grpo").follow, Watched("runs/grpo", follow=True).every_seconds
    (False, 30.0)
    """

    path: Annotated[Path, Flag(argument=True, metavar="checkpoints")]
    """The directory the trainer saves its checkpoints into."""
    follow: bool = False
    """Keep polling CHECKPOINTS for new complete checkpoints until interrupted (Ctrl-C ends
    after the checkpoint being scored); default: one pass over what is there."""
    every_seconds: Annotated[float, Flag(min=0)] = 30.0
    """Seconds between two polls with --follow; a checkpoint is scored once its weights files
    are unchanged over two polls at least this far apart."""
    stop_after_idle: Annotated[float | None, Flag(min=0)] = None
    """With --follow, stop after this many seconds without a new checkpoint (for scripts);
    default: never."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @classmethod
    def of(cls, watched: str | os.PathLike | Watched) -> Watched:
        """`watched` as this class: as it is, or a path watched in one pass."""
        return watched if isinstance(watched, cls) else cls(Path(watched))


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint directory found under CHECKPOINTS."""

    step: int
    """Its training step (the digits its name ends in)."""
    path: Path
    """The directory under CHECKPOINTS."""
    model: Path | None
    """The Hugging Face model directory (the checkpoint, or verl's `actor/huggingface`); None
    when it has no `config.json` yet."""
    weights: tuple[tuple[str, int], ...] = ()
    """(name, size) of each weights file, for the completeness check."""
    missing: str | None = None
    """Why it cannot be scored yet (no weights, a shard its index names is absent); None when
    it can."""


@dataclass(frozen=True)
class WatchedStep:
    """One checkpoint scored: what `watch` reports per checkpoint (`on_step`)."""

    step: int
    checkpoint: Path
    statistics: dict[str, float]
    """`step_statistics` of its token table."""
    seconds: float
    """Wall time of loading and scoring it."""

    def line(self) -> str:
        """One line: the step, the headline statistics, the time.

        >>> statistics = {"divscope/js_above_0.1": 0.0321, "divscope/js_below_0.001": 0.81,
        ...     "divscope/js_p99": 0.4, "divscope/ce_gini": 0.7, "divscope/overlap_1": 0.93,
        ...     "divscope/n_tokens": 800}
        >>> print(WatchedStep(30, Path("ckpt/checkpoint-30"), statistics, 4.2).line())
        step 30: js>0.1 3.21%, js<1e-3 81.00%, js p99 0.4, Gini(ce) 0.700, overlap_1 0.930, \
800 tokens, 4.2 s (checkpoint-30)
        """
        s = self.statistics

        def get(name: str) -> float:
            return s.get(f"divscope/{name}", float("nan"))

        return (
            f"step {self.step}: js>0.1 {get('js_above_0.1'):.2%}, "
            f"js<1e-3 {get('js_below_0.001'):.2%}, js p99 {get('js_p99'):.3g}, "
            f"Gini(ce) {get('ce_gini'):.3f}, overlap_1 {get('overlap_1'):.3f}, "
            f"{get('n_tokens'):,.0f} tokens, {self.seconds:.1f} s ({self.checkpoint.name})"
        )


@dataclass(frozen=True)
class WatchReport:
    """What `watch` did."""

    out: Path
    """The evolution directory."""
    scored: list[WatchedStep] = field(default_factory=list)
    """The checkpoints scored by this run, in order."""
    skipped: list[int] = field(default_factory=list)
    """Steps found under CHECKPOINTS whose table OUT already held."""
    interrupted: bool = False
    """Stopped by Ctrl-C (after the checkpoint being scored)."""

    @property
    def summary(self) -> pl.DataFrame:
        """OUT's running summary, one row per step (`EvolutionDir.summary`)."""
        return EvolutionDir(self.out).summary()


def find_checkpoints(directory: str | os.PathLike) -> list[Checkpoint]:
    """The checkpoint directories under `directory`, by step: each subdirectory whose name ends
    in a step number and holds (or will hold) a Hugging Face model.

    Raises:
        DivscopeError: `directory` is missing, a step found twice, or a verl checkpoint of FSDP
            shards without a merged Hugging Face model (saying to merge it first).

    >>> [(c.step, c.path.name) for c in find_checkpoints("fixtures/lab")]
    [(30, 'rl-step-30'), (60, 'rl-step-60'), (90, 'rl-step-90'), (120, 'rl-step-120')]
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise DivscopeError(
            f"{directory}: no such directory of checkpoints; give the directory the trainer "
            "saves checkpoint-N (or global_step_N) directories into."
        )
    found: dict[int, Checkpoint] = {}
    for path in sorted(directory.iterdir()):
        match = STEP_NAME.match(path.name)
        if not path.is_dir() or match is None:
            continue
        checkpoint = _checkpoint(int(match.group(1)), path)
        if checkpoint is None:
            continue
        if checkpoint.step in found:
            first = found[checkpoint.step].path.name
            raise DivscopeError(
                f"{directory}: step {checkpoint.step} named twice ({first}, {path.name}); keep "
                "one checkpoint per step."
            )
        found[checkpoint.step] = checkpoint
    return [found[step] for step in sorted(found)]


def _checkpoint(step: int, path: Path) -> Checkpoint | None:
    """The checkpoint at `path`, None when it is no model directory (and no verl one)."""
    model = next((m for m in (path, path / VERL_MODEL) if (m / "config.json").is_file()), None)
    shards = [p for pattern in SHARDS for p in (*path.glob(pattern), *path.glob(f"*/{pattern}"))]
    weights = [] if model is None else _weights(model)
    if not weights and shards:
        raise DivscopeError(
            f"{path}: a sharded FSDP checkpoint (e.g. {shards[0].name}) without a Hugging Face "
            "model; merge it first (verl: python -m verl.model_merger merge --backend fsdp "
            f"--local_dir {path / 'actor'} --target_dir {path / VERL_MODEL}), then watch again."
        )
    if model is None:
        return None
    sizes = tuple((p.name, p.stat().st_size) for p in weights)
    missing = None if weights else "no weights file (*.safetensors, pytorch_model*.bin) yet"
    for index in model.glob("*.index.json"):
        try:
            listed = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
        except (ValueError, KeyError):
            missing = f"{index.name} is not complete yet"
            continue
        absent = sorted(listed - {name for name, _ in sizes})
        if absent:
            missing = f"{index.name} names {absent[0]}, not there yet"
    return Checkpoint(step, path, model, sizes, missing)


def _weights(model: Path) -> list[Path]:
    files = [*model.glob("*.safetensors"), *model.glob("pytorch_model*.bin")]
    return sorted(p for p in files if p.is_file())


def watch(
    checkpoints: Watched,
    base: Annotated[str, Flag("--base")],
    probe: Annotated[Path, Flag("--probe")],
    out: Annotated[Path | None, Flag("--out", "-o")] = None,
    sampling: Annotated[ProbeConfig, Flag(omit=("every",))] = ProbeConfig(),  # noqa: B008
    device: Annotated[str, Flag("--device")] = DEVICE,
    *,
    on_step: Annotated[Callable[[WatchedStep], None] | None, LIBRARY_ONLY] = None,
    progress: Annotated[bool, LIBRARY_ONLY] = True,
    stop: Annotated[threading.Event | None, LIBRARY_ONLY] = None,
) -> WatchReport:
    """Score each checkpoint a trainer saves against the frozen base, into an evolution directory.

    For trainers that are not transformers Trainers (verl, OpenRLHF), or after the fact: each
    Hugging Face checkpoint under CHECKPOINTS (a subdirectory named for its step: checkpoint-500,
    global_step_500, step-500, rl-step-500) is scored on the probe against --base, loaded once, in
    step order: the probe's prompts sampled from the checkpoint with a fixed seed (or its
    trajectories teacher-forced), scored base vs checkpoint. Each step's token table and a line of
    its statistics go to OUT (`rl-step-N.parquet`, `summary.jsonl`), which `divscope plot
    --evolution OUT` draws as Fig. 11. Steps already in OUT are skipped, so a rerun resumes. With
    --follow it keeps polling for new complete checkpoints (weights unchanged over two polls at
    least --every-seconds apart) until Ctrl-C (which ends after the checkpoint being scored) or
    --stop-after-idle.

    Args:
        checkpoints: the directory of checkpoints and whether to keep polling it (`Watched`;
            a path: one pass).
        base: The frozen base model: a local directory or hub id.
        probe: The probe: prompts (prompt_id + prompt or prompt_ids; sampled from each
            checkpoint) or trajectories (+ response or response_ids; teacher-forced), JSONL or
            Parquet; e.g. 32 prompts of the evaluation set.
        out: The evolution directory (resumed when it exists); default:
            CHECKPOINTS/divscope-evolution.
        sampling: How each checkpoint is sampled on the probe prompts (`ProbeConfig`).
        device: Where the base and each checkpoint run: auto (CUDA when present), cpu, cuda or
            cuda:N; each checkpoint in the base's dtype (auto: float32 on CPU, the checkpoint's
            half precision on GPU).
        on_step: called with each scored checkpoint (the command prints its line).
        progress: periodic progress lines on stderr (a bar on a terminal).
        stop: set it to stop after the checkpoint being scored (as Ctrl-C does).

    Returns:
        A `WatchReport`: the steps scored and skipped, and OUT's summary.

    Raises:
        DivscopeError: a missing CHECKPOINTS, a bad probe or a base that cannot be loaded
            (before any checkpoint is scored), OUT holding another base's or probe's evolution,
            or a verl checkpoint of FSDP shards not yet merged to a Hugging Face model.

    Example (two lab checkpoints, a probe of two prompts):
        >>> import shutil, tempfile
        >>> import divscope
        >>> from divscope.monitor.probe import ProbeConfig
        >>> tmp = Path(tempfile.mkdtemp())
        >>> for step in (30, 60):
        ...     _ = shutil.copytree(f"fixtures/lab/rl-step-{step}", tmp / f"checkpoint-{step}")
        >>> probe = pl.read_ndjson("fixtures/lab/prompts/eval.jsonl").head(2)
        >>> probe.write_ndjson(tmp / "probe.jsonl")
        >>> report = divscope.watch(tmp, "fixtures/lab/base", tmp / "probe.jsonl",
        ...     sampling=ProbeConfig(max_new_tokens=8), progress=False)
        >>> [s.step for s in report.scored], report.summary["step"].to_list()
        ([30, 60], [30, 60])
        >>> divscope.watch(tmp, "fixtures/lab/base", tmp / "probe.jsonl",
        ...     sampling=ProbeConfig(max_new_tokens=8), progress=False).skipped
        [30, 60]
        >>> shutil.rmtree(tmp)
    """
    from divscope.monitor.probe import ProbeScorer
    from divscope.monitor.statistics import step_statistics
    from divscope.progress import note

    watched = Watched.of(checkpoints)
    checkpoints = watched.path
    find_checkpoints(checkpoints)  # a missing directory or unmerged shards fail before loading
    evolution = EvolutionDir(checkpoints / OUT_NAME if out is None else out)
    # a bad probe (empty, ids out of the base's vocabulary) fails before the base is loaded
    scorer = ProbeScorer(base, Probe.read(probe), sampling, device=device)
    parameter = next(scorer.base.parameters())
    model_options = {"device": str(parameter.device), "dtype": parameter.dtype}
    _check_resumable(evolution, scorer)
    stopping = stop if stop is not None else threading.Event()
    scored: list[WatchedStep] = []
    skipped: set[int] = set()
    seen: dict[int, tuple] = {}  # step -> its weights and since when (--follow)
    idle_since = time.monotonic()
    waiting = False
    with _interruptible(stopping) as interrupt:

        def stopped() -> bool:
            return stopping.is_set() or interrupt.requested

        while not stopped():
            done = set(evolution.steps())
            ready = []
            for checkpoint in find_checkpoints(checkpoints):
                if checkpoint.step in done:
                    skipped |= {checkpoint.step} - {s.step for s in scored}
                    continue
                if _ready(checkpoint, seen, watched):
                    ready.append(checkpoint)
                elif not watched.follow and progress:
                    note(f"watch: {checkpoint.path.name} not scored: {checkpoint.missing}")
            if ready:
                waiting = False
                scored += _score_all(ready, scorer, evolution, model_options, stopped,
                                     on_step, progress, step_statistics)  # fmt: skip
                idle_since = time.monotonic()
                continue  # poll again at once: more may have appeared meanwhile
            if not watched.follow:
                break
            idle = time.monotonic() - idle_since
            if watched.stop_after_idle is not None and idle >= watched.stop_after_idle:
                break
            if not waiting and progress:
                note(f"watch: waiting for new checkpoints in {checkpoints} (Ctrl-C stops)")
                waiting = True
            wait = watched.every_seconds
            if watched.stop_after_idle is not None:
                wait = min(wait, max(watched.stop_after_idle - idle, 0.0))
            end = time.monotonic() + wait
            while not stopped() and (left := end - time.monotonic()) > 0:
                stopping.wait(min(left, POLL_SLICE))  # a stop set by another thread wakes it
        interrupted = stopped()
    return WatchReport(evolution.path, scored, sorted(skipped), interrupted=interrupted)


def _ready(checkpoint: Checkpoint, seen: dict[int, tuple], watched: Watched) -> bool:
    """Whether to score `checkpoint` now: its weights are all there and, with --follow, their
    names and sizes have not changed for `every_seconds` (`seen`: step -> the weights and when
    they were first seen so)."""
    if checkpoint.missing is not None:
        seen.pop(checkpoint.step, None)
        return False
    if not watched.follow:
        return True
    now = time.monotonic()
    weights, since = seen.get(checkpoint.step, (None, now))
    if weights != checkpoint.weights:
        seen[checkpoint.step] = (checkpoint.weights, now)
        return False
    return now - since >= watched.every_seconds


def _score_all(
    ready: list[Checkpoint],
    scorer: Any,
    evolution: EvolutionDir,
    model_options: dict[str, Any],
    stopped: Callable[[], bool],
    on_step: Callable[[WatchedStep], None] | None,
    progress: bool,
    step_statistics: Callable[[pl.DataFrame], dict[str, float]],
) -> list[WatchedStep]:
    """Score each of `ready` in step order into `evolution`, until `stopped()`."""
    from divscope.models.loading import load_model
    from divscope.progress import Progress

    scored = []
    with Progress(len(ready), desc="watch", unit="checkpoint", enabled=progress) as bar:
        for checkpoint in ready:
            if stopped():
                break
            start = time.perf_counter()
            policy = load_model(str(checkpoint.model), **model_options)
            tokens = scorer.score(policy, checkpoint.step)
            statistics = step_statistics(tokens)
            seconds = time.perf_counter() - start
            metadata = {
                **scorer.metadata(checkpoint.step, policy),
                "checkpoint": str(checkpoint.path),
            }
            evolution.write(checkpoint.step, tokens, statistics, seconds, metadata)
            del policy
            watched = WatchedStep(checkpoint.step, checkpoint.path, statistics, seconds)
            scored.append(watched)
            if on_step is not None:
                on_step(watched)
            bar.update(1)
    return scored


def _check_resumable(evolution: EvolutionDir, scorer: Any) -> None:
    """Refuse to add steps to an evolution directory of another base model or probe."""
    from divscope.io import read_metadata

    steps = evolution.steps()
    if not steps:
        return
    had = read_metadata(evolution.table(steps[-1]))
    now = scorer.metadata(steps[-1])
    compared = {
        "base model": (
            _place((had.get("models") or {}).get("base")),
            _place(now["models"]["base"]),
        ),
        "probe": (_place(had.get("probe")), _place(now["probe"])),
        "probe sampling": (had.get("sampling"), now["sampling"]),
    }
    for what, (was, is_) in compared.items():
        if was is not None and was != is_:
            raise DivscopeError(
                f"{evolution.path}: holds an evolution of another {what} ({was}, now {is_}); "
                "give another --out, or delete it to start again."
            )


def _place(name: Any) -> Any:
    """A model's or probe's name as compared: an existing path resolved, else as it is."""
    return str(Path(name).resolve()) if isinstance(name, str) and Path(name).exists() else name


class _interruptible:
    """Within it, Ctrl-C (SIGINT) sets `requested` (the checkpoint being scored is finished);
    a second Ctrl-C interrupts at once. Outside the main thread, nothing is installed. The
    handler only sets a flag and writes with `os.write`: a handler that set a `threading.Event`
    or printed could deadlock on a lock the interrupted code holds."""

    def __init__(self, stopping: threading.Event) -> None:
        self.stopping = stopping
        self.requested = False
        self.previous: Any = None

    def __enter__(self) -> _interruptible:
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested or self.stopping.is_set():
            raise KeyboardInterrupt
        self.requested = True
        os.write(2, b"note: watch: stopping after the checkpoint being scored (Ctrl-C again to "
                    b"stop now)\n")  # fmt: skip

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


__all__ = ["Checkpoint", "WatchReport", "Watched", "WatchedStep", "find_checkpoints", "watch"]
