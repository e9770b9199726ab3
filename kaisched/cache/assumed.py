"""Binds this scheduler sent whose echo has not arrived: until it does, the
pod shows as Bound on the node it was bound to, as the session that bound it
left it (see jobs.as_bound), so the echo changes nothing."""
from __future__ import annotations

from typing import Callable, Iterator, Mapping, Sequence

from kaisched.api.task import TaskInfo
from kaisched.api.types import NodeName, PodKey, TaskStatus
from kaisched.cache.convert import PodFacts
from kaisched.cache.jobs import as_bound


class Assumed(Mapping[PodKey, NodeName]):
    """pod -> the node its bind names. Kept by the model: keep() takes the
    binds of the session lent, kept() picks the moves of theirs that stay
    when it is taken back, and put_pod hands it every pod first (seen).
    The cache reads it (which binds wait for an echo) and forgets binds."""

    def __init__(self) -> None:
        self._nodes: dict[PodKey, NodeName] = {}
        self._keeping: dict[PodKey, NodeName] = {}      # binds of the session lent out
        self._settling: dict[PodKey, TaskInfo] = {}     # binds kept, still as allocated

    def __getitem__(self, key: PodKey) -> NodeName:
        return self._nodes[key]

    def __contains__(self, key: object) -> bool:
        return key in self._nodes

    def __iter__(self) -> Iterator[PodKey]:
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def keep(self, binds: Mapping[PodKey, NodeName]) -> None:
        """The session lent last sent these binds."""
        self._keeping.update(binds)

    def kept(self, journal: Sequence[tuple[TaskInfo, TaskInfo]],
             tasks: Mapping[PodKey, TaskInfo]) -> dict[PodKey, TaskInfo]:
        """The session lent is taken back (journal: its moves; tasks: as
        before it): of the binds it sent, the tasks it left allocated on the
        node bound to, from pending before it, whose moves stay. Those are
        assumed from now on, and settle() as their echo will show them. No
        volumes, devices or shares of a GPU of theirs moved with them: those
        binds go the long way, undone and echoed."""
        keeping, self._keeping = self._keeping, {}
        if not keeping or not journal:
            return {}
        finals: dict[PodKey, TaskInfo] = {}
        for _, new in journal:
            if new.key in keeping:
                finals[new.key] = new
        out = {}
        for key, task in finals.items():
            before = tasks.get(key)
            if (task.status is TaskStatus.ALLOCATED and task.node_name == keeping[key]
                    and before is not None and before.status is TaskStatus.PENDING
                    and not task.claims and not task.pvcs and task.gpu is None):
                out[key] = task
        for key, task in out.items():
            self._settling[key] = task
            self._nodes[key] = keeping[key]
        return out

    def settling(self) -> dict[PodKey, TaskInfo]:
        """The tasks kept since the last catch-up, as the session left them
        (allocated), handed out once: at the catch-up they show as their echo will."""
        settling, self._settling = self._settling, {}
        return settling

    def seen(self, key: PodKey, facts: PodFacts | None,
             mine: Callable[[PodFacts], bool]) -> PodFacts | None:
        """The pod as the model is to take it: as its echo will show it while
        its bind is assumed (mine: whether this scheduler schedules it);
        once it shows a node, or is gone or another's, the bind is no longer
        assumed."""
        bound_to = self._nodes.get(key)
        if bound_to is None:
            return facts
        if facts is not None and facts.status is TaskStatus.PENDING and facts.node_name is None \
                and mine(facts):
            return as_bound(facts, bound_to)
        del self._nodes[key]        # bound (here or elsewhere), or gone: its echo
        return facts

    def forget(self, key: PodKey) -> bool:
        """The pod's bind was refused or never made: True when it was assumed."""
        return self._nodes.pop(key, None) is not None
