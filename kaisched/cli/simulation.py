"""`kaisched simulate`: a scenario (or a what-if from a Snapshot) in virtual time."""
from __future__ import annotations

import shutil

import click

from kaisched.builtins.catalog import register_builtins
from kaisched.cli import inputs
from kaisched.console import output_option


@click.command()
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
@inputs.kube_version_option
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
    scenario = inputs.bundled_or_file(scenario, resolve,
                                *(("what-if", "scenario") if snapshot_path else ("scenario",)))
    config_file = inputs.bundled_or_file(config_path, resolve, "config")
    compare_file = inputs.bundled_or_file(compare_path, resolve, "config")
    registry = register_builtins()
    what_if, embedded = None, None
    if remaining is not None and snapshot_path is None:
        raise click.UsageError("--remaining is for --from-snapshot")
    if snapshot_path is not None:
        loaded = inputs.load_checked(snapshot_path, strict)
        left = inputs.duration(remaining, "--remaining")
        what_if = WhatIf(tuple(loaded.objects), snapshot_path, left, loaded.taken)
        embedded = loaded.config
    first = config_path or ("the snapshot's config" if embedded is not None else "built-in")
    configs = [(first, inputs.scheduler_config(config_file, registry, embedded))]
    if compare_path:
        configs.append((compare_path, inputs.scheduler_config(compare_file, registry, None)))
    if output == "wide":
        output, wide = "text", True
    run_simulation(scenario, configs, seed, output, plot_path, sys.stdout, sys.stderr, strict,
                   what_if, wide, max_objects, inputs.duration(until, "--until"), dump_path)
