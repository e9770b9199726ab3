"""What the PodDisruptionBudgets let a session evict: each budget's allowance
counted over the pods as they stood when the session opened, what the session
evicted counted against it (and given back when undone), a group refused whole."""
from __future__ import annotations

from typing import Any

from kaisched.framework.effects import Cause
from kaisched.framework.parts import Disruptions
from tests.builders.objects import build_node, build_pod, open_session, snapshot

APP = {"matchLabels": {"app": "web"}}


def pdb(spec: dict[str, Any]) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "budget", "namespace": "default"}, "spec": spec}


def web_objects() -> list[dict]:
    return [build_node("n1", cpu=8),
            *(build_pod(f"web-{i}", node="n1", labels={"app": "web"}) for i in range(3)),
            build_pod("web-3", labels={"app": "web"}),                     # pending: expected
            build_pod("web-4", node="n1", phase="Succeeded", labels={"app": "web"}),
            build_pod("db-0", node="n1", labels={"app": "db"}),
            pdb({"minAvailable": 2, "selector": APP})]


def test_disruptions_count_the_session_pods() -> None:
    """Healthy pods are those running; expected, those not finished; an
    eviction of a pod the budget selects is allowed only within what is left."""
    cluster = snapshot(web_objects())
    assert [b.key for b in cluster.budgets] == ["default/budget"]
    disruptions = Disruptions(cluster)
    assert disruptions.allowed == {"default/budget": 1}    # 3 healthy of 4 expected, 2 must stay
    tasks = {t.name: t for job in cluster.jobs.values() for t in job.tasks.values()}
    web0, web1, db0 = tasks["web-0"], tasks["web-1"], tasks["db-0"]
    assert disruptions.refusing([web0]) is None
    assert disruptions.refusing([web1], beside=[web0]) == "default/budget"
    assert disruptions.refusing([web0, web1]) == "default/budget"
    assert disruptions.refusing([db0], beside=[web0]) is None      # not selected: free to go
    assert disruptions.refusing([web0], beside=[web0]) is None     # the same pod is one disruption


def test_the_session_counts_what_it_evicted_and_what_it_undid() -> None:
    ssn = open_session([*web_objects(), build_pod("urgent", priority=1000)])
    tasks = {t.name: t for job in ssn.cluster.jobs.values() for t in job.tasks.values()}
    stmt = ssn.statement()
    stmt.evict(tasks["web-0"], Cause.PREEMPT)
    # The allowance is of the pods as the session opened: web-0 was healthy then.
    assert ssn.disruptions.allowed == {"default/budget": 1}
    assert ssn.disruptions.refusing([tasks["web-1"]]) == "default/budget"
    # the conformance rule: a pod the budget keeps is no candidate
    assert ssn.preemptable(tasks["urgent"], [tasks["web-1"], tasks["db-0"]]) == [tasks["db-0"]]
    stmt.discard()
    assert ssn.disruptions.refusing([tasks["web-1"]]) is None


def test_no_budget_refuses_nothing() -> None:
    cluster = snapshot([build_node("n1", cpu=8), build_pod("web-0", node="n1", labels={"app": "web"})])
    disruptions = Disruptions(cluster)
    task = next(t for job in cluster.jobs.values() for t in job.tasks.values())
    assert disruptions.refusing([task]) is None and disruptions.allowed == {}
