"""A warm standby takes over on a real kube-apiserver: two replicas of
`kaisched run` (the kaisched ServiceAccount's token, a Lease of their own);
the standby says it is warm on /readyz; the leader is killed (SIGKILL: no
Lease released, so the standby waits out the lease duration, as after a
crash); the standby takes the Lease and binds a gang that arrived meanwhile.
How long each step took is reported (pytest -s, and the test's properties),
never asserted: this machine's load decides it.

The replicas run under a scheduler name of their own, so other schedulers on
the same server leave this test's pods alone.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import pytest
from kubernetes import client as k8s_client

from kaisched.cluster.client import Obj
from kaisched.cluster.kinds import LEASE
from kaisched.cluster.kube import KubeCluster
from tests.builders.realapi import (
    SYSTEM,
    Process,
    all_bound,
    as_account,
    delete_quietly,
    describe,
    eventually,
    make_gang,
    scheduler_process,
    shipped_config,
)

OWNER = "shards"
PATIENCE = 120.0


def holder(admin: KubeCluster, lease: str) -> str | None:
    found = admin.get(LEASE, SYSTEM, lease)
    return ((found or {}).get("spec") or {}).get("holderIdentity")


def test_the_standby_takes_over_when_the_leader_is_killed(
        request: pytest.FixtureRequest, record_property: Callable[[str, Any], None],
        admin: KubeCluster, admin_api: k8s_client.ApiClient, admin_kubeconfig: str,
        installed: list[Obj], namespace: str, fake_nodes: Callable[..., list[str]],
        tmp_path: Path) -> None:
    suffix = namespace.rsplit("-", 1)[1]
    scheduler = f"shards-failover-{suffix}"
    lease = f"shards-failover-{suffix}"
    fake_nodes(2, cpu="8")
    config = shipped_config(tmp_path, scheduler)
    kubeconfig = as_account(admin_kubeconfig, admin_api, tmp_path)

    def replica(name: str) -> Process:
        return scheduler_process(kubeconfig, config, tmp_path, f"{scheduler}-{name}",
                                 "--lease-name", lease, name=name)

    leader, standby = replica("first"), replica("second")
    try:
        leader.start()
        eventually(lambda: holder(admin, lease) == f"{scheduler}-first", PATIENCE,
                   "the first replica leads")
        standby.start()
        warm = eventually(lambda: (got := standby.get("/readyz"))[0] == 200 and got[1],
                          PATIENCE, "the standby is ready")
        assert warm.startswith("ok: warm standby"), warm
        assert leader.get("/readyz") == (200, "ok: leading\n")

        before = make_gang(admin, namespace, scheduler, "before", 2, cpu="1", memory="1Gi")
        eventually(lambda: all_bound(admin, namespace, before), PATIENCE, "the leader binds a gang")

        assert leader.proc is not None
        killed = time.monotonic()
        leader.proc.kill()                      # no Lease released: as a crash
        leader.proc.wait(30)
        after = make_gang(admin, namespace, scheduler, "after", 2, cpu="1", memory="1Gi")
        eventually(lambda: holder(admin, lease) == f"{scheduler}-second", PATIENCE,
                   "the standby takes the Lease")
        taken = time.monotonic()
        eventually(lambda: all_bound(admin, namespace, after), PATIENCE,
                   "the new leader binds the gang that arrived meanwhile")
        first_bind = time.monotonic()
        assert standby.get("/readyz") == (200, "ok: leading\n")

        figures = {"killed_to_lease_taken_seconds": round(taken - killed, 2),
                   "lease_taken_to_gang_bound_seconds": round(first_bind - taken, 2)}
        for key, value in figures.items():
            record_property(key, value)
        print(f"\nfailover on a real API server: {figures}")
    except AssertionError:
        print(describe(admin, namespace))
        print(f"--- first ---\n{leader.log()}\n--- second ---\n{standby.log()}"[-20000:])
        raise
    finally:
        leader.stop()
        standby.stop()
        delete_quietly(admin, LEASE, SYSTEM, lease)
