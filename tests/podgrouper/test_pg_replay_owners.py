"""Replay keeps every owner it is given: an owner of a kind neither Kubernetes
nor kaisched serves is kept when objects of the input name it as their owner
(its operator's CRD serves it on the cluster they came from), so replay groups
the pods as the PodGrouper on that cluster does: the default grouping on the
top owner, not on the owner below it."""
from __future__ import annotations

from pathlib import Path

import orjson
import yaml
from click.testing import CliRunner

from kaisched.cli import main
from kaisched.validation import partition

FLINK_UID = "4b0e1f7a-77a1-4c36-9a55-0f2d5e1c9b01"
RS_UID = "8d2c3b4a-1e0f-4a9b-8c7d-6e5f4a3b2c1d"
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}}
FLINK = {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
         "metadata": {"name": "wordcount", "namespace": "default", "uid": FLINK_UID,
                      "labels": {"kaisched.io/queue": "default"}},
         "spec": {"image": "flink:1.20", "flinkVersion": "v1_20",
                  "taskManager": {"replicas": 2, "resource": {"cpu": 1, "memory": "2048m"}}}}


def owned_by(owner: dict, uid: str) -> list[dict]:
    ref = {"apiVersion": owner["apiVersion"], "kind": owner["kind"],
           "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
           "controller": True, "blockOwnerDeletion": True}
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
          "metadata": {"name": "wordcount-taskmanager-6f7d9", "namespace": "default", "uid": uid,
                       "ownerReferences": [ref]},
          "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "wordcount"}},
                   "template": {"metadata": {"labels": {"app": "wordcount"}},
                                "spec": {"containers": [{"name": "tm", "image": "flink:1.20"}]}}}}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "wordcount-taskmanager-6f7d9-x2k4q", "namespace": "default",
                        "labels": {"app": "wordcount"},
                        "ownerReferences": [{**ref, "apiVersion": "apps/v1", "kind": "ReplicaSet",
                                             "name": rs["metadata"]["name"], "uid": uid}]},
           "spec": {"schedulerName": "kaisched",
                    "containers": [{"name": "tm", "image": "flink:1.20",
                                    "resources": {"requests": {"cpu": "1"}}}]}}
    return [rs, pod]


def test_an_owner_of_an_unknown_kind_is_kept_when_something_names_it() -> None:
    kept, problems = partition([FLINK, *owned_by(FLINK, RS_UID)])
    assert problems == [] and kept[0] is FLINK
    alone, problems = partition([FLINK])
    assert alone == [] and "neither Kubernetes" in problems[0].rule


def test_replay_groups_by_the_unknown_top_owner(tmp_path: Path) -> None:
    path = tmp_path / "flink.yaml"
    path.write_text(yaml.safe_dump_all([NODE, FLINK, *owned_by(FLINK, RS_UID)]))
    result = CliRunner().invoke(main, ["replay", str(path), "--output", "json"])
    assert result.exit_code == 0 and result.stderr == "", result.stderr
    out = orjson.loads(result.stdout)
    assert out["bindings"] == {"default/wordcount-taskmanager-6f7d9-x2k4q": "node-a"}
    assert list(out["podGroups"]) == [f"default/pg-wordcount-{FLINK_UID[:8]}"]
