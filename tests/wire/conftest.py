"""The wire tests' fixtures: an API emulator per test, and clients connected to it (the
builders and helpers they use are in tests/builders/wire.py)."""
from __future__ import annotations

from typing import Iterator

import pytest

from kaisched.cluster.kube import KubeCluster
from tests.builders.wire import Emulator, connected


@pytest.fixture
def apiserver() -> Iterator[Emulator]:
    server = Emulator()
    yield server
    server.stop()


@pytest.fixture
def cluster(apiserver: Emulator) -> Iterator[KubeCluster]:
    with connected(apiserver) as cluster:
        yield cluster


@pytest.fixture
def looking(apiserver: Emulator) -> Iterator[KubeCluster]:
    """A client that looks for the kinds the server does not serve twice a
    second: for the tests of that look."""
    with connected(apiserver, missing_retry=0.5) as cluster:
        yield cluster
