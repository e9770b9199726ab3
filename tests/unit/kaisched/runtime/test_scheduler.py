"""The production loop's cycle (kaisched/runtime/scheduler.py): the cyclic
garbage collector stays paused from the snapshot until the cycle's binds are
out, and runs again after; what the first cycle over a big list lays out is
frozen out of its sight, as the list was."""
from __future__ import annotations

import gc
from typing import Any, Callable

from kaisched.api.clock import ManualClock
from kaisched.builtins.catalog import register_builtins
from kaisched.framework import default_config
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import FREEZE_AFTER, Scheduler
from tests.builders.objects import build_node, build_pod, build_podgroup, load_cluster


class _Noting(Binder):
    """Our own seam: notes whether the collector ran while the cycle waited."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.collecting_while_waiting: list[bool] = []

    def wait(self, writes: bool = False, cancel: Callable[[], bool] = lambda: False) -> None:
        self.collecting_while_waiting.append(gc.isenabled())
        super().wait(writes, cancel)


def test_the_collector_waits_with_the_cycle_for_its_binds() -> None:
    clock = ManualClock()
    objects = [build_node("n0", cpu=4), build_podgroup("g", min_member=2)]
    objects += [build_pod(f"g-{i}", cpu=1, group="g") for i in range(2)]
    cluster = load_cluster(objects, clock)
    registry = register_builtins()
    binder = _Noting(cluster, clock.now, workers=2)
    scheduler = Scheduler(cluster, default_config(registry), registry, clock, binder)
    assert gc.isenabled()
    try:
        result = scheduler.run_once()
    finally:
        binder.stop()
    assert sorted(result.placed) == ["default/g-0", "default/g-1"]
    # Paused while the binds went out (the session's objects, young, are not
    # walked again and again), and running again once the cycle is over.
    assert binder.collecting_while_waiting == [False]
    assert gc.isenabled()


def test_what_the_first_cycle_over_a_big_list_lays_out_is_frozen_with_the_list() -> None:
    # A list big enough to be frozen out of the collector's sight; what the first cycle
    # over it lays out to last (the node table, the model's cluster) is frozen after it,
    # the session collected first.
    clock = ManualClock()
    objects = [build_node(f"n{i}", cpu=64) for i in range(100)]
    objects += [build_pod(f"run-{i}", cpu=1, node=f"n{i % 100}") for i in range(FREEZE_AFTER)]
    objects += [build_podgroup("g", min_member=2)]
    objects += [build_pod(f"g-{i}", cpu=1, group="g") for i in range(2)]
    cluster = load_cluster(objects, clock)
    registry = register_builtins()
    binder = Binder(cluster, clock.now, workers=2)
    scheduler = Scheduler(cluster, default_config(registry), registry, clock, binder)
    try:
        scheduler.sync()
        result = scheduler.run_once()
        seen = {id(o) for o in gc.get_objects()}      # what the collector still walks
    finally:
        binder.stop()
        gc.unfreeze()       # the rest of the tests as before
    assert sorted(result.placed) == ["default/g-0", "default/g-1"]
    laid_out = [result.cluster, result.cluster.table, *result.cluster.nodes.values()]
    assert not any(id(o) in seen for o in laid_out)
