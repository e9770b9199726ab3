"""What `kaisched snapshot-dump` writes from an API server is what an API server
accepts: replaying it skips nothing, whole or redacted."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kaisched.cli import main
from kaisched.cluster.kube import KubeCluster
from kaisched.cluster.snapshot import load_file
from kaisched.validation import partition
from tests.builders.wire import Emulator, build_node, build_pod, build_podgroup, build_queue, kubeconfig


@pytest.mark.parametrize("redact", [False, True], ids=["whole", "redacted"])
def test_a_dumped_snapshot_replays_without_skipping(apiserver: Emulator, cluster: KubeCluster,
                                                    tmp_path: Path, redact: bool) -> None:
    node = build_node("gpu-1", cpu="8")
    node["status"]["allocatable"]["nvidia.com/gpu"] = "4"
    cluster.create(node)
    cluster.create(build_queue("team-a"))
    cluster.create(build_podgroup("train", min_member=2, queue="team-a"))
    for i in range(2):
        pod = build_pod(f"train-{i}", group="train")
        pod["spec"]["containers"][0].update(
            image="trainer:1", env=[{"name": "TOKEN", "value": "x"}],
            resources={"requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                       "limits": {"nvidia.com/gpu": "1"}})
        cluster.create(pod)
    out = tmp_path / "snapshot.json"
    args = ["snapshot-dump", "--kubeconfig", str(kubeconfig(tmp_path, apiserver.url)), "-o", str(out)]
    dumped = CliRunner().invoke(main, args + (["--redact"] if redact else []))
    assert dumped.exit_code == 0, dumped.stderr

    objects = load_file(out, check_kinds=False).objects
    kept, problems = partition(objects)
    assert problems == [] and len(kept) == len(objects) >= 5
    replayed = CliRunner().invoke(main, ["replay", str(out), "--output", "json", "--strict"])
    assert replayed.exit_code == 0, replayed.stderr
    assert replayed.stderr == ""
    assert '"default/train-0": "gpu-1"' in replayed.output
