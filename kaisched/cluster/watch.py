"""Watches of a real cluster: each kind is listed once in subscribe(), then a
daemon thread per kind streams its watch events into a queue that drain()
empties without blocking.

The HTTP side lives in kube.py and transport.py; this module sees it
through WatchSource, so it holds only the bookkeeping:
resourceVersions, relists that reconcile after 410 Gone, and backoff.
"""
from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
import zlib
from typing import Iterable, Iterator, Protocol

import orjson

from kaisched.cluster.client import Obj, WatchEvent
from kaisched.cluster.kinds import Kind, object_key
from kaisched.errors import (
    ApiError,
    GoneError,
    NotFoundError,
    PermanentApiError,
    TransientApiError,
    UnreachableError,
)

log = logging.getLogger(__name__)

Key = tuple[str, str]


class WatchStream(Protocol):
    def lines(self) -> Iterator[bytes]:
        """One watch event per line; raises TransientApiError if the connection drops."""
        ...

    def interrupt(self) -> None:
        """Safe from another thread: unblocks a reader waiting in lines()."""
        ...

    def close(self) -> None: ...


class WatchSource(Protocol):
    def list_with_version(self, kind: Kind, *, cached: bool = False) -> tuple[list[Obj], str]:
        """cached: as the server's cache has it, which may trail the newest by a
        moment (an informer's first list: the watch from its version catches up)."""
        ...

    def watch_stream(self, kind: Kind, resource_version: str, timeout: int) -> WatchStream: ...


class KubeSubscription:
    """Implements Subscription. The first lists run before subscribe() returns
    (all kinds at once, each on its own thread), so the first drain() lists what
    exists, as the memory backend's does; an API that cannot be listed then
    raises there, not later in a thread."""

    def __init__(self, source: WatchSource, kinds: Iterable[Kind], *, watch_timeout: int = 60,
                 backoff: float = 0.5, max_backoff: float = 30.0,
                 missing_retry: float = 300.0) -> None:
        self.source = source
        self.watch_timeout = watch_timeout
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.missing_retry = missing_retry
        self.events: queue.SimpleQueue[WatchEvent] = queue.SimpleQueue()
        self.stopped = threading.Event()
        self._starting = threading.Lock()       # settle() from two threads starts them once
        self._late_started = False
        self._watches = [_KindWatch(self, kind) for kind in dict.fromkeys(kinds)]
        # The late kinds are listed (then watched, each on its thread) only once
        # settle() asks for them: until some reader needs one, its first list
        # (an API server filtering every Event it holds) is not asked at all.
        first = [w for w in self._watches if not w.kind.late]
        if len(first) > 1:
            # In parallel: start-up waits for the slowest list, not for their sum.
            with concurrent.futures.ThreadPoolExecutor(len(first)) as pool:
                for done in [pool.submit(w.relist, True) for w in first]:
                    done.result()
        else:
            for watch in first:
                watch.relist(True)
        # What the cluster does not serve at start (optional CRDs, the Workload
        # API's versions but one), in one line rather than one per kind.
        unserved = [str(w.kind) for w in first if w.missing and not w.forbidden]
        if unserved:
            log.info("%s %s not served by this cluster; not watching %s", ", ".join(unserved),
                     "is" if len(unserved) == 1 else "are", "it" if len(unserved) == 1 else "them")
        for watch in first:
            watch.thread.start()

    @property
    def healthy(self) -> bool:
        """Every watch is connected: the cache misses nothing. False from a
        failed watch until it has resumed or relisted."""
        return all(w.up for w in self._watches)

    def settle(self) -> None:
        with self._starting:
            if not self._late_started and not self.stopped.is_set():
                self._late_started = True
                for watch in self._watches:
                    if watch.kind.late:
                        watch.thread.start()
        if self._late_started:          # else closed before anyone asked: nothing comes
            for watch in self._watches:
                watch.listed.wait()

    def drain(self) -> list[WatchEvent]:
        out: list[WatchEvent] = []
        while True:
            try:
                out.append(self.events.get_nowait())
            except queue.Empty:
                return out

    def close(self, timeout: float = 5.0) -> None:
        self.stopped.set()
        for watch in self._watches:
            stream = watch.stream
            if stream is not None:
                stream.interrupt()
        for watch in self._watches:
            if watch.thread.is_alive():
                watch.thread.join(timeout)

    @property
    def alive(self) -> bool:
        return any(w.thread.is_alive() for w in self._watches)


class _KindWatch:
    def __init__(self, sub: KubeSubscription, kind: Kind) -> None:
        self.sub = sub
        self.kind = kind
        # key -> resourceVersion of what consumers were told: lets a relist say
        # what vanished, and drops the replays some servers send on re-watch.
        # Versions only, not objects: 140k pods must not be held twice.
        self.known: dict[Key, str] = {}
        self.resource_version = ""
        self.missing = False
        self.forbidden = False                  # missing because the role may not list it
        self.need_list = False                  # a 410 or 404 asks for a relist
        self.progress = False                   # an event arrived since the last relist
        self.reconnected = False                # connected again after being down
        self.up = True                          # connected, or between two watches
        self._down_reason = ""
        self.stream: WatchStream | None = None
        # A late kind's first list is its thread's first step (then set, even
        # if it failed: the watch is down then, and says so).
        self.listed = threading.Event()
        if not kind.late:
            self.listed.set()
        self.thread = threading.Thread(target=self._run, name=f"watch-{kind.plural}", daemon=True)

    def relist(self, starting: bool = False) -> None:
        """List what exists and tell what changed. starting: the subscription's
        first list, which says at once what is not served, and may come from the
        server's cache (nothing was told yet that it could take back); a relist
        reads the newest, so no object goes back to an older version."""
        try:
            items, version = self.sub.source.list_with_version(self.kind, cached=starting)
        except NotFoundError:
            # The resource is not served (an optional CRD is not installed):
            # say so once, report what it held as gone, and look again rarely.
            if not self.missing and not starting:
                log.info("%s is not served by this cluster; not watching it", self.kind)
            self.missing, self.forbidden = True, False
            items, version = [], ""
        except PermanentApiError as exc:
            if exc.status != 403:
                raise
            # The role may not read it: one line naming the permission, then as if
            # not served (looked for again rarely, so a fixed role is picked up).
            if not self.missing:
                resource = f"{self.kind.plural}.{self.kind.group}" if self.kind.group \
                    else self.kind.plural
                log.warning("not allowed to list and watch %s (%s): grant list and watch on "
                            "%s to this service account; not watching it", self.kind,
                            exc, resource)
            self.missing, self.forbidden = True, True
            items, version = [], ""
        else:
            if self.missing:
                log.info("%s is served now; watching it", self.kind)
            self.missing = self.forbidden = False
        seen: set[Key] = set()
        for obj in items:
            key = object_key(obj)
            seen.add(key)
            self._upsert(key, obj)
        for key in [k for k in self.known if k not in seen]:
            del self.known[key]
            self._emit("DELETED", self._tombstone(key))
        self.resource_version = version
        self.need_list = self.progress = self.reconnected = False
        self.up = True

    def _run(self) -> None:
        delay = self.sub.backoff
        stopped = self.sub.stopped
        if not self.listed.is_set():
            try:
                self.relist(True)
            except ApiError as exc:
                self.need_list = True
                self._down(exc)
            finally:
                self.listed.set()
        while not stopped.is_set():
            try:
                if self.need_list:
                    self.relist()
                if self.missing:
                    if stopped.wait(self.sub.missing_retry):
                        return
                    self.need_list = True
                    continue
                self._watch_once()
                delay = self.sub.backoff
            except (GoneError, NotFoundError) as exc:
                # Expired (410) or vanished (404): list again, at once the first
                # time (as after an API server restart: its new watch cache starts
                # past what we saw); a server that does it again before any event
                # gets backoff.
                log.info("watch of %s ended (%s); listing again", self.kind, exc)
                self.need_list = True
                self.up = False                 # events may be missing until the relist
                if not self.progress and not self.reconnected:
                    stopped.wait(delay)
                    delay = min(delay * 2, self.sub.max_backoff)
            except ApiError as exc:
                if stopped.is_set():
                    return
                if not isinstance(exc, UnreachableError) and not self.up \
                        and self._down_reason == UnreachableError.__name__:
                    delay = self.sub.backoff    # an answer after an outage: start afresh
                self._down(exc)
                health = getattr(self.sub.source, "health", None)
                if isinstance(exc, UnreachableError) and health is not None:
                    if health.pause(delay, stopped):
                        delay = self.sub.backoff    # the server answers again: no backoff left
                        continue
                else:
                    stopped.wait(delay)
                delay = min(delay * 2, self.sub.max_backoff)

    def _down(self, exc: ApiError) -> None:
        """One line when a watch goes down for a new reason; an unreachable server
        is said once for all watches (kube.py's Reachability), not here."""
        reason = exc.__class__.__name__ if isinstance(exc, UnreachableError) else str(exc)
        if self.up or reason != self._down_reason:
            level = logging.DEBUG if isinstance(exc, UnreachableError) else logging.WARNING
            log.log(level, "watch of %s is down, retrying with backoff: %s", self.kind, exc)
        self.up = False
        self._down_reason = reason

    def _watch_once(self) -> None:
        stream = self.sub.source.watch_stream(self.kind, self.resource_version,
                                              self.sub.watch_timeout)
        self.stream = stream
        if not self.up:
            log.info("watch of %s is connected again", self.kind)
            self.reconnected = True
            self.up = True
        try:
            if self.sub.stopped.is_set():      # close() may have run before self.stream was set
                return
            for line in stream.lines():
                if self.sub.stopped.is_set():
                    return
                if line.strip():
                    self._handle(_parse(line, self.kind))
            self.progress = True               # the server ended the watch (timeoutSeconds)
        finally:
            self.stream = None
            stream.close()

    def _handle(self, event: Obj) -> None:
        type_, obj = event.get("type"), event.get("object")
        if not isinstance(obj, dict):
            raise TransientApiError(f"watch of {self.kind}: an event without an object: {type_}")
        if type_ == "ERROR":
            code, message = obj.get("code"), obj.get("message") or obj.get("reason") or ""
            if code == 410:
                raise GoneError(f"watch of {self.kind}: {message}")
            raise TransientApiError(f"watch of {self.kind}: {message}",
                                    code if isinstance(code, int) else 0)
        self.progress = True
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if type_ == "DELETED":
            key = object_key(obj)
            if self.known.pop(key, None) is not None:
                self._emit("DELETED", obj)
        elif type_ in ("ADDED", "MODIFIED"):
            self._upsert(object_key(obj), obj)
        if version:                             # BOOKMARKs only move the resourceVersion
            self.resource_version = version

    def _upsert(self, key: Key, obj: Obj) -> None:
        version = _version(obj)
        old = self.known.get(key)
        if old == version:
            return                              # a replay of what consumers already have
        self.known[key] = version
        self._emit("ADDED" if old is None else "MODIFIED", obj)

    def _emit(self, type_: str, obj: Obj) -> None:
        self.sub.events.put(WatchEvent(type_, self.kind, obj))

    def _tombstone(self, key: Key) -> Obj:
        # Only the key survives a relist (we keep versions, not objects);
        # consumers delete by key.
        meta = {"name": key[1], **({"namespace": key[0]} if key[0] else {})}
        return {"apiVersion": self.kind.api_version, "kind": self.kind.kind, "metadata": meta}


def _parse(line: bytes, kind: Kind) -> Obj:
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError:
        event = None
    if not isinstance(event, dict):
        raise TransientApiError(f"watch of {kind}: not a watch event: {line[:200]!r}")
    return event


def _version(obj: Obj) -> str:
    version = (obj.get("metadata") or {}).get("resourceVersion")
    if version:
        return str(version)
    # No resourceVersion (only emulators omit it): a content digest stands in.
    return f"#{zlib.crc32(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)):08x}"
