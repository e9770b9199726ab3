"""What the kaisched commands read, checked the same way for each: the scheduler
config (a file or a bundled name), a Snapshot or manifest file (what a cluster would
refuse is skipped or refused), the live cluster (retried while it cannot be reached),
durations, and the bundled scenarios and configs by name."""
from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kaisched.errors import PathError
from kaisched.framework import Registry, SchedulerConfig, default_config, load_config

if TYPE_CHECKING:
    from kaisched.cluster.snapshot import LoadedFile


# Lines of objects skipped from one file, at most (a big snapshot can have thousands).
MAX_SKIPPED_LINES = 20


def scheduler_config(path: str | None, registry: Registry, embedded: dict[str, Any] | None) -> SchedulerConfig:
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


def say_what_is_missing(path: str, objects: list[dict[str, Any]]) -> None:
    """A file with no pods (or no nodes) replays to nothing: say why."""
    kinds = {str(o.get("kind")) for o in objects}
    if "Pod" not in kinds:
        owners = sorted(kinds - {"Namespace", "Node", "Queue", "PriorityClass", "PodGroup"})
        made = f" (its {', '.join(owners)} would get pods from an operator, which replay " \
               "does not run; `kaisched simulate` emulates operators)" if owners else ""
        click.echo(f"note: {path} has no pods: nothing to schedule{made}", err=True)
    elif "Node" not in kinds:
        click.echo(f"note: {path} has no Nodes: every pod stays pending", err=True)


def load_checked(path: str, strict: bool) -> LoadedFile:
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


def duration(value: str | None, flag: str) -> float | None:
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


def read_live(kubeconfig: str | None, command: str) -> list[dict[str, Any]]:
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


def bundled_or_file(arg: str | None, resolve: Any, *kinds: str) -> str | None:
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
