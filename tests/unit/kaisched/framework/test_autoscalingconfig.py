"""autoscaling in the scheduler's config: checked key by key, its action added last, and
the YAML form read back as the same config."""
from __future__ import annotations

from typing import Any

import pytest
import yaml

from kaisched.builtins.catalog import register_builtins
from kaisched.errors import ConfigError
from kaisched.framework import parse_config
from kaisched.framework.autoscalingconfig import AutoscalingConfig


@pytest.mark.parametrize(("raw", "error"), [
    ({"maxPending": 0}, "maxPending"),
    ({"queues": "some"}, "queues"),
    ({"retry": {"initial": "0s"}}, "retry"),
    ({"after": "soon"}, "after"),
    ({"nope": 1}, "unknown key 'nope'"),
])
def test_bad_autoscaling_config_is_refused(raw: dict[str, Any], error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        parse_config(yaml.safe_dump({"autoscaling": raw}), register_builtins())


def test_autoscaling_adds_its_action_last_and_reads_back() -> None:
    config = parse_config("actions: [allocate]\nautoscaling: {queues: [a, b], after: 30s}\n",
                          register_builtins())
    assert config.actions == ("allocate", "autoscale")
    assert config.autoscaling == AutoscalingConfig(after=30.0, queues=("a", "b"))
    assert parse_config(yaml.safe_dump(config.to_dict()), register_builtins()) == config


def test_the_backoff_doubles_until_it_gives_up() -> None:
    config = AutoscalingConfig(retry_initial=60.0, retry_max=240.0)
    assert [config.backoff(n) for n in (1, 2, 3, 4)] == [60.0, 120.0, 240.0, 240.0]
    assert [config.gives_up(n) for n in (1, 2, 3, 4)] == [False, False, False, True]
