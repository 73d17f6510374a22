import random

import pytest

from divscope.errors import DivscopeError
from divscope.lab.task import (
    Problem,
    TaskConfig,
    corpus_solution,
    extract_answer,
    run_plan,
    sample_problem,
    solve,
    verify,
)


@pytest.mark.parametrize(
    "problem,prompt,solution,answer",
    [
        (
            Problem("end", 9, (3, -5, 4)),
            "Q: 9 +3 -5 +4 = ? ; find end A:",
            "plan: forward ; 9 +3 = 12 ; 12 -5 = 7 ; 7 +4 = 11 ; answer: 11",
            11,
        ),
        (
            Problem("start", 14, (3, -5, 4)),
            "Q: ? +3 -5 +4 = 14 ; find start A:",
            "plan: backward ; 14 -4 = 10 ; 10 +5 = 15 ; 15 -3 = 12 ; answer: 12",
            12,
        ),
        (
            Problem("start", 0, (-2, -7)),
            "Q: ? -2 -7 = 0 ; find start A:",
            "plan: backward ; 0 +7 = 7 ; 7 +2 = 9 ; answer: 9",
            9,
        ),
    ],
)
def test_prompt_solution_and_answer(problem, prompt, solution, answer):
    assert problem.prompt == prompt
    assert solve(problem) == solution
    assert problem.answer == answer


@pytest.mark.parametrize(
    "problem,wrong_plan,wrong_answer",
    [
        (Problem("end", 9, (3, -5, 4)), "backward", 7),
        (Problem("start", 14, (3, -5, 4)), "forward", 16),
    ],
)
def test_wrong_plan_runs_to_a_wrong_answer(problem, wrong_plan, wrong_answer):
    assert run_plan(problem, wrong_plan)[-1][2] == wrong_answer != problem.answer


def test_generated_problems_stay_in_range_and_wrong_plans_are_wrong():
    config = TaskConfig()
    rng = random.Random(0)
    for _ in range(500):
        problem = sample_problem(rng, config)
        assert len(problem.steps) in config.n_steps
        assert all(1 <= abs(s) <= config.max_step for s in problem.steps)
        for plan in ("forward", "backward"):
            lines = run_plan(problem, plan)
            assert all(0 <= v <= config.max_value for a, _, b in lines for v in (a, b))
        wrong = "backward" if problem.right_plan == "forward" else "forward"
        assert run_plan(problem, wrong)[-1][2] != problem.answer
        assert verify(solve(problem), str(problem.answer))


def test_generator_is_deterministic_for_a_seed():
    config = TaskConfig()
    draw = [sample_problem(random.Random(3), config) for _ in range(2)]
    assert draw[0] == draw[1]


def test_corpus_mixes_plans_and_slips_at_the_configured_rates():
    config = TaskConfig()
    rng = random.Random(1)
    n, right, slipped = 4000, {"end": 0, "start": 0}, 0
    counts = {"end": 0, "start": 0}
    for _ in range(n):
        problem = sample_problem(rng, config)
        text = corpus_solution(problem, rng, config)
        counts[problem.unknown] += 1
        if text.startswith(f"plan: {problem.right_plan} "):
            right[problem.unknown] += 1
            slipped += text != solve(problem)
    assert right["end"] / counts["end"] == pytest.approx(config.p_right_plan_find_end, abs=0.04)
    assert right["start"] / counts["start"] == pytest.approx(
        config.p_right_plan_find_start, abs=0.04
    )
    assert slipped / sum(right.values()) == pytest.approx(config.p_slip, abs=0.03)


@pytest.mark.parametrize(
    "response,answer,expected",
    [
        ("plan: forward ; 9 +3 = 12 ; answer: 12", "12", True),
        ("answer: 12", "12", True),
        ("plan: forward ; 9 +3 = 12 ; answer: 12  ", " 12", True),
        ("plan: forward ; 9 +3 = 12 ; answer: 13", "12", False),
        ("plan: backward ; 9 -3 = 6 ; answer: 6", "12", False),
        ("plan: forward ; 9 +3 = 12 ; answer: 012", "12", True),
        ("plan: forward ; 9 +3 = 12", "12", False),
        ("plan: forward ; 9 +3 = 12 ; answer:", "12", False),
        ("plan: forward ; 9 +3 = 12 ; answer: 12 ;", "12", False),
        ("answer: 12 ; answer: 13", "12", False),
        ("answer: 13 ; answer: 12", "12", True),
        ("answer: -12", "12", False),
        ("answer: twelve", "12", False),
        ("answer:12", "12", False),
        ("", "12", False),
    ],
)
def test_verify(response, answer, expected):
    assert verify(response, answer) is expected


@pytest.mark.parametrize("answer", ["", "x", "-3", "1.5"])
def test_verify_rejects_a_bad_gold_answer(answer):
    with pytest.raises(DivscopeError, match="gold answer"):
        verify("answer: 3", answer)


def test_extract_answer_of_malformed_output_is_none():
    assert extract_answer("plan: forward ; 9 +3 = 12 ; <unk>") is None
