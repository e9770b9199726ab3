"""Storage as the scheduler sees it: PersistentVolumeClaims, PersistentVolumes,
StorageClasses and per-node attach limits (CSINode), and what a pod claims.

The rules are kube-scheduler's volume binding: a bound claim follows its
volume's node affinity; an unbound claim of a WaitForFirstConsumer class
waits for the scheduler to pick a node (a matching static volume, the
smallest that fits, as the PV controller picks, or one provisioned in the
class's allowed topologies); an unbound Immediate claim waits for the PV
controller.
"""
from __future__ import annotations

import enum
from typing import Mapping

import attrs

from kaisched.api.constraints import LabelSelector, SelectorTerm
from kaisched.api.types import NodeName, PodKey, split_key

# The annotation that tells a provisioner which node the first consumer went to.
SELECTED_NODE = "volume.kubernetes.io/selected-node"
# A class whose volumes are made by hand (local volumes): nothing is provisioned.
NO_PROVISIONER = "kubernetes.io/no-provisioner"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"

ClaimKey = str        # "namespace/name"


class BindingMode(str, enum.Enum):
    IMMEDIATE = "Immediate"
    WAIT = "WaitForFirstConsumer"


@attrs.frozen(slots=True)
class PodClaim:
    """One claim a pod mounts: a persistentVolumeClaim volume, or the claim
    the ephemeral volume controller makes for an ephemeral one (`<pod>-<volume>`)."""

    key: ClaimKey
    ephemeral: bool = False

    @property
    def name(self) -> str:
        return split_key(self.key)[1]


@attrs.frozen(slots=True)
class StorageClassInfo:
    name: str
    provisioner: str
    mode: BindingMode = BindingMode.IMMEDIATE
    allowed_topologies: tuple[SelectorTerm, ...] = ()   # ORed; empty: anywhere
    default: bool = False

    @property
    def provisions(self) -> bool:
        return bool(self.provisioner) and self.provisioner != NO_PROVISIONER


@attrs.frozen(slots=True)
class ClaimInfo:
    key: ClaimKey
    uid: str = ""
    class_name: str | None = None       # None: not set (the default class, if any, applies)
    volume_name: str = ""               # spec.volumeName: bound (or being bound) to it
    phase: str = "Pending"
    access_modes: frozenset[str] = frozenset()
    request: int = 0                    # bytes
    volume_mode: str = "Filesystem"
    selector: LabelSelector | None = None
    selected_node: NodeName | None = None
    deleting: bool = False
    problem: str | None = None          # a field that could not be read
    failure: str | None = None          # the last ProvisioningFailed Event's message

    @property
    def bound(self) -> bool:
        return bool(self.volume_name)


@attrs.frozen(slots=True)
class VolumeInfo:
    name: str
    class_name: str = ""
    capacity: int = 0
    access_modes: frozenset[str] = frozenset()
    volume_mode: str = "Filesystem"
    node_affinity: tuple[SelectorTerm, ...] = ()        # ORed; empty: any node
    claim: ClaimKey | None = None                       # spec.claimRef, as namespace/name
    claim_uid: str = ""
    phase: str = "Available"
    driver: str = ""                                    # CSI driver (attach limits)
    labels: tuple[tuple[str, str], ...] = ()
    deleting: bool = False

    def matches(self, claim: ClaimInfo, class_name: str) -> bool:
        """Could the PV controller bind claim to this volume (node aside)?"""
        if self.deleting or self.phase not in ("Available", "Pending", ""):
            return False
        if self.claim is not None and (self.claim != claim.key
                                       or (self.claim_uid and self.claim_uid != claim.uid)):
            return False
        if self.class_name != class_name or self.volume_mode != claim.volume_mode:
            return False
        if not claim.access_modes <= self.access_modes or self.capacity < claim.request:
            return False
        return claim.selector is None or claim.selector.matches(dict(self.labels))


@attrs.frozen(slots=True)
class Storage:
    """Every claim, volume, class and attach limit, and who uses each claim.

    users: per claim, the pods that mount it and are not finished (any
    scheduler's), with the node each is on (None: not placed yet).
    limits: per node, per CSI driver, how many volumes it may attach.
    """

    claims: Mapping[ClaimKey, ClaimInfo] = attrs.field(factory=dict)
    volumes: Mapping[str, VolumeInfo] = attrs.field(factory=dict)
    classes: Mapping[str, StorageClassInfo] = attrs.field(factory=dict)
    limits: Mapping[str, Mapping[str, int]] = attrs.field(factory=dict)
    users: Mapping[ClaimKey, tuple[tuple[PodKey, NodeName | None], ...]] = attrs.field(factory=dict)
    default_class: str = attrs.field(init=False, default=attrs.Factory(
        lambda self: min((c.name for c in self.classes.values() if c.default), default=""),
        takes_self=True))

    def __bool__(self) -> bool:
        return bool(self.users)

    def class_of(self, claim: ClaimInfo) -> str:
        """The class name a claim resolves to ("" for none; the default class
        when it names none)."""
        return claim.class_name if claim.class_name is not None else self.default_class

    def driver_of(self, claim: ClaimInfo) -> str:
        """The CSI driver that attaches the claim's volume: its bound volume's,
        else its class's provisioner (the volume it will get)."""
        if claim.bound:
            volume = self.volumes.get(claim.volume_name)
            return volume.driver if volume is not None else ""
        cls = self.classes.get(self.class_of(claim))
        return cls.provisioner if cls is not None and cls.provisions else ""

    def candidates(self, claim: ClaimInfo) -> list[VolumeInfo]:
        """Static volumes the claim could bind to, a volume pre-bound to it
        first, then smallest first (ties by name), as the PV controller picks."""
        class_name = self.class_of(claim)
        found = [v for v in self.volumes.values() if v.matches(claim, class_name)]
        return sorted(found, key=lambda v: (v.claim != claim.key, v.capacity, v.name))


NO_STORAGE = Storage()
