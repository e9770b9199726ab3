"""The kaisched command line. Errors print one line, never a traceback."""
from __future__ import annotations

import logging
import re
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import orjson

from kaisched.bench import BENCHES
from kaisched.builtins.catalog import register_builtins
from kaisched.console import OneLineGroup, emit, output_option, replica_options, say
from kaisched.errors import InputError, PathError
from kaisched.framework import Registry, SchedulerConfig, default_config, load_config

if TYPE_CHECKING:
    from kaisched.cluster.kube import KubeCluster
    from kaisched.cluster.snapshot import LoadedFile
    from kaisched.service.leader import LeaseOptions


# What load_configuration does without --kubeconfig, as kubectl does.
KUBECONFIG_HELP = "Kubeconfig file (default: the in-cluster config, else $KUBECONFIG or ~/.kube/config)."
# Lines of objects skipped from one file, at most (a big snapshot can have thousands).
MAX_SKIPPED_LINES = 20


@click.group(cls=OneLineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kaisched", prog_name="kaisched")
def main() -> None:
    """kaisched: a gang-aware batch scheduler for Kubernetes."""


def _config(path: str | None, registry: Registry, embedded: dict[str, Any] | None) -> SchedulerConfig:
    from kaisched.cluster.files import read_mapping
    from kaisched.errors import ConfigError

    if path:
        if not Path(path).exists() and "/" not in path:
            from kaisched.sim.bundled import find_bundled, misplaced

            wrong = misplaced(path, ("config",))
            if wrong is not None:
                raise PathError(wrong)
            if find_bundled(path) is not None:
                path = str(find_bundled(path))
        if not Path(path).exists() and "/" not in path:
            from kaisched.sim.bundled import names_hint

            raise PathError(f"{path}: no such file; {names_hint('config')}")
        data = read_mapping(path, " of schedulerName, actions, tiers, ...", empty_ok=True)
        try:
            return load_config(data, registry)
        except ConfigError as exc:      # its messages say `config:`; the file is this one
            raise ConfigError(str(exc).replace("config:", f"{path}:", 1)) from None
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

    loaded = load_file(path, check_kinds=False)
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
@click.option("--config", "config_path", metavar="FILE",
              help="Scheduler config YAML (default: the snapshot's, else built-in).")
@click.option("--sessions", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="Scheduling cycles to run, one schedulePeriod apart (bound pods start "
                   "running between them).")
@output_option("text", "json", "yaml", default="text",
               help="json or yaml: bindings, evictions, pipelined pods and PodGroups, for tools.")
@click.option("--strict", is_flag=True,
              help="An object a cluster would refuse is an error, not skipped with a warning.")
@kube_version_option
def replay(file: str, config_path: str | None, sessions: int, output: str, strict: bool) -> None:
    """Replay FILE (Snapshot, List or multi-document YAML) and print the decisions."""
    from kaisched.cache.convert.workloads import V1ALPHA2_CONDITION, V1BETA1_CONDITION
    from kaisched.tools.replay import replay as run_replay

    loaded = _load(file, strict)
    _say_what_is_missing(file, loaded.objects)
    registry = register_builtins()
    config = _config(config_path, registry, loaded.config)
    result = run_replay(loaded.objects, config, registry, sessions)
    if output != "text":
        emit(result.to_json(), output)
        return
    say(f"{result.sessions} session(s)")
    say(f"bindings ({len(result.bindings)}):")
    for pod, node in result.bindings.items():
        say(f"  {pod} -> {node}")
    say(f"pipelined ({len(result.pipelined)}):")
    for pod, node in result.pipelined.items():
        why = "moved: room held for the pod its controller makes again" if pod in result.moved \
            else "waiting for room to be released"
        say(f"  {pod} -> {node} ({why})")
    say(f"evictions ({len(result.evictions)}):")
    for pod in result.evictions:
        say(f"  {pod}  ({result.eviction_reasons.get(pod, '')})")
    say(f"podgroups ({len(result.pod_groups)}):")
    for key, pg in sorted(result.pod_groups.items()):
        if "phase" not in pg:       # an upstream PodGroup: no phase, its own condition
            cond = next((c for c in pg["conditions"] if c.get("type") in (V1ALPHA2_CONDITION, V1BETA1_CONDITION)), None)
            why = f"  {cond.get('type')}={cond.get('status')} {cond.get('reason')}: " \
                  f"{cond.get('message')}" if cond else ""
            say(f"  {key}  {pg['apiVersion']}  minCount={pg['minMember']}{why}")
            continue
        cond = next((c for c in pg["conditions"] if c.get("type") == "Scheduled"), None)
        why = f"  {cond.get('reason')}: {cond.get('message')}" if cond else ""
        say(f"  {key}  {pg['phase']}  minMember={pg['minMember']}{why}")
    for failure in result.failures:
        say(f"failed: {failure}")


def _memory_limit(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """--memory-limit checked with the command line, before any cluster is asked."""
    from kaisched.service import memorylimit

    if value is not None:
        try:
            memorylimit.parse_limit(value)
        except InputError as exc:
            raise click.BadParameter(str(exc).removeprefix("--memory-limit"
                                                           ).removeprefix(":").strip()) from None
    return value


@main.command()
@click.option("--kubeconfig", type=click.Path(dir_okay=False), help=KUBECONFIG_HELP)
@click.option("--config", "config_path", metavar="FILE",
              help="Scheduler config YAML (default: built-in, the same as config/scheduler.yaml).")
@replica_options(metrics_port=8080, lease_name=None,
                 lease_name_help="The Lease its replicas elect a leader on (default: kaisched; "
                                 "with a nodePool in the config, kaisched-<pool>: one per shard).")
@click.option("--binders", type=click.IntRange(1, 64), default=32, show_default=True, metavar="N",
              help="Requests in flight at once (binds first, then status and Events).")
@click.option("--api-qps", type=click.FloatRange(min=0), default=1000.0, show_default=True,
              metavar="N",
              help="Writes a second, binds and status alike, on average (0: no limit).")
@click.option("--api-burst", type=click.IntRange(min=1), default=2000, show_default=True,
              metavar="N",
              help="Writes at once above --api-qps.")
@click.option("--cycles", type=click.IntRange(min=1), metavar="N",
              help="Stop after this many cycles (default: run until SIGTERM).")
@click.option("--memory-limit", metavar="SIZE", callback=_memory_limit,
              help="Check the cluster at start against this much memory (6Gi; 0: no check) "
                   "instead of the container's limit.")
def run(kubeconfig: str | None, config_path: str | None, metrics_port: int,
        lease: LeaseOptions, binders: int, api_qps: float, api_burst: int, cycles: int | None,
        memory_limit: str | None) -> None:
    """The scheduler against a cluster: leader election, /metrics, /healthz."""
    from kaisched.api.clock import WallClock
    from kaisched.cluster.kube import KubeCluster
    from kaisched.runtime.binder import Binder
    from kaisched.runtime.metrics import Metrics
    from kaisched.runtime.scheduler import Scheduler, serve
    from kaisched.runtime.throttle import WriteThrottle
    from kaisched.service.health import Health

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    registry = register_builtins()
    config = _config(config_path, registry, None)
    client = KubeCluster(kubeconfig, workers=binders)
    _check_memory(client, memory_limit)
    clock = WallClock()
    pool = config.node_pool
    elector = lease.elector(client.with_timeout(5.0), clock,
                            shard_lease(pool.value if pool is not None else None))
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


def _check_memory(client: KubeCluster, flag: str | None) -> None:
    """Refuse, in one line, a cluster too big for the memory given, before
    the first lists fill it (the counts come from lists of one object)."""
    from kaisched.cluster.kinds import NODE, POD
    from kaisched.service import memorylimit

    if flag is not None:
        limit: int | None = memorylimit.parse_limit(flag)
        source = f"--memory-limit {flag}"
    else:
        limit, source = memorylimit.cgroup_limit(), "the container's limit (cgroup)"
    if not limit:
        return
    nodes, pods = client.count(NODE), client.count(POD)
    if nodes is None or pods is None:
        logging.getLogger("kaisched").info(
            "the API server did not say how many nodes and pods there are: memory not checked")
        return
    found = memorylimit.shortfall(nodes, pods, limit, source)
    if found is not None:
        raise click.ClickException(found)


def shard_lease(pool: str | None) -> str:
    """The Lease of a shard's replicas: kaisched, or kaisched-<pool> (a pool's
    value made a valid object name)."""
    if pool is None:
        return "kaisched"
    name = re.sub(r"[^a-z0-9.-]+", "-", pool.lower()).strip("-.")
    return f"kaisched-{name}"[:253]


class _FormatOrOldPath(click.Choice):
    """snapshot-dump's -o: a format; for one release, any other value is the file to
    write, as -o meant before, with a deprecation line."""

    name = "format"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value in self.choices:
            return value
        click.echo(f"warning: -o {value}: -o now names a format (json or yaml); a file is "
                   f"-f FILE or a path after the command. -o FILE is taken as -f {value} "
                   "until the next release", err=True)
        return _OldPath(value)


class _OldPath(str):
    """The file of a deprecated `-o FILE`."""


@main.command("snapshot-dump")
@click.argument("path", required=False, metavar="[FILE]", type=click.Path(dir_okay=False))
@click.option("--kubeconfig", type=click.Path(dir_okay=False), help=KUBECONFIG_HELP)
@click.option("-f", "--file", "file", type=click.Path(dir_okay=False),
              help="The Snapshot file to write (or FILE after the command; '-' or none: "
                   "standard output).")
@click.option("-o", "--output", "output", type=_FormatOrOldPath(["json", "yaml"]),
              default="json", show_default=True,
              help="json or yaml: how the Snapshot is written (a file name here is taken "
                   "as -f, with a warning, until the next release).")
@click.option("--config", "config_path", metavar="FILE",
              help="The scheduler config to record (default: built-in).")
@click.option("--redact", is_flag=True,
              help="Keep only what scheduling reads: no env, commands, images, foreign annotations.")
def snapshot_dump(path: str | None, kubeconfig: str | None, file: str | None, output: str,
                  config_path: str | None, redact: bool) -> None:
    """Write the cluster's scheduling state as a Snapshot (to FILE, else standard output),
    to replay, explain or simulate from."""
    import yaml

    from kaisched.cluster.files import check_writable
    from kaisched.cluster.snapshot import build_snapshot

    given = [(flag, p) for flag, p in (("FILE", path), ("-f", file),
                                      ("-o", output if isinstance(output, _OldPath) else None))
             if p is not None]
    if len(given) > 1:
        raise click.UsageError("give the file once: " + " and ".join(
            f"{flag} {p}" if flag != "FILE" else p for flag, p in given))
    flag, target = given[0] if given else ("-f", "-")
    fmt = "json" if isinstance(output, _OldPath) else output
    if target != "-":
        check_writable(target, flag if flag != "FILE" else "FILE")  # before the cluster is read
    config = _config(config_path, register_builtins(), None)
    taken = time.time()
    items = _read_live(kubeconfig, "snapshot-dump")
    snapshot = build_snapshot(items, config.to_dict(), redact, taken)
    data = orjson.dumps(snapshot, option=orjson.OPT_INDENT_2) if fmt == "json" else \
        yaml.safe_dump(orjson.loads(orjson.dumps(snapshot)), sort_keys=False).encode()
    if target == "-":
        click.echo(data.rstrip(b"\n"))
    else:
        Path(target).write_bytes(data)
        click.echo(f"{len(items)} objects written to {target}", err=True)


@main.command()
@click.argument("name", metavar="NAME")
@click.option("--snapshot", "snapshot_path", type=click.Path(dir_okay=False),
              help="Snapshot, List or multi-document YAML of the cluster.")
@click.option("--kubeconfig", type=click.Path(dir_okay=False),
              help="Read the live cluster instead (only read: nothing is written to it).")
@click.option("--config", "config_path", metavar="FILE",
              help="Scheduler config YAML (default: the snapshot's, else built-in).")
@click.option("--strict", is_flag=True,
              help="An object a cluster would refuse is an error, not skipped with a warning.")
@output_option("text", "json", "yaml", default="text",
               help="json or yaml: the decision in fields, for tools (docs/explain-json.md).")
@kube_version_option
def explain(name: str, snapshot_path: str | None, kubeconfig: str | None,
            config_path: str | None, strict: bool, output: str) -> None:
    """Why NAME is pending: per task and node, its queue, its gang shortfall.

    NAME is a PodGroup or a pod as NAMESPACE/NAME, or a workload as
    [NAMESPACE/]KIND/NAME (pytorchjob/bert). The cluster is read from
    --snapshot FILE or, live, from --kubeconfig PATH; one scheduling cycle
    runs on a copy of it.
    """
    from kaisched.tools.explain import explain_report

    if (snapshot_path is None) == (kubeconfig is None):
        raise click.UsageError("give the cluster as --snapshot FILE or --kubeconfig PATH (one of them)")
    registry = register_builtins()
    if snapshot_path is not None:
        loaded = _load(snapshot_path, strict)
        objects, embedded = loaded.objects, loaded.config
    else:
        objects, embedded = _read_live(kubeconfig, "explain"), None
    config = _config(config_path, registry, embedded)
    report = explain_report(objects, name, config, registry)
    if output != "text":
        emit(report.fields, output)
        return
    for line in report.lines:
        say(line)


def _duration_option(value: str | None, flag: str) -> float | None:
    from kaisched.api.quantity import parse_duration

    if value is None:
        return None
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=flag) from None


# A command that reads a cluster once (snapshot-dump, explain) asks again after these
# pauses while the API server cannot be reached, then gives up.
READ_RETRIES = (1.0, 2.0, 4.0)


def _read_live(kubeconfig: str | None, command: str) -> list[dict[str, Any]]:
    """Every object scheduling reads, listed from the cluster; while the API server
    cannot be reached, asked again a few times (said once on stderr), then an error."""
    from kaisched.cluster.kinds import SCHEDULING_KINDS
    from kaisched.cluster.kube import KubeCluster
    from kaisched.cluster.reachability import Reachability
    from kaisched.errors import NotFoundError, UnreachableError

    waits = sum(READ_RETRIES)
    health = Reachability(meanwhile=f"{command} is retrying for {waits:g}s; nothing is written "
                                    "until it answers",
                          say=lambda line: click.echo(f"warning: {line}", err=True))
    client = KubeCluster(kubeconfig, health=health)
    items: list[dict[str, Any]] = []
    try:
        for kind in SCHEDULING_KINDS:
            for pause in (*READ_RETRIES, None):
                try:
                    items.extend(client.list(kind))
                    break
                except NotFoundError:
                    break       # a CRD that is not installed (scheduler-plugins PodGroup)
                except UnreachableError as exc:
                    if pause is None:
                        raise UnreachableError(f"{exc}; gave up after retrying for "
                                               f"{waits:g}s") from None
                    time.sleep(pause)
    finally:
        client.close()
    return items


@main.command()
@click.argument("scenario", required=False, metavar="[SCENARIO]")
@click.option("--list", "list_bundled", is_flag=True,
              help="List the bundled scenarios and configs, a line each, and exit.")
@click.option("--config", "config_path", metavar="FILE",
              help="Scheduler config YAML, or a bundled config's name (default: built-in).")
@click.option("--compare", "compare_path", metavar="FILE",
              help="A second scheduler config (a file or a bundled name): run both on the "
                   "same scenario, side by side.")
@click.option("--seed", type=click.IntRange(min=0), metavar="N",
              help="Seed of a generated workload (the scenario's generate: block; a warning "
                   "without one).")
@output_option("text", "json", "yaml", "wide", default="text",
               help="json or yaml: the same figures as the tables and every job's history; "
                    "wide: the tables with every column (as --wide).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False),
              help="Draw utilisation, each queue's use against its fair share and the job "
                   "timeline into this file (.png, .svg or .pdf).")
@click.option("--strict", is_flag=True,
              help="A job a cluster would refuse is an error, not reported as failed.")
@kube_version_option
@click.option("--from-snapshot", "snapshot_path", type=click.Path(dir_okay=False),
              help="Start from this cluster (a Snapshot file): its nodes, queues and "
                   "running and waiting jobs; SCENARIO then adds jobs, and nodes and queues "
                   "the snapshot does not have.")
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
              metavar="N",
              help="The most nodes, and generated jobs, a scenario may ask for.")
def simulate(scenario: str | None, list_bundled: bool, config_path: str | None,
             compare_path: str | None,
             seed: int | None, output: str, plot_path: str | None, strict: bool,
             snapshot_path: str | None, remaining: str | None, wide: bool,
             until: str | None, dump_path: str | None, max_objects: int) -> None:
    """Run SCENARIO (default: the bundled demo) in virtual time and report.

    SCENARIO is a scenario file or the name of a bundled one (--list names
    them); a file of that name wins. With --from-snapshot FILE, a what-if on a
    real cluster: the run starts from the snapshot and SCENARIO (optional) adds
    jobs, and nodes and queues the snapshot does not have.
    """
    import sys

    from kaisched.sim.bundled import listing, resolve
    from kaisched.sim.runner import WhatIf, check_outputs
    from kaisched.sim.runner import simulate as run_simulation

    if list_bundled:
        for line in listing(shutil.get_terminal_size().columns):
            click.echo(line)
        return
    check_outputs(plot_path, dump_path)
    scenario = _bundled_or_file(scenario, resolve,
                                *(("what-if", "scenario") if snapshot_path else ("scenario",)))
    config_file = _bundled_or_file(config_path, resolve, "config")
    compare_file = _bundled_or_file(compare_path, resolve, "config")
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
    configs = [(first, _config(config_file, registry, embedded))]
    if compare_path:
        configs.append((compare_path, _config(compare_file, registry, None)))
    if output == "wide":
        output, wide = "text", True
    run_simulation(scenario, configs, seed, output, plot_path, sys.stdout, sys.stderr, strict,
                   what_if, wide, max_objects, _duration_option(until, "--until"), dump_path)


def _bundled_or_file(arg: str | None, resolve: Any, *kinds: str) -> str | None:
    """A file as given, else the bundled file of that name and kind (a scenario, a
    config); a bundled file of another kind, or nothing, is one error line that names
    the bundled files of the kind wanted."""
    from kaisched.sim.bundled import misplaced, names_hint

    if arg is None:
        return None
    if not Path(arg).exists() and "/" not in arg:
        wrong = misplaced(arg, kinds)
        if wrong is not None:
            raise PathError(wrong)
    found = resolve(arg)
    if not Path(found).exists():
        if "/" in arg:      # a path, not a name
            raise PathError(f"{arg}: no such file")
        what = " or ".join(kinds)
        raise PathError(f"{arg}: no such file, nor a bundled {what} of that name; "
                         f"{names_hint(kinds[0])}")
    return str(found)


@main.command(help="Run a performance SCENARIO and print one JSON line of figures.\n\n"
                   "\b\nSCENARIO is one of:\n"
                   + "\n".join(f"  {name:<12} {line}" for name, line in BENCHES.items()),
              short_help="Run a performance SCENARIO and print one JSON line of figures.")
@click.argument("scenario", type=click.Choice(list(BENCHES)), metavar="SCENARIO")
@click.option("--scale", type=click.FloatRange(min=0.001, max=10), default=1.0, show_default=True,
              metavar="F",
              help="Multiply the scenario's node and pod counts (for quick checks).")
@click.option("--profile", type=click.IntRange(min=0), default=0, metavar="N",
              help="Add the top N entries of a profile of the measured cycle (its timings "
                   "are then the profiler's).")
@click.option("--config", "config_path", metavar="FILE",
              help="Scheduler config YAML for the scenarios run in this process "
                   "(default: built-in), e.g. to measure usage memory on.")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), metavar="FILE",
              help="e2e: the admin kubeconfig of the API server to measure against.")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True, metavar="N",
              help="e2e: how many runs of both schedulers.")
@click.option("--kube-scheduler", "kube_scheduler", default="/tmp/k8s/bin/kube-scheduler",
              show_default=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="e2e: the stock kube-scheduler binary to compare with.")
@click.option("--prefix", default="kaisched-e2e", show_default=True, metavar="NAME",
              help="e2e: the name of the namespace and of the nodes it creates.")
@output_option("json", "yaml", default="json",
               help="json: the figures on one line; yaml: a line each.")
def bench(scenario: str, scale: float, profile: int, config_path: str | None,
          kubeconfig: str | None, runs: int, kube_scheduler: str, prefix: str,
          output: str) -> None:
    import sys

    from kaisched.bench.scenarios import run
    from kaisched.console import Elapsed

    in_process = scenario not in ("binds", "simulate", "what-if-10k", "e2e")
    if profile and not in_process:
        raise click.UsageError("--profile is for the scenarios on the in-process API server")
    if config_path and not in_process:
        raise click.UsageError("--config is for the scenarios on the in-process API server")
    if scenario == "e2e":
        if kubeconfig is None:
            raise click.UsageError("e2e runs against a real API server: give --kubeconfig PATH")
        if not Path(kubeconfig).is_file():
            raise click.UsageError(f"--kubeconfig {kubeconfig}: no such file")
        from kaisched.bench.e2e import run_e2e
        with Elapsed(f"bench {scenario}", sys.stderr):
            figures = run_e2e(kubeconfig, runs, kube_scheduler, prefix, scale)
    else:
        config = _config(config_path, register_builtins(), None) if config_path else None
        with Elapsed(f"bench {scenario}", sys.stderr):      # on a terminal only
            figures = run(scenario, scale, profile, config)
    if output == "yaml":
        emit(figures, "yaml")
    else:
        click.echo(orjson.dumps(figures))


if __name__ == "__main__":     # python -m kaisched.cli, for a checkout not installed
    main()
