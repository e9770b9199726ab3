"""Allocating a claim's devices on one node, as kube-scheduler's structured
allocator does: requests in order, each either count devices or all of the
matching ones, a firstAvailable request taking the first sub-request that
can be met, matchAttribute constraints across requests; a device goes to one
claim only. A bounded backtracking search: what it cannot settle within its
budget it counts as not fitting."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from kaisched.api.dradevices import AttrValue, Claim, Constraint, DeviceRequest, DeviceResult
from kaisched.api.drainventory import Devices

SEARCH_BUDGET = 5000        # device choices tried per claim and node


class Eligibility:
    """Which devices each request may take (its class's selectors and its
    own), worked out once per request over the whole inventory."""

    def __init__(self, devices: Devices) -> None:
        self.devices = devices
        self._masks: dict[DeviceRequest, np.ndarray] = {}
        # By identity first: alike requests of many claims are equal but not
        # the same object, and comparing them field by field costs more.
        self._by_id: dict[int, tuple[DeviceRequest, np.ndarray]] = {}
        # A selector that failed while it ran on some device: the request's
        # allocation fails with it (where, which selector, what went wrong).
        self._errors: dict[DeviceRequest, str] = {}

    def mask(self, request: DeviceRequest) -> np.ndarray:
        known = self._by_id.get(id(request))
        if known is not None and known[0] is request:
            return known[1]
        found = self._masks.get(request)
        if found is None:
            found = self._masks[request] = self._compute(request)
        self._by_id[id(request)] = (request, found)
        return found

    def _compute(self, request: DeviceRequest) -> np.ndarray:
        devices = self.devices.devices
        out = np.zeros(len(devices), dtype=bool)
        cls = self.devices.classes.get(request.device_class)
        if cls is None or cls.problem:
            return out
        selectors = (*cls.selectors, *request.selectors)
        if any(s.error for s in selectors):
            return out
        own = len(cls.selectors)
        for i, device in enumerate(devices):
            for k, selector in enumerate(selectors):
                matches, error = selector.matches(device)
                if error is not None and request not in self._errors:
                    where = f"DeviceClass {cls.name} selector #{k}" if k < own \
                        else f"selector #{k - own}"
                    self._errors[request] = (f"{where}: CEL runtime error on device "
                                             f"{device.driver}/{device.pool}/{device.name}: {error}")
                if not matches:
                    break
            else:
                out[i] = True
        return out

    def problem(self, claim: Claim) -> str | None:
        """Why no device could ever be allocated for the claim, or None."""
        if claim.problem:
            return claim.problem
        for request in claim.requests:
            for leaf in request.alternatives or (request,):
                name = leaf.name if leaf is request else f"{request.name}/{leaf.name}"
                cls = self.devices.classes.get(leaf.device_class)
                if not leaf.device_class:
                    return f"request {name} names no device class"
                if cls is None:
                    return f"request {name}: DeviceClass {leaf.device_class} does not exist"
                if cls.problem:
                    return f"request {name}: DeviceClass {leaf.device_class}: {cls.problem}"
                for where, selectors in (("DeviceClass " + cls.name, cls.selectors),
                                         ("request " + name, leaf.selectors)):
                    bad = next((s for s in selectors if s.error), None)
                    if bad is not None:
                        return (f"{where}: selector {bad.expression!r} does not compile "
                                f"({bad.error})")
                self.mask(leaf)
                if leaf in self._errors:
                    # As upstream's allocator: an error, not "no device matches".
                    return f"request {name}: {self._errors[leaf]}"
        return None


def leaves(request: DeviceRequest) -> list[tuple[str, DeviceRequest]]:
    """The requests to try, in order, with the names their results carry."""
    if not request.alternatives:
        return [(request.name, request)]
    return [(f"{request.name}/{sub.name}", sub) for sub in request.alternatives]


def allocate(claim: Claim, candidates: Sequence[int], taken: Callable[[int], bool],
             eligible: Eligibility) -> tuple[DeviceResult, ...] | None:
    """The devices for the claim among candidates (a node's), none taken;
    None when the node cannot satisfy it."""
    devices = eligible.devices.devices
    def matching(leaf: DeviceRequest) -> list[int]:
        mask = eligible.mask(leaf)
        return [i for i in candidates if mask[i]]

    options = [[(name, leaf, matching(leaf)) for name, leaf in leaves(request)]
               for request in claim.requests]
    chosen: list[tuple[str, int]] = []
    used: set[int] = set()
    fixed: dict[int, AttrValue] = {}
    budget = [SEARCH_BUDGET]

    def scoped(name: str) -> list[tuple[int, Constraint]]:
        top = name.split("/", 1)[0]
        return [(c, con) for c, con in enumerate(claim.constraints)
                if not con.requests or name in con.requests or top in con.requests]

    def constrain(rules: list[tuple[int, Constraint]], i: int) -> list[int] | None:
        newly: list[int] = []
        for c, con in rules:
            value = devices[i].attribute(con.match_attribute)
            if value is None or (c in fixed and fixed[c] != value):
                for n in newly:
                    del fixed[n]
                return None
            if c not in fixed:
                fixed[c] = value
                newly.append(c)
        return newly

    def request(r: int) -> bool:
        if r == len(options):
            return True
        for name, leaf, pool in options[r]:
            if leaf.all:
                if not pool or any(taken(i) or i in used for i in pool):
                    continue
                free, count = pool, len(pool)
            else:
                free = [i for i in pool if i not in used and not taken(i)]
                count = leaf.count
                if len(free) < count:
                    continue
            if pick(r, name, scoped(name), free, count, 0):
                return True
        return False

    def pick(r: int, name: str, rules: list[tuple[int, Constraint]], pool: list[int],
             count: int, start: int) -> bool:
        if count == 0:
            return request(r + 1)
        for j in range(start, len(pool) - count + 1):
            budget[0] -= 1
            if budget[0] < 0:
                return False
            i = pool[j]
            newly = constrain(rules, i)
            if newly is None:
                continue
            used.add(i)
            chosen.append((name, i))
            if pick(r, name, rules, pool, count - 1, j + 1):
                return True
            used.discard(i)
            chosen.pop()
            for n in newly:
                del fixed[n]
        return False

    if not request(0):
        return None
    return tuple(DeviceResult(name, devices[i].driver, devices[i].pool, devices[i].name)
                 for name, i in chosen)
