"""The storage controllers a simulated cluster has no other way to get: the
ephemeral volume controller, a dynamic provisioner and the PV controller's
binding.

- Ephemeral volume controller: a pod's ephemeral volume gets its claim
  `<pod>-<volume>`, owned by the pod, and loses it with the pod (and a
  volume provisioned for it, reclaim policy Delete).

- Provisioner: a claim of a class that provisions (any provisioner but
  kubernetes.io/no-provisioner) gets a volume once its selected node is set
  (WaitForFirstConsumer) or at once (Immediate), after the class's delay.
  The volume sits in the selected node's topology: the node's values of the
  class's allowedTopologies keys, else its hostname (a node-local volume).
- PV controller: a volume whose claimRef names an unbound claim binds it;
  an unbound Immediate claim with no provisioner binds the smallest static
  volume that fits.

A class tells the simulation how its provisioner behaves with annotations:
`kaisched.io/sim-provisioning-delay` (a duration, default 0s) and
`kaisched.io/sim-provisioning-failure` (a message: every attempt fails with a
ProvisioningFailed Event on the claim, as a real provisioner reports it).
"""
from __future__ import annotations

from typing import Any

from kaisched.api.constraints import HOSTNAME_KEY
from kaisched.api.quantity import parse_duration
from kaisched.api.volumes import BindingMode, Storage
from kaisched.cache.convert.volumes import PROVISIONING_FAILED, storage_class
from kaisched.cache.convert.volumes import claim as read_claim
from kaisched.cache.convert.volumes import volume as read_volume
from kaisched.cluster.events import event_object, object_reference
from kaisched.cluster.kinds import NODE, POD, PV, PVC, STORAGE_CLASS
from kaisched.cluster.memory import MemoryCluster
from kaisched.sim.specs import StorageClassSpec

DELAY_ANNOTATION = "kaisched.io/sim-provisioning-delay"
FAILURE_ANNOTATION = "kaisched.io/sim-provisioning-failure"
COMPONENT = "kaisched-sim-provisioner"

Obj = dict[str, Any]


class StorageControllers:
    def __init__(self, cluster: MemoryCluster) -> None:
        self.cluster = cluster
        self.asked: dict[str, float] = {}      # claim key -> when provisioning was asked for
        self.failed: set[str] = set()          # claims told of a failure (told once)
        self.waited: dict[str, float] = {}     # claim key -> seconds from asked to bound

    def step(self, now: float) -> int:
        """Make, provision and bind what is due; how many claims were bound.
        Nothing to do (and nothing read) in a cluster with no StorageClass."""
        if not self.cluster.list(STORAGE_CLASS):
            return 0
        self._ephemeral()
        self._provision(now)
        return self._bind(now)

    def next_event(self, now: float) -> float | None:
        """When a provisioning now delayed comes due (for a simulation that
        skips quiet ticks), else None."""
        classes = {c["metadata"]["name"]: c for c in self.cluster.list(STORAGE_CLASS)}
        due = []
        for obj in self.cluster.list(PVC):
            claim = read_claim(obj)
            raw = classes.get(claim.class_name or "")
            if claim.bound or raw is None or claim.key not in self.asked:
                continue
            notes = (raw.get("metadata") or {}).get("annotations") or {}
            if notes.get(FAILURE_ANNOTATION):
                continue
            at = self.asked[claim.key] + parse_duration(notes.get(DELAY_ANNOTATION) or "0s")
            if at > now:
                due.append(at)
        return min(due, default=None)

    def _ephemeral(self) -> None:
        pods = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p
                for p in self.cluster.list(POD)}
        claims = {f"{c['metadata']['namespace']}/{c['metadata']['name']}": c
                  for c in self.cluster.list(PVC)}
        for pod in pods.values():
            for vol in (pod.get("spec") or {}).get("volumes") or ():
                template = (vol.get("ephemeral") or {}).get("volumeClaimTemplate")
                name = f"{pod['metadata']['name']}-{vol.get('name', '')}"
                if template is None or f"{pod['metadata']['namespace']}/{name}" in claims:
                    continue
                owner = {"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"],
                         "uid": pod["metadata"].get("uid", ""), "controller": True}
                self.cluster.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                     "metadata": {"name": name,
                                                  "namespace": pod["metadata"]["namespace"],
                                                  "ownerReferences": [owner]},
                                     "spec": dict(template.get("spec") or {})})
        for claim in claims.values():
            owners = claim["metadata"].get("ownerReferences") or ()
            owner_pod = next((o for o in owners if o.get("kind") == "Pod"), None)
            if owner_pod is None or f"{claim['metadata']['namespace']}/{owner_pod['name']}" in pods:
                continue
            self.cluster.delete(PVC, claim["metadata"]["namespace"], claim["metadata"]["name"])
            volume = (claim.get("spec") or {}).get("volumeName")
            if volume and self.cluster.get(PV, "", volume) is not None:
                self.cluster.delete(PV, "", volume)

    def _provision(self, now: float) -> None:
        classes = {obj["metadata"]["name"]: obj for obj in self.cluster.list(STORAGE_CLASS)}
        volumes = {obj["metadata"]["name"] for obj in self.cluster.list(PV)}
        for obj in self.cluster.list(PVC):
            claim = read_claim(obj)
            raw_class = classes.get(claim.class_name or "")
            if claim.bound or claim.deleting or raw_class is None:
                continue
            cls = storage_class(raw_class)
            if not cls.provisions or (cls.mode is BindingMode.WAIT and claim.selected_node is None):
                continue
            asked = self.asked.setdefault(claim.key, now)
            notes = (raw_class.get("metadata") or {}).get("annotations") or {}
            failure = notes.get(FAILURE_ANNOTATION)
            if failure:
                if claim.key not in self.failed:
                    self.failed.add(claim.key)
                    ref = object_reference({**obj, "kind": "PersistentVolumeClaim"})
                    self.cluster.create(event_object(ref, "Warning", PROVISIONING_FAILED,
                                                     str(failure), COMPONENT, now))
                continue
            if now - asked < parse_duration(notes.get(DELAY_ANNOTATION) or "0s"):
                continue
            name = f"pvc-{claim.uid or claim.key.replace('/', '-')}"
            if name in volumes:
                continue
            affinity = self._topology(claim.selected_node, cls.allowed_topologies)
            meta = obj["metadata"]
            spec: Obj = {
                "capacity": {"storage": str(claim.request)},
                "accessModes": sorted(claim.access_modes),
                "volumeMode": claim.volume_mode,
                "storageClassName": cls.name,
                "persistentVolumeReclaimPolicy": "Delete",
                "csi": {"driver": cls.provisioner, "volumeHandle": name},
                "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                             "namespace": meta["namespace"], "name": meta["name"],
                             "uid": claim.uid},
            }
            if affinity:
                spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
                    {"matchExpressions": affinity}]}}
            self.cluster.create({"apiVersion": "v1", "kind": "PersistentVolume",
                                 "metadata": {"name": name,
                                              "annotations": {"pv.kubernetes.io/provisioned-by":
                                                              cls.provisioner}},
                                 "spec": spec})
            volumes.add(name)

    def _topology(self, node_name: str | None, allowed: tuple) -> list[Obj]:
        """The selected node's place, as the volume's required node affinity."""
        if node_name is None:
            return []
        node = self.cluster.get(NODE, "", node_name)
        labels = ((node or {}).get("metadata") or {}).get("labels") or {}
        keys = sorted({r.key for term in allowed for r in term.expressions}) or [HOSTNAME_KEY]
        out = []
        for key in keys:
            value = labels.get(key) or (node_name if key == HOSTNAME_KEY else None)
            if value is not None:
                out.append({"key": key, "operator": "In", "values": [value]})
        return out

    def _bind(self, now: float) -> int:
        claims = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o
                  for o in self.cluster.list(PVC)}
        bound = 0
        for obj in self.cluster.list(PV):
            vol = read_volume(obj)
            if vol.claim is None or vol.phase == "Bound":
                continue
            raw = claims.get(vol.claim)
            if raw is None or read_claim(raw).bound:
                continue
            self._bind_pair(raw, obj, now)
            bound += 1
        classes = {c["metadata"]["name"]: storage_class(c) for c in self.cluster.list(STORAGE_CLASS)}
        for key, raw in claims.items():
            claim = read_claim(raw)
            if claim.bound or claim.selected_node is not None:
                continue
            cls = classes.get(claim.class_name or "")
            if cls is not None and (cls.mode is BindingMode.WAIT or cls.provisions):
                continue        # the scheduler picks, or the provisioner makes one
            volumes = {v.name: v for v in map(read_volume, self.cluster.list(PV))}
            free = Storage(claims={key: claim}, volumes=volumes).candidates(claim)
            if free:
                self._bind_pair(raw, self.cluster.get(PV, "", free[0].name), now)  # type: ignore[arg-type]  # just listed
                bound += 1
        return bound

    def _bind_pair(self, claim: Obj, volume: Obj, now: float) -> None:
        meta = claim["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        ref = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": meta["namespace"],
               "name": meta["name"], "uid": meta.get("uid", "")}
        self.cluster.replace({**volume, "spec": {**volume["spec"], "claimRef": ref},
                              "status": {"phase": "Bound"}})
        spec = {**(claim.get("spec") or {}), "volumeName": volume["metadata"]["name"]}
        status = {**(claim.get("status") or {}), "phase": "Bound",
                  "capacity": (volume.get("spec") or {}).get("capacity") or {},
                  "accessModes": (volume.get("spec") or {}).get("accessModes") or []}
        annotations = {**(meta.get("annotations") or {}), "pv.kubernetes.io/bind-completed": "yes"}
        self.cluster.replace({**claim, "metadata": {**meta, "annotations": annotations},
                              "spec": spec, "status": status})
        self.waited[key] = now - self.asked.get(key, now)


def storage_class_object(spec: StorageClassSpec) -> Obj:
    """A scenario's StorageClass, with how the simulated provisioner behaves."""
    notes = {DELAY_ANNOTATION: f"{spec.provisioning_delay:g}s"}
    if spec.failure:
        notes[FAILURE_ANNOTATION] = spec.failure
    obj: Obj = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": spec.name, "annotations": notes},
                "provisioner": spec.provisioner, "volumeBindingMode": spec.binding_mode}
    if spec.allowed_topologies:
        obj["allowedTopologies"] = [{"matchLabelExpressions": [
            {"key": k, "values": list(v)} for k, v in spec.allowed_topologies]}]
    return obj
