"""The podgrouper command line: `run` (the controller on a cluster) and
`sync FILE` (one pass over plain manifests, printing the PodGroups it makes).
Errors print one line, never a traceback."""
from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from typing import Any

import click
import orjson
import yaml

from kaisched.console import OneLineGroup, output_option
from kaisched.errors import ApiError, InputError


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
@click.option("--kubeconfig", type=click.Path(dir_okay=False),
              help="Kubeconfig file (default: the in-cluster config, else $KUBECONFIG or "
                   "~/.kube/config).")
@click.option("--period", default="1s", show_default=True, callback=_duration, metavar="DURATION",
              help="How often to handle what the watch reported.")
@click.option("--owner-resync", default="30s", show_default=True, callback=_duration,
              metavar="DURATION",
              help="How often the owners of existing PodGroups are re-read to follow scaling.")
@click.option("--scheduler-name", default="kaisched", show_default=True, metavar="NAME",
              help="Group only pods with this spec.schedulerName.")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=8081, show_default=True,
              metavar="PORT",
              help="Port of /metrics, /healthz and /readyz (0: none).")
@click.option("--lease-namespace", metavar="NAMESPACE",
              default=lambda: os.environ.get("POD_NAMESPACE", "kaisched-system"),
              show_default="$POD_NAMESPACE, else the namespace kaisched-system",
              help="Namespace of the Lease that elects the leader.")
@click.option("--lease-name", default="kaisched-podgrouper", show_default=True, metavar="NAME",
              help="The Lease its replicas share.")
@click.option("--identity", metavar="NAME",
              default=lambda: os.environ.get("POD_NAME") or socket.gethostname(),
              show_default="$POD_NAME or the host name",
              help="This replica's name on the Lease (unique among the replicas).")
@click.option("--no-leader-elect", "no_leader_elect", is_flag=True,
              help="Run a single replica without a Lease (never run two like this).")
def run(kubeconfig: str | None, period: float, owner_resync: float, scheduler_name: str,
        metrics_port: int, lease_namespace: str, lease_name: str, identity: str,
        no_leader_elect: bool) -> None:
    """Run the controller against a cluster until SIGTERM or Ctrl-C: one replica
    at a time through a Lease, /metrics, /healthz and /readyz."""
    from kaisched.api.clock import WallClock
    from kaisched.cluster.kube import KubeCluster
    from kaisched.service.health import Health
    from kaisched.service.leader import LeaderElector
    from podgrouper.controller import PodGrouper
    from podgrouper.metrics import GrouperMetrics

    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    client = KubeCluster(kubeconfig=kubeconfig)
    clock = WallClock()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    elector = None if no_leader_elect else LeaderElector(
        client.with_timeout(5.0), clock, identity, lease_namespace, lease_name)
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
    run one sync, and print the PodGroups it made. Warnings go to stderr."""
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
    made = [_shown(pg, COMPUTED_ANNOTATION) for pg in cluster.list(PODGROUP) if is_managed(pg)]
    if output == "json":
        click.echo(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": made},
                                option=orjson.OPT_INDENT_2))
    elif made:
        click.echo(yaml.safe_dump_all(made, sort_keys=False), nl=False)
    click.echo(f"{len(made)} PodGroup(s) made", err=True)


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
