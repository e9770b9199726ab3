"""From converted pods to tasks (kaisched.cache.jobs): make_task puts each of
a pod's facts where its name says."""
from __future__ import annotations

from kaisched.api.task import TaskInfo
from kaisched.cache.convert import pod_facts
from kaisched.cache.jobs import Groups, Priorities, make_task

# The task's fields that are the pod's facts as they are.
COPIED = ("key", "uid", "job", "status", "resreq", "node_name", "subgroup", "creation",
          "started", "placement", "critical", "unschedulable", "unschedulable_reason",
          "labels", "gates", "pvcs", "claims", "controlled", "gpu")


def test_a_task_holds_each_fact_of_its_pod_under_its_name() -> None:
    facts = pod_facts({
        "metadata": {"name": "p", "namespace": "team", "uid": "u-1", "labels": {"app": "a", "kaisched.io/subgroup": "w"},
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "annotations": {"kaisched.io/pod-group": "g"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                          "name": "r", "uid": "r-1", "controller": True}]},
        "spec": {"schedulerName": "kaisched", "nodeName": "n1", "priorityClassName": "high",
                 "schedulingGates": [{"name": "wait"}], "nodeSelector": {"zone": "a"},
                 "activeDeadlineSeconds": 60, "subdomain": "s",
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}],
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending", "startTime": "2026-01-01T00:01:00Z",
                   "conditions": [{"type": "PodScheduled", "status": "False",
                                   "reason": "Unschedulable", "message": "no room"}]},
    })
    task = make_task(facts, Priorities({"high": 9}, never=frozenset({"high"})),
                     facts.placement, Groups())
    assert isinstance(task, TaskInfo) and len(task) == len(TaskInfo._fields)
    assert None not in (facts.subgroup, facts.started, facts.unschedulable, facts.node_name)
    for name in COPIED:
        assert getattr(task, name) == getattr(facts, name), name
    assert (task.priority, task.never_preempts) == (9, True)    # its class's
    assert task.runtime is not None and task.runtime.limit == 90.0
    assert (task.successor_of, task.shared) == (None, ())
