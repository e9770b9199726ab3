"""Dynamic Resource Allocation, as values: devices a driver publishes
(ResourceSlices), the classes that name kinds of device (DeviceClasses), and
what a claim asks for and was given (ResourceClaims). Both API shapes
(resource.k8s.io/v1 and v1beta1) are converted into these at the boundary."""
from __future__ import annotations

from decimal import Decimal
from typing import Mapping, Union

import attrs

from kaisched.api.cel import Selector
from kaisched.api.constraints import SelectorTerm
from kaisched.api.types import NodeName, split_key

AttrValue = Union[bool, int, str]       # string, int, bool and version attributes
DeviceKey = tuple[str, str, str]        # driver, pool, device name


@attrs.frozen(slots=True)
class Device:
    """One device of a pool. node: on that node only; otherwise on the nodes
    its slice's node selector admits (every node when it has none)."""

    driver: str
    pool: str
    name: str
    node: NodeName | None = None
    node_terms: tuple[SelectorTerm, ...] = ()
    attributes: tuple[tuple[str, str, AttrValue], ...] = ()   # (domain, name, value), sorted
    capacity: tuple[tuple[str, str, Decimal], ...] = ()

    @property
    def key(self) -> DeviceKey:
        return (self.driver, self.pool, self.name)

    def attribute(self, qualified: str) -> AttrValue | None:
        """The attribute named "domain/name" (a bare name is the driver's)."""
        domain, _, name = qualified.rpartition("/")
        domain = domain or self.driver
        return next((v for d, n, v in self.attributes if d == domain and n == name), None)

    def attribute_domains(self) -> dict[str, dict[str, AttrValue]]:
        out: dict[str, dict[str, AttrValue]] = {}
        for domain, name, value in self.attributes:
            out.setdefault(domain, {})[name] = value
        return out

    def capacity_domains(self) -> dict[str, dict[str, Decimal]]:
        out: dict[str, dict[str, Decimal]] = {}
        for domain, name, value in self.capacity:
            out.setdefault(domain, {})[name] = value
        return out

    def view(self, words: frozenset[str] | None) -> tuple[object, ...]:
        """What a selector reading only these names sees of the device."""
        if words is None:
            return (self.driver, self.attributes, self.capacity)
        return (self.driver, tuple(a for a in self.attributes if a[1] in words),
                tuple(c for c in self.capacity if c[1] in words))

    def on_node(self, name: NodeName, labels: Mapping[str, str]) -> bool:
        if self.node is not None:
            return self.node == name
        return not self.node_terms or any(t.matches(labels, name) for t in self.node_terms)


@attrs.frozen(slots=True)
class DeviceClass:
    name: str
    selectors: tuple[Selector, ...] = ()
    problem: str | None = None
    quota_resource: str | None = None   # its kaisched.io/quota-resource annotation


@attrs.frozen(slots=True, cache_hash=True)
class DeviceRequest:
    """One request of a claim: count devices of a class (or all of them) that
    pass the selectors; or, with alternatives (firstAvailable), the first of
    those sub-requests that can be met."""

    name: str
    device_class: str = ""
    selectors: tuple[Selector, ...] = ()
    all: bool = False
    count: int = 1
    alternatives: tuple[DeviceRequest, ...] = ()


@attrs.frozen(slots=True, cache_hash=True)
class Constraint:
    """matchAttribute: every device of these requests (all, when empty)
    carries the attribute, with one value."""

    requests: tuple[str, ...]
    match_attribute: str


@attrs.frozen(slots=True)
class DeviceResult:
    request: str            # the request's name; "request/sub" for a firstAvailable choice
    driver: str
    pool: str
    device: str

    @property
    def key(self) -> DeviceKey:
        return (self.driver, self.pool, self.device)


@attrs.frozen(slots=True)
class Allocation:
    """Devices given to a claim, and where pods that use it may run: on one
    node (node-local devices), on the nodes of a slice's node selector
    (terms: a device reachable from a rack, say), or anywhere."""

    results: tuple[DeviceResult, ...]
    node: NodeName | None = None
    terms: tuple[SelectorTerm, ...] = ()

    def admits(self, name: NodeName, labels: Mapping[str, str]) -> bool:
        if self.node is not None:
            return self.node == name
        return not self.terms or any(t.matches(labels, name) for t in self.terms)


PODS = "pods"
PODGROUPS = "podgroups"         # of scheduling.k8s.io: a claim its PodGroup shares


@attrs.frozen(slots=True)
class Consumer:
    """What a claim is reserved for: a pod, or (a claim its pods share) a
    PodGroup of the upstream Workload API."""

    name: str
    uid: str
    resource: str = PODS
    api_group: str = ""

    @property
    def is_pod(self) -> bool:
        return self.resource == PODS


@attrs.frozen(slots=True)
class PodClaimRef:
    """One entry of a pod's spec.resourceClaims, and the claim made for it
    from a template (its status.resourceClaimStatuses), if one was."""

    name: str
    claim_name: str | None = None
    template_name: str | None = None
    made: str | None = None


@attrs.frozen(slots=True)
class GroupClaim:
    """One entry of a PodGroup's spec.resourceClaims: a claim its pods share.
    A pod uses it by naming the same claim in its own spec.resourceClaims
    (name, and the same claim or template); a template's claim is made once
    for the group (status.resourceClaimStatuses names it)."""

    name: str
    claim_name: str | None = None
    template_name: str | None = None
    made: str | None = None

    def matches(self, ref: PodClaimRef) -> bool:
        return (ref.name, ref.claim_name, ref.template_name) == \
            (self.name, self.claim_name, self.template_name)

    @property
    def claim(self) -> str | None:
        """The ResourceClaim's name (None: made from a template, not yet)."""
        return self.claim_name or self.made


@attrs.frozen(slots=True)
class Claim:
    key: str                          # namespace/name
    uid: str = ""
    api_version: str = "resource.k8s.io/v1"
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    allocation: Allocation | None = None
    reserved_for: tuple[Consumer, ...] = ()
    owner_pod: str | None = None      # made from a template for this pod (namespace/name)
    problem: str | None = None

    @property
    def namespace(self) -> str:
        return split_key(self.key)[0]

    def reserved(self, pod: str) -> bool:
        name = split_key(pod)[1]
        return any(c.name == name and c.is_pod for c in self.reserved_for)

    def pods(self) -> int:
        """How many pods it is reserved for (a PodGroup counts none)."""
        return sum(1 for c in self.reserved_for if c.is_pod)

    def allocated(self, allocation: Allocation | None) -> Claim:
        """The claim with this allocation (made directly: evolve is slow on a hot path)."""
        return Claim(self.key, self.uid, self.api_version, self.requests, self.constraints,
                     allocation, self.reserved_for, self.owner_pod, self.problem)

    def reserved_by(self, consumers: tuple[Consumer, ...]) -> Claim:
        return Claim(self.key, self.uid, self.api_version, self.requests, self.constraints,
                     self.allocation, consumers, self.owner_pod, self.problem)

    @property
    def shape(self) -> tuple[object, ...]:
        """What allocating it reads: claims of one shape fit the same nodes."""
        return (self.requests, self.constraints)
