"""gpu-share-5k: GPU sharing at scale. 5,000 nodes of eight 80 GiB GPUs
(GPU feature discovery's memory label), 40,000 pending pods that each ask
for part of one GPU -- fractions of an eighth to a half, and some by MiB --
as KAI's users write them: annotations, no nvidia.com/gpu request. Every one
fits: the session places all of them, packing shared GPUs first."""
from __future__ import annotations

from kaisched.bench.objects import Obj, node, pod

FRACTIONS = ("0.125", "0.25", "0.25", "0.5")
MEMORY = "81920"


def gpu_share_5k(scale: float) -> tuple[list[Obj], list[Obj]]:
    nodes = []
    for i in range(int(5000 * scale)):
        n = node(f"node-{i:05d}", cpu=128, memory="1Ti")
        n["metadata"]["labels"] = {"nvidia.com/gpu.memory": MEMORY}
        nodes.append(n)
    pods = []
    for i in range(int(40000 * scale)):
        p = pod(f"share-{i:05d}", cpu="1", memory="8Gi")
        # One in five asks by memory (10 or 20 GiB), the rest by fraction.
        ask = {"gpu-memory": "10240" if i % 2 else "20480"} if i % 5 == 4 \
            else {"gpu-fraction": FRACTIONS[i % len(FRACTIONS)]}
        p["metadata"]["annotations"] = ask
        pods.append(p)
    return nodes, pods
