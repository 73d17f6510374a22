"""The lab task: multi-step word problems whose solutions make several uncertain decisions.

A problem is a chain of 4 to 6 gains and losses with one end unknown:

- find the end: "Sam has 9 coins. Step 1: he finds 3. Step 2: he loses 5. ... How many coins does
  he have now?" The right plan goes forward from the start;
- find the start: "Sam has some coins. Step 1: he finds 3. ... Now he has 9. How many coins did
  he have at the start?" The right plan works backward from the end, undoing each change.

Solutions name the step they execute ("Undo Step 2: he loses 5. ..."), so a model finds each
change by its label in the prompt rather than by counting positions.

The pretraining corpus writes solutions in one style (`corpus_solution`) with three kinds of
uncertain decision, each of which decides the grade:

1. **plan** (the first words): "Let me work backward from the end." or "First, I go forward from
   the start." Either plan starts from the known number and runs without error, so the wrong plan
   ends in a well-formed wrong answer (the changes never sum to zero);
2. **trap and reflection** (mid-solution): undoing a loss, the corpus often writes the wrong sign
   and carries on; right after such a line it sometimes reflects ("Wait, undoing a loss adds it
   back: ...") and corrects it;
3. **answer format** (the end): "So the answer is \\boxed{N}." or the unboxed "So the answer is
   N.", which no grader accepts.

The SFT control learns from a differently styled teacher (`teacher_solution`): always right, other
phrasing and layout. Graders read the last `\\boxed{}`: `verify` agrees with `--grader math`.

>>> p = Problem("start", 14, (3, -5))
>>> print(p.prompt)  # doctest: +NORMALIZE_WHITESPACE
Sam has some coins. Step 1: he finds 3. Step 2: he loses 5. Now he has 14.
How many coins did he have at the start?
>>> print(solve(p))  # doctest: +NORMALIZE_WHITESPACE
 Let me work backward from the end. Start at 14. Undo Step 2: he loses 5. 14 + 5 = 19.
 Undo Step 1: he finds 3. 19 - 3 = 16. So the answer is \\boxed{16}.
"""

from __future__ import annotations

import dataclasses
import random
import re
from dataclasses import dataclass
from typing import Literal

from divscope.answers import last_boxed
from divscope.errors import DivscopeError

Plan = Literal["forward", "backward"]
Unknown = Literal["start", "end"]

# (name, pronoun, item, gain verb, loss verb): the words of a problem, picked by `Problem.story`.
STORIES: tuple[tuple[str, str, str, str, str], ...] = (
    ("Sam", "he", "coins", "finds", "loses"),
    ("Mia", "she", "apples", "picks", "eats"),
    ("Tom", "he", "cards", "wins", "gives away"),
    ("Ana", "she", "stickers", "gets", "uses"),
)
PLAN_SENTENCES: dict[Plan, str] = {
    "forward": " First, I go forward from the start.",
    "backward": " Let me work backward from the end.",
}
REFLECTION_WORDS = ("Wait", "Hmm")
"""The words that open the corpus' correction of a wrong undo (the first is more frequent)."""

_INTEGER = re.compile(r"\s*\d+\s*")


@dataclass(frozen=True)
class TaskConfig:
    """Size of the problem space and the habits of the pretraining corpus."""

    max_value: int = 29
    """Largest number on the right and on the wrong-plan trace (values stay in 0..max_value)."""
    max_step: int = 5
    """Each change is a gain or a loss of 1..max_step."""
    n_steps: tuple[int, ...] = (4, 5, 6)
    """Allowed chain lengths, drawn uniformly."""
    p_right_plan_find_end: float = 0.6
    """Share of corpus solutions of find-the-end problems that go forward (the right plan)."""
    p_right_plan_find_start: float = 0.5
    """Share of corpus solutions of find-the-start problems that work backward (right)."""
    p_trap: float = 0.45
    """Share of undone losses the corpus writes with the wrong sign (subtracting the loss)."""
    p_reflect: float = 0.5
    """Share of wrong undos the corpus follows with a reflection that corrects them."""
    p_boxed: float = 0.6
    """Share of corpus solutions that box their answer."""


@dataclass(frozen=True)
class Problem:
    """One chain with one unknown end.

    Attributes:
        unknown: which end is asked for.
        known: the number given at the other end.
        steps: the signed changes, in chain order (positive: a gain).
        story: index into `STORIES` (who, what, which verbs).
    """

    unknown: Unknown
    known: int
    steps: tuple[int, ...]
    story: int = 0

    @property
    def right_plan(self) -> Plan:
        return "forward" if self.unknown == "end" else "backward"

    @property
    def answer(self) -> int:
        return run_plan(self, self.right_plan)[-1].result

    @property
    def prompt(self) -> str:
        name, pronoun, item, gain, loss = STORIES[self.story]
        told = " ".join(
            f"Step {k}: {pronoun} {gain if s > 0 else loss} {abs(s)}."
            for k, s in enumerate(self.steps, start=1)
        )
        if self.unknown == "end":
            return (
                f"{name} has {self.known} {item}. {told} How many {item} does {pronoun} have now?"
            )
        return (
            f"{name} has some {item}. {told} Now {pronoun} has {self.known}. "
            f"How many {item} did {pronoun} have at the start?"
        )


@dataclass(frozen=True)
class Line:
    """One executed change: `value ± amount = result`, undoing a change in backward plans."""

    value: int
    change: int
    """The change of the problem this line executes (or undoes)."""
    step: int
    """The change's 1-based position in the problem's chain (its `Step k` in the prompt)."""
    undo: bool
    result: int

    @property
    def delta(self) -> int:
        """What the line adds to `value` (`result - value` when the line is right)."""
        return -self.change if self.undo else self.change


def run_plan(problem: Problem, plan: Plan) -> list[Line]:
    """Execute a plan exactly from the known number.

    >>> [line.result for line in run_plan(Problem("start", 14, (3, -5)), "backward")]
    [19, 16]
    """
    undo = plan == "backward"
    order = range(len(problem.steps), 0, -1) if undo else range(1, len(problem.steps) + 1)
    lines, value = [], problem.known
    for step in order:
        change = problem.steps[step - 1]
        result = value - change if undo else value + change
        lines.append(Line(value, change, step, undo, result))
        value = result
    return lines


def sample_problem(rng: random.Random, config: TaskConfig) -> Problem:
    """Draw one valid problem (rejection sampling over chains that stay in range)."""
    while True:
        n = rng.choice(config.n_steps)
        steps = tuple(rng.choice((-1, 1)) * rng.randint(1, config.max_step) for _ in range(n))
        problem = Problem(
            unknown=rng.choice(("end", "start")),
            known=rng.randint(0, config.max_value),
            steps=steps,
            story=rng.randrange(len(STORIES)),
        )
        if sum(steps) != 0 and _in_range(problem, config.max_value):
            return problem


def _in_range(problem: Problem, max_value: int) -> bool:
    lines = run_plan(problem, "forward") + run_plan(problem, "backward")
    return all(0 <= line.result <= max_value for line in lines)


def _equation(value: int, delta: int) -> str:
    sign = "+" if delta > 0 else "-"
    return f"{value} {sign} {abs(delta)} = {value + delta}"


def _line_text(problem: Problem, line: Line, delta: int) -> str:
    """` Undo Step 2: he loses 5. 12 + 5 = 17.` (base style), with `delta` as written (maybe
    wrong)."""
    _, pronoun, _, gain, loss = STORIES[problem.story]
    verb = gain if line.change > 0 else loss
    label = f"Undo Step {line.step}" if line.undo else f"Step {line.step}"
    return f" {label}: {pronoun} {verb} {abs(line.change)}. {_equation(line.value, delta)}."


def _answer_text(answer: int, boxed: bool) -> str:
    return f" So the answer is \\boxed{{{answer}}}." if boxed else f" So the answer is {answer}."


def solve(problem: Problem) -> str:
    """The reference solution in the corpus' style: right plan, right signs, boxed answer."""
    return render_solution(problem, problem.right_plan, wrong_undos=(), reflections=(), boxed=True)


def render_solution(
    problem: Problem,
    plan: Plan,
    *,
    wrong_undos: tuple[int, ...],
    reflections: tuple[str | None, ...],
    boxed: bool,
) -> str:
    """A corpus-style solution of `problem` with `plan` and the given decisions.

    Args:
        wrong_undos: indices of the plan's lines written with the wrong sign (undone losses).
        reflections: for each wrong undo, the reflection word that corrects it, or None to carry
            the wrong value on.
        boxed: whether the answer is boxed.
    """
    parts = [PLAN_SENTENCES[plan]]
    value = problem.known
    parts.append(f" Start at {value}.")
    wrong = dict(zip(wrong_undos, reflections, strict=True))
    for i, exact in enumerate(run_plan(problem, plan)):
        line = dataclasses.replace(exact, value=value, result=value + exact.delta)
        if i in wrong:
            parts.append(_line_text(problem, line, -line.delta))
            word = wrong[i]
            if word is None:
                value = value - line.delta
                continue
            parts.append(f" {word}, undoing a loss adds it back: {_equation(value, line.delta)}.")
        else:
            parts.append(_line_text(problem, line, line.delta))
        value = line.result
    parts.append(_answer_text(value, boxed))
    return "".join(parts)


def corpus_solution(problem: Problem, rng: random.Random, config: TaskConfig) -> str:
    """A solution as the pretraining corpus writes it, each decision drawn at the configured rate.

    A wrong undo is only written when the carried wrong values stay in `[0, max_value]`, and the
    wrong plan never reaches the right answer by wrong undos.
    """
    p_right = (
        config.p_right_plan_find_end if problem.unknown == "end" else config.p_right_plan_find_start
    )
    wrong_plan: Plan = "backward" if problem.right_plan == "forward" else "forward"
    plan = problem.right_plan if rng.random() < p_right else wrong_plan
    wrong_undos: list[int] = []
    reflections: list[str | None] = []
    if plan == "backward":
        lines = run_plan(problem, plan)
        shortfall = 0  # how far the carried value is below the right trace
        for i, line in enumerate(lines):
            if line.change > 0 or rng.random() >= config.p_trap:
                continue
            word = (
                REFLECTION_WORDS[rng.random() >= 0.6] if rng.random() < config.p_reflect else None
            )
            wrong = shortfall + 2 * abs(line.change)
            carried = lines[i : i + 1] if word else lines[i:]
            if min(x.result for x in carried) - wrong >= 0:
                wrong_undos.append(i)
                reflections.append(word)
                shortfall = shortfall if word else wrong
    boxed = rng.random() < config.p_boxed
    text = render_solution(
        problem, plan, wrong_undos=tuple(wrong_undos), reflections=tuple(reflections), boxed=True
    )
    if plan != problem.right_plan and extract_answer(text) == problem.answer:
        wrong_undos, reflections = [], []  # wrong undos that cancel the wrong plan's error
    return render_solution(
        problem, plan, wrong_undos=tuple(wrong_undos), reflections=tuple(reflections), boxed=boxed
    )


def teacher_solution(problem: Problem) -> str:
    """The SFT teacher's solution: always right and boxed, in its own phrasing and layout.

    >>> print(teacher_solution(Problem("end", 9, (3, -5))))
     We want the amount at the end, so we apply each change in order.
    Apply Step 1: he finds 3. Add 3: 9 + 3 = 12.
    Apply Step 2: he loses 5. Take away 5: 12 - 5 = 7.
    The amount at the end is \\boxed{7}.
    """
    lines = run_plan(problem, problem.right_plan)
    if problem.unknown == "end":
        head = " We want the amount at the end, so we apply each change in order."
    else:
        head = " We want the amount at the start, so we reverse each change, last one first."
    _, pronoun, _, gain, loss = STORIES[problem.story]
    body = [
        f"{'Reverse' if line.undo else 'Apply'} Step {line.step}: {pronoun} "
        f"{gain if line.change > 0 else loss} {abs(line.change)}. "
        f"{'Add' if line.delta > 0 else 'Take away'} {abs(line.delta)}: "
        f"{_equation(line.value, line.delta)}."
        for line in lines
    ]
    tail = f"The amount at the {problem.unknown} is \\boxed{{{problem.answer}}}."
    return "\n".join([head, *body, tail])


def extract_answer(response: str) -> int | None:
    """The integer in the response's last complete `\\boxed{}`, or None without one.

    >>> extract_answer("So the answer is \\\\boxed{12}.")
    12
    >>> extract_answer("So the answer is 12.") is None
    True
    """
    boxed = last_boxed(response)
    return int(boxed) if boxed is not None and _INTEGER.fullmatch(boxed) else None


def verify(response: str, answer: str) -> bool:
    """The lab's verifiable reward: is the response's last `\\boxed{}` the gold integer?

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
