"""`kaisched run` against the emulator, through a kubeconfig file: it takes
the Lease, binds the pods and leaves."""
from __future__ import annotations

import socket
import time
from pathlib import Path

import yaml
from click.testing import CliRunner

from kaisched.cli import main
from kaisched.cluster.kinds import LEASE, POD
from kaisched.cluster.kube import KubeCluster
from tests.builders.wire import PATIENCE, Emulator, build_node, build_pod, kubeconfig


def test_run_takes_the_lease_and_binds(apiserver: Emulator, cluster: KubeCluster,
                                       tmp_path: Path) -> None:
    cluster.create(build_node("n1", cpu="4"))
    for i in range(2):
        cluster.create(build_pod(f"p{i}"))
    result = CliRunner().invoke(main, ["run", "--kubeconfig", str(kubeconfig(tmp_path, apiserver.url)),
                                       "--cycles", "1", "--metrics-port", "0",
                                       "--identity", "replica-1", "--lease-namespace", "default"])
    assert result.exit_code == 0, result.output + result.stderr
    assert {cluster.get(POD, "default", f"p{i}")["spec"].get("nodeName") for i in range(2)} == {"n1"}
    lease = cluster.get(LEASE, "default", "kaisched")
    assert lease is not None            # taken, then released on exit
    assert lease["spec"].get("holderIdentity") in (None, "")


def test_run_with_a_bad_kubeconfig_says_so_in_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", "--kubeconfig", str(tmp_path / "missing"),
                                       "--cycles", "1", "--metrics-port", "0"])
    assert result.exit_code == 2            # a path refused before the work starts
    assert result.stderr.strip().splitlines() == [f"error: kubeconfig {tmp_path / 'missing'} does not exist"]


def test_snapshot_dump_then_replay(apiserver: Emulator, cluster: KubeCluster,
                                   tmp_path: Path) -> None:
    cluster.create(build_node("n1", cpu="4"))
    pod = build_pod("p0")
    pod["spec"]["containers"][0].update({"image": "secret/image:1", "command": ["run"],
                                         "env": [{"name": "TOKEN", "value": "hunter2"}]})
    pod["metadata"]["annotations"] = {"team.example.com/owner": "alice"}
    cluster.create(pod)
    out = tmp_path / "snapshot.json"
    result = CliRunner().invoke(main, ["snapshot-dump", "--kubeconfig",
                                       str(kubeconfig(tmp_path, apiserver.url)),
                                       "-o", str(out), "--redact"])
    assert result.exit_code == 0, result.output + result.stderr
    text = out.read_text()
    assert "hunter2" not in text and "secret/image" not in text and "alice" not in text
    snapshot = yaml.safe_load(text)
    assert snapshot["kind"] == "Snapshot" and snapshot["config"]["schedulerName"] == "kaisched"
    assert {(o["kind"], o["metadata"]["name"]) for o in snapshot["items"]} >= {("Node", "n1"),
                                                                             ("Pod", "p0")}

    replayed = CliRunner().invoke(main, ["replay", str(out), "--output", "json"])
    assert replayed.exit_code == 0, replayed.stderr
    assert '"default/p0": "n1"' in replayed.output


def test_run_without_leader_election_binds_and_takes_no_lease(
        apiserver: Emulator, cluster: KubeCluster, tmp_path: Path) -> None:
    cluster.create(build_node("n1", cpu="4"))
    cluster.create(build_pod("p0"))
    result = CliRunner().invoke(main, ["run", "--kubeconfig", str(kubeconfig(tmp_path, apiserver.url)),
                                       "--cycles", "1", "--metrics-port", "0", "--no-leader-elect"])
    assert result.exit_code == 0, result.output + result.stderr
    assert cluster.get(POD, "default", "p0")["spec"].get("nodeName") == "n1"
    assert cluster.get(LEASE, "default", "kaisched") is None
    assert cluster.get(LEASE, "kaisched-system", "kaisched") is None


def test_sigterm_during_a_long_binder_queue_ends_the_process(
        apiserver: Emulator, cluster: KubeCluster, tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    import kmock

    from tests.builders.wire import PODS, build_podgroup

    cluster.create(build_node("n1", cpu="64"))
    for g in range(6):
        cluster.create(build_podgroup(f"g{g}", min_member=4))
        for i in range(4):
            cluster.create(build_pod(f"g{g}-{i}", group=f"g{g}"))
    binds = (kmock.resource(PODS), kmock.subresource("binding"))
    apiserver.hold("binding")
    proc = subprocess.Popen([sys.executable, "-c", "from kaisched.cli import main; main()",
                             "run", "--kubeconfig",
                             str(kubeconfig(tmp_path, apiserver.url)), "--metrics-port", "0",
                             "--lease-namespace", "default", "--binders", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + PATIENCE
        while apiserver.count(*binds) < 1:          # the first gang began binding, held
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        apiserver.release("binding")
        assert proc.wait(PATIENCE) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    bound = [p["metadata"]["name"] for p in cluster.list(POD) if p["spec"].get("nodeName")]
    assert len(bound) == 4 and len({name.split("-")[0] for name in bound}) == 1
    assert cluster.get(LEASE, "default", "kaisched")["spec"].get("holderIdentity") is None


def test_run_refuses_a_cluster_too_big_for_its_memory_in_one_line(
        apiserver: Emulator, cluster: KubeCluster, tmp_path: Path) -> None:
    """The counts come from the API server before the first lists: one line
    names what the cluster needs, the limit and the flag; nothing is bound."""
    cluster.create(build_node("n1", cpu="4"))
    for i in range(3):
        cluster.create(build_pod(f"p{i}"))
    result = CliRunner().invoke(main, ["run", "--kubeconfig", str(kubeconfig(tmp_path, apiserver.url)),
                                       "--cycles", "1", "--metrics-port", "0", "--no-leader-elect",
                                       "--memory-limit", "32Mi"])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: a cluster of 1 nodes and 3 pods needs about 50 MiB")
    assert "more than the 32 MiB of --memory-limit 32Mi" in lines[0]
    assert "--memory-limit SIZE (0: no check) to override" in lines[0]
    assert cluster.get(POD, "default", "p0")["spec"].get("nodeName") is None


def test_a_bad_config_is_said_at_once_though_the_server_does_not_answer(tmp_path: Path) -> None:
    """The first lists are asked for before the scheduler's modules load, but a
    server that takes connections and never answers (here: the memory check's
    counts) puts off the config's error by a second at most, not the client's
    timeout."""
    config = tmp_path / "scheduler.yaml"
    config.write_text("actions: [no-such-action]\n")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)       # connections complete in the backlog; nothing is read or sent
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        result = CliRunner().invoke(main, ["run", "--kubeconfig", str(kubeconfig(tmp_path, url)),
                                           "--config", str(config), "--metrics-port", "0",
                                           "--no-leader-elect", "--memory-limit", "6Gi"])
        took = time.monotonic() - started
    assert result.exit_code != 0
    assert "no-such-action" in result.stderr.strip().splitlines()[-1]
    assert took < 5.0, f"the config's error came after {took:.1f}s"
