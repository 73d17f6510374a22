"""`divscope.progress`: periodic plain lines in a log, a redrawn bar only on a terminal."""

from __future__ import annotations

import io

from divscope.progress import Progress, is_terminal


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_gets_one_line_per_interval_and_a_last_line():
    log, clock = io.StringIO(), Clock()
    with Progress(100, desc="scoring", unit="tok", stream=log, every=30.0, clock=clock) as bar:
        for _ in range(10):
            clock.now += 10.0
            bar.update(10)
    lines = log.getvalue().splitlines()
    # updates at 10 s, 20 s, ... 100 s: lines at 30, 60, 90 s, then the closing one at 100 s
    assert lines == [
        "scoring: 30/100 tok (30.0%), 1.0 tok/s, 30 s elapsed",
        "scoring: 60/100 tok (60.0%), 1.0 tok/s, 60 s elapsed",
        "scoring: 90/100 tok (90.0%), 1.0 tok/s, 90 s elapsed",
        "scoring: 100/100 tok (100.0%), 1.0 tok/s, 100 s elapsed",
    ]
    assert "\r" not in log.getvalue()


def test_a_last_update_that_wrote_its_line_is_not_repeated_on_close():
    log, clock = io.StringIO(), Clock()
    with Progress(8, desc="random", unit="seq", stream=log, every=30.0, clock=clock) as bar:
        clock.now = 37.0
        bar.update(8)
    assert log.getvalue() == "random: 8/8 seq (100.0%), 0.2 seq/s, 37 s elapsed\n"


def test_the_rate_of_a_resumed_run_counts_only_its_own_work():
    log, clock = io.StringIO(), Clock()
    with Progress(10, desc="generating", unit="prompt", initial=6, stream=log, clock=clock) as bar:
        clock.now = 2.0
        bar.update(4)
    assert log.getvalue() == "generating: 10/10 prompt (100.0%), 2.0 prompt/s, 2 s elapsed\n"


def test_disabled_prints_nothing():
    log = io.StringIO()
    with Progress(5, desc="x", unit="seq", stream=log, enabled=False) as bar:
        bar.update(5)
    assert log.getvalue() == ""


def test_a_terminal_gets_a_redrawn_bar():
    terminal = Terminal()
    assert is_terminal(terminal) and not is_terminal(io.StringIO())
    with Progress(4, desc="forward", unit="seq", stream=terminal) as bar:
        bar.update(2)
        bar.update(2)
    assert "\r" in terminal.getvalue() and "4/4" in terminal.getvalue()
