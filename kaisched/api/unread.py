"""Tasks a head start counted but did not make.

A scheduler starting over a big cluster decides its first gangs before every
running pod is converted (kaisched.runtime.headstart): a running gang whose
pods need nothing but their room is counted -- its job's numbers, its queue's
sums, its nodes' rows -- and its tasks are not made. Where a job's or a
node's tasks hold pods left unmade, they are an Unread: the tasks that are
made (or that the session places) read as usual, and any look that could take
in one left unmade raises Unconverted. A head start whose session raised it
decided on less than a full session knows, and is thrown away whole.
"""
from __future__ import annotations

from typing import Any, NoReturn

from kaisched.api.clusterinfo import ForeignPod
from kaisched.api.task import TaskInfo
from kaisched.api.types import PodKey


class Unconverted(Exception):
    """A session looked at tasks a head start did not make."""


class Unread(dict[PodKey, TaskInfo]):
    """Tasks some of which are not made: a key among those made reads as in
    a dict (the session's own placements are written and taken back so);
    any other key, a count or a walk over them raises Unconverted."""

    def __init__(self, made: dict[PodKey, TaskInfo], unmade: int) -> None:
        super().__init__(made)
        self.unmade = unmade

    def _unread(self, *_: Any, **__: Any) -> NoReturn:
        raise Unconverted(f"{self.unmade} pods here are not converted yet")

    def __getitem__(self, key: PodKey) -> TaskInfo:
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        self._unread()

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key):
            return True
        self._unread()

    def get(self, key: PodKey, default: Any = None) -> Any:
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        self._unread()

    def pop(self, key: PodKey, *default: Any) -> Any:
        if dict.__contains__(self, key):
            return dict.pop(self, key)
        self._unread()

    __iter__ = __len__ = __reversed__ = keys = values = items = copy = _unread
    setdefault = popitem = __eq__ = __ne__ = __or__ = __ior__ = _unread

    def made(self) -> dict[PodKey, TaskInfo]:
        """The tasks made, as a plain dict (for the cache, as it makes the rest)."""
        return {key: task for key, task in dict.items(self)}

    def __repr__(self) -> str:
        return f"<Unread: {dict.__len__(self)} tasks made, {self.unmade} not>"


class UnreadPods(tuple[ForeignPod, ...]):
    """Other schedulers' pods some of which are not made (their room is
    counted): any look at them raises Unconverted."""

    unmade: int

    def __new__(cls, made: tuple[ForeignPod, ...], unmade: int) -> UnreadPods:
        pods = super().__new__(cls, made)
        pods.unmade = unmade
        return pods

    def _unread(self, *_: Any, **__: Any) -> NoReturn:
        raise Unconverted(f"{self.unmade} pods of other schedulers are not converted yet")

    __iter__ = __len__ = __getitem__ = __contains__ = __reversed__ = index = count = _unread
    __eq__ = __ne__ = __add__ = __mul__ = __hash__ = _unread

    def made(self) -> tuple[ForeignPod, ...]:
        """Those made, as a plain tuple (for the cache, as it makes the rest)."""
        return tuple(tuple.__iter__(self))

    def __repr__(self) -> str:
        return f"<UnreadPods: {tuple.__len__(self)} made, {self.unmade} not>"
