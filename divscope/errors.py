"""The one exception type that divscope raises for bad input or configuration."""


class DivscopeError(Exception):
    """A user-facing error: the message names what was wrong and what to do.

    The CLI prints the message (no traceback) and exits with status 2.
    """
