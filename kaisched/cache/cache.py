"""The scheduler's cache: objects converted once as watch events arrive, and
the model (kaisched.cache.model) kept up to date with them, which snapshot()
lends to a session each cycle."""
from __future__ import annotations

from typing import Iterable, Mapping

import attrs

from kaisched.api.budgets import DisruptionBudget
from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.job import GangSpec, JobInfo, PodGroupStatus
from kaisched.api.node import NodeSpec
from kaisched.api.provisioning import CapacityRequest
from kaisched.api.queue import QueueInfo
from kaisched.api.resource import Resource
from kaisched.api.types import (
    DEFAULT_QUEUE,
    JobKey,
    NodeName,
    PodGroupPhase,
    PodKey,
    QueueName,
    TaskStatus,
    job_key,
)
from kaisched.cache import convert, counted
from kaisched.cache.batchjobs import BatchJobs
from kaisched.cache.consistency import differences
from kaisched.cache.convert import PodFacts
from kaisched.cache.convert.budgets import disruption_budget
from kaisched.cache.convert.common import MALFORMED
from kaisched.cache.convert.provisioning import capacity_request
from kaisched.cache.convert.runtimes import batch_job, with_estimate
from kaisched.cache.convert.topologies import topology_levels
from kaisched.cache.drastore import DeviceStore
from kaisched.cache.jobs import Group, Groups, Priorities
from kaisched.cache.model import Model
from kaisched.cache.notices import Notices
from kaisched.cache.pools import PoolView
from kaisched.cache.rebuild import rebuild
from kaisched.cache.volumestore import VolumeStore
from kaisched.cluster.client import ClusterClient, Obj, Subscription, WatchEvent
from kaisched.cluster.kinds import (
    BATCH_JOB,
    KAI_PODGROUP,
    KAI_QUEUE,
    KAI_TOPOLOGY,
    KOORD_PODGROUP,
    NAMESPACE,
    NODE,
    POD,
    POD_DISRUPTION_BUDGET,
    PODGROUP,
    PRIORITY_CLASS,
    PROVISIONING_REQUEST,
    QUEUE,
    SCHEDULING_KINDS,
    UPSTREAM_PODGROUPS,
    WORKLOAD_V1ALPHA1,
    XK8S_PODGROUP,
    Kind,
    object_key,
)
from kaisched.framework.config import NodePool
from kaisched.framework.effects import Bind, RecordEvent

# The gang declarations read from each PodGroup kind, and where each is kept.
_GROUP_READERS = {PODGROUP: convert.podgroup, XK8S_PODGROUP: convert.xk8s_podgroup,
                  KOORD_PODGROUP: convert.koord_podgroup, KAI_PODGROUP: convert.kai_podgroup,
                  **{k: convert.podgroup_v1alpha2 if k.version == "v1alpha2" else convert.podgroup_v1beta1
                     for k in UPSTREAM_PODGROUPS}}
_GROUP_STORES = {PODGROUP: "kaisched", XK8S_PODGROUP: "x-k8s", KOORD_PODGROUP: "koord",
                 KAI_PODGROUP: "kai", **{k: f"upstream {k.version}" for k in UPSTREAM_PODGROUPS}}




def _pods_last(events: list[WatchEvent]) -> tuple[list[WatchEvent], int]:
    """The first lists with every other kind before the pods (each kind in
    its order), and how many are pods: a pod then finds its PodGroup,
    PriorityClass and node read already, and no PodGroup or PriorityClass
    makes its pods again. Only an order, and the same for any: known by
    identity (cheaper than equality)."""
    pods = [e for e in events if e.kind is POD]
    return [e for e in events if e.kind is not POD] + pods, len(pods)


class Cache:
    """pool: the node pool of this scheduler when it is one shard of several
    (kaisched.cache.pools); None: the whole cluster."""

    def __init__(self, scheduler_name: str = "kaisched", pool: NodePool | None = None) -> None:
        self.scheduler_name = scheduler_name
        self.nodes: dict[str, NodeSpec] = {}
        self.pods: dict[PodKey, PodFacts] = {}
        self._digests: dict[PodKey, bytes] = {}             # pending pods: see _pod_facts
        self._groups = Groups()
        self.pools = PoolView(pool, self._groups) if pool is not None else None
        self.groups = self._groups.stores["kaisched"]
        self.xk8s_groups = self._groups.stores["x-k8s"]
        self.namespaces: dict[str, dict[str, str]] = {}     # name -> labels
        self.topologies: dict[str, tuple[str, ...]] = {}    # KAI Topology -> levels, outermost first
        self.queues: dict[str, QueueInfo] = {}              # kaisched's, and KAI's of other names
        self._own_queues: dict[str, QueueInfo] = {}
        self._kai_queues: dict[str, QueueInfo] = {}
        self._own_queue_pools: dict[str, str | None] = {}   # name -> the pool its label names
        self._kai_queue_pools: dict[str, str | None] = {}
        self.budgets: dict[str, DisruptionBudget] = {}      # namespace/name -> PodDisruptionBudget
        self.capacity: dict[str, CapacityRequest] = {}      # namespace/name -> ProvisioningRequest
        self.batch_jobs = BatchJobs()                       # Jobs' deadlines, for their pods
        self.priority_classes: dict[str, tuple[int, bool, bool]] = {}
        self.model = Model(scheduler_name, self._groups, self.pools, self.nodes)
        self.storage = VolumeStore()                        # claims, volumes, classes
        self.devices = DeviceStore()                         # DRA classes, slices, claims
        self._subscription: Subscription | None = None
        self._listed: list[WatchEvent] | None = None        # the first lists, not applied yet
        self._waiting: bool | None = None     # whether a pod of ours waits in them (once asked)
        self._counted: dict[JobKey, counted.Counted] | None = None  # lent counted, not converted yet
        self.listed_pods = 0                                # pods in the first lists
        self._settled = False                               # the late kinds' first lists are in
        self.notices = Notices()                            # warnings of what was read, told once
        self._pending_groups: set[JobKey] = set()           # kaisched PodGroups still Pending
        self._assumed_at: dict[PodKey, float] = {}          # binds sent -> when (see unconfirmed)

    def sync(self, client: ClusterClient) -> int:
        """Apply every event since the last sync; the first one lists everything."""
        if self._subscription is None:
            self.listed(client)
        subscription = self._subscription
        assert subscription is not None
        events = subscription.drain()
        if self._listed is not None:
            events, self._listed, self._waiting = self._listed + events, None, None
        if self._counted is not None:
            self.model.reclaim()
            counted.take_back(self.model.cluster, self._counted)
            self.model.room.relayout = True     # their room is counted again with their tasks
            self._counted = None
        for event in events:
            self.apply(event)
        if not self._settled and self.storage.awaited():
            # What a waiting pod is told may read a late kind (a claim's failed
            # provisioning): its first list is waited for, once.
            subscription.settle()
            self._settled = True
            late = subscription.drain()
            for event in late:
                self.apply(event)
            events += late
        self.model.catch_up(self.pods)
        return len(events)

    def listed(self, client: ClusterClient) -> None:
        """The first lists (subscribing to the cluster), every other kind
        before the pods: kept for the first sync to apply, so that a head start
        can read them first (counted_snapshot)."""
        if self._subscription is None:
            self._subscription = client.subscribe(SCHEDULING_KINDS)
            self._settled = False
            self._listed, self.listed_pods = _pods_last(self._subscription.drain())
            self._waiting = None

    def listed_waiting(self) -> bool:
        """Whether a pod of this scheduler in the first lists waits for a node
        (looked for once: a standby and then its first lead both ask)."""
        if self._waiting is None:
            self._waiting = counted.any_waiting(self._listed or (), self.scheduler_name)
        return self._waiting

    def counted_snapshot(self, now: float) -> ClusterInfo | str:
        """Before the first sync, a snapshot of the first lists with the
        running gangs that may be counted counted, not converted
        (kaisched.cache.counted): for a head start, whose session is the only
        one to read it. The first sync converts them (their stand-ins go).
        Why none, when none can be counted: then the first sync converts
        everything."""
        assert self._listed is not None, "listed() first, and no sync yet"
        split = counted.split(self._listed, self.scheduler_name)
        if split is None:
            return "a pod of the first lists has a field of the wrong shape"
        for event in split.converted:
            self.apply(event)
        self.model.catch_up(self.pods)
        found: dict[JobKey, counted.Counted] = {}
        for job, pods in split.jobs.items():
            one = counted.count(job, pods, split, self._groups, self.model.priorities)
            if one is None:
                for pod in pods:
                    self.apply(pod.event)
            else:
                found[job] = one
        self._listed = [pod.event for pod in split.others] + [
            pod.event for one in found.values() for pod in one.pods]
        cluster = self.snapshot(now)
        if not counted.lend(cluster, found, split):
            return "a running pod asks for a resource no node offers and no pod converted asks for"
        self._counted = found
        return cluster

    def close(self) -> None:
        """Stop following the cluster."""
        if self._subscription is not None:
            self._subscription.close()
            self._subscription = None

    def take_warnings(self) -> list[RecordEvent]:
        """One warning Event per unusable node and per pod whose gang
        declaration fell back to defaults, each handed out once (notices)."""
        return self.notices.take()

    def apply(self, event: WatchEvent) -> None:
        self.model.reclaim()
        try:
            self._apply(event)
        except MALFORMED as exc:
            # A field of the wrong shape (only hand-written files get past an
            # API server with one): the object is kept as unusable, with why.
            self._apply_broken(event, f"malformed {event.kind.kind}: {exc.__class__.__name__}: {exc}")

    def _apply_broken(self, event: WatchEvent, problem: str) -> None:
        namespace, name = object_key(event.obj)
        if event.kind == POD:
            meta, spec = event.obj.get("metadata"), event.obj.get("spec")
            meta, spec = meta if isinstance(meta, dict) else {}, spec if isinstance(spec, dict) else {}
            self._put_pod(PodKey(f"{namespace}/{name}"), convert.broken_pod(meta, spec, problem))
        elif event.kind == NODE:
            if self.pools is not None and not self.pools.pool.default:
                self._put_node(name, None)      # no pool can be read: the default shard's
                return
            self._put_node(name, NodeSpec(NodeName(name), Resource(), ready=False))
            self.notices.node(name, problem)
        elif event.kind in _GROUP_READERS:
            self._put_group(event.kind, job_key(namespace, name), Group(
                GangSpec(declared=event.kind == PODGROUP), PodGroupStatus(), problem, 0.0))
        elif event.kind == WORKLOAD_V1ALPHA1:
            self._put_workload(job_key(namespace, name), convert.Workload((), problem, 0.0))
        elif event.kind in (QUEUE, KAI_QUEUE):
            self._put_queue(event.kind, name, QueueInfo(QueueName(name), problem=problem))
        else:
            self.storage.broken(event, problem)

    def _apply(self, event: WatchEvent) -> None:
        obj, gone = event.obj, event.type == "DELETED"
        namespace, name = object_key(obj)
        if event.kind is POD or event.kind == POD:     # most events: by identity first
            key = PodKey(f"{namespace}/{name}")
            facts, echo = (None, False) if gone else self._pod_facts(key, obj)
            self._put_pod(key, facts, echo)
            if facts is not None and facts.warnings or self.notices.warned(key):
                self.notices.pod(key, facts.warnings if facts is not None and self.model.mine(facts)
                                 else ())
        elif event.kind == NODE:
            spec, problem = (None, None) if gone else convert.node_spec_and_problem(obj)
            if spec is not None and self.pools is not None and not self.pools.takes_node(spec):
                spec, problem = None, None      # another pool's node: as if it did not exist
            self._put_node(name, spec)
            self.notices.node(name, problem)
        elif event.kind in _GROUP_READERS:
            group = None
            if not gone:
                gang, status, problem = _GROUP_READERS[event.kind](obj)
                gang, problem = with_estimate(gang, obj, problem)
                creation = convert.from_rfc3339((obj.get("metadata") or {}).get("creationTimestamp"))
                pool = convert.label(obj, self.pools.pool.label) if self.pools is not None else None
                group = Group(gang, status, problem, creation or 0.0, pool)
            self._put_group(event.kind, job_key(namespace, name), group)
        elif event.kind == WORKLOAD_V1ALPHA1:
            self._put_workload(job_key(namespace, name),
                               None if gone else convert.workload_v1alpha1(obj))
        elif event.kind == QUEUE:
            pool = None if gone or self.pools is None else convert.label(obj, self.pools.pool.label)
            self._put_queue(QUEUE, name, None if gone else convert.queue(obj), pool)
        elif event.kind == KAI_QUEUE:
            pool = None if gone or self.pools is None else convert.label(obj, self.pools.pool.label)
            self._put_queue(KAI_QUEUE, name, None if gone else convert.kai_queue(obj), pool)
        elif event.kind == PRIORITY_CLASS:
            if gone:
                self.priority_classes.pop(name, None)
            else:
                pc_name, value, default, never = convert.priority_class(obj)
                self.priority_classes[pc_name] = (value, default, never)
            self.model.set_priorities(Priorities.of(self.priority_classes), self.pods)
        elif event.kind == KAI_TOPOLOGY:
            if gone:
                self.topologies.pop(name, None)
            else:
                self.topologies[name] = topology_levels(obj)
        elif event.kind == NAMESPACE:
            if gone:
                self.namespaces.pop(name, None)
            else:
                self.namespaces[name] = convert.namespace_labels(obj)
        elif event.kind == POD_DISRUPTION_BUDGET:
            if gone:
                self.budgets.pop(f"{namespace}/{name}", None)
            else:
                self.budgets[f"{namespace}/{name}"] = disruption_budget(obj)
        elif event.kind == BATCH_JOB:
            uid = str((obj.get("metadata") or {}).get("uid") or "")
            for key in self.batch_jobs.put(uid, None if gone else batch_job(obj)):
                self._put_pod(key, self.pods[key])
        elif event.kind == PROVISIONING_REQUEST:
            request = None if gone else capacity_request(obj)
            if request is None:
                self.capacity.pop(f"{namespace}/{name}", None)
            else:
                self.capacity[request.key] = request
        elif not self.storage.apply(event):
            self.devices.apply(event)

    def _pod_facts(self, key: PodKey, obj: Obj) -> tuple[PodFacts, bool]:
        """The pod converted -- or, when it differs from the version before only
        where the scheduler's own writes change pods (its node, its status,
        its conditions), that version's facts with those read again: the
        echoes of binds and of PodScheduled conditions cost no conversion.
        The digest that tells is kept for this scheduler's pending pods, those
        such writes are about. True with the facts: only those changed."""
        digest = self._digests.pop(key, None)
        echo = False
        if digest is not None:
            before = self.pods.get(key)
            fresh = convert.source_digest(obj)
            if before is not None and fresh == digest:
                facts, echo = convert.echoed(obj, before), True
            else:
                facts, digest = convert.pod_facts(obj), fresh
        else:
            facts = convert.pod_facts(obj)
        if facts.status is TaskStatus.PENDING and facts.scheduler_name == self.scheduler_name:
            if digest is None:
                digest = convert.source_digest(obj)
            if digest is not None:
                self._digests[key] = digest
        return facts, echo

    def _put_pod(self, key: PodKey, facts: PodFacts | None, echo: bool = False) -> None:
        if facts is None:
            self._digests.pop(key, None)
        before = self.pods.pop(key, None) if facts is None else self.pods.get(key)
        if (before is not None and before.runtime) or (facts is not None and facts.runtime):
            if facts is not None:
                facts = self.batch_jobs.resolve(facts)
            self.batch_jobs.track(key, before, facts)
        if facts is not None:
            self.pods[key] = facts
        if (before is not None and before.pvcs) or (facts is not None and facts.pvcs):
            self.storage.put_pod(before, facts)
        if self.pools is not None:
            self.pools.track(key, before, facts)
        self.model.put_pod(key, facts, before, echo)

    def _put_node(self, name: str, spec: NodeSpec | None) -> None:
        known = name in self.nodes
        if spec is None:
            if not known:
                return          # nothing to take away (a node of another pool, or never seen)
            del self.nodes[name]
        else:
            self.nodes[name] = spec
        self.model.put_node(name, spec)
        if self.pools is not None and known != (spec is not None):
            if spec is not None:
                self.model.node_joined(name)
            else:
                self.model.node_left(name)

    def _put_group(self, kind: Kind, key: JobKey, group: Group | None) -> None:
        store = self._groups.stores[_GROUP_STORES[kind]]
        before = store.pop(key, None) if group is None else store.get(key)
        if group is not None:
            store[key] = group
        if kind == PODGROUP:
            if group is not None and group.status.phase is PodGroupPhase.PENDING:
                self._pending_groups.add(key)
            else:
                self._pending_groups.discard(key)
        if kind == PODGROUP and before is not None and group is not None \
                and attrs.evolve(before, status=group.status) == group \
                and self.model.echoed(key, before.status, group.status):
            return      # the echo of the status the last session wrote, and only that
        self.model.put_group(key, self.pods)
        if self.pools is not None and self.pools.group_moved(before, group):
            self.model.reown(self.pods, self.pools.members.get(key, ()))

    def owns_queue(self, name: str) -> bool:
        """Whether this scheduler writes the queue's status (a shard: its pool's queues)."""
        return self.pools is None or self.pools.takes_queue(name)

    def _queue_infos(self) -> dict[str, QueueInfo]:
        """The queues, each saying whether it is this shard's to write."""
        if self.pools is None:
            return self.queues
        return {name: q if self.pools.takes_queue(name) else attrs.evolve(q, owned=False)
                for name, q in self.queues.items()}

    def _put_workload(self, key: JobKey, workload: convert.Workload | None) -> None:
        if workload is None:
            self._groups.workloads.pop(key, None)
        else:
            self._groups.workloads[key] = workload
        self.model.put_group(key, self.pods)

    def _put_queue(self, kind: Kind, name: str, queue: QueueInfo | None,
                   pool: str | None = None) -> None:
        """kaisched's Queue and KAI's are one tree; where both name a queue, kaisched's is read.
        pool: the node pool the object's label names (read by a shard only)."""
        store = self._own_queues if kind == QUEUE else self._kai_queues
        pools = self._own_queue_pools if kind == QUEUE else self._kai_queue_pools
        if queue is None:
            store.pop(name, None)
            pools.pop(name, None)
        else:
            store[name] = queue
            pools[name] = pool
        chosen = self._own_queues.get(name) or self._kai_queues.get(name)
        if chosen is None:
            self.queues.pop(name, None)
        else:
            self.queues[name] = chosen
        if self.pools is not None:
            label = (self._own_queue_pools if name in self._own_queues
                     else self._kai_queue_pools).get(name)
            if self.pools.put_queue(name, label, chosen.parent if chosen is not None else None):
                self.model.reown_all()
        self.model.put_queues()

    def _waiting_groups(self, cluster: ClusterInfo) -> tuple[JobInfo, ...]:
        """The Pending PodGroups no pod names yet, as jobs with no tasks (a
        shard: those no pod names at all, whose label or queue names its pool)."""
        out = []
        for key in sorted(self._pending_groups - cluster.jobs.keys()):
            group = self.groups[key]
            if self.pools is not None and (key in self.pools.members
                                           or not self.pools.takes_group(group)):
                continue        # its pods are another shard's, or it names another pool
            out.append(JobInfo(key, group.spec if group.spec.queue else attrs.evolve(
                group.spec, queue=DEFAULT_QUEUE), creation=group.creation, status=group.status,
                problem=group.problem))
        return tuple(out)

    def snapshot(self, now: float) -> ClusterInfo:
        """The model, up to date, lent to one session until the next event or
        snapshot takes it back (undoing what the session did)."""
        self.model.reclaim()
        cluster = self.model.refresh(self.pods, self.nodes, self._queue_infos(), self.namespaces,
                                     now)
        cluster.storage = self.storage.storage()
        cluster.topologies = self._topologies()
        cluster.budgets = self._budgets()
        cluster.capacity_requests = self._capacity_requests()
        cluster.set_sharers(self.model.sharers.count > 0)
        cluster.waiting_groups = self._waiting_groups(cluster)
        self._lend_devices(cluster)
        return cluster

    def _topologies(self) -> tuple[tuple[str, ...], ...]:
        return tuple(levels for _, levels in sorted(self.topologies.items()) if levels)

    def _budgets(self) -> tuple[DisruptionBudget, ...]:
        return tuple(budget for _, budget in sorted(self.budgets.items()))

    def _capacity_requests(self) -> dict[JobKey, CapacityRequest]:
        """Each gang's request: the newest, should a restart have left two."""
        out: dict[JobKey, CapacityRequest] = {}
        for request in sorted(self.capacity.values(), key=lambda r: (r.attempt, r.creation, r.name)):
            out[request.job] = request
        return out

    def _lend_devices(self, cluster: ClusterInfo) -> None:
        """The device inventory and claims, when any pod or object of DRA is in play."""
        if self.model.claimants or self.devices.devices or self.devices.claims:
            cluster.devices = self.devices.lend(self.pods, self._group_uid)
            cluster.set_claimants(self.model.claimants > 0)
        else:
            cluster.set_claimants(False)

    def assume(self, binds: Iterable[Bind], at: float = 0.0) -> None:
        """The session over the last snapshot sent these binds (at: when): the
        model keeps the pods where it put them (as their echoes will show them)
        rather than undo the move and make it again when the echo comes."""
        kept = {b.pod: b.node for b in binds}
        self.model.keep(kept)
        self._assumed_at.update(dict.fromkeys(kept, at))

    def unconfirmed(self, before: float) -> list[PodKey]:
        """The pods assumed bound before `before` whose echo has not come: a
        bind the binder neither confirmed nor reported must not be waited on
        forever, so the caller reads them again."""
        self.model.reclaim()
        assumed = self.model.assumed
        stale = []
        for key, at in list(self._assumed_at.items()):
            if key not in assumed:
                del self._assumed_at[key]       # echoed, forgotten, or never kept
            elif at < before:
                stale.append(key)
        return sorted(stale)

    def forget_binds(self, pods: Iterable[PodKey] | None = None) -> None:
        """These binds (None: every one not echoed yet) were refused or never
        made: the pods are what the cache last heard of them."""
        # Taken back first: the binds of a session still lent are assumed only
        # then, and a lost lease comes before any event has taken it back.
        self.model.reclaim()
        keys = list(self.model.assumed) if pods is None else pods
        for key in keys:
            self.model.forget(key, self.pods.get(key))

    def _group_uid(self, key: str) -> str | None:
        """The uid of the upstream PodGroup a claim may be reserved for (None: gone)."""
        group = self._groups.group("upstream", JobKey(key))
        holder = group.spec.claim_holder if group is not None else None
        return holder.uid if holder is not None else None

    def reported(self, spoken_of: Iterable[JobKey],
                 written: Mapping[JobKey, PodGroupStatus] | None = None) -> None:
        """The session over the last snapshot closed: what it looked at need not
        be looked at again unless it changes -- but for the jobs it said
        something of, which the next session looks at again (what it wrote
        may not have landed), unless the echo of the PodGroup status it wrote
        (written) arrives first and nothing else of the job changed."""
        self.model.reported()
        for key in spoken_of:
            self.model.revisit(key)
        if written:
            self.model.wrote(written)

    def job_of(self, pod: PodKey) -> JobKey | None:
        facts = self.pods.get(pod)
        return facts.job if facts is not None else None

    def rebuilt(self, now: float) -> ClusterInfo:
        """A model made from scratch from what the cache holds: the reference
        the incremental one must equal."""
        self.model.reclaim()
        cluster = rebuild(self.pods, self.nodes, self._groups, self._queue_infos(),
                          self.priority_classes, self.namespaces, self.scheduler_name, now,
                          self.model.mine if self.pools is not None else None,
                          self.model.assumed)
        cluster.storage = self.storage.rebuilt(self.pods.values())
        cluster.topologies = self._topologies()
        cluster.budgets = self._budgets()
        cluster.capacity_requests = self._capacity_requests()
        cluster.waiting_groups = self._waiting_groups(cluster)
        return cluster

    def check(self, now: float) -> list[str]:
        """How the incremental model differs from a rebuilt one ([] when equal)."""
        return differences(self.snapshot(now), self.rebuilt(now))
