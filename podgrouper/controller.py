"""The PodGrouper controller: every kaisched pod that names no gang
gets the PodGroup of its top owner, and the PodGroup follows its owner's size.

All I/O goes through the ClusterClient, so the same controller runs on the
memory backend (replay, simulate, tests) and on a cluster.
"""
from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable

from kaisched.api import labels as L
from kaisched.api.clock import Clock
from kaisched.api.types import DEFAULT_QUEUE
from kaisched.api.workloadkinds import KINDS, of_object
from kaisched.cluster.client import ClusterClient, Obj, Subscription, WatchEvent
from kaisched.cluster.events import event_object, object_reference
from kaisched.cluster.kinds import POD, PODGROUP, Kind, kind_for, object_key
from kaisched.errors import (
    ApiError,
    ConflictError,
    GoneError,
    NotFoundError,
    PermanentApiError,
    TransientApiError,
    UnreachableError,
)
from kaisched.service import loop
from kaisched.service.outage import Outage
from podgrouper.groupers import GroupSpec, Lineage, Registry, builtin_groupers, group_owner, pick
from podgrouper.groupers.workload import default_grouper
from podgrouper.owners import OwnerRef, OwnerWalk, describe, top_owner
from podgrouper.podgroup import (
    is_managed,
    needs_refresh,
    pod_patch,
    podgroup_object,
    refresh_patch,
    top_owner_ref,
)
from podgrouper.roles import pod_role

if TYPE_CHECKING:
    from kaisched.service.health import Health
    from kaisched.service.leader import LeaderElector
    from podgrouper.metrics import GrouperMetrics

log = logging.getLogger(__name__)

COMPONENT = "podgrouper"
DEFAULTED = "PodGroupDefaulted"               # the owner could not be read or understood
OVERRIDE_IGNORED = "PodGroupOverrideIgnored"  # a bad min-member / minAvailable was ignored
NOT_GROUPED = "PodGroupFailed"                # the API refused the PodGroup or the pod patch

Key = tuple[str, str]                         # namespace, name
_JOB_LABELS = frozenset(k.pods.job_label for k in KINDS if k.pods.job_label)


class PodGrouper:
    """owner_resync: how often (seconds) the owners of existing PodGroups are
    re-read to follow scaling; 0 re-reads them on every sync (memory backend)."""

    def __init__(self, client: ClusterClient, clock: Clock, *, scheduler_name: str = "kaisched",
                 groupers: Registry | None = None, owner_resync: float = 0.0) -> None:
        self.client = client
        self.clock = clock
        self.scheduler_name = scheduler_name
        self.groupers = groupers if groupers is not None else builtin_groupers()
        self.owner_resync = owner_resync
        self._subscription: Subscription | None = None
        self._pods: dict[Key, Obj] = {}            # kaisched pods, as last seen
        self._pending: set[Key] = set()            # pods to give a PodGroup
        self._groups: dict[Key, Obj] = {}          # PodGroups, as last seen or written
        self._members: dict[Key, set[Key]] = {}    # PodGroup -> pods that name it
        self._checked: dict[Key, float] = {}       # PodGroup -> when its owner was last read
        self._owner_versions: dict[Key, str] = {}  # PodGroup -> owner resourceVersion grouped
        self._writes = 0
        self._forbidden: set[Kind] = set()         # owner kinds the role may not read
        self._by_job: dict[tuple[str, str, str], list[Obj]] | None = None   # a sync's pods by job

    def sync(self) -> int:
        """Handle what the watch reported since the last call (the first call
        sees everything); return how many objects were created or patched."""
        before = self._writes
        self._drain()
        self._by_job = None
        owners = _OwnerCache(self.client, self._forbidden)
        fresh: set[Key] = set()                    # PodGroups already made or checked this sync
        for key in sorted(self._pending):
            self._group_pod(key, owners, fresh)
        self._follow_owners(owners, fresh)
        return self._writes - before

    @property
    def pending(self) -> int:
        """Pods left without a PodGroup (retried next sync)."""
        return len(self._pending)

    @property
    def synced(self) -> bool:
        """The watch has listed what exists (the readiness probe)."""
        return self._subscription is not None

    def follow(self) -> None:
        """A standby's pass: keep up with the watch, write nothing."""
        self._drain()

    def run(self, stop: threading.Event, period: float, elector: LeaderElector | None = None,
            metrics: GrouperMetrics | None = None, health: Health | None = None,
            max_delay: float = 30.0) -> int:
        """The live loop (service.loop) until stop: every period a sync while
        this replica leads the Lease (a standby only follows the watch, so it
        takes over warm). Failing syncs are said once, reminded once a minute,
        and retried with backoff -- cut short when the API answers again. On
        stop the Lease is released. Returns the number of periods run."""
        try:
            return loop.serve(_Grouping(self, metrics), stop, period,
                              Outage(log, "PodGrouper sync", period, max_delay),
                              elector=elector, health=health,
                              reachability=getattr(self.client, "health", None))
        finally:
            if metrics is not None:
                metrics.leader.set(0)

    # -- the watch -------------------------------------------------------------
    def _drain(self) -> None:
        if self._subscription is None:
            self._subscription = self.client.subscribe((POD, PODGROUP))
        try:
            events = self._subscription.drain()
        except GoneError:
            log.info("watch expired; listing again")
            self._pods, self._pending, self._groups, self._members = {}, set(), {}, {}
            self._checked, self._owner_versions = {}, {}
            self._subscription = self.client.subscribe((POD, PODGROUP))
            events = self._subscription.drain()
        for event in events:
            try:
                if event.kind == POD:
                    self._on_pod(event)
                elif event.kind == PODGROUP:
                    self._on_group(event)
            except (AttributeError, TypeError, ValueError) as exc:
                self._malformed(event.obj, exc)

    def _on_pod(self, event: WatchEvent) -> None:
        pod, key = event.obj, object_key(event.obj)
        old = self._pods.pop(key, None)
        was_in = _named_group(key, old) if old is not None else None
        if was_in is not None:
            self._members.get(was_in, set()).discard(key)
        ours = (pod.get("spec") or {}).get("schedulerName") == self.scheduler_name
        if event.type == "DELETED" or not ours:
            self._pending.discard(key)
            return
        self._pods[key] = pod
        named = _named_group(key, pod)
        if named is not None:
            self._members.setdefault(named, set()).add(key)
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp") or L.declares_gang(meta.get("labels") or {},
                                                            meta.get("annotations") or {},
                                                            pod.get("spec")):
            self._pending.discard(key)
        else:
            self._pending.add(key)

    def _on_group(self, event: WatchEvent) -> None:
        key = object_key(event.obj)
        if event.type != "DELETED":
            self._groups[key] = event.obj
            return
        # A DELETED event from a relist carries only the identity: judge by the copy kept.
        old = self._groups.pop(key, None)
        self._checked.pop(key, None)
        self._owner_versions.pop(key, None)
        if is_managed(old or event.obj):
            # Deleted while pods still name it: make it again for the pods that remain.
            self._pending.update(k for k in self._members.get(key, ()) if k in self._pods)

    # -- grouping pods ---------------------------------------------------------
    def _group_pod(self, key: Key, owners: _OwnerCache, fresh: set[Key]) -> None:
        self._pending.discard(key)
        pod = self._pods.get(key)
        if pod is None:
            return
        try:
            self._group(key, pod, owners, fresh)
        except UnreachableError:
            self._pending.add(key)
            raise               # the API is away: the loop says so once and backs off
        except (TransientApiError, NotFoundError) as exc:
            # Retried next sync; a 404 for a pod that is gone ends with its DELETED event.
            self._pending.add(key)
            log.warning("pod %s/%s: %s; retrying next sync", *key, exc)
        except PermanentApiError as exc:
            log.warning("pod %s/%s not grouped: %s", *key, exc)
            self._warn(pod, NOT_GROUPED, (f"no PodGroup for this pod: {exc}",))
        except (AttributeError, TypeError, ValueError) as exc:
            self._malformed(pod, exc)

    def _malformed(self, obj: Obj, exc: Exception) -> None:
        """A field of the wrong shape (only hand-written objects get past an API
        server with one): the object is left alone, with an Event saying why."""
        key = object_key(obj)
        self._pending.discard(key)
        self._pods.pop(key, None)
        self._warn(obj, NOT_GROUPED, (f"malformed {obj.get('kind', 'object')}: "
                                      f"{exc.__class__.__name__}: {exc}",))

    def _group(self, key: Key, pod: Obj, owners: _OwnerCache, fresh: set[Key]) -> None:
        walk = top_owner(pod, owners.read)
        spec = self._spec(walk, pod, owners)
        named = _annotations(pod).get(L.POD_GROUP_ANNOTATION)
        if named and named != spec.name:
            # Its PodGroup was deleted, and its owners now lead elsewhere: leave it be.
            log.info("pod %s/%s names PodGroup %s, its owners now give %s; left alone",
                     *key, named, spec.name)
            return
        self._ensure_group(key[0], spec, walk, pod, fresh)
        # Only a leaf subgroup the PodGroup has: the scheduler counts pods per leaf.
        role = spec.pod_subgroup or pod_role(_labels(pod))
        if role not in spec.leaves():
            role = None
        patch = pod_patch(pod, spec.name, role)
        if patch is not None:
            self._pods[key] = self._wrote(self.client.patch(POD, *key, patch))
        self._warn(pod, DEFAULTED, walk.problems + spec.problems)
        self._warn(pod, OVERRIDE_IGNORED, spec.warnings)

    def _spec(self, walk: OwnerWalk, pod: Obj, owners: _OwnerCache) -> GroupSpec:
        grouper = default_grouper if walk.broken else pick(self.groupers, walk.top)
        lineage = Lineage(pod, walk.owners, self._siblings(walk, pod), _gang_object(walk, pod, owners))
        return group_owner(walk.top, grouper, lineage)

    def _siblings(self, walk: OwnerWalk, pod: Obj) -> tuple[Obj, ...]:
        """The other pods of the pod's job that exist: same namespace, same value
        of the job label the top owner's operator puts on its pods."""
        kind = of_object(walk.top.get("apiVersion"), walk.top.get("kind"))
        label = kind.pods.job_label if kind is not None else ""
        value = _labels(pod).get(label) if label else None
        if not value:
            return ()
        if self._by_job is None:
            self._by_job = {}
            for key, other in self._pods.items():
                for name, text in _labels(other).items():
                    if name in _JOB_LABELS:
                        self._by_job.setdefault((key[0], name, str(text)), []).append(other)
        me = object_key(pod)
        return tuple(p for p in self._by_job.get((object_key(pod)[0], label, str(value)), ())
                     if object_key(p) != me)

    def _ensure_group(self, namespace: str, spec: GroupSpec, walk: OwnerWalk, pod: Obj,
                      fresh: set[Key]) -> None:
        key = (namespace, spec.name)
        existing = self._groups.get(key)
        if existing is None:
            queue = spec.queue or DEFAULT_QUEUE
            priority = spec.priority_class_name
            try:
                created = (pod.get("metadata") or {}).get("creationTimestamp")
                self._groups[key] = self._wrote(self.client.create(
                    podgroup_object(namespace, spec, walk.top, str(queue), priority, created)))
                fresh.add(key)
            except ConflictError:
                # Made after the last watch event we saw: use what is there.
                existing = self.client.get(PODGROUP, *key)
                if existing is None:
                    raise
        if existing is not None and key not in fresh:
            self._refresh(key, existing, spec)
            fresh.add(key)
        self._checked[key] = self.clock.now()
        self._owner_versions[key] = _version(walk.top)

    # -- following owners ------------------------------------------------------
    def _follow_owners(self, owners: _OwnerCache, fresh: set[Key]) -> None:
        """Follow scaling: read each of our PodGroups' top owners; one whose
        resourceVersion moved is walked to again from one of the group's pods
        (the same walk as when the group was made) and grouped again."""
        now = self.clock.now()
        for key, group in sorted(self._groups.items()):
            if (key in fresh or not is_managed(group)
                    or now - self._checked.get(key, -math.inf) < self.owner_resync):
                continue
            self._checked[key] = now
            ref = top_owner_ref(group)
            member = min((k for k in self._members.get(key, ()) if k in self._pods), default=None)
            if ref is None or member is None:
                continue
            try:
                owner = owners.read(key[0], ref)
                if owner is None or _version(owner) and _version(owner) == self._owner_versions.get(key):
                    continue
                walk = top_owner(self._pods[member], owners.read)
                if _uid(walk.top) == ref.uid:
                    self._refresh(key, group, self._spec(walk, self._pods[member], owners), walk)
                    self._owner_versions[key] = _version(walk.top)
            except UnreachableError:
                self._checked.pop(key, None)
                raise
            except ApiError as exc:
                log.warning("PodGroup %s/%s: owner not re-read: %s", *key, exc)

    def _refresh(self, key: Key, group: Obj, spec: GroupSpec,
                 walk: OwnerWalk | None = None) -> None:
        if spec.name != key[1] or not needs_refresh(group, spec):
            return
        self._groups[key] = self._wrote(self.client.patch(PODGROUP, *key, refresh_patch(spec)))
        if walk is not None:        # on a pod's first grouping the pod gets the Events
            self._warn(group, DEFAULTED, walk.problems + spec.problems)
            self._warn(group, OVERRIDE_IGNORED, spec.warnings)

    # -- writing ---------------------------------------------------------------
    def _wrote(self, obj: Obj) -> Obj:
        self._writes += 1
        return obj

    def _warn(self, about: Obj, reason: str, messages: tuple[str, ...]) -> None:
        """A Warning Event; one that cannot be written is logged, never fatal."""
        if not messages:
            return
        event = event_object(object_reference(about), "Warning", reason, "; ".join(messages),
                             COMPONENT, self.clock.now())
        try:
            self._wrote(self.client.create(event))
        except ApiError as exc:
            log.warning("%s: could not record %s (%s): %s", describe(about), reason,
                        "; ".join(messages), exc)


class _Grouping(loop.Duty):
    """The PodGrouper's duty in the loop: a leader syncs, a standby follows."""

    def __init__(self, grouper: PodGrouper, metrics: GrouperMetrics | None) -> None:
        self.grouper = grouper
        self.metrics = metrics

    def lead(self, proceed: Callable[[], bool]) -> None:
        started = time.monotonic()
        writes = self.grouper.sync()
        if self.metrics is not None:
            self.metrics.synced(writes, time.monotonic() - started, self.grouper.pending)

    def follow(self) -> None:
        self.grouper.follow()

    def passed(self, turn: loop.Turn, failure: ApiError | None) -> None:
        if self.metrics is None:
            return
        if failure is not None:
            self.metrics.sync_errors.inc()
        self.metrics.leader.set(1 if turn.leads else 0)


class _OwnerCache:
    """Owners read during one sync: the pods of one owner share the reads, and
    one sync sees one version of each owner. A kind the role may not read is
    logged once per process (forbidden keeps what was said), naming the grant."""

    def __init__(self, client: ClusterClient, forbidden: set[Kind] | None = None) -> None:
        self._client = client
        self._forbidden = forbidden if forbidden is not None else set()
        self._read: dict[tuple[Any, str, str], Obj | None | PermanentApiError] = {}

    def read(self, namespace: str, ref: OwnerRef) -> Obj | None:
        kind = kind_for(ref.api_version, ref.kind)
        key = (kind, namespace if kind.namespaced else "", ref.name)
        if key not in self._read:
            try:
                self._read[key] = self._client.get(*key)
            except PermanentApiError as exc:
                self._read[key] = exc
                if exc.status == 403 and kind not in self._forbidden:
                    self._forbidden.add(kind)
                    resource = f"{kind.plural}.{kind.group}" if kind.group else kind.plural
                    log.warning("not allowed to read %s owners (%s): grant get on %s to this "
                                "service account; their pods are grouped by the last owner "
                                "read, with a Warning Event", kind, exc, resource)
        found = self._read[key]
        if isinstance(found, PermanentApiError):
            raise found
        return found


def _gang_object(walk: OwnerWalk, pod: Obj, owners: _OwnerCache) -> Obj | None:
    """The object holding the pod's gang, when its top owner's operator names
    one by a label on the pod (Grove's PodGang). Not there yet: the pod waits
    for it (retried next sync), as it would be grouped wrongly without it."""
    kind = of_object(walk.top.get("apiVersion"), walk.top.get("kind"))
    label = kind.pods.gang_label if kind is not None else ""
    name = _labels(pod).get(label) if label and kind is not None else None
    if not name or kind is None:
        return None
    api_version, gang_kind = kind.pods.gang_object
    namespace = object_key(pod)[0]
    found = owners.read(namespace, OwnerRef(api_version, gang_kind, str(name)))
    if found is None:
        raise NotFoundError(f"{gang_kind} {namespace}/{name}, named by the pod's label "
                            f"{label}, does not exist yet")
    return found


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _named_group(key: Key, pod: Mapping[str, Any]) -> Key | None:
    """The PodGroup the pod's annotation names, in the pod's namespace."""
    name = _annotations(pod).get(L.POD_GROUP_ANNOTATION)
    return (key[0], str(name)) if name else None


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
