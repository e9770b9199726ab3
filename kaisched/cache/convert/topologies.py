"""KAI's Topology objects (kai.scheduler/v1alpha1): the order of a cluster's
topology levels, node labels outermost first."""
from __future__ import annotations

from kaisched.cache.convert.common import Obj


def topology_levels(obj: Obj) -> tuple[str, ...]:
    """spec.levels[].nodeLabel, outermost first; entries without a label are skipped."""
    levels = (obj.get("spec") or {}).get("levels")
    if not isinstance(levels, list):
        return ()
    return tuple(str(level["nodeLabel"]) for level in levels
                 if isinstance(level, dict) and level.get("nodeLabel"))
