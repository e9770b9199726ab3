"""Claims move with statements: placing a pod allocates and reserves its
claims (ClaimOp), a rollback frees them, a commit writes their status before
the bind, and the cache gets its own claims back when the session is over."""
from __future__ import annotations

from kaisched.api.types import NodeName, PodKey
from kaisched.builtins import register_builtins
from kaisched.cache.store import Cache
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import Session, default_config
from kaisched.framework.effects import Bind, SetClaimStatus

from .test_properties import objects


def open_session(cache: Cache) -> Session:
    registry = register_builtins()
    config = default_config(registry)
    return Session(cache.snapshot(0.0), config, config.build_plugins(registry))


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
