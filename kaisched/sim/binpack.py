"""Packing pods onto nodes as a simulated cluster-autoscaler does: first
fit, largest pod first, onto the free room of the nodes there, of those
coming, or of new ones made from a node group's template."""
from __future__ import annotations

import functools
from typing import Any

import attrs

from kaisched.api.constraints import Placement, Taint
from kaisched.api.node import EPSILON
from kaisched.api.resource import PODS, Resource
from kaisched.cache import convert
from kaisched.sim.specs import NodeGroup

POOL_LABEL = "sim.kaisched.io/pool"

Room = dict[str, float]


@attrs.frozen
class PodShape:
    """What packing reads of a pod: its requests and its node rules."""
    request: tuple[tuple[str, float], ...]
    placement: Placement

    @classmethod
    def of(cls, spec: dict[str, Any]) -> PodShape:
        request = tuple((k, v) for k, v in convert.pod_request(spec, []).items if k != PODS)
        return cls(request, convert.placement(spec))

    def size(self) -> float:
        return sum(v for _, v in self.request)


@attrs.define
class Bin:
    """Room a pod may be packed onto: a node's free room, or a node to come."""
    group: str | None
    node: str | None            # None: a node not there yet
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    free: Room
    taken: bool = False

    def takes(self, pod: PodShape) -> bool:
        return pod.placement.matches_labels(self.labels, self.node or "") \
            and pod.placement.untolerated(self.taints) is None \
            and all(self.free.get(k, 0.0) >= v - EPSILON for k, v in pod.request)

    def put(self, pod: PodShape) -> None:
        for k, v in pod.request:
            self.free[k] = self.free.get(k, 0.0) - v
        self.taken = True

    @classmethod
    def of_group(cls, group: NodeGroup) -> Bin:
        """A new node of the group, empty."""
        return cls(group.name, None, {POOL_LABEL: group.name, **dict(group.pool.labels)},
                   tuple(Taint(k, v, e) for k, v, e in group.pool.taints), dict(capacity(group)))


def pack(pods: list[PodShape], bins: list[Bin]) -> list[PodShape]:
    """First fit, largest pod first; the pods left over."""
    left = []
    for pod in sorted(pods, key=lambda p: -p.size()):
        found = next((b for b in bins if b.takes(pod)), None)
        if found is None:
            left.append(pod)
        else:
            found.put(pod)
    return left


def nodes_needed(pods: list[PodShape], group: NodeGroup) -> int | None:
    """New nodes of the group the pods take, packed first fit; None if one fits none."""
    bins: list[Bin] = []
    for pod in sorted(pods, key=lambda p: -p.size()):
        found = next((b for b in bins if b.takes(pod)), None)
        if found is None:
            found = Bin.of_group(group)
            if not found.takes(pod):
                return None
            bins.append(found)
        found.put(pod)
    return len(bins)


@functools.cache
def capacity(group: NodeGroup) -> Room:
    """What a node of the group offers (pods aside): read once per group (a
    bin's free room is a copy of it)."""
    return {k: v for k, v in Resource.from_quantities(dict(group.pool.capacity)).items if k != PODS}
