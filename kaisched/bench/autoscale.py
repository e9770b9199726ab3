"""autoscale-50k: 50,000 nodes of 8 GPUs, each running a 6-GPU pod (100,000
GPUs free, none eight on one node), and 200 waiting gangs of eight 8-GPU
pods, none of which fits: with autoscaling on, each gets a
ProvisioningRequest. The cycle measured asks for all of them; the one after
(follow_session_seconds) follows the 200 requests up, unanswered; then every
request says Provisioned and half of the nodes bought have come up
(booked_session_seconds): the new nodes are told apart and held for the
gangs, oldest request first, so the older half start whole on them
(booked_placed) and the rest wait for theirs."""
from __future__ import annotations

from kaisched.api.clock import to_rfc3339
from kaisched.bench.objects import Obj, node, pod, podgroup
from kaisched.cluster.kinds import PROVISIONING_REQUEST
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import Registry, SchedulerConfig, load_config

GANGS = 200
GANG = 8


def autoscale_50k(scale: float) -> tuple[list[Obj], list[Obj]]:
    count = max(1, int(50_000 * scale))
    nodes = [node(f"node-{i:05d}", cpu=64, memory="512Gi") for i in range(count)]
    objs: list[Obj] = [pod(f"serve-{i:05d}", cpu="8", memory="64Gi", gpu=6,
                           node_name=f"node-{i:05d}") for i in range(count)]
    for g in range(max(1, int(GANGS * scale))):
        name = f"train-{g:03d}"
        objs.append(podgroup(name, GANG))
        objs.extend(pod(f"{name}-{t}", cpu="8", memory="64Gi", gpu=8, group=name)
                    for t in range(GANG))
    return nodes, objs


def autoscale_config(registry: Registry) -> SchedulerConfig:
    """The built-in config with autoscaling on, every gang asked for at once."""
    return load_config({"autoscaling": {"maxPending": 10_000}}, registry)


def provision_step(cluster: MemoryCluster, now: float) -> None:
    """The autoscaler's answer to every request: Provisioned, and half of the
    nodes it bought up (created now, after the requests)."""
    for request in cluster.list(PROVISIONING_REQUEST):
        meta = request["metadata"]
        cluster.patch_status(PROVISIONING_REQUEST, meta["namespace"], meta["name"], {
            "conditions": [{"type": "Provisioned", "status": "True", "reason": "Provisioned",
                            "message": "", "lastTransitionTime": to_rfc3339(now)}]})
        count = sum(s["count"] for s in request["spec"]["podSets"])
        for i in range(count // 2):
            cluster.create(node(f"{meta['name']}-{i}", cpu=64, memory="512Gi"))
