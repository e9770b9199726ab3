"""predicates through one scheduler cycle: which nodes may take a pod."""
from __future__ import annotations

import pytest

from tests.builders.objects import build_node, build_pod, pod_scheduled_message, run_cycle, taint


def placed(objects: list[dict]) -> dict[str, str]:
    return run_cycle(objects).bindings


@pytest.mark.parametrize(("bad_node", "why"), [
    (build_node("a-bad", ready=False), "not Ready"),
    (build_node("a-bad", unschedulable=True), "unschedulable"),
    (build_node("a-bad", taints=[taint("dedicated", "infra")]), "taint"),
    (build_node("a-bad", taints=[taint("dedicated", "infra", "NoExecute")]), "taint"),
], ids=["not-ready", "unschedulable", "noschedule-taint", "noexecute-taint"])
def test_node_that_is_not_a_candidate(bad_node: dict, why: str) -> None:
    # the bad node sorts first, so it would win every tie were it a candidate
    assert placed([bad_node, build_node("b-good"), build_pod("p")]) == {"default/p": "b-good"}
    alone = run_cycle([bad_node, build_pod("p")])
    assert alone.bindings == {}
    assert why in pod_scheduled_message(alone.cluster, "p")


def test_node_without_conditions_is_taken_as_ready() -> None:
    assert placed([build_node("n1", ready=None), build_pod("p")]) == {"default/p": "n1"}


@pytest.mark.parametrize("tolerations", [
    [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}],
    [{"key": "dedicated", "operator": "Exists"}],
    [{"operator": "Exists"}],
], ids=["equal", "exists", "tolerate-all"])
def test_tolerated_taint(tolerations: list[dict]) -> None:
    node = build_node("n1", taints=[taint("dedicated", "infra")])
    assert placed([node, build_pod("p", tolerations=tolerations)]) == {"default/p": "n1"}


@pytest.mark.parametrize("tolerations", [
    [{"key": "dedicated", "operator": "Equal", "value": "other"}],
    [{"key": "other", "operator": "Exists"}],
    [{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}],
], ids=["wrong-value", "wrong-key", "wrong-effect"])
def test_untolerated_taint(tolerations: list[dict]) -> None:
    node = build_node("n1", taints=[taint("dedicated", "infra")])
    assert placed([node, build_pod("p", tolerations=tolerations)]) == {}


def test_prefer_no_schedule_taint_does_not_filter() -> None:
    node = build_node("n1", taints=[taint("soft", effect="PreferNoSchedule")])
    assert placed([node, build_pod("p")]) == {"default/p": "n1"}


@pytest.mark.parametrize(("selector", "node"), [
    ({"zone": "b"}, "n2"),
    ({"zone": "a", "disk": "ssd"}, "n1"),
    ({"zone": "c"}, None),
])
def test_node_selector(selector: dict, node: str | None) -> None:
    objs = [build_node("n1", labels={"zone": "a", "disk": "ssd"}),
            build_node("n2", labels={"zone": "b"}), build_pod("p", node_selector=selector)]
    assert placed(objs) == ({"default/p": node} if node else {})


def expr(key: str, op: str, *values: str) -> dict:
    return {"key": key, "operator": op, **({"values": list(values)} if values else {})}


@pytest.mark.parametrize(("terms", "node"), [
    ([{"matchExpressions": [expr("zone", "In", "b", "c")]}], "n2"),
    ([{"matchExpressions": [expr("zone", "NotIn", "a")]}], "n2"),
    ([{"matchExpressions": [expr("gpu", "Exists")]}], "n2"),
    ([{"matchExpressions": [expr("gpu", "DoesNotExist")]}], "n1"),
    ([{"matchExpressions": [expr("cores", "Gt", "32")]}], "n2"),
    ([{"matchExpressions": [expr("cores", "Lt", "32")]}], "n1"),
    ([{"matchFields": [expr("metadata.name", "In", "n2")]}], "n2"),
    ([{"matchExpressions": [expr("zone", "In", "x")]},
      {"matchExpressions": [expr("zone", "In", "b")]}], "n2"),
    ([{"matchExpressions": [expr("zone", "In", "x")]}], None),
    ([{}], None),
], ids=["in", "notin", "exists", "doesnotexist", "gt", "lt", "matchfields", "terms-ored",
        "no-match", "empty-term"])
def test_required_node_affinity(terms: list[dict], node: str | None) -> None:
    objs = [build_node("n1", labels={"zone": "a", "cores": "16"}),
            build_node("n2", labels={"zone": "b", "cores": "64", "gpu": "a100"}),
            build_pod("p", affinity_terms=terms)]
    assert placed(objs) == ({"default/p": node} if node else {})


@pytest.mark.parametrize("requests", [
    {"cpu": 0},
    {"cpu": 0, "memory": "64Mi"},
], ids=["best-effort", "memory-only"])
def test_max_pods(requests: dict) -> None:
    objs = [build_node("n1", pods="2"), *(build_pod(f"p{i}", **requests) for i in range(3))]
    assert len(placed(objs)) == 2


def test_node_with_zero_pod_slots_takes_no_pod() -> None:
    assert placed([build_node("n1", pods="0"), build_pod("p")]) == {}


def test_node_without_a_pods_figure_takes_the_kubelet_default() -> None:
    objs = [build_node("n1", cpu=1000), *(build_pod(f"p{i:03d}", cpu=0) for i in range(111))]
    assert len(placed(objs)) == 110


def test_max_pods_counts_running_pods() -> None:
    objs = [build_node("n1", pods="2"), build_pod("old", cpu=0, node="n1"),
            build_pod("a", cpu=0), build_pod("b", cpu=0)]
    assert len(placed(objs)) == 1


@pytest.mark.parametrize("extra", [{"example.com/fpga": 1}, {"nvidia.com/gpu": 1}])
def test_resource_no_node_has_fits_nowhere(extra: dict) -> None:
    cycle = run_cycle([build_node("n1", cpu=64), build_node("n2", cpu=64),
                       build_pod("p", cpu=1, extra=extra)])
    assert cycle.bindings == {}
    assert next(iter(extra)) in pod_scheduled_message(cycle.cluster, "p")


def test_resource_some_node_has_picks_it() -> None:
    objs = [build_node("n1"), build_node("n2", extra={"example.com/fpga": 2}),
            build_pod("p", extra={"example.com/fpga": 1})]
    assert placed(objs) == {"default/p": "n2"}


@pytest.mark.parametrize(("cpu", "memory", "fits"), [
    (4, None, True), (5, None, False), (1, "16Gi", True), (1, "17Gi", False),
])
def test_requests_must_fit_idle_room(cpu: int, memory: str | None, fits: bool) -> None:
    objs = [build_node("n1", cpu=4, memory="16Gi"), build_pod("p", cpu=cpu, memory=memory)]
    assert placed(objs) == ({"default/p": "n1"} if fits else {})


def test_insufficient_room_is_explained_in_numbers() -> None:
    cycle = run_cycle([build_node("n1", cpu=4), build_pod("old", cpu=3, node="n1"),
                       build_pod("p", cpu=2)])
    assert cycle.bindings == {}
    message = pod_scheduled_message(cycle.cluster, "p")
    assert "insufficient cpu" in message and "need 2" in message and "has 1" in message
