"""A MemoryCluster with a PodGrouper, and builders for owners and pods.

Manifests under manifests/ are real-shaped owners and the pods their operators
create; on load every ownerReference gets the real uid of the object it names,
read back after that object was created (as on a real cluster).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from kaisched.api import labels as L
from kaisched.api.clock import ManualClock
from kaisched.cluster.kinds import EVENT, POD, PODGROUP, kind_of
from kaisched.cluster.memory import MemoryCluster
from podgrouper import PodGrouper

Obj = dict[str, Any]
MANIFESTS = Path(__file__).parent / "manifests"


def read_manifest(name: str) -> list[Obj]:
    return [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]


def owner_ref(obj: Obj) -> Obj:
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"],
            "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}


class Kit:
    def __init__(self) -> None:
        self.clock = ManualClock()
        self.cluster = MemoryCluster(self.clock)
        self.grouper = PodGrouper(self.cluster, self.clock)
        self.made: dict[tuple[str, str], Obj] = {}       # (kind, name) -> object as created

    def create(self, obj: Obj) -> Obj:
        refs = []
        for ref in obj.get("metadata", {}).get("ownerReferences") or ():
            known = self.made.get((ref.get("kind"), ref.get("name")))
            refs.append({**ref, "uid": known["metadata"]["uid"]} if known and not ref.get("uid") else ref)
        if refs:
            obj = {**obj, "metadata": {**obj["metadata"], "ownerReferences": refs}}
        made = self.cluster.create(obj)
        self.made[(made["kind"], made["metadata"]["name"])] = made
        return made

    def load(self, name: str) -> list[Obj]:
        return [self.create(doc) for doc in read_manifest(name)]

    def pod(self, name: str, owner: Obj | None = None, *, namespace: str = "default",
            labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
            scheduler: str = "kaisched", priority_class: str | None = None) -> Obj:
        meta: Obj = {"name": name, "namespace": namespace, "labels": labels or {},
                     "annotations": annotations or {}}
        if owner is not None:
            meta["ownerReferences"] = [owner_ref(owner)]
        spec: Obj = {"schedulerName": scheduler, "containers": [{"name": "c", "image": "busybox"}]}
        if priority_class:
            spec["priorityClassName"] = priority_class
        return self.create({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})

    def owner(self, api_version: str, kind: str, name: str, spec: Obj | None = None, *,
              namespace: str = "default", annotations: dict[str, str] | None = None) -> Obj:
        obj: Obj = {"apiVersion": api_version, "kind": kind,
                    "metadata": {"name": name, "namespace": namespace,
                                 "annotations": annotations or {}}}
        if spec is not None:
            obj["spec"] = spec
        return self.create(obj)

    def sync(self) -> int:
        return self.grouper.sync()

    def patch(self, obj: Obj, patch: Obj) -> Obj:
        meta = obj["metadata"]
        return self.cluster.patch(kind_of(obj), meta.get("namespace", ""), meta["name"], patch)

    def get_pod(self, name: str, namespace: str = "default") -> Obj:
        pod = self.cluster.get(POD, namespace, name)
        assert pod is not None, name
        return pod

    def podgroups(self, namespace: str | None = None) -> list[Obj]:
        return self.cluster.list(PODGROUP, namespace)

    def podgroup(self, name: str, namespace: str = "default") -> Obj:
        group = self.cluster.get(PODGROUP, namespace, name)
        assert group is not None, f"no PodGroup {namespace}/{name}; have " + ", ".join(
            g["metadata"]["name"] for g in self.podgroups())
        return group

    def group_of(self, pod_name: str, namespace: str = "default") -> str | None:
        return (self.get_pod(pod_name, namespace)["metadata"].get("annotations") or {}).get(
            L.POD_GROUP_ANNOTATION)

    def subgroup_of(self, pod_name: str, namespace: str = "default") -> str | None:
        return (self.get_pod(pod_name, namespace)["metadata"].get("labels") or {}).get(
            L.SUBGROUP_LABEL)

    def events(self, about: str | None = None) -> list[Obj]:
        return [e for e in self.cluster.list(EVENT)
                if about is None or e["involvedObject"]["name"] == about]

    def versions(self) -> dict[str, str]:
        """Every object's resourceVersion, by kind/namespace/name."""
        return {f"{k}/{'/'.join(o['metadata'].get(f) or '' for f in ('namespace', 'name'))}":
                o["metadata"]["resourceVersion"] for k in self.cluster.kinds()
                for o in self.cluster.list(k)}


def pg_name(owner: Obj) -> str:
    return f"pg-{owner['metadata']['name']}-{owner['metadata']['uid'][:8]}"


@pytest.fixture
def kit() -> Kit:
    return Kit()


@pytest.fixture
def manifest() -> Callable[[str], list[Obj]]:
    return read_manifest


@pytest.fixture
def name_of() -> Callable[[Obj], str]:
    return pg_name
