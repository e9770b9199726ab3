"""The CEL rules of kaisched's CRDs (`x-kubernetes-validations`), checked as
an API server checks them on create: each rule with `self` bound to the value
at its place in the schema, wherever that value is present. A transition
rule (one that reads `oldSelf`, as an immutable field's `self == oldSelf`)
has no old object to compare with on create, and is left out as the API
server leaves it out.

A rule that evaluates to false, or fails to evaluate, refuses the object
with the rule's message. The rules are compiled once per process
(cel-python, the library the device selectors use too).
"""
from __future__ import annotations

import functools
import re
from typing import Any, Mapping

Found = list[tuple[str, str]]     # (field, rule)
_OLD_SELF = re.compile(r"\boldSelf\b")


@functools.cache
def _program(rule: str) -> Any:
    import celpy

    env = celpy.Environment()
    return env.program(env.compile(rule))


def rule_errors(schema: Any, value: Any, path: str = "") -> Found:
    """(field, message) for every CEL rule of the schema that value breaks."""
    if not isinstance(schema, Mapping) or value is None:
        return []
    out: Found = []
    for rule in schema.get("x-kubernetes-validations") or ():
        if _OLD_SELF.search(str(rule["rule"])):
            continue        # a transition rule: checked on update only
        if not _holds(str(rule["rule"]), value):
            out.append((path or "(object)", str(rule.get("message") or f"failed rule: {rule['rule']}")))
    props = schema.get("properties")
    if isinstance(props, Mapping) and isinstance(value, Mapping):
        for key, sub in props.items():
            if key in value:
                out += rule_errors(sub, value[key], f"{path}.{key}" if path else str(key))
    items = schema.get("items")
    if isinstance(items, Mapping) and isinstance(value, list):
        for i, item in enumerate(value):
            out += rule_errors(items, item, f"{path}[{i}]")
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping) and isinstance(value, Mapping) and not isinstance(props, Mapping):
        for key, item in value.items():
            out += rule_errors(extra, item, f"{path}[{key}]")
    return out


def _holds(rule: str, value: Any) -> bool:
    from celpy import json_to_cel

    try:
        result = _program(rule).evaluate({"self": json_to_cel(value)})
    except Exception:       # an evaluation error refuses the object, as the API server does
        return False
    return result is True or (not isinstance(result, Exception) and bool(result) is True)
