"""A head start: the first gangs of a big cluster bound before all of its
first lists are converted.

Converting a 1,500,000-pod cluster takes the better part of a minute, and
until it is done nothing would be scheduled. Most of those pods run in gangs
a first allocation reads only the room, queue sums and job numbers of; those
are counted straight off the pods (kaisched.cache.counted) and everything
else is converted as usual. The config's first action runs over that
snapshot in a session of its own, and what it decides goes out as its
statements commit (a bind with what is written before it); the first sync
converts what was counted, and the first cycle runs as always, over
everything, those binds assumed.

Nothing binds on partial knowledge. Every number the session reads is the
one a full conversion gives; the tasks not made are Unread, and a look at
them raises. From the session's first error on (such a look, or any other),
or its first eviction, nothing more is sent (see Sent). No head start is taken for a cluster converted quickly, when
nothing of this scheduler's waits, for one node pool of several, or with
fair share with memory (the Scheduler says which).
"""
from __future__ import annotations

import logging
import time
from typing import Callable

import attrs

from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.unread import Unconverted
from kaisched.cache import Cache
from kaisched.cluster import collector
from kaisched.cluster.client import ClusterClient
from kaisched.framework import Session
from kaisched.framework.effects import Bind, Effect, Evict, ReleaseGpu
from kaisched.framework.failures import JobError
from kaisched.framework.registry import Action

log = logging.getLogger(__name__)


@attrs.frozen
class HeadStart:
    """A head start taken: its binds, in the order sent; how long the
    snapshot it read took (the first lists, if not listed yet, read with
    running gangs counted) and its session."""

    binds: tuple[Bind, ...]
    snapshot_seconds: float
    session_seconds: float


def due(cache: Cache, client: ClusterClient, pods: int) -> bool:
    """Whether a cache not synced yet is worth a head start: its first lists
    (listed now, if not yet) hold `pods` pods or more, and some pod of its
    scheduler waits for a node."""
    cache.listed(client)
    return cache.listed_pods >= pods and cache.listed_waiting()


def take(cache: Cache, now: float, first: Action,
         session: Callable[[ClusterInfo, list[Effect]], Session],
         send: Callable[[Effect], None], started: float) -> HeadStart | None:
    """The head start over the cache's first lists: the binds of its first
    action, each sent as it commits (see Sent; assumed by the cache); None when no
    snapshot could be counted, or a plugin reads every running pod as its
    session opens. session: a session over a snapshot, opened as a cycle's is,
    handing its effects to the list given; started: when the first lists
    began to be asked for (time.perf_counter)."""
    with collector.paused():
        cluster = cache.counted_snapshot(now)
        snapshotted = time.perf_counter()
        if isinstance(cluster, str):
            log.info("no head start: %s", cluster)
            return None
        sent = Sent(send)
        try:
            ssn = session(cluster, sent)
        except Unconverted:
            log.info("no head start: a plugin reads every running pod as the session opens")
            return None
        sent.failures = ssn.failures.errors
        ssn.run(first.name, first.execute)      # a job's or the action's error is kept, not raised
        # Its moves are undone with the rest of its session at the first sync, but these.
        cache.assume(sent.binds, now)
    ended = time.perf_counter()
    if sent.stopped or ssn.failures.errors:
        log.info("head start stopped after %d binds: %s", len(sent.binds),
                 ssn.failures.errors[0].message if ssn.failures.errors else "its first eviction")
    log.info("head start: %d pods bound by %s %.2fs after the first lists (%d pods listed)",
             len(sent.binds), first.name, ended - started, cache.listed_pods)
    return HeadStart(tuple(sent.binds), snapshotted - started, ended - snapshotted)


class Sent(list[Effect]):
    """The head start's session's effects, each handed on (send) as it is
    made -- a bind with what must be written before it: a claim's status, a
    volume's, a share of a GPU -- until the session's first error or first
    eviction. After an error the jobs after are decided as a full session
    would not (the failed one lost its turn); after an eviction the first
    cycle, not knowing of it yet, might evict again: from either on nothing
    more is sent, and the first cycle decides what is left."""

    def __init__(self, send: Callable[[Effect], None]) -> None:
        super().__init__()
        self.send = send
        self.binds: list[Bind] = []
        self.failures: list[JobError] = []
        self.stopped = False

    def append(self, effect: Effect) -> None:
        super().append(effect)
        if self.stopped or self.failures or isinstance(effect, (Evict, ReleaseGpu)):
            self.stopped = True
            return
        if isinstance(effect, Bind):
            self.binds.append(effect)
        self.send(effect)
