"""The divergence monitor of the lab's GRPO (`divscope lab build --monitor`).

Every `MonitorConfig.every` rounds, `GRPOMonitor` samples the current policy on a fixed probe
(the first `MonitorConfig.prompts` eval prompts, one T=1 response each, the rollouts' length cap
and a fixed seed), scores it against the frozen base with `divscope.monitor.ProbeScorer`, and
writes the token table and its `divscope.monitor.step_statistics` to an evolution directory
(`divscope.monitor.EvolutionDir`), with the mean reward of the rounds since the last
measurement and the probe's own accuracy. It reads the policy and never writes it, and it runs
with the global random state saved and restored, so the training's random streams and weights
are the same with the monitor on and off.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import polars as pl
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from divscope.errors import DivscopeError
from divscope.lab.grpo import RoundStats
from divscope.lab.task import verify
from divscope.monitor import EvolutionDir, Probe, ProbeConfig, ProbeScorer, step_statistics

REWARD = "lab/reward"
"""Summary column: mean reward (training accuracy) of the GRPO rounds since the last
measurement."""
PROBE_ACCURACY = "lab/probe_accuracy"
"""Summary column: share of the probe's responses that the lab's verifier accepts."""


@dataclass(frozen=True)
class MonitorConfig:
    """What the lab's GRPO monitor measures, and how often."""

    prompts: int = 32
    """Probe: the first this many eval prompts, one T=1 response each."""
    every: int = 10
    """GRPO rounds between two measurements (at rounds every, 2·every, ...)."""

    def __post_init__(self) -> None:
        if self.prompts < 1 or self.every < 1:
            raise DivscopeError(
                f"lab monitor: prompts ({self.prompts}) and every ({self.every}) must be >= 1."
            )

    @classmethod
    def smoke(cls) -> MonitorConfig:
        """Every 2 rounds on 8 prompts: the smoke build's 4 rounds are measured twice.

        >>> MonitorConfig.smoke()
        MonitorConfig(prompts=8, every=2)
        """
        return cls(prompts=8, every=2)


class GRPOMonitor:
    """The `on_round` hook of `divscope.lab.grpo.train_grpo` that measures the policy.

    Args:
        policy: the model being trained (read only).
        base: the frozen base model.
        tokenizer: the lab tokenizer.
        probe: the probe rows: `prompt_id`, `prompt`, `answer` (the lab's prompt files).
        out_dir: the evolution directory to write.
        config: how many probe prompts and how often.
        max_new_tokens: length cap of a probe response (the rollouts').
        seed: seed of the probe's sampling (the same at every measurement).
        log: receives one line per measurement.

    Raises:
        DivscopeError: if the probe has fewer rows than `config.prompts`, or the probe does not
            fit the tokenizer (`ProbeScorer`'s checks), before any training round.
    """

    def __init__(
        self,
        policy: PreTrainedModel,
        base: PreTrainedModel,
        tokenizer: PreTrainedTokenizerFast,
        probe: list[dict],
        out_dir: str | os.PathLike,
        *,
        config: MonitorConfig,
        max_new_tokens: int,
        seed: int,
        log: Callable[[str], None],
    ) -> None:
        if len(probe) < config.prompts:
            raise DivscopeError(
                f"lab monitor: the probe needs {config.prompts} eval prompts, there are "
                f"{len(probe)}; lower MonitorConfig.prompts."
            )
        rows = probe[: config.prompts]
        self.answers = {row["prompt_id"]: row["answer"] for row in rows}
        self.policy = policy
        self.tokenizer = tokenizer
        self.config = config
        self.log = log
        self.scorer = ProbeScorer(
            base,
            Probe.read([{"prompt_id": r["prompt_id"], "prompt": r["prompt"]} for r in rows]),
            ProbeConfig(n=1, max_new_tokens=max_new_tokens, seed=seed, every=config.every),
            tokenizer=tokenizer,
        )
        self.evolution = EvolutionDir(out_dir)
        self.rewards: list[float] = []
        self.wall_s = 0.0
        self.cpu_s = 0.0

    def __call__(self, stats: RoundStats) -> None:
        """Measure after round `stats.step` if it is a multiple of `every`."""
        self.rewards.append(stats.reward)
        if stats.step % self.config.every:
            return
        started, cpu_started = time.perf_counter(), time.process_time()
        with torch.random.fork_rng(devices=[]):
            tokens = self.scorer.score(self.policy, stats.step)
        statistics = step_statistics(tokens)
        seconds = time.perf_counter() - started
        statistics[REWARD] = sum(self.rewards) / len(self.rewards)
        statistics[PROBE_ACCURACY] = self._accuracy(tokens)
        self.rewards = []
        self.evolution.write(
            stats.step, tokens, statistics, seconds, self.scorer.metadata(stats.step, self.policy)
        )
        self.wall_s += time.perf_counter() - started
        self.cpu_s += time.process_time() - cpu_started
        self.log(
            f"monitor step {stats.step}: JS > 0.1 {statistics['divscope/js_above_0.1']:.2%}, "
            f"Gini of CE {statistics['divscope/ce_gini']:.3f}, "
            f"probe accuracy {statistics[PROBE_ACCURACY]:.3f}, "
            f"reward {statistics[REWARD]:.3f}, {seconds:.1f} s"
        )

    def _accuracy(self, tokens: pl.DataFrame) -> float:
        """Share of the probe's responses that the lab verifier accepts."""
        responses = (
            tokens.sort("prompt_id", "sample_id", "position")
            .group_by("prompt_id", "sample_id", maintain_order=True)
            .agg("token_id")
        )
        texts = self.tokenizer.batch_decode(
            responses["token_id"].to_list(), skip_special_tokens=True
        )
        correct = [
            verify(text, self.answers[prompt_id])
            for prompt_id, text in zip(responses["prompt_id"], texts, strict=True)
        ]
        return sum(correct) / len(correct)
