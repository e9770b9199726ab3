"""`kaisched explain` on a gang that waits because it does not fit as a whole:
per node how many of its pods the node could hold and what runs out first,
then the shortfall in total, in numbers."""
from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from kaisched.cli import main
from tests.builders import SCENARIOS

GPU = "nvidia.com/gpu"


def node(name: str, gpus: int = 0, cpu: int = 32, labels: dict | None = None) -> dict:
    alloc = {"cpu": str(cpu), "memory": "256Gi", "pods": "110"}
    if gpus:
        alloc[GPU] = str(gpus)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
            "status": {"allocatable": alloc}}


def pod(name: str, gpus: int = 1, cpu: str = "1", group: str | None = None,
        node_name: str | None = None, selector: dict | None = None) -> dict:
    requests = {"cpu": cpu, **({GPU: str(gpus)} if gpus else {})}
    spec: dict = {"schedulerName": "kaisched", "containers": [
        {"name": "main", "image": "trainer", "resources": {"requests": requests, "limits": {
            k: v for k, v in requests.items() if k == GPU}}}]}
    status = {"phase": "Pending"}
    if node_name:
        spec["nodeName"], status = node_name, {"phase": "Running"}
    if selector:
        spec["nodeSelector"] = selector
    meta: dict = {"name": name, "namespace": "research"}
    if group:
        meta["annotations"] = {"kaisched.io/pod-group": group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def podgroup(name: str, min_member: int, queue: str | None = None) -> dict:
    spec: dict = {"minMember": min_member}
    if queue:
        spec["queue"] = queue
    return {"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "research"}, "spec": spec}


def explain(tmp_path: Path, objects: list[dict], key: str = "research/train") -> list[str]:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    result = CliRunner().invoke(main, ["explain", key, "--snapshot", str(path)])
    assert result.exit_code == 0, result.output + result.stderr
    return result.output.splitlines()


def busy_gpu_nodes() -> list[dict]:
    """Two 4-GPU nodes with 3 GPUs busy each, and a CPU node the gang's selector keeps out."""
    return [node("gpu-1", 4, labels={"accel": "gpu"}), node("gpu-2", 4, labels={"accel": "gpu"}),
            node("cpu-1", 0, labels={"accel": "none"}),
            *[pod(f"busy-{n}-{i}", node_name=n) for n in ("gpu-1", "gpu-2") for i in range(3)]]


def test_a_gang_that_fits_pod_by_pod_but_not_as_a_whole(tmp_path: Path) -> None:
    lines = explain(tmp_path, [
        *busy_gpu_nodes(), podgroup("train", 4),
        *[pod(f"train-{i}", group="train", selector={"accel": "gpu"}) for i in range(4)]])
    gang = lines.index("  the gang as the scheduler tried it: 4 pod(s) to place together "
                       "(minMember 4, 0 placed already)")
    assert lines[gang + 1:gang + 6] == [
        "    cpu-1: could hold none: node didn't match node selector/affinity",
        "    gpu-1: could hold 1 of them; nvidia.com/gpu runs out first (1 free, 1 per pod: 0 left)",
        "    gpu-2: could hold 1 of them; nvidia.com/gpu runs out first (1 free, 1 per pod: 0 left)",
        "  in total: the nodes could hold 2 of the 4 pods: 2 short",
        "    needs 4 nvidia.com/gpu on 2 nodes holding 1 each: 2 short",
    ]
    # Each pod alone fits: said so, no longer a bare "fits" that contradicts the wait.
    assert "    gpu-1: fits on its own" in lines
    assert "    gpu-1: fits" not in lines


def test_one_node_short(tmp_path: Path) -> None:
    lines = explain(tmp_path, [
        node("gpu-1", 4), *[pod(f"busy-{i}", node_name="gpu-1") for i in range(3)],
        podgroup("train", 4), *[pod(f"train-{i}", group="train") for i in range(4)]])
    assert "    needs 4 nvidia.com/gpu on 1 node holding 1: 3 short" in lines


def test_room_in_total_but_split_over_nodes(tmp_path: Path) -> None:
    """Two 2-GPU pods and four nodes with one free GPU each: 4 GPUs free, none
    of them where a pod could use it."""
    lines = explain(tmp_path, [
        *[node(f"gpu-{n}", 2) for n in range(4)],
        *[pod(f"busy-{n}", node_name=f"gpu-{n}") for n in range(4)],
        podgroup("train", 2), *[pod(f"train-{i}", gpus=2, group="train") for i in range(2)]])
    assert "    gpu-0: could hold none of them; nvidia.com/gpu runs out first (1 free, 2 per pod)" in lines
    assert "  in total: the nodes could hold 0 of the 2 pods: 2 short" in lines
    assert "    enough room in total, but split: no node has room left for the next pod" in lines


def test_only_the_missing_part_of_the_gang_counts(tmp_path: Path) -> None:
    """An elastic gang with 2 of minMember 3 running needs 1 more, not all its pending pods."""
    lines = explain(tmp_path, [
        node("gpu-1", 2),
        podgroup("train", 3),
        pod("train-0", group="train", node_name="gpu-1"), pod("train-1", group="train", node_name="gpu-1"),
        *[pod(f"train-{i}", group="train") for i in range(2, 5)]])
    assert ("  the gang as the scheduler tried it: 1 pod(s) to place together "
            "(minMember 3, 2 placed already)") in lines
    assert "    needs 1 nvidia.com/gpu on 1 node holding 0: 1 short" in lines


def test_a_gang_held_back_by_its_queue_not_by_room(tmp_path: Path) -> None:
    queue = {"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "Queue",
             "metadata": {"name": "small"}, "spec": {"resources": {GPU: {"limit": 1}}}}
    lines = explain(tmp_path, [node("gpu-1", 8), queue, podgroup("train", 2, queue="small"),
                               *[pod(f"train-{i}", group="train") for i in range(2)]])
    assert any("queue small at limit for nvidia.com/gpu" in line for line in lines)
    assert ("  in total: the nodes could hold all 2 pods; room on the nodes is not what it "
            "waits for") in lines


def test_many_nodes_are_counted_by_reason(tmp_path: Path) -> None:
    nodes = [node(f"gpu-{n:02d}", 1) for n in range(30)]
    lines = explain(tmp_path, [*nodes, podgroup("train", 40),
                               *[pod(f"train-{i}", group="train") for i in range(40)]])
    assert ("    30 node(s): could hold all 1 of them (e.g. gpu-00, gpu-01, gpu-02)") not in lines
    assert any(line.startswith("    30 node(s): could hold 1 of them; nvidia.com/gpu runs out first")
               for line in lines)
    assert "    needs 40 nvidia.com/gpu on 30 nodes holding 1 each: 10 short" in lines


def test_a_gang_that_can_be_placed_gets_no_gang_section(tmp_path: Path) -> None:
    lines = explain(tmp_path, [node("gpu-1", 4), podgroup("train", 2),
                               *[pod(f"train-{i}", group="train") for i in range(2)]])
    assert not any("the gang as the scheduler tried it" in line for line in lines)
    assert "  schedulable now: 2 pod(s) would bind" in lines


def test_explain_names_the_short_subtree_of_a_subgroup_tree() -> None:
    """A two-level subgroup tree that does not fit: explain says which subtree
    is short, in numbers (text and JSON alike)."""
    scenario = SCENARIOS / "subgroups-tree-short.yaml"
    result = CliRunner().invoke(main, ["explain", "default/serve", "--snapshot", str(scenario)])
    assert result.exit_code == 0, result.output
    assert ("subgroups: the PodGroup needs all of its 2 subgroups met, has 0: [decode needs all "
            "of its 2 subgroups met, has 0: [decode-leader 0/1, decode-workers 0/2], prefill "
            "needs all of its 2 subgroups met, has 0: [prefill-leader 0/1, prefill-workers 0/2]]"
            ) in result.output
    data = CliRunner().invoke(main, ["explain", "default/serve", "--snapshot", str(scenario),
                                     "--output", "json"])
    assert "prefill-workers 0/2" in json.loads(data.output)["gang"]["subgroups"]
