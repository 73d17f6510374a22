"""Progress that reads well where it is read: a redrawn bar on a terminal, periodic lines in a log.

On a terminal, `Progress` is a tqdm bar. When stderr is a file or a pipe (CI, SLURM, `nohup`),
a redrawn bar would write a `\\r`-separated line per redraw, megabytes over a long run; there it
prints one plain line every `every` seconds and a last one when the work ends, each with the
count, the share done, the rate and the elapsed time:

    scoring: 1,024/9,226 tok (11.1%), 412.0 tok/s, 2 s elapsed

>>> import io
>>> log = io.StringIO()
>>> with Progress(3, desc="decoding", unit="seq", stream=log, every=3600.0) as bar:
...     bar.update(3)
>>> log.getvalue().startswith("decoding: 3/3 seq (100.0%)")
True
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from divscope.defaults import PROGRESS_EVERY


def is_terminal(stream: TextIO | None = None) -> bool:
    """Whether `stream` (default: stderr) is an interactive terminal."""
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Progress:
    """A progress report over `total` units of work; use as a context manager, call `update`.

    Args:
        total: units of work in all.
        desc: what is being done, the line's prefix.
        unit: name of one unit (`tok`, `seq`, `prompt`).
        initial: units already done before this run (a resumed run); not counted in the rate.
        scale: the terminal bar writes large counts with SI prefixes (9.2k tok).
        enabled: False prints nothing.
        stream: where to write (default: stderr).
        every: seconds between two lines when `stream` is not a terminal.
        clock: the time source (tests replace it).
    """

    def __init__(
        self,
        total: int,
        *,
        desc: str,
        unit: str,
        initial: int = 0,
        scale: bool = False,
        enabled: bool = True,
        stream: TextIO | None = None,
        every: float = PROGRESS_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.done = initial
        self._initial = initial
        self._stream = sys.stderr if stream is None else stream
        self._every, self._clock = every, clock
        self._bar: Any = None
        self._written: int | None = None  # the count of the last line written
        self._lines = enabled and not is_terminal(self._stream)
        if enabled and not self._lines:
            from tqdm.auto import tqdm

            self._bar = tqdm(
                total=total,
                initial=initial,
                desc=desc,
                unit=unit,
                unit_scale=scale,
                file=self._stream,
            )
        self._start = self._last = clock()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, n: int) -> None:
        """Count `n` more units done."""
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        elif self._lines and self._clock() - self._last >= self._every:
            self._write()

    def close(self) -> None:
        """End the report: close the bar, or write the last line."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self._lines:
            if self._written != self.done:  # the last update may have just written this line
                self._write()
            self._lines = False

    def _write(self) -> None:
        now = self._clock()
        self._last, self._written = now, self.done
        elapsed = now - self._start
        share = f" ({100 * self.done / self.total:.1f}%)" if self.total else ""
        rate = (self.done - self._initial) / elapsed if elapsed > 0 else 0.0
        print(
            f"{self.desc}: {self.done:,}/{self.total:,} {self.unit}{share}, "
            f"{rate:,.1f} {self.unit}/s, {elapsed:,.0f} s elapsed",
            file=self._stream,
            flush=True,
        )


def note(message: str | None, *, enabled: bool = True, stream: TextIO | None = None) -> None:
    """Print `message` (when there is one) as one `note: ...` line on stderr.

    >>> import io
    >>> log = io.StringIO()
    >>> note("responses are capped at 250 new tokens", stream=log)
    >>> log.getvalue()
    'note: responses are capped at 250 new tokens\\n'
    """
    if message and enabled:
        print(f"note: {message}", file=sys.stderr if stream is None else stream, flush=True)
