"""Back within seconds after a real kube-apiserver restart.

KAISCHED_TEST_RESTART_APISERVER names a command that stops the test cluster's
kube-apiserver, keeps it down the number of seconds given as its last
argument, and starts it again (returning once it is ready); skipped without
one. After 20 s down, the scheduler must write its Lease again and bind a new
gang within 5 s of the API answering.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import time
from typing import Callable

import pytest

from kaisched.cluster.kinds import LEASE
from kaisched.cluster.kube import KubeCluster
from tests.builders.realapi import SYSTEM, Components, all_bound, describe, eventually, make_gang

OWNER = "install"
RESTART = "KAISCHED_TEST_RESTART_APISERVER"
DOWN = 20
BACK_WITHIN = 5.0


def renew_time(admin: KubeCluster) -> str:
    return str(((admin.get(LEASE, SYSTEM, "kaisched") or {}).get("spec") or {}).get("renewTime"))


def test_scheduling_resumes_within_seconds_of_an_api_server_restart(
        admin: KubeCluster, components: Components, namespace: str,
        fake_nodes: Callable[..., list[str]]) -> None:
    command = os.environ.get(RESTART)
    if not command:
        pytest.skip(f"{RESTART} names no command to restart the API server")
    fake_nodes(1, cpu="16")
    first = make_gang(admin, namespace, "kaisched", "before", 3)
    eventually(lambda: all_bound(admin, namespace, first), timeout=60,
               what=f"the first gang bound\n{describe(admin, namespace)}\n{components.logs()}")

    # No file descriptor of this process (the test lock) goes to the restarted server.
    done = subprocess.run([*shlex.split(command), str(DOWN)], capture_output=True, text=True,
                          timeout=DOWN + 180, check=False, close_fds=True)
    assert done.returncode == 0, done.stderr[-2000:]
    answered = time.monotonic()
    before = renew_time(admin)
    second = make_gang(admin, namespace, "kaisched", "after", 3)
    lease_back = gang_back = None
    while lease_back is None or gang_back is None:
        now = time.monotonic() - answered
        assert now < 60, (f"not back: lease after {lease_back}, gang after {gang_back}\n"
                          f"{describe(admin, namespace)}\n{components.logs()}")
        if lease_back is None and renew_time(admin) != before:
            lease_back = now
        if gang_back is None and all_bound(admin, namespace, second):
            gang_back = now
        time.sleep(0.1)
    print(f"kube-apiserver down {DOWN}s: Lease written again {lease_back:.1f}s and a new gang "
          f"bound {gang_back:.1f}s after it was ready")
    assert lease_back < BACK_WITHIN, components.logs()
    assert gang_back < BACK_WITHIN, components.logs()
    assert components.scheduler.running and components.podgrouper.running
    # The outage was said, not shouted: a handful of lines, not one per retry.
    warnings = [line for line in components.scheduler.log().splitlines() if " WARNING " in line]
    assert len(warnings) <= 12, "\n".join(warnings)
