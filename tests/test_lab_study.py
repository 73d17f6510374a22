"""The quickstart's stage runner (skip, resume, rerun after a change), its checks of the lab and
of the output directory, and its headline. The whole study end to end is
tests/cli/test_quickstart.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from divscope.errors import DivscopeError
from divscope.estimators import Interval
from divscope.lab_study import (
    MANIFEST,
    Headline,
    Knee,
    QuickstartConfig,
    _lab,
    _prepare,
    _run,
    _Stage,
)

LAB = Path(__file__).parents[1] / "fixtures" / "lab"


class Recorder:
    """Fake stages that write their outputs and record how they were run."""

    def __init__(self, out: Path) -> None:
        self.out, self.calls = out, []
        out.mkdir(exist_ok=True)

    def stage(self, name, *, after=(), settings=None, interrupt=False) -> _Stage:
        output = self.out / f"{name}.txt"

        def run(resume: bool) -> str:
            self.calls.append((name, resume))
            if interrupt:
                raise KeyboardInterrupt
            output.write_text(name)
            return f"wrote {name}"

        return _Stage(name, (output,), settings or {"x": 1}, after, run)

    def run(self, stages):
        return _run(stages, self.out, _prepare(self.out, overwrite=False), progress=False)


def test_a_second_run_skips_every_stage(tmp_path):
    recorder = Recorder(tmp_path / "out")
    stages = [recorder.stage("a"), recorder.stage("b", after=("a",))]
    first = recorder.run(stages)
    assert recorder.calls == [("a", False), ("b", False)]
    assert [run.skipped for run in first] == [False, False]
    recorder.calls.clear()
    second = recorder.run(stages)
    assert recorder.calls == [] and all(run.skipped for run in second)
    record = json.loads((recorder.out / MANIFEST).read_text())
    assert record["command"] == "quickstart" and record["stages"]["b"]["done"] is True


def test_a_changed_setting_reruns_its_stage_and_those_after_it(tmp_path):
    recorder = Recorder(tmp_path / "out")
    recorder.run([recorder.stage("a"), recorder.stage("b", after=("a",)), recorder.stage("c")])
    recorder.calls.clear()
    changed = [
        recorder.stage("a", settings={"x": 2}),
        recorder.stage("b", after=("a",)),
        recorder.stage("c"),
    ]
    recorder.run(changed)
    assert recorder.calls == [("a", False), ("b", False)]


def test_an_interrupted_stage_is_resumed_and_never_recorded_done(tmp_path):
    recorder = Recorder(tmp_path / "out")
    with pytest.raises(KeyboardInterrupt):
        recorder.run([recorder.stage("a"), recorder.stage("b", interrupt=True)])
    record = json.loads((recorder.out / MANIFEST).read_text())["stages"]
    assert record["a"]["done"] is True and record["b"]["done"] is False
    recorder.calls.clear()
    recorder.run([recorder.stage("a"), recorder.stage("b")])
    assert recorder.calls == [("b", True)]  # same settings, not done: resume its parts


def test_a_stage_whose_output_is_gone_runs_again(tmp_path):
    recorder = Recorder(tmp_path / "out")
    stages = [recorder.stage("a")]
    recorder.run(stages)
    (recorder.out / "a.txt").unlink()
    recorder.calls.clear()
    recorder.run(stages)
    assert recorder.calls == [("a", True)] and (recorder.out / "a.txt").exists()


def test_output_directory_checks(tmp_path):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(DivscopeError, match="not a quickstart output.*--overwrite"):
        _prepare(foreign, overwrite=False)
    assert _prepare(foreign, overwrite=True) == {} and not foreign.exists()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / MANIFEST).write_text("{")
    with pytest.raises(DivscopeError, match="not a readable quickstart record"):
        _prepare(broken, overwrite=False)
    assert _prepare(tmp_path / "new", overwrite=False) == {}


def test_the_lab_is_checked_before_any_work(tmp_path):
    family = _lab(LAB)
    assert list(family.checkpoints) == [30, 60, 90, 120, 150]
    assert family.checkpoints[150] == LAB / "rl"
    with pytest.raises(DivscopeError, match=r"--lab .*not a lab family \(build.json, .*missing\)"):
        _lab(tmp_path)
    partial = tmp_path / "lab"
    shutil.copytree(LAB / "prompts", partial / "prompts")
    for name in ("base", "rl", "sft"):
        (partial / name).mkdir()
    (partial / "build.json").write_text("{}")
    with pytest.raises(DivscopeError, match="rl-step-N checkpoints missing"):
        _lab(partial)
    (partial / "rl-step-5").mkdir()
    with pytest.raises(DivscopeError, match="config.grpo.steps"):
        _lab(partial)


@pytest.mark.parametrize("knee", [True, False])
def test_headline_round_trips_and_reads(knee):
    gated = Knee("gated", 0.05, -1, Interval(1.01, 1.0, 1.03, 0.95), 0.0317)
    forward = Knee("forward", None, 2, Interval(0.94, 0.85, 1.0, 0.95), 0.0221)
    numbers = Headline(
        n_tokens=4241, n_responses=48,
        core_population="on rl trajectories: 24 responses, 2,100 tokens", near_zero=1e-3,
        share_near_zero=0.968, high=0.1, share_high=0.0323,
        takeover_population="on base rollouts: 24 responses, 2,141 tokens",
        takeover_metric="ce_base_rl", gini=0.958,
        failure_auroc=Interval(0.741, 0.511, 0.904, 0.95), rates=(0.01, 0.02, 0.05, 0.1),
        knee=gated if knee else None, recovery_against="against the guide model",
        forward_knee=forward if knee else None, base_accuracy=0.25, rl_accuracy=1.0,
    )  # fmt: skip
    assert Headline.from_dict(json.loads(json.dumps(numbers.to_dict()))) == numbers
    text = numbers.format()
    # Each statistic names the population it was computed on.
    assert (
        "sparsity (core paper, on rl trajectories: 24 responses, 2,100 tokens): 96.8% of tokens "
        "have js < 0.001, 3.23% have js > 0.1"
    ) in text
    assert "(takeover paper, on base rollouts: 24 responses, 2,141 tokens): Gini 0.958" in text
    assert "failure AUROC (takeover paper, the same base rollouts" in text
    assert "0.741 [0.511, 0.904]" in text
    assert "gated takeover over calibration rates 0.01, 0.02, 0.05, 0.1: " in text
    if knee:
        assert (
            "knee at r = 0.05: recovery 1.01 [1.00, 1.03] of the gain against the guide model, "
            in text
        )
        assert "3.17% of each response's tokens switched on average (base 25.0%, rl 100.0%)" in text
        assert "switch budgets: knee at budget 2: recovery 0.94 [0.85, 1.00]" in text
    else:
        assert text.count("no knee") == 2


def test_fast_is_a_smaller_study_of_every_stage():
    fast, full = QuickstartConfig.fast(), QuickstartConfig()
    assert fast.eval_prompts * fast.samples < full.eval_prompts * full.samples
    assert len(fast.budgets) >= 3  # the knee needs three points
    assert {0, -1} <= set(fast.budgets) and {0, -1} <= set(full.budgets)
