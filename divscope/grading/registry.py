"""Graders by name: the built-in ones, and any user function given as `module:function`.

A grader is a function `(response, answer) -> bool | Verdict`. Graders are named by their
import path and imported on first use, so that no grader's dependencies load early and a
worker process can import the same grader by name.

>>> get_grader("lab")("So the answer is \\\\boxed{12}.", "12")
True
>>> grader_target("math")
'divscope.grading.math_grader:grade_math'
"""

from __future__ import annotations

from collections.abc import Callable

from divscope.errors import DivscopeError
from divscope.grading.pool import import_function
from divscope.grading.verdict import Verdict

Grader = Callable[[str, str], "bool | Verdict"]

_GRADERS: dict[str, str] = {
    "exact": "divscope.grading.exact_grader:grade_exact",
    "lab": "divscope.lab.task:verify",
    "math": "divscope.grading.math_grader:grade_math",
}


def known_graders() -> list[str]:
    """Names of the built-in graders, sorted."""
    return sorted(_GRADERS)


def grader_target(name: str) -> str:
    """The `module:function` import path of a built-in grader name or of a user grader.

    Raises:
        DivscopeError: `name` is neither a built-in grader nor of the form `module:function`.
    """
    if name in _GRADERS:
        return _GRADERS[name]
    if ":" in name:
        return name
    raise DivscopeError(
        f"unknown grader {name!r}; known graders: {', '.join(known_graders())}, or your own "
        "function as module:function."
    )


def get_grader(name: str) -> Grader:
    """The grader `name`: a built-in name or `module:function`.

    Raises:
        DivscopeError: an unknown name, or a user grader that cannot be imported.
    """
    return import_function(grader_target(name))
