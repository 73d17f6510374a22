"""`quickstart`: the whole study on the lab models, one library call per stage, resumable.

What `divscope quickstart` runs, on the lab's family (`fixtures/lab`: `base`, `rl`, its
`rl-step-N` checkpoints and the `sft` control):

1. `prompts`: the first eval prompts, and the first training prompts for calibration;
2. `generate base`, `generate rl`, `generate sft`: samples of each model on the eval prompts;
3. `grade`: every response with the lab grader; base's and RL's responses together are the
   trajectories that RL vs base is scored on (RL's sample ids follow base's; each row's `model`
   becomes the token table's `source`);
4. `score rl`: RL vs base on those, one table whose `source` keeps base rollouts and RL
   trajectories apart; `score sft`: SFT vs base on SFT's own samples (the control);
   `score checkpoints`: each `rl-step-N` and the final `rl` vs base on RL's samples (the
   training evolution);
5. `calibrate`: the takeover paper's gates at several takeover rates, from base samples of the
   calibration prompts;
6. `cross-sample`: forward, reverse, random and random-effective (random positions matched on
   forward's effective switches) over a budget grid, rl-replace, and gated once
   per calibrated rate (unbudgeted), with the base and rl controls;
7. `analyze` (with the SFT table compared and the cross-sample results), and the headline
   numbers, each on its paper's population (core: RL trajectories; takeover: base rollouts),
   gated's knee over the calibration rates beside forward's over the budgets; `plot`: every
   figure; `report`: the HTML report.

Resuming: `OUT/quickstart.json` records, per stage, a fingerprint of the settings that decide
its outputs (its own and, through theirs, its inputs' stages). A stage recorded done whose
fingerprint is unchanged and whose outputs exist is skipped; an interrupted one resumes its
parts (`generate`, `score`, `cross-sample`) or starts over (the others write atomically), so
no output looks complete before it is; a stage whose settings changed reruns, and so does
every stage after it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any

import polars as pl

from divscope.analyses.study import Study
from divscope.analyses.summary import Summary
from divscope.defaults import (
    CALIBRATION_SAMPLES,
    GATE_WINDOW,
    LAB,
    N_BOOT,
    QUICKSTART_OUT,
    SEED,
    TAKEOVER_RATES,
)
from divscope.errors import DivscopeError
from divscope.estimators import Interval
from divscope.params import LIBRARY_ONLY, ModelPair, Output, PartedOutput, Recovery

MANIFEST = "quickstart.json"
"""The record of the stages done, in the output directory."""
LAB_GRADER = "lab"
"""The grader of the lab's task (`divscope grade --grader lab`)."""
POLICIES = "base,rl,forward,reverse,random,random-effective,rl-replace,gated"
"""The cross-sample policies (`--policy`); rl-replace brings its own base and rl controls."""
GATED = "gated"
"""The takeover policy whose knee over calibration rates the headline reports."""
FORWARD = "forward"
"""The cross-sampling policy whose knee over switch budgets the headline reports beside it."""
NEAR_ZERO = 1e-3
"""Headline sparsity: the share of tokens with `js` below this (one of the core thresholds)."""
CONFIDENCE = 0.95
"""Coverage of the knee's interval (the summary's intervals are 95% too)."""


@dataclass(frozen=True)
class QuickstartConfig:
    """The size of the study: what decides its outputs and its time.

    >>> QuickstartConfig.fast().eval_prompts < QuickstartConfig().eval_prompts
    True
    """

    eval_prompts: int = 32
    """Eval prompts that every model samples and cross-sampling decodes (the first ones)."""
    samples: int = 4
    """Responses per prompt of each model, and of each cross-sampling setting."""
    calibration_prompts: int = 32
    """Training prompts whose base samples calibrate the gates (the first ones)."""
    calibration_samples: int = CALIBRATION_SAMPLES
    """Base responses per calibration prompt."""
    max_new_tokens: int = 224
    """Length cap of every response (the lab's GRPO cap; its solutions take 60-140 tokens)."""
    budgets: tuple[int, ...] = (0, 1, 2, 4, -1)
    """Switch budgets of forward, reverse, random and gated (−1 = unlimited; on the lab, forward
    reaches every divergent position by budget 8, and nearly all of them by 4)."""
    eps: float = 0.05
    """forward/reverse: switch where JS > eps."""
    random_rate: float = 0.03
    """random: per-step switch probability, about forward's unlimited switch share on the lab."""
    takeover_rates: tuple[float, ...] = TAKEOVER_RATES
    """Target takeover rates r of the calibrated gates: gated runs once at each, unbudgeted
    (its knee is drawn over them, as the takeover paper draws it)."""
    n_boot: int = N_BOOT
    """Bootstrap resamples of every interval."""
    formats: tuple[str, ...] = ("png", "pdf")
    """File formats of the figures."""
    seed: int = SEED
    """Seed of every sample and bootstrap."""
    threads: int = 1
    """Torch CPU threads: the lab's models are too small for a second thread to pay, and on
    shared cores threads wait for each other."""

    @classmethod
    def fast(cls) -> QuickstartConfig:
        """`--fast`: every stage, on a few prompts and budgets (a check that all of it works;
        the intervals are wide)."""
        return cls(
            eval_prompts=6,
            samples=2,
            calibration_prompts=8,
            calibration_samples=2,
            budgets=(0, 1, 2, -1),
            n_boot=200,
            formats=("png",),
        )


@dataclass(frozen=True)
class Knee:
    """Where more intervention stops paying on one policy's curve (`analyses.takeover_knee`)."""

    policy: str
    """The policy: `gated` (one point per calibration rate) or `forward` (per budget)."""
    rate: float | None
    """The calibration rate r at the knee (`gated`); None for a budget curve."""
    budget: int | None
    """The switch budget at the knee (−1 = unlimited)."""
    recovery: Interval
    """Recovery of the RL gain at the knee."""
    switch_share: float
    """ρ̄ at the knee: the mean over responses of the share of their tokens switched."""

    @classmethod
    def of(cls, knee: Any) -> Knee | None:
        """The knee point of a `TakeoverKnee`; None when its curve has none."""
        if knee.knee_index is None:
            return None
        point = knee.curve.row(knee.knee_index, named=True)
        return cls(
            policy=knee.policy,
            rate=point.get("rate") if knee.policy == GATED else None,
            budget=point["budget"],
            recovery=Interval(
                point["recovery"], point["recovery_low"], point["recovery_high"], CONFIDENCE
            ),
            switch_share=point["rho_mean"],
        )

    def format(self, gain: str = "of the RL gain") -> str:
        """`knee at r = 0.05: recovery 1.01 [1.00, 1.03] of the RL gain, 3.17% of ...` (or `at
        budget 2`); `gain` says what the recovery is a share of."""
        if self.rate is not None:
            where = f"r = {self.rate:g}"
        else:
            where = "budget " + ("unlimited" if self.budget == -1 else str(self.budget))
        r = self.recovery
        return (
            f"knee at {where}: recovery {r.estimate:.2f} [{r.low:.2f}, {r.high:.2f}] {gain}, "
            f"{self.switch_share:.2%} of each response's tokens switched on average"
        )


@dataclass(frozen=True)
class Headline:
    """The study's headline numbers, each on its paper's population and named with it
    (intervals are 95% bootstraps over prompts)."""

    n_tokens: int
    """Tokens of the RL-vs-base token table (base rollouts and RL trajectories)."""
    n_responses: int
    """Responses in it (base's and RL's samples)."""
    core_population: str
    """The core paper's population, in words with its counts (RL trajectories)."""
    near_zero: float
    """The near-zero threshold of `share_near_zero`."""
    share_near_zero: float
    """Share of the core population's tokens with `js` below `near_zero` (the core paper's
    sparsity)."""
    high: float
    """The core paper's high-divergence threshold of `share_high`."""
    share_high: float
    """Share of the core population's tokens with `js` above `high` (the positions of the core
    section's rank reordering)."""
    takeover_population: str
    """The takeover paper's population, in words with its counts (base rollouts)."""
    takeover_metric: str
    """The metric of `gini` and `failure_auroc` (the takeover paper's s_t)."""
    gini: float
    """Gini coefficient of `takeover_metric` over the takeover population's tokens."""
    failure_auroc: Interval | None
    """AUROC of each base rollout's top-100 mean for predicting a wrong answer; None when the
    responses are all right or all wrong."""
    rates: tuple[float, ...]
    """The calibration rates the gated takeover ran at (one point each of its curve)."""
    knee: Knee | None
    """The gated takeover's knee over the calibration rates (the takeover paper's); None when
    its curve has no knee."""
    recovery_against: str
    """What `knee`'s recovery is measured against."""
    forward_knee: Knee | None
    """Forward cross-sampling's knee over the switch budgets (the core paper's curve)."""
    base_accuracy: float | None
    """Accuracy of the base control at the run's sampling."""
    rl_accuracy: float | None
    """Accuracy of the rl control at the run's sampling."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (intervals and knees as dicts)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, document: Mapping[str, Any]) -> Headline:
        """The headline `to_dict` wrote."""

        def knee(value: Mapping[str, Any] | None) -> Knee | None:
            if value is None:
                return None
            return Knee(**{**value, "recovery": Interval(**value["recovery"])})

        auroc = document["failure_auroc"]
        return cls(
            **{
                **document,
                "failure_auroc": None if auroc is None else Interval(**auroc),
                "rates": tuple(document["rates"]),
                "knee": knee(document["knee"]),
                "forward_knee": knee(document["forward_knee"]),
            }
        )

    def format(self) -> str:
        """The headline as a few lines of text."""
        auroc = self.failure_auroc
        failure = (
            "n/a" if auroc is None else f"{auroc.estimate:.3f} [{auroc.low:.3f}, {auroc.high:.3f}]"
        )
        flat = "no knee (too few points, or a flat curve)"
        controls = (
            f" (base {self.base_accuracy:.1%}, rl {self.rl_accuracy:.1%})"
            if self.base_accuracy is not None and self.rl_accuracy is not None
            else ""
        )
        rates = ", ".join(f"{r:g}" for r in self.rates)
        against = self.recovery_against
        return "\n".join(
            [
                f"  sparsity (core paper, {self.core_population}): {self.share_near_zero:.1%} of "
                f"tokens have js < {self.near_zero:g}, {self.share_high:.2%} have js > "
                f"{self.high:g}",
                f"  concentration (takeover paper, {self.takeover_population}): Gini "
                f"{self.gini:.3f} of {self.takeover_metric}",
                f"  failure AUROC (takeover paper, the same base rollouts; top-100 mean of "
                f"{self.takeover_metric}): {failure}",
                f"  gated takeover over calibration rates {rates}: "
                + (flat if self.knee is None else self.knee.format(f"of the gain {against}"))
                + controls,
                "  forward cross-sampling over switch budgets: "
                + (flat if self.forward_knee is None else self.forward_knee.format()),
            ]
        )


def headline(summary: Summary, results: pl.DataFrame, *, n_boot: int, seed: int) -> Headline:
    """The headline numbers of an `analyze` `Summary` (on `js` and `ce_base_rl`, each section on
    its paper's population) and of the knees of gated's curve over its calibration rates and of
    forward's over its budgets in the cross-sample results (`analyses.takeover_knee`).

    Args:
        summary: the `divscope.analyses.Summary` of the RL-vs-base token table.
        results: graded cross-sample results with `gated` (over calibration rates), `forward`
            and the base and rl controls.
        n_boot: bootstrap resamples of the knees' intervals.
        seed: seed of that bootstrap.

    Returns:
        A `Headline`.
    """
    from divscope.analyses.cross_sample import takeover_knee

    core, takeover = summary.core, summary.takeover
    knees = {
        policy: takeover_knee(results, policy, n_boot=n_boot, seed=seed, confidence=CONFIDENCE)
        for policy in (GATED, FORWARD)
    }
    gated = knees[GATED]
    rates = gated.curve["rate"].drop_nulls().to_list() if "rate" in gated.curve.columns else []
    return Headline(
        n_tokens=summary.n_tokens,
        n_responses=summary.n_responses,
        core_population=core.population.text,
        near_zero=NEAR_ZERO,
        share_near_zero=core.sparsity.share_below[NEAR_ZERO],
        high=core.thresholds.rank,
        share_high=core.rank_reordering.n_positions / core.sparsity.n_tokens,
        takeover_population=takeover.population.text,
        takeover_metric=takeover.metric,
        gini=takeover.lorenz.gini,
        failure_auroc=None if takeover.failure_auroc is None else takeover.failure_auroc.divergence,
        rates=tuple(sorted(rates)),
        knee=Knee.of(gated),
        recovery_against=gated.recovery_against,
        forward_knee=Knee.of(knees[FORWARD]),
        base_accuracy=gated.base_value,
        rl_accuracy=gated.reference_value,
    )


@dataclass(frozen=True)
class StageRun:
    """One stage of a quickstart run."""

    name: str
    seconds: float
    """Wall time of this run's work on it (0 when skipped)."""
    skipped: bool
    """Done by an earlier run with the same settings."""


@dataclass(frozen=True)
class QuickstartReport:
    """What `quickstart` did and where everything is."""

    out: Path
    """The output directory."""
    config: QuickstartConfig
    """The study's size."""
    headline: Headline
    """The headline numbers."""
    artifacts: dict[str, Path]
    """What -> where, in the order of the stages."""
    stages: tuple[StageRun, ...]
    """Each stage, in order."""

    @property
    def seconds(self) -> float:
        """Wall time of this run's stages."""
        return sum(stage.seconds for stage in self.stages)

    def format(self) -> str:
        """The text `divscope quickstart` prints: the headline, then where every artifact is."""
        c = self.config
        skipped = sum(stage.skipped for stage in self.stages)
        done = f"{len(self.stages) - skipped} stages run in {self.seconds:.0f} s" + (
            f", {skipped} done before and skipped" if skipped else ""
        )
        width = max(map(len, self.artifacts))
        return "\n".join(
            [
                f"divscope quickstart: {done}.",
                f"RL vs base on the lab, {c.eval_prompts} eval prompts x {c.samples} samples per "
                "model and per cross-sampling setting; 95% CIs over prompts:",
                self.headline.format(),
                f"Artifacts in {self.out}:",
                *(f"  {name:<{width}}  {path}" for name, path in self.artifacts.items()),
                f"Open {self.artifacts['report']} in a browser.",
            ]
        )


@dataclass(frozen=True)
class _Stage:
    name: str
    outputs: tuple[Path, ...]
    settings: Mapping[str, Any]
    """What decides the outputs besides the stages in `after`."""
    after: tuple[str, ...]
    """The stages whose outputs this one reads."""
    run: Callable[[bool], str | None]
    """Does the work, resuming its parts when given True; returns a line to print, or None."""


@dataclass(frozen=True)
class _Lab:
    """The lab family a study runs on."""

    root: Path
    checkpoints: dict[int, Path]
    """Training step -> RL checkpoint, the final `rl` included."""
    digest: str
    """sha256 of its `build.json`: which build of the family this is."""

    def model(self, name: str) -> str:
        return str(self.root / name)


@dataclass(frozen=True)
class _Paths:
    out: Path
    steps: tuple[int, ...]

    @property
    def eval_prompts(self) -> Path:
        return self.out / "prompts" / "eval.jsonl"

    @property
    def calibration_prompts(self) -> Path:
        return self.out / "prompts" / "calibration.jsonl"

    def generated(self, model: str) -> Path:
        return self.out / "trajectories" / model

    def graded(self, model: str) -> Path:
        return self.out / "trajectories" / f"{model}.parquet"

    @property
    def base_and_rl(self) -> Path:
        return self.out / "trajectories" / "base-and-rl.parquet"

    @property
    def tokens(self) -> Path:
        return self.out / "tokens" / "rl.parquet"

    @property
    def sft_tokens(self) -> Path:
        return self.out / "tokens" / "sft.parquet"

    @property
    def evolution(self) -> dict[int, Path]:
        return {s: self.out / "tokens" / "evolution" / f"rl-step-{s}.parquet" for s in self.steps}

    @property
    def gates(self) -> Path:
        return self.out / "gates.json"

    @property
    def cross_sample(self) -> Path:
        return self.out / "cross-sample.parquet"

    @property
    def summary(self) -> Path:
        return self.out / "summary.json"

    @property
    def digest(self) -> Path:
        return self.out / "summary.txt"

    @property
    def headline(self) -> Path:
        return self.out / "headline.json"

    @property
    def figures(self) -> Path:
        return self.out / "figures"

    @property
    def report(self) -> Path:
        return self.out / "report.html"

    def artifacts(self) -> dict[str, Path]:
        models = ("base", "rl", "sft")
        return {
            "eval prompts": self.eval_prompts,
            "calibration prompts": self.calibration_prompts,
            **{f"{m} samples (graded)": self.graded(m) for m in models},
            "RL-vs-base trajectories": self.base_and_rl,
            "token table RL vs base": self.tokens,
            "token table SFT vs base": self.sft_tokens,
            **{f"token table step {s} vs base": p for s, p in self.evolution.items()},
            "gates": self.gates,
            "cross-sample results": self.cross_sample,
            "summary": self.summary,
            "summary (text)": self.digest,
            "headline": self.headline,
            "figures": self.figures / "index.md",
            "report": self.report,
            "stage record": self.out / MANIFEST,
        }


def quickstart(
    out: Output = Output(QUICKSTART_OUT),  # noqa: B008 (frozen, hashable)
    *,
    lab: str | os.PathLike = LAB,
    fast: bool = False,
    progress: Annotated[bool, LIBRARY_ONLY] = True,
) -> QuickstartReport:
    """Run the whole study on the lab models: generate, grade, score, calibrate, cross-sample,
    analyze, plot and report.

    Generates and grades base, RL and SFT samples; scores RL vs base, SFT vs base and each RL
    checkpoint vs base; calibrates the gates; cross-samples (forward, reverse, random,
    rl-replace, gated and the controls) over a budget grid; analyzes, plots every figure and
    writes the HTML report. Prints each stage on stderr, then the headline numbers, each on its
    paper's population (sparsity on RL trajectories; Gini and failure AUROC on base rollouts;
    gated's recovery at its knee over the calibration rates, forward's at its knee over the
    budgets) and where every file is. Interrupted?
    Run it again: it resumes: stages done before with the same settings are skipped.

    Args:
        out: the output directory (or its path), resumed when it holds an earlier quickstart
            run; `overwrite` removes it first and starts over. Each stage is one library call
            (see the module's docstring for the list) whose outputs go under it.
        lab: The lab family (divscope lab build); default: the committed one.
        fast: A small study (a few prompts, samples and budgets; PNG figures only) that checks
            every stage end to end; its intervals are wide (`QuickstartConfig.fast`, instead
            of `QuickstartConfig()`).
        progress: stage lines (`stage i/n name`, its time) and the commands' progress on
            stderr.

    Returns:
        A `QuickstartReport`: the headline, the artifacts and each stage's time.

    Raises:
        DivscopeError: `lab` is not a lab family, `out` is a file or a directory that
            quickstart did not write (without `overwrite`), or any stage's error.

    Example:
        >>> import divscope
        >>> report = divscope.quickstart("runs/quickstart-fast", fast=True)  # doctest: +SKIP
        >>> print(report.format())  # doctest: +SKIP
    """
    from divscope.models.threads import torch_threads

    config = QuickstartConfig.fast() if fast else QuickstartConfig()
    out = Output.of(out)
    family = _lab(Path(lab))
    paths = _Paths(out.path, tuple(family.checkpoints))
    records = _prepare(paths.out, overwrite=out.overwrite)
    stages = _stages(paths, family, config, progress)
    with torch_threads(config.threads):
        runs = _run(stages, paths.out, records, progress)
    document = json.loads(paths.headline.read_text())
    return QuickstartReport(
        out=paths.out,
        config=config,
        headline=Headline.from_dict(document),
        artifacts=paths.artifacts(),
        stages=tuple(runs),
    )


def _lab(root: Path) -> _Lab:
    """The lab family at `root`, checked whole before any work.

    Raises:
        DivscopeError: a part of the family missing, or no `rl-step-N` checkpoint.
    """
    needed = ["build.json", "prompts/eval.jsonl", "prompts/train.jsonl", "base", "rl", "sft"]
    missing = [name for name in needed if not (root / name).exists()]
    steps = {
        int(path.name.removeprefix("rl-step-")): path
        for path in root.glob("rl-step-*")
        if path.name.removeprefix("rl-step-").isdigit()
    }
    if missing or not steps:
        what = ", ".join(missing) if missing else "rl-step-N checkpoints"
        raise DivscopeError(
            f"--lab {root}: not a lab family ({what} missing); run from the repository root, "
            "where fixtures/lab is, or pass --lab DIR with a family from `divscope lab build DIR`."
        )
    build = (root / "build.json").read_bytes()
    try:
        final = int(json.loads(build)["config"]["grpo"]["steps"])
    except (ValueError, KeyError, TypeError) as error:
        raise DivscopeError(
            f"{root / 'build.json'}: no readable config.grpo.steps (the final RL step) "
            f"({error}); rebuild the family with `divscope lab build`."
        ) from error
    checkpoints = dict(sorted({**steps, final: root / "rl"}.items()))
    return _Lab(root, checkpoints, hashlib.sha256(build).hexdigest())


def _prepare(out: Path, *, overwrite: bool) -> dict[str, dict[str, Any]]:
    """Make `out` ready and return the stages recorded in its manifest (name -> record).

    Raises:
        DivscopeError: `out` is a file, a directory quickstart did not write, or a manifest
            that cannot be read (without `overwrite`).
    """
    from divscope.output import remove

    manifest = out / MANIFEST
    if overwrite:
        remove(out)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not manifest.is_file())):
        raise DivscopeError(
            f"{out}: exists and is not a quickstart output ({MANIFEST} missing); pass "
            "--overwrite to replace it or choose another --out."
        )
    if not manifest.is_file():
        return {}
    try:
        return dict(json.loads(manifest.read_text())["stages"])
    except (ValueError, KeyError, TypeError) as error:
        raise DivscopeError(
            f"{manifest}: not a readable quickstart record ({error}); pass --overwrite to start "
            "over."
        ) from error


def _run(
    stages: list[_Stage], out: Path, records: dict[str, dict[str, Any]], progress: bool
) -> list[StageRun]:
    """Run or skip each stage in order, recording each in the manifest as it starts and ends."""
    from divscope.output import write_json

    def save() -> None:
        write_json({"command": "quickstart", "stages": records}, out / MANIFEST, overwrite=True)

    def say(line: str) -> None:
        if progress:
            print(line, file=sys.stderr, flush=True)

    fingerprints: dict[str, str] = {}
    runs = []
    for i, stage in enumerate(stages, 1):
        head = f"stage {i}/{len(stages)} {stage.name}"
        document = {
            "settings": stage.settings,
            "after": {name: fingerprints[name] for name in stage.after},
        }
        fingerprint = hashlib.sha256(
            json.dumps(document, sort_keys=True, default=str).encode()
        ).hexdigest()
        fingerprints[stage.name] = fingerprint
        record = records.get(stage.name, {})
        same = record.get("fingerprint") == fingerprint
        if same and record.get("done") and all(path.exists() for path in stage.outputs):
            say(f"{head}: done before with the same settings, skipped")
            runs.append(StageRun(stage.name, 0.0, skipped=True))
            continue
        say(f"{head}: started")
        records[stage.name] = {"fingerprint": fingerprint, "done": False, **document}
        save()
        start = time.perf_counter()
        line = stage.run(same)  # same settings, not done: an interrupted run, resumed
        seconds = time.perf_counter() - start
        records[stage.name] |= {"done": True, "seconds": round(seconds, 1)}
        save()
        say(f"{head}: done in {seconds:.1f} s" + (f"; {line}" if line else ""))
        runs.append(StageRun(stage.name, seconds, skipped=False))
    return runs


def _stages(paths: _Paths, family: _Lab, config: QuickstartConfig, progress: bool) -> list[_Stage]:
    """The study's stages, in order, each with its outputs, settings and work."""
    from divscope import __version__
    from divscope.decoding.lockstep import DecodeConfig
    from divscope.generation.engine import Sampling
    from divscope.generation.generate import GenerateConfig

    c = config
    base = family.model("base")
    decoding = DecodeConfig(max_new_tokens=c.max_new_tokens, seed=c.seed)
    sampling = Sampling(n=c.samples, max_new_tokens=c.max_new_tokens, seed=c.seed)
    models = ("base", "rl", "sft")
    graded = tuple(paths.graded(m) for m in models)
    recovery = Recovery(n_boot=c.n_boot, seed=c.seed)
    compared = ("score rl", "score sft", "cross-sample")
    tables = (*compared, "score checkpoints")

    def prompts(resume: bool) -> str:
        from divscope.io import read_table, write_table

        for source, target, n in (
            ("eval.jsonl", paths.eval_prompts, c.eval_prompts),
            ("train.jsonl", paths.calibration_prompts, c.calibration_prompts),
        ):
            write_table(read_table(family.root / "prompts" / source).head(n), target,
                        overwrite=True)  # fmt: skip
        return f"{c.eval_prompts} eval prompts, {c.calibration_prompts} calibration prompts"

    def generate(model: str) -> Callable[[bool], str]:
        def run(resume: bool) -> str:
            from divscope.generation.generate import generate as sample

            out = PartedOutput(paths.generated(model), overwrite=not resume, resume=resume)
            report = sample(paths.eval_prompts, family.model(model), out,
                            GenerateConfig(sampling), progress=progress)  # fmt: skip
            return f"{report.n_responses} new responses"

        return run

    def grade(resume: bool) -> str:
        from divscope.grading.grade import grade as grade_file
        from divscope.grading.table import GradeConfig
        from divscope.io import read_table, write_table

        accuracy = {}
        for model in models:
            out = Output(paths.graded(model), overwrite=True)
            report = grade_file(paths.generated(model), out, GradeConfig(LAB_GRADER))
            a = report.accuracy
            accuracy[model] = f"{model} {a.estimate:.1%} [{a.low:.1%}, {a.high:.1%}]"
        base_samples, rl_samples = (read_table(paths.graded(m)) for m in ("base", "rl"))
        shifted = rl_samples.with_columns(pl.col("sample_id") + c.samples)
        write_table(pl.concat([base_samples, shifted]), paths.base_and_rl, overwrite=True)
        return "mean@n " + ", ".join(accuracy.values())

    def score(trajectories: Path, rl: str, out: Path, resume: bool) -> None:
        from divscope.params import PartedOutput
        from divscope.scoring.score import score as score_file

        parted = PartedOutput(out, overwrite=not resume, resume=resume)
        score_file(trajectories, ModelPair(base, rl), parted, progress=progress)

    def checkpoints(resume: bool) -> str:
        for step, path in paths.evolution.items():
            score(paths.graded("rl"), str(family.checkpoints[step]), path, resume)
        return f"steps {', '.join(map(str, paths.steps))}"

    def calibrate(resume: bool) -> str:
        from divscope.decoding.calibrate import Target
        from divscope.decoding.calibrate import calibrate as calibrate_gates
        from divscope.params import Output

        calibration = calibrate_gates(
            paths.calibration_prompts, Output(paths.gates, overwrite=True),
            Target(c.takeover_rates, GATE_WINDOW, c.calibration_samples),
            ModelPair(base, family.model("rl")), decoding, progress=progress,
        )  # fmt: skip
        return f"calibrated on {calibration.n_tokens:,} tokens"

    def cross_sample(resume: bool) -> str:
        from divscope.decoding.cross_sample import Grid
        from divscope.decoding.cross_sample import cross_sample as decode
        from divscope.decoding.settings import Policies
        from divscope.params import PartedOutput

        policies = Policies(POLICIES, eps=c.eps, rate=c.random_rate, calibration=paths.gates)
        results = decode(
            paths.eval_prompts, ModelPair(base, family.model("rl")), policies,
            PartedOutput(paths.cross_sample, overwrite=not resume, resume=resume), decoding,
            Grid(budgets=c.budgets, n=c.samples, grader=LAB_GRADER), progress=progress,
        )  # fmt: skip
        assert results is not None  # one process: the output is complete
        return f"{results.num_rows:,} responses"

    @cache
    def study() -> Study:
        """The study that analyze, plot and report share, read once (after cross-sample)."""
        return Study(
            paths.tokens,
            compare={"SFT": paths.sft_tokens},
            evolution=paths.evolution,
            cross_sample=paths.cross_sample,
        )

    def analyze(resume: bool) -> str:
        from divscope.analyses.analyze import analyze as summarize
        from divscope.formatting import digest
        from divscope.io import read_table
        from divscope.output import write_atomically, write_json

        result = summarize(study(), Output(paths.summary, overwrite=True), recovery=recovery)
        text = digest(result, source=paths.tokens) + "\n"
        write_atomically(paths.digest, lambda tmp: tmp.write_text(text))
        numbers = headline(result, read_table(paths.cross_sample), n_boot=c.n_boot, seed=c.seed)
        write_json(numbers.to_dict(), paths.headline, overwrite=True)
        return f"{result.n_tokens:,} tokens of {result.n_responses:,} responses"

    def plot(resume: bool) -> str:
        from divscope.figures.plot import plot as draw

        report = draw(
            study(), Output(paths.figures, overwrite=True), recovery=recovery, formats=c.formats
        )
        skipped = f" ({', '.join(report.skipped)} skipped)" if report.skipped else ""
        return f"{len(report.written)} figures{skipped}"

    def report(resume: bool) -> str:
        from divscope.reporting.report import report as write_report

        result = write_report(
            study(), Output(paths.report, overwrite=True), recovery=recovery, progress=False
        )
        return f"{result.bytes / 2**20:.1f} MiB, {len(result.figures)} figures"

    inputs = {"lab": str(family.root), "build_sha256": family.digest, "divscope": __version__}
    generated = {"sampling": asdict(sampling)}
    return [
        _Stage("prompts", (paths.eval_prompts, paths.calibration_prompts),
               inputs | {"eval": c.eval_prompts, "calibration": c.calibration_prompts}, (),
               prompts),
        *(
            _Stage(f"generate {m}", (paths.generated(m),), generated | {"model": m},
                   ("prompts",), generate(m))
            for m in models
        ),
        _Stage("grade", (*graded, paths.base_and_rl), {"grader": LAB_GRADER},
               tuple(f"generate {m}" for m in models), grade),
        _Stage("score rl", (paths.tokens,), {"rl": "rl"}, ("grade",),
               lambda resume: score(paths.base_and_rl, family.model("rl"), paths.tokens, resume)),
        _Stage("score sft", (paths.sft_tokens,), {"rl": "sft"}, ("grade",),
               lambda resume: score(paths.graded("sft"), family.model("sft"), paths.sft_tokens,
                                    resume)),
        _Stage("score checkpoints", tuple(paths.evolution.values()),
               {"steps": list(paths.steps)}, ("grade",), checkpoints),
        _Stage("calibrate", (paths.gates,),
               {"rates": list(c.takeover_rates), "window": GATE_WINDOW, "n": c.calibration_samples,
                "decoding": asdict(decoding)}, ("prompts",), calibrate),
        _Stage("cross-sample", (paths.cross_sample,),
               {"policies": POLICIES, "eps": c.eps, "rate": c.random_rate,
                "budgets": list(c.budgets), "n": c.samples, "decoding": asdict(decoding)},
               ("prompts", "calibrate"), cross_sample),
        _Stage("analyze", (paths.summary, paths.digest, paths.headline),
               {"n_boot": c.n_boot, "seed": c.seed}, compared, analyze),
        _Stage("plot", (paths.figures,),
               {"formats": list(c.formats), "n_boot": c.n_boot, "seed": c.seed}, tables, plot),
        _Stage("report", (paths.report,), {"n_boot": c.n_boot, "seed": c.seed}, tables, report),
    ]  # fmt: skip
