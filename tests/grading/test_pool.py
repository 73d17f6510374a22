import time

import pytest

from divscope.errors import DivscopeError
from divscope.grading import Outcome, TimeoutPool


def test_results_in_order_and_exceptions_reported():
    outcomes = TimeoutPool("operator:truediv", timeout=10, workers=2).map([(1, 2), (1, 0), (3, 1)])
    assert outcomes == [
        Outcome(0.5),
        Outcome(None, "raised", "ZeroDivisionError: division by zero"),
        Outcome(3.0),
    ]


def test_a_hung_item_is_killed_at_its_deadline_and_the_rest_still_run():
    start = time.monotonic()
    outcomes = TimeoutPool("time:sleep", timeout=1.0, workers=1).map([(0,), (60,), (0,)])
    assert [o.status for o in outcomes] == ["ok", "timeout", "ok"]
    assert outcomes[1].error == "timeout after 1 s"
    assert time.monotonic() - start < 20


def test_a_dying_worker_is_replaced():
    outcomes = TimeoutPool("os:_exit", timeout=10, workers=1).map([(3,), (4,)])
    assert [(o.status, o.error) for o in outcomes] == [
        ("died", "worker died (exit code 3)"),
        ("died", "worker died (exit code 4)"),
    ]


def test_no_items_starts_no_worker():
    assert TimeoutPool("operator:eq", timeout=1, workers=4).map([]) == []


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"timeout": 0, "workers": 1}, "timeout must be positive"),
        ({"timeout": 1, "workers": 0}, "at least one worker"),
    ],
)
def test_bad_settings(kwargs, message):
    with pytest.raises(DivscopeError, match=message):
        TimeoutPool("operator:eq", **kwargs)
