"""SchedulerConfig loading: the default loads, keys left out take the default,
and every bad key is refused with a ConfigError whose message names the key's path."""
from __future__ import annotations

import pytest

from kaisched.builtins.catalog import register_builtins
from kaisched.errors import ConfigError
from kaisched.framework import default_config, load_config, parse_config
from kaisched.framework.config import PluginOption
from tests.builders import ROOT
from tests.builders.objects import config_text

TIERS = """\
tiers:
  - plugins: [{name: priority}, {name: gang}]
  - plugins:
    - {name: proportion}
    - {name: predicates}
    - {name: nodeorder, arguments: {strategy: binpack}}
"""


def test_default_config_loads() -> None:
    config = default_config(register_builtins())
    assert config.scheduler_name == "kaisched"
    assert config.schedule_period == 1.0
    assert config.stale_gang_grace_period == 60.0
    assert config.actions == ("allocate", "backfill", "reclaim", "preempt", "stalegangeviction")
    assert [[p.name for p in tier] for tier in config.tiers] == [
        ["priority", "gang", "podgroupstatus"],
        ["proportion", "predicates", "podaffinity", "topologyspread", "hostports", "nodeorder",
         "nodeaffinity", "volumebinding", "dra", "gpusharing"]]
    assert config.tiers[1][5] == PluginOption("nodeorder", {"strategy": "binpack"})


def test_shipped_scheduler_yaml_is_the_default() -> None:
    registry = register_builtins()
    shipped = parse_config((ROOT / "config" / "scheduler.yaml").read_text(), registry)
    assert shipped == default_config(registry)


def test_test_config_loads() -> None:
    config = parse_config(config_text(), register_builtins())
    assert config.actions == ("allocate", "backfill")
    assert len(config.tiers) == 2


def test_config_round_trips_through_its_dict_form() -> None:
    registry = register_builtins()
    config = parse_config("schedulePeriod: 500ms\nstaleGangGracePeriod: 1m30s\n" + config_text(
        "spread"), registry)
    assert config.schedule_period == 0.5 and config.stale_gang_grace_period == 90.0
    assert load_config(config.to_dict(), registry) == config


def test_consolidation_bounds_load_and_round_trip() -> None:
    """consolidation: {maxPods, cooldown}, each defaulted when left out, and
    carried in the dict form a Snapshot holds."""
    registry = register_builtins()
    default = default_config(registry)
    assert "consolidation" not in default.actions        # off unless actions name it
    assert (default.consolidation.max_pods, default.consolidation.cooldown) == (32, 600.0)
    config = parse_config("actions: [allocate, consolidation]\n"
                          "consolidation: {maxPods: 4, cooldown: 2m}\n", registry)
    assert (config.consolidation.max_pods, config.consolidation.cooldown) == (4, 120.0)
    assert load_config(config.to_dict(), registry) == config
    assert parse_config("consolidation: {cooldown: 0s}\n", registry).consolidation.max_pods == 32


def test_defaults_when_keys_are_left_out() -> None:
    registry = register_builtins()
    assert parse_config("{}", registry) == default_config(registry)


@pytest.mark.parametrize("text", ["schedulePeriod: 2s\n", "staleGangGracePeriod: 5m\n",
                                  "schedulerName: batch\n"])
def test_a_partial_config_keeps_scheduling_on(text: str) -> None:
    """A file with one key takes every other key from the default: it never
    loads as no actions and no tiers."""
    registry = register_builtins()
    config = parse_config(text, registry)
    default = default_config(registry)
    assert config.actions == default.actions and config.tiers == default.tiers
    assert config != default


def test_a_partial_config_changes_only_its_keys() -> None:
    registry = register_builtins()
    config = parse_config("schedulePeriod: 2s\nactions: [allocate, backfill]\n", registry)
    assert config.schedule_period == 2.0
    assert config.actions == ("allocate", "backfill")
    assert config.tiers == default_config(registry).tiers
    assert config.stale_gang_grace_period == 60.0


GANGLESS = [
    # (config text, substrings the message must contain)
    ("actions: [backfill, reclaim]\n", ["actions", "'allocate' is missing"]),
    ("actions: []\n", ["actions", "'allocate' is missing"]),
    ("tiers:\n  - plugins: [{name: priority}, {name: predicates}]\n", ["tiers", "'gang' plugin is missing"]),
    ("tiers: []\n", ["tiers", "'gang' plugin is missing"]),
]



def test_build_plugins_passes_the_arguments() -> None:
    registry = register_builtins()
    config = parse_config(config_text("spread"), registry)
    nodeorder = registry.build_plugins(config)[1][2]
    assert nodeorder.name == "nodeorder" and nodeorder.strategy == "spread"


BAD = [
    # (config text, substrings the message must contain)
    ("actions: [allocate]\nbogus: 1\n", ["bogus"]),
    ("actions: [allocate, backfill, nosuch]\n", ["actions[2]", "nosuch"]),
    ("actions: allocate\n", ["actions"]),
    ("actions: [allocate, 3]\n", ["actions"]),
    ("actions: [allocate]\n" + TIERS.replace("{name: nodeorder", "{name: nosuch"),
     ["tiers[1].plugins[2]", "nosuch"]),
    ("actions: [allocate]\n" + TIERS.replace("{name: gang}", "{name: gangg}"),
     ["tiers[0].plugins[1]", "gangg"]),
    ("schedulePeriod: fast\n", ["schedulePeriod"]),
    ("schedulePeriod: 1x\n", ["schedulePeriod"]),
    ("schedulePeriod: 0s\n", ["schedulePeriod"]),
    ("staleGangGracePeriod: soon\n", ["staleGangGracePeriod"]),
    ("staleGangGracePeriod: -5\n", ["staleGangGracePeriod"]),
    ("actions: [allocate]\n" + TIERS.replace("strategy: binpack", "strategy: random"),
     ["tiers[1].plugins[2]", "strategy", "random"]),
    ("actions: [allocate]\n" + TIERS.replace("arguments: {strategy: binpack}", "arguments: [1]"),
     ["tiers[1].plugins[2].arguments"]),
    ("actions: [allocate]\n" + TIERS.replace("arguments: {strategy: binpack}",
                                             "arguments: binpack"),
     ["tiers[1].plugins[2].arguments"]),
    ("actions: [allocate]\n" + TIERS.replace("strategy: binpack", "colour: red"),
     ["tiers[1].plugins[2]", "colour"]),
    ("actions: [allocate]\n" + TIERS.replace("strategy: binpack", "weights: {cpu: -1}"),
     ["tiers[1].plugins[2]", "weights"]),
    ("tiers:\n  - plugins: [{name: gang, arguments: {x: 1}}]\n", ["tiers[0].plugins[0]", "gang"]),
    ("tiers:\n  - plugins: [{name: gang, extra: 1}]\n", ["tiers[0].plugins[0]", "extra"]),
    ("tiers:\n  - plugins: [{arguments: {}}]\n", ["tiers[0].plugins[0]"]),
    ("tiers:\n  - plugins: [gang]\n", ["tiers[0].plugins[0]"]),
    ("tiers:\n  - plugins: {name: gang}\n", ["tiers[0].plugins"]),
    ("tiers:\n  - {plugins: [], more: 1}\n", ["tiers[0]"]),
    ("tiers: gang\n", ["tiers"]),
    ("schedulerName: ''\n", ["schedulerName"]),
    ("- just\n- a list\n", ["mapping"]),
    ("actions: [allocate\n", ["invalid YAML", "line"]),
    ("consolidation: 3\n", ["consolidation", "maxPods, cooldown"]),
    ("consolidation: {maxPods: 0}\n", ["consolidation.maxPods", "at least 1", "actions"]),
    ("consolidation: {maxPods: many}\n", ["consolidation.maxPods", "'many'"]),
    ("consolidation: {maxPods: true}\n", ["consolidation.maxPods"]),
    ("consolidation: {maxPods: 2.5}\n", ["consolidation.maxPods"]),
    ("consolidation: {cooldown: 10}\n", ["consolidation.cooldown", "unit"]),
    ("consolidation: {cooldown: soon}\n", ["consolidation.cooldown"]),
    ("consolidation: {maxpods: 4}\n", ["consolidation", "'maxpods'", "maxPods"]),
]


# A config without the allocate action or the gang plugin is refused like any
# bad key: every gang promise depends on both.
@pytest.mark.parametrize(("text", "parts"), BAD + GANGLESS,
                         ids=[str(i) for i in range(len(BAD))] + [t for t, _ in GANGLESS])
def test_bad_config_raises_config_error_naming_the_key(text: str, parts: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, register_builtins(), "scheduler.yaml")
    message = str(caught.value)
    assert message.startswith("scheduler.yaml:"), message
    for part in parts:
        assert part in message, message


@pytest.mark.parametrize("data", [None, [], "actions", 3])
def test_load_config_refuses_a_non_mapping(data: object) -> None:
    with pytest.raises(ConfigError):
        load_config(data, register_builtins())
