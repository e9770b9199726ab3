"""Where usage comes from, without a server: usageDBConfig checked key by
key; a scheduler restarted while Prometheus is down uses the usage its Queue
status kept; an answer that is not Prometheus's is an error, never a crash.

Under kaisched/runtime/usagebooks.py, which asks the source; usageDBConfig's keys
(kaisched/framework/usageconfig.py) are checked here too."""
from __future__ import annotations

import socket
import time

import pytest
from click.testing import CliRunner

from kaisched.api.clock import ManualClock
from kaisched.api.decayedusage import UsageParams, UsageSource, WindowType
from kaisched.builtins.catalog import register_builtins
from kaisched.cli import main
from kaisched.cluster.kinds import QUEUE
from kaisched.cluster.memory import MemoryCluster
from kaisched.cluster.prometheus import PrometheusClient
from kaisched.errors import ConfigError, UsageDBError
from kaisched.framework import parse_config
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from kaisched.runtime.usagebooks import PrometheusBook
from tests.builders import SCENARIOS
from tests.builders.objects import build_node, build_queue

GPU = "nvidia.com/gpu"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_usage_db_config_takes_kais_names_and_refuses_the_rest() -> None:
    registry = register_builtins()
    config = parse_config("usageDBConfig:\n  clientType: prometheus\n"
                          "  connectionString: http://prometheus:9090\n"
                          "  usageParams: {halfLifePeriod: 24h, windowSize: 168h, "
                          "windowType: tumbling}\n", registry)
    assert config.usage_db is not None
    assert config.usage_db.client_type is UsageSource.PROMETHEUS
    assert config.usage_db.params == UsageParams(168 * 3600.0, 24 * 3600.0, WindowType.TUMBLING)
    # What a Snapshot carries reads back the same.
    assert parse_config(str(config.to_dict()), registry).usage_db == config.usage_db
    for bad, says in [
        ("usageDBConfig: {clientType: influx}", "clientType: must be one of builtin, prometheus"),
        ("usageDBConfig: {clientType: prometheus}", "connectionString"),
        ("usageDBConfig: {connectionString: 'http://x:1'}", "only for clientType prometheus"),
        ("usageDBConfig: {usageParams: {windowSize: 0s}}", "windowSize: must be more than zero"),
        ("usageDBConfig: {usageParams: {halfLifePeriod: soon}}", "halfLifePeriod"),
        ("usageDBConfig: {usageParams: {windowType: hopping}}", "sliding or tumbling"),
        ("usageDBConfig: {usageParams: {fetchInterval: 1m}}", "unknown key 'fetchInterval'"),
        ("tiers: [{plugins: [{name: gang}, {name: proportion, arguments: {kValue: -1}}]}]",
         "kValue: expected a number >= 0"),
        ("tiers: [{plugins: [{name: gang}, {name: proportion, arguments: {k: 1}}]}]",
         "unknown argument 'k'"),
    ]:
        with pytest.raises(ConfigError, match=says):
            parse_config(bad, registry)
    # KAI writes its plugin arguments as strings.
    parse_config("tiers: [{plugins: [{name: gang}, {name: proportion, arguments: {kValue: '1.5'}}]}]",
                 registry)


def test_a_restart_with_prometheus_down_keeps_the_usage_the_status_kept() -> None:
    clock = ManualClock()
    cluster = MemoryCluster(clock)
    cluster.create(build_node("gpu-1", gpu=8))
    cluster.create(build_queue("team-a"))
    cluster.patch_status(QUEUE, "", "team-a", {"usage": {
        "updated": "2026-01-01T00:00:00Z", "normalized": {GPU: 0.4}}})
    registry = register_builtins()
    config = parse_config(f"usageDBConfig: {{clientType: prometheus, connectionString: "
                          f"'http://127.0.0.1:{closed_port()}'}}", registry)
    scheduler = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now))
    assert isinstance(scheduler.usage, PrometheusBook)
    result = scheduler.run_once()
    assert result.cluster is not None and result.cluster.usage == {"team-a": {GPU: 0.4}}
    deadline = time.monotonic() + 60
    while not scheduler.usage.failing and time.monotonic() < deadline:     # its thread answers
        time.sleep(0.05)
    assert scheduler.usage.failing
    assert scheduler.run_once().cluster.usage == {"team-a": {GPU: 0.4}}   # type: ignore[union-attr]


def test_a_server_that_is_not_prometheus_is_an_error_not_a_crash() -> None:
    client = PrometheusClient(f"http://127.0.0.1:{closed_port()}", timeout=2.0)
    with pytest.raises(UsageDBError, match="did not answer"):
        client.query("up", time.time())


def test_explain_says_what_the_queue_used_over_the_window() -> None:
    snapshot = SCENARIOS / "usage-order.yaml"
    result = CliRunner().invoke(main, ["explain", "default/a-job", "--snapshot", str(snapshot)])
    assert result.exit_code == 0, result.output
    assert "queue team-a:" in result.output
    assert "usage over the window (share of what the cluster offered): nvidia.com/gpu 0.60" \
        in result.output
