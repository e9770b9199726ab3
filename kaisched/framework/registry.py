"""What an action is, and the registry that names actions and plugins and
builds them for a config. (What a plugin is, the session says: it is what the
session opens and closes.)

Built-ins are registered by one explicit call (kaisched.builtins.catalog), never as an
import side effect.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol

from kaisched.errors import ConfigError
from kaisched.framework.config import SchedulerConfig
from kaisched.framework.session import Plugin, Session


class Action(Protocol):
    name: str

    def execute(self, ssn: Session) -> None: ...


# A plugin is built from its configured arguments; a factory raises ConfigError
# for bad ones, so a bad config is refused at load time.
PluginFactory = Callable[[Mapping[str, Any]], Plugin]
ActionFactory = Callable[[], Action]


class Registry:
    def __init__(self) -> None:
        self.actions: dict[str, ActionFactory] = {}
        self.plugins: dict[str, PluginFactory] = {}

    def add_action(self, name: str, factory: ActionFactory) -> None:
        self.actions[name] = factory

    def add_plugin(self, name: str, factory: PluginFactory) -> None:
        self.plugins[name] = factory

    def build_actions(self, config: SchedulerConfig) -> list[Action]:
        return [self.actions[name]() for name in config.actions]

    def build_plugins(self, config: SchedulerConfig) -> list[list[Plugin]]:
        return [[self.plugins[p.name](p.arguments) for p in tier] for tier in config.tiers]


class PluginBase:
    """Defaults for plugins with nothing to do at close or no arguments."""

    name = ""

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        from kaisched.errors import ConfigError
        if arguments:
            raise ConfigError(f"takes no arguments, got {sorted(arguments)}")

    def on_session_open(self, ssn: Session) -> None:
        raise NotImplementedError

    def on_session_close(self, ssn: Session) -> None:
        return None


def plugin_arguments(arguments: Mapping[str, Any] | None, *known: str) -> dict[str, Any]:
    """A plugin's arguments, refused at load time when one is not among those
    it knows (the first unknown named, every known one listed): a misspelt
    argument is an error, never silently ignored."""
    given = dict(arguments or {})
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ConfigError(f"unknown argument {unknown[0]!r} (known: {', '.join(known)})")
    return given


def weight_argument(arguments: Mapping[str, Any] | None) -> float:
    """The one argument of a scoring plugin: how much its score counts
    against the others (a number >= 0, default 1)."""
    weight = plugin_arguments(arguments, "weight").get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
        raise ConfigError(f"weight: expected a number >= 0, not {weight!r}")
    return float(weight)
