"""The cyclic garbage collector, paused while a thread makes many objects
that hold no cycles: a big list's parse (the objects of 5,000 pods), a cycle
(up to millions, freed by reference counting). Left running, it would only
walk them as they are made: parsing a list page took twice as long with it.

Pauses on several threads overlap (the first lists parse on their own
threads while a cycle may run): the collector resumes when the last pause
ends, and only if it ran when the first began.
"""
from __future__ import annotations

import contextlib
import gc
import threading
from typing import Iterator

_lock = threading.Lock()
_pauses = 0
_was_enabled = False


@contextlib.contextmanager
def paused() -> Iterator[None]:
    global _pauses, _was_enabled
    with _lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _was_enabled:
                gc.enable()
