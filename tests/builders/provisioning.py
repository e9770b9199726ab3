"""A scheduler with autoscaling on, over the memory backend, with the real binder; the test
plays the autoscaler (answers requests, adds Nodes)."""
from __future__ import annotations

from typing import Any

from kaisched.api.clock import ManualClock, to_rfc3339
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import PODGROUP, PROVISIONING_REQUEST
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import parse_config
from kaisched.framework.effects import Bind
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from tests.builders.objects import build_node, build_pod, build_podgroup, load_cluster

CONFIG = """\
actions: [allocate, backfill]
autoscaling: {after: 0s, retry: {initial: 60s, max: 240s}}
"""


class World:
    def __init__(self, objects: list[dict[str, Any]], config: str = CONFIG) -> None:
        self.clock = ManualClock()
        self.cluster: MemoryCluster = load_cluster(objects, self.clock)
        registry = register_builtins()
        self.scheduler = Scheduler(self.cluster, parse_config(config, registry), registry,
                                   self.clock, Binder(self.cluster, self.clock.now))

    def session(self, seconds: float = 1.0) -> dict[str, str]:
        self.clock.advance(seconds)
        return {e.pod: e.node for e in self.scheduler.run_once().effects if isinstance(e, Bind)}

    def requests(self) -> list[dict[str, Any]]:
        return self.cluster.list(PROVISIONING_REQUEST, "default")

    def condition(self, group: str) -> str:
        obj = self.cluster.get(PODGROUP, "default", group) or {}
        return " ".join(c.get("message", "") for c in (obj.get("status") or {}).get("conditions") or [])

    def reason(self, group: str) -> str:
        obj = self.cluster.get(PODGROUP, "default", group) or {}
        return next(c["reason"] for c in obj["status"]["conditions"] if c["type"] == "Scheduled")

    def answer(self, request: dict[str, Any], kind: str, message: str = "") -> None:
        name = request["metadata"]["name"]
        self.cluster.patch_status(PROVISIONING_REQUEST, "default", name, {"conditions": [
            {"type": kind, "status": "True", "reason": kind, "message": message,
             "lastTransitionTime": to_rfc3339(self.clock.now())}]})


def big_gang(pods: int = 4, queue: str | None = None, group: bool = True) -> list[dict[str, Any]]:
    out = [build_podgroup("big", min_member=pods, queue=queue)] if group else []
    for i in range(pods):
        out.append(build_pod(f"big-{i}", cpu=1, gpu=8, group="big" if group else None,
                             queue=queue if not group else None,
                             owner={"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "big",
                                    "uid": "uid-big", "controller": True}))
    return out


def gpu_nodes(*names: str) -> list[dict[str, Any]]:
    return [build_node(n, cpu=8, gpu=8) for n in names]
