"""`kaisched explain` finds the PodGroup from a pod or a workload as well, says
what the production Scheduler's cycle wrote (so it cannot disagree with a
decision), and reads a live cluster with --kubeconfig as well as a snapshot."""
from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import yaml
from click.testing import CliRunner

from kaisched.cli import main
from tests.builders import ROOT

GANG = ROOT / "config" / "examples" / "gang.yaml"
GPU = "nvidia.com/gpu"
UID = "6f1c2a4e-0000-4000-8000-000000000001"


def node(name: str, gpus: int) -> dict:
    alloc = {"cpu": "32", "memory": "256Gi", "pods": "110", GPU: str(gpus)}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}},
            "status": {"allocatable": alloc}}


def pytorchjob_cluster() -> list[dict]:
    """A PyTorchJob of two 4-GPU pods on a cluster with 6 GPUs: it waits."""
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
           "metadata": {"name": "bert", "namespace": "research", "uid": UID},
           "spec": {"pytorchReplicaSpecs": {
               "Master": {"replicas": 1, "template": {"spec": {"containers": [
                   {"name": "pytorch", "image": "trainer"}]}}},
               "Worker": {"replicas": 1, "template": {"spec": {"containers": [
                   {"name": "pytorch", "image": "trainer"}]}}}}}}
    owner = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "bert", "uid": UID,
             "controller": True, "blockOwnerDeletion": True}
    pods = []
    for role in ("master", "worker"):
        requests = {"cpu": "1", GPU: "4"}
        pods.append({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": f"bert-{role}-0", "namespace": "research",
                                  "labels": {"training.kubeflow.org/replica-type": role},
                                  "ownerReferences": [owner]},
                     "spec": {"schedulerName": "kaisched", "containers": [
                         {"name": "pytorch", "image": "trainer",
                          "resources": {"requests": requests, "limits": {GPU: "4"}}}]},
                     "status": {"phase": "Pending"}})
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}},
            node("gpu-1", 4), node("gpu-2", 2), job, *pods]


def run(*args: str) -> list[str]:
    result = CliRunner().invoke(main, ["explain", *args])
    assert result.exit_code == 0, result.output + result.stderr
    return result.output.splitlines()


def test_a_pod_name_explains_its_podgroup() -> None:
    by_group = run("research/llm", "--snapshot", str(GANG))
    by_pod = run("research/llm-1", "--snapshot", str(GANG))
    assert by_pod[0] == by_group[0] + " (the PodGroup of research/llm-1)"
    assert by_pod[1:] == by_group[1:]


def test_a_workload_explains_the_podgroup_made_for_it(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(pytorchjob_cluster()))
    for name in ("pytorchjob/bert", "research/PyTorchJob/bert"):
        lines = run(name, "--snapshot", str(path))
        assert lines[0].startswith("PodGroup research/pg-bert-6f1c2a4e: minMember 2")
        assert lines[0].endswith(f"(the PodGroup of {name})")
        assert lines[1].startswith("  waiting: ")
    missing = CliRunner().invoke(main, ["explain", "tfjob/bert", "--snapshot", str(path)])
    assert missing.exit_code != 0
    assert missing.stderr.strip().splitlines() == [
        "error: no PodGroup, pod or workload tfjob/bert (a workload is KIND/NAME, e.g. "
        "pytorchjob/bert); did you mean pytorchjob/bert?"]


def test_the_explanation_is_the_condition_the_cycle_wrote() -> None:
    """The waiting reason is the PodGroup condition replay (the same cycle) reports."""
    replayed = CliRunner().invoke(main, ["replay", str(GANG), "--output", "json"])
    cond = next(c for c in orjson.loads(replayed.output)["podGroups"]["research/llm"]["conditions"]
                if c["type"] == "Scheduled")
    assert run("research/llm", "--snapshot", str(GANG))[1] == f"  waiting: {cond['message']}"


def test_the_cluster_is_given_once() -> None:
    for args in ([], ["--snapshot", str(GANG), "--kubeconfig", "x"]):
        result = CliRunner().invoke(main, ["explain", "research/llm", *args])
        assert result.exit_code != 0
        assert "--snapshot FILE or --kubeconfig PATH" in result.stderr


def test_a_near_miss_gets_did_you_mean_the_workload_first(tmp_path: Path) -> None:
    """`research/big-pretrain` names the PyTorchJob as if it were a PodGroup or a pod: the
    workload form comes first, then the closest PodGroup and pod names."""
    now = tmp_path / "now.json"
    dumped = CliRunner().invoke(main, ["simulate", "starvation", "--until", "20m",
                                       "--dump-snapshot", str(now), "--output", "json"])
    assert dumped.exit_code == 0, dumped.stderr
    missing = CliRunner().invoke(main, ["explain", "research/big-pretrain", "--snapshot", str(now)])
    assert missing.exit_code == 1
    (line,) = missing.stderr.splitlines()
    assert line.startswith("error: no PodGroup, pod or workload research/big-pretrain")
    assert "; did you mean pytorchjob/big-pretrain or research/big-pretrain-" in line
    typo = CliRunner().invoke(main, ["explain", "research/lm", "--snapshot", str(GANG)])
    assert typo.stderr.strip().endswith("did you mean research/llm or research/llm-1 or research/llm-0?")
    nothing = CliRunner().invoke(main, ["explain", "zzz/qqq", "--snapshot", str(GANG)])
    assert "did you mean" not in nothing.stderr


@pytest.mark.parametrize("name,group", [("research/llm", "research/llm"),
                                        ("research/bert", "research/bert"),
                                        ("research/llm-1", "research/llm")])
def test_json_says_what_the_text_says(name: str, group: str) -> None:
    """The fields and the text come from the same cycle: the same PodGroup, queue and pods,
    and per node the same answer (fits, or refused by a filter)."""
    text = CliRunner().invoke(main, ["explain", name, "--snapshot", str(GANG)])
    data = CliRunner().invoke(main, ["explain", name, "--snapshot", str(GANG), "--output", "json"])
    assert text.exit_code == data.exit_code == 0, text.stderr + data.stderr
    parsed = orjson.loads(data.stdout)
    assert parsed["name"] == name and parsed["podGroup"] == group
    assert text.stdout.startswith(f"PodGroup {group}: minMember {parsed['gang']['minMember']}, "
                                  f"{parsed['gang']['pods']} pod(s), queue {parsed['queue']}")
    sections = text.stdout.split("\n  pod ")[1:]
    assert len(sections) == len(parsed["pods"])
    for pod, section in zip(parsed["pods"], sections, strict=True):
        assert section.startswith(f"{pod['pod']}: ")
        shown = dict(line.strip().split(": ", 1) for line in section.splitlines()[1:])
        assert set(shown) == {n["node"] for n in pod["nodes"] or ()}
        for node in pod["nodes"] or ():
            assert shown[node["node"]].startswith("fits") == node["fits"], shown


def test_explain_takes_a_kube_version() -> None:
    old = CliRunner().invoke(main, ["explain", "research/llm", "--snapshot", str(GANG),
                                    "--kube-version", "1.32"])
    assert old.exit_code == 0, old.stderr
    bad = CliRunner().invoke(main, ["explain", "research/llm", "--snapshot", str(GANG),
                                    "--kube-version", "0.1"])
    assert bad.exit_code == 2 and bad.stderr.startswith("error: ")


def test_gangs_of_the_workload_api_are_explained_by_their_key_or_a_pod() -> None:
    """A 1.35 Workload's gang has no object of its own: it is named by its key
    (Workload:podGroup[replica]) or by one of its pods, and explained in the
    session's words; a 1.37 PodGroup's by the condition the cycle wrote."""
    scenarios = ROOT / "tests" / "scenarios"
    for name in ("default/training:train[r0]", "default/train-r0-1"):
        result = CliRunner().invoke(main, ["explain", name, "--kube-version", "1.35", "--snapshot",
                                           str(scenarios / "upstream-gang.yaml")])
        assert result.exit_code == 0, result.output
        assert result.output.startswith("PodGroup default/training:train[r0]: minMember 2")
        assert "waiting: 1/2 tasks placed, minMember 2" in result.output
    result = CliRunner().invoke(main, ["explain", "default/big", "--kube-version", "1.37",
                                       "--snapshot", str(scenarios / "upstream-gang-v1beta1.yaml")])
    assert result.exit_code == 0, result.output
    assert "waiting: 1/2 tasks placed, minMember 2" in result.output
