"""The podgrouper command line: `run` (the controller on a cluster) and
`sync FILE` (one pass over plain manifests, printing the PodGroups it makes).
Errors print one line, never a traceback."""
from __future__ import annotations

import logging
import signal
import threading
from typing import Any

import click
import orjson
import yaml

from kaisched.api.types import DEFAULT_SCHEDULER
from kaisched.console import OneLineGroup, kubeconfig_option, output_option, replica_options
from kaisched.errors import ApiError, InputError
from kaisched.service.leader import LeaseOptions


def _duration(_ctx: click.Context, param: click.Parameter, value: str) -> float:
    from kaisched.api.quantity import parse_duration

    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param=param) from None
    if param.name == "period" and seconds <= 0:
        raise click.BadParameter("must be positive", param=param)
    return seconds


@click.group(cls=OneLineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kaisched", prog_name="podgrouper")
def main() -> None:
    """PodGrouper: gives each kaisched pod the PodGroup of its top owner."""


@main.command()
@kubeconfig_option
@click.option("--period", default="1s", show_default=True, callback=_duration, metavar="DURATION",
              help="How often to handle what the watch reported.")
@click.option("--owner-resync", default="30s", show_default=True, callback=_duration,
              metavar="DURATION",
              help="How often the owners of existing PodGroups are re-read to follow scaling.")
@click.option("--scheduler-name", default="kaisched", show_default=True, metavar="NAME",
              help="Group only pods with this spec.schedulerName.")
@replica_options(metrics_port=8081, lease_name="kaisched-podgrouper",
                 lease_name_help="The Lease its replicas share.")
def run(kubeconfig: str | None, period: float, owner_resync: float, scheduler_name: str,
        metrics_port: int, lease: LeaseOptions) -> None:
    """Run the controller against a cluster until SIGTERM or Ctrl-C: one replica
    at a time through a Lease, /metrics, /healthz and /readyz."""
    from kaisched.api.clock import WallClock
    from kaisched.cluster.kube import KubeCluster
    from kaisched.service.health import Health
    from podgrouper.controller import PodGrouper
    from podgrouper.metrics import GrouperMetrics

    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from kaisched.cluster.reachability import Reachability

    client = KubeCluster(kubeconfig=kubeconfig, health=Reachability(
        meanwhile="grouping pauses and is retried; the PodGroups made are kept"))
    clock = WallClock()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    elector = lease.elector(client.with_timeout(5.0), clock, "kaisched-podgrouper")
    grouper = PodGrouper(client, clock, scheduler_name=scheduler_name,
                         owner_resync=owner_resync)
    metrics = GrouperMetrics()
    health = Health(period, leading=elector.is_leading if elector is not None else lambda: True,
                    synced=lambda: grouper.synced, watching=client.watching)
    server = metrics.serve(metrics_port, health=health) if metrics_port else None
    if elector is None:
        logging.getLogger("podgrouper").info("leader election is off (--no-leader-elect): "
                                             "this replica groups alone")
    try:
        grouper.run(stop, period, elector, metrics, health)
    finally:
        client.close()
        if server is not None:
            server.shutdown()


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--scheduler-name", default="kaisched", show_default=True, metavar="NAME",
              help="Group only pods with this spec.schedulerName.")
@output_option("yaml", "json", default="yaml",
               help="yaml: the PodGroups as documents; json: as a kind: List.")
def sync(file: str, scheduler_name: str, output: str) -> None:
    """Load FILE (multi-document YAML of plain objects: owners and their pods),
    run one sync, and print the PodGroups it made. Warnings go to stderr, and
    for each workload that made none, why."""
    from kaisched.api.clock import ManualClock
    from kaisched.cluster.kinds import EVENT, PODGROUP
    from kaisched.cluster.memory import MemoryCluster
    from kaisched.cluster.snapshot import load_file
    from podgrouper.controller import PodGrouper
    from podgrouper.owners import describe
    from podgrouper.podgroup import COMPUTED_ANNOTATION, is_managed

    objects = load_file(file).objects          # an unusable file: one line, exit 1
    clock = ManualClock()
    cluster = MemoryCluster(clock)
    for obj in objects:
        try:
            cluster.create(obj)
        except ApiError as exc:
            raise InputError(f"{file}: {describe(obj)}: {exc}") from None
    PodGrouper(cluster, clock, scheduler_name=scheduler_name).sync()
    for event in cluster.list(EVENT):
        involved = event.get("involvedObject") or {}
        where = f"{involved.get('kind')} {involved.get('namespace')}/{involved.get('name')}"
        click.echo(f"warning: {where}: {event.get('reason')}: {event.get('message')}", err=True)
    groups = [pg for pg in cluster.list(PODGROUP) if is_managed(pg)]
    made = [_shown(pg, COMPUTED_ANNOTATION) for pg in groups]
    if output == "json":
        click.echo(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": made},
                                option=orjson.OPT_INDENT_2))
    elif made:
        click.echo(yaml.safe_dump_all(made, sort_keys=False), nl=False)
    for line in _made_none(objects, groups, cluster, scheduler_name):
        click.echo(f"note: {line}", err=True)
    click.echo(f"{len(made)} PodGroup(s) made", err=True)


def _made_none(objects: list[dict[str, Any]], groups: list[dict[str, Any]], cluster: Any,
               scheduler_name: str) -> list[str]:
    """For each workload of the file that no PodGroup was made for, why: no pods at all,
    none of the pods it owns, or its pods for another scheduler."""
    from kaisched.api.workloadkinds import of_object
    from kaisched.cluster.kinds import POD, kind_for
    from podgrouper.owners import OwnerRef, controller_refs, top_owner

    def key(obj: dict[str, Any]) -> tuple[str, str, str]:
        meta = obj.get("metadata") or {}
        return str(obj.get("kind")), str(meta.get("namespace") or "default"), str(meta.get("name"))

    grouped = {(str(ref.get("kind")), str(g["metadata"].get("namespace") or "default"),
                str(ref.get("name")))
               for g in groups for ref in g["metadata"].get("ownerReferences") or ()}

    def read(namespace: str, ref: OwnerRef) -> Any:
        return cluster.get(kind_for(ref.api_version, ref.kind), namespace, ref.name)

    pods = cluster.list(POD)
    tops: dict[tuple[str, str, str], list[str]] = {}      # top owner: its pods' schedulerNames
    for pod in pods:
        walk = top_owner(pod, read)
        for owner in walk.owners:
            tops.setdefault(key(dict(owner)), []).append(
                str((pod.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER))
    lines = []
    for obj in objects:
        kind = of_object(obj.get("apiVersion"), obj.get("kind"))
        if kind is None or obj.get("kind") == "Pod" or controller_refs(obj)[0] \
                or key(obj) in grouped:
            continue
        what, namespace, name = key(obj)
        if not pods:
            why = "no pods in the file; the PodGrouper groups pods by their top owner " \
                  "(an operator makes the pods: `kaisched simulate` emulates operators)"
        elif key(obj) not in tops:
            why = "none of the file's pods is owned by it (a pod's ownerReferences, " \
                  "controller: true, lead to its top owner)"
        elif scheduler_name not in tops[key(obj)]:
            others = ", ".join(sorted(set(tops[key(obj)])))
            why = f"its {len(tops[key(obj)])} pod(s) have schedulerName {others}, not " \
                  f"{scheduler_name} (--scheduler-name)"
        else:
            why = "its pods made none (the warnings above say why)"
        lines.append(f"{what} {namespace}/{name}: no PodGroup made: {why}")
    return lines


def _shown(group: dict[str, Any], hidden_annotation: str) -> dict[str, Any]:
    """The PodGroup as a user would write it: no server-set or internal fields."""
    server_set = ("uid", "resourceVersion", "generation", "creationTimestamp", "annotations")
    meta = {k: v for k, v in group["metadata"].items() if k not in server_set}
    annotations = {k: v for k, v in (group["metadata"].get("annotations") or {}).items()
                   if k != hidden_annotation}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": group["apiVersion"], "kind": group["kind"], "metadata": meta,
            "spec": group["spec"]}
