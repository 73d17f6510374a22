"""Final-answer extraction: the last `\\boxed{...}` of a response, nested braces included.

>>> last_boxed(r"first \\boxed{1}, then \\boxed{\\frac{1}{2}}.")
'\\\\frac{1}{2}'
"""

from __future__ import annotations

import re

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


def last_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` (or `\\fbox{...}`) in `text`, braces balanced.

    A box whose braces never close (a truncated response) does not count: the last *complete*
    box wins.

    Args:
        text: a model response.

    Returns:
        The content between the box's braces, unstripped, or None when `text` has no complete box.

    >>> last_boxed(r"\\boxed{\\sqrt{\\frac{a}{b}}} and \\boxed{2")
    '\\\\sqrt{\\\\frac{a}{b}}'
    >>> last_boxed("no box here") is None
    True
    """
    for match in reversed(list(_BOXED.finditer(text))):
        content = _braced(text, match.end())
        if content is not None:
            return content
    return None


def _braced(text: str, start: int) -> str | None:
    """The text from `start` up to the brace that closes the one just before `start`."""
    depth = 1
    for index in range(start, len(text)):
        if text[index] == "{" and text[index - 1] != "\\":
            depth += 1
        elif text[index] == "}" and text[index - 1] != "\\":
            depth -= 1
            if depth == 0:
                return text[start:index]
    return None


def final_answer(text: str) -> str:
    """The last box's content if there is one, else the whole text; whitespace normalized.

    >>> final_answer("so  \\\\boxed{ 12 }")
    '12'
    >>> final_answer("  forward\\n plan ")
    'forward plan'
    """
    boxed = last_boxed(text)
    return " ".join((text if boxed is None else boxed).split())
