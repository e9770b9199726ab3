"""`kaisched bench cluster-life --kubeconfig PATH`: one day of a GPU cluster's life,
compressed into minutes, on a living cluster (kube-controller-manager and hollow kubelets,
as `k8s-up.sh --controllers --hollow-nodes N` brings up), under kaisched and then under the
stock kube-scheduler.

The trace (kaisched/bench/lifetrace.py) is seeded and scaled to the hollow nodes present. The
driver plays the users and the operator, one tick a second: it creates each job when it
arrives, deletes it (propagationPolicy Background) when its run time since it started is over
-- containers of hollow nodes never exit, so a job ends when its driver deletes it -- and
makes a batch Job again when an eviction ended it early (a hollow container stopped by its
kubelet exits 0, where a real training process would fail and be restarted). Jobs not started
by the horizon are deleted and count as unfinished; the others run to their end.

Faults, at the same moments for both schedulers: two node failures (the node's kubelet
stopped with `k8s-up.sh --stop-node`; once node lifecycle marks it NotReady, or after 120 s,
the driver taints it `node.kubernetes.io/out-of-service=nodeshutdown:NoExecute`, as an
operator does, so its pods are deleted and made again elsewhere) and one restart of the
scheduler. Between the two runs the failed nodes are started again and untainted.

kaisched runs as `kaisched run` and `podgrouper run` of this checkout (the default config
with consolidation among its actions); kube-scheduler as the binary k8s-up.sh builds, its pods
with `schedulerName: default-scheduler`, fractional-GPU pods asking a whole GPU. Both with the
admin kubeconfig, each in a namespace of its own. Every loop is bounded in count and time, and
only a loopback API server is accepted.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import attrs
import yaml

from kaisched.bench.e2e import serve_crds
from kaisched.bench.lifemeter import Meter, classify
from kaisched.bench.lifetrace import (
    HOLLOW,
    Trace,
    TraceJob,
    make_trace,
    manifests,
    priority_classes,
    queues,
)
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import EVENT, NAMESPACE, NODE, POD, Kind, kind_of
from kaisched.cluster.kube import KubeCluster, load_access
from kaisched.errors import ConflictError, InputError, NotFoundError
from kaisched.framework import default_config

Obj = dict[str, Any]
JOB = Kind("batch/v1", "Job", "jobs")
TICK = 1.0                      # seconds between two looks at the pods
NOT_READY_PATIENCE = 120.0      # an operator taints a silent node at the latest after this
SETTLE_PATIENCE = 180.0         # for nodes to come back, namespaces to go
MAX_TICKS = 20_000              # a bound on any run's loop, whatever the clock says
OUT_OF_SERVICE = {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown",
                  "effect": "NoExecute"}
ACTIONS = ["allocate", "consolidation", "backfill", "reclaim", "preempt", "stalegangeviction"]
STARVATION_THRESHOLD = 20.0     # seconds of the compressed day (see _processes)
SCHEDULERS = ("kaisched", "kube_scheduler")
LOOPBACK = ("127.0.0.1", "localhost", "::1")
RESERVATIONS = "kaisched-system"        # where kaisched keeps a shared GPU's reservation pod


@attrs.frozen
class Setup:
    kubeconfig: str
    kube_scheduler: str
    k8s_up: str
    prefix: str
    folder: Path


@attrs.define
class NodeFault:
    at: float
    node: str
    phase: str = "pending"          # pending | stopped | tainted
    stopped: float = 0.0


def run_cluster_life(kubeconfig: str, seed: int = 1, horizon: float = 300.0,
                     kube_scheduler: str = "/tmp/k8s/bin/kube-scheduler",
                     k8s_up: str | None = None, prefix: str = "cl-life",
                     plot: str | None = None, only: tuple[str, ...] = SCHEDULERS) -> dict[str, Any]:
    _loopback_only(kubeconfig)
    if "kube_scheduler" in only and not os.access(kube_scheduler, os.X_OK):
        raise InputError(f"no kube-scheduler at {kube_scheduler} (k8s-up.sh builds one)")
    if k8s_up is None:
        raise InputError("cluster-life needs --k8s-up FILE (or KAISCHED_K8S_UP): the script that "
                         "brought the cluster up, which stops a hollow node (--stop-node NAME) "
                         "and starts them again (--hollow-nodes N)")
    if not os.path.isfile(k8s_up):
        raise InputError(f"no k8s-up.sh at {k8s_up}: it stops and starts the hollow nodes")
    client = KubeCluster(kubeconfig, timeout=30.0)
    try:
        nodes = _hollow_nodes(client)
        if len(nodes) < 4:
            raise InputError(f"{len(nodes)} Ready hollow nodes (label {HOLLOW}=true): start at "
                             "least 4 with k8s-up.sh --controllers --hollow-nodes N")
        trace = make_trace(seed, len(nodes), horizon)
        setup = Setup(kubeconfig, kube_scheduler, k8s_up, prefix,
                      Path(tempfile.mkdtemp(prefix=f"{prefix}-")))
        _prepare(client, trace)
        results: dict[str, Any] = {}
        series: dict[str, list[tuple[float, float, int]]] = {}
        try:
            for which in only:
                figures, series[which] = _one_run(client, setup, trace, which, sorted(nodes))
                results[which] = figures
        finally:
            _unprepare(client, trace)
        if plot:
            draw(series, plot)
    finally:
        client.close()
    return {**results, "nodes": len(nodes), "gpus": trace.gpus, "seed": seed,
            "horizon_s": horizon, "trace_jobs": len(trace.jobs), "logs": str(setup.folder)}


def _loopback_only(kubeconfig: str) -> None:
    host = urlparse(load_access(kubeconfig).endpoint.url).hostname or ""
    if host not in LOOPBACK:
        raise InputError(f"cluster-life stops nodes and fills a cluster: it runs only against "
                         f"a loopback API server, not {host}")


def _hollow_nodes(client: KubeCluster) -> list[str]:
    return [n["metadata"]["name"] for n in client.list(NODE)
            if (n["metadata"].get("labels") or {}).get(HOLLOW) == "true" and _ready(n)]


def _ready(node: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or ())


def _prepare(client: KubeCluster, trace: Trace) -> None:
    serve_crds(client)
    for obj in [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": RESERVATIONS}},
                *queues(trace.nodes), *priority_classes()]:
        try:
            client.create(obj)
        except ConflictError:
            if obj["kind"] == "Queue":
                client.patch(kind_of(obj), "", obj["metadata"]["name"], {"spec": obj["spec"]})


def _unprepare(client: KubeCluster, trace: Trace) -> None:
    """The Queues and PriorityClasses the run made, deleted (the CRDs are left)."""
    for obj in [*queues(trace.nodes), *priority_classes()]:
        try:
            client.delete(kind_of(obj), "", obj["metadata"]["name"])
        except NotFoundError:
            pass


# -- one scheduler's run ----------------------------------------------------------------------

def _one_run(client: KubeCluster, setup: Setup, trace: Trace, which: str,
             nodes: list[str]) -> tuple[dict[str, Any], list[tuple[float, float, int]]]:
    namespace = f"{setup.prefix}-{which.replace('_', '-')}-{int(time.time()) % 100000}"
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    scheduler = "kaisched" if which == "kaisched" else "default-scheduler"
    sharing = which == "kaisched"
    processes = _processes(setup, which)
    for process in processes:
        process.start()
    start = time.time()
    meter = Meter(trace, start)
    horizon = trace.horizon
    faults = [NodeFault(round(0.25 * horizon, 1), nodes[-1]),
              NodeFault(round(0.55 * horizon, 1), nodes[-2])]
    restart_at, restarted = 0.4 * horizon, False
    owners: dict[str, str] = {}         # trace job -> its owner's name now (a batch Job's changes)
    restarts: dict[str, int] = {}
    pending = list(trace.jobs)
    drain = horizon + max((j.run for j in trace.jobs), default=0.0) + 60.0
    try:
        for _ in range(MAX_TICKS):
            now = time.time()
            t = now - start
            while pending and pending[0].arrive <= t and t <= horizon:
                job = pending.pop(0)
                _create_all(client, manifests(job, namespace, scheduler, sharing))
                owners[job.name] = job.name
                meter.created(job.name, time.time())
            pods = client.list(POD, namespace)
            jobs = {j["metadata"]["name"]: j for j in client.list(JOB, namespace)}
            meter.tick(pods, now, _expected(meter, owners, jobs))
            for name, state in meter.jobs.items():
                if not state.live:
                    continue
                job = state.job
                if state.started is not None and now >= state.started + job.run:
                    _delete(client, namespace, job, owners[name])
                    meter.ended(name, now, finished=True)
                elif state.started is None and t > horizon:
                    _delete(client, namespace, job, owners[name])
                    meter.ended(name, now, finished=False)
                elif job.kind == "batch" and _over(jobs.get(owners[name])):
                    # an eviction ended it early: made again, as its operator would
                    restarts[name] = restarts.get(name, 0) + 1
                    _delete(client, namespace, job, owners[name])
                    owners[name] = f"{name}-r{restarts[name]}"
                    _create_all(client, manifests(job, namespace, scheduler, sharing,
                                                  owners[name]))
            for fault in faults:
                _advance(client, setup, fault, t, now, meter)
            if not restarted and t >= restart_at:
                for process in processes:
                    process.stop()
                    process.start()
                restarted = True
            if t > horizon and not pending and not any(s.live for s in meter.jobs.values()):
                break
            if t > drain:
                for name, state in meter.jobs.items():
                    if state.live:
                        _delete(client, namespace, state.job, owners[name])
                        meter.ended(name, time.time(), finished=False)
                break
            time.sleep(max(0.0, TICK - (time.time() - now)))
        meter.close(time.time())
        evictions = classify(client.list(EVENT, namespace))
        figures = meter.figures(evictions)
        figures["batch_restarts"] = sum(restarts.values())
        figures["seconds"] = round(time.time() - start, 1)
        figures["namespace"] = namespace
    finally:
        try:
            # while kaisched still runs: it deletes a shared GPU's reservation pod once the
            # namespace's sharers are gone, or the GPU stays held for the next run
            _clean(client, namespace)
            _no_reservations(client)
        finally:
            for process in processes:
                process.stop()
            _restore(client, setup, [f.node for f in faults if f.phase != "pending"],
                     len(nodes))
    return figures, meter.series


def _expected(meter: Meter, owners: dict[str, str], jobs: dict[str, Obj]) -> dict[str, int]:
    """Pods each live job's owner should have now (a batch Job that ended has what it has)."""
    out: dict[str, int] = {}
    for name, state in meter.jobs.items():
        if not state.live:
            continue
        if state.job.kind == "batch":
            out[name] = 0 if _over(jobs.get(owners[name])) else 1
        else:
            out[name] = state.job.pods
    return out


def _over(job: Obj | None) -> bool:
    status = (job or {}).get("status") or {}
    return bool(status.get("succeeded") or status.get("failed"))


def _create_all(client: KubeCluster, objects: list[Obj]) -> None:
    for obj in objects:
        client.create(obj)


def _delete(client: KubeCluster, namespace: str, job: TraceJob, owner: str) -> None:
    for obj in manifests(job, namespace, "", False, owner):
        try:
            client.delete(kind_of(obj), namespace, owner, propagation="Background")
        except NotFoundError:
            pass


# -- faults -----------------------------------------------------------------------------------

def _advance(client: KubeCluster, setup: Setup, fault: NodeFault, t: float, now: float,
             meter: Meter) -> None:
    if fault.phase == "pending" and t >= fault.at:
        _k8s_up(setup, "--stop-node", fault.node)
        meter.node_failed(fault.node)
        fault.phase, fault.stopped = "stopped", now
    elif fault.phase == "stopped":
        node = client.get(NODE, "", fault.node) or {}
        if not _ready(node) or now - fault.stopped > NOT_READY_PATIENCE:
            taints = [taint for taint in (node.get("spec") or {}).get("taints") or ()
                      if taint.get("key") != OUT_OF_SERVICE["key"]]
            client.patch(NODE, "", fault.node, {"spec": {"taints": [*taints, OUT_OF_SERVICE]}})
            meter.node_tainted(fault.node, time.time())
            fault.phase = "tainted"


def _k8s_up(setup: Setup, *args: str) -> None:
    done = subprocess.run(["bash", setup.k8s_up, *args], capture_output=True, text=True,
                          timeout=SETTLE_PATIENCE, check=False)
    with open(setup.folder / "k8s-up.log", "a", encoding="utf-8") as log:
        log.write(done.stdout + done.stderr)
    if done.returncode != 0:
        raise InputError(f"k8s-up.sh {' '.join(args)} failed: {done.stderr.strip()[-500:]}")


def _restore(client: KubeCluster, setup: Setup, failed: list[str], count: int) -> None:
    """The failed nodes started again and untainted; until every hollow node is Ready."""
    if not failed:
        return
    _k8s_up(setup, "--hollow-nodes", str(count))
    for name in failed:
        node = client.get(NODE, "", name) or {}
        taints = [t for t in (node.get("spec") or {}).get("taints") or ()
                  if t.get("key") != OUT_OF_SERVICE["key"]]
        client.patch(NODE, "", name, {"spec": {"taints": taints or None}})
    deadline = time.monotonic() + SETTLE_PATIENCE
    while len(_hollow_nodes(client)) < count or _unreachable(client, failed):
        if time.monotonic() > deadline:
            raise InputError(f"the failed nodes {failed} did not come back in "
                             f"{SETTLE_PATIENCE:.0f} s")
        time.sleep(2.0)


def _unreachable(client: KubeCluster, names: list[str]) -> bool:
    """Whether node lifecycle still taints one of them (it lifts the taints once Ready)."""
    for name in names:
        taints = ((client.get(NODE, "", name) or {}).get("spec") or {}).get("taints") or ()
        if any(t.get("key", "").startswith("node.kubernetes.io/") for t in taints):
            return True
    return False


def _clean(client: KubeCluster, namespace: str) -> None:
    """The run's namespace deleted (the namespace controller deletes what it holds)."""
    try:
        client.delete(NAMESPACE, "", namespace)
    except NotFoundError:
        return
    deadline = time.monotonic() + SETTLE_PATIENCE
    while client.get(NAMESPACE, "", namespace) is not None and time.monotonic() < deadline:
        time.sleep(2.0)


def _no_reservations(client: KubeCluster) -> None:
    """No reservation pod left in kaisched-system: waited for, then deleted."""
    deadline = time.monotonic() + 60.0
    while _reservations(client) and time.monotonic() < deadline:
        time.sleep(2.0)
    for pod in _reservations(client):
        try:
            client.delete(POD, RESERVATIONS, pod["metadata"]["name"])
        except NotFoundError:
            pass


def _reservations(client: KubeCluster) -> list[Obj]:
    return [p for p in client.list(POD, RESERVATIONS)
            if (p["metadata"].get("labels") or {}).get("app") == "kaisched-gpu-reservation"]


# -- the schedulers' processes ----------------------------------------------------------------

class Process:
    """One scheduler's process, its output appended to a log of the run's folder."""

    def __init__(self, command: list[str], log: Path) -> None:
        self.command = command
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _processes(setup: Setup, which: str) -> list[Process]:
    kubeconfig = os.path.abspath(setup.kubeconfig)
    if which == "kube_scheduler":
        config = setup.folder / "kube-scheduler.yaml"
        config.write_text(yaml.safe_dump({
            "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": kubeconfig, "qps": 500, "burst": 1000},
            "leaderElection": {"leaderElect": False},
            "profiles": [{"schedulerName": "default-scheduler"}]}))
        return [Process([setup.kube_scheduler, "--config", str(config),
                         "--bind-address=127.0.0.1", f"--secure-port={_free_port()}"],
                        setup.folder / "kube-scheduler.log")]
    settings = default_config(register_builtins()).to_dict()
    # A day in minutes: the starvation guard's 10 minutes would be most of the run, and the
    # big gang would wait for a drained cluster by luck; 20 s of the run is about 2.7 hours.
    settings.update(schedulerName="kaisched", actions=ACTIONS,
                    starvationThreshold=f"{STARVATION_THRESHOLD:g}s")
    config = setup.folder / "kaisched.yaml"
    config.write_text(yaml.safe_dump(settings))
    python = [sys.executable, "-c"]
    return [Process([*python, "from kaisched.cli import main; main()", "run",
                     "--kubeconfig", kubeconfig, "--config", str(config), "--no-leader-elect",
                     "--metrics-port", str(_free_port())], setup.folder / "kaisched.log"),
            Process([*python, "from podgrouper.cli import main; main()", "run",
                     "--kubeconfig", kubeconfig, "--no-leader-elect",
                     "--metrics-port", str(_free_port())], setup.folder / "podgrouper.log")]


# -- the picture ------------------------------------------------------------------------------

def draw(series: dict[str, list[tuple[float, float, int]]], path: str) -> None:
    """GPUs held by partly placed gangs over time, and jobs finished over time, for both."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9, 6))
    held, done = figure.subplots(2, 1, sharex=True)
    for which, points in series.items():
        times = [p[0] for p in points]
        held.plot(times, [p[1] for p in points], label=which.replace("_", "-"))
        done.plot(times, [p[2] for p in points], label=which.replace("_", "-"))
    held.set_ylabel("GPUs held by partly\nplaced gangs")
    done.set_ylabel("jobs finished")
    done.set_xlabel("seconds since the run's start")
    held.legend()
    held.set_title("cluster-life: the same trace under each scheduler")
    FigureCanvasAgg(figure)
    figure.savefig(path, dpi=100, bbox_inches="tight")

