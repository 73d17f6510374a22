"""The `math` grader: Math-Verify on the last `\\boxed{}` of a response.

Math-Verify's own timeouts use `signal.alarm`, which fails off the main thread, so they are off
here: the per-item wall-clock limit is enforced by the worker pool of `divscope.grading.table`.
Called directly, this grader has no time limit.

>>> grade_math(r"So $x = \\boxed{\\dfrac{1}{2}}$.", "0.5")
Verdict(correct=True, note=None)
"""

from __future__ import annotations

import logging
from functools import lru_cache

from math_verify import parse, verify

from divscope.answers import last_boxed
from divscope.grading.verdict import Verdict

# The pool enforces the time limit; Math-Verify warns once that its own limit is off.
logging.getLogger("math_verify").setLevel(logging.ERROR)


def grade_math(response: str, answer: str) -> Verdict:
    """Math-Verify equivalence of the response's last `\\boxed{}` and the gold answer.

    The gold answer may be bare (`0.5`, `\\frac12`), in `$...$`, or itself boxed. Equivalent
    forms count (`\\frac{1}{2}` = `0.5`, `\\dfrac`, `30^\\circ` = `30`, units text, bold).

    Args:
        response: the model's response.
        answer: the gold answer.

    Returns:
        The verdict; False with a note when the response has no complete `\\boxed{}` or the gold
        answer cannot be parsed.

    >>> grade_math(r"\\boxed{3} no, \\boxed{4}", "3")
    Verdict(correct=False, note=None)
    """
    boxed = last_boxed(response)
    if boxed is None:
        return Verdict(False, "no \\boxed{} in the response")
    gold = _parse_gold(answer)
    if not gold:
        return Verdict(False, f"could not parse the gold answer {answer!r}")
    prediction = parse(_boxed(boxed), parsing_timeout=None)
    if not prediction:
        return Verdict(False, "could not parse the boxed answer")
    return Verdict(verify(list(gold), prediction, timeout_seconds=None))


@lru_cache(maxsize=4096)
def _parse_gold(answer: str) -> tuple:
    text = last_boxed(answer)
    if text is None:
        text = answer.strip().strip("$")
    return tuple(parse(_boxed(text), parsing_timeout=None))


def _boxed(text: str) -> str:
    return "\\boxed{" + text + "}"
