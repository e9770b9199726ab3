"""Claims move with statements: placing a pod allocates and reserves its
claims (ClaimOp), a rollback frees them, a commit writes their status before
the bind, and the cache gets its own claims back when the session is over."""
from __future__ import annotations

from kaisched.api.types import NodeName, PodKey
from kaisched.builtins.catalog import register_builtins
from kaisched.cache.cache import Cache
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import Session, default_config
from kaisched.framework.effects import Bind, SetClaimStatus
from tests.builders.dra import objects


def open_session(cache: Cache) -> Session:
    registry = register_builtins()
    config = default_config(registry)
    return Session(cache.snapshot(0.0), config, registry.build_plugins(config))


def loaded() -> Cache:
    cluster = MemoryCluster()
    for obj in objects([2, 2], [(2, 1, False)]):
        cluster.create(obj)
    cache = Cache()
    cache.sync(cluster)
    return cache


def pending(ssn: Session, name: str):
    return ssn.cluster.jobs["default/gang-0"].tasks[PodKey(f"default/{name}")]


def test_rollback_frees_the_devices() -> None:
    ssn = open_session(loaded())
    devices = ssn.cluster.devices
    stmt = ssn.statement()
    stmt.allocate(pending(ssn, "gang-0-0"), NodeName("node-0"))
    claim = devices.claims["default/gang-0-0"]
    assert claim.allocation is not None and claim.allocation.node == "node-0"
    assert [c.name for c in claim.reserved_for] == ["gang-0-0"]
    assert devices.taken.sum() == 1
    stmt.discard()
    assert devices.claims["default/gang-0-0"].allocation is None
    assert devices.taken.sum() == 0 and not devices.holder


def test_commit_writes_the_claim_before_the_bind() -> None:
    ssn = open_session(loaded())
    stmt = ssn.statement()
    stmt.allocate(pending(ssn, "gang-0-0"), NodeName("node-0"))
    stmt.commit()
    kinds = [type(e) for e in ssn.effects]
    assert kinds == [SetClaimStatus, Bind]
    write = ssn.effects[0]
    assert write.claim == "default/gang-0-0" and write.pod == "default/gang-0-0"
    assert write.allocation.node == "node-0" and len(write.allocation.results) == 1


def test_the_cache_gets_its_claims_back() -> None:
    cache = loaded()
    ssn = open_session(cache)
    stmt = ssn.statement()
    stmt.allocate(pending(ssn, "gang-0-0"), NodeName("node-1"))
    stmt.commit()
    again = cache.snapshot(1.0)
    assert again.devices.claims["default/gang-0-0"].allocation is None
    assert again.devices.taken.sum() == 0


def test_no_claims_no_hooks() -> None:
    cluster = MemoryCluster()
    for obj in objects([2], []):
        cluster.create(obj)
    cluster.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                    "spec": {"schedulerName": "kaisched", "containers": [{"name": "c"}]}})
    cache = Cache()
    cache.sync(cluster)
    ssn = open_session(cache)
    assert not ssn.cluster.claimants()
    from kaisched.framework.hooks import Hook
    assert not ssn.hooks.callbacks(Hook.CLAIMS) and not ssn.hooks.callbacks(Hook.POD_PREDICATE)


def test_the_plugins_counts_follow_moves_and_rollbacks() -> None:
    import numpy as np

    from plugins.dra import DraPlugin
    ssn = open_session(loaded())
    plugin = next(p for p in ssn.plugins if isinstance(p, DraPlugin))
    request = ssn.cluster.devices.claims["default/gang-0-0"].requests[0]
    rows = np.arange(len(ssn.cluster.table))

    def recount() -> tuple[list[float], list[int]]:
        devices = ssn.cluster.devices
        local = plugin.rows >= 0
        held = np.bincount(plugin.rows[local & devices.taken], minlength=len(rows))
        free = np.bincount(plugin.rows[local & ~devices.taken & plugin.eligible.mask(request)],
                           minlength=len(rows))
        return held.tolist(), free.tolist()

    plugin.fits(pending(ssn, "gang-0-0"), rows)        # the counts of this request are kept
    stmt = ssn.statement()
    stmt.allocate(pending(ssn, "gang-0-0"), NodeName("node-0"))
    mark = stmt.checkpoint()
    stmt.allocate(pending(ssn, "gang-0-1"), NodeName("node-0"))
    assert (plugin.held_row.tolist(), plugin.free_counts[request].tolist()) == recount() == (
        [2, 0], [0, 2])
    stmt.rollback(mark)
    assert (plugin.held_row.tolist(), plugin.free_counts[request].tolist()) == recount() == (
        [1, 0], [1, 2])
    stmt.discard()
    assert (plugin.held_row.tolist(), plugin.free_counts[request].tolist()) == recount()


def test_a_cluster_without_devices_never_loads_cel() -> None:
    """cel-python is imported when a selector is first met: the scheduler's
    modules alone, and a cycle over pods without claims, do not load it."""
    import subprocess
    import sys
    code = ("import sys\n"
            "from kaisched.bench.scenarios import run\n"
            "run('basic-5k', 0.01)\n"
            "assert 'celpy' not in sys.modules, 'celpy was imported'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
