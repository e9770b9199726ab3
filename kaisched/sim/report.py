"""The figures of a simulation, as one JSON-ready dict, and the same figures
as rich tables. Only virtual time appears: the same scenario and seed give
the same report, byte for byte.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from rich.console import Console
from rich.table import Table

from kaisched.api.resource import CPU, GPU, MEMORY
from kaisched.sim import consolidation as moves
from kaisched.sim.controllers import JobRun, JobState
from kaisched.sim.meter import GPU_SHARES, SHARED_GPUS
from kaisched.sim.scenario import JobKind
from kaisched.sim.simulation import HELD_IDLE, SimResult
from kaisched.sim.tables import Column, fitted, left_out_note
from kaisched.sim.timeline import Timeline, hms

# Rows of the per-job table in text; JSON always has every job.
TEXT_JOBS = 40


def build_report(result: SimResult, config_name: str,
                 baseline: SimResult | None = None) -> dict[str, Any]:
    """baseline: the same scenario run without consolidation, which the wait
    consolidation saved is told against (when the config has it)."""
    scenario, timeline, end = result.scenario, result.timeline, result.end
    jobs = [_job(run, end) for run in result.runs]
    gang_waits = [j["wait"] for j, run in zip(jobs, result.runs, strict=True)
                  if j["wait"] is not None and _is_gang(run)]
    util = {}
    for name, key in ((GPU, "gpu"), (CPU, "cpu")):
        capacity = _offered(result, name)
        series = timeline.used.get(name, [])
        util[key] = _round(timeline.average(series, end) / capacity, 3) if capacity else None
    res = timeline.resource
    queues = []
    for q in scenario.queues:
        mine = [j for j in jobs if j["queue"] == q.name]
        waits = [j["wait"] for j in mine if j["wait"] is not None]
        used = timeline.queue_used.get(q.name, [])
        fair = timeline.fair_share.get(q.name, [])
        queues.append({
            "name": q.name, "resource": res, "quota": _amount(res, q.quota(res)),
            "limit": _amount(res, limit) if (limit := q.limit(res)) is not None else None,
            "fairShareAvg": _amount(res, timeline.average(fair, end)),
            "usageAvg": _amount(res, timeline.average(used, end)),
            "usagePeak": _amount(res, max(used, default=0.0)),
            "jobs": len(mine), "jobsDone": sum(1 for j in mine if j["state"] == "succeeded"),
            "waitP50": _pct(waits, 50), "waitP90": _pct(waits, 90),
            "podsEvicted": sum(1 for e in timeline.evictions if e.queue == q.name),
            "podsReclaimedFrom": sum(1 for e in timeline.evictions
                                     if e.cause == "reclaim" and e.queue == q.name),
            "podsReclaimedBy": sum(1 for e in timeline.evictions
                                   if e.cause == "reclaim" and e.by_queue == q.name),
            "gpuHoursLost": _round(sum(r.gpu_hours_lost for r in result.runs
                                       if r.spec.queue == q.name), 2),
            **_window_usage(timeline, q.name, end),
        })
    causes: dict[str, int] = {}
    for e in timeline.evictions:
        causes[e.cause] = causes.get(e.cause, 0) + 1
    return {
        "scenario": scenario.name, "description": scenario.description,
        "config": config_name, "seed": scenario.seed,
        "virtualSeconds": _round(end, 1), "stopped": result.stopped,
        "sessions": result.sessions, "invariantChecks": result.checks,
        # With node groups: the nodes at the start, and what the nodes offered on average.
        "cluster": {"nodes": sum(p.count for p in scenario.pools)
                    + sum(g.min for g in scenario.node_groups),
                    "gpus": _round(_offered(result, GPU), 1),
                    "cpus": _round(_offered(result, CPU) / 1000, 1),
                    "gpuUtilisation": util["gpu"], "cpuUtilisation": util["cpu"],
                    "heldIdleGpuHours": _round(timeline.average(timeline.used.get(HELD_IDLE, []),
                                                                end) * end / 3600, 2)},
        "gangWait": {"gangs": len(gang_waits),
                     "waited": sum(1 for w in gang_waits if w > 0),
                     "p50": _pct(gang_waits, 50), "p90": _pct(gang_waits, 90),
                     "p99": _pct(gang_waits, 99),
                     "max": _round(max(gang_waits), 1) if gang_waits else None},
        "jobsByState": {s: sum(1 for j in jobs if j["state"] == s)
                        for s in sorted({j["state"] for j in jobs})},
        "evictions": {"pods": len(timeline.evictions), **dict(sorted(causes.items())),
                      "events": _eviction_events(result)},
        "queues": queues,
        "jobs": jobs,
        **_volumes(result),
        **({moves.ACTION: moves.figures(
            timeline.evictions, jobs,
            [_job(run, baseline.end) for run in baseline.runs] if baseline is not None else None)}
           if moves.consolidating(result.config) else {}),
        **_shared(result),
        **({"autoscaler": dict(result.autoscaler)} if result.autoscaler is not None else {}),
    }


def _offered(result: SimResult, resource: str) -> float:
    """What the nodes offered: on average, where they came and went (an autoscaler)."""
    series = result.timeline.capacity.get(resource)
    if series is not None:
        return result.timeline.average(series, result.end)
    return result.capacity.get(resource, 0.0)


def _shared(result: SimResult) -> dict[str, Any]:
    """Shared GPUs, if any: how many there were on average (each held whole by its
    reservation pod), what their sharers used of them, and so how full each was."""
    timeline, end = result.timeline, result.end
    held = timeline.used.get(SHARED_GPUS, [])
    if not any(held):
        return {}
    used = timeline.used.get(GPU_SHARES, [])
    held_avg, used_avg = timeline.average(held, end), timeline.average(used, end)
    capacity = result.capacity.get(GPU, 0.0)
    whole = [g - h for g, h in zip(timeline.used.get(GPU, []), held, strict=False)]
    in_use = timeline.average(whole, end) + used_avg
    return {"sharedGpus": {"avg": _round(held_avg, 2), "peak": _round(max(held), 1),
                           "sharesAvg": _round(used_avg, 2),
                           "fill": _round(used_avg / held_avg, 3) if held_avg else None,
                           "gpuInUse": _round(in_use / capacity, 3) if capacity else None}}
def _window_usage(timeline: Timeline, queue: str, end: float) -> dict[str, Any]:
    """With usage memory on: the queue's usage (its share of what the cluster
    offered over the window, as its status said) over time, each change once."""
    series = timeline.usage.get(queue)
    if series is None:
        return {}
    changes: list[list[float | None]] = []
    for at, value in zip(timeline.times, series, strict=True):
        point = [_round(at, 1), _round(value, 4)]
        if not changes or changes[-1][1] != point[1]:
            changes.append(point)
    return {"windowUsage": {"resource": timeline.resource,
                            "avg": _round(timeline.average(series, end), 4),
                            "peak": _round(max(series, default=0.0), 4),
                            "end": _round(series[-1] if series else 0.0, 4),
                            "overTime": changes}}


def _volumes(result: SimResult) -> dict[str, Any]:
    """Time claims waited from being asked for (a node selected) to bound, if any did."""
    waits = list(result.volume_waits.values())
    if not waits:
        return {}
    return {"volumeWait": {"claims": len(waits), "p50": _pct(waits, 50), "p90": _pct(waits, 90),
                           "max": _round(max(waits), 1)}}


def _job(run: JobRun, end: float) -> dict[str, Any]:
    spec = run.spec
    waits = _waits(run, end)
    wait = sum(b - a for a, b in waits) if run.started is not None else None
    turnaround = run.finished - run.submitted if run.finished is not None \
        and run.submitted is not None else None
    placed_whole = None
    if run.started is not None and run.min_member is not None:
        placed_whole = run.first_bound >= run.min_member
    running = [(pods, gpus) for _, pods, gpus in run.sizes if pods]
    return {
        "name": f"{spec.namespace}/{spec.name}", "kind": spec.kind.value, "queue": spec.queue,
        "pods": spec.pods, "gpus": _round(spec.total(GPU), 1), "gpuShare": _share(spec),
        "minMember": run.min_member, "priorityClass": spec.priority_class,
        "submitted": _round(run.submitted, 1), "started": _round(run.started, 1),
        "finished": _round(run.finished, 1), "wait": _round(wait, 1),
        "firstWait": _round(run.started - run.submitted, 1)
        if run.started is not None and run.submitted is not None else None,
        "waits": [[_round(a, 1), _round(b, 1)] for a, b in waits],
        "starts": sum(1 for _, state in run.history if state == "running"),
        "turnaround": _round(turnaround, 1), "placedWhole": placed_whole,
        "evictions": run.evictions, "podsEvicted": run.pods_evicted, "podsRemade": run.restarts,
        "gpuHoursLost": _round(run.gpu_hours_lost, 2),
        "ranAt": {"pods": [min(p for p, _ in running), max(p for p, _ in running)],
                  "gpus": [_round(min(g for _, g in running), 1),
                           _round(max(g for _, g in running), 1)]} if running else None,
        "sizes": [[_round(t, 1), p, _round(g, 1)] for t, p, g in run.sizes],
        "history": [[_round(t, 1), state] for t, state in run.history],
        "state": _state(run), "reason": run.never_fits or run.failure,
        "reservedStart": _round(run.reserved_start, 1),
    }


def _waits(run: JobRun, end: float) -> list[tuple[float, float]]:
    """Each stretch of time it was not running, from its arrival to its end:
    the first wait, and every wait after an eviction."""
    out: list[tuple[float, float]] = []
    for i, (at, state) in enumerate(run.history):
        if state in ("waiting", "evicted"):
            until = run.history[i + 1][0] if i + 1 < len(run.history) else end
            if out and out[-1][1] == at:
                out[-1] = (out[-1][0], until)       # evicted, then waiting: one stretch
            else:
                out.append((at, until))
    return [(a, b) for a, b in out if b > a]


def _state(run: JobRun) -> str:
    if run.state is JobState.SUCCEEDED:
        return "succeeded"
    if run.state is JobState.FAILED:
        return "failed"
    if run.never_fits is not None:
        return "never fits"
    if run.state is JobState.WAITING:
        return "not arrived"
    return "running" if run.started is not None else "waiting"


def _is_gang(run: JobRun) -> bool:
    return run.spec.kind is not JobKind.JOB and (run.min_member or run.spec.gang_min()) > 1


def _eviction_events(result: SimResult) -> list[dict[str, Any]]:
    """Evictions grouped by moment, job and cause: one line per gang taken."""
    grouped: dict[tuple[float, str, str, str, str], int] = {}
    for e in result.timeline.evictions:
        key = (e.at, e.job, e.cause, e.by_job, e.by_queue)
        grouped[key] = grouped.get(key, 0) + 1
    rows = []
    for (at, job, cause, by_job, by_queue), pods in sorted(grouped.items()):
        queue = next((r.spec.queue for r in result.runs
                      if f"{r.spec.namespace}/{r.spec.name}" == job), "")
        rows.append({"at": _round(at, 1), "job": job, "queue": queue, "cause": cause,
                     "pods": pods, "byJob": by_job or None, "byQueue": by_queue or None})
    return rows


def _pct(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank percentile: a wait some job really had, never an interpolation
    between two (with two gangs, p50 is the shorter wait, not their mean)."""
    return _round(float(np.percentile(values, q, method="inverted_cdf")), 1) if values else None


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(float(value), digits)


def _amount(name: str, value: float) -> float:
    """Cores for cpu, GiB for memory, units for the rest."""
    if name == CPU:
        return round(value / 1000, 2)
    if name == MEMORY:
        return round(value / 2**30, 2)
    return round(value, 2)


# -- text ------------------------------------------------------------------------------------

def _t(seconds: float | None) -> str:
    return "-" if seconds is None else hms(seconds)


def _pc(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _n(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def render(report: dict[str, Any], console: Console, layout: str = "full") -> None:
    """layout: full (every column), narrow (fewer columns, said so), or lines
    (every column, reasons inline: one job per line, for pipes)."""
    c = report["cluster"]
    console.print(f"[bold]{report['scenario']}[/bold]: {report['description']}".rstrip(": "))
    console.print(f"config {report['config']}"
                  + (f", seed {report['seed']}" if report["seed"] is not None else "")
                  + f"; {_t(report['virtualSeconds'])} of virtual time in {report['sessions']} "
                  f"sessions; stopped: {report['stopped']}")
    grows = " at the start (GPUs and cores on average)" if report.get("autoscaler") else ""
    console.print(f"cluster: {c['nodes']} nodes{grows}, {_n(c['gpus'])} GPUs, {_n(c['cpus'])} cores; "
                  f"GPU utilisation {_pc(c['gpuUtilisation'])}, CPU {_pc(c['cpuUtilisation'])}")
    g = report["gangWait"]
    console.print(f"gang wait: {g['waited']} of {g['gangs']} gangs waited (the time not "
                  f"running: re-waits after evictions count); p50 {_t(g['p50'])}, p90 {_t(g['p90'])}, "
                  f"p99 {_t(g['p99'])}, max {_t(g['max'])}")
    states = ", ".join(f"{n} {s}" for s, n in report["jobsByState"].items())
    console.print(f"jobs: {states}; invariants held in {report['invariantChecks']} checks")
    if report.get("sharedGpus"):
        s = report["sharedGpus"]
        console.print(f"shared GPUs: {_n(s['avg'])} on average (peak {_n(s['peak'])}), each "
                      f"held whole by its reservation pod; their sharers used {_n(s['sharesAvg'])} "
                      f"of them: {_pc(s['fill'])} full; GPUs in use (whole and shares) "
                      f"{_pc(s['gpuInUse'])}")
    reserved = [j for j in report["jobs"]
                if j["reservedStart"] is not None and (j["minMember"] or 1) > 1]
    if reserved:
        console.print("reserved gangs: " + "; ".join(
            f"{j['name']} sure to have its room by {_t(j['reservedStart'])}, started "
            f"{_t(j['started'])}" for j in reserved)
            + f"; GPU-hours held idle {_n(c['heldIdleGpuHours'])}")
    if report.get("autoscaler"):
        a = report["autoscaler"]
        console.print(f"autoscaler: {a['scaleUps']} scale-up(s), {a['nodesAdded']} node(s) added, "
                      f"{a['nodesRemoved']} removed; {_n(a['nodeHours'])} node-hours, cost "
                      f"{_n(a['cost'])}; GPU-hours bought but idle {_n(a['idleGpuHoursBought'])}; "
                      f"ProvisioningRequests {a['requestsProvisioned']} provisioned, "
                      f"{a['requestsFailed']} failed, {a['bookingsExpired']} bookings expired")
    if report.get("volumeWait"):
        v = report["volumeWait"]
        console.print(f"volume wait: {v['claims']} claims provisioned and bound; "
                      f"p50 {_t(v['p50'])}, p90 {_t(v['p90'])}, max {_t(v['max'])}")
    # A terminal gets tables that fit its width without breaking a word (columns left out
    # are named); a pipe, or --wide (a 1000-column console), every column on one line.
    width = console.width if layout == "full" and console.is_terminal else None
    shown = _shown(report["jobs"])
    _print_fitted(console, "jobs", width, *_jobs_table(shown, layout, width))
    hidden = len(report["jobs"]) - TEXT_JOBS
    if hidden > 0:
        console.print(f"... and {hidden} more jobs (the longest waits are shown; "
                      "--output json lists all)")
    if layout != "lines":
        for j in shown:
            if j["reason"]:
                console.print(f"  {j['name']} {j['state']}: {j['reason']}")
    _print_fitted(console, "queues", width, *_queues_table(report["queues"], width))
    if any("windowUsage" in q for q in report["queues"]):
        _print_fitted(console, "usage", width,
                      *_usage_table(report["queues"], report["virtualSeconds"], width))
    events = report["evictions"]["events"]
    if events:
        _print_fitted(console, "evictions", width, *_evictions_table(events, width))
    if moves.ACTION in report:
        for line in moves.lines(report[moves.ACTION]):
            console.print(line)


def _print_fitted(console: Console, what: str, width: int | None, table: Table,
                  dropped: list[str]) -> None:
    if dropped and width is not None:
        console.print(left_out_note(what, width, dropped))
    console.print(table)


# Columns a narrow terminal drops first have the higher `drop`; the rest always show.
_JOB_COLUMNS = (Column("job"), Column("kind", drop=5), Column("queue"),
                Column("pods", True, drop=1), Column("GPUs", True), Column("arrived", drop=6),
                Column("started"), Column("finished", drop=7), Column("wait"),
                Column("turnaround", drop=8), Column("starts", True, drop=3),
                Column("evicted", True, drop=2), Column("pods evicted", True, drop=4),
                Column("GPU-h lost", True, drop=9), Column("state"))


def _shown(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if len(jobs) <= TEXT_JOBS:
        return jobs
    shown = sorted(jobs, key=lambda j: (-(j["wait"] if j["wait"] is not None else 1e18),
                                        j["name"]))[:TEXT_JOBS]
    shown.sort(key=lambda j: (j["submitted"] if j["submitted"] is not None else 1e18, j["name"]))
    return shown


def _share(spec: Any) -> str | None:
    """What each pod of a job that shares GPUs asks: "0.25" of a GPU, "10240 MiB" of one."""
    shares = {dict(r.gpu_share).get("gpu-fraction") or f"{dict(r.gpu_share)['gpu-memory']} MiB"
              for r in spec.roles if r.gpu_share}
    return ", ".join(sorted(shares)) or None


def _gpus(j: dict[str, Any]) -> str:
    """Declared GPUs, and the range it ran at when that differs (an elastic job);
    a share of a GPU as what each pod asks."""
    if j.get("gpuShare"):
        return f"{j['gpuShare']} each"
    ran = j.get("ranAt")
    if ran and (ran["gpus"][0] != j["gpus"] or ran["gpus"][1] != j["gpus"]):
        low, high = ran["gpus"]
        return f"{_n(j['gpus'])} (ran {_n(low)}" + (f"-{_n(high)})" if high != low else ")")
    return _n(j["gpus"])


def _jobs_table(jobs: list[dict[str, Any]], layout: str, width: int | None
                ) -> tuple[Table, list[str]]:
    rows = []
    for j in jobs:
        state = j["state"] + (f" ({j['reason']})" if j["reason"] and layout == "lines" else "")
        rows.append({"job": j["name"], "kind": j["kind"], "queue": j["queue"],
                     "pods": str(j["pods"]), "GPUs": _gpus(j), "arrived": _t(j["submitted"]),
                     "started": _t(j["started"]), "finished": _t(j["finished"]),
                     "wait": _t(j["wait"]), "turnaround": _t(j["turnaround"]),
                     "starts": str(j["starts"]), "evicted": str(j["evictions"]),
                     "pods evicted": str(j["podsEvicted"]), "GPU-h lost": _n(j["gpuHoursLost"]),
                     "state": state})
    return fitted("jobs", _JOB_COLUMNS, rows, width)


_QUEUE_COLUMNS = (Column("queue"), Column("quota", True, drop=3), Column("limit", True, drop=4),
                  Column("fair share avg", True), Column("use avg", True),
                  Column("use peak", True, drop=5), Column("jobs done", True, drop=2),
                  Column("wait p50", True), Column("wait p90", True, drop=1),
                  Column("pods evicted", True, drop=6), Column("pods it reclaimed", True, drop=7),
                  Column("GPU-h lost", True, drop=8))


def _queues_table(queues: list[dict[str, Any]], width: int | None) -> tuple[Table, list[str]]:
    res = queues[0]["resource"] if queues else GPU
    rows = [{"queue": q["name"], "quota": _n(q["quota"]), "limit": _n(q["limit"]),
             "fair share avg": _n(q["fairShareAvg"]), "use avg": _n(q["usageAvg"]),
             "use peak": _n(q["usagePeak"]), "jobs done": f"{q['jobsDone']}/{q['jobs']}",
             "wait p50": _t(q["waitP50"]), "wait p90": _t(q["waitP90"]),
             "pods evicted": str(q["podsEvicted"]), "pods it reclaimed": str(q["podsReclaimedBy"]),
             "GPU-h lost": _n(q["gpuHoursLost"])} for q in queues]
    return fitted(f"queues ({res})", _QUEUE_COLUMNS, rows, width)


USAGE_COLUMNS = 8      # moments of the usage table


def _usage_at(points: list[list[float]], at: float) -> float:
    """The usage the status showed at that moment (the last change before it)."""
    value = 0.0
    for when, usage in points:
        if when > at:
            break
        value = usage
    return value


def _usage_table(queues: list[dict[str, Any]], end: float, width: int | None
                 ) -> tuple[Table, list[str]]:
    res = next(q["windowUsage"]["resource"] for q in queues if "windowUsage" in q)
    moments = [end * i / USAGE_COLUMNS for i in range(1, USAGE_COLUMNS + 1)]
    # A narrow terminal drops the earlier moments first; the queue, the last moment and the
    # average always show.
    columns = [Column("queue"),
               *(Column(_t(at), True, drop=USAGE_COLUMNS - i) for i, at in enumerate(moments, 1)),
               Column("avg", True)]
    rows = [{"queue": q["name"],
             **{_t(at): f"{_usage_at(q['windowUsage']['overTime'], at):.2f}" for at in moments},
             "avg": f"{q['windowUsage']['avg']:.2f}"}
            for q in queues if "windowUsage" in q]
    return fitted(f"usage over time ({res}: held over what the cluster offered in the window, "
                  "recent time weighing more)", columns, rows, width)


_EVICTION_COLUMNS = (Column("at"), Column("job"), Column("queue", drop=2),
                     Column("pods", True, drop=3), Column("cause"), Column("for job"),
                     Column("of queue", drop=1))


def _evictions_table(events: list[dict[str, Any]], width: int | None) -> tuple[Table, list[str]]:
    rows = [{"at": _t(e["at"]), "job": e["job"], "queue": e["queue"], "pods": str(e["pods"]),
             "cause": e["cause"], "for job": e["byJob"] or "-", "of queue": e["byQueue"] or "-"}
            for e in events[:TEXT_JOBS]]
    return fitted("evictions", _EVICTION_COLUMNS, rows, width)


def _usage_cell(queue: dict[str, Any]) -> str:
    usage = queue.get("windowUsage")
    return f"{usage['avg']:.2f} / {usage['peak']:.2f}" if usage else "-"


def _longest(report: dict[str, Any]) -> str:
    waited = [j for j in report["jobs"] if j["wait"] and (j["minMember"] or 0) > 1]
    if not waited:
        return "-"
    job = max(waited, key=lambda j: (j["wait"], j["name"]))
    return f"{job['name']} ({_t(job['wait'])})"


def _reservation_rows(reports: Sequence[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """The reserved gangs' starts beside their reservations' starts (a job of one pod
    held room for is no gang: it is among the others), the other jobs' first waits, and
    the room held for reservations that stood idle."""
    reserved = sorted({j["name"] for r in reports for j in r["jobs"]
                       if j["reservedStart"] is not None and (j["minMember"] or 1) > 1})
    rows = []
    for name in reserved:
        cells = []
        for r in reports:
            job = next(j for j in r["jobs"] if j["name"] == name)
            cells.append(f"{_t(job['started'])} / {_t(job['reservedStart'])}")
        rows.append((f"{name}: started / reserved start", cells))
    others = [[j["firstWait"] for j in r["jobs"] if j["name"] not in reserved
               and j["firstWait"] is not None] for r in reports]
    rows.append(("other jobs: first wait p50 / p95",
                 [f"{_t(_pct(w, 50))} / {_t(_pct(w, 95))}" for w in others]))
    rows.append(("GPU-hours held idle for reservations",
                 [_n(r["cluster"]["heldIdleGpuHours"]) for r in reports]))
    return rows


_AUTOSCALER_ROWS = (("autoscaler: scale-ups / nodes added", "scaleUps", "nodesAdded"),
                    ("autoscaler: node-hours / cost", "nodeHours", "cost"),
                    ("autoscaler: GPU-hours bought but idle", "idleGpuHoursBought", None),
                    ("ProvisioningRequests provisioned / failed", "requestsProvisioned",
                     "requestsFailed"))


def _autoscaler_rows(reports: Sequence[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    rows = []
    for label, first, second in _AUTOSCALER_ROWS:
        cells = []
        for r in reports:
            a = r.get("autoscaler")
            cells.append("-" if not a else _n(a[first]) if second is None
                         else f"{_n(a[first])} / {_n(a[second])}")
        rows.append((label, cells))
    return rows


def render_compare(reports: Sequence[dict[str, Any]], console: Console,
                   layout: str = "full") -> None:
    """Two runs of one scenario, figure by figure (cells wrap at spaces to fit a terminal)."""
    first = reports[0]
    console.print(f"[bold]{first['scenario']}[/bold]: {first['description']}".rstrip(": "))
    width = console.width if layout == "full" and console.is_terminal else None
    labels = [r["config"] for r in reports]
    if len(set(labels)) < len(labels):      # the same config twice: columns need names
        labels = [f"{i + 1}: {label}" for i, label in enumerate(labels)]
    rows: list[tuple[str, list[str]]] = [
        ("virtual time", [_t(r["virtualSeconds"]) for r in reports]),
        ("sessions", [str(r["sessions"]) for r in reports]),
        ("GPU utilisation", [_pc(r["cluster"]["gpuUtilisation"]) for r in reports]),
        ("CPU utilisation", [_pc(r["cluster"]["cpuUtilisation"]) for r in reports]),
        *([("shared GPUs avg / full", [
            f"{_n(r['sharedGpus']['avg'])} / {_pc(r['sharedGpus']['fill'])}"
            if r.get("sharedGpus") else "-" for r in reports]),
           ("GPUs in use (whole and shares)", [
               _pc(r["sharedGpus"]["gpuInUse"]) if r.get("sharedGpus") else "-" for r in reports])]
          if any(r.get("sharedGpus") for r in reports) else []),
        ("jobs succeeded", [str(r["jobsByState"].get("succeeded", 0)) for r in reports]),
        ("gangs that waited", [f"{r['gangWait']['waited']}/{r['gangWait']['gangs']}"
                               for r in reports]),
    ]
    for q in ("p50", "p90", "max"):
        rows.append((f"gang wait {q}", [_t(r["gangWait"][q]) for r in reports]))
    rows.append(("the gang that waited longest", [_longest(r) for r in reports]))
    if any(j["reservedStart"] is not None for r in reports for j in r["jobs"]):
        rows.extend(_reservation_rows(reports))
    if any(r.get("autoscaler") for r in reports):
        rows.extend(_autoscaler_rows(reports))
    for cause in ("reclaim", "preempt", "stale-gang", moves.ACTION):
        rows.append((f"pods evicted: {cause}", [str(r["evictions"].get(cause, 0)) for r in reports]))
    if any(moves.ACTION in r for r in reports):
        rows.append(("consolidation: wait saved", [moves.wait_saved(r) for r in reports]))
    for i, q in enumerate(first["queues"]):
        name = q["name"]
        rows.append((f"{name}: use avg / fair share avg",
                     [f"{_n(r['queues'][i]['usageAvg'])} / {_n(r['queues'][i]['fairShareAvg'])}"
                      for r in reports]))
        rows.append((f"{name}: GPU-hours lost to evictions",
                     [_n(r["queues"][i]["gpuHoursLost"]) for r in reports]))
        rows.append((f"{name}: wait p50 / p90",
                     [f"{_t(r['queues'][i]['waitP50'])} / {_t(r['queues'][i]['waitP90'])}"
                      for r in reports]))
        if any("windowUsage" in r["queues"][i] for r in reports):
            rows.append((f"{name}: usage avg / peak", [_usage_cell(r["queues"][i])
                                                       for r in reports]))
    columns = [Column("figure"), *(Column(label, True) for label in labels)]
    table, _ = fitted("compare", columns,
                      [{"figure": label, **dict(zip(labels, values, strict=True))} for label, values in rows],
                      width)
    console.print(table)
