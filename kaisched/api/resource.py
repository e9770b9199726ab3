"""Resource: an immutable vector of named scalar amounts.

cpu is held in millicores, memory in bytes, every other resource (pods,
nvidia.com/gpu, ephemeral-storage, ...) in its own unit; a GPU may be fractional.
A name that is absent counts as zero.
"""
from __future__ import annotations

from typing import Iterable, Iterator, Mapping

import attrs

from kaisched.api.quantity import parse_quantity

CPU = "cpu"
MEMORY = "memory"
GPU = "nvidia.com/gpu"
PODS = "pods"
# The order in which dimensions are laid out and printed: the well-known first.
WELL_KNOWN = (CPU, MEMORY, GPU, PODS)


def _freeze(values: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
    return tuple(sorted((k, float(v)) for k, v in values.items() if v))


@attrs.frozen(slots=True, repr=False, cache_hash=True)
class Resource:
    """Amounts by resource name; zero amounts are not stored."""

    items: tuple[tuple[str, float], ...] = ()

    @classmethod
    def of(cls, values: Mapping[str, float] | None = None, **named: float) -> Resource:
        merged = dict(values or {})
        merged.update(named)
        return cls(_freeze(merged))

    @classmethod
    def from_quantities(cls, quantities: Mapping[str, object]) -> Resource:
        """From a Kubernetes resource list ({"cpu": "500m", "memory": "1Gi"}).

        Raises ValueError naming the resource when a quantity is malformed.
        """
        values: dict[str, float] = {}
        for name, raw in quantities.items():
            try:
                amount = parse_quantity(raw)
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
            values[name] = float(amount * 1000) if name == CPU else float(amount)
        return cls(_freeze(values))

    def as_dict(self) -> dict[str, float]:
        return dict(self.items)

    def get(self, name: str) -> float:
        for key, value in self.items:
            if key == name:
                return value
        return 0.0

    def names(self) -> Iterator[str]:
        return (k for k, _ in self.items)

    def is_empty(self) -> bool:
        return not self.items

    def __add__(self, other: Resource) -> Resource:
        if not other.items:
            return self
        merged = dict(self.items)
        for key, value in other.items:
            merged[key] = merged.get(key, 0.0) + value
        return Resource(_freeze(merged))

    def __sub__(self, other: Resource) -> Resource:
        if not other.items:
            return self
        merged = dict(self.items)
        for key, value in other.items:
            merged[key] = merged.get(key, 0.0) - value
        return Resource(_freeze(merged))

    def fits_in(self, other: Resource, epsilon: float = 1e-9) -> bool:
        """Every amount here is at most the same amount in other."""
        mine = dict(other.items)
        return all(value <= mine.get(key, 0.0) + epsilon for key, value in self.items)

    less_equal = fits_in

    def exceeding(self, other: Resource, epsilon: float = 1e-9) -> list[str]:
        """The names whose amount here is above the amount in other."""
        mine = dict(other.items)
        return [key for key, value in self.items if value > mine.get(key, 0.0) + epsilon]

    def dominant_share(self, total: Resource) -> float:
        """The largest fraction of total this takes in any resource (DRF)."""
        share = 0.0
        totals = dict(total.items)
        for key, value in self.items:
            if key == PODS or value <= 0:
                continue
            cap = totals.get(key, 0.0)
            share = max(share, value / cap if cap > 0 else float("inf"))
        return share

    def __repr__(self) -> str:
        return f"Resource({format_resource(self)})"


def sum_resources(resources: Iterable[Resource]) -> Resource:
    merged: dict[str, float] = {}
    for res in resources:
        for key, value in res.items:
            merged[key] = merged.get(key, 0.0) + value
    return Resource(_freeze(merged))


def format_amount(name: str, value: float) -> str:
    """An amount as a person reads it: cores, Gi, whole GPUs."""
    if name == CPU:
        cores = value / 1000
        return f"{cores:g}"
    if name == MEMORY or name.startswith("ephemeral-storage") or name.startswith("hugepages"):
        gib = value / 2**30
        if gib >= 1 or value == 0:
            return f"{gib:.3g}Gi"
        return f"{value / 2**20:.3g}Mi"
    return f"{value:g}"


def format_resource(res: Resource) -> str:
    order = {name: i for i, name in enumerate(WELL_KNOWN)}
    names = sorted(res.names(), key=lambda n: (order.get(n, len(order)), n))
    return ", ".join(f"{n}={format_amount(n, res.get(n))}" for n in names) or "none"
