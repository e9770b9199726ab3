"""`kaisched bench`: one performance scenario, its figures on one JSON line."""
from __future__ import annotations

from pathlib import Path

import click
import orjson

from kaisched.bench import BENCHES
from kaisched.builtins.catalog import register_builtins
from kaisched.cli import inputs
from kaisched.console import emit, output_option
from kaisched.runtime.defaults import HEAD_START_PODS


@click.command(help="Run a performance SCENARIO and print one JSON line of figures.\n\n"
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
@click.option("--seed", type=int, default=1, show_default=True, metavar="N",
              help="cluster-life: the trace's seed.")
@click.option("--horizon", type=click.FloatRange(min=60, max=7200), default=300.0,
              show_default=True, metavar="SECONDS",
              help="cluster-life: the trace's length; jobs not started by then are unfinished.")
@click.option("--schedulers", default="kaisched,kube-scheduler", show_default=True,
              metavar="LIST", help="cluster-life: which schedulers run the trace, in order.")
@click.option("--k8s-up", "k8s_up", envvar="KAISCHED_K8S_UP", default=None,
              type=click.Path(dir_okay=False), metavar="FILE",
              help="cluster-life: the script that brought the cluster up, which stops a hollow "
                   "node (--stop-node NAME) and starts them again (--hollow-nodes N) "
                   "[env KAISCHED_K8S_UP].")
@click.option("--plot", metavar="FILE",
              help="cluster-life: draw GPUs held by partly placed gangs and jobs finished "
                   "over time, for each scheduler, into this PNG.")
@click.option("--head-start-pods", type=click.IntRange(min=0), default=HEAD_START_PODS,
              show_default=True, metavar="N",
              help="cold-50k: the scheduler's --head-start-pods (0: no head start).")
@output_option("json", "yaml", default="json",
               help="json: the figures on one line; yaml: a line each.")
def bench(scenario: str, scale: float, profile: int, config_path: str | None,
          kubeconfig: str | None, runs: int, kube_scheduler: str, prefix: str,
          seed: int, horizon: float, schedulers: str, k8s_up: str, plot: str | None,
          head_start_pods: int, output: str) -> None:
    import sys

    from kaisched.bench.scenarios import run
    from kaisched.console import Elapsed

    in_process = scenario not in ("binds", "list-10k", "simulate", "what-if-10k", "e2e",
                                  "cluster-life")
    if profile and not in_process:
        raise click.UsageError("--profile is for the scenarios on the in-process API server")
    if config_path and not in_process:
        raise click.UsageError("--config is for the scenarios on the in-process API server")
    if scenario in ("e2e", "cluster-life"):
        if kubeconfig is None:
            raise click.UsageError(f"{scenario} runs against a real API server: "
                                   "give --kubeconfig PATH")
        if not Path(kubeconfig).is_file():
            raise click.UsageError(f"--kubeconfig {kubeconfig}: no such file")
    if scenario == "cluster-life":
        assert kubeconfig is not None
        from kaisched.bench.clusterlife import SCHEDULERS, run_cluster_life
        only = tuple(s.strip().replace("-", "_") for s in schedulers.split(",") if s.strip())
        if not only or set(only) - set(SCHEDULERS):
            raise click.UsageError("--schedulers: kaisched and/or kube-scheduler")
        with Elapsed(f"bench {scenario}", sys.stderr):
            figures = run_cluster_life(kubeconfig, seed, horizon, kube_scheduler, k8s_up,
                                       "cl-life" if prefix == "kaisched-e2e" else prefix,
                                       plot, only)
    elif scenario == "e2e":
        assert kubeconfig is not None
        from kaisched.bench.e2e import run_e2e
        with Elapsed(f"bench {scenario}", sys.stderr):
            figures = run_e2e(kubeconfig, runs, kube_scheduler, prefix, scale)
    else:
        config = inputs.scheduler_config(config_path, register_builtins(), None) if config_path else None
        with Elapsed(f"bench {scenario}", sys.stderr):      # on a terminal only
            figures = run(scenario, scale, profile, config, head_start_pods)
    if output == "yaml":
        emit(figures, "yaml")
    else:
        click.echo(orjson.dumps(figures))
