"""Whether two models say the same: the incremental model against one rebuilt
from scratch. Differences are told in words, the first few of each kind."""
from __future__ import annotations

from typing import Any, Iterable

from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.node import NodeInfo

_AT_MOST = 20


def differences(a: ClusterInfo, b: ClusterInfo) -> list[str]:
    """What a says that b does not ([] when they agree), as 'what: a != b'."""
    found: list[str] = []
    _keys(found, "nodes", a.nodes, b.nodes)
    for name in sorted(a.nodes.keys() & b.nodes.keys()):
        _node(found, a.nodes[name], b.nodes[name])
    _keys(found, "jobs", a.jobs, b.jobs)
    for key in sorted(a.jobs.keys() & b.jobs.keys()):
        ja, jb = a.jobs[key], b.jobs[key]
        for field in ("spec", "priority", "creation", "status", "problem", "tasks"):
            _same(found, f"job {key} {field}", getattr(ja, field), getattr(jb, field))
        _same(found, f"job {key} counts", _nonzero(ja._counts), _nonzero(jb._counts))
        _same(found, f"job {key} totals", _nonzero(ja.totals()), _nonzero(jb.totals()))
    _same(found, "node shapes", a.node_shapes().described(), b.node_shapes().described())
    _same(found, "queues", a.queues, b.queues)
    _same(found, "queue tree", sorted(a.tree.edges), sorted(b.tree.edges))
    _same(found, "priority classes", a.priority_classes, b.priority_classes)
    _same(found, "foreign pods", sorted(a.foreign, key=lambda p: p.key),
          sorted(b.foreign, key=lambda p: p.key))
    _same(found, "namespaces", dict(a.namespace_labels), dict(b.namespace_labels))
    _same(found, "rules in play", a.rules_in_play(), b.rules_in_play())
    _same(found, "storage", a.storage, b.storage)
    _same(found, "shared GPUs", _shared(a), _shared(b))
    for what, sa, sb in zip(("queue use", "queue wants", "job states", "unsettled jobs",
                             "evictable jobs"),
                            a.ledger().sums(), b.ledger().sums(), strict=True):
        _same(found, what, sa, sb)
    return found[:_AT_MOST]


def _node(found: list[str], a: NodeInfo, b: NodeInfo) -> None:
    for field in ("allocatable", "labels", "taints", "ready", "unschedulable"):
        _same(found, f"node {a.name} {field}", getattr(a.spec, field), getattr(b.spec, field))
    for field in ("used", "releasing", "pipelined", "idle", "future_idle"):
        _same(found, f"node {a.name} {field}", getattr(a, field), getattr(b, field))
    _same(found, f"node {a.name} tasks", a.tasks, b.tasks)


def _shared(cluster: ClusterInfo) -> dict[tuple[str, str], Any]:
    """Every shared device: its sharers, what each holds, and its reservation pod."""
    return {(node, group): (d.holders(), d.reservation, d.kai, sorted(d.waiting))
            for node, devices in cluster.gpus.devices.items() for group, d in devices.items()}


def _keys(found: list[str], what: str, a: Iterable[Any], b: Iterable[Any]) -> None:
    only_a, only_b = set(a) - set(b), set(b) - set(a)
    if only_a or only_b:
        found.append(f"{what}: only in the first {sorted(only_a)[:5]}, "
                     f"only in the second {sorted(only_b)[:5]}")


def _same(found: list[str], what: str, a: Any, b: Any) -> None:
    if a != b:
        found.append(f"{what}: {_short(a)} != {_short(b)}")


def _nonzero(counts: dict[Any, int]) -> dict[Any, int]:
    return {k: v for k, v in counts.items() if v}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 300 else text[:300] + "..."
