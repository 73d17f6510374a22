"""`divscope.models.threads`: calls run at once on threads of their own."""

from __future__ import annotations

import threading

import pytest
import torch

from divscope.models.placement import on_separate_gpus
from divscope.models.threads import concurrently
from tests.tinymodels import make_model


def test_the_calls_run_at_once_and_their_results_come_in_order():
    # Each call waits for the other at the barrier: run one after the other, they would time out.
    meet = threading.Barrier(3, timeout=5)

    def call(value):
        meet.wait()
        return value, threading.get_ident()

    results = concurrently([lambda: call("first"), lambda: call("second"), lambda: call("third")])
    assert [value for value, _ in results] == ["first", "second", "third"]
    assert len({thread for _, thread in results}) == 3


def test_every_call_runs_to_its_end_then_the_first_error_in_order_is_raised():
    finished = []

    def slow_then_fail():
        threading.Event().wait(0.2)
        finished.append("slow")
        raise ValueError("first")

    def fail():
        finished.append("fast")
        raise KeyError("second")

    with pytest.raises(ValueError, match="first"):
        concurrently([slow_then_fail, fail, lambda: finished.append("fine")])
    assert sorted(finished) == ["fast", "fine", "slow"]


def test_grad_mode_is_the_calls_own():
    """Torch's grad mode does not follow a call onto its thread: it enters its own."""
    with torch.inference_mode():
        modes = concurrently([torch.is_inference_mode_enabled])
    assert modes == [False]


def test_models_on_the_cpu_are_not_on_separate_gpus():
    assert not on_separate_gpus(make_model(), make_model(seed=1))
