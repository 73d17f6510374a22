"""A process pool with a wall-clock limit per item: a hung item costs one worker, not the run.

`concurrent.futures` cannot stop one running task, and signal-based timeouts fail off the main
thread. Here each worker serves one item at a time over a pipe; a worker that overruns its
item's deadline is killed and replaced, and a worker that dies is replaced too. Workers are fresh
interpreters running only this module's `_serve` (neither forked, which is unsafe in a process
holding CUDA or OpenMP state, nor multiprocessing-spawned, which re-imports the caller's main
script), and an item's deadline starts only once its worker has imported the function.

>>> outcomes = TimeoutPool("operator:truediv", timeout=5, workers=1).map([(1, 2), (1, 0)])
>>> [(o.value, o.error) for o in outcomes]
[(0.5, None), (None, 'ZeroDivisionError: division by zero')]
"""

from __future__ import annotations

import ctypes
import importlib
import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Literal

from divscope.errors import DivscopeError

_PR_SET_PDEATHSIG = 1  # from <sys/prctl.h>


@dataclass(frozen=True)
class Outcome:
    """What became of one item."""

    value: Any = None
    """The function's return value; None unless `status` is `ok`."""
    status: Literal["ok", "raised", "timeout", "died"] = "ok"
    """`ok`, `raised` (the function raised), `timeout` (killed at the deadline) or `died`."""
    error: str | None = None
    """`Type: message` of the exception, or a description of the timeout or death."""


def import_function(target: str) -> Callable:
    """The function named by `module:function` (`module:object.attribute` also works).

    Raises:
        DivscopeError: the target is malformed, cannot be imported or is not callable.
    """
    module_name, _, path = target.partition(":")
    if not module_name or not path:
        raise DivscopeError(
            f"{target!r}: name a function as module:function, e.g. mypkg.grade:check."
        )
    try:
        value: Any = importlib.import_module(module_name)
        for attribute in path.split("."):
            value = getattr(value, attribute)
    except ImportError as error:
        raise DivscopeError(
            f"{target!r}: cannot import module {module_name!r} ({error}); is it on PYTHONPATH "
            "or in the current directory?"
        ) from error
    except AttributeError as error:
        raise DivscopeError(f"{target!r}: module {module_name!r} has no {path!r}.") from error
    if not callable(value):
        raise DivscopeError(f"{target!r}: {path!r} is not callable.")
    return value


def _serve(target: str, read_fd: int, write_fd: int) -> None:
    """Worker loop: import `target`, say ready, then answer (index, args) until told to stop."""
    if sys.platform == "linux":  # die with the parent, even one killed without cleanup
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    receiver, sender = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    function = import_function(target)
    sender.send(None)
    while True:
        try:
            task = receiver.recv()
        except EOFError:  # the parent is gone
            return
        if task is None:
            return
        index, args = task
        try:
            sender.send((index, Outcome(function(*args))))
        except Exception as error:
            sender.send((index, Outcome(None, "raised", f"{type(error).__name__}: {error}")))


class _Worker:
    """One worker interpreter, the pipes to it, and the item it is working on."""

    def __init__(self, target: str) -> None:
        child_read, parent_write = os.pipe()
        parent_read, child_write = os.pipe()
        code = (
            "from divscope.grading.pool import _serve; "
            f"_serve({target!r}, {child_read}, {child_write})"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-c", code],
            pass_fds=(child_read, child_write),
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            start_new_session=True,  # Ctrl-C reaches the parent, which stops its workers
        )
        os.close(child_read)
        os.close(child_write)
        self.sender = Connection(parent_write, readable=False)
        self.connection = Connection(parent_read, writable=False)
        self.ready = False
        self.index: int | None = None
        self.deadline = float("inf")

    def give(self, index: int, args: tuple, timeout: float) -> None:
        self.sender.send((index, args))
        self.index, self.deadline = index, time.monotonic() + timeout

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.sender.close()
        self.connection.close()


class TimeoutPool:
    """Call `target(*args)` for many items in `workers` processes, each item within `timeout` s.

    Args:
        target: the function as `module:function`, importable in a fresh interpreter.
        timeout: wall-clock seconds allowed per item, counted from when a ready worker gets it.
        workers: number of worker processes.
    """

    def __init__(self, target: str, *, timeout: float, workers: int) -> None:
        if timeout <= 0:
            raise DivscopeError(f"the grading timeout must be positive, got {timeout} s.")
        if workers < 1:
            raise DivscopeError(f"grading needs at least one worker, got {workers}.")
        import_function(target)  # fail here, with a clear message, rather than in a worker
        self.target, self.timeout, self.workers = target, timeout, workers

    def map(self, items: Sequence[tuple]) -> list[Outcome]:
        """The outcome of each item, in order. Never hangs longer than its deadlines."""
        outcomes: list[Outcome | None] = [None] * len(items)
        pending = deque(range(len(items)))
        workers = [_Worker(self.target) for _ in range(min(self.workers, len(items)))]
        try:
            while pending or any(w.index is not None for w in workers):
                for worker in workers:
                    if worker.ready and worker.index is None and pending:
                        index = pending.popleft()
                        worker.give(index, items[index], self.timeout)
                busy = [w.deadline for w in workers if w.index is not None]
                wait_for = max(0.0, min(busy) - time.monotonic()) if busy else None
                ready = set(wait([w.connection for w in workers], wait_for))
                for position, worker in enumerate(workers):
                    if worker.connection in ready:
                        replacement = self._receive(worker, outcomes)
                    elif worker.index is not None and time.monotonic() >= worker.deadline:
                        outcomes[worker.index] = Outcome(
                            None, "timeout", f"timeout after {self.timeout:g} s"
                        )
                        replacement = True
                    else:
                        continue
                    if replacement:
                        worker.stop()
                        workers[position] = _Worker(self.target)
        finally:
            for worker in workers:
                worker.stop()
        return outcomes  # type: ignore[return-value]

    def _receive(self, worker: _Worker, outcomes: list[Outcome | None]) -> bool:
        """Read one message from `worker`; True if it died and must be replaced."""
        try:
            message = worker.connection.recv()
        except (EOFError, OSError):
            code = worker.process.wait()
            if worker.index is None:
                raise DivscopeError(
                    f"{self.target!r}: its worker process exited with code {code} before it was "
                    "ready; see the messages above."
                ) from None
            outcomes[worker.index] = Outcome(None, "died", f"worker died (exit code {code})")
            return True
        if message is None:
            worker.ready = True
        else:
            index, outcome = message
            outcomes[index], worker.index, worker.deadline = outcome, None, float("inf")
        return False
