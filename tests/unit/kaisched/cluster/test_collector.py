"""Pauses of the cyclic collector on several threads: it resumes when the last
ends, and only if it ran before the first."""
from __future__ import annotations

import gc
import threading
from typing import Iterator

import pytest

from kaisched.cluster import collector


@pytest.fixture(autouse=True)
def restored() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    (gc.enable if enabled else gc.disable)()


def test_overlapping_pauses_resume_the_collector_when_the_last_ends() -> None:
    gc.enable()
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with collector.paused():
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=other)
    with collector.paused():
        thread.start()
        assert inside.wait(10)
        assert not gc.isenabled()
    assert not gc.isenabled()           # the other thread still parses
    leave.set()
    thread.join(10)
    assert gc.isenabled()


def test_a_collector_off_before_stays_off() -> None:
    gc.disable()
    with collector.paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_a_pause_ends_when_its_work_fails() -> None:
    gc.enable()
    with pytest.raises(ValueError):
        with collector.paused():
            raise ValueError("a malformed answer")
    assert gc.isenabled()
