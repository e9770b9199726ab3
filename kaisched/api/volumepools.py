"""The static volumes unbound claims could take, kept per claim shape for a
session: which nodes each volume reaches, how many free volumes of a shape
each node reaches, and the smallest free one at a node (as the PV controller
picks), updated as volumes are picked and given back.

A cluster of local NVMe volumes has one per node, thousands in all: a pod
asks "how many free volumes of my claim's shape reach each node", one array
lookup, rather than walking the volumes.
"""
from __future__ import annotations

from typing import Callable, Hashable, Sequence

import attrs
import numpy as np

from kaisched.api.constraints import HOSTNAME_KEY, SelectorTerm
from kaisched.api.domains import Domains
from kaisched.api.node import NodeSpec
from kaisched.api.volumes import ClaimInfo, ClaimKey, Storage, VolumeInfo


class NodeMasks:
    """Which nodes node selector terms (ORed) admit, once per term set. Terms
    made of `In` requirements (a local volume's hostname, a zone) are answered
    by label value lookups; others term by term over the nodes."""

    def __init__(self, specs: Sequence[NodeSpec], domains: Callable[[str], Domains]) -> None:
        self.specs = specs
        self.domains = domains
        self._found: dict[tuple[SelectorTerm, ...], np.ndarray] = {}
        self._ids: dict[str, dict[str, int]] = {}

    def __call__(self, terms: Sequence[SelectorTerm]) -> np.ndarray:
        key = tuple(terms)
        found = self._found.get(key)
        if found is None:
            found = self._found[key] = self._mask(key)
        return found

    def _mask(self, terms: tuple[SelectorTerm, ...]) -> np.ndarray:
        if not terms:
            return np.ones(len(self.specs), dtype=bool)
        out = np.zeros(len(self.specs), dtype=bool)
        for term in terms:
            fast = self._by_values(term)
            if fast is None:
                # The kubelet sets the hostname label; nodes written by hand may lack it.
                fast = np.array([term.matches({HOSTNAME_KEY: s.name, **s.labels}, s.name)
                                 for s in self.specs], dtype=bool)
            out |= fast
        return out

    def _by_values(self, term: SelectorTerm) -> np.ndarray | None:
        if term.fields or not term.expressions or any(r.operator != "In" for r in term.expressions):
            return None
        out = np.ones(len(self.specs), dtype=bool)
        for req in term.expressions:
            domains = self.domains(req.key)
            ids = self._ids.get(req.key)
            if ids is None:
                ids = self._ids[req.key] = {name: i for i, name in enumerate(domains.names)}
            wanted = [ids[v] for v in req.values if v in ids]
            out &= np.isin(domains.ids, wanted)
        return out


@attrs.define(eq=False)
class _Pool:
    """The unclaimed volumes matching one claim shape, smallest first."""
    volumes: list[VolumeInfo]
    reach: np.ndarray                       # per row: how many free ones reach it
    at_row: dict[int, list[int]] | None = None


class VolumePools:
    def __init__(self, storage: Storage, masks: NodeMasks) -> None:
        self.storage = storage
        self.masks = masks
        self.taken: dict[str, ClaimKey] = {}           # volume -> the claim it was picked for
        self._pools: dict[Hashable, _Pool] = {}
        self._pools_of: dict[str, list[_Pool]] = {}    # volume -> the pools holding it
        # Volumes whose claimRef already names an unbound claim: that claim's, no other's.
        self._prebound = {v.claim: v for v in storage.volumes.values()
                          if v.claim is not None and v.claim in storage.claims
                          and not storage.claims[v.claim].bound}

    def prebound(self, claim: ClaimInfo) -> VolumeInfo | None:
        found = self._prebound.get(claim.key)
        if found is None or not found.matches(claim, self.storage.class_of(claim)):
            return None
        return found

    def shape(self, claim: ClaimInfo) -> Hashable:
        """What decides which unclaimed volumes a claim could take."""
        return (self.storage.class_of(claim), claim.request, claim.access_modes,
                claim.volume_mode, claim.selector)

    def reach(self, claim: ClaimInfo) -> np.ndarray:
        """Per node, how many free volumes of the claim's shape it reaches."""
        return self._pool(claim).reach

    def pick(self, claim: ClaimInfo, row: int) -> VolumeInfo | None:
        """The volume the claim takes if its pod goes to row: the one pre-bound
        to it, else the smallest free one reaching the row (ties by name)."""
        mine = self.prebound(claim)
        if mine is not None and self.masks(mine.node_affinity)[row]:
            return mine
        pool = self._pool(claim)
        if pool.at_row is None:
            pool.at_row = {}
            for i, volume in enumerate(pool.volumes):
                for r in np.flatnonzero(self.masks(volume.node_affinity)):
                    pool.at_row.setdefault(int(r), []).append(i)
        return next((pool.volumes[i] for i in pool.at_row.get(row, ())
                     if pool.volumes[i].name not in self.taken), None)

    def take(self, volume: VolumeInfo, claim: ClaimKey) -> None:
        self.taken[volume.name] = claim
        for pool in self._pools_of.get(volume.name, ()):
            pool.reach -= self.masks(volume.node_affinity)

    def give_back(self, volume: VolumeInfo) -> None:
        if self.taken.pop(volume.name, None) is None:
            return
        for pool in self._pools_of.get(volume.name, ()):
            pool.reach += self.masks(volume.node_affinity)

    def _pool(self, claim: ClaimInfo) -> _Pool:
        key = self.shape(claim)
        pool = self._pools.get(key)
        if pool is None:
            class_name = self.storage.class_of(claim)
            volumes = sorted((v for v in self.storage.volumes.values()
                              if v.claim is None and v.matches(claim, class_name)),
                             key=lambda v: (v.capacity, v.name))
            reach = np.zeros(len(self.masks.specs), dtype=np.int64)
            for volume in volumes:
                if volume.name not in self.taken:
                    reach += self.masks(volume.node_affinity)
            pool = self._pools[key] = _Pool(volumes, reach)
            for volume in volumes:
                self._pools_of.setdefault(volume.name, []).append(pool)
        return pool
