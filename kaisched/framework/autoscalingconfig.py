"""autoscaling: asking a cluster autoscaler for a gang's capacity in one
ProvisioningRequest (off unless configured), checked key by key.

    autoscaling:
      provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io   # the default
      after: 0s                 # how long a gang waits before it is asked for
      queues: all               # or a list of queue names
      maxPending: 8             # requests not answered yet, at most, at once
      retry: {initial: 1m, max: 30m}   # after Failed or BookingExpired: backoff, then give up
"""
from __future__ import annotations

from typing import Any

import attrs

from kaisched.api.provisioning import ATOMIC_CLASS
from kaisched.api.types import QueueName
from kaisched.errors import ConfigError
from kaisched.framework.configkeys import duration, known

_KEYS = ("provisioningClassName", "after", "queues", "maxPending", "retry")
_RETRY = ("initial", "max")
_WHERE = "config: autoscaling"


@attrs.frozen
class AutoscalingConfig:
    provisioning_class: str = ATOMIC_CLASS
    after: float = 0.0
    queues: tuple[QueueName, ...] | None = None     # None: every queue
    max_pending: int = 8
    retry_initial: float = 60.0
    retry_max: float = 1800.0

    def backoff(self, attempt: int) -> float:
        """How long to wait after the answer to the given try before the next."""
        return min(self.retry_initial * 2 ** max(0, attempt - 1), self.retry_max)

    def gives_up(self, attempt: int) -> bool:
        """No more tries after this one: the next wait would pass retry.max."""
        return self.retry_initial * 2 ** max(0, attempt - 1) > self.retry_max


def autoscaling_config(raw: Any) -> AutoscalingConfig:
    if not isinstance(raw, dict):
        raise ConfigError(f"{_WHERE}: expected a mapping ({', '.join(_KEYS)})")
    known(raw, _KEYS, _WHERE)
    default = AutoscalingConfig()
    name = raw.get("provisioningClassName", default.provisioning_class)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{_WHERE}.provisioningClassName: must be a non-empty string")
    queues = raw.get("queues", "all")
    if queues == "all":
        chosen = None
    elif isinstance(queues, list) and all(isinstance(q, str) and q for q in queues):
        chosen = tuple(QueueName(q) for q in queues)
    else:
        raise ConfigError(f"{_WHERE}.queues: expected all, or a list of queue names, not {queues!r}")
    pending = raw.get("maxPending", default.max_pending)
    if isinstance(pending, bool) or not isinstance(pending, int) or pending < 1:
        raise ConfigError(f"{_WHERE}.maxPending: expected a whole number, at least 1, not {pending!r}")
    retry = raw.get("retry") or {}
    if not isinstance(retry, dict):
        raise ConfigError(f"{_WHERE}.retry: expected a mapping (initial, max)")
    known(retry, _RETRY, f"{_WHERE}.retry")
    initial = duration(retry, "initial", default.retry_initial, f"{_WHERE}.retry")
    most = duration(retry, "max", default.retry_max, f"{_WHERE}.retry")
    if initial <= 0 or most < initial:
        raise ConfigError(f"{_WHERE}.retry: initial must be above 0 and max at least initial")
    return AutoscalingConfig(name, duration(raw, "after", 0.0, _WHERE), chosen, pending, initial, most)


def autoscaling_dict(config: AutoscalingConfig) -> dict[str, Any]:
    """The YAML form."""
    return {"provisioningClassName": config.provisioning_class, "after": f"{config.after:g}s",
            "queues": list(config.queues) if config.queues is not None else "all",
            "maxPending": config.max_pending,
            "retry": {"initial": f"{config.retry_initial:g}s", "max": f"{config.retry_max:g}s"}}

