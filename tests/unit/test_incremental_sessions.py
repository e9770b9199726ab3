"""A cycle looks only at the jobs that may have something new to say (unsettled,
changed, or spoken of by the last cycle: `ClusterInfo.active_jobs`); a settled
job whose pods, PodGroup, queue and clock-dependent conditions did not change is
left alone. That must never change what is written: over random sequences of
cycles -- gangs arriving, pods starting, finishing and vanishing, nodes coming,
going and cordoned, the clock moving past grace periods and timeouts, writes
landing and echoing back as the API server's would, or PodGroup status writes
landing late (after other events), never, or overwritten by another writer --
each cycle's effects must be those of a session over a model rebuilt from
scratch, which looks at every job.

Run thousands of sequences on demand:
    KAISCHED_CONSISTENCY_EXAMPLES=5000 python -m pytest tests/unit/test_incremental_sessions.py
"""
from __future__ import annotations

import os
from collections import Counter
from typing import Any, Union

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaisched.api.clock import ManualClock
from kaisched.catalog import register_builtins
from kaisched.cluster.kinds import NODE, POD, PODGROUP, Kind
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import Session, default_config
from kaisched.framework.effects import Effect
from kaisched.framework.holds import apply_holds, release_deadlocks
from kaisched.framework.moves import apply_moves
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler

from .conftest import build_node, build_pod, build_podgroup, build_queue

EXAMPLES = int(os.environ.get("KAISCHED_CONSISTENCY_EXAMPLES", "40"))
INCREMENTAL = settings(max_examples=EXAMPLES, deadline=None,
                       suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

QUEUES = ("team-a", "team-b")
NODES = 4


@attrs.frozen
class AddGang:
    size: int
    min_member: int
    queue: int
    cpu: int
    timeout: int | None         # scheduleTimeoutSeconds


@attrs.frozen
class Start:
    """A bound pod's kubelet reports it Running."""
    which: int


@attrs.frozen
class Finish:
    which: int
    phase: str


@attrs.frozen
class Vanish:
    """A pod is deleted (a terminating one is gone at last): one on a node, or any."""
    which: int
    placed: bool = True


@attrs.frozen
class NodeChange:
    index: int
    what: str                   # "add", "remove", "cordon", "uncordon"


@attrs.frozen
class Tick:
    seconds: float


@attrs.frozen
class Hold:
    """From now on PodGroup status writes wait (on), or land at once (off)."""
    on: bool


@attrs.frozen
class Land:
    """A waiting PodGroup status write lands (lost: it never does)."""
    which: int
    lost: bool = False


@attrs.frozen
class Scribble:
    """Another writer sets a PodGroup's status."""
    which: int


@attrs.frozen
class Cycle:
    count: int = 1              # back to back, a second apart: settled jobs are left alone


Step = Union[AddGang, Start, Finish, Vanish, NodeChange, Tick, Hold, Land, Scribble, Cycle]

gangs = st.builds(AddGang, st.integers(1, 4), st.integers(1, 4), st.integers(0, len(QUEUES) - 1),
              st.integers(1, 3), st.sampled_from([None, 30, 300]))
steps = st.one_of(
    gangs,
    st.builds(Start, st.integers(0, 50)),
    st.builds(Finish, st.integers(0, 50), st.sampled_from(["Succeeded", "Failed"])),
    st.builds(Vanish, st.integers(0, 50), st.booleans()),
    st.builds(NodeChange, st.integers(0, NODES - 1),
              st.sampled_from(["add", "remove", "cordon", "uncordon"])),
    st.builds(Tick, st.sampled_from([1.0, 45.0, 400.0])),
    st.builds(Hold, st.booleans()),
    st.builds(Land, st.integers(0, 20), st.booleans()),
    st.builds(Land, st.integers(0, 20)),
    st.builds(Scribble, st.integers(0, 20)),
    st.builds(Cycle, st.integers(1, 3)),
    st.builds(Cycle, st.integers(1, 3)),
)


class LateWrites:
    """The memory backend, but for PodGroup status writes, which wait while
    holding is on: the scheduler's binder writes through it."""

    def __init__(self, cluster: MemoryCluster) -> None:
        self.cluster = cluster
        self.holding = False
        self.waiting: list[tuple[Kind, str, str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    def patch_status(self, kind: Kind, namespace: str, name: str, status: dict[str, Any]) -> Any:
        if kind == PODGROUP and self.holding:
            self.waiting.append((kind, namespace, name, status))
            return None
        return self.cluster.patch_status(kind, namespace, name, status)


class World:
    def __init__(self) -> None:
        self.clock = ManualClock()
        self.cluster = MemoryCluster(self.clock)
        self.registry = register_builtins()
        self.config = default_config(self.registry)
        for i in range(NODES // 2):
            self.cluster.create(build_node(f"node-{i}", cpu=8, memory="32Gi"))
        self.cluster.create(build_queue("research", resources={"cpu": {"quota": 16}}))
        for name in QUEUES:
            self.cluster.create(build_queue(name, "research", {"cpu": {"quota": 8}}))
        self.writes = LateWrites(self.cluster)
        self.scheduler = Scheduler(self.cluster, self.config, self.registry, self.clock,
                                   Binder(self.writes, self.clock.now))  # type: ignore[arg-type]
        self.gangs = 0
        self.log: list[str] = []

    def pods(self) -> list[dict]:
        return sorted(self.cluster.list(POD), key=lambda p: p["metadata"]["name"])

    def step(self, step: Step) -> None:
        self.log.append(repr(step))
        if isinstance(step, AddGang):
            name = f"g{self.gangs}"
            self.gangs += 1
            spec = {"scheduleTimeoutSeconds": step.timeout} if step.timeout else {}
            self.cluster.create(build_podgroup(name, min(step.min_member, step.size),
                                               queue=QUEUES[step.queue], **spec))
            for i in range(step.size):
                self.cluster.create(build_pod(f"{name}-{i}", cpu=step.cpu, memory="1Gi", group=name))
        elif isinstance(step, (Start, Finish, Vanish)):
            pods = self.pods() if isinstance(step, Vanish) and not step.placed \
                else [p for p in self.pods() if p["spec"].get("nodeName")]
            if not pods:
                return
            pod = pods[step.which % len(pods)]
            meta = pod["metadata"]
            if isinstance(step, Vanish):
                self.cluster.delete(POD, meta["namespace"], meta["name"])
            else:
                phase = "Running" if isinstance(step, Start) else step.phase
                self.cluster.replace({**pod, "status": {**pod["status"], "phase": phase}})
        elif isinstance(step, NodeChange):
            self.node(step)
        elif isinstance(step, Tick):
            self.clock.advance(step.seconds)
        elif isinstance(step, Hold):
            self.writes.holding = step.on
        elif isinstance(step, Land):
            if self.writes.waiting:
                write = self.writes.waiting.pop(step.which % len(self.writes.waiting))
                if not step.lost and self.cluster.get(*write[:3]) is not None:
                    self.cluster.patch_status(*write)
        elif isinstance(step, Scribble):
            groups = sorted(self.cluster.list(PODGROUP), key=lambda g: g["metadata"]["name"])
            if groups:
                meta = groups[step.which % len(groups)]["metadata"]
                self.cluster.patch_status(PODGROUP, meta["namespace"], meta["name"],
                                          {"phase": "Pending", "conditions": None})
        else:
            for _ in range(step.count):
                self.cycle()
                self.clock.advance(1.0)

    def node(self, step: NodeChange) -> None:
        name = f"node-{step.index}"
        current = self.cluster.get(NODE, "", name)
        if step.what == "add" and current is None:
            self.cluster.create(build_node(name, cpu=8, memory="32Gi"))
        elif step.what == "remove" and current is not None:
            self.cluster.delete(NODE, "", name)
        elif step.what in ("cordon", "uncordon") and current is not None:
            spec = {**current["spec"], "unschedulable": step.what == "cordon"}
            self.cluster.replace({**current, "spec": spec})

    def cycle(self) -> None:
        """One cycle of the scheduler, after a session over a rebuilt model
        (every job looked at) with the same holds decided what it must write."""
        scheduler = self.scheduler
        scheduler.sync()
        now = self.clock.now()
        ssn = Session(scheduler.cache.rebuilt(now), self.config,
                      self.registry.build_plugins(self.config))
        apply_holds(ssn, dict(scheduler.holds))
        apply_moves(ssn, dict(scheduler.moves))
        for action in scheduler.actions:
            action.execute(ssn)
        release_deadlocks(ssn)
        full = ssn.close()
        result = scheduler.run_once()
        assert not result.report.failed, result.report.failed
        self.log.append(f"  cycle at {now:.0f}: {len(result.effects)} effects")
        compare(result.effects, full, self.log)


def compare(ours: list[Effect], full: list[Effect], log: list[str]) -> None:
    # As multisets: writes may go out in another order, but what is written
    # must not depend on which jobs were looked at.
    a, b = Counter(map(repr, ours)), Counter(map(repr, full))
    assert a == b, "\n".join([
        "a cycle over the incremental model wrote otherwise than one looking at every job:",
        *(f"only incremental: {e}" for e in sorted(a - b)),
        *(f"only full:        {e}" for e in sorted(b - a)),
        "after:", *log[-60:]])


@INCREMENTAL
@given(st.lists(gangs, min_size=1, max_size=6), st.lists(steps, min_size=15, max_size=60))
def test_each_cycle_writes_what_looking_at_every_job_would(first: list[AddGang],
                                                          sequence: list[Step]) -> None:
    world = World()
    for step in [*first, Cycle(2), *sequence]:
        world.step(step)
    world.step(Cycle())
