"""The result of grading one response."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    """Whether a response is correct, and why it could not be checked properly if so.

    A grader may return a plain bool or a `Verdict`; a `Verdict` is truthy iff correct.

    >>> bool(Verdict(False, "no \\\\boxed{} in the response"))
    False
    """

    correct: bool
    """The grade; False for responses that could not be parsed or timed out."""
    note: str | None = None
    """Why the grade is not a clean verdict (parse failure, timeout, ...); None when it is."""

    def __bool__(self) -> bool:
        return self.correct
