"""What the cache says of what it read, each thing once: a warning Event per
node no pod can be placed on, and per pod whose gang declaration fell back to
its defaults; again only when what is wrong changes. They are about what was
read, not a session's decision, so the cache says them; the binder writes
them like every other Event."""
from __future__ import annotations

from kaisched.api.types import PodKey
from kaisched.framework.effects import RecordEvent

NODE_NOT_USABLE = "NodeNotUsable"       # the reason of the warning Event about such a node
IGNORED_DECLARATION = "IgnoredGangAnnotation"   # an optional gang setting fell back to its default


class Notices:
    def __init__(self) -> None:
        self._node_problems: dict[str, str] = {}             # node -> problem, told once
        self._untold: dict[str, RecordEvent] = {}            # node -> its warning, not yet sent
        self._warned: dict[PodKey, tuple[str, ...]] = {}     # pod -> warnings, told once
        self._unwarned: dict[PodKey, RecordEvent] = {}       # pod -> its warning, not yet sent

    def warned(self, pod: PodKey) -> bool:
        """Whether something was said of the pod (to be taken back if no longer so)."""
        return pod in self._warned

    def pod(self, key: PodKey, warnings: tuple[str, ...]) -> None:
        """The declarations of the pod that fell back to defaults, as read now
        (none: nothing to say of it, or no longer)."""
        if not warnings:
            self._warned.pop(key, None)
            self._unwarned.pop(key, None)
        elif self._warned.get(key) != warnings:
            self._warned[key] = warnings
            self._unwarned[key] = RecordEvent("Pod", key, "Warning", IGNORED_DECLARATION,
                                              "; ".join(warnings))

    def node(self, name: str, problem: str | None) -> None:
        """Why no pod can be placed on the node, as read now (None: it can)."""
        if problem is None:
            self._node_problems.pop(name, None)
            self._untold.pop(name, None)
        elif self._node_problems.get(name) != problem:
            self._node_problems[name] = problem
            self._untold[name] = RecordEvent(
                "Node", name, "Warning", NODE_NOT_USABLE,
                f"kaisched places no pod on node {name}: {problem}")

    def take(self) -> list[RecordEvent]:
        """What is to be said and was not yet: the nodes', then the pods', each by name."""
        told = [self._untold[name] for name in sorted(self._untold)]
        told += [self._unwarned[key] for key in sorted(self._unwarned)]
        self._untold.clear()
        self._unwarned.clear()
        return told
