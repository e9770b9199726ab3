"""Work started on a thread of its own, its result (or what it raised) taken
later by whoever waits on the Future: the first lists while the scheduler's
modules load. A daemon thread, unlike an executor's: a process that fails
meanwhile (a bad config) exits at once, not after the work."""
from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Callable, TypeVar

T = TypeVar("T")


def in_background(work: Callable[[], T], name: str) -> Future[T]:
    done: Future[T] = Future()

    def run() -> None:
        try:
            done.set_result(work())
        except Exception as exc:        # raised by done.result(), in the waiting thread
            done.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return done
