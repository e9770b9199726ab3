"""Work on a thread of its own: its result, or what it raised, for whoever waits."""
from __future__ import annotations

import threading

import pytest

from kaisched.cluster.background import in_background


def test_the_result_is_handed_to_the_waiter() -> None:
    go = threading.Event()
    made = in_background(lambda: go.wait(10) and "listed", "lists")
    assert not made.done()
    go.set()
    assert made.result(10) == "listed"


def test_what_the_work_raised_is_raised_to_the_waiter() -> None:
    def fails() -> str:
        raise ValueError("no kubeconfig")

    with pytest.raises(ValueError, match="no kubeconfig"):
        in_background(fails, "connecting").result(10)
