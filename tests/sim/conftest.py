"""The simulate tests' fixtures (their scenarios are in tests/builders/sim.py)."""
from __future__ import annotations

import pytest

from kaisched.builtins.catalog import register_builtins
from kaisched.framework import SchedulerConfig, default_config


@pytest.fixture(scope="session")
def config() -> SchedulerConfig:
    return default_config(register_builtins())
