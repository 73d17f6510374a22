"""The `exact` grader: string equality of the final answer."""

from __future__ import annotations

from divscope.answers import final_answer
from divscope.grading.verdict import Verdict


def grade_exact(response: str, answer: str) -> Verdict:
    """String equality of the final answer and the gold answer, whitespace normalized.

    The final answer is the last `\\boxed{}`'s content when the response has one, else the whole
    response (see `final_answer`); case and everything else matter.

    >>> grade_exact("the answer is \\\\boxed{ B }", "B")
    Verdict(correct=True, note=None)
    """
    return Verdict(final_answer(response) == " ".join(answer.split()))
