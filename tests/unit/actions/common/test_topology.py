"""Where preempt and reclaim may make room for a topology-bound gang
(actions.common.topology.bound_domain): inside one domain of the gang's level, and
for a subgroup with a level of its own, inside one domain of that level within
the gang's; never anywhere when no single domain could hold it."""
from __future__ import annotations

from typing import Any

import numpy as np

from actions.common.domainchoice import DomainChoice
from actions.common.topology import bound_domain
from kaisched.api.job import JobInfo
from kaisched.api.task import TaskInfo
from kaisched.builtins.catalog import register_builtins
from kaisched.framework import Session, default_config
from tests.builders.objects import build_node, build_pod, build_podgroup, snapshot

ZONE, CLIQUE = "topology.kubernetes.io/zone", "nvidia.com/gpu.clique"
# zone-1 holds 8 GPUs in two cliques of 4; zone-2 holds 6 in one clique.
LAYOUT = {"n1": ("zone-1", "c1"), "n2": ("zone-1", "c1"), "n3": ("zone-1", "c2"),
          "n4": ("zone-1", "c2"), "n5": ("zone-2", "c3"), "n6": ("zone-2", "c3"),
          "n7": ("zone-2", "c3")}


def world(workers: int, running: dict[str, str] | None = None) -> list[dict[str, Any]]:
    objects = [build_node(n, cpu=16, gpu=2, labels={ZONE: z, CLIQUE: c})
               for n, (z, c) in LAYOUT.items()]
    objects.append(build_podgroup("job", min_member=workers + 1, topology={"required": ZONE},
                                  subGroups=[{"name": "launcher", "minMember": 1},
                                             {"name": "worker", "minMember": workers,
                                              "topology": {"required": CLIQUE}}]))
    objects.append(build_pod("launcher", group="job", labels={"kaisched.io/subgroup": "launcher"}))
    for i in range(workers):
        node = (running or {}).get(f"worker-{i}")
        objects.append(build_pod(f"worker-{i}", gpu=1, group="job", node=node,
                                 labels={"kaisched.io/subgroup": "worker"}))
    return objects


def opened(objects: list[dict[str, Any]]) -> tuple[Session, JobInfo]:
    registry = register_builtins()
    config = default_config(registry)
    ssn = Session(snapshot(objects), config, registry.build_plugins(config))
    return ssn, ssn.cluster.jobs[next(k for k in ssn.cluster.jobs if k.endswith("/job"))]


def task(job: JobInfo, name: str) -> TaskInfo:
    return next(t for t in job.tasks.values() if t.name == name)


def nodes(ssn: Session, mask: np.ndarray | None) -> list[str]:
    assert mask is not None
    return [n for n, m in zip(ssn.cluster.table.names, mask, strict=True) if m]


def free(ssn: Session) -> np.ndarray:
    return ssn.cluster.table.future.copy()


def test_the_gang_goes_to_the_zone_whose_clique_holds_the_subgroup() -> None:
    # zone-1 has room for 5 GPUs in total, but no clique of it holds 5 workers.
    ssn, job = opened(world(5))
    room = lambda: free(ssn)     # noqa: E731
    assert nodes(ssn, bound_domain(ssn, DomainChoice(ssn), job, room, task(job, "launcher"))) == ["n5", "n6", "n7"]
    assert nodes(ssn, bound_domain(ssn, DomainChoice(ssn), job, room, task(job, "worker-0"))) == ["n5", "n6", "n7"]


def test_a_subgroup_is_kept_in_the_clique_its_members_sit_in() -> None:
    ssn, job = opened(world(3, running={"worker-0": "n3"}))
    assert nodes(ssn, bound_domain(ssn, DomainChoice(ssn), job, lambda: free(ssn), task(job, "worker-1"))) == \
        ["n3", "n4"]
    # the launcher only has to stay in the gang's zone
    assert nodes(ssn, bound_domain(ssn, DomainChoice(ssn), job, lambda: free(ssn), task(job, "launcher"))) == \
        ["n1", "n2", "n3", "n4"]


def test_no_domain_when_no_clique_could_hold_the_subgroup() -> None:
    ssn, job = opened(world(7))
    for name in ("launcher", "worker-0"):
        assert nodes(ssn, bound_domain(ssn, DomainChoice(ssn), job, lambda: free(ssn), task(job, name))) == []


def test_the_task_defaults_to_the_first_pending_in_task_order() -> None:
    ssn, job = opened(world(3))
    stmt = ssn.statement()
    stmt.pipeline(task(job, "launcher"), ssn.cluster.table.names[0])      # n1, zone-1
    # the workers come next: one clique of the launcher's zone
    assert nodes(ssn, bound_domain(ssn, DomainChoice(ssn), job, lambda: free(ssn))) == ["n1", "n2"]
    stmt.discard()
