"""Placement rules beyond resources: reading them from pods and PodGroups, and
each rule deciding a placement (inter-pod affinity with namespaces, preferred
node and pod affinity as scores, host ports), through one scheduler cycle.

Under the module that reads the rules (kaisched/cache/convert/rules.py); the deciding half
exercises the plugins that apply them (podaffinity, nodeaffinity, hostports)."""
from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import pytest

from kaisched.api.constraints import HostPort, LabelSelector, Requirement
from kaisched.api.domains import Domains
from kaisched.api.node import NodeSpec
from kaisched.api.resource import Resource
from kaisched.api.types import NodeName
from kaisched.builtins.catalog import register_builtins
from kaisched.cache import convert
from kaisched.errors import ConfigError
from tests.builders.objects import build_node, build_pod, build_podgroup, load_cluster, snapshot

HOST = "kubernetes.io/hostname"


def pod_with(spec: dict[str, Any], name: str = "p", namespace: str = "default",
             labels: dict[str, str] | None = None, **kw: Any) -> dict[str, Any]:
    raw = build_pod(name, namespace=namespace, labels=labels or {}, **kw)
    raw["spec"].update(spec)
    return raw


def anti(selector: dict[str, Any], key: str = HOST, **term: Any) -> dict[str, Any]:
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": key, "labelSelector": selector, **term}]}}}


# -- reading ----------------------------------------------------------------------------

def test_terms_default_to_the_pods_namespace_and_fold_match_label_keys() -> None:
    facts = convert.pod_facts(pod_with(anti({"matchLabels": {"app": "x"}}, matchLabelKeys=["job"]),
                                       namespace="ml", labels={"job": "j1", "app": "x"}))
    (term,) = facts.placement.rules.anti_affinity
    assert term.topology_key == HOST
    assert term.matcher.namespaces == ("ml",)
    assert term.matcher.selector == LabelSelector((("app", "x"),), (Requirement("job", "In", ("j1",)),))
    assert facts.labels == (("app", "x"), ("job", "j1"))


def test_an_empty_namespace_selector_means_every_namespace() -> None:
    facts = convert.pod_facts(pod_with(anti({"matchLabels": {"app": "x"}}, namespaceSelector={})))
    matcher = facts.placement.rules.anti_affinity[0].matcher
    assert matcher.namespaces == ()
    assert matcher.matches({"app": "x"}, "anywhere", {})
    assert not matcher.matches({"app": "y"}, "anywhere", {})


def test_spread_constraints_host_ports_and_preferred_node_affinity_are_read() -> None:
    spec = {
        "topologySpreadConstraints": [{"maxSkew": 2, "topologyKey": "zone",
                                       "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 3,
                                       "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor",
                                       "labelSelector": {"matchLabels": {"app": "web"}}}],
        "containers": [{"name": "main", "ports": [{"containerPort": 80, "hostPort": 8080,
                                                   "protocol": "UDP", "hostIP": "10.0.0.1"}]}],
        "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 30, "preference": {"matchExpressions": [
                {"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}},
    }
    placement = convert.pod_facts(pod_with(spec)).placement
    (c,) = placement.rules.spread
    assert (c.max_skew, c.topology_key, c.hard, c.min_domains) == (2, "zone", False, 3)
    assert (c.honor_node_affinity, c.honor_taints) == (False, True)
    assert placement.rules.host_ports == (HostPort(8080, "UDP", "10.0.0.1"),)
    ((weight, term),) = placement.preferred
    assert weight == 30 and term.matches({"disk": "ssd"}, "n")


def test_host_ports_conflict_by_protocol_and_address() -> None:
    assert HostPort(80).conflicts(HostPort(80, host_ip="10.0.0.1"))
    assert not HostPort(80, "TCP").conflicts(HostPort(80, "UDP"))
    assert not HostPort(80, host_ip="10.0.0.1").conflicts(HostPort(80, host_ip="10.0.0.2"))


def test_a_pod_without_rules_shares_one_placement_value() -> None:
    a = convert.pod_facts(pod_with({}, name="a")).placement
    b = convert.pod_facts(pod_with({}, name="b")).placement
    assert a == b and not a.rules


@pytest.mark.parametrize("spec, annotations, want", [
    ({"topology": {"required": "rack"}}, {}, ("rack", None)),
    ({"topology": {"preferred": "rack", "required": "zone"}}, {}, ("zone", "rack")),
    ({}, {"kai.scheduler/topology-required-placement": "block",
          "kai.scheduler/topology-preferred-placement": "rack"}, ("block", "rack")),
    ({"topology": {"required": "zone"}}, {"kai.scheduler/topology-required-placement": "rack"},
     ("zone", None)),
])
def test_podgroup_topology(spec: dict, annotations: dict, want: tuple) -> None:
    raw = build_podgroup("g", min_member=2, **spec)
    raw["metadata"]["annotations"] = annotations
    gang, _, problem = convert.podgroup(raw)
    assert problem is None
    assert (gang.topology.required, gang.topology.preferred) == want


def test_subgroup_topology() -> None:
    raw = build_podgroup("g", min_member=2, subGroups=[
        {"name": "worker", "minMember": 2, "topology": {"required": "clique"}}])
    gang, _, _ = convert.podgroup(raw)
    assert gang.subgroups[0].topology.required == "clique"


@pytest.mark.parametrize("spec, gang, job", [
    ({"schedulingGroup": {"podGroupName": "pg"}}, ("upstream", "pg", "", ""), "default/pg"),
    ({"workloadRef": {"name": "w", "podGroup": "pg", "podGroupReplicaKey": "3"}},
     ("workload", "w", "3", "pg"), "default/w:pg[3]"),
    ({"workloadRef": {"name": "w", "podGroup": "pg"}}, ("workload", "w", "", "pg"), "default/w:pg"),
])
def test_upstream_gang_references(spec: dict, gang: tuple, job: str) -> None:
    """1.36+ pods name a PodGroup object; 1.35 pods a podGroup of a Workload,
    each replica key a gang of its own."""
    facts = convert.pod_facts(pod_with(spec))
    assert (facts.gang.source, facts.gang.name, facts.gang.replica, facts.gang.member) == gang
    assert facts.job == job


# -- domains ----------------------------------------------------------------------------

def test_domains_group_rows_and_sum_per_domain() -> None:
    specs = [NodeSpec(NodeName(f"n{i}"), Resource(), {"rack": f"r{i % 2}"} if i < 3 else {})
             for i in range(4)]
    rack = Domains("rack", specs)
    assert rack.names == ["r0", "r1"] and list(rack.ids) == [0, 1, 0, -1]
    assert list(rack.totals(np.array([[1.0], [2.0], [3.0], [9.0]]))[:, 0]) == [4.0, 2.0]
    assert list(rack.sums(np.array([1.0, 2.0, 3.0, 9.0]))) == [4.0, 2.0]
    hosts = Domains(HOST, specs)          # nodes without the label: their own name
    assert hosts.per_node and hosts.names == ["n0", "n1", "n2", "n3"]


# -- deciding ---------------------------------------------------------------------------

def placed(objects: list[dict[str, Any]], config_text: str | None = None) -> dict[str, str]:
    """pod -> node bound by one allocate + backfill cycle with the default plugins
    (or the tiers given)."""
    from kaisched.api.clock import ManualClock
    from kaisched.framework import default_config, parse_config
    from kaisched.runtime.binder import Binder
    from kaisched.runtime.scheduler import Scheduler

    registry = register_builtins()
    config = parse_config(config_text, registry) if config_text else \
        attrs.evolve(default_config(registry), actions=("allocate", "backfill"))
    clock = ManualClock()
    cluster = load_cluster(objects, clock)
    result = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now)).run_once()
    return dict(result.placed)


def test_namespace_selector_reads_namespace_labels() -> None:
    prod = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod", "labels": {"env": "prod"}}}
    objects = [prod, build_node("a", cpu=8), build_node("b", cpu=8),
               build_pod("db", namespace="prod", labels={"app": "db"}, node="a", cpu=4),
               pod_with(anti({"matchLabels": {"app": "db"}},
                             namespaceSelector={"matchLabels": {"env": "prod"}}), name="web")]
    assert placed(objects) == {"default/web": "b"}
    # the same term without the namespace selector looks at its own namespace only
    objects[-1] = pod_with(anti({"matchLabels": {"app": "db"}}), name="web")
    assert placed(objects) == {"default/web": "a"}


def test_required_affinity_follows_the_pod_it_names() -> None:
    spec = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": HOST, "labelSelector": {"matchLabels": {"app": "cache"}}}]}}}
    objects = [build_node("a", cpu=8), build_node("b", cpu=8),
               build_pod("other", node="a", cpu=6),
               build_pod("cache", labels={"app": "cache"}, node="b", cpu=1),
               pod_with(spec, name="web", labels={"app": "web"})]
    assert placed(objects) == {"default/web": "b"}
    # nobody to follow and it does not match its own term: it waits
    objects[3] = build_pod("cache", labels={"app": "other"}, node="b", cpu=1)
    assert placed(objects) == {}


def _tiers(extra: str) -> str:
    return ("actions: [allocate]\ntiers:\n  - plugins: [{name: gang}]\n"
            "  - plugins: [{name: predicates}, {name: podaffinity}, "
            "{name: nodeorder, arguments: {strategy: binpack}}, " + extra + "]\n")


def test_preferred_node_affinity_outweighs_binpack_by_its_weight() -> None:
    spec = {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [
            {"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}}
    objects = [build_node("a", cpu=8), build_node("b", cpu=8, labels={"disk": "ssd"}),
               build_pod("busy", node="a", cpu=6), pod_with(spec, name="web")]
    assert placed(objects, _tiers("{name: nodeaffinity}")) == {"default/web": "b"}
    assert placed(objects, _tiers("{name: nodeaffinity, arguments: {weight: 0}}")) == \
        {"default/web": "a"}


def test_preferred_pod_affinity_scores_the_domain_with_the_pod() -> None:
    spec = {"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": {"topologyKey": HOST,
                                            "labelSelector": {"matchLabels": {"app": "cache"}}}}]}}}
    objects = [build_node("a", cpu=8), build_node("b", cpu=8),
               build_pod("busy", node="a", cpu=6),
               build_pod("cache", labels={"app": "cache"}, node="b", cpu=1),
               pod_with(spec, name="web")]
    assert placed(objects) == {"default/web": "b"}


@pytest.mark.parametrize("plugin", ["podaffinity", "topologyspread", "nodeaffinity"])
def test_weight_arguments_are_checked(plugin: str) -> None:
    factory = register_builtins().plugins[plugin]
    assert factory({"weight": 2}).weight == 2.0
    with pytest.raises(ConfigError, match="weight"):
        factory({"weight": -1})
    with pytest.raises(ConfigError, match="unknown argument"):
        factory({"wieght": 1})


def test_the_snapshot_keeps_other_schedulers_pods_rules_and_namespaces() -> None:
    prod = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod", "labels": {"env": "prod"}}}
    other = pod_with(anti({"matchLabels": {"app": "web"}}), name="db", namespace="prod",
                     labels={"app": "db"}, node="a", scheduler="default-scheduler")
    cluster = snapshot([prod, build_node("a"), other])
    (pod,) = cluster.foreign
    assert pod.key == "prod/db" and pod.labels == (("app", "db"),)
    assert pod.rules.anti_affinity[0].matcher.namespaces == ("prod",)
    assert cluster.namespace_labels == {"prod": {"env": "prod"}}
    assert cluster.rules_in_play().label_keys == frozenset({"app"})
