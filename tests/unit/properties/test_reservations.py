"""Reservations over random clusters with runtime limits, through the production loop on
the memory backend. The test plays the kubelet: a pod starts when it is bound and ends when
its work is done, at the latest at its activeDeadlineSeconds. Small jobs arrive as it runs,
some with limits and some without, and may be lent the room held for a big gang
(reservation backfill):

- the start is a ceiling: the reserved gang binds at the latest in the first session at or
  after the start its reservation first said, unless the cluster changed under it (here: a
  node fails, with the pods on it); then the start said next is the bound;
- nothing that holds room is over-committed: no node ever holds more GPUs than it has;
- with no limit anywhere, no start is ever said (and nothing is lent: a job is lent room
  only when all its pods have limits).
"""
from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kaisched.api.clock import ManualClock, to_rfc3339
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import NODE, POD
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import parse_config
from kaisched.framework.effects import Bind
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler

PERIOD = 10.0
HORIZON = 4 * 3600.0
GPUS = 8
BIG = "default/big"
CONFIG = f"schedulePeriod: {PERIOD:g}s\nstarvationThreshold: 30s\n"

# A pod running at the start: its GPUs, its limit (None: none), how long it has run, and
# how long its work goes on from its start.
Running = tuple[int, int | None, int, int]
# A small job arriving: when (seconds in), its GPUs, its limit, how long its work takes.
Small = tuple[int, int, int | None, int]


def pod(name: str, gpus: int, limit: int | None, group: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "kaisched", "terminationGracePeriodSeconds": 0,
                            "containers": [{"name": "main", "resources": {
                                "requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)},
                                "limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if limit is not None:
        spec["activeDeadlineSeconds"] = limit
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if group:
        meta["annotations"] = {"kaisched.io/pod-group": group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def done_at(start: float, work: int, limit: int | None) -> float:
    """When a pod started then is gone: its work done, or its deadline (grace 0)."""
    return start + (min(work, limit) if limit is not None else work)


class World:
    """The cluster, the scheduler, and the kubelet's timers."""

    def __init__(self, nodes: list[list[Running]], gang_nodes: int, limits: bool) -> None:
        self.clock = ManualClock()
        self.t0 = self.clock.now()
        self.cluster = MemoryCluster(self.clock)
        self.ends: dict[str, float] = {}                    # started pod -> when it is gone
        self.waiting: dict[str, tuple[int, int | None]] = {}    # unbound small pod -> work, limit
        self.limits = limits
        for n, pods in enumerate(nodes):
            self._node(f"n{n}", pods)
        self.cluster.create({"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "PodGroup",
                             "metadata": {"name": "big", "namespace": "default"},
                             "spec": {"minMember": gang_nodes}})
        for i in range(gang_nodes):
            self.cluster.create(pod(f"big-{i}", GPUS, None, group="big"))
        registry = register_builtins()
        self.scheduler = Scheduler(self.cluster, parse_config(CONFIG, registry), registry,
                                   self.clock, Binder(self.cluster, self.clock.now))

    def _node(self, name: str, pods: list[Running]) -> None:
        self.cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                             "status": {"allocatable": {"cpu": "64", "memory": "256Gi",
                                                        "pods": "110", "nvidia.com/gpu": str(GPUS)}}})
        left = GPUS
        for i, (gpus, limit, ran, work) in enumerate(pods):
            gpus, limit = min(gpus, left), limit if self.limits else None
            if not gpus:
                return
            left -= gpus
            obj = pod(f"run-{name}-{i}", gpus, limit)
            started = self.t0 - ran
            obj["spec"]["nodeName"] = name
            obj["status"] = {"phase": "Running", "startTime": to_rfc3339(started)}
            self.cluster.create(obj)
            self.ends[f"run-{name}-{i}"] = max(self.t0, done_at(started, work, limit))

    def arrive(self, name: str, gpus: int, limit: int | None, work: int) -> None:
        limit = limit if self.limits else None
        self.cluster.create(pod(name, gpus, limit))
        self.waiting[name] = (work, limit)

    def end_what_is_done(self) -> None:
        now = self.clock.now()
        for name, end in list(self.ends.items()):
            if end <= now:
                self.cluster.delete(POD, "default", name)
                del self.ends[name]

    def fail(self, index: int) -> None:
        """A node fails: it and the pods on it are gone."""
        nodes = sorted(n["metadata"]["name"] for n in self.cluster.list(NODE))
        if len(nodes) <= 1:
            return
        name = nodes[index % len(nodes)]
        for obj in self.cluster.list(POD, "default"):
            if obj["spec"].get("nodeName") == name:
                self.cluster.delete(POD, "default", obj["metadata"]["name"])
                self.ends.pop(obj["metadata"]["name"], None)
        self.cluster.delete(NODE, "", name)

    def started(self, name: str) -> None:
        """A bound small pod: its kubelet starts it now."""
        now = self.clock.now()
        work, limit = self.waiting.pop(name)
        self.cluster.patch_status(POD, "default", name, {"phase": "Running",
                                                         "startTime": to_rfc3339(now)})
        self.ends[name] = done_at(now, work, limit)


running = st.tuples(st.integers(1, GPUS), st.one_of(st.none(), st.integers(600, 7200)),
                    st.integers(0, 500), st.integers(60, 7200))
small = st.tuples(st.integers(0, 3600), st.integers(1, 4),
                  st.one_of(st.none(), st.integers(60, 3600)), st.integers(30, 3600))


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.lists(st.lists(running, min_size=1, max_size=3), min_size=2, max_size=4),
       gang_nodes=st.integers(1, 2), smalls=st.lists(small, max_size=12), limits=st.booleans(),
       failure=st.one_of(st.none(), st.tuples(st.integers(0, 3600), st.integers(0, 3))))
def test_the_start_is_a_ceiling_and_nothing_is_over_committed(
        nodes: list[list[Running]], gang_nodes: int, smalls: list[Small], limits: bool,
        failure: tuple[int, int] | None) -> None:
    world = World(nodes, gang_nodes, limits)
    arrivals = sorted(smalls, key=lambda s: s[0])
    first_start: float | None = None        # the start said first since the cluster changed
    ever_said = False
    bound: float | None = None
    beside = 0
    while world.clock.now() - world.t0 < HORIZON and bound is None:
        now = world.clock.now()
        world.end_what_is_done()
        if failure is not None and world.t0 + failure[0] <= now:
            world.fail(failure[1])
            failure, first_start = None, None       # the next start said is the bound
            event("a node failed")
        while arrivals and world.t0 + arrivals[0][0] <= now:
            _, gpus, limit, work = arrivals.pop(0)
            world.arrive(f"small-{len(smalls) - len(arrivals)}", gpus, limit, work)
        result = world.scheduler.run_once()
        for effect in result.effects:
            if isinstance(effect, Bind):
                if effect.job == BIG:
                    bound = now
                else:
                    world.started(effect.pod.split("/", 1)[1])
                    beside += BIG in result.reserved
        if first_start is None and BIG in result.reserved:
            first_start = result.reserved[BIG].start
            ever_said = ever_said or first_start is not None
        _not_over_committed(world.cluster)
        world.clock.advance(PERIOD)
    event("reserved, start known" if ever_said else "no start known")
    event("small jobs placed while it was reserved" if beside else "none placed beside it")
    if first_start is not None:
        assert bound is not None and bound < first_start + PERIOD, (bound, first_start)
    if not limits:
        assert not ever_said


def _not_over_committed(cluster: MemoryCluster) -> None:
    used: dict[str, int] = {}
    for obj in cluster.list(POD, "default"):
        node = obj["spec"].get("nodeName")
        if node:
            requests = obj["spec"]["containers"][0]["resources"]["requests"]
            used[node] = used.get(node, 0) + int(requests["nvidia.com/gpu"])
    for node in cluster.list(NODE):
        name = node["metadata"]["name"]
        assert used.get(name, 0) <= GPUS, f"{name} holds {used[name]} GPUs of {GPUS}"
