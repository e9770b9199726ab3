"""consolidation-1k: 1,000 nodes of 8 GPUs, each running a Deployment's four
pods (2, 2, 1 and 1 GPUs; minMember 1, so each pod above it moves alone),
2 GPUs free on every node; one pending gang of eight 4-GPU pods. 2,000 GPUs
are free, yet no node has 4: the gang fits only once pods move. The cycle
measured is the one that plans the moves, with consolidation in the actions."""
from __future__ import annotations

import attrs

from kaisched.bench.objects import Obj, node, pod, podgroup
from kaisched.framework import Registry, SchedulerConfig, default_config

GANG = 8


def consolidation_1k(scale: float) -> tuple[list[Obj], list[Obj]]:
    count = max(2 * GANG, int(1000 * scale))     # room for the gang, once pods move
    nodes = [node(f"node-{i:05d}", cpu=64, memory="512Gi") for i in range(count)]
    objs: list[Obj] = []
    for i in range(count):
        name = f"serve-{i:05d}"
        objs.append(podgroup(name, 1))
        for k, gpu in enumerate((2, 2, 1, 1)):
            p = pod(f"{name}-{k}", cpu="4", memory="32Gi", gpu=gpu, group=name,
                    node_name=f"node-{i:05d}")
            p["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                 "name": name, "uid": f"{name}-uid",
                                                 "controller": True}]
            objs.append(p)
    objs.append(podgroup("train", GANG))
    objs.extend(pod(f"train-{t}", cpu="8", memory="64Gi", gpu=4, group="train")
                for t in range(GANG))
    return nodes, objs


def consolidation_config(registry: Registry) -> SchedulerConfig:
    """The built-in config with consolidation after allocate."""
    config = default_config(registry)
    actions = config.actions
    return attrs.evolve(config, actions=(actions[0], "consolidation", *actions[1:]))
