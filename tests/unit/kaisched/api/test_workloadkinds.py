"""The table of workload kinds and the parts that derive from it agree: a kind
known to the table, the PodGrouper's registry, the cache's gang-pod test or the
simulator's operators is known to all of them, or the table says why not
(`gang_owner`, `gang_by_label`, `simulated`)."""
from __future__ import annotations

import re

import attrs
import pytest

from kaisched.api import workloadkinds as K
from kaisched.api.workloadkinds import KINDS, RoleFrom, WorkloadKind
from kaisched.cache.convert.pods import GANG_OWNER_GROUPS, GANG_POD_LABELS, gang_ref
from kaisched.sim.operators import blueprint
from kaisched.sim.scenario import JobKind, parse_scenario
from kaisched.sim.specs import WORKLOADS
from podgrouper.groupers import builtin_groupers, pick
from podgrouper.groupers.registry import registry_of
from podgrouper.groupers.workload import default_grouper
from podgrouper.roles import pod_role

SIMULATED = [k for k in KINDS if k.simulated]


def test_each_kind_is_in_the_table_once() -> None:
    assert len({k.group_kind for k in KINDS}) == len(KINDS)
    assert all(K.lookup(*k.group_kind) is k for k in KINDS)


# -- the PodGrouper's registry ---------------------------------------------------------------

def test_every_kind_of_the_table_has_a_grouper_and_every_grouper_a_kind() -> None:
    registered = set(builtin_groupers())
    table = {k.group_kind for k in KINDS}
    assert not table - registered, f"kinds with no grouper: {sorted(table - registered)}"
    assert not registered - table, f"groupers of kinds not in the table: {sorted(registered - table)}"


@pytest.mark.parametrize("stranger", [
    attrs.evolve(K.JOBSET, kind="JobSetV9"),               # a kind the table does not have
    attrs.evolve(K.JOBSET, plural="jobsetz"),              # the table's kind, told otherwise
], ids=["unknown", "edited"])
def test_a_grouper_for_a_kind_not_in_the_table_is_refused_at_registration(
        stranger: WorkloadKind) -> None:
    with pytest.raises(ValueError, match="no workload kind"):
        registry_of((stranger, default_grouper))


def test_a_kind_registered_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="two groupers"):
        registry_of((K.JOB, default_grouper), (K.JOB, default_grouper))


# -- the cache's gang-pod test ---------------------------------------------------------------

def controlled_by(kind: WorkloadKind, labels: dict[str, str] | None = None) -> dict:
    return {"name": "p", "namespace": "default", "labels": labels or {},
            "ownerReferences": [{"apiVersion": kind.api_version, "kind": kind.kind,
                                 "name": "owner", "uid": "u1", "controller": True}]}


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_the_cache_tells_a_kinds_pods_as_the_table_says(kind: WorkloadKind) -> None:
    """A pod whose controller is of a gang kind waits for its PodGroup; the
    cache tells by API group, so a kind that is no gang owner must not share
    its group with one that is."""
    source = gang_ref(controlled_by(kind)).source
    assert source == ("owner" if kind.gang_owner else "none"), kind
    if kind.gang_by_label:
        labelled = {"name": "p", "labels": {kind.pods.job_label: "x"}}
        assert gang_ref(labelled).source == "owner", kind


def test_the_cache_knows_no_gang_owner_or_label_the_table_does_not() -> None:
    assert GANG_OWNER_GROUPS == {k.group for k in KINDS if k.gang_owner}
    assert set(GANG_POD_LABELS) == {k.pods.job_label for k in KINDS if k.gang_by_label}


# -- the simulator's operators ---------------------------------------------------------------

def test_the_simulator_emulates_the_kinds_the_table_marks_simulated() -> None:
    emulated = {kind.value for kind in JobKind if kind is not JobKind.GANG}
    assert emulated == {k.kind for k in SIMULATED}
    assert set(WORKLOADS) == set(JobKind) - {JobKind.GANG}


def job_of(kind: WorkloadKind) -> str:
    """A scenario with one job of the kind, a pod in each of its roles."""
    roles = kind.roles if not kind.open_roles else (*kind.roles, "group-a")
    lines = "\n".join(f"      {role}: {{replicas: 1, requests: {{cpu: 1}}}}"
                      for role in (roles if kind is not K.JOB else ("main",)))
    return f"""
nodePools: [{{name: cpu, count: 1, capacity: {{cpu: 16, memory: 64Gi}}}}]
queues: [{{name: team-a}}]
jobs:
  - name: job-1
    kind: {kind.kind}
    queue: team-a
    duration: 5m
    roles:
{lines}
"""


def pattern(template: str, role: str) -> re.Pattern[str]:
    text = re.escape(template).replace(r"\{job\}", "[a-z0-9-]+").replace(r"\{role\}", role)
    return re.compile(text.replace(r"\{index\}", "[0-9]+").replace(r"\{group\}", "[0-9]+"))


@pytest.mark.parametrize("kind", SIMULATED, ids=str)
def test_each_operator_makes_its_kind_and_names_and_labels_pods_as_the_table_says(
        kind: WorkloadKind) -> None:
    job = parse_scenario(job_of(kind), "t.yaml").jobs[0]
    plan = blueprint(job, "kaisched")
    top = plan.objects[0]
    assert K.of_object(top["apiVersion"], top["kind"]) is kind
    assert pick(builtin_groupers(), top) is builtin_groupers()[kind.group_kind]
    naming = kind.pods
    for pod in plan.pods:
        labels = dict(pod.labels)
        if naming.role_label or naming.role_from is RoleFrom.INDEX:
            assert pod_role(labels) == pod.role, (pod, labels)
        if naming.job_label:
            assert naming.job_label in labels or kind is K.TRAIN_JOB, (pod, labels)
        if naming.name:
            lead = pod.role in kind.leading and bool(naming.lead_name)
            template = naming.lead_name if lead else naming.name
            name = pod.name or pod.prefix
            assert pattern(template, pod.role).fullmatch(name), (template, name)
            assert (pod.name is None) == template.endswith("-"), pod
