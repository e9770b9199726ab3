"""The head start (kaisched/runtime/headstart.py): a big cluster's first gangs
bound over its first lists with running gangs counted. Its binds are the
ones the full first cycle makes first, and that cycle, after it, binds none
of them again."""
from __future__ import annotations

import threading
from typing import Any

from hypothesis import given, settings

from kaisched.api.clock import ManualClock
from kaisched.api.types import JobKey, NodeName, PodKey
from kaisched.api.unread import Unconverted
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import default_config
from kaisched.framework.effects import Bind, Cause, Effect, Evict, SetClaimStatus
from kaisched.framework.failures import JobError
from kaisched.runtime.binder import Binder
from kaisched.runtime.headstart import Sent
from kaisched.runtime.scheduler import Scheduler, Scheduling
from tests.builders.objects import build_node, build_pod, build_podgroup, load_cluster
from tests.builders.strategies import contended, scenarios

Obj = dict[str, Any]


def scheduler(objects: list[Obj], head_start_pods: int = 1) -> tuple[MemoryCluster, Scheduler]:
    clock = ManualClock()
    cluster = load_cluster(objects, clock)
    registry = register_builtins()
    found = Scheduler(cluster, default_config(registry), registry, clock,
                      Binder(cluster, clock.now))
    found.head_start_pods = head_start_pods
    return cluster, found


def binds(effects: list[Effect]) -> list[Bind]:
    return [e for e in effects if isinstance(e, Bind)]


def head_start(scheduler: Scheduler) -> list[Bind]:
    taken = scheduler.head_start()
    return list(taken.binds) if taken is not None else []


def busy(pending_rule: Obj | None = None) -> list[Obj]:
    """Two running gangs filling most of two of three nodes, and two gangs
    waiting: c fits on the third, d not beside it. Another scheduler's pod on
    each node."""
    objects: list[Obj] = [build_node(f"n{i}", cpu=5) for i in range(3)]
    objects += [build_pod(f"proxy-{i}", cpu="100m", node=f"n{i}", namespace="kube-system",
                          scheduler="default-scheduler") for i in range(3)]
    for gang, node in (("a", "n0"), ("b", "n1")):
        objects.append(build_podgroup(gang, min_member=3))
        objects += [build_pod(f"{gang}-{i}", cpu=1, group=gang, node=node) for i in range(3)]
    for gang in ("c", "d"):
        objects.append(build_podgroup(gang, min_member=2))
        for i in range(2):
            pod = build_pod(f"{gang}-{i}", cpu=2, group=gang, labels={"app": gang})
            if pending_rule is not None:
                pod["spec"]["affinity"] = pending_rule
            objects.append(pod)
    return objects


def test_the_head_start_binds_what_the_first_cycle_would_and_the_cycle_then_binds_nothing_again() -> None:
    _, early = scheduler(busy())
    sent = head_start(early)
    _, plain = scheduler(busy())
    full = binds(plain.run_once().effects)
    assert sent and sent == full[:len(sent)]
    early.sync()
    after = binds(early.run_once().effects)
    assert {b.pod for b in after}.isdisjoint(b.pod for b in sent)
    assert sorted((b.pod, b.node) for b in sent + after) == sorted((b.pod, b.node) for b in full)


def test_no_head_start_when_a_plugin_would_read_the_running_pods() -> None:
    # A pending pod's rule over other pods: pod affinity reads every task as the
    # session opens, the counted ones among them. The first cycle binds as ever.
    rule = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    _, early = scheduler(busy(rule))
    assert head_start(early) == []
    _, plain = scheduler(busy(rule))
    full = binds(plain.run_once().effects)
    early.sync()
    assert full and binds(early.run_once().effects) == full


def test_no_head_start_for_a_cluster_converted_quickly() -> None:
    _, small = scheduler(busy(), head_start_pods=100)
    assert head_start(small) == []
    assert binds(small.run_once().effects)


def test_a_leader_takes_its_head_start_before_its_first_sync_and_a_standby_none() -> None:
    cluster, leader = scheduler(busy())
    duty = Scheduling(leader, threading.Event(), None)
    duty.prepare()          # with leader election: only listed, while the Lease is tried
    assert not leader.synced and not bound(cluster)
    duty.lead(lambda: True)
    fits = {"default/c-0", "default/c-1"}        # d does not fit beside c
    assert leader.synced and leader.head_started is not None and {b.pod for b in leader.head_started.binds} == fits == bound(cluster)
    cluster, standby = scheduler(busy())
    duty = Scheduling(standby, threading.Event(), None)
    duty.prepare()
    duty.follow()
    assert standby.synced and standby.head_started is None and not bound(cluster)


def bound(cluster: MemoryCluster) -> set[str]:
    """The pods bound that were not on a node to begin with."""
    return {f"default/{p['metadata']['name']}" for p in cluster.list(POD)
            if p["spec"].get("nodeName") and p["metadata"]["name"][0] in "cd"}


def with_proxies(objects: list[Obj]) -> list[Obj]:
    """And another scheduler's small pod running on every node."""
    nodes = [o["metadata"]["name"] for o in objects if o["kind"] == "Node"]
    return objects + [build_pod(f"proxy-{n}", cpu="50m", node=n, namespace="kube-system",
                                scheduler="default-scheduler") for n in nodes]


@settings(max_examples=40, deadline=None)
@given(scenarios())
def test_head_start_binds_are_the_first_cycles_first_over_small_clusters(scenario: Any) -> None:
    _, early = scheduler(with_proxies(scenario.objects()))
    sent = head_start(early)
    _, plain = scheduler(with_proxies(scenario.objects()))
    assert sent == binds(plain.run_once().effects)[:len(sent)]
    early.sync()
    assert {b.pod for b in binds(early.run_once().effects)}.isdisjoint(b.pod for b in sent)


@settings(max_examples=40, deadline=None)
@given(contended())
def test_head_start_binds_are_the_first_cycles_first_over_contended_clusters(scenario: Any) -> None:
    _, early = scheduler(scenario.objects())
    sent = head_start(early)
    _, plain = scheduler(scenario.objects())
    assert sent == binds(plain.run_once().effects)[:len(sent)]
    early.sync()
    assert {b.pod for b in binds(early.run_once().effects)}.isdisjoint(b.pod for b in sent)


def test_no_head_start_when_nothing_waits() -> None:
    running = [o for o in busy() if o["kind"] != "Pod" or o["spec"].get("nodeName")]
    _, early = scheduler(running)
    assert early.head_start() is None and not early.synced


def test_what_is_written_before_a_bind_goes_with_it_until_an_error_or_an_eviction() -> None:
    sent: list[Effect] = []
    claim = SetClaimStatus("default/c", "uid-c", "resource.k8s.io/v1", None, (), PodKey("default/p"))
    bind = Bind(PodKey("default/p"), "u", NodeName("n1"), JobKey("default/p"))
    evict = Evict(PodKey("default/q"), "uid-q", NodeName("n1"), JobKey("default/q"), Cause.PREEMPT)
    later = Bind(PodKey("default/r"), "u", NodeName("n1"), JobKey("default/r"))
    effects = Sent(sent.append)
    for effect in (claim, bind, evict, later):
        effects.append(effect)
    assert sent == [claim, bind] and effects.binds == [bind] and effects.stopped
    assert list(effects) == [claim, bind, evict, later]    # the session sees all it made
    errors: list[Effect] = []
    failed = Sent(errors.append)
    failed.failures = [JobError.of(JobKey("default/x"), "allocate", Unconverted("3 pods"))]
    failed.append(bind)
    assert errors == [] and failed.binds == [] and failed.stopped
