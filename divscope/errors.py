"""The exception type that divscope raises for bad input or configuration, and its warnings."""

import warnings


class DivscopeError(Exception):
    """A user-facing error: the message names what was wrong and what to do.

    The CLI prints the message (no traceback) and exits with status 2.
    """


class DivscopeWarning(UserWarning):
    """Something the user should know that does not stop the run (e.g. tokenizers whose special
    tokens differ). The CLI prints it as one `Warning: ...` line on stderr."""


def warn(message: str) -> None:
    """Emit `message` as a `DivscopeWarning` (Python shows each distinct message once per place).

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn("the base and rl tokenizers differ in 2 special tokens")
    >>> caught[0].category.__name__, str(caught[0].message)[:8]
    ('DivscopeWarning', 'the base')
    """
    warnings.warn(message, DivscopeWarning, stacklevel=2)
