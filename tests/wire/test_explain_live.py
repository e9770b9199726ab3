"""`kaisched explain --kubeconfig` reads a live cluster (over the real client)
and explains from a copy: nothing is written to the cluster."""
from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from kaisched.cli import main
from kaisched.cluster.kinds import POD, PODGROUP
from kaisched.cluster.kube import KubeCluster
from tests.builders.wire import Emulator, build_node, build_pod, build_podgroup, build_queue, kubeconfig


def test_explain_reads_a_live_cluster_and_writes_nothing(apiserver: Emulator, cluster: KubeCluster,
                                                         tmp_path: Path) -> None:
    cluster.create(build_node("cpu-1", cpu="4"))
    cluster.create(build_queue("team-a"))
    cluster.create(build_podgroup("train", min_member=3, queue="team-a"))
    for i in range(3):
        cluster.create(build_pod(f"train-{i}", group="train", cpu="2"))
    config = str(kubeconfig(tmp_path, apiserver.url))
    result = CliRunner().invoke(main, ["explain", "default/train-0", "--kubeconfig", config])
    assert result.exit_code == 0, result.stderr
    lines = result.output.splitlines()
    assert lines[0].startswith("PodGroup default/train: minMember 3, 3 pod(s), queue team-a")
    assert lines[1].startswith("  waiting: ")
    assert "cpu-1: could hold 2 of them; cpu runs out first" in result.output
    # Only read: no pod bound, no status written on the PodGroup.
    assert all(not (p.get("spec") or {}).get("nodeName") for p in cluster.list(POD))
    assert not (cluster.get(PODGROUP, "default", "train") or {}).get("status")
