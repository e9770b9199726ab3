"""What `kaisched simulate` does: find the scenario (the bundled demo by
default), run it under one config or two, show progress on stderr, print the
report and draw the plot."""
from __future__ import annotations

import time
from pathlib import Path
from typing import TextIO

import attrs
import orjson
import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

from kaisched.cluster.files import check_writable
from kaisched.errors import InputError
from kaisched.framework import SchedulerConfig
from kaisched.sim import consolidation as moves
from kaisched.sim.admission import refusals
from kaisched.sim.bundled import DEMO, examples_dir, find_bundled
from kaisched.sim.generator import DEFAULT_SEED
from kaisched.sim.report import build_report, render, render_compare
from kaisched.sim.scenario import MAX_OBJECTS, Scenario, base_scenario, load_scenario
from kaisched.sim.simulation import SimResult, Simulation, node_name
from kaisched.sim.start import DEFAULT_REMAINING, REMAINING_ANNOTATION, Adopted, Start, adopt, read_start
from kaisched.sim.timeline import hms

# Text width when the output is not a terminal (or with --wide): wide enough
# that no row wraps, and the same bytes on every run.
PIPE_WIDTH = 1000
# A run shorter than this shows no progress bar.
BAR_DELAY = 2.0


def bundled(name: str = DEMO) -> Path:
    """A bundled example (package data, so a wheel has it as a checkout does)."""
    found = find_bundled(name)
    if found is None:
        raise InputError(f"the bundled {name} is missing from {examples_dir()}; "
                         "give a scenario file")
    return found


@attrs.frozen
class WhatIf:
    """A run from a snapshot: the cluster it starts from and its jobs' run times."""
    objects: tuple[dict, ...]
    source: str
    remaining: float | None = None
    taken: float | None = None


def simulate(scenario_path: str | None, configs: list[tuple[str, SchedulerConfig]],
             seed: int | None, output: str, plot: str | None, out: TextIO,
             err: TextIO, strict: bool = False, what_if: WhatIf | None = None,
             wide: bool = False, max_objects: int = MAX_OBJECTS, until: float | None = None,
             dump: str | None = None) -> None:
    check_outputs(plot, dump)
    start: Start | None = None
    adopted: list[Adopted] = []
    if what_if is not None:
        scenario, start, adopted = _what_if(what_if, scenario_path, configs[0][1], seed,
                                            max_objects, err)
        path: object = scenario_path or what_if.source
    else:
        path = scenario_path or bundled()
        scenario = load_scenario(path, seed, max_objects=max_objects)
        if seed is not None and scenario.seed is None:
            err.write(f"warning: --seed {seed} changes nothing: {path} has no generate: block "
                      "(its jobs are listed, not drawn)\n")
    if until is not None:
        scenario = attrs.evolve(scenario, until=until)
    report_refusals(scenario, configs[0][1].scheduler_name, path, strict, err)
    results: list[tuple[str, SimResult]] = []
    show = err.isatty()
    for label, config in configs:
        sim = Simulation(scenario, config, start=start, adopted=adopted)
        results.append((label, _run(sim, f"{scenario.name} ({label})", show, err)))
        if dump and len(results) == 1:
            # The virtual cluster where the run stopped, as snapshot-dump writes a real one.
            Path(dump).write_bytes(orjson.dumps(sim.snapshot()))
            err.write(f"the cluster at {hms(results[0][1].end)} written to {dump}\n")
    baselines = _baselines(scenario, results, start, adopted, show, err)
    reports = [build_report(result, label, baselines.get(i)) for i, (label, result) in enumerate(results)]
    if plot:
        from kaisched.sim.plot import draw
        draw(results, plot)
    if output in ("json", "yaml"):
        data = reports[0] if len(reports) == 1 else {"compare": reports}
        text = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()
        if output == "yaml":
            text = yaml.safe_dump(orjson.loads(text), sort_keys=True, allow_unicode=True)
        out.write(text if text.endswith("\n") else text + "\n")
        return
    tty = out.isatty()
    # A pipe gets one job per line (no width to fit); a terminal the width it
    # has (a narrower table if need be), or with --wide every column regardless.
    width = None if tty and not wide else PIPE_WIDTH
    console = Console(file=out, width=width, highlight=False, soft_wrap=False,
                      force_terminal=False if not tty else None)
    if len(reports) == 1:
        render(reports[0], console, "full" if tty else "lines")
    else:
        render_compare(reports, console, "full" if tty else "lines")
    if plot:
        console.print(f"plot written to {plot}")


def _baselines(scenario: Scenario, results: list[tuple[str, SimResult]], start: Start | None,
               adopted: list[Adopted], show: bool, err: TextIO) -> dict[int, SimResult]:
    """For each run with consolidation, the same scenario run without it (what
    the wait it saved is told against): a run of the compare when one has that
    config, else one more run, said on stderr."""
    out: dict[int, SimResult] = {}
    for i, (label, result) in enumerate(results):
        if not moves.consolidating(result.config):
            continue
        other = moves.without(result.config)
        found = next((r for _, r in results if r.config == other), None)
        if found is None:
            err.write(f"{scenario.name} ({label}): run again without consolidation, "
                      "for the wait it saved\n")
            found = _run(Simulation(scenario, other, start=start, adopted=adopted),
                         f"{scenario.name} ({label}, without consolidation)", show, err)
        out[i] = found
    return out


def check_outputs(plot: str | None, dump: str | None) -> None:
    """The files a run will write: a path that cannot be written is said before the run
    (and before a snapshot is read), not after it."""
    if plot:
        from kaisched.sim.plot import check_path
        check_path(plot)
    if dump:
        check_writable(dump, "--dump-snapshot")


def _what_if(what_if: WhatIf, scenario_path: str | None, config: SchedulerConfig,
             seed: int | None, max_objects: int, err: TextIO
             ) -> tuple[Scenario, Start, list[Adopted]]:
    """The snapshot's cluster and jobs, and the scenario that adds to them."""
    start = read_start(what_if.objects, what_if.source, config.scheduler_name, what_if.taken)
    scenario = load_scenario(scenario_path, seed, start.base, max_objects) if scenario_path \
        else base_scenario(start.base)
    _no_collision(scenario, scenario_path, what_if)
    adopted, defaulted = adopt(start, what_if.remaining, scenario.remaining,
                               seed if seed is not None else DEFAULT_SEED)
    running = sum(1 for a in adopted if a.running)
    err.write(f"{what_if.source}: {len(adopted)} job(s) of the snapshot, {running} running "
              f"and {len(adopted) - running} waiting, on {sum(p.count for p in start.base.pools)} "
              "nodes\n")
    if defaulted:
        err.write(f"note: {defaulted} job(s) say nothing of their run time "
                  f"({REMAINING_ANNOTATION}): {hms(DEFAULT_REMAINING)} assumed; "
                  "give --remaining or a remaining: distribution in the scenario\n")
    return scenario, start, adopted


def _no_collision(scenario: Scenario, scenario_path: str | None, what_if: WhatIf) -> None:
    """A what-if scenario may add nodes, but none of a name the snapshot has."""
    taken = {str(o["metadata"]["name"]) for o in what_if.objects if o.get("kind") == "Node"}
    for k, pool in enumerate(scenario.node_pools):
        clash = next((node_name(pool.name, i) for i in range(pool.count)
                      if node_name(pool.name, i) in taken), None)
        if clash is not None:
            raise InputError(
                f"{scenario_path}: nodePools[{k}] ({pool.name}): node {clash} is in the snapshot "
                f"{what_if.source} already; give the pool another name (its nodes are named "
                f"{node_name(pool.name, 0)}, {node_name(pool.name, 1)}, ...)")


def report_refusals(scenario: Scenario, scheduler_name: str, path: object, strict: bool,
                    err: TextIO) -> None:
    """Say which jobs a cluster would refuse (their operators make nothing of
    them, and the report lists them as failed); with strict, refuse to run."""
    priorities = dict(scenario.priority_classes)
    refused = 0
    for job in scenario.jobs:
        lines = refusals(job, scheduler_name, priorities)
        refused += bool(lines)
        for line in lines:
            err.write(f"{'refused' if strict else 'skipped'}: job {job.name}: {line}\n")
    if strict and refused:
        raise InputError(f"{path}: {refused} job(s) a cluster would refuse (--strict)")


def _run(sim: Simulation, title: str, show: bool, err: TextIO) -> SimResult:
    if not show:
        return sim.run()
    with ProgressBar(err, title) as bar:
        sim.progress = bar
        return sim.run()


class ProgressBar:
    """A progress bar on a terminal (stderr) for a run that lasts: it shows
    after `delay` seconds, so a quick run prints nothing but its report."""

    def __init__(self, err: TextIO, title: str, delay: float = BAR_DELAY) -> None:
        self.err, self.title, self.delay = err, title, delay
        self.started = time.monotonic()
        self.bar: Progress | None = None
        self.task: TaskID | None = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *_: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def __call__(self, elapsed: float, done: int, total: int) -> None:
        if self.bar is None:
            if time.monotonic() - self.started < self.delay:
                return
            columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TextColumn("jobs done, virtual time {task.fields[clock]}"))
            self.bar = Progress(*columns, console=Console(file=self.err), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.title, total=None, clock="0:00:00")
        assert self.task is not None
        self.bar.update(self.task, completed=done, total=total, clock=hms(elapsed))
