"""A subgroup tree is never left below its minimums by preempt or reclaim.

Random clusters full of running gangs whose PodGroups are subgroup trees (a
top-level subgroup is a leaf, or holds leaves; some subgroups and the root
need only some of their children), and pending gangs of higher priority in
the same queue (preempt) or in another queue under its fair share (reclaim).
After EVERY session, for EVERY gang with a tree: either none of its pods is
on a node, or the tree is met and every subgroup with a pod on a node meets
its own minimum -- no eviction leaves half a subgroup running unless the
whole gang goes, and no placement starts half a subgroup. No node is
over-committed, and the same input gives the same decisions.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

import attrs
from hypothesis import event, given, settings
from hypothesis import strategies as st

from kaisched.api.subgroups import ROOT, SubGroup, tree_of
from kaisched.cache.convert.groups import podgroup
from kaisched.cluster.kinds import POD, PODGROUP
from kaisched.framework.effects import Evict
from tests.builders.objects import build_node, build_pod, build_podgroup, build_queue
from tests.builders.strategies import GPU, sessions


@attrs.frozen
class Gang:
    name: str
    queue: str
    priority: int
    root: int | None                            # the PodGroup's minSubGroup, or all
    subgroups: tuple[dict[str, Any], ...]
    pods: tuple[tuple[str, str | None], ...]    # (leaf, the node it runs on or None)

    def tree(self) -> Any:
        return tree_of(tuple(SubGroup(s["name"], s.get("minMember", 0), parent=s.get("parent"),
                                      min_sub_group=s.get("minSubGroup"))
                             for s in self.subgroups), self.root)


@attrs.frozen
class Cluster:
    nodes: dict[str, int]                       # name -> GPUs
    quotas: dict[str, float]                    # queue -> GPU quota
    gangs: tuple[Gang, ...]

    def objects(self) -> list[dict[str, Any]]:
        out = [build_node(n, cpu=64, gpu=g) for n, g in self.nodes.items()]
        out += [build_queue(q, resources={GPU: {"quota": f"{quota:g}"}})
                for q, quota in self.quotas.items()]
        for gang in self.gangs:
            spec: dict[str, Any] = {"subGroups": [dict(s) for s in gang.subgroups],
                                    "priorityClassName": f"p{gang.priority}"}
            if gang.root is not None:
                group = build_podgroup(gang.name, queue=gang.queue, **spec)
                del group["spec"]["minMember"]
                group["spec"]["minSubGroup"] = gang.root
            else:
                group = build_podgroup(gang.name, min_member=max(gang.tree().min_pods(), 1),
                                       queue=gang.queue, **spec)
            out.append(group)
            for i, (leaf, node) in enumerate(gang.pods):
                out.append(build_pod(f"{gang.name}-{i}", cpu=1, gpu=1, group=gang.name,
                                     queue=gang.queue, node=node, labels={
                                         "kaisched.io/subgroup": leaf},
                                     creation=f"2026-01-01T00:{i:02d}:00Z"))
        out += [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                 "metadata": {"name": f"p{p}"}, "value": p * 100} for p in range(3)]
        return out


@st.composite
def trees(draw: st.DrawFn) -> tuple[tuple[dict[str, Any], ...], int | None]:
    subgroups: list[dict[str, Any]] = []
    top = draw(st.integers(1, 3))
    for t in range(top):
        name = f"s{t}"
        if draw(st.booleans()):
            kids = draw(st.integers(1, 3))
            need = draw(st.one_of(st.none(), st.integers(1, kids)))
            subgroups.append({"name": name, **({"minSubGroup": need} if need else {})})
            subgroups += [{"name": f"{name}-{k}", "parent": name,
                           "minMember": draw(st.integers(1, 2))} for k in range(kids)]
        else:
            subgroups.append({"name": name, "minMember": draw(st.integers(1, 2))})
    return tuple(subgroups), draw(st.one_of(st.none(), st.integers(1, top)))


def leaves(subgroups: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    parents = {s.get("parent") for s in subgroups}
    return [s for s in subgroups if s["name"] not in parents]


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    nodes = {f"n{i}": draw(st.sampled_from([4, 6, 8])) for i in range(draw(st.integers(1, 3)))}
    free = dict(nodes)
    gangs: list[Gang] = []
    for j in range(draw(st.integers(1, 4))):            # running, every subgroup met
        subgroups, root = draw(trees())
        pods: list[tuple[str, str | None]] = []
        for leaf in leaves(subgroups):
            for _ in range(leaf["minMember"] + draw(st.integers(0, 1))):
                node = next((n for n in draw(st.permutations(sorted(nodes))) if free[n]), None)
                if node is None:
                    break
                free[node] -= 1
                pods.append((leaf["name"], node))
        needed = sum(leaf["minMember"] for leaf in leaves(subgroups))
        if len(pods) >= needed and all(sum(1 for lf, _ in pods if lf == leaf["name"])
                                       >= leaf["minMember"] for leaf in leaves(subgroups)):
            gangs.append(Gang(f"run{j}", draw(st.sampled_from(["qa", "qb"])), 0, root, subgroups,
                              tuple(pods)))
        else:       # it did not fit whole: give its room back
            for _, node in pods:
                free[str(node)] += 1
    for j in range(draw(st.integers(1, 3))):            # pending, wanting room
        subgroups, root = draw(trees())
        pods = [(leaf["name"], None) for leaf in leaves(subgroups)
                for _ in range(leaf["minMember"] + draw(st.integers(0, 1)))]
        gangs.append(Gang(f"want{j}", draw(st.sampled_from(["qa", "qb"])),
                          draw(st.integers(1, 2)), root, subgroups, tuple(pods)))
    quotas = {q: draw(st.sampled_from([0.0, 2.0, 4.0, 8.0])) for q in ("qa", "qb")}
    return Cluster(nodes, quotas, tuple(gangs))


def check(scenario: Cluster) -> list[tuple[Any, ...]]:
    objects = scenario.objects()
    trees_of = {f"default/{o['metadata']['name']}": podgroup(o)[0]
                for o in objects if o["kind"] == "PodGroup"}
    nodes = scenario.nodes
    decisions = []
    causes: set[str] = set()
    for result, cluster in sessions(objects, None):
        evicts = [e for e in result.effects if isinstance(e, Evict)]
        causes |= {e.cause.value for e in evicts}
        decisions.append((dict(result.placed), sorted(e.pod for e in evicts)))
        on_node: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        load: dict[str, int] = defaultdict(int)
        for pod in cluster.list(POD):
            meta, spec = pod["metadata"], pod["spec"]
            if spec.get("nodeName"):
                load[spec["nodeName"]] += 1         # a pod being deleted still holds its room
            if spec.get("nodeName") and not meta.get("deletionTimestamp"):
                job = f"default/{meta['annotations']['kaisched.io/pod-group']}"
                on_node[job][meta["labels"]["kaisched.io/subgroup"]] += 1
        for node, used in load.items():
            assert used <= nodes[node], (node, used)
        for job, have in on_node.items():
            gang = trees_of[job]
            tree = tree_of(gang.subgroups, gang.min_sub_group)
            met = tree.met_nodes(have)
            short = [n or "the PodGroup" for n in tree.post
                     if tree.pods_under(n, have) and not met[n]]
            status = cluster.get(PODGROUP, *job.split("/", 1)).get("status") or {}
            assert not short, (job, dict(have), short, tree.shortfall(have),
                               [e.pod for e in evicts], status.get("conditions"))
            assert sum(have.values()) >= gang.min_member, (job, dict(have), gang.min_member)
            assert met[ROOT]
    event(f"evicted: {bool(causes)}")
    for cause in sorted(causes):
        event(f"evicted by {cause}")
    return decisions


@settings(max_examples=250, deadline=None)
@given(clusters())
def test_a_subgroup_tree_is_never_left_below_its_minimums(scenario: Cluster) -> None:
    decisions = check(scenario)
    assert check(scenario) == decisions
