"""A cluster autoscaler for the simulation, over the scenario's node groups,
behaving as cluster-autoscaler does with --enable-provisioning-requests:

- A ProvisioningRequest of the atomic class is answered all or nothing: the
  cheapest group whose template takes every pod and whose max leaves room
  for the nodes they need scales up at once. Accepted and Provisioned are set
  then (cluster-autoscaler says Provisioned once the scale-up succeeds); the
  nodes come up after the group's provisioningDelay. When no group can,
  Failed says why. A request still there 10 minutes (BOOKING) after
  Provisioned gets BookingExpired. A check-capacity request is Provisioned when the free room
  holds it, else Failed; nothing is bought for it.
- Pods marked Unschedulable that do not consume a request (both annotations)
  are scaled for pod by pod: packed, largest first, onto the free room of the
  nodes there and coming, the rest onto new nodes of the cheapest group that
  takes each, up to its max. A node some pending pod would fit on is needed,
  whether or not its scheduler will ever place that pod there (a gang's part).
- A group node beyond the group's min that holds no pod, that no pending pod
  is packed onto and that no booking holds is removed once it has been so
  for the scenario's scaleDownUnneededTime. While a request is booked, its
  pods are packed first (onto the free room, then the nodes coming), and
  the nodes they land on are needed: the capacity is kept for them. Pods
  that consume a request protect nothing otherwise, as upstream: a node
  the scheduler counted on for a gang may go while it waits for the rest.

Figures: scale-ups, nodes added and removed, node-hours and cost, and the
GPU-hours of the nodes it added that stood idle.
"""
from __future__ import annotations

from typing import Any, Iterable

import attrs

from kaisched.api.clock import from_rfc3339, to_rfc3339
from kaisched.api.constraints import Taint
from kaisched.api.node import EPSILON
from kaisched.api.provisioning import ATOMIC_CLASS, CLASS_ANNOTATION, CONSUME_ANNOTATION
from kaisched.api.resource import GPU
from kaisched.cache.convert.provisioning import capacity_request
from kaisched.cluster.kinds import NODE, POD, POD_TEMPLATE, PROVISIONING_REQUEST
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework.autoscalingconfig import AutoscalingConfig
from kaisched.framework.bookings import BOOKING
from kaisched.sim.binpack import POOL_LABEL, Bin, PodShape, capacity, nodes_needed, pack
from kaisched.sim.draspecs import node_slices
from kaisched.sim.meter import Meter
from kaisched.sim.specs import NodeGroup, NodePool

CHECK_CAPACITY_CLASS = "check-capacity.autoscaling.x-k8s.io"


def pool_node(pool: NodePool, name: str) -> list[dict[str, Any]]:
    """A pool's Node (a node group's too), Ready, and the ResourceSlices of its devices."""
    capacity = {**dict(pool.capacity), "pods": "110"}
    labels = {"kubernetes.io/hostname": name, POOL_LABEL: pool.name, **dict(pool.labels)}
    spec = {"taints": [{"key": k, "value": v, "effect": e} for k, v, e in pool.taints]} \
        if pool.taints else {}
    node = {"apiVersion": "v1", "kind": NODE.kind,
            "metadata": {"name": name, "labels": labels}, "spec": spec,
            "status": {"capacity": capacity, "allocatable": capacity,
                       "conditions": [{"type": "Ready", "status": "True"}]}}
    return [node, *node_slices(pool, name)]


@attrs.define
class _Coming:
    at: float
    group: str
    count: int
    request: str | None         # the ProvisioningRequest they are bought for


@attrs.define
class _Node:
    group: str
    gpus: float
    added: bool                 # by a scale-up (not one of the group's min at the start)
    request: str | None = None
    idle_since: float | None = None


class NodeGroups:
    def __init__(self, cluster: MemoryCluster, meter: Meter, groups: Iterable[NodeGroup],
                 scale_down_after: float) -> None:
        self.cluster = cluster
        self.meter = meter
        self.groups = {g.name: g for g in groups}
        self.scale_down_after = scale_down_after
        self.nodes: dict[str, _Node] = {}
        self.coming: list[_Coming] = []
        self.provisioned: dict[str, float] = {}     # request key -> when Provisioned
        self.answered: set[str] = set()
        self._serial = {name: 0 for name in self.groups}
        self.counts = {"scaleUps": 0, "nodesAdded": 0, "nodesRemoved": 0, "requestsProvisioned": 0,
                       "requestsFailed": 0, "bookingsExpired": 0}
        self._samples: list[tuple[float, float, dict[str, int]]] = []   # at, idle GPUs, nodes

    def __bool__(self) -> bool:
        return bool(self.groups)

    def start(self) -> None:
        """Each group's min, there from the start."""
        for group in self.groups.values():
            for _ in range(group.min):
                self._create(group, False, None)

    # -- each tick -----------------------------------------------------------------------
    def step(self, now: float) -> None:
        self._arrive(now)
        requests = self._requests()
        for key, obj in requests.items():
            if key not in self.answered:
                self._answer(now, key, obj)
        for key, at in list(self.provisioned.items()):
            if key not in requests:
                del self.provisioned[key]
            elif now - at >= BOOKING:
                del self.provisioned[key]
                self.counts["bookingsExpired"] += 1
                self._conditions(requests[key], now, ("Accepted", "Provisioned", "BookingExpired"),
                                 "the capacity was booked for 10 minutes and not used")
        wanted, needed = self._pod_by_pod(requests)
        for group, count in sorted(wanted.items()):
            self._scale_up(now, group, count, None)
        self._scale_down(now, needed)

    def next_event(self, now: float) -> float | None:
        """When a step would next change something, if it ever would."""
        events = [c.at for c in self.coming]
        requests = self._requests()
        if any(key not in self.answered for key in requests):
            return now
        events.extend(at + BOOKING for key, at in self.provisioned.items() if key in requests)
        wanted, needed = self._pod_by_pod(requests)
        if wanted:
            return now
        events.extend(since + self.scale_down_after for _, since in self._idle(now, needed))
        return min(events) if events else None

    def sample(self, now: float) -> None:
        """After a session: what the nodes it added left idle, and how many there are."""
        idle = 0.0
        count = {name: 0 for name in self.groups}
        for name, node in self.nodes.items():
            count[node.group] += 1
            if node.added:
                idle += max(0.0, node.gpus - self.meter.node_used.get(name, {}).get(GPU, 0.0))
        if self._samples and self._samples[-1][0] == now:
            self._samples.pop()
        self._samples.append((now, idle, count))

    def figures(self, start: float, end: float) -> dict[str, Any]:
        """The autoscaler's figures over [start, end] (end: virtual seconds since start)."""
        idle_hours = 0.0
        hours = {name: 0.0 for name in self.groups}
        for i, (at, idle, count) in enumerate(self._samples):
            until = self._samples[i + 1][0] if i + 1 < len(self._samples) else start + end
            span = max(0.0, until - at) / 3600.0
            idle_hours += idle * span
            for name, n in count.items():
                hours[name] += n * span
        cost = sum(hours[n] * g.cost_per_hour for n, g in self.groups.items())
        return {**self.counts, "nodeHours": round(sum(hours.values()), 2),
                "cost": round(cost, 2), "idleGpuHoursBought": round(idle_hours, 2),
                "groups": [{"name": n, "min": g.min, "max": g.max,
                            "nodeHours": round(hours[n], 2),
                            "cost": round(hours[n] * g.cost_per_hour, 2)}
                           for n, g in self.groups.items()]}

    # -- requests ------------------------------------------------------------------------
    def _requests(self) -> dict[str, dict[str, Any]]:
        out = {}
        for obj in self.cluster.list(PROVISIONING_REQUEST):
            meta = obj["metadata"]
            out[f"{meta.get('namespace', 'default')}/{meta['name']}/{meta.get('uid', '')}"] = obj
        return out

    def _answer(self, now: float, key: str, obj: dict[str, Any]) -> None:
        self.answered.add(key)
        pods = self._request_pods(obj)
        class_name = (obj.get("spec") or {}).get("provisioningClassName")
        if class_name == CHECK_CAPACITY_CLASS:
            left = pack(pods, self._free_bins())
            if left:
                self._fail(obj, now, f"capacity for {len(left)} of {len(pods)} pod(s) is not there")
            else:
                self._conditions(obj, now, ("Accepted", "Provisioned"), "capacity is there")
            return
        if class_name != ATOMIC_CLASS:
            return          # not a class this autoscaler serves: left unanswered, as upstream
        why: list[str] = []
        for group in sorted(self.groups.values(), key=lambda g: (g.cost_per_hour, g.name)):
            need = nodes_needed(pods, group)
            room = group.max - self._size(group.name)
            if need is None:
                why.append(f"{group.name}: a pod does not fit its template")
            elif need > room:
                why.append(f"{group.name}: {need} node(s) needed, max {group.max} leaves {room}")
            else:
                self._scale_up(now, group.name, need, key)
                self.provisioned[key] = now
                self.counts["requestsProvisioned"] += 1
                self._conditions(obj, now, ("Accepted", "Provisioned"),
                                 f"scale-up of {need} {group.name} node(s) succeeded")
                return
        self._fail(obj, now, "; ".join(why) or "no node group")

    def _request_pods(self, obj: dict[str, Any]) -> list[PodShape]:
        namespace = obj["metadata"].get("namespace", "default")
        pods: list[PodShape] = []
        for item in (obj.get("spec") or {}).get("podSets") or ():
            template = self.cluster.get(POD_TEMPLATE, namespace, item["podTemplateRef"]["name"])
            if template is not None:
                pods.extend([PodShape.of(template["template"]["spec"])] * int(item.get("count", 0)))
        return pods

    def _fail(self, obj: dict[str, Any], now: float, message: str) -> None:
        self.counts["requestsFailed"] += 1
        self._conditions(obj, now, ("Accepted", "Failed"), message)

    def _conditions(self, obj: dict[str, Any], now: float, kinds: tuple[str, ...],
                    message: str) -> None:
        meta = obj["metadata"]
        at = to_rfc3339(now)
        old = {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or ()}
        conditions = [old.get(kind) or {"type": kind, "status": "True", "reason": kind,
                                        "message": message, "lastTransitionTime": at}
                      for kind in kinds]
        self.cluster.patch_status(PROVISIONING_REQUEST, meta.get("namespace", "default"),
                                  meta["name"], {"conditions": conditions})

    # -- pods, one by one ----------------------------------------------------------------
    def _pod_by_pod(self, requests: dict[str, dict[str, Any]]) -> tuple[dict[str, int], set[str]]:
        """Nodes to buy per group for the Unschedulable pods no request covers,
        and the nodes they or a booked request's pods are packed onto (needed).
        A booking's pods are packed first: its capacity is kept for it."""
        booked = [pod for key in self.provisioned if key in requests
                  for pod in self._request_pods(requests[key])]
        pods = [PodShape.of(p["spec"]) for p in self.cluster.list(POD) if _unschedulable(p)]
        if not pods and not booked:
            return {}, set()
        bins = self._free_bins() + [Bin.of_group(self.groups[c.group])
                                    for c in self.coming for _ in range(c.count)]
        pack(booked, bins)
        left = pack(pods, bins)
        needed = {b.node for b in bins if b.taken and b.node is not None}
        wanted: dict[str, int] = {}
        fresh: list[Bin] = []
        for pod in sorted(left, key=lambda p: -p.size()):
            found = next((b for b in fresh if b.takes(pod)), None)
            if found is None:
                group = next((g for g in sorted(self.groups.values(),
                                                key=lambda g: (g.cost_per_hour, g.name))
                              if self._size(g.name) + wanted.get(g.name, 0) < g.max
                              and Bin.of_group(g).takes(pod)), None)
                if group is None:
                    continue        # no group can take it: nothing bought for it
                wanted[group.name] = wanted.get(group.name, 0) + 1
                found = Bin.of_group(group)
                fresh.append(found)
            found.put(pod)
        return wanted, needed

    def _free_bins(self) -> list[Bin]:
        self.meter.update()         # the nodes this step made, too
        bins = []
        for node in self.cluster.list(NODE):
            name = node["metadata"]["name"]
            if (node.get("spec") or {}).get("unschedulable"):
                continue
            used = self.meter.node_used.get(name, {})
            free = {k: v - used.get(k, 0.0) for k, v in self.meter.allocatable[name].items()}
            taints = tuple(Taint(t.get("key", ""), t.get("value", ""), t.get("effect", "NoSchedule"))
                           for t in (node.get("spec") or {}).get("taints") or ())
            bins.append(Bin(self.nodes[name].group if name in self.nodes else None, name,
                             dict(node["metadata"].get("labels") or {}), taints, free))
        return bins

    # -- scaling -------------------------------------------------------------------------
    def _size(self, group: str) -> int:
        """The group's nodes, there and coming."""
        return sum(1 for n in self.nodes.values() if n.group == group) + \
            sum(c.count for c in self.coming if c.group == group)

    def _scale_up(self, now: float, group: str, count: int, request: str | None) -> None:
        self.counts["scaleUps"] += 1
        self.coming.append(_Coming(now + self.groups[group].provisioning_delay, group, count,
                                   request))
        if not self.groups[group].provisioning_delay:
            self._arrive(now)

    def _arrive(self, now: float) -> None:
        """The nodes whose time has come, up."""
        for coming in [c for c in self.coming if c.at <= now]:
            self.coming.remove(coming)
            for _ in range(coming.count):
                self._create(self.groups[coming.group], True, coming.request)

    def _create(self, group: NodeGroup, added: bool, request: str | None) -> None:
        name = f"{group.name}-{self._serial[group.name]}"
        self._serial[group.name] += 1
        for obj in pool_node(group.pool, name):
            self.cluster.create(obj)
        self.nodes[name] = _Node(group.name, capacity(group).get(GPU, 0.0), added, request)
        self.counts["nodesAdded"] += added

    def _idle(self, now: float, needed: set[str]) -> list[tuple[str, float]]:
        """The group nodes that may go, and since when each is unneeded: per
        group, as many as it has beyond its min, nodes it bought first (the
        newest first), so that what stays is what it started with."""
        booked = set(self.provisioned)
        out: list[tuple[str, float]] = []
        for group in self.groups.values():
            unneeded: list[tuple[bool, int, str, float]] = []
            for name, node in self.nodes.items():
                if node.group != group.name:
                    continue
                used = self.meter.node_used.get(name, {})
                if any(v > EPSILON for v in used.values()) or name in needed or node.request in booked:
                    node.idle_since = None
                    continue
                if node.idle_since is None:
                    node.idle_since = now
                unneeded.append((not node.added, -_serial(name), name, node.idle_since))
            size = sum(1 for n in self.nodes.values() if n.group == group.name)
            out.extend((name, since) for *_, name, since in sorted(unneeded)[:size - group.min])
        return out

    def _scale_down(self, now: float, needed: set[str]) -> None:
        for name, since in self._idle(now, needed):
            if now - since >= self.scale_down_after:
                self.cluster.delete(NODE, "", name)
                del self.nodes[name]
                self.counts["nodesRemoved"] += 1


def retry_times(cluster: MemoryCluster, config: AutoscalingConfig | None) -> list[float]:
    """When the scheduler's autoscale action acts again by time alone: a
    request answered no is asked again after its backoff; a gang is asked for
    once it has waited `after`."""
    if config is None:
        return []
    out = []
    for obj in cluster.list(PROVISIONING_REQUEST):
        request = capacity_request(obj)
        if request is not None and request.state.over and not config.gives_up(request.attempt):
            out.append(request.since + config.backoff(request.attempt))
    if config.after > 0:
        for obj in cluster.list(POD):
            if _unschedulable(obj, consuming=True):
                since = from_rfc3339(obj["metadata"].get("creationTimestamp"))
                if since is not None:
                    out.append(since + config.after)
    return out


def _unschedulable(pod: dict[str, Any], consuming: bool = False) -> bool:
    """A pending pod its scheduler marked Unschedulable (and, unless consuming
    ones count, that consumes no ProvisioningRequest)."""
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    if spec.get("nodeName") or meta.get("deletionTimestamp") or status.get("phase", "Pending") != "Pending":
        return False
    notes = meta.get("annotations") or {}
    if not consuming and CONSUME_ANNOTATION in notes and CLASS_ANNOTATION in notes:
        return False
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               and c.get("reason") == "Unschedulable" for c in status.get("conditions") or ())


def _serial(node: str) -> int:
    """The number a group's node was made with (its name's suffix)."""
    return int(node.rsplit("-", 1)[1])
