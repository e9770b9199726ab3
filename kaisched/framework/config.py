"""SchedulerConfig: scheduler.yaml, checked key by key.

Nothing starts on a bad config: every unknown key, action or plugin, bad
duration and bad plugin argument is refused with the key's path in the message.
A key left out takes its default, so a partial file never switches scheduling
off; a config without the allocate action or the gang plugin is refused, because
every gang promise depends on both.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Protocol

import attrs
import yaml

from kaisched.api.decayedusage import UsageDBConfig
from kaisched.api.quantity import parse_duration
from kaisched.errors import ConfigError
from kaisched.framework.autoscalingconfig import AutoscalingConfig, autoscaling_config, autoscaling_dict
from kaisched.framework.usageconfig import usage_db_config, usage_db_dict

DEFAULT_CONFIG_YAML = """\
schedulerName: kaisched
schedulePeriod: 1s
actions: [allocate, backfill, reclaim, preempt, stalegangeviction]
tiers:
  - plugins: [{name: priority}, {name: gang}, {name: podgroupstatus}]
  - plugins:
    - {name: proportion}
    - {name: predicates}
    - {name: podaffinity}
    - {name: topologyspread}
    - {name: hostports}
    - {name: nodeorder, arguments: {strategy: binpack}}
    - {name: nodeaffinity}
    - {name: volumebinding}
    - {name: dra}
    - {name: gpusharing}
staleGangGracePeriod: 60s
starvationThreshold: 10m
podGrouperWait: 5s
reservationBackfill: true
"""

AUTOSCALE_ACTION = "autoscale"     # runs when autoscaling is configured
_KEYS = ("schedulerName", "schedulePeriod", "actions", "tiers", "staleGangGracePeriod",
         "starvationThreshold", "usageDBConfig", "consolidation", "preemptionDelay",
         "nodePool", "podGrouperWait", "autoscaling", "reservationBackfill")
_CONSOLIDATION_KEYS = ("maxPods", "cooldown")
_POOL_KEYS = ("label", "value", "default")
_DEFAULTS: dict[str, Any] = yaml.safe_load(DEFAULT_CONFIG_YAML)
# A label's name, or value: what Kubernetes accepts (a value may also be empty,
# but a pool needs a name).
_LABEL_TEXT = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_DNS_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# Without these nothing is placed as a gang: placement all or nothing is allocate's
# statement and gang's readiness rule together.
REQUIRED_ACTION = "allocate"
REQUIRED_PLUGIN = "gang"
# What the gang plugin promises includes saying why a gang waits: a config that
# names gang without the PodGroup status writer gets it right after gang.
STATUS_PLUGIN = "podgroupstatus"


class Names(Protocol):
    """What a config is checked against: the actions and plugins by name, each
    with its factory (a Registry is one). Named by shape, so that the config sits
    below the session, which reads it, and the registry, which builds from it."""

    @property
    def actions(self) -> Mapping[str, Callable[[], object]]: ...

    @property
    def plugins(self) -> Mapping[str, Callable[[Mapping[str, Any]], object]]: ...


@attrs.frozen
class PluginOption:
    name: str
    arguments: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ConsolidationConfig:
    """The consolidation action's bounds: the pods one session may move, and
    how long a moved job is left alone before it may be moved again."""

    max_pods: int = 32
    cooldown: float = 600.0


@attrs.frozen
class NodePool:
    """One shard of a cluster: this scheduler sees only the nodes labelled
    label=value, and schedules only the pods that name the pool (the same
    label on the pod, its PodGroup or its queue). The default shard also takes
    the nodes, pods and queues that name no pool."""

    label: str
    value: str
    default: bool = False

    def takes(self, pool: str | None) -> bool:
        """Whether what names this pool (None: names none) is this shard's."""
        return pool == self.value if pool else self.default

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "value": self.value,
                **({"default": True} if self.default else {})}


@attrs.frozen
class SchedulerConfig:
    scheduler_name: str = "kaisched"
    schedule_period: float = 1.0
    actions: tuple[str, ...] = ()
    tiers: tuple[tuple[PluginOption, ...], ...] = ()
    stale_gang_grace_period: float = 60.0
    starvation_threshold: float = 600.0     # a head-of-queue gang waiting longer gets nodes reserved
    node_pool: NodePool | None = None       # one shard of the cluster; None: all of it
    usage_db: UsageDBConfig | None = None   # fair share with memory; None: off
    consolidation: ConsolidationConfig = ConsolidationConfig()   # read when the action runs
    # How long a job, once pending, waits before it may evict others (0: at once).
    preemption_delay: float = 0.0
    # How long a new pod a controller made, with no gang declared, waits for
    # the PodGrouper to group it before it goes alone (0: it never waits).
    pod_grouper_wait: float = 5.0
    # Asking a cluster autoscaler for gangs' capacity (None: off); its action,
    # autoscale, is added last to the actions when this is set.
    autoscaling: AutoscalingConfig | None = None
    # Room the starvation guard holds is lent to jobs sure to end (by their
    # enforced limits) before the reservation's start.
    reservation_backfill: bool = True

    def to_dict(self) -> dict[str, Any]:
        """The YAML form, as a Snapshot file carries it."""
        out: dict[str, Any] = {
            "schedulerName": self.scheduler_name,
            "schedulePeriod": f"{self.schedule_period:g}s",
            "actions": list(self.actions),
            "tiers": [{"plugins": [{"name": p.name, **({"arguments": dict(p.arguments)}
                                                     if p.arguments else {})} for p in tier]}
                      for tier in self.tiers],
            "staleGangGracePeriod": f"{self.stale_gang_grace_period:g}s",
            "starvationThreshold": f"{self.starvation_threshold:g}s",
            "podGrouperWait": f"{self.pod_grouper_wait:g}s",
            **({"usageDBConfig": usage_db_dict(self.usage_db)} if self.usage_db else {}),
            **({"consolidation": {"maxPods": self.consolidation.max_pods,
                                  "cooldown": f"{self.consolidation.cooldown:g}s"}}
               if self.consolidation != ConsolidationConfig() else {}),
            **({"preemptionDelay": f"{self.preemption_delay:g}s"} if self.preemption_delay else {}),
            **({"autoscaling": autoscaling_dict(self.autoscaling)} if self.autoscaling else {}),
            "reservationBackfill": self.reservation_backfill,
        }
        if self.node_pool is not None:
            out["nodePool"] = self.node_pool.to_dict()
        return out


def load_config(data: Any, registry: Names) -> SchedulerConfig:
    """A checked config from parsed YAML; keys left out take the defaults."""
    if not isinstance(data, dict):
        raise ConfigError("config: expected a mapping of keys (schedulerName, actions, tiers, ...)")
    unknown = sorted(set(data) - set(_KEYS))
    if unknown:
        raise ConfigError(f"config: unknown key {unknown[0]!r} (known: {', '.join(_KEYS)})")
    data = {**_DEFAULTS, **data}
    name = data["schedulerName"]
    if not isinstance(name, str) or not name:
        raise ConfigError("config: schedulerName: must be a non-empty string")
    config = SchedulerConfig(
        scheduler_name=name,
        schedule_period=_duration(data, "schedulePeriod", 1.0, positive=True),
        actions=_actions(data["actions"], registry),
        tiers=_with_status(_tiers(data["tiers"], registry)),
        stale_gang_grace_period=_duration(data, "staleGangGracePeriod", 60.0),
        starvation_threshold=_duration(data, "starvationThreshold", 600.0),
        node_pool=_node_pool(data.get("nodePool")),
        usage_db=usage_db_config(data["usageDBConfig"]) if data.get("usageDBConfig") is not None
        else None,
        consolidation=_consolidation(data.get("consolidation")),
        preemption_delay=_duration(data, "preemptionDelay", 0.0),
        pod_grouper_wait=_duration(data, "podGrouperWait", 5.0),
        autoscaling=autoscaling_config(data["autoscaling"]) if data.get("autoscaling") is not None
        else None,
        reservation_backfill=_flag(data, "reservationBackfill", True),
    )
    if config.autoscaling is not None and AUTOSCALE_ACTION not in config.actions:
        config = attrs.evolve(config, actions=(*config.actions, AUTOSCALE_ACTION))
    _require_gangs(config)
    return config


def _flag(data: dict[str, Any], key: str, default: bool) -> bool:
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"config: {key}: expected true or false, got {value!r}")
    return value


def parse_config(text: str, registry: Names, source: str = "config") -> SchedulerConfig:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: invalid YAML: {_yaml_where(exc)}") from None
    try:
        return load_config(data, registry)
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("config:", f"{source}:", 1)) from None


def default_config(registry: Names) -> SchedulerConfig:
    return parse_config(DEFAULT_CONFIG_YAML, registry, "built-in config")


def _require_gangs(config: SchedulerConfig) -> None:
    """Refuse a config that would quietly stop placing gangs whole."""
    if REQUIRED_ACTION not in config.actions:
        raise ConfigError(
            f"config: actions: {REQUIRED_ACTION!r} is missing; without it no gang is ever placed "
            f"(leave actions out for the default: {', '.join(_DEFAULTS['actions'])})")
    if not any(p.name == REQUIRED_PLUGIN for tier in config.tiers for p in tier):
        raise ConfigError(
            f"config: tiers: the {REQUIRED_PLUGIN!r} plugin is missing; without it pods are placed "
            "one by one and a gang can be left half bound (leave tiers out for the default)")


def _duration(data: Mapping[str, Any], key: str, default: float, positive: bool = False) -> float:
    if key not in data:
        return default
    try:
        value = parse_duration(data[key])
    except ValueError as exc:
        raise ConfigError(f"config: {key}: {exc}") from None
    if positive and value <= 0:
        raise ConfigError(f"config: {key}: must be more than zero")
    return value


def _consolidation(raw: Any) -> ConsolidationConfig:
    """consolidation: {maxPods, cooldown}; either left out takes its default."""
    if raw is None:
        return ConsolidationConfig()
    if not isinstance(raw, dict):
        raise ConfigError("config: consolidation: expected a mapping (maxPods, cooldown)")
    unknown = sorted(set(raw) - set(_CONSOLIDATION_KEYS))
    if unknown:
        raise ConfigError(f"config: consolidation: unknown key {unknown[0]!r} "
                          f"(known: {', '.join(_CONSOLIDATION_KEYS)})")
    default = ConsolidationConfig()
    pods = raw.get("maxPods", default.max_pods)
    if isinstance(pods, bool) or not isinstance(pods, int) or pods < 1:
        raise ConfigError(f"config: consolidation.maxPods: expected a whole number of pods, at "
                          f"least 1, not {pods!r} (to move none, leave consolidation out of actions)")
    cooldown = _duration({"consolidation.cooldown": raw["cooldown"]}, "consolidation.cooldown",
                         default.cooldown) if "cooldown" in raw else default.cooldown
    return ConsolidationConfig(pods, cooldown)


def _node_pool(raw: Any) -> NodePool | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ConfigError("config: nodePool: expected {label: <node label key>, value: <pool>, "
                          "default: true|false}")
    unknown = sorted(set(raw) - set(_POOL_KEYS))
    if unknown:
        raise ConfigError(f"config: nodePool: unknown key {unknown[0]!r} "
                          f"(known: {', '.join(_POOL_KEYS)})")
    for key in ("label", "value"):
        text = raw.get(key)
        name = text.rpartition("/")[2] if key == "label" and isinstance(text, str) else text
        if not isinstance(name, str) or not _LABEL_TEXT.fullmatch(name):
            raise ConfigError(f"config: nodePool.{key}: must be a label {key} "
                              "(letters, digits, '-', '_', '.'; up to 63 characters)")
    label = raw["label"]
    prefix = label.rpartition("/")[0]
    if label.count("/") > 1 or (prefix and not _DNS_NAME.fullmatch(prefix)):
        raise ConfigError(f"config: nodePool.label: {label!r} is not a label key "
                          "(an optional DNS prefix, '/', and a name)")
    default = raw.get("default", False)
    if not isinstance(default, bool):
        raise ConfigError("config: nodePool.default: must be true or false")
    return NodePool(label, raw["value"], default)


def _actions(raw: Any, registry: Names) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(a, str) for a in raw):
        raise ConfigError("config: actions: expected a list of action names")
    for i, name in enumerate(raw):
        if name not in registry.actions:
            known = ", ".join(sorted(registry.actions))
            raise ConfigError(f"config: actions[{i}]: unknown action {name!r} (known: {known})")
    return tuple(raw)


def _with_status(tiers: tuple[tuple[PluginOption, ...], ...]
                 ) -> tuple[tuple[PluginOption, ...], ...]:
    """The tiers, with the status writer after gang when it is not named."""
    if any(p.name == STATUS_PLUGIN for tier in tiers for p in tier):
        return tiers
    out = []
    for tier in tiers:
        at = next((i for i, p in enumerate(tier) if p.name == REQUIRED_PLUGIN), None)
        out.append(tier if at is None else (*tier[:at + 1], PluginOption(STATUS_PLUGIN),
                                            *tier[at + 1:]))
    return tuple(out)


def _tiers(raw: Any, registry: Names) -> tuple[tuple[PluginOption, ...], ...]:
    if not isinstance(raw, list):
        raise ConfigError("config: tiers: expected a list of {plugins: [...]}")
    tiers = []
    for t, tier in enumerate(raw):
        where = f"tiers[{t}]"
        if not isinstance(tier, dict) or set(tier) - {"plugins"}:
            raise ConfigError(f"config: {where}: expected {{plugins: [...]}} only")
        plugins = tier.get("plugins") or []
        if not isinstance(plugins, list):
            raise ConfigError(f"config: {where}.plugins: expected a list")
        options = []
        for p, entry in enumerate(plugins):
            options.append(_plugin(entry, f"{where}.plugins[{p}]", registry))
        tiers.append(tuple(options))
    return tuple(tiers)


def _plugin(entry: Any, where: str, registry: Names) -> PluginOption:
    if not isinstance(entry, dict) or "name" not in entry:
        raise ConfigError(f"config: {where}: expected {{name: ..., arguments: {{...}}}}")
    extra = sorted(set(entry) - {"name", "arguments"})
    if extra:
        raise ConfigError(f"config: {where}: unknown key {extra[0]!r} (known: name, arguments)")
    name, arguments = entry["name"], entry.get("arguments") or {}
    if name not in registry.plugins:
        known = ", ".join(sorted(registry.plugins))
        raise ConfigError(f"config: {where}: unknown plugin {name!r} (known: {known})")
    if not isinstance(arguments, dict):
        raise ConfigError(f"config: {where}.arguments: expected a mapping")
    try:
        registry.plugins[name](arguments)      # a factory refuses bad arguments
    except ConfigError as exc:
        raise ConfigError(f"config: {where}.arguments ({name}): {exc}") from None
    return PluginOption(name, dict(arguments))


def _yaml_where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    return f"line {mark.line + 1}: {problem}" if mark else problem
