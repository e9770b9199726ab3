"""`kaisched bench e2e --kubeconfig PATH`: kaisched against the stock
kube-scheduler, end to end on a real API server.

The workload of the issue it measures: 500 nodes and 5,000 pods in gangs of
8 (1 cpu each on 32-cpu nodes: they all fit), all created before the
scheduler starts. Each run schedules it twice, once with the stock
kube-scheduler (the pods one by one: it knows no gangs) and once with
`kaisched run` (a PodGroup of minMember 8 per gang), in alternating order;
each time from starting the scheduler's process to its last bind, as the
bench sees the binds through a watch of the namespace. Three runs by
default: the median and the spread of both, and of their ratio.

kaisched runs as an installed copy starts: its modules read as bytecode
compiled once before the runs (kaisched.bench.installed), not compiled again
at each start as a source tree run with PYTHONDONTWRITEBYTECODE is.

Both schedulers run as their own processes with the admin kubeconfig and
the same client rate limit (5,000 requests a second, burst 5,000: the
kube-scheduler configuration k8s-up.sh writes), each under a scheduler name
of its own, and the
bench's nodes carry a taint only its pods tolerate: other schedulers on the
same server neither take these pods nor place theirs on these nodes.
Everything the bench creates is named after --prefix and deleted at the end
(the namespace is kept: without a controller-manager a deleted namespace
never goes).

After both schedulers, each run binds the same 5,000 pods (created the same
way) with nothing else running: a loop of as many threads as `kaisched run`
has binders by default, sending only binds with kaisched's client, timed
from its first bind to the last the same watch sees (`binds_alone`). No
scheduler binding them can end sooner on this server and this machine, so
kube-scheduler's time over that one is the best ratio any could reach here
(`best_ratio`).

Where the PodGroup and Queue CRDs are not served it installs them (from
config/crds) and leaves them. It needs a kube-scheduler binary
(`--kube-scheduler`; the one k8s-up.sh builds is /tmp/k8s/bin/kube-scheduler).
"""
from __future__ import annotations

import concurrent.futures
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import attrs
import yaml

from kaisched.bench.installed import installed_env
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import NODE, POD, PODGROUP, QUEUE, Kind
from kaisched.cluster.kube import KubeCluster
from kaisched.cluster.watch import KubeSubscription
from kaisched.errors import ConflictError, InputError, NotFoundError, TransientApiError
from kaisched.framework import default_config
from kaisched.runtime.defaults import BINDERS  # binds in flight in the binds-alone loop
from kaisched.validation.schemas import crd_dir

NODES, PODS, GANG = 500, 5000, 8
PATIENCE = 600.0            # the longest one scheduler may take before the run gives up
CREATORS = 16               # requests in flight while the bench creates its objects
QPS = 5000                  # both schedulers' client rate limit (qps and burst), as k8s-up.sh's
Obj = dict[str, Any]


@attrs.frozen
class Workload:
    prefix: str
    nodes: int
    pods: int

    @property
    def namespace(self) -> str:
        return self.prefix

    @property
    def taint(self) -> str:
        return "kaisched.io/bench"

    def node_names(self) -> list[str]:
        return [f"{self.prefix}-node-{i:04d}" for i in range(self.nodes)]

    def node(self, name: str) -> Obj:
        allocatable = {"cpu": "32", "memory": "256Gi", "pods": "110"}
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {self.taint: self.prefix,
                                                      "kubernetes.io/hostname": name}},
                "spec": {"taints": [{"key": self.taint, "value": self.prefix,
                                     "effect": "NoSchedule"}]},
                "status": {"capacity": allocatable, "allocatable": allocatable,
                           "conditions": [{"type": "Ready", "status": "True",
                                           "reason": "KubeletReady", "message": "bench node"}]}}

    def objects(self, scheduler: str, gangs: bool) -> list[Obj]:
        """The pods (and with gangs, a PodGroup per GANG of them) for one scheduler."""
        out: list[Obj] = []
        for g in range(self.pods // GANG):
            name = f"gang-{g:04d}"
            if gangs:
                out.append({"apiVersion": PODGROUP.api_version, "kind": "PodGroup",
                            "metadata": {"name": name, "namespace": self.namespace},
                            "spec": {"minMember": GANG}})
            for i in range(GANG):
                meta: Obj = {"name": f"{name}-{i}", "namespace": self.namespace,
                             "labels": {self.taint: self.prefix}}
                if gangs:
                    meta["annotations"] = {"kaisched.io/pod-group": name}
                out.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {
                    "schedulerName": scheduler,
                    "nodeSelector": {self.taint: self.prefix},
                    "tolerations": [{"key": self.taint, "operator": "Equal",
                                     "value": self.prefix, "effect": "NoSchedule"}],
                    "containers": [{"name": "main", "image": "registry.example.com/train:1",
                                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}})
        return out


def run_e2e(kubeconfig: str, runs: int = 3, kube_scheduler: str = "/tmp/k8s/bin/kube-scheduler",
            prefix: str = "kaisched-e2e", scale: float = 1.0) -> dict[str, Any]:
    if not os.access(kube_scheduler, os.X_OK):
        raise InputError(f"no kube-scheduler at {kube_scheduler}: build one (k8s-up.sh does) and "
                         "name it with --kube-scheduler PATH")
    work = Workload(prefix, max(1, int(NODES * scale)), max(GANG, int(PODS * scale) // GANG * GANG))
    client = KubeCluster(kubeconfig, timeout=60.0, workers=CREATORS)
    folder = Path(tempfile.mkdtemp(prefix=f"{prefix}-"))
    times: dict[str, list[dict[str, Any]]] = {"kube-scheduler": [], "kaisched": []}
    alone: list[dict[str, Any]] = []
    load = [_load()]
    try:
        _check(client, work)
        _in_parallel(lambda n: _create(client, work.node(n)), work.node_names())
        commands = {"kube-scheduler": _kube_scheduler(kube_scheduler, kubeconfig, work, folder),
                    "kaisched": _kaisched(kubeconfig, work, folder)}
        # kaisched starts as installed: its modules compiled once, not at each start.
        envs = {"kube-scheduler": None, "kaisched": installed_env(folder / "pycache")}
        for run in range(runs):
            order = ("kube-scheduler", "kaisched") if run % 2 == 0 else ("kaisched", "kube-scheduler")
            for which in order:
                times[which].append(_one(client, work, which, commands[which], folder,
                                         envs[which]))
            alone.append(_binds_alone(client, kubeconfig, work))
            load.append(_load())
    finally:
        _clean(client, work)
        client.close()
    figures: dict[str, Any] = {"scenario": "e2e", "nodes": work.nodes, "pods": work.pods,
                               "gang": GANG, "runs": runs}
    for which, measured in times.items():
        last = [m["last_bind_seconds"] for m in measured]
        cores = {name: _spread([m["cores"][name] for m in measured if name in m["cores"]])
                 for name in measured[0]["cores"]} if measured else {}
        figures[which] = {"last_bind_seconds": _spread(last),
                          "first_bind_seconds": _spread([m["first_bind_seconds"] for m in measured]),
                          "cores": cores, "each_run": measured}
    ratios = [k["last_bind_seconds"] / m["last_bind_seconds"]
              for k, m in zip(times["kube-scheduler"], times["kaisched"], strict=True)]
    figures["ratio"] = _spread(ratios)      # kube-scheduler's time over kaisched's: > 1, kaisched faster
    figures["binds_alone"] = {"seconds": _spread([a["seconds"] for a in alone]),
                              "each_run": alone}
    # The most any scheduler could gain here: kube-scheduler's time over binds alone.
    figures["best_ratio"] = _spread([k["last_bind_seconds"] / a["seconds"]
                                     for k, a in zip(times["kube-scheduler"], alone, strict=True)])
    figures["load_average"] = load          # 1-minute load before the first run and after each
    return figures


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 2), "min": round(min(values), 2),
            "max": round(max(values), 2)}


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def serve_crds(client: KubeCluster) -> None:
    """The PodGroup and Queue CRDs served: installed from config/crds where
    they are not (tests on the same server may remove them), and left."""
    try:
        client.list(PODGROUP, "default")
        client.list(QUEUE)
        return
    except NotFoundError:
        pass
    for path in sorted(crd_dir().glob("*.yaml")):
        for crd in yaml.safe_load_all(path.read_text()):
            if crd and crd.get("kind") == "CustomResourceDefinition":
                try:
                    client.create(crd)
                except ConflictError:
                    pass
    deadline = time.monotonic() + PATIENCE
    while True:
        try:
            client.list(PODGROUP, "default")
            client.list(QUEUE)
            return
        except NotFoundError:
            if time.monotonic() > deadline:
                raise InputError("the PodGroup and Queue CRDs are not served: "
                                 "kubectl apply -k config/crds") from None
            time.sleep(0.5)


def _check(client: KubeCluster, work: Workload) -> None:
    serve_crds(client)
    try:
        client.create({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": work.namespace}})
    except ConflictError:
        pass                    # kept from an earlier run
    if client.list(POD, work.namespace):
        raise InputError(f"namespace {work.namespace} still has pods (another run?): "
                         "delete them or pass another --prefix")


def _create(client: KubeCluster, obj: Obj) -> None:
    try:
        client.create(obj)
    except ConflictError:
        if obj["kind"] != "Node":
            raise
        client.delete(NODE, "", obj["metadata"]["name"])   # a leftover of an interrupted run
        client.create(obj)


def _in_parallel(fn: Callable[[Any], None], items: Iterable[Any]) -> None:
    with concurrent.futures.ThreadPoolExecutor(CREATORS) as pool:
        for done in [pool.submit(fn, item) for item in items]:
            done.result()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _kube_scheduler(binary: str, kubeconfig: str, work: Workload, folder: Path) -> list[str]:
    config = folder / "kube-scheduler.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": os.path.abspath(kubeconfig), "qps": QPS,
                             "burst": QPS},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": f"{work.prefix}-kube-scheduler"}]}))
    return [binary, "--config", str(config), "--bind-address=127.0.0.1",
            f"--secure-port={_free_port()}"]


def _kaisched(kubeconfig: str, work: Workload, folder: Path) -> list[str]:
    config = folder / "kaisched.yaml"
    settings = default_config(register_builtins()).to_dict()
    settings["schedulerName"] = f"{work.prefix}-kaisched"
    config.write_text(yaml.safe_dump(settings))
    return [sys.executable, "-c", "from kaisched.cli import main; main()", "run",
            "--kubeconfig", os.path.abspath(kubeconfig), "--config", str(config),
            "--no-leader-elect", "--metrics-port", "0",
            "--api-qps", str(QPS), "--api-burst", str(QPS)]


def _one(client: KubeCluster, work: Workload, which: str, command: list[str],
         folder: Path, env: dict[str, str] | None) -> dict[str, Any]:
    """One scheduler over the whole workload (env: its process's environment; None:
    this one's): seconds from its start to its first and last bind, and how many
    cores it, the API server, etcd and this bench kept busy meanwhile."""
    scheduler = f"{work.prefix}-{which}"
    objects = work.objects(scheduler, gangs=which == "kaisched")
    if which == "kaisched":
        serve_crds(client)
    _in_parallel(lambda o: _create(client, o), [o for o in objects if o["kind"] == "PodGroup"])
    _in_parallel(lambda o: _create(client, o), [o for o in objects if o["kind"] == "Pod"])
    watch = client.subscribe([_pods_of(work)])
    bound: dict[str, float] = {}
    servers = _servers()
    with open(folder / f"{which}.log", "ab") as log:
        started = time.monotonic()
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    pids = {**servers, "scheduler": process.pid, "bench": os.getpid()}
    before = _cpu(pids)
    used: dict[str, float] = {}
    try:
        deadline = started + PATIENCE
        while len(bound) < work.pods:
            _note_binds(watch, bound, started)
            if process.poll() is not None:
                raise InputError(f"{which} exited with {process.returncode}: see "
                                 f"{folder / (which + '.log')}")
            if time.monotonic() > deadline:
                raise InputError(f"{which} bound {len(bound)} of {work.pods} pods in "
                                 f"{PATIENCE:.0f}s: see {folder / (which + '.log')}")
            time.sleep(0.005)
        after = _cpu(pids)
        span = max(bound.values())
        used = {name: round((after[name] - before.get(name, 0.0)) / span, 2)
                for name in after if name in before or name == "scheduler"}
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        watch.close()
        _empty(client, work)
    return {"first_bind_seconds": round(min(bound.values()), 2),
            "last_bind_seconds": round(max(bound.values()), 2),
            # Cores each process kept busy from the scheduler's start to its last bind.
            "cores": used}


def _pods_of(work: Workload) -> Kind:
    """The workload's pods, to watch."""
    return Kind("v1", "Pod", "pods", field_selector=f"metadata.namespace={work.namespace}")


def _note_binds(watch: KubeSubscription, bound: dict[str, float], started: float) -> None:
    """Note each pod the watch shows bound for the first time: seconds after started."""
    for event in watch.drain():
        spec, meta = event.obj.get("spec") or {}, event.obj.get("metadata") or {}
        if spec.get("nodeName") and meta.get("name") not in bound:
            bound[meta["name"]] = time.monotonic() - started


def _binds_alone(client: KubeCluster, kubeconfig: str, work: Workload) -> dict[str, Any]:
    """The workload's pods bound by a loop that does nothing else, seen by the
    same watch the schedulers' binds are: how long from the first bind sent to
    the last seen, how many a second, and the CPU each process spent on one."""
    pods = [o for o in work.objects(f"{work.prefix}-nobody", gangs=False) if o["kind"] == "Pod"]
    _in_parallel(lambda o: _create(client, o), pods)
    nodes = work.node_names()
    watch = client.subscribe([_pods_of(work)])
    binder = KubeCluster(kubeconfig, timeout=60.0, workers=BINDERS)
    pids = {**_servers(), "binder": os.getpid()}
    bound: dict[str, float] = {}
    try:
        before, started = _cpu(pids), time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(BINDERS) as pool:
            for done in [pool.submit(binder.bind, work.namespace, pod["metadata"]["name"], "",
                                     nodes[i % len(nodes)]) for i, pod in enumerate(pods)]:
                done.result()
        while len(bound) < len(pods):
            _note_binds(watch, bound, started)
            if time.monotonic() > started + PATIENCE:
                raise InputError(f"the watch saw {len(bound)} of {len(pods)} binds")
            time.sleep(0.005)
        took, after = time.monotonic() - started, _cpu(pids)
    finally:
        binder.close()
        watch.close()
        _empty(client, work)
    return {"seconds": round(took, 2), "per_second": round(len(pods) / took),
            "cpu_ms_per_bind": {name: round((after[name] - before[name]) / len(pods) * 1e3, 2)
                                for name in after if name in before}}


def _servers() -> dict[str, int]:
    """The pids of the API server and etcd on this machine (by their command
    name; none when they run elsewhere)."""
    found: dict[str, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm", encoding="ascii") as f:
                name = f.read().strip()
        except OSError:
            continue
        if name in ("kube-apiserver", "etcd"):
            found.setdefault(name, int(entry))
    return found


def _cpu(pids: dict[str, int]) -> dict[str, float]:
    """CPU seconds (user and system) each process has used so far; one gone is left out."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for name, pid in pids.items():
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        out[name] = (int(fields[11]) + int(fields[12])) / tick     # utime, stime
    return out


def _empty(client: KubeCluster, work: Workload) -> None:
    """The namespace emptied of the run's pods and PodGroups (asked again while
    a busy server times out)."""
    deadline = time.monotonic() + PATIENCE
    while True:
        try:
            client.delete_all(POD, work.namespace, grace_seconds=0)
            try:
                client.delete_all(PODGROUP, work.namespace)
            except NotFoundError:
                pass            # the CRD is gone, and its objects with it
            if not client.list(POD, work.namespace) and not _podgroups(client, work):
                return
        except TransientApiError:
            pass
        if time.monotonic() > deadline:
            raise InputError(f"the pods of namespace {work.namespace} are not gone")
        time.sleep(1.0)


def _podgroups(client: KubeCluster, work: Workload) -> list[Obj]:
    try:
        return client.list(PODGROUP, work.namespace)
    except NotFoundError:
        return []


def _clean(client: KubeCluster, work: Workload) -> None:
    try:
        _empty(client, work)
    except NotFoundError:
        pass
    client.delete_all(NODE, label_selector=f"{work.taint}={work.prefix}")
