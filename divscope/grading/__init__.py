"""Graders: `(response, answer) -> bool` verifiers, looked up by name.

>>> get_grader("lab")("plan: forward ; 9 +3 = 12 ; answer: 12", "12")
True
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from divscope.errors import DivscopeError

Grader = Callable[[str, str], bool]

# name -> "module:function"; imported on first use so that no grader's dependencies load early.
_GRADERS: dict[str, str] = {
    "lab": "divscope.lab.task:verify",
}


def known_graders() -> list[str]:
    """Names accepted by `get_grader`, sorted."""
    return sorted(_GRADERS)


def get_grader(name: str) -> Grader:
    """The grader registered as `name`.

    Raises:
        DivscopeError: if no grader has that name.
    """
    if name not in _GRADERS:
        raise DivscopeError(f"unknown grader {name!r}; known graders: {', '.join(known_graders())}")
    module, function = _GRADERS[name].split(":")
    return getattr(importlib.import_module(module), function)


__all__ = ["Grader", "get_grader", "known_graders"]
