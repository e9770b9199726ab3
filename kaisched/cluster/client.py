"""The ClusterClient protocol: the one seam between kaisched and an API server.

Two backends implement it: memory.py (in-process, for replay, simulate and
tests) and kube.py (a real cluster). Objects cross it as plain dicts.
"""
from __future__ import annotations

from typing import Any, Iterable, Protocol

import attrs

from kaisched.cluster.kinds import Kind

Obj = dict[str, Any]


@attrs.frozen(slots=True)
class WatchEvent:
    type: str            # ADDED | MODIFIED | DELETED
    kind: Kind
    obj: Obj


class Subscription(Protocol):
    def drain(self) -> list[WatchEvent]:
        """Every event since the last drain; the first drain lists what exists
        (but the late kinds', which may come later: see settle)."""
        ...

    def settle(self) -> None:
        """Wait until the first lists of the late kinds have ended too (a
        backend may ask for them only now)."""
        ...

    def close(self) -> None:
        """Stop following: no more events."""
        ...


class ClusterClient(Protocol):
    def list(self, kind: Kind, namespace: str | None = None) -> list[Obj]: ...

    def get(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        """The object, or None when it does not exist (other failures raise ApiError)."""
        ...

    def create(self, obj: Obj) -> Obj: ...

    def patch(self, kind: Kind, namespace: str, name: str, patch: Obj) -> Obj:
        """A JSON merge patch (RFC 7396) of the object's metadata and spec."""
        ...

    def patch_status(self, kind: Kind, namespace: str, name: str, status: Obj) -> Obj:
        """Merge-patch the status subresource."""
        ...

    def delete(self, kind: Kind, namespace: str, name: str) -> None: ...

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """The pods/binding subresource."""
        ...

    def evict(self, namespace: str, name: str) -> None:
        """The pods/eviction subresource (graceful delete)."""
        ...

    def subscribe(self, kinds: Iterable[Kind]) -> Subscription: ...

    def watching(self) -> bool:
        """True while every subscription misses nothing (its watches are
        connected); a cache fed by one that is down must not be scheduled from."""
        ...


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396: dicts merge, None deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result
