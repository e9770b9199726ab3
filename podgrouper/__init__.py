"""The PodGrouper: gives each kaisched pod the PodGroup of its top owner.

PodGrouper is loaded on first use so that importing the pure
podgrouper.groupers does not pull in the controller's cluster I/O.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from podgrouper.controller import PodGrouper

__all__ = ["PodGrouper"]


def __getattr__(name: str) -> Any:
    if name == "PodGrouper":
        from podgrouper.controller import PodGrouper
        return PodGrouper
    raise AttributeError(f"module 'podgrouper' has no attribute {name!r}")
