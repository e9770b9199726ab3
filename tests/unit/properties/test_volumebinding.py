"""Volume binding over random clusters, session after session with the
storage controllers acting in between: a claim gets a selected node (or a
static volume its claimRef) only for a gang placed whole, where its pod
went; a pod is bound only once its claims are bound, on a node its
volumes reach; a gang is never bound in part."""
from __future__ import annotations

from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from kaisched.api.clock import ManualClock
from kaisched.api.volumes import SELECTED_NODE
from kaisched.builtins.catalog import register_builtins
from kaisched.cache.convert.volumes import claim as read_claim
from kaisched.cluster.kinds import NODE, POD, PV, PVC
from kaisched.framework import default_config
from kaisched.framework.effects import Bind, PrebindVolume, SelectClaimNode
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from kaisched.sim.provisioner import StorageControllers
from tests.builders.objects import build_node, build_pod, build_podgroup, load_cluster

ZONE = "topology.kubernetes.io/zone"
Obj = dict[str, Any]


@attrs.frozen
class Scenario:
    objects: list[Obj]
    min_member: dict[str, int]          # gang -> minMember
    gang_of: dict[str, str]             # pod key -> gang
    users: dict[str, list[str]]         # claim key -> the pods mounting it


def _pvc(name: str, cls: str, size: int, mode: str = "ReadWriteOnce") -> Obj:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"storageClassName": cls, "accessModes": [mode],
                     "resources": {"requests": {"storage": f"{size}Gi"}}}}


def _local_pv(name: str, node: str, size: int) -> Obj:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": f"{size}Gi"}, "accessModes": ["ReadWriteOnce"],
                     "storageClassName": "local", "local": {"path": f"/mnt/{name}"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In",
                          "values": [node]}]}]}}}}


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    nodes = [f"n{i}" for i in range(draw(st.integers(1, 5)))]
    objects: list[Obj] = [
        build_node(n, cpu=draw(st.integers(1, 8)),
                   labels={ZONE: draw(st.sampled_from(["z0", "z1"])), "kubernetes.io/hostname": n})
        for n in nodes]
    zones = draw(st.sets(st.sampled_from(["z0", "z1"]), min_size=1))
    objects.append({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                    "metadata": {"name": "zonal"}, "provisioner": "ebs.csi.aws.com",
                    "volumeBindingMode": "WaitForFirstConsumer",
                    "allowedTopologies": [{"matchLabelExpressions": [
                        {"key": ZONE, "values": sorted(zones)}]}]})
    objects.append({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                    "metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
                    "volumeBindingMode": "WaitForFirstConsumer"})
    for i in range(draw(st.integers(0, 6))):
        objects.append(_local_pv(f"pv{i}", draw(st.sampled_from(nodes)),
                                 draw(st.sampled_from([5, 10, 50]))))
    min_member: dict[str, int] = {}
    gang_of: dict[str, str] = {}
    users: dict[str, list[str]] = {}
    for g in range(draw(st.integers(1, 4))):
        gang = f"g{g}"
        size = draw(st.integers(1, 4))
        min_member[gang] = draw(st.integers(1, size))
        objects.append(build_podgroup(gang, min_member=min_member[gang]))
        shared = draw(st.sampled_from([None, "zonal", "local"]))    # one claim the gang shares
        if shared is not None:
            objects.append(_pvc(f"{gang}-shared", shared, 1, "ReadWriteMany"))
        for p in range(size):
            name = f"{gang}-p{p}"
            pod = build_pod(name, cpu=draw(st.integers(1, 4)), group=gang)
            claims = []
            for c in range(draw(st.integers(0, 2))):     # claims of its own
                cls = draw(st.sampled_from(["zonal", "local", "local"]))
                objects.append(_pvc(f"{name}-c{c}", cls, draw(st.sampled_from([1, 8, 20]))))
                claims.append(f"{name}-c{c}")
            if shared is not None and draw(st.booleans()):
                claims.append(f"{gang}-shared")
            pod["spec"]["volumes"] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
                                      for i, c in enumerate(claims)]
            for c in claims:
                users.setdefault(f"default/{c}", []).append(f"default/{name}")
            objects.append(pod)
            gang_of[f"default/{name}"] = gang
    return Scenario(objects, min_member, gang_of, users)


def _reach(volume: Obj | None, node: Obj) -> bool:
    """A pod on node can use the volume: its required node affinity holds there.
    Read from the objects themselves, as the API defines it (terms ORed, a term's
    expressions and fields ANDed), not through kaisched's converter and selector
    terms: those are what is under test."""
    if volume is None:
        return False
    required = (volume["spec"].get("nodeAffinity") or {}).get("required") or {}
    terms = required.get("nodeSelectorTerms")
    if not terms:
        return True                     # no affinity: every node reaches it
    labels = node["metadata"].get("labels") or {}
    fields = {"metadata.name": node["metadata"]["name"]}
    return any((term.get("matchExpressions") or term.get("matchFields"))
               and all(_holds(e, labels) for e in term.get("matchExpressions") or ())
               and all(_holds(f, fields) for f in term.get("matchFields") or ())
               for term in terms)


def _holds(requirement: Obj, labels: dict[str, str]) -> bool:
    key, op, values = requirement["key"], requirement["operator"], requirement.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op in ("Exists", "DoesNotExist"):
        return (key in labels) == (op == "Exists")
    raise AssertionError(f"the oracle does not read operator {op}")


@settings(max_examples=80, deadline=None)
@given(scenarios())
def test_volumes_follow_whole_gangs(scenario: Scenario) -> None:
    clock = ManualClock()
    cluster = load_cluster(scenario.objects, clock)
    registry = register_builtins()
    scheduler = Scheduler(cluster, default_config(registry), registry, clock,
                          Binder(cluster, clock.now))
    storage = StorageControllers(cluster)
    for _ in range(3):
        running = {f"default/{p['metadata']['name']}" for p in cluster.list(POD)
                   if (p.get("spec") or {}).get("nodeName")}
        claims_before = {f"default/{c['metadata']['name']}": read_claim(c)
                         for c in cluster.list(PVC)}
        result = scheduler.run_once()
        held = {**result.reservations, **result.placed}
        for effect in result.effects:
            if isinstance(effect, (SelectClaimNode, PrebindVolume)):
                gang = scenario.gang_of[effect.pod]
                have = sum(1 for pod, g in scenario.gang_of.items()
                           if g == gang and (pod in held or pod in running))
                assert have >= scenario.min_member[gang], (effect, have)
                assert effect.pod in result.reservations, effect
                node = cluster.get(NODE, "", result.reservations[effect.pod])
                if isinstance(effect, SelectClaimNode):
                    assert effect.node == node["metadata"]["name"]
                else:
                    assert _reach(cluster.get(PV, "", effect.volume), node), effect
        binds = [e for e in result.effects if isinstance(e, Bind)]
        for bind in binds:
            pod = cluster.get(POD, *bind.pod.split("/"))
            node = cluster.get(NODE, "", bind.node)
            for volume in (pod["spec"].get("volumes") or ()):
                if "persistentVolumeClaim" not in volume:
                    continue
                claim = claims_before[f"default/{volume['persistentVolumeClaim']['claimName']}"]
                assert claim.bound, (bind, claim)
                assert _reach(cluster.get(PV, "", claim.volume_name), node), (bind, claim)
        for gang, need in scenario.min_member.items():
            new = [b for b in binds if scenario.gang_of[b.pod] == gang]
            have = sum(1 for pod, g in scenario.gang_of.items()
                       if g == gang and (pod in running or pod in result.placed))
            assert not new or have >= need, (gang, have, need)
        # no claim is selected for a node unless its pods are held there (all of them
        # that were placed: a claim provisioned on one node pins every pod using it)
        for obj in cluster.list(PVC):
            key = f"default/{obj['metadata']['name']}"
            selected = (obj["metadata"].get("annotations") or {}).get(SELECTED_NODE)
            if selected and not claims_before[key].selected_node:
                placed = {held[p] for p in scenario.users.get(key, ()) if p in held}
                assert placed == {selected}, (key, selected, placed)
        for pod in cluster.list(POD):
            if (pod.get("spec") or {}).get("nodeName") and pod["status"].get("phase") == "Pending":
                cluster.replace({**pod, "status": {**pod["status"], "phase": "Running"}})
        storage.step(clock.now())
        clock.advance(1.0)
