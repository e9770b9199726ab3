"""Device selectors: CEL expressions over one device, as Dynamic Resource
Allocation writes them (`device.driver`, `device.attributes["domain"].name`,
`device.capacity["domain"].name.compareTo(quantity("40Gi"))`,
`device.attributes["domain"].driverVersion.isGreaterThan(semver("1.2.0"))`).

Each distinct expression is compiled once per process (cel-python); its
answers are remembered per distinct view of a device -- only the attributes
the expression can name count, so a thousand GPUs that differ only in a uuid
the selector never reads are asked about once. An expression that reads a
domain's attributes as a whole (`size(device.attributes["x"])`, `"a" in
device.attributes["x"]`, a macro over them) sees every attribute.

Besides cel-python's standard functions, Kubernetes' own that selectors use:
`quantity()` and its comparisons, and the semver library (`semver()`,
`isSemver()`, `major()`, `minor()`, `patch()`, `compareTo()`, `isGreaterThan()`,
`isLessThan()`), added as CEL extension functions; version attributes are
semver values. A selector that fails while it runs (a missing attribute, a
bad version) is an error, not a mismatch: the allocation fails with it, as
upstream's allocator fails the pod.
"""
from __future__ import annotations

import functools
import re
from decimal import Decimal
from typing import Any, Mapping, Protocol

import attrs

from kaisched.api.quantity import parse_quantity


class Version(str):
    """A version attribute of a device (`version: "1.2.3"` in a ResourceSlice):
    a semver value to selectors, text everywhere else -- but never equal to a
    string attribute of the same text (matchAttribute compares typed values)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Version) and str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(("version", str(self)))


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
# A domain's map read whole (not one name of it): size(), `in`, a comparison.
_WHOLE = re.compile(
    r"device\s*\.\s*(attributes|capacity)\s*(\[\s*(\"[^\"]*\"|'[^']*')\s*\])?"
    r"(?!\s*(\.\s*[A-Za-z_]|\[))")
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

    import semver as semverlib

    class Semver(celtypes.StringType):
        """A version (Kubernetes CEL's semver type): compared by precedence."""

    def parsed(value: Any) -> Any:
        return semverlib.Version.parse(str(value))

    def make_semver(text: Any) -> Semver:
        parsed(text)            # not a version: a runtime error, as in Kubernetes
        return Semver(str(text))

    def is_semver(text: Any) -> Any:
        return celtypes.BoolType(semverlib.Version.is_valid(str(text)))

    def ordered(a: Any, b: Any) -> int:
        if isinstance(a, Semver) or isinstance(b, Semver):
            return int(parsed(a).compare(parsed(b)))
        return (float(a) > float(b)) - (float(a) < float(b))

    functions = {
        "quantity": quantity,
        "compareTo": lambda a, b: celtypes.IntType(ordered(a, b)),
        "isGreaterThan": lambda a, b: celtypes.BoolType(ordered(a, b) > 0),
        "isLessThan": lambda a, b: celtypes.BoolType(ordered(a, b) < 0),
        "asInteger": lambda a: celtypes.IntType(int(float(a))),
        "asApproximateFloat": lambda a: celtypes.DoubleType(float(a)),
        "semver": make_semver,
        "isSemver": is_semver,
        "major": lambda v: celtypes.IntType(parsed(v).major),
        "minor": lambda v: celtypes.IntType(parsed(v).minor),
        "patch": lambda v: celtypes.IntType(parsed(v).patch),
    }
    return celpy.Environment(), functions, celtypes, Quantity, Semver


@attrs.define(eq=False)
class _Program:
    """One compiled expression and what it answered, per device view.
    words: the names it can read (None: it may read any)."""

    run: Any
    words: frozenset[str] | None         # None: the expression may read anything
    answers: dict[tuple[object, ...], tuple[bool, str | None]] = attrs.field(factory=dict)


@functools.lru_cache(maxsize=None)
def _compile(expression: str) -> _Program | str:
    env, functions, _, _, _ = _runtime()
    try:
        ast = env.compile(expression)
        run = env.program(ast, functions=functions)
    except Exception as exc:     # cel-python raises its parser's errors of several kinds
        column = getattr(exc, "column", None)
        where = f" at column {column}" if isinstance(column, int) else ""
        return f"{exc.__class__.__name__}{where}"
    whole = _WALKS.search(expression) or _WHOLE.search(expression)
    words = None if whole else frozenset(_WORDS.findall(expression))
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
        """(matches, the error when evaluating it failed: then it is no answer)."""
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
    except Exception as exc:      # a runtime error: the caller fails the allocation
        return False, _error_text(exc)
    if isinstance(result, Exception):
        return False, _error_text(result)
    if not isinstance(result, (bool, _runtime()[2].BoolType)):
        return False, f"the selector returned {type(result).__name__}, not a bool"
    return bool(result), None


def _error_text(exc: BaseException) -> str:
    """What went wrong, in words: cel-python's errors carry (message, type,
    details), and the details say it best when there are any."""
    args = getattr(exc, "args", ())
    if args and isinstance(args[0], str):
        detail = args[2] if len(args) > 2 and args[2] else ()
        return ", ".join(map(str, detail)) if detail else args[0]
    return f"{exc.__class__.__name__}: {exc}"


def _device_value(device: Device, words: frozenset[str] | None) -> Any:
    _, _, celtypes, quantity_type, semver_type = _runtime()

    def cel(value: Any, quantity: bool) -> Any:
        if isinstance(value, Version):
            return semver_type(str(value))
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
