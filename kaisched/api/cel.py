"""Device selectors: CEL expressions over one device, as Dynamic Resource
Allocation writes them (`device.driver`, `device.attributes["domain"].name`,
`device.capacity["domain"].name.compareTo(quantity("40Gi"))`).

Each distinct expression is compiled once per process (cel-python); its
answers are remembered per distinct view of a device -- only the attributes
the expression can name count, so a thousand GPUs that differ only in a uuid
the selector never reads are asked about once.
"""
from __future__ import annotations

import functools
import re
from decimal import Decimal
from typing import Any, Mapping, Protocol

import attrs

from kaisched.api.quantity import parse_quantity


class Device(Protocol):
    """What a selector reads of a device (kaisched.api.dradevices.Device is one):
    named by shape, so that the devices may hold their selectors."""

    @property
    def driver(self) -> str: ...

    def view(self, words: frozenset[str] | None) -> tuple[object, ...]: ...

    def attribute_domains(self) -> Mapping[str, Mapping[str, Any]]: ...

    def capacity_domains(self) -> Mapping[str, Mapping[str, Any]]: ...

# Macros that walk a map: with one, any attribute could be read, so the
# whole device is what an answer depends on.
_WALKS = re.compile(r"\.\s*(all|exists|exists_one|map|filter)\s*\(")
_WORDS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@functools.cache
def _runtime() -> Any:
    """cel-python and the functions selectors call, loaded once a selector is
    first met (a cluster without devices never pays for the import)."""
    import celpy
    from celpy import celtypes

    class Quantity(celtypes.DoubleType):
        """A capacity or quantity("...") value: compared as a number."""

    def quantity(text: Any) -> Quantity:
        return Quantity(float(parse_quantity(str(text))))

    def compare(a: Any, b: Any) -> Any:
        return celtypes.IntType((float(a) > float(b)) - (float(a) < float(b)))

    functions = {
        "quantity": quantity,
        "compareTo": compare,
        "isGreaterThan": lambda a, b: celtypes.BoolType(float(a) > float(b)),
        "isLessThan": lambda a, b: celtypes.BoolType(float(a) < float(b)),
        "asInteger": lambda a: celtypes.IntType(int(float(a))),
        "asApproximateFloat": lambda a: celtypes.DoubleType(float(a)),
    }
    return celpy.Environment(), functions, celtypes, Quantity


@attrs.define(eq=False)
class _Program:
    """One compiled expression and what it answered, per device view."""

    run: Any
    words: frozenset[str] | None         # None: the expression may read anything
    answers: dict[tuple[object, ...], tuple[bool, str | None]] = attrs.field(factory=dict)


@functools.lru_cache(maxsize=None)
def _compile(expression: str) -> _Program | str:
    env, functions, _, _ = _runtime()
    try:
        ast = env.compile(expression)
        run = env.program(ast, functions=functions)
    except Exception as exc:     # cel-python raises its parser's errors of several kinds
        column = getattr(exc, "column", None)
        where = f" at column {column}" if isinstance(column, int) else ""
        return f"{exc.__class__.__name__}{where}"
    words = None if _WALKS.search(expression) else frozenset(_WORDS.findall(expression))
    return _Program(run, words)


@attrs.frozen(slots=True)
class Selector:
    """One CEL selector; error says why it did not compile (then it matches nothing)."""

    expression: str
    error: str | None = None

    @classmethod
    def of(cls, expression: str) -> Selector:
        found = _compile(expression)
        return cls(expression, found if isinstance(found, str) else None)

    def matches(self, device: Device) -> tuple[bool, str | None]:
        """(matches, why not when evaluating failed)."""
        program = _compile(self.expression)
        if isinstance(program, str):
            return False, program
        view = device.view(program.words)
        found = program.answers.get(view)
        if found is None:
            found = program.answers[view] = _evaluate(program, device, view)
        return found


def _evaluate(program: _Program, device: Device, view: tuple[object, ...]) -> tuple[bool, str | None]:
    activation = {"device": _device_value(device, program.words)}
    try:
        result = program.run.evaluate(activation)
    except Exception as exc:      # a runtime error: the device does not match
        return False, f"{exc.__class__.__name__}: {exc}"
    if isinstance(result, Exception):
        return False, str(result)
    if not isinstance(result, (bool, _runtime()[2].BoolType)):
        return False, f"the selector returned {type(result).__name__}, not a bool"
    return bool(result), None


def _device_value(device: Device, words: frozenset[str] | None) -> Any:
    _, _, celtypes, quantity_type = _runtime()

    def cel(value: Any, quantity: bool) -> Any:
        if quantity or isinstance(value, Decimal):
            return quantity_type(float(value))
        if isinstance(value, bool):
            return celtypes.BoolType(value)
        if isinstance(value, int):
            return celtypes.IntType(value)
        return celtypes.StringType(str(value))

    def domains(values: Mapping[str, Mapping[str, Any]], quantity: bool) -> Any:
        out = celtypes.MapType()
        for domain, names in values.items():
            inner = celtypes.MapType()
            for name, value in names.items():
                if words is not None and name not in words:
                    continue
                inner[celtypes.StringType(name)] = cel(value, quantity)
            out[celtypes.StringType(domain)] = inner
        return out

    return celtypes.MapType({
        celtypes.StringType("driver"): celtypes.StringType(device.driver),
        celtypes.StringType("attributes"): domains(device.attribute_domains(), False),
        celtypes.StringType("capacity"): domains(device.capacity_domains(), True),
    })
