"""One pure function per owner kind: raw owner object in, GroupSpec out.

No I/O here, and no imports of kaisched.cluster, kubernetes, threads or
sockets (tests/podgrouper enforces it by walking the imports).
"""
from podgrouper.groupers.registry import GroupKind, Registry, builtin_groupers, group_owner, pick
from podgrouper.groupers.spec import NO_POD, Grouper, GroupSpec, Lineage, SubGroup

__all__ = ["NO_POD", "GroupKind", "GroupSpec", "Grouper", "Lineage", "Registry", "SubGroup",
           "builtin_groupers", "group_owner", "pick"]
