"""The probe: a fixed set of prompts (or trajectories) scored against a frozen base model while
a policy trains.

`Probe.read` reads and validates the probe set; `ProbeScorer` loads the frozen base once,
checks the probe and the tokenizer before any training step, and at each measurement samples
the current policy on the probe prompts with a fixed seed (`divscope.generation.engine.HFEngine`:
the same uniforms at every step, so two steps differ only by the policy) or teacher-forces the
probe trajectories, then scores them with the scoring engine (`score_table`), base vs policy.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl

from divscope.defaults import SEED
from divscope.errors import DivscopeError
from divscope.scoring.engine import ScoreConfig

SOURCE = "rl"
"""The token table's `source` of every probe row: the policy being trained."""


@dataclass(frozen=True)
class ProbeConfig:
    """How the current policy is sampled on the probe prompts (ignored for probe trajectories),
    and how often.

    >>> ProbeConfig(every=5).max_new_tokens
    224
    """

    n: int = 1
    """Responses per probe prompt (sample ids 0..n-1)."""
    max_new_tokens: int = 224
    """Length cap of a probe response (the lab's GRPO rollouts' cap)."""
    temperature: float = 1.0
    """Sampling temperature."""
    top_p: float = 1.0
    """Sampling top-p (1: the full distribution, as GRPO samples)."""
    seed: int = SEED
    """Seed of the sampling: the same uniforms at every measurement."""
    every: int = 10
    """Training steps between two measurements (the callback's N)."""

    def __post_init__(self) -> None:
        for name in ("n", "max_new_tokens", "every"):
            if getattr(self, name) < 1:
                raise DivscopeError(f"ProbeConfig.{name} must be >= 1, got {getattr(self, name)}.")
        if not self.temperature > 0:
            raise DivscopeError(f"ProbeConfig.temperature must be > 0, got {self.temperature}.")
        if not 0 < self.top_p <= 1:
            raise DivscopeError(f"ProbeConfig.top_p must be in (0, 1], got {self.top_p}.")


class Probe:
    """The fixed probe set: prompts (sampled from the current policy at each measurement) or
    trajectories (teacher-forced: the same tokens at every step).

    Build it with `Probe.read`. A table with `response_ids` or `response` is trajectories
    (`divscope.io.read_trajectories` rules), any other prompts (`divscope.prompts.read_prompts`
    rules).

    >>> probe = Probe.read([{"prompt_id": "a", "prompt": "Ana has 3 coins."}])
    >>> probe.teacher_forced, probe.frame.height
    (False, 1)
    """

    def __init__(self, frame: pl.DataFrame, *, teacher_forced: bool, source: str) -> None:
        self.frame = frame
        """The validated prompts or trajectories."""
        self.teacher_forced = teacher_forced
        """Trajectories, teacher-forced at every step (else prompts, sampled)."""
        self.source = source
        """Where the probe came from, for messages and metadata."""

    @classmethod
    def read(cls, source: str | os.PathLike | pl.DataFrame | list[dict]) -> Probe:
        """The probe in `source`: a prompt or trajectory file (Parquet or JSONL), a frame, or a
        list of rows.

        Raises:
            DivscopeError: an empty probe, or one that breaks the prompts' or trajectories'
                rules (naming the file and what to do).
        """
        from divscope.io import read_table, read_trajectories
        from divscope.prompts import read_prompts

        if isinstance(source, pl.DataFrame | list):
            name = "the probe (given in memory)"
            frame = source if isinstance(source, pl.DataFrame) else pl.DataFrame(source)
        else:
            name = str(source)
            path = Path(source)
            if path.is_file() and path.stat().st_size == 0:
                raise cls._empty(name)
            frame = read_table(path)
        if frame.height == 0:
            raise cls._empty(name)
        teacher_forced = "response_ids" in frame.columns or "response" in frame.columns
        if teacher_forced:
            frame = read_trajectories(frame, source=name)
        else:
            frame = read_prompts(frame, source=name)
        return cls(frame, teacher_forced=teacher_forced, source=name)

    @staticmethod
    def _empty(name: str) -> DivscopeError:
        return DivscopeError(
            f"{name}: the probe is empty; give at least one prompt (prompt_id + prompt or "
            "prompt_ids) or one trajectory (+ response or response_ids). The monitor's "
            "default is 32 prompts of your evaluation set."
        )

    def token_ids(self, tokenizer: Any) -> pl.DataFrame:
        """The probe with its token ids (`prompt_ids`, and `response_ids` for trajectories),
        checked against `tokenizer`.

        Raises:
            DivscopeError: an empty prompt or response, or an id outside the vocabulary.
        """
        from divscope.io import attach_token_ids
        from divscope.prompts import prompt_token_ids
        from divscope.scoring.engine import check_ids

        if self.teacher_forced:
            frame = attach_token_ids(self.frame, tokenizer)
            check_ids(frame, len(tokenizer), source=self.source)
            return frame
        ids = prompt_token_ids(self.frame, tokenizer, source=self.source)
        return self.frame.with_columns(pl.Series("prompt_ids", ids, dtype=pl.List(pl.Int64())))

    def check(self, tokenizer: Any) -> None:
        """Raise before training if the probe cannot be scored with `tokenizer`: an empty prompt
        or response, an id outside the vocabulary (`token_ids`)."""
        self.token_ids(tokenizer)


class ProbeScorer:
    """The frozen base model, loaded once, and the probe; scores a policy at a step.

    Args:
        base: the frozen base model: a local directory or hub id (loaded here, in eval mode),
            or a loaded model (used as it is; its tokenizer is loaded from its `name_or_path`,
            else `tokenizer` stands for it).
        probe: the probe set (`Probe.read`; a path, frame or list of rows is read here).
        config: how the policy is sampled on probe prompts.
        tokenizer: the policy's tokenizer (a trainer's `processing_class`): its ordinary
            vocabulary must be the base's (`divscope.vocab.check_tokenizers`). None: the base's.
        score: top-p, temperature and batching of the scoring (`ScoreConfig`).
        device: where a base given by path is loaded (`auto`: CUDA when present).

    Raises:
        DivscopeError: a bad probe, a tokenizer that differs from the base's, a base that
            cannot be loaded, or a probe prompt that leaves no room for `max_new_tokens` in the
            base's context: all before any training step.

    Example (the lab in `fixtures/lab`, from the repository root):
        >>> from divscope.models.loading import load_model
        >>> probe = Probe.read("fixtures/lab/prompts/eval.jsonl")
        >>> probe.frame = probe.frame.head(2)
        >>> scorer = ProbeScorer("fixtures/lab/base", probe, ProbeConfig(max_new_tokens=16))
        >>> tokens = scorer.score(load_model("fixtures/lab/rl"), step=0)
        >>> tokens["source"].unique().to_list(), tokens.select("prompt_id").n_unique()
        (['rl'], 2)
    """

    def __init__(
        self,
        base: str | os.PathLike | Any,
        probe: Probe | str | os.PathLike | pl.DataFrame | list[dict],
        config: ProbeConfig = ProbeConfig(),  # noqa: B008 (frozen, hashable)
        *,
        tokenizer: Any = None,
        score: ScoreConfig = ScoreConfig(),  # noqa: B008 (frozen, hashable)
        device: str | None = None,
    ) -> None:
        from divscope.models.lengths import context_length, new_token_limits
        from divscope.models.loading import load_model
        from divscope.models.tokenizers import load_tokenizer
        from divscope.vocab import check_tokenizers

        self.probe = probe if isinstance(probe, Probe) else Probe.read(probe)
        self.config = config
        self.score_config = replace(score, source=SOURCE)
        loaded = not isinstance(base, str | os.PathLike)
        self.base_name = str(getattr(base, "name_or_path", "base") if loaded else base)
        try:
            base_tokenizer = load_tokenizer(self.base_name)
        except DivscopeError:
            if not loaded or tokenizer is None:
                raise
            base_tokenizer = tokenizer  # a model built in memory: its tokenizer is the one given
        self.compatibility = None
        if tokenizer is not None and tokenizer is not base_tokenizer:
            self.compatibility = check_tokenizers({"base": base_tokenizer, "policy": tokenizer})
        self.tokenizer = base_tokenizer
        self.vocab = self.compatibility.vocab if self.compatibility else len(base_tokenizer)
        self.trajectories = self.probe.token_ids(self.tokenizer)
        self.base = base if loaded else load_model(self.base_name, device=device or "auto")
        if not self.probe.teacher_forced:
            prompts = self._prompts()
            new_token_limits(prompts, config.max_new_tokens, {"base": context_length(self.base)})

    def _prompts(self) -> list[tuple[str, list[int]]]:
        frame = self.trajectories
        return list(zip(frame["prompt_id"].to_list(), frame["prompt_ids"].to_list(), strict=True))

    def sample(self, policy: Any) -> pl.DataFrame:
        """The probe's trajectories under `policy`: the probe trajectories as given, or
        `config.n` responses per probe prompt sampled with the fixed seed (`HFEngine`)."""
        from divscope.generation.engine import HFEngine, Sampling

        if self.probe.teacher_forced:
            return self.trajectories.drop("model", strict=False)
        c = self.config
        sampling = Sampling(c.n, c.temperature, c.top_p, c.max_new_tokens, c.seed)
        engine = HFEngine(policy, self.tokenizer, sampling, batch_size=None)
        prompts = self._prompts()
        rows: list[dict[str, Any]] = []
        for index, responses in sorted(engine.sample(prompts), key=lambda item: item[0]):
            prompt_id, prompt_ids = prompts[index]
            rows.extend(
                {"prompt_id": prompt_id, "sample_id": sample_id, "prompt_ids": prompt_ids,
                 "response_ids": response.response_ids}
                for sample_id, response in enumerate(responses)
            )  # fmt: skip
        schema = {
            "prompt_id": pl.String(), "sample_id": pl.Int32(),
            "prompt_ids": pl.List(pl.Int64()), "response_ids": pl.List(pl.Int64()),
        }  # fmt: skip
        return pl.DataFrame(rows, schema=schema)

    def score(self, policy: Any, step: int) -> pl.DataFrame:
        """The token table (`divscope.schema.TOKEN_TABLE` columns, `source` = `rl`) of the
        probe under the base vs `policy` at training step `step`. The policy's train/eval mode
        is restored afterwards; its parameters and their gradients are left as they were
        (everything runs under inference mode)."""
        from divscope.scoring.engine import score_table

        training = policy.training
        policy.eval()
        try:
            trajectories = self.sample(policy)
            return score_table(
                trajectories, self.base, policy, self.tokenizer, self.score_config,
                progress=False, vocab=self.vocab,
            )  # fmt: skip
        finally:
            policy.train(training)

    def metadata(self, step: int, policy: Any = None) -> dict[str, Any]:
        """The token table's `divscope` metadata of a measurement at `step`."""
        stats = self.score_config.stats
        c = self.config
        return {
            "step": step,
            "models": {"base": self.base_name,
                       "rl": str(getattr(policy, "name_or_path", "") or "policy")},
            "sources": {SOURCE: "rl"},
            "probe": self.probe.source,
            "teacher_forced": self.probe.teacher_forced,
            "sampling": None if self.probe.teacher_forced else {
                "n": c.n, "max_new_tokens": c.max_new_tokens, "temperature": c.temperature,
                "top_p": c.top_p, "seed": c.seed,
            },
            "top_p": stats.top_p,
            "temperature": stats.temperature,
            "window": stats.window,
            "tokenizers": self.compatibility.metadata() if self.compatibility else None,
        }  # fmt: skip
