"""The bench scenarios build what they claim (at a tiny scale; the figures
themselves are measured with `kaisched bench`, never in tests)."""
from __future__ import annotations

from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from click.testing import CliRunner

from kaisched.api.clock import ManualClock
from kaisched.api.constraints import HOSTNAME_KEY
from kaisched.api.quantity import parse_quantity
from kaisched.bench import scale10k as bench_scale
from kaisched.bench.scenarios import SCENARIOS
from kaisched.builtins.catalog import register_builtins
from kaisched.cli import main
from kaisched.cluster.kinds import POD, PODGROUP
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework.config import default_config
from kaisched.framework.effects import SetPodGroupStatus
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler

Obj = dict[str, Any]
GPU = "nvidia.com/gpu"
SCALE = 0.01


def requests(pod: Obj) -> dict[str, Decimal]:
    total: dict[str, Decimal] = defaultdict(Decimal)
    for c in pod["spec"]["containers"]:
        for res, qty in ((c.get("resources") or {}).get("requests") or {}).items():
            total[res] += parse_quantity(qty)
    return total


def gang_of(pod: Obj) -> str | None:
    return ((pod["metadata"].get("annotations") or {}).get("kaisched.io/pod-group"))


@pytest.fixture(scope="module")
def scale_10k() -> tuple[list[Obj], list[Obj]]:
    return bench_scale.scale_10k(SCALE)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_running_pods_fit_their_nodes(name: str) -> None:
    nodes, others = SCENARIOS[name](SCALE)
    allocatable = {n["metadata"]["name"]: n["status"]["allocatable"] for n in nodes}
    used: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for pod in (o for o in others if o["kind"] == "Pod" and o["spec"].get("nodeName")):
        node = pod["spec"]["nodeName"]
        assert node in allocatable, f"{pod['metadata']['name']} runs on unknown node {node}"
        for res, qty in requests(pod).items():
            used[node][res] += qty
        used[node]["pods"] += 1
    for node, amounts in used.items():
        for res, qty in amounts.items():
            assert qty <= parse_quantity(allocatable[node].get(res, "0")), (node, res, qty)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_gang_has_its_podgroup_with_room_for_its_minimum(name: str) -> None:
    _, others = SCENARIOS[name](SCALE)
    groups = {o["metadata"]["name"]: o["spec"]["minMember"]
              for o in others if o["kind"] == "PodGroup"}
    members = Counter(gang_of(o) for o in others if o["kind"] == "Pod" and gang_of(o))
    assert set(members) == set(groups)
    assert all(members[g] >= groups[g] for g in groups)


def test_scale_10k_counts(scale_10k: tuple[list[Obj], list[Obj]]) -> None:
    nodes, others = scale_10k
    pools = Counter(n["metadata"]["labels"][bench_scale.POOL] for n in nodes)
    assert pools == {"cpu": 80, "gpu": 20}
    pods = [o for o in others if o["kind"] == "Pod"]
    running = [p for p in pods if p["spec"].get("nodeName")]
    assert (len(pods), len(running)) == (3000, 2900)
    assert all(p["status"]["phase"] == ("Running" if p["spec"].get("nodeName") else "Pending")
               for p in pods)
    # one default-scheduler DaemonSet pod per node, the rest ours
    foreign = Counter(p["spec"]["nodeName"] for p in pods
                      if p["spec"]["schedulerName"] != "kaisched")
    assert foreign == {n["metadata"]["name"]: 1 for n in nodes}


def test_scale_10k_nodes_carry_topology_labels(scale_10k: tuple[list[Obj], list[Obj]]) -> None:
    nodes, _ = scale_10k
    for n in nodes:
        labels = n["metadata"]["labels"]
        assert labels[HOSTNAME_KEY] == n["metadata"]["name"]
        assert labels[bench_scale.ZONE].startswith("zone-")
        assert labels[bench_scale.RACK].startswith("rack-")
        gpu = GPU in n["status"]["allocatable"]
        assert gpu == (labels[bench_scale.POOL] == "gpu") == bool(n["spec"].get("taints"))
    assert len({n["metadata"]["labels"][bench_scale.RACK] for n in nodes}) == 3


def test_scale_10k_gangs(scale_10k: tuple[list[Obj], list[Obj]]) -> None:
    nodes, others = scale_10k
    groups = {o["metadata"]["name"]: o for o in others if o["kind"] == "PodGroup"}
    members: dict[str, list[Obj]] = defaultdict(list)
    for pod in others:
        if pod["kind"] == "Pod" and gang_of(pod):
            members[gang_of(pod)].append(pod)       # type: ignore[index]
    queues = {o["metadata"]["name"] for o in others if o["kind"] == "Queue"}
    gpu_nodes = {n["metadata"]["name"] for n in nodes if GPU in n["status"]["allocatable"]}
    for name, group in groups.items():
        pods = members[name]
        assert 1 <= group["spec"]["minMember"] == len(pods) <= 64, name
        assert group["spec"]["queue"] in queues
        # a gang runs whole or waits whole
        assert len({bool(p["spec"].get("nodeName")) for p in pods}) == 1, name
        for pod in pods:
            gpus = requests(pod).get(GPU, Decimal(0))
            assert gpus in (0, 1), pod["metadata"]["name"]
            if pod["spec"].get("nodeName"):
                assert (pod["spec"]["nodeName"] in gpu_nodes) == (gpus == 1)
    pending = [g for g in groups if g.startswith("wait-")]
    assert sum(len(members[g]) for g in pending) == 100
    kinds = {bool(requests(members[g][0]).get(GPU)) for g in pending}
    assert kinds == {True, False}, "pending gangs of both pools"


def test_scale_10k_is_deterministic(scale_10k: tuple[list[Obj], list[Obj]]) -> None:
    assert bench_scale.scale_10k(SCALE) == scale_10k


def test_scale_10k_churn_step_replaces_finished_gangs_with_as_many_pending_pods(
        scale_10k: tuple[list[Obj], list[Obj]]) -> None:
    cluster = MemoryCluster(ManualClock())
    for obj in [*scale_10k[0], *scale_10k[1]]:
        cluster.create(obj)
    before = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in cluster.list(POD)}
    bench_scale.churn_step(cluster, SCALE)
    after = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in cluster.list(POD)}
    gone, new = before - after, after - before
    assert gone and len(gone) == len(new)
    assert all(name.startswith("run-") for _, name in gone)
    assert all(name.startswith("new-") for _, name in new)
    # whole gangs finished: none of a finished gang's pods or its PodGroup is left
    finished = {name.rsplit("-", 1)[0] for _, name in gone}
    groups = {g["metadata"]["name"] for g in cluster.list(PODGROUP)}
    assert not finished & groups
    assert not any(name.rsplit("-", 1)[0] in finished for _, name in after)


def test_scale_10k_running_gangs_carry_the_status_a_leader_wrote(
        scale_10k: tuple[list[Obj], list[Obj]]) -> None:
    # A scheduler restarted against the cluster has nothing to write for a gang
    # that runs whole: its first cycle writes the pending gangs' statuses only,
    # so the measured cycle after it is a steady one, not one that looks again
    # at every gang it has just written.
    clock = ManualClock()
    cluster = MemoryCluster(clock)
    for obj in [*scale_10k[0], *scale_10k[1]]:
        cluster.create(obj)
    registry = register_builtins()
    config = default_config(registry)
    scheduler = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now))
    written = {e.job.split("/", 1)[1] for e in scheduler.run_once().effects
               if isinstance(e, SetPodGroupStatus)}
    assert written and all(name.startswith("wait-") for name in written), sorted(written)[:5]


def test_scale_10k_bench_reports_the_first_cycle() -> None:
    result = CliRunner().invoke(main, ["bench", "scale-10k", "--scale", str(SCALE)])
    assert result.exit_code == 0, result.output
    figures = orjson.loads(result.output)
    assert (figures["nodes"], figures["pods"]) == (100, 3000)
    assert figures["first_cycle_seconds"] > 0
    # the measured cycle is the one after the churn step: the arrivals are placed
    assert figures["placed"] > 0 and figures["evicted"] == 0


def test_evict_50k_bench_measures_a_cycle_that_reclaims_and_preempts() -> None:
    """After the steady cycle a new queue's gang reclaims on one full GPU
    rack and a team-0 gang at a higher priority preempts on another: both
    are pipelined onto room their victims free (1,000 nodes here)."""
    result = CliRunner().invoke(main, ["bench", "evict-50k", "--scale", str(SCALE * 2)])
    assert result.exit_code == 0, result.output
    figures = orjson.loads(result.output)
    assert (figures["nodes"], figures["pods"]) == (1000, 30000)
    assert figures["placed"] == 8
    assert figures["reclaimed"] > 0 and figures["preempted"] > 0
    assert figures["evicted"] == figures["reclaimed"] + figures["preempted"]
    assert figures["first_cycle_seconds"] > 0


def test_bench_profile_names_where_the_measured_cycle_went() -> None:
    # 30 entries: by own time the first few may all be numpy's or the
    # interpreter's on a busy machine; among 30 the scheduler's own show.
    result = CliRunner().invoke(main, ["bench", "churn", "--scale", "0.01", "--profile", "30"])
    assert result.exit_code == 0, result.output
    figures = orjson.loads(result.output)
    assert len(figures["profile"]) == 30
    seconds = [float(line.split(" s ", 1)[0]) for line in figures["profile"]]
    assert seconds == sorted(seconds, reverse=True)       # by own time, most first
    assert any("kaisched/" in line for line in figures["profile"])


def test_bench_profile_is_refused_where_there_is_no_cycle_to_profile() -> None:
    result = CliRunner().invoke(main, ["bench", "binds", "--profile", "3"])
    assert result.exit_code == 2
    assert "--profile" in result.output


def test_volumes_bench_places_every_pod_where_a_volume_of_its_own_is() -> None:
    result = CliRunner().invoke(main, ["bench", "volumes-5k", "--scale", str(SCALE * 4)])
    assert result.exit_code == 0, result.output
    figures = orjson.loads(result.stdout)
    assert figures["placed"] == figures["pods"] == 320 and figures["nodes"] == 200


def test_consolidation_bench_moves_pods_to_place_the_gang() -> None:
    """Its gang fits only once pods move: the measured cycle plans the moves
    (one 2-GPU pod per node the gang takes) and pipelines the gang."""
    result = CliRunner().invoke(main, ["bench", "consolidation-1k", "--scale", str(SCALE)])
    assert result.exit_code == 0, result.output
    figures = orjson.loads(result.stdout)
    assert figures["nodes"] == 16 and figures["evicted"] == 8
    assert figures["placed"] == 16          # the gang's 8 pods and the 8 moved pods, pipelined


def test_autoscale_bench_asks_for_every_gang_then_places_the_oldest_on_their_nodes() -> None:
    """No node has 8 GPUs free: every gang is asked for; then half of the nodes bought
    come up, held for the gangs oldest first, and the older half start whole on them."""
    result = CliRunner().invoke(main, ["bench", "autoscale-50k", "--scale", "0.02"])
    assert result.exit_code == 0, result.output
    figures = orjson.loads(result.stdout)
    assert figures["nodes"] == 1000 and figures["placed"] == 0 and figures["asked"] == 4
    assert figures["booked_placed"] == 16       # 2 gangs of 8 on the 16 nodes up of 32


def test_gpu_share_5k_places_every_share_with_no_nvidia_gpu_request() -> None:
    from kaisched.bench.scenarios import run

    nodes, pods = SCENARIOS["gpu-share-5k"](SCALE)
    assert all(GPU not in requests(p) for p in pods)
    asks = Counter(next(iter(p["metadata"]["annotations"])) for p in pods)
    assert asks["gpu-fraction"] == 4 * asks["gpu-memory"]
    assert all(n["metadata"]["labels"]["nvidia.com/gpu.memory"] for n in nodes)
    figures = run("gpu-share-5k", SCALE)
    assert figures["placed"] == figures["pods"] == len(pods)
def test_failover_bench_reports_the_takeover_and_where_it_went() -> None:
    # scale-10k's mix five times over, at 1/500th: 100 nodes, 3,000 pods.
    result = CliRunner().invoke(main, ["bench", "failover-50k", "--scale", str(SCALE / 5)])
    assert result.exit_code == 0, result.output
    figures = orjson.loads(result.output)
    assert (figures["nodes"], figures["pods"]) == (100, 3000)
    assert figures["placed"] > 0                    # the new leader decided something
    parts = (figures["sync_seconds"] + figures["snapshot_seconds"]
             + figures["first_decision_in_session_seconds"])
    assert abs(parts - figures["failover_seconds"]) < 0.01
    assert figures["first_bind_landed_seconds"] >= figures["failover_seconds"]
    assert figures["replica_memory_mib"] > 0


def test_cold_start_bench_reports_the_first_decision_and_where_it_went() -> None:
    # scale-50k's cluster at 1/500th: 100 nodes, 3,000 pods, listed cold.
    result = CliRunner().invoke(main, ["bench", "cold-50k", "--scale", str(SCALE / 5)])
    assert result.exit_code == 0, result.output
    figures = orjson.loads(result.output)
    assert (figures["nodes"], figures["pods"]) == (100, 3000)
    assert figures["placed"] > 0
    parts = (figures["sync_seconds"] + figures["snapshot_seconds"]
             + figures["first_decision_in_session_seconds"])
    assert abs(parts - figures["first_decision_seconds"]) < 0.01
    assert figures["first_cycle_seconds"] >= figures["first_decision_seconds"]
    assert 0 < figures["import_seconds"] < 30 and figures["peak_memory_mib"] > 0


def test_cold_start_bench_with_a_head_start_reports_where_its_first_decision_went() -> None:
    # The same cluster, its 3,000 pods enough for a head start here: its binds
    # are the first decisions; the first cycle after it places nothing more.
    result = CliRunner().invoke(main, ["bench", "cold-50k", "--scale", str(SCALE / 5),
                                       "--head-start-pods", "1000"])
    assert result.exit_code == 0, result.output
    figures = orjson.loads(result.output)
    assert figures["head_start_binds"] > 0 and figures["placed"] == 0
    parts = figures["head_start_snapshot_seconds"] + figures["first_decision_in_session_seconds"]
    assert abs(parts - figures["first_decision_seconds"]) < 0.01
    assert figures["first_cycle_seconds"] >= figures["first_decision_seconds"]


def test_the_end_to_end_bench_needs_a_real_api_server() -> None:
    result = CliRunner().invoke(main, ["bench", "e2e"])
    assert result.exit_code == 2
    assert "give --kubeconfig PATH" in result.output


def test_the_cluster_life_bench_needs_a_real_api_server() -> None:
    result = CliRunner().invoke(main, ["bench", "cluster-life"])
    assert result.exit_code == 2
    assert "give --kubeconfig PATH" in result.output


def test_the_cluster_life_bench_runs_only_against_a_loopback_server(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://10.1.2.3:6443"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    result = CliRunner().invoke(main, ["bench", "cluster-life", "--kubeconfig", str(config)])
    assert result.exit_code != 0
    assert "only against a loopback API server, not 10.1.2.3" in result.output


def test_the_list_bench_lists_every_kind_page_by_page_over_http() -> None:
    # scale-10k's objects at 1/100th: 100 nodes, 3,000 pods.
    result = CliRunner().invoke(main, ["bench", "list-10k", "--scale", str(SCALE)])
    assert result.exit_code == 0, result.output
    figures = orjson.loads(result.output)
    assert (figures["nodes"], figures["pods"], figures["page_size"]) == (100, 3000, 500)
    assert figures["kinds"]["Pod"]["objects"] == 3000
    assert figures["list_seconds"] > 0 and figures["convert_seconds"] > 0
