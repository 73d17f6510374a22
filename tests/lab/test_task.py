import random
import re

import pytest

from divscope.errors import DivscopeError
from divscope.grading import get_grader
from divscope.lab.task import (
    PLAN_SENTENCES,
    REFLECTION_WORDS,
    Problem,
    TaskConfig,
    corpus_solution,
    extract_answer,
    render_solution,
    run_plan,
    sample_problem,
    solve,
    teacher_solution,
    verify,
)

EQUATION = re.compile(r"(\d+) ([+-]) (\d+) = (\d+)")


@pytest.mark.parametrize(
    "problem,prompt,solution,answer",
    [
        (
            Problem("end", 9, (3, -5, 4)),
            "Sam has 9 coins. Step 1: he finds 3. Step 2: he loses 5. Step 3: he finds 4."
            " How many coins does he have now?",
            " First, I go forward from the start. Start at 9. Step 1: he finds 3. 9 + 3 = 12."
            " Step 2: he loses 5. 12 - 5 = 7. Step 3: he finds 4. 7 + 4 = 11."
            " So the answer is \\boxed{11}.",
            11,
        ),
        (
            Problem("start", 14, (3, -5, 4), story=2),
            "Tom has some cards. Step 1: he wins 3. Step 2: he gives away 5. Step 3: he wins 4."
            " Now he has 14. How many cards did he have at the start?",
            " Let me work backward from the end. Start at 14. Undo Step 3: he wins 4. 14 - 4 = 10."
            " Undo Step 2: he gives away 5. 10 + 5 = 15. Undo Step 1: he wins 3. 15 - 3 = 12."
            " So the answer is \\boxed{12}.",
            12,
        ),
    ],
)
def test_prompt_solution_and_answer(problem, prompt, solution, answer):
    assert problem.prompt == prompt
    assert solve(problem) == solution
    assert problem.answer == answer


def test_a_wrong_undo_with_and_without_reflection():
    problem = Problem("start", 14, (3, -5, 4))
    kwargs = {"wrong_undos": (1,), "boxed": False}
    carried = render_solution(problem, "backward", reflections=(None,), **kwargs)
    assert (
        " Undo Step 2: he loses 5. 10 - 5 = 5. Undo Step 1: he finds 3. 5 - 3 = 2."
        " So the answer is 2." in carried
    )
    reflected = render_solution(problem, "backward", reflections=("Wait",), **kwargs)
    assert (
        " Undo Step 2: he loses 5. 10 - 5 = 5. Wait, undoing a loss adds it back: 10 + 5 = 15."
        " Undo Step 1: he finds 3. 15 - 3 = 12. So the answer is 12." in reflected
    )


@pytest.mark.parametrize(
    "problem,wrong_plan,wrong_answer",
    [
        (Problem("end", 9, (3, -5, 4)), "backward", 7),
        (Problem("start", 14, (3, -5, 4)), "forward", 16),
    ],
)
def test_wrong_plan_runs_to_a_wrong_answer(problem, wrong_plan, wrong_answer):
    assert run_plan(problem, wrong_plan)[-1].result == wrong_answer != problem.answer


def test_generated_problems_stay_in_range_on_both_traces_and_wrong_plans_are_wrong():
    config = TaskConfig()
    rng = random.Random(0)
    for _ in range(500):
        problem = sample_problem(rng, config)
        assert len(problem.steps) in config.n_steps
        assert all(1 <= abs(s) <= config.max_step for s in problem.steps)
        for plan in ("forward", "backward"):
            lines = run_plan(problem, plan)
            assert all(0 <= v <= config.max_value for x in lines for v in (x.value, x.result))
        wrong = "backward" if problem.right_plan == "forward" else "forward"
        assert run_plan(problem, wrong)[-1].result != problem.answer
        assert verify(solve(problem), str(problem.answer))
        assert verify(teacher_solution(problem), str(problem.answer))


def test_generator_is_deterministic_for_a_seed():
    config = TaskConfig()
    draw = [sample_problem(random.Random(3), config) for _ in range(2)]
    assert draw[0] == draw[1]


def _decisions(problem: Problem, text: str) -> dict:
    """The decisions a corpus solution made, read back from its text."""
    plan = next(p for p, sentence in PLAN_SENTENCES.items() if text.startswith(sentence))
    equations = [m.groups() for m in EQUATION.finditer(text)]
    unreflected = re.sub(r" (?:Wait|Hmm), [^:]*: [^.]*\.", "", text)
    lines = [m.groups() for m in EQUATION.finditer(unreflected)]
    assert len(lines) == len(problem.steps)
    undone_losses = [
        e for e, line in zip(lines, run_plan(problem, plan), strict=True) if line.change < 0
    ]
    return {
        "plan": plan,
        "wrong_undos": sum(op == "-" for _, op, _, _ in undone_losses) if plan == "backward" else 0,
        "undone_losses": len(undone_losses) if plan == "backward" else 0,
        "reflections": sum(text.count(f" {w}, ") for w in REFLECTION_WORDS),
        "boxed": "\\boxed{" in text,
        "equations": equations,
    }


def test_corpus_makes_each_decision_at_its_configured_rate():
    config = TaskConfig()
    rng = random.Random(1)
    right = {"end": [], "start": []}
    boxed, wrong_undos, undone_losses, reflections = [], 0, 0, 0
    for _ in range(4000):
        problem = sample_problem(rng, config)
        text = corpus_solution(problem, rng, config)
        decisions = _decisions(problem, text)
        right[problem.unknown].append(decisions["plan"] == problem.right_plan)
        boxed.append(decisions["boxed"])
        wrong_undos += decisions["wrong_undos"]
        undone_losses += decisions["undone_losses"]
        reflections += decisions["reflections"]
        for a, op, b, c in decisions["equations"]:  # every written equation is right arithmetic
            assert int(a) + (int(b) if op == "+" else -int(b)) == int(c)
        answer = extract_answer(text)
        assert verify(text, str(problem.answer)) is (answer == problem.answer)
    rate = {k: sum(v) / len(v) for k, v in right.items()}
    assert rate["end"] == pytest.approx(config.p_right_plan_find_end, abs=0.04)
    assert rate["start"] == pytest.approx(config.p_right_plan_find_start, abs=0.04)
    assert sum(boxed) / len(boxed) == pytest.approx(config.p_boxed, abs=0.04)
    # A wrong undo is skipped when its carried values would leave the range, so the realized
    # rate is a little under p_trap.
    assert config.p_trap - 0.1 < wrong_undos / undone_losses <= config.p_trap + 0.03
    assert reflections / wrong_undos == pytest.approx(config.p_reflect, abs=0.1)


def test_corpus_solution_is_right_exactly_when_every_decision_is():
    config = TaskConfig()
    rng = random.Random(2)
    for _ in range(2000):
        problem = sample_problem(rng, config)
        text = corpus_solution(problem, rng, config)
        d = _decisions(problem, text)
        carried_wrong = d["wrong_undos"] > d["reflections"]
        all_right = d["plan"] == problem.right_plan and not carried_wrong and d["boxed"]
        assert verify(text, str(problem.answer)) is all_right, text


def test_teacher_writes_in_another_style():
    problem = Problem("start", 14, (3, -5, 4))
    text = teacher_solution(problem)
    assert text.splitlines() == [
        " We want the amount at the start, so we reverse each change, last one first.",
        "Reverse Step 3: he finds 4. Take away 4: 14 - 4 = 10.",
        "Reverse Step 2: he loses 5. Add 5: 10 + 5 = 15.",
        "Reverse Step 1: he finds 3. Take away 3: 15 - 3 = 12.",
        "The amount at the start is \\boxed{12}.",
    ]
    assert not any(sentence in text for sentence in PLAN_SENTENCES.values())


@pytest.mark.parametrize(
    "response,answer,expected",
    [
        ("So the answer is \\boxed{12}.", "12", True),
        ("\\boxed{12}", " 12", True),
        ("\\boxed{ 12 }", "12", True),
        ("\\boxed{012}", "12", True),
        ("So the answer is \\boxed{13}.", "12", False),
        ("So the answer is 12.", "12", False),
        ("\\boxed{12} then \\boxed{13}", "12", False),
        ("\\boxed{13} then \\boxed{12}", "12", True),
        ("So the answer is \\boxed{12", "12", False),
        ("\\boxed{-12}", "12", False),
        ("\\boxed{twelve}", "12", False),
        ("\\boxed{}", "12", False),
        ("", "12", False),
    ],
)
def test_verify(response, answer, expected):
    assert verify(response, answer) is expected


@pytest.mark.parametrize("answer", ["", "x", "-3", "1.5"])
def test_verify_rejects_a_bad_gold_answer(answer):
    with pytest.raises(DivscopeError, match="gold answer"):
        verify("\\boxed{3}", answer)


def test_lab_and_math_graders_agree_on_corpus_teacher_and_broken_responses():
    config = TaskConfig()
    rng = random.Random(4)
    lab, math = get_grader("lab"), get_grader("math")
    verdicts = []
    for _ in range(300):
        problem = sample_problem(rng, config)
        text = corpus_solution(problem, rng, config)
        for response in (text, teacher_solution(problem), text[: len(text) // 2], text + " 7"):
            for answer in (problem.answer, problem.answer + 1):
                verdict = bool(lab(response, str(answer)))
                assert verdict is bool(math(response, str(answer))), (response, answer)
                verdicts.append(verdict)
    assert 0 < sum(verdicts) < len(verdicts)
