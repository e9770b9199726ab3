"""What the tests share: builders of objects and clusters, and hypothesis strategies.

Test modules import from here and from nowhere else under tests/ (tests/test_layout.py
checks it); conftest.py files hold fixtures only, which pytest injects.

- objects.py     raw Kubernetes objects for the memory backend, one scheduler cycle over them
- strategies.py  hypothesis strategies: random clusters, sessions over them, JSON values
- wire.py        the API emulator the wire tests talk to over loopback HTTP, and its objects
- realapi.py     a real kube-apiserver: kaisched installed, processes, fake nodes, waits
- cluster.py     a living cluster (controllers, hollow kubelets): workloads, gangs, node failure
- sim.py         a small simulation scenario
- install.py     what the image and the wheel are built from
"""
from __future__ import annotations

from pathlib import Path

# The checkout: tests read the files it ships (config/, docs/, kaisched/examples/).
ROOT = Path(__file__).resolve().parents[2]
# The scenario files of tests/scenarios/ (each NAME.yaml with its NAME.expect.yaml).
SCENARIOS = ROOT / "tests" / "scenarios"
