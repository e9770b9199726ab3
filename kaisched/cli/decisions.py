"""`kaisched replay` and `kaisched explain`: the decisions one or more cycles make on a
cluster read from a file (or, for explain, live), printed for people or tools."""
from __future__ import annotations

import click

from kaisched.builtins.catalog import register_builtins
from kaisched.cli import inputs
from kaisched.console import emit, output_option, say


@click.command()
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
@inputs.kube_version_option
def replay(file: str, config_path: str | None, sessions: int, output: str, strict: bool) -> None:
    """Replay FILE (Snapshot, List or multi-document YAML) and print the decisions."""
    from kaisched.cache.convert.workloads import V1ALPHA2_CONDITION, V1BETA1_CONDITION
    from kaisched.tools.replay import replay as run_replay

    loaded = inputs.load_checked(file, strict)
    inputs.say_what_is_missing(file, loaded.objects)
    registry = register_builtins()
    config = inputs.scheduler_config(config_path, registry, loaded.config)
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


@click.command()
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
@inputs.kube_version_option
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
        loaded = inputs.load_checked(snapshot_path, strict)
        objects, embedded = loaded.objects, loaded.config
    else:
        objects, embedded = inputs.read_live(kubeconfig, "explain"), None
    config = inputs.scheduler_config(config_path, registry, embedded)
    report = explain_report(objects, name, config, registry)
    if output != "text":
        emit(report.fields, output)
        return
    for line in report.lines:
        say(line)
