"""Inter-pod affinity as a score, both ways (kube-scheduler's InterPodAffinity):
the new pod's preferred terms over the pods already there, and those pods'
preferred terms (and required affinity, at hardPodAffinityWeight 1) toward
the new pod; each counted pod adds its term's weight to its domain, and the
sums are scaled 0-100 over the nodes weighed. Pods placed in the session count
at once; an undone statement forgets them."""
from __future__ import annotations

from typing import Any

import numpy as np

from kaisched.api.podindex import Held
from kaisched.api.types import NodeName
from kaisched.builtins.catalog import register_builtins
from kaisched.framework import Hook, Session, default_config
from tests.builders.objects import build_node, build_pod, snapshot

HOST, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"


def term(app: str, key: str = HOST) -> dict[str, Any]:
    return {"topologyKey": key, "labelSelector": {"matchLabels": {"app": app}}}


def holder(name: str, node: str, kind: str, required: bool = False, weight: int = 10,
           target: str = "web", key: str = HOST) -> dict[str, Any]:
    """A pod of another scheduler on node holding one term toward app=target."""
    raw = build_pod(name, node=node, scheduler="default-scheduler", labels={"app": name})
    if required:
        terms: dict[str, Any] = {"requiredDuringSchedulingIgnoredDuringExecution": [term(target, key)]}
    else:
        terms = {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": weight, "podAffinityTerm": term(target, key)}]}
    raw["spec"]["affinity"] = {kind: terms}
    return raw


def nodes(*names: str, zones: dict[str, str] | None = None) -> list[dict[str, Any]]:
    return [build_node(n, cpu=8, labels={HOST: n, **({ZONE: zones[n]} if zones else {})})
            for n in names]


def session(objects: list[dict[str, Any]]) -> Session:
    registry = register_builtins()
    config = default_config(registry)
    return Session(snapshot(objects), config, registry.build_plugins(config))


def scores(ssn: Session, pod: str) -> dict[str, float] | None:
    """The podaffinity score of a pending pod on every node (None: no opinion)."""
    task = next(t for j in ssn.cluster.jobs.values() for t in j.tasks.values()
                if t.name == pod)
    fn = next(r.fn for r in ssn.hooks.registrations(Hook.POD_ORDER) if r.label == "podaffinity")
    found = fn(task, np.arange(len(ssn.cluster.table)))
    return None if found is None else dict(zip(ssn.cluster.table.names, found.tolist(), strict=True))


def test_each_existing_pod_adds_its_preferred_terms_weight() -> None:
    objects = [*nodes("a", "b", "c"),
               holder("h1", "a", "podAffinity"), holder("h2", "a", "podAffinity"),
               holder("h3", "b", "podAffinity"),
               build_pod("web", labels={"app": "web"})]
    assert scores(session(objects), "web") == {"a": 100.0, "b": 50.0, "c": 0.0}


def test_required_affinity_counts_at_weight_one_and_preferred_anti_takes_away() -> None:
    objects = [*nodes("a", "b", "c"),
               holder("db", "a", "podAffinity", required=True),
               holder("noisy", "b", "podAntiAffinity", weight=1),
               build_pod("web", labels={"app": "web"})]
    assert scores(session(objects), "web") == {"a": 100.0, "b": 0.0, "c": 50.0}


def test_a_term_scores_its_whole_domain_and_only_the_pods_it_selects() -> None:
    objects = [*nodes("a1", "a2", "b1", zones={"a1": "za", "a2": "za", "b1": "zb"}),
               holder("cache", "a1", "podAffinity", key=ZONE),
               build_pod("web", labels={"app": "web"}), build_pod("other", labels={"app": "x"})]
    ssn = session(objects)
    assert scores(ssn, "web") == {"a1": 100.0, "a2": 100.0, "b1": 0.0}
    assert scores(ssn, "other") is None


def test_the_new_pods_own_terms_and_the_existing_pods_terms_add_up() -> None:
    web = build_pod("web", labels={"app": "web"})
    web["spec"]["affinity"] = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 30, "podAffinityTerm": term("cache")}]}}
    # a: cache draws web (+10) but web keeps off cache (-30); b: nothing.
    objects = [*nodes("a", "b"), holder("cache", "a", "podAffinity"), web]
    assert scores(session(objects), "web") == {"a": 0.0, "b": 100.0}


def test_a_pod_placed_in_the_session_counts_and_an_undone_one_is_forgotten() -> None:
    objects = [*nodes("a", "b", "c"), build_pod("web", labels={"app": "web"})]
    magnet = build_pod("magnet", labels={"app": "magnet"})
    magnet["spec"]["affinity"] = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "podAffinityTerm": term("web")}]}}
    ssn = session([*objects, magnet])
    assert scores(ssn, "web") is None
    task = next(t for j in ssn.cluster.jobs.values() for t in j.tasks.values() if t.name == "magnet")
    stmt = ssn.statement()
    stmt.allocate(task, NodeName("c"))
    assert scores(ssn, "web") == {"a": 0.0, "b": 0.0, "c": 100.0}
    stmt.discard()
    assert scores(ssn, "web") is None


def test_terms_are_found_through_the_label_they_need() -> None:
    objects = [*nodes("a", "b"), holder("cache", "a", "podAffinity"),
               holder("db", "b", "podAffinity", required=True, target="api"),
               build_pod("web", labels={"app": "web"})]
    ssn = session(objects)
    plugin = next(p for p in ssn.plugins if p.name == "podaffinity")
    index = plugin.index      # type: ignore[attr-defined]
    (found,) = index.held_against({"app": "web"}, "default", Held.PREFERRED_AFFINITY)
    assert found.weight == 10 and found.term.topology_key == HOST
    assert index.held_against({"app": "web"}, "default", Held.AFFINITY) == []
    assert [h.kind for h in index.held_against({"app": "api"}, "default", Held.AFFINITY)] == \
        [Held.AFFINITY]
    assert index.held_against({"app": "web"}, "other-namespace", Held.PREFERRED_AFFINITY) == []
