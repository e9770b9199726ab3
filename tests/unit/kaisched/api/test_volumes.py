"""Storage objects as the scheduler reads them, and the volumebinding plugin
over a snapshot: claims of a pod, classes, volumes, the smallest matching
volume, the equivalence class, redaction, and nothing registered for pods
without claims.

Under the storage model (kaisched/api/volumes.py); the last tests ask the volumebinding
plugin over a snapshot."""
from __future__ import annotations

from kaisched.api.volumes import BindingMode, ClaimInfo, PodClaim, Storage, VolumeInfo
from kaisched.cache.convert.volumes import (
    claim,
    csi_limits,
    pod_pvcs,
    provisioning_failure,
    storage_class,
    volume,
)
from kaisched.cluster.snapshot import redact
from kaisched.framework import Session
from plugins.volumebinding import VolumeBindingPlugin
from tests.builders.objects import build_node, build_pod, load_test_config, snapshot


def test_a_pods_claims_by_key_with_ephemeral_ones_named_after_the_pod() -> None:
    spec = {"volumes": [
        {"name": "cfg", "configMap": {"name": "x"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "dataset"}},
        {"name": "again", "persistentVolumeClaim": {"claimName": "dataset"}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]}
    assert pod_pvcs(spec, "ns", "p") == (PodClaim("ns/dataset"),
                                           PodClaim("ns/p-scratch", ephemeral=True))


def test_classes_claims_volumes_and_limits_read() -> None:
    cls = storage_class({"metadata": {"name": "std", "annotations": {
        "storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "ebs",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]}]})
    assert cls.default and cls.mode is BindingMode.WAIT and cls.provisions
    assert cls.allowed_topologies[0].matches({"zone": "a"}, "n") \
        and not cls.allowed_topologies[0].matches({"zone": "b"}, "n")
    c = claim({"metadata": {"name": "c", "namespace": "ns", "uid": "u",
                            "annotations": {"volume.kubernetes.io/selected-node": "n1"}},
               "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}}})
    assert (c.key, c.class_name, c.request, c.selected_node, c.bound) == ("ns/c", None, 2 * 2**30,
                                                                         "n1", False)
    assert claim({"metadata": {"name": "c"}, "spec": {"resources": {"requests": {
        "storage": "lots"}}}}).problem.startswith("spec.resources.requests.storage")
    v = volume({"metadata": {"name": "pv"}, "spec": {
        "capacity": {"storage": "5Gi"}, "storageClassName": "std", "accessModes": ["ReadWriteOnce"],
        "claimRef": {"namespace": "ns", "name": "c", "uid": "u"}, "csi": {"driver": "ebs"}}})
    assert (v.claim, v.claim_uid, v.driver, v.capacity) == ("ns/c", "u", "ebs", 5 * 2**30)
    assert csi_limits({"metadata": {"name": "n1"}, "spec": {"drivers": [
        {"name": "ebs", "allocatable": {"count": 25}}, {"name": "nfs"}]}}) == ("n1", {"ebs": 25})
    assert provisioning_failure({"reason": "ProvisioningFailed", "message": "no quota",
                                 "involvedObject": {"kind": "PersistentVolumeClaim",
                                                    "namespace": "ns", "name": "c"}}) \
        == ("ns/c", "no quota")


def test_the_smallest_volume_that_fits_comes_first_a_prebound_one_before_all() -> None:
    want = ClaimInfo("ns/c", uid="u", class_name="local", access_modes=frozenset({"ReadWriteOnce"}),
                     request=10)
    rwo = frozenset({"ReadWriteOnce"})
    volumes = {v.name: v for v in (
        VolumeInfo("big", "local", 100, rwo), VolumeInfo("small", "local", 20, rwo),
        VolumeInfo("tiny", "local", 5, rwo), VolumeInfo("other-class", "fast", 20, rwo),
        VolumeInfo("rox", "local", 20, frozenset({"ReadOnlyMany"})),
        VolumeInfo("taken", "local", 20, rwo, claim="ns/x"))}
    storage = Storage(claims={want.key: want}, volumes=volumes)
    assert [v.name for v in storage.candidates(want)] == ["small", "big"]
    volumes["mine"] = VolumeInfo("mine", "local", 500, rwo, claim="ns/c", claim_uid="u")
    assert [v.name for v in Storage(claims={want.key: want}, volumes=volumes).candidates(want)] \
        == ["mine", "small", "big"]


def test_pods_alike_but_for_their_claims_are_not_one_class() -> None:
    pods = [build_pod(f"p{i}", cpu=1) for i in range(3)]
    for pod, name in zip(pods, ("a", "b", "a"), strict=True):
        pod["spec"]["volumes"] = [{"name": "v", "persistentVolumeClaim": {"claimName": name}}]
    cluster = snapshot([build_node("n1"), *pods])
    config, registry = load_test_config()
    ssn = Session(cluster, config, registry.build_plugins(config))
    tasks = {t.name: t for j in cluster.jobs.values() for t in j.tasks.values()}
    assert ssn.class_key(tasks["p0"]) == ssn.class_key(tasks["p2"]) != ssn.class_key(tasks["p1"])


def test_nothing_is_registered_where_no_pod_mounts_a_claim() -> None:
    cluster = snapshot([build_node("n1"), build_pod("p", cpu=1)])
    config, _ = load_test_config()
    ssn = Session(cluster, config, [[VolumeBindingPlugin()]])
    assert not cluster.storage
    assert not ssn.hooks.registered()


def test_redaction_keeps_claims_and_the_selected_node() -> None:
    pod = build_pod("p")
    pod["spec"]["volumes"] = [{"name": "cfg", "secret": {"secretName": "s"}},
                              {"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]
    assert redact(pod)["spec"]["volumes"] == [{"name": "data",
                                               "persistentVolumeClaim": {"claimName": "c"}}]
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {
        "name": "c", "annotations": {"volume.kubernetes.io/selected-node": "n1", "x/y": "z"}}}
    assert redact(pvc)["metadata"]["annotations"] == {"volume.kubernetes.io/selected-node": "n1"}


def test_the_memory_backend_applies_a_watchs_field_selector() -> None:
    from kaisched.cluster.kinds import EVENT, PVC_EVENTS
    from kaisched.cluster.memory import MemoryCluster

    cluster = MemoryCluster()

    def event(kind: str, reason: str, name: str) -> dict:
        return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "ns"},
                "reason": reason, "involvedObject": {"kind": kind, "name": "x", "namespace": "ns"}}

    cluster.create(event("PersistentVolumeClaim", "ProvisioningFailed", "before"))
    cluster.create(event("Pod", "Scheduled", "other"))
    selected, everything = cluster.subscribe([PVC_EVENTS]), cluster.subscribe([EVENT])
    cluster.create(event("PersistentVolumeClaim", "ProvisioningFailed", "after"))
    cluster.create(event("PersistentVolumeClaim", "Provisioning", "normal"))
    cluster.create(event("Pod", "ProvisioningFailed", "odd"))
    assert [e.obj["metadata"]["name"] for e in selected.drain()] == ["before", "after"]
    assert len(everything.drain()) == 5


def test_a_claim_that_cannot_be_read_keeps_its_pods_waiting_saying_why() -> None:
    pod = build_pod("p")
    pod["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "bad"}}]
    broken = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
              "metadata": {"name": "bad", "namespace": "default"}, "spec": "not a mapping"}
    cluster = snapshot([build_node("n1"), broken, pod])
    assert "malformed PersistentVolumeClaim" in (cluster.storage.claims["default/bad"].problem or "")
    config, registry = load_test_config()
    ssn = Session(cluster, config, [[VolumeBindingPlugin()]])
    job = cluster.jobs[next(iter(cluster.jobs))]
    assert ssn.job_invalid(job).startswith("pod default/p: PVC default/bad: malformed")


def test_a_claim_naming_no_class_gets_the_default_one() -> None:
    from kaisched.api.volumes import StorageClassInfo
    classes = {n: StorageClassInfo(n, "p", default=d) for n, d in (("b", True), ("a", False))}
    storage = Storage(classes=classes)
    assert storage.class_of(ClaimInfo("ns/c")) == "b"
    assert storage.class_of(ClaimInfo("ns/c", class_name="")) == ""
    assert Storage().class_of(ClaimInfo("ns/c")) == ""
