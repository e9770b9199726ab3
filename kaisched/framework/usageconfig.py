"""usageDBConfig, KAI's names and nesting, checked key by key.

    usageDBConfig:
      clientType: builtin | prometheus     # default builtin
      connectionString: http://...:9090     # prometheus only
      usageParams:
        halfLifePeriod: 24h                 # absent: no decay
        windowSize: 168h                    # default a week
        windowType: sliding | tumbling      # default sliding
"""
from __future__ import annotations

import re
from typing import Any

from kaisched.api.decayedusage import WEEK, UsageDBConfig, UsageParams, UsageSource, WindowType
from kaisched.errors import ConfigError
from kaisched.framework.configkeys import duration, known

_KEYS = ("clientType", "connectionString", "usageParams")
_PARAMS = ("halfLifePeriod", "windowSize", "windowType")
_WHERE = "config: usageDBConfig"
# http(s)://host[:port][/path]: checked here without urllib, which the decision layers do not import.
_URL = re.compile(r"https?://[^\s/?#]+(?:[/?#]\S*)?")


def usage_db_config(raw: Any) -> UsageDBConfig:
    if not isinstance(raw, dict):
        raise ConfigError(f"{_WHERE}: expected a mapping ({', '.join(_KEYS)})")
    known(raw, _KEYS, _WHERE)
    kind = raw.get("clientType", UsageSource.BUILTIN.value)
    try:
        source = UsageSource(kind)
    except ValueError:
        raise ConfigError(f"{_WHERE}.clientType: must be one of "
                          f"{', '.join(s.value for s in UsageSource)}, not {kind!r}") from None
    url = raw.get("connectionString")
    if source is UsageSource.PROMETHEUS:
        if not (isinstance(url, str) and _URL.fullmatch(url)):
            raise ConfigError(f"{_WHERE}.connectionString: the Prometheus server's URL "
                              f"(http://host:port) is needed with clientType prometheus, "
                              f"not {url!r}")
    elif url is not None:
        raise ConfigError(f"{_WHERE}.connectionString: only for clientType prometheus")
    return UsageDBConfig(source, url, _params(raw.get("usageParams") or {}))


def usage_db_dict(config: UsageDBConfig) -> dict[str, Any]:
    """The YAML form, as a Snapshot file carries it."""
    params = config.params
    out: dict[str, Any] = {"clientType": config.client_type.value}
    if config.connection_string:
        out["connectionString"] = config.connection_string
    out["usageParams"] = {"windowSize": f"{params.window:g}s",
                          "windowType": params.window_type.value,
                          **({"halfLifePeriod": f"{params.half_life:g}s"}
                             if params.half_life else {})}
    return out


def _params(raw: Any) -> UsageParams:
    where = f"{_WHERE}.usageParams"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping ({', '.join(_PARAMS)})")
    known(raw, _PARAMS, where)
    window = duration(raw, "windowSize", WEEK, where)
    if window <= 0:
        raise ConfigError(f"{where}.windowSize: must be more than zero")
    half_life = duration(raw, "halfLifePeriod", 0.0, where)
    kind = raw.get("windowType", WindowType.SLIDING.value)
    try:
        window_type = WindowType(kind)
    except ValueError:
        raise ConfigError(f"{where}.windowType: must be sliding or tumbling, not {kind!r}") from None
    return UsageParams(window, half_life or None, window_type)

