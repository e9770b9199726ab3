"""nodeorder through one scheduler cycle: binpack fills, spread evens out,
ties go to the node name, and the same input always gives the same placement."""
from __future__ import annotations

import pytest

from tests.builders.objects import build_node, build_pod, build_podgroup, run_cycle


def nodes_of(bindings: dict[str, str], *pods: str) -> list[str]:
    return [bindings[f"default/{p}"] for p in pods]


def test_binpack_puts_two_pods_on_the_same_node() -> None:
    cycle = run_cycle([build_node("n1"), build_node("n2"), build_pod("a"), build_pod("b")],
                      strategy="binpack")
    assert nodes_of(cycle.bindings, "a", "b") == ["n1", "n1"]


def test_spread_puts_two_pods_on_different_nodes() -> None:
    cycle = run_cycle([build_node("n1"), build_node("n2"), build_pod("a"), build_pod("b")],
                      strategy="spread")
    assert sorted(nodes_of(cycle.bindings, "a", "b")) == ["n1", "n2"]


@pytest.mark.parametrize(("strategy", "node"), [("binpack", "n2"), ("spread", "n1")])
def test_running_pods_steer_the_choice(strategy: str, node: str) -> None:
    objs = [build_node("n1"), build_node("n2"), build_pod("old", cpu=2, node="n2"),
            build_pod("p")]
    assert run_cycle(objs, strategy).bindings == {"default/p": node}


@pytest.mark.parametrize("strategy", ["binpack", "spread"])
def test_binpack_counts_gpus(strategy: str) -> None:
    # both nodes are equally full in cpu; n2 has a GPU in use
    objs = [build_node("n1", gpu=8), build_node("n2", gpu=8),
            build_pod("old-1", cpu=1, node="n1"), build_pod("old-2", cpu=1, gpu=1, node="n2"),
            build_pod("p", cpu=1, gpu=1)]
    expected = "n2" if strategy == "binpack" else "n1"
    assert run_cycle(objs, strategy).bindings == {"default/p": expected}


def test_spread_spreads_a_gang_one_per_node() -> None:
    objs = [build_node(f"n{i}") for i in range(4)]
    objs += [build_podgroup("pg", min_member=4)]
    objs += [build_pod(f"w{i}", group="pg") for i in range(4)]
    cycle = run_cycle(objs, strategy="spread")
    assert sorted(cycle.bindings.values()) == ["n0", "n1", "n2", "n3"]


@pytest.mark.parametrize("strategy", ["binpack", "spread"])
@pytest.mark.parametrize("order", [["n3", "n1", "n2"], ["n2", "n3", "n1"], ["n1", "n2", "n3"]])
def test_ties_are_broken_by_node_name(strategy: str, order: list[str]) -> None:
    objs = [build_node(n) for n in order] + [build_pod("p")]
    assert run_cycle(objs, strategy).bindings == {"default/p": "n1"}


def test_node_names_compare_as_strings() -> None:
    objs = [build_node("node-9"), build_node("node-10"), build_pod("p")]
    assert run_cycle(objs).bindings == {"default/p": "node-10"}


@pytest.mark.parametrize("strategy", ["binpack", "spread"])
def test_same_input_same_placement(strategy: str) -> None:
    def objs() -> list[dict]:
        out = [build_node(f"n{i}", cpu=c) for i, c in enumerate([4, 8, 4, 2])]
        out += [build_pod("old", cpu=3, node="n1")]
        out += [build_pod(f"p{i}", cpu=1 + i % 2) for i in range(7)]
        return out

    first = run_cycle(objs(), strategy).bindings
    assert len(first) == 7
    assert all(run_cycle(objs(), strategy).bindings == first for _ in range(3))


def test_binpack_prefers_the_node_that_ends_fuller() -> None:
    # a 2-cpu node is half full after a 1-cpu pod, an 8-cpu node only an eighth
    objs = [build_node("big", cpu=8), build_node("small", cpu=2), build_pod("p")]
    assert run_cycle(objs, "binpack").bindings == {"default/p": "small"}
    assert run_cycle(objs, "spread").bindings == {"default/p": "big"}
