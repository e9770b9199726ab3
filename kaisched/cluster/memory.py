"""An in-process API server: objects by kind with resourceVersions, watch
events, and the binding / status / eviction subresources.

Stored objects are never mutated in place (every write builds a new dict), so
they are handed out without copying; callers must not mutate them either.
Each kind's objects are kept listed in key order, as ADDED events, until its
next write: an API server's watch cache holds its objects ordered and serves
a list without sorting it, so a client's list costs this server little more.
Writes and drains take one lock, so a live binder's worker threads may write
while the scheduler's thread drains its watch.
"""
from __future__ import annotations

import builtins
import collections
import functools
import threading
import uuid
from typing import Callable, Concatenate, Iterable, ParamSpec, TypeVar

from kaisched.api.clock import Clock, ManualClock, to_rfc3339
from kaisched.cluster.client import Obj, WatchEvent, merge_patch
from kaisched.cluster.kinds import NODE, POD, Kind, kind_of, object_key
from kaisched.errors import ConflictError, NotFoundError, PermanentApiError

_UID_NAMESPACE = uuid.UUID("6f1b5a52-7e4c-4b8e-9a57-4b1d0c3e2a10")
P = ParamSpec("P")
R = TypeVar("R")


def _locked(method: Callable[Concatenate[MemoryCluster, P], R]
            ) -> Callable[Concatenate[MemoryCluster, P], R]:
    """The method under the cluster's lock (a live binder's workers write while
    the scheduler drains its watch)."""
    @functools.wraps(method)
    def call(self: MemoryCluster, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock:
            return method(self, *args, **kwargs)
    return call


class MemorySubscription:
    def __init__(self, kinds: frozenset[Kind], lock: threading.RLock | None = None) -> None:
        self.kinds = kinds
        self.lock = lock or threading.RLock()
        self.closed = False
        self.events: collections.deque[WatchEvent] = collections.deque()
        # Kinds watched through a fieldSelector get only what it selects, as from
        # an API server (a watch of ProvisioningFailed Events sees no other Event).
        self.selectors = {k.plural: _field_selector(k.field_selector)
                          for k in kinds if k.field_selector}
        self.filtered = frozenset(self.selectors)

    def selected(self, event: WatchEvent) -> bool:
        for path, value in self.selectors[event.kind.plural]:
            found: object = event.obj
            for part in path:
                found = found.get(part) if isinstance(found, dict) else None
            if ("" if found is None else str(found)) != value:
                return False
        return True

    def settle(self) -> None:
        """Every kind is listed at once here."""

    def drain(self) -> list[WatchEvent]:
        with self.lock:
            out = list(self.events)
            self.events.clear()
        return out

    def close(self) -> None:
        """Stop following: the cluster drops it at its next write."""
        with self.lock:
            self.closed = True
            self.events.clear()


class MemoryCluster:
    """Implements ClusterClient in memory; deterministic uids for replays."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or ManualClock()
        self._objects: dict[Kind, dict[tuple[str, str], Obj]] = collections.defaultdict(dict)
        self._listed: dict[Kind, builtins.list[WatchEvent]] = {}   # until the kind's next write
        self._version = 0
        self._subscriptions: list[MemorySubscription] = []
        self._serial = 0
        self._lock = threading.RLock()

    # -- reading ---------------------------------------------------------------
    @_locked
    def list(self, kind: Kind, namespace: str | None = None) -> list[Obj]:
        if namespace is None:
            return [event.obj for event in self._listing(kind)]
        objs = self._objects.get(kind, {})
        return [o for (ns, _), o in sorted(objs.items()) if ns == namespace]

    def get(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        return self._objects.get(kind, {}).get((namespace if kind.namespaced else "", name))

    def kinds(self) -> builtins.list[Kind]:     # list is a method's name here
        return [k for k, objs in self._objects.items() if objs]

    # -- writing ---------------------------------------------------------------
    @_locked
    def create(self, obj: Obj) -> Obj:
        kind = kind_of(obj)
        meta = dict(obj.get("metadata") or {})
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise PermanentApiError(f"{kind.kind}: metadata.name is required", 422)
            self._serial += 1
            meta["name"] = f"{meta['generateName']}{self._serial:05d}"
        if kind.namespaced:
            meta["namespace"] = meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        key = (meta.get("namespace", ""), meta["name"])
        if key in self._objects[kind]:
            raise ConflictError(f"{kind.kind} {'/'.join(filter(None, key))} already exists")
        meta.setdefault("uid", str(uuid.uuid5(_UID_NAMESPACE, f"{kind}/{key}/{self._version}")))
        meta.setdefault("creationTimestamp", to_rfc3339(self.clock.now()))
        meta["generation"] = 1
        return self._store(kind, key, {**obj, "metadata": meta}, "ADDED")

    @_locked
    def patch(self, kind: Kind, namespace: str, name: str, patch: Obj) -> Obj:
        current = self._require(kind, namespace, name)
        expected = (patch.get("metadata") or {}).get("resourceVersion")
        if expected is not None and expected != current["metadata"].get("resourceVersion"):
            # As the API server: a patch naming a resourceVersion is a compare-and-swap.
            raise ConflictError(f"{kind.kind} {namespace}/{name} was changed meanwhile")
        patch = {k: v for k, v in patch.items() if k != "status"}
        updated = merge_patch(current, patch)
        if updated.get("spec") != current.get("spec"):
            updated["metadata"] = {**updated["metadata"],
                                   "generation": current["metadata"].get("generation", 1) + 1}
        return self._store(kind, object_key(current), updated, "MODIFIED")

    @_locked
    def patch_status(self, kind: Kind, namespace: str, name: str, status: Obj) -> Obj:
        current = self._require(kind, namespace, name)
        updated = {**current, "status": merge_patch(current.get("status") or {}, status)}
        return self._store(kind, object_key(current), updated, "MODIFIED")

    @_locked
    def replace(self, obj: Obj) -> Obj:
        """A whole-object update, as kubelet-like simulators need (phase changes)."""
        kind = kind_of(obj)
        current = self._require(kind, *object_key(obj))
        meta = {**obj["metadata"], "uid": current["metadata"]["uid"]}
        return self._store(kind, object_key(current), {**obj, "metadata": meta}, "MODIFIED")

    @_locked
    def delete(self, kind: Kind, namespace: str, name: str) -> None:
        current = self._require(kind, namespace, name)
        key = object_key(current)
        del self._objects[kind][key]
        self._listed.pop(kind, None)
        self._version += 1
        gone = {**current, "metadata": {**current["metadata"], "resourceVersion": str(self._version)}}
        self._publish(WatchEvent("DELETED", kind, gone))

    # -- subresources ----------------------------------------------------------
    @_locked
    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        pod = self._require(POD, namespace, name)
        if uid and pod["metadata"].get("uid") != uid:
            raise ConflictError(f"pod {namespace}/{name}: uid changed, not binding")
        if (pod.get("spec") or {}).get("nodeName"):
            raise ConflictError(f"pod {namespace}/{name} is already bound to "
                                f"{pod['spec']['nodeName']}")
        if self.get(NODE, "", node) is None:
            raise NotFoundError(f"node {node} not found")
        if (pod.get("spec") or {}).get("schedulingGates"):
            # As the API server: a pod with scheduling gates cannot be bound.
            raise ConflictError(f"pod {namespace}/{name} has scheduling gates, not binding")
        cond = {"type": "PodScheduled", "status": "True",
                "lastTransitionTime": to_rfc3339(self.clock.now())}
        status = dict(pod.get("status") or {})
        status["conditions"] = [c for c in status.get("conditions", [])
                                if c.get("type") != "PodScheduled"] + [cond]
        updated = {**pod, "spec": {**pod.get("spec", {}), "nodeName": node}, "status": status}
        self._store(POD, (namespace, name), updated, "MODIFIED")

    @_locked
    def evict(self, namespace: str, name: str) -> None:
        pod = self._require(POD, namespace, name)
        if pod["metadata"].get("deletionTimestamp"):
            return
        meta = {**pod["metadata"], "deletionTimestamp": to_rfc3339(self.clock.now())}
        if not (pod.get("spec") or {}).get("nodeName"):
            self.delete(POD, namespace, name)      # nothing to stop: gone at once
            return
        self._store(POD, (namespace, name), {**pod, "metadata": meta}, "MODIFIED")

    @_locked
    def subscribe(self, kinds: Iterable[Kind]) -> MemorySubscription:
        sub = MemorySubscription(frozenset(kinds), self._lock)
        for kind in sub.kinds:
            listing = self._listing(kind)
            if kind.plural in sub.filtered:
                listing = [event for event in listing if sub.selected(event)]
            sub.events.extend(listing)
        self._subscriptions.append(sub)
        return sub

    def watching(self) -> bool:
        return True             # in-process: events are never lost

    # -- internals -------------------------------------------------------------
    def _listing(self, kind: Kind) -> builtins.list[WatchEvent]:
        """The kind's objects in key order as ADDED events, kept until its next
        write (the events are frozen, shared by every subscription)."""
        listing = self._listed.get(kind)
        if listing is None:
            objs = self._objects.get(kind, {})
            listing = self._listed[kind] = [WatchEvent("ADDED", kind, objs[key])
                                            for key in sorted(objs)]
        return listing

    def _require(self, kind: Kind, namespace: str, name: str) -> Obj:
        obj = self.get(kind, namespace, name)
        if obj is None:
            where = f"{namespace}/{name}" if kind.namespaced else name
            raise NotFoundError(f"{kind.kind} {where} not found")
        return obj

    def _store(self, kind: Kind, key: tuple[str, str], obj: Obj, event: str) -> Obj:
        self._version += 1
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self._version)}}
        self._objects[kind][key] = obj
        self._listed.pop(kind, None)
        self._publish(WatchEvent(event, kind, obj))
        return obj

    def _publish(self, event: WatchEvent) -> None:
        if any(sub.closed for sub in self._subscriptions):
            self._subscriptions = [sub for sub in self._subscriptions if not sub.closed]
        for sub in self._subscriptions:
            if event.kind in sub.kinds and (event.kind.plural not in sub.filtered
                                            or sub.selected(event)):
                sub.events.append(event)


def _field_selector(text: str) -> tuple[tuple[tuple[str, ...], str], ...]:
    """`a.b=x,c=y` as ((path, value), ...): equality terms, all to hold; the
    shallowest first (most objects fail there, at one lookup)."""
    terms = [term.split("=", 1) for term in text.split(",") if "=" in term]
    return tuple(sorted(((tuple(path.split(".")), value) for path, value in terms),
                        key=lambda t: len(t[0])))
