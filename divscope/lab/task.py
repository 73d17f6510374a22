"""The lab task: replay or undo a short chain of additions, after a planning decision.

A problem is a chain `s o1 ... ok = e` of small signed steps with one end unknown:

- find the end, `Q: 9 +3 -5 +4 = ? ; find end A:`: the right plan is `forward` (apply the steps
  in order from the start);
- find the start, `Q: ? +3 -5 +4 = 14 ; find start A:`: the right plan is `backward` (undo the
  steps in reverse order from the end).

The question's last words name the unknown, so the right plan is a function of one prompt token
the plan token can attend to at a fixed distance.

Either plan always starts from the known number, so the wrong plan runs fine and ends in a
well-formed wrong answer. A solution states the plan, executes it one step at a time, and ends
with the answer:

    plan: backward ; 14 -4 = 10 ; 10 +5 = 15 ; 15 -3 = 12 ; answer: 12

Problems are generated so that every value on the right and on the wrong trace stays in
`[0, max_value]` and the steps never sum to zero (so the wrong plan is always wrong).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Literal

from divscope.errors import DivscopeError

Plan = Literal["forward", "backward"]
Unknown = Literal["start", "end"]

_ANSWER = re.compile(r"(?:^|\s)answer:\s+(\d+)\s*$")


@dataclass(frozen=True)
class TaskConfig:
    """Size of the problem space and the habits of the pretraining corpus."""

    max_value: int = 39
    """Largest number that appears anywhere (numbers are single tokens 0..max_value)."""
    max_step: int = 9
    """Steps are `+1..+max_step` and `-1..-max_step`."""
    n_steps: tuple[int, ...] = (2, 3)
    """Allowed chain lengths, drawn uniformly."""
    p_right_plan_find_end: float = 0.55
    """Share of corpus solutions of find-the-end problems that choose `forward` (the right plan)."""
    p_right_plan_find_start: float = 0.25
    """Share of corpus solutions of find-the-start problems that choose `backward` (right)."""
    p_slip: float = 0.1
    """Share of corpus solutions with one arithmetic slip (a step result off by one)."""


@dataclass(frozen=True)
class Problem:
    """One chain with one unknown end.

    Attributes:
        unknown: which end is asked for.
        known: the number given at the other end.
        steps: the signed steps, in chain order.
    """

    unknown: Unknown
    known: int
    steps: tuple[int, ...]

    @property
    def right_plan(self) -> Plan:
        return "forward" if self.unknown == "end" else "backward"

    @property
    def answer(self) -> int:
        return run_plan(self, self.right_plan)[-1][2]

    @property
    def prompt(self) -> str:
        chain = " ".join(format_step(step) for step in self.steps)
        if self.unknown == "end":
            return f"Q: {self.known} {chain} = ? ; find end A:"
        return f"Q: ? {chain} = {self.known} ; find start A:"


def format_step(step: int) -> str:
    """`3 -> "+3"`, `-5 -> "-5"`: a step is one token."""
    return f"{step:+d}"


def run_plan(problem: Problem, plan: Plan) -> list[tuple[int, int, int]]:
    """Execute a plan exactly: the list of `(value, step, result)` lines it writes.

    >>> run_plan(Problem("start", 14, (3, -5, 4)), "backward")
    [(14, -4, 10), (10, 5, 15), (15, -3, 12)]
    """
    steps = problem.steps if plan == "forward" else tuple(-s for s in reversed(problem.steps))
    lines, value = [], problem.known
    for step in steps:
        lines.append((value, step, value + step))
        value += step
    return lines


def render_solution(lines: list[tuple[int, int, int]], plan: Plan) -> str:
    """The solution text for the executed `lines` of `plan`; the answer is the last result."""
    body = " ; ".join(f"{a} {format_step(s)} = {b}" for a, s, b in lines)
    return f"plan: {plan} ; {body} ; answer: {lines[-1][2]}"


def solve(problem: Problem) -> str:
    """The reference solution: right plan, no slip."""
    return render_solution(run_plan(problem, problem.right_plan), problem.right_plan)


def sample_problem(rng: random.Random, config: TaskConfig) -> Problem:
    """Draw one valid problem (rejection sampling over chains that stay in range)."""
    while True:
        n = rng.choice(config.n_steps)
        steps = tuple(rng.choice((-1, 1)) * rng.randint(1, config.max_step) for _ in range(n))
        problem = Problem(
            unknown=rng.choice(("end", "start")),
            known=rng.randint(0, config.max_value),
            steps=steps,
        )
        if sum(steps) != 0 and _in_range(problem, config.max_value):
            return problem


def _in_range(problem: Problem, max_value: int) -> bool:
    lines = run_plan(problem, "forward") + run_plan(problem, "backward")
    return all(0 <= a <= max_value and 0 <= b <= max_value for a, _, b in lines)


def corpus_solution(problem: Problem, rng: random.Random, config: TaskConfig) -> str:
    """A solution as the pretraining corpus writes it: a right or wrong plan, maybe one slip.

    A slip puts a result off by one at a random line; later lines carry the slipped value on.
    """
    p_right = (
        config.p_right_plan_find_end if problem.unknown == "end" else config.p_right_plan_find_start
    )
    wrong: Plan = "backward" if problem.right_plan == "forward" else "forward"
    plan = problem.right_plan if rng.random() < p_right else wrong
    lines = run_plan(problem, plan)
    if rng.random() < config.p_slip:
        lines = _slip(lines, rng.randrange(len(lines)), rng.choice((-1, 1)), config.max_value)
    return render_solution(lines, plan)


def _slip(
    lines: list[tuple[int, int, int]], at: int, offset: int, max_value: int
) -> list[tuple[int, int, int]]:
    """Put the result of line `at` off by `offset`; later lines carry the slipped value on.

    The offset flips sign when the shifted trace would leave `[0, max_value]`.
    """
    if not all(0 <= b + offset <= max_value for _, _, b in lines[at:]):
        offset = -offset
    return lines[:at] + [
        (a + (offset if i > at else 0), s, b + offset)
        for i, (a, s, b) in enumerate(lines)
        if i >= at
    ]


def extract_answer(response: str) -> int | None:
    """The integer after the final `answer:`, or None when the response does not end with one.

    >>> extract_answer("plan: forward ; 9 +3 = 12 ; answer: 12")
    12
    """
    match = _ANSWER.search(response)
    return int(match.group(1)) if match else None


def verify(response: str, answer: str) -> bool:
    """The lab's verifiable reward: does `response` end with `answer: <answer>`?

    Args:
        response: generated text (special tokens removed).
        answer: the gold answer, a non-negative integer written in decimal.

    Raises:
        DivscopeError: if `answer` is not a non-negative integer.
    """
    gold = answer.strip()
    if not gold.isdigit():
        raise DivscopeError(
            f"lab grader: gold answer {answer!r} is not a non-negative integer; "
            "the lab task's answers are the integers in prompts/*.jsonl"
        )
    return extract_answer(response) == int(gold)
