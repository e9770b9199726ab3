"""The kaisched command line. Errors print one line, never a traceback."""
from __future__ import annotations

import logging
import os
import re
import signal
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import orjson

from kaisched.catalog import register_builtins
from kaisched.console import OneLineGroup
from kaisched.errors import InputError
from kaisched.framework import Registry, SchedulerConfig, default_config, load_config, parse_config

if TYPE_CHECKING:
    from kaisched.cluster.snapshot import LoadedFile


# Lines of objects skipped from one file, at most (a big snapshot can have thousands).
MAX_SKIPPED_LINES = 20


@click.group(cls=OneLineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kaisched")
def main() -> None:
    """kaisched: a gang-aware batch scheduler for Kubernetes."""


def _config(path: str | None, registry: Registry, embedded: dict[str, Any] | None) -> SchedulerConfig:
    from kaisched.cluster.snapshot import read_text

    if path:
        return parse_config(read_text(path), registry, path)
    if embedded is not None:
        return load_config(embedded, registry)
    return default_config(registry)


def _use_kube_version(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """--kube-version: check objects against that Kubernetes version's schemas
    (each command starts from the default, whatever ran before it)."""
    from kaisched.errors import InputError
    from kaisched.validation import KUBERNETES_VERSION, use_kube_version
    try:
        use_kube_version(value or KUBERNETES_VERSION)
    except InputError as exc:
        raise click.BadParameter(str(exc)) from None


kube_version_option = click.option(
    "--kube-version", expose_value=False, callback=_use_kube_version, metavar="X.Y",
    help="Check objects against this Kubernetes version's schemas (default: the newest bundled).")


def _is_scenario(path: str) -> bool:
    """A file `kaisched simulate` reads: a mapping with a scenario's keys."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and "kind" not in data and \
        bool({"nodePools", "jobs", "generate"} & set(data))


def _say_what_is_missing(path: str, objects: list[dict[str, Any]]) -> None:
    """A file with no pods (or no nodes) replays to nothing: say why."""
    kinds = {str(o.get("kind")) for o in objects}
    if "Pod" not in kinds:
        owners = sorted(kinds - {"Namespace", "Node", "Queue", "PriorityClass", "PodGroup"})
        made = f" (its {', '.join(owners)} would get pods from an operator, which replay " \
               "does not run; `kaisched simulate` emulates operators)" if owners else ""
        click.echo(f"note: {path} has no pods: nothing to schedule{made}", err=True)
    elif "Node" not in kinds:
        click.echo(f"note: {path} has no Nodes: every pod stays pending", err=True)


def _load(path: str, strict: bool) -> LoadedFile:
    """The objects of FILE a cluster would accept. Each one it would refuse is
    reported on stderr and skipped (an error with --strict), and so is an object
    of a kind nobody serves; a file left with nothing to use is an error."""
    from kaisched.cluster.snapshot import LoadedFile, load_file
    from kaisched.validation import partition, summarize

    try:
        loaded = load_file(path, check_kinds=False)
    except InputError:
        if _is_scenario(path):
            raise InputError(f"{path}: this is a simulate scenario (nodePools, queues, jobs), "
                             f"not Kubernetes objects: run it with `kaisched simulate {path}`") \
                from None
        raise
    kept, problems = partition(loaded.objects)
    lines = summarize(problems)
    for line in lines[:MAX_SKIPPED_LINES]:
        click.echo(f"{'refused' if strict else 'skipped'}: {line}", err=True)
    if len(lines) > MAX_SKIPPED_LINES:
        click.echo(f"{'refused' if strict else 'skipped'}: ... and "
                   f"{len(lines) - MAX_SKIPPED_LINES} more object(s) (the first "
                   f"{MAX_SKIPPED_LINES} are shown)", err=True)
    if strict and lines:
        raise click.ClickException(
            f"{path}: {len(lines)} object(s) a cluster would refuse (--strict)")
    if not kept:
        why = f"all {len(lines)} object(s) skipped" if lines else "no Kubernetes objects in it"
        raise click.ClickException(f"{path}: nothing usable: {why}")
    return LoadedFile(kept, loaded.config, loaded.taken)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--config", "config_path", help="Scheduler config YAML (default: the snapshot's, else built-in).")
@click.option("--sessions", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--output", type=click.Choice(["json", "text"]), default="text", show_default=True)
@click.option("--strict", is_flag=True,
              help="An object a cluster would refuse is an error, not skipped with a warning.")
@kube_version_option
def replay(file: str, config_path: str | None, sessions: int, output: str, strict: bool) -> None:
    """Replay FILE (Snapshot, List or multi-document YAML) and print the decisions."""
    from kaisched.tools.replay import replay as run_replay

    loaded = _load(file, strict)
    _say_what_is_missing(file, loaded.objects)
    registry = register_builtins()
    config = _config(config_path, registry, loaded.config)
    result = run_replay(loaded.objects, config, registry, sessions)
    if output == "json":
        click.echo(orjson.dumps(result.to_json(), option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2))
        return
    click.echo(f"{result.sessions} session(s)")
    click.echo(f"bindings ({len(result.bindings)}):")
    for pod, node in result.bindings.items():
        click.echo(f"  {pod} -> {node}")
    click.echo(f"pipelined ({len(result.pipelined)}):")
    for pod, node in result.pipelined.items():
        click.echo(f"  {pod} -> {node} (waiting for room to be released)")
    click.echo(f"evictions ({len(result.evictions)}):")
    for pod in result.evictions:
        click.echo(f"  {pod}  ({result.eviction_reasons.get(pod, '')})")
    click.echo(f"podgroups ({len(result.pod_groups)}):")
    for key, pg in sorted(result.pod_groups.items()):
        cond = next((c for c in pg["conditions"] if c.get("type") == "Scheduled"), None)
        why = f"  {cond.get('reason')}: {cond.get('message')}" if cond else ""
        click.echo(f"  {key}  {pg['phase']}  minMember={pg['minMember']}{why}")
    for failure in result.failures:
        click.echo(f"failed: {failure}")


@main.command()
@click.option("--kubeconfig", type=click.Path(dir_okay=False),
              help="Default: the in-cluster config, else ~/.kube/config.")
@click.option("--config", "config_path", help="Scheduler config YAML (default: built-in).")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=8080, show_default=True,
              help="Port of /metrics, /healthz and /readyz (0: none).")
@click.option("--lease-namespace", default=lambda: os.environ.get("POD_NAMESPACE", "kaisched-system"),
              show_default="$POD_NAMESPACE or kaisched-system")
@click.option("--identity", default=lambda: os.environ.get("POD_NAME") or socket.gethostname(),
              show_default="$POD_NAME or the host name")
@click.option("--lease-name", help="The Lease its replicas elect a leader on (default: kaisched; "
                                   "with a nodePool in the config, kaisched-<pool>: one per "
                                   "shard).")
@click.option("--no-leader-elect", "no_leader_elect", is_flag=True,
              help="Run a single replica without a Lease (never run two like this).")
@click.option("--binders", type=click.IntRange(1, 64), default=32, show_default=True,
              help="Requests in flight at once (binds first, then status and Events).")
@click.option("--api-qps", type=click.FloatRange(min=0), default=1000.0, show_default=True,
              help="Writes a second, binds and status alike, on average (0: no limit).")
@click.option("--api-burst", type=click.IntRange(min=1), default=2000, show_default=True,
              help="Writes at once above --api-qps.")
@click.option("--cycles", type=click.IntRange(min=1), help="Stop after this many cycles.")
def run(kubeconfig: str | None, config_path: str | None, metrics_port: int,
        lease_namespace: str, identity: str, lease_name: str | None, no_leader_elect: bool,
        binders: int, api_qps: float, api_burst: int, cycles: int | None) -> None:
    """The scheduler against a cluster: leader election, /metrics, /healthz."""
    from kaisched.api.clock import WallClock
    from kaisched.cluster.kube import KubeCluster
    from kaisched.runtime.binder import Binder
    from kaisched.runtime.metrics import Metrics
    from kaisched.runtime.scheduler import Scheduler, serve
    from kaisched.runtime.throttle import WriteThrottle
    from kaisched.service.health import Health
    from kaisched.service.leader import LeaderElector

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    registry = register_builtins()
    config = _config(config_path, registry, None)
    client = KubeCluster(kubeconfig, workers=binders)
    clock = WallClock()
    pool = config.node_pool
    elector = None if no_leader_elect else LeaderElector(
        client.with_timeout(5.0), clock, identity, lease_namespace,
        lease_name or shard_lease(pool.value if pool is not None else None))
    binder = Binder(client, clock.now, workers=binders, qps=api_qps, burst=api_burst,
                    throttle=WriteThrottle(),
                    leading=elector.is_leading if elector is not None else None)
    scheduler = Scheduler(client, config, registry, clock, binder)
    metrics = Metrics(pool.value if pool is not None else None)
    health = Health(config.schedule_period,
                    leading=elector.is_leading if elector is not None else lambda: True,
                    synced=lambda: scheduler.synced, watching=client.watching,
                    warmed_at=lambda: scheduler.warmed_at)
    server = metrics.serve(metrics_port, health=health) if metrics_port else None
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    if elector is None:
        logging.getLogger("kaisched").info("leader election is off (--no-leader-elect): "
                                           "this replica schedules alone")
    if pool is not None:
        logging.getLogger("kaisched").info(
            "one shard of the cluster: the nodes labelled %s=%s%s, and the pods and queues "
            "naming that pool%s", pool.label, pool.value,
            " or none" if pool.default else "", " or none" if pool.default else "")
    try:
        serve(scheduler, stop, elector, metrics, cycles, health=health)
    finally:
        client.close()
        if server is not None:
            server.shutdown()


def shard_lease(pool: str | None) -> str:
    """The Lease of a shard's replicas: kaisched, or kaisched-<pool> (a pool's
    value made a valid object name)."""
    if pool is None:
        return "kaisched"
    name = re.sub(r"[^a-z0-9.-]+", "-", pool.lower()).strip("-.")
    return f"kaisched-{name}"[:253]


@main.command("snapshot-dump")
@click.option("--kubeconfig", type=click.Path(dir_okay=False),
              help="Default: the in-cluster config, else ~/.kube/config.")
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False),
              help="The Snapshot file to write ('-': standard output).")
@click.option("--config", "config_path", help="The scheduler config to record (default: built-in).")
@click.option("--redact", is_flag=True,
              help="Keep only what scheduling reads: no env, commands, images, foreign annotations.")
def snapshot_dump(kubeconfig: str | None, output: str, config_path: str | None,
                  redact: bool) -> None:
    """Write the cluster's scheduling state as a Snapshot, to replay or explain."""
    from kaisched.cluster.snapshot import build_snapshot

    config = _config(config_path, register_builtins(), None)
    taken = time.time()
    items = _read_live(kubeconfig)
    data = orjson.dumps(build_snapshot(items, config.to_dict(), redact, taken),
                        option=orjson.OPT_INDENT_2)
    if output == "-":
        click.echo(data)
    else:
        Path(output).write_bytes(data)
        click.echo(f"{len(items)} objects written to {output}", err=True)


@main.command()
@click.argument("name", metavar="NAME")
@click.option("--snapshot", "snapshot_path", type=click.Path(dir_okay=False),
              help="Snapshot, List or multi-document YAML of the cluster.")
@click.option("--kubeconfig", type=click.Path(dir_okay=False),
              help="Read the live cluster instead (only read: nothing is written to it).")
@click.option("--config", "config_path", help="Scheduler config YAML (default: the snapshot's, else built-in).")
@click.option("--strict", is_flag=True,
              help="An object a cluster would refuse is an error, not skipped with a warning.")
def explain(name: str, snapshot_path: str | None, kubeconfig: str | None,
            config_path: str | None, strict: bool) -> None:
    """Why NAME is pending: per task and node, its queue, its gang shortfall.

    NAME is a PodGroup or a pod as NAMESPACE/NAME, or a workload as
    [NAMESPACE/]KIND/NAME (pytorchjob/bert). The cluster is read from
    --snapshot FILE or, live, from --kubeconfig PATH; one scheduling cycle
    runs on a copy of it.
    """
    from kaisched.tools.explain import explain as run_explain

    if (snapshot_path is None) == (kubeconfig is None):
        raise click.UsageError("give the cluster as --snapshot FILE or --kubeconfig PATH (one of them)")
    registry = register_builtins()
    if snapshot_path is not None:
        loaded = _load(snapshot_path, strict)
        objects, embedded = loaded.objects, loaded.config
    else:
        objects, embedded = _read_live(kubeconfig), None
    config = _config(config_path, registry, embedded)
    for line in run_explain(objects, name, config, registry):
        click.echo(line)


def _duration_option(value: str | None, flag: str) -> float | None:
    from kaisched.api.quantity import parse_duration

    if value is None:
        return None
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=flag) from None


def _read_live(kubeconfig: str | None) -> list[dict[str, Any]]:
    """Every object scheduling reads, listed from the cluster."""
    from kaisched.cluster.kinds import SCHEDULING_KINDS
    from kaisched.cluster.kube import KubeCluster
    from kaisched.errors import NotFoundError

    client = KubeCluster(kubeconfig)
    items: list[dict[str, Any]] = []
    try:
        for kind in SCHEDULING_KINDS:
            try:
                items.extend(client.list(kind))
            except NotFoundError:
                continue        # a CRD that is not installed (scheduler-plugins PodGroup)
    finally:
        client.close()
    return items


@main.command()
@click.argument("scenario", required=False, type=click.Path(dir_okay=False))
@click.option("--config", "config_path", help="Scheduler config YAML (default: built-in).")
@click.option("--compare", "compare_path",
              help="A second scheduler config: run both on the same scenario, side by side.")
@click.option("--seed", type=click.IntRange(min=0), help="Seed of a generated workload.")
@click.option("--output", type=click.Choice(["json", "text"]), default="text", show_default=True)
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False),
              help="Draw utilisation, each queue's use against its fair share and the job "
                   "timeline into this file (.png, .svg or .pdf).")
@click.option("--strict", is_flag=True,
              help="A job a cluster would refuse is an error, not reported as failed.")
@kube_version_option
@click.option("--from-snapshot", "snapshot_path", type=click.Path(dir_okay=False),
              help="Start from this cluster (a kaisched snapshot-dump): its nodes, queues and "
                   "running and waiting jobs; SCENARIO then adds to it.")
@click.option("--remaining", "remaining", metavar="DURATION",
              help="With --from-snapshot: how long a job still runs when its pods do not say "
                   "(annotation sim.kaisched.io/remaining).")
@click.option("--wide", is_flag=True,
              help="Every column of the tables, however wide the terminal.")
@click.option("--until", "until", metavar="DURATION",
              help="Stop at this virtual time (instead of the scenario's end).")
@click.option("--dump-snapshot", "dump_path", type=click.Path(dir_okay=False),
              help="Write the virtual cluster where the run stops as a Snapshot, to start a "
                   "what-if from (--from-snapshot) without a real cluster.")
@click.option("--max-objects", type=click.IntRange(min=1), default=20_000, show_default=True,
              help="The most nodes, and generated jobs, a scenario may ask for.")
def simulate(scenario: str | None, config_path: str | None, compare_path: str | None,
             seed: int | None, output: str, plot_path: str | None, strict: bool,
             snapshot_path: str | None, remaining: str | None, wide: bool,
             until: str | None, dump_path: str | None, max_objects: int) -> None:
    """Run SCENARIO (default: the bundled demo) in virtual time and report.

    With --from-snapshot SNAP, a what-if on a real cluster: the run starts
    from the snapshot and SCENARIO (optional) adds nodes, queues and jobs.
    """
    import sys

    from kaisched.sim.runner import WhatIf
    from kaisched.sim.runner import simulate as run_simulation

    registry = register_builtins()
    what_if, embedded = None, None
    if remaining is not None and snapshot_path is None:
        raise click.UsageError("--remaining is for --from-snapshot")
    if snapshot_path is not None:
        loaded = _load(snapshot_path, strict)
        left = _duration_option(remaining, "--remaining")
        what_if = WhatIf(tuple(loaded.objects), snapshot_path, left, loaded.taken)
        embedded = loaded.config
    first = config_path or ("the snapshot's config" if embedded is not None else "built-in")
    configs = [(first, _config(config_path, registry, embedded))]
    if compare_path:
        configs.append((compare_path, _config(compare_path, registry, None)))
    run_simulation(scenario, configs, seed, output, plot_path, sys.stdout, sys.stderr, strict,
                   what_if, wide, max_objects, _duration_option(until, "--until"), dump_path)


@main.command()
@click.argument("scenario", type=click.Choice(["basic-5k", "gang-5k", "preempt-1k", "reclaim-1k", "churn",
                                              "affinity-5k", "scale-10k", "binds", "simulate",
                                              "dra-1k", "volumes-5k", "what-if-10k",
                                              "failover-50k", "e2e"]))
@click.option("--scale", type=click.FloatRange(min=0.001, max=10), default=1.0, show_default=True,
              help="Multiply the scenario's node and pod counts (for quick checks).")
@click.option("--profile", type=click.IntRange(min=0), default=0, metavar="N",
              help="Add the top N entries of a profile of the measured cycle (its timings "
                   "are then the profiler's).")
@click.option("--kubeconfig", type=click.Path(dir_okay=False, exists=True),
              help="e2e: the admin kubeconfig of the API server to measure against.")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True,
              help="e2e: how many runs of both schedulers.")
@click.option("--kube-scheduler", "kube_scheduler", default="/tmp/k8s/bin/kube-scheduler",
              show_default=True, type=click.Path(dir_okay=False),
              help="e2e: the stock kube-scheduler binary to compare with.")
@click.option("--prefix", default="kaisched-e2e", show_default=True,
              help="e2e: the name of the namespace and of the nodes it creates.")
def bench(scenario: str, scale: float, profile: int, kubeconfig: str | None, runs: int,
          kube_scheduler: str, prefix: str) -> None:
    """Run a performance SCENARIO and print one JSON line of figures."""
    from kaisched.bench.scenarios import run

    if profile and scenario in ("binds", "simulate", "what-if-10k", "e2e"):
        raise click.UsageError("--profile is for the scenarios on the in-process API server")
    if scenario == "e2e":
        if kubeconfig is None:
            raise click.UsageError("e2e runs against a real API server: give --kubeconfig PATH")
        from kaisched.bench.e2e import run_e2e
        click.echo(orjson.dumps(run_e2e(kubeconfig, runs, kube_scheduler, prefix, scale)))
        return
    click.echo(orjson.dumps(run(scenario, scale, profile)))


if __name__ == "__main__":     # python -m kaisched.cli, for a checkout not installed
    main()
