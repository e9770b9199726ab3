"""A PodGroup's subgroups as a tree, and the gang rule over it.

A leaf subgroup holds pods (those labelled kaisched.io/subgroup: <leaf>) and
is met when `min_member` of them count. An inner subgroup (one that others
name as their `parent`) holds subgroups, and is met when `min_sub_group` of
its children are met, each by its own minimum ("2 of my 4 pipeline stages");
without `min_sub_group`, all of them. The PodGroup itself is the root: its
children are the subgroups that name no parent, and it needs its own
`min_sub_group` of them (all, without one). A flat list of subgroups is the
tree of one level where every subgroup is needed, as it always was.

Everything here works on counts of pods per leaf, so the same rule answers
"is the gang ready" (placed pods), "is it valid" (pods that exist), "what is
the next thing to place" and "what may an eviction take" (running pods).
Pure values, no I/O.
"""
from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import attrs

ROOT = ""       # the PodGroup itself; no subgroup may be named so (names are DNS labels)
Counts = Mapping[str, int]      # pods per leaf subgroup


@attrs.frozen(slots=True)
class TopologyRule:
    """Where a gang (or a subgroup) must or would like to sit whole: inside one
    domain of a node label (a rack, a block, a zone, an NVLink clique)."""

    required: str | None = None     # no domain of this level fits: the gang waits
    preferred: str | None = None    # the tightest fitting domain, widening level by level

    def __bool__(self) -> bool:
        return bool(self.required or self.preferred)


NO_TOPOLOGY = TopologyRule()


@attrs.frozen(slots=True)
class SubGroup:
    """One node of the tree. A leaf gives min_member (pods); an inner
    subgroup gives min_sub_group (children met), or None for all of them.
    parent: the inner subgroup it belongs to (None: the PodGroup itself)."""

    name: str
    min_member: int = 0
    topology: TopologyRule = NO_TOPOLOGY
    parent: str | None = None
    min_sub_group: int | None = None


@attrs.frozen(slots=True)
class Step:
    """Part of placing a gang: `parts` are (leaf, pods) to place. A whole step
    is one child of a subgroup that needs only some of its children: it is
    placed entire or not at all (half a pipeline stage is no stage)."""

    parts: tuple[tuple[str, int], ...]
    whole: bool


@attrs.frozen(slots=True)
class Plan:
    """How to take a gang to its minimum and on from there: `needed` the steps
    that reach the minimum (the cheapest children where there is a choice),
    `alternatives` the other children of a choice, whole, best first (tried
    when a needed one does not fit, or as extras once the gang runs), and
    `open` the leaves that may take single extra pods (those not inside a
    child of a choice that is still short of its minimum)."""

    needed: tuple[Step, ...]
    alternatives: tuple[Step, ...]
    open: frozenset[str]


class SubGroupTree:
    """The tree of one GangSpec's subgroups (made once per distinct spec: see tree_of).

    Made from whatever the PodGroup says, even a broken declaration: a parent
    that does not exist or a cycle hangs the subgroup under the root (the
    converter reports the problem, which keeps the gang from being placed)."""

    __slots__ = ("children", "parent", "minimum", "need", "leaves", "order", "post", "choices",
                 "_below")

    def __init__(self, subgroups: Sequence[SubGroup], root_min_sub_group: int | None) -> None:
        named: dict[str, SubGroup] = {}
        for sg in subgroups:
            named.setdefault(sg.name, sg)
        parent = {n: (sg.parent if sg.parent in named and sg.parent != n else ROOT)
                  for n, sg in named.items()}
        for name in named:          # a cycle: hang its members under the root
            seen, at = {name}, parent[name]
            while at != ROOT:
                if at in seen:
                    parent[name] = ROOT
                    break
                seen.add(at)
                at = parent[at]
        children: dict[str, list[str]] = {ROOT: []}
        for name in named:
            children.setdefault(parent[name], []).append(name)
        self.parent = parent
        self.children = {k: tuple(v) for k, v in children.items()}
        self.leaves = tuple(n for n in named if n not in self.children)
        self.order = {n: i for i, n in enumerate(named)}
        self.minimum = {n: max(named[n].min_member, 0) for n in self.leaves}
        self.need: dict[str, int] = {}
        for node, kids in self.children.items():
            wanted = root_min_sub_group if node == ROOT else named[node].min_sub_group
            self.need[node] = len(kids) if wanted is None else min(max(wanted, 0), len(kids))
        post: list[str] = []

        def walk(node: str) -> None:
            for kid in self.children.get(node, ()):
                walk(kid)
            post.append(node)
        walk(ROOT)
        self.post = tuple(post)                 # children before their parent, the root last
        self.choices = any(self.need[n] < len(k) for n, k in self.children.items())
        below: dict[str, tuple[str, ...]] = {}
        for node in self.post:
            inner = self.children.get(node)
            below[node] = (node,) if inner is None else tuple(
                leaf for kid in inner for leaf in below[kid])
        self._below = below

    # -- what the tree says about counts --------------------------------------------------
    def leaves_under(self, node: str) -> tuple[str, ...]:
        return self._below[node]

    def is_leaf(self, name: str) -> bool:
        return name in self.minimum

    def met_nodes(self, have: Counts) -> dict[str, bool]:
        """Every node (the root as ROOT): is it met by these counts?"""
        met: dict[str, bool] = {}
        for node in self.post:
            kids = self.children.get(node)
            if kids is None:
                met[node] = have.get(node, 0) >= self.minimum[node]
            else:
                met[node] = sum(met[k] for k in kids) >= self.need[node]
        return met

    def met(self, have: Counts) -> bool:
        return self.met_nodes(have)[ROOT]

    def pods_under(self, node: str, have: Counts) -> int:
        return sum(have.get(leaf, 0) for leaf in self._below[node])

    def min_pods(self, node: str = ROOT) -> int:
        """The fewest pods that meet the node: a leaf's minimum; an inner
        node's cheapest children that it needs."""
        kids = self.children.get(node)
        if kids is None:
            return self.minimum[node]
        costs = sorted(self.min_pods(k) for k in kids)
        return sum(costs[:self.need[node]])

    def keeps(self, have: Counts, remove: Counts, holding: Counts | None = None) -> bool:
        """Whether taking `remove` away from `have` leaves the tree met, with no
        subgroup that was met left short of its minimum unless none of its
        pods is left on a node (`holding`, default `have`: an eviction never
        leaves half a subgroup running)."""
        before = self.met_nodes(have)
        after_counts = {leaf: have.get(leaf, 0) - remove.get(leaf, 0) for leaf in self.leaves}
        after = self.met_nodes(after_counts)
        if not after[ROOT]:
            return False
        left = holding if holding is not None else have
        left_after = {leaf: left.get(leaf, 0) - remove.get(leaf, 0) for leaf in self.leaves}
        return all(after[n] or not before[n] or self.pods_under(n, left_after) <= 0
                   for n in self.post if n != ROOT)

    # -- what to place -----------------------------------------------------------------------
    def plan(self, have: Counts, alive: Counts) -> Plan:
        """The steps that take the tree from `have` (pods placed or running) to
        its minimum, with `alive` the pods that exist to place (have included)."""
        feasible: dict[str, bool] = {}
        cost: dict[str, int] = {}
        for node in self.post:
            kids = self.children.get(node)
            if kids is None:
                feasible[node] = alive.get(node, 0) >= self.minimum[node]
                cost[node] = max(self.minimum[node] - have.get(node, 0), 0)
                continue
            ranked = self._ranked(kids, feasible, cost)
            chosen = ranked[:self.need[node]]
            feasible[node] = all(feasible[k] for k in chosen)
            cost[node] = sum(cost[k] for k in chosen)
        needed: list[Step] = []
        alternatives: list[Step] = []
        closed: set[str] = set()

        def parts(node: str) -> list[tuple[str, int]]:
            """The leaves (and pods) the node's cheapest minimum still needs."""
            kids = self.children.get(node)
            if kids is None:
                return [(node, cost[node])] if cost[node] else []
            chosen = self._ranked(kids, feasible, cost)[:self.need[node]]
            return [p for k in sorted(chosen, key=self.order.__getitem__) for p in parts(k)]

        def visit(node: str) -> None:
            """The needed steps: required leaves pod by pod, and each child a
            choice takes as one whole step."""
            kids = self.children.get(node)
            if kids is None:
                if cost[node]:
                    needed.append(Step(((node, cost[node]),), whole=False))
                return
            if self.need[node] == len(kids):
                for kid in kids:
                    visit(kid)
                return
            chosen = set(self._ranked(kids, feasible, cost)[:self.need[node]])
            for kid in kids:            # declared order: a leading role stays first
                step = parts(kid) if kid in chosen else []
                if step:
                    needed.append(Step(tuple(step), whole=True))

        def explore(node: str) -> None:
            """The alternatives: the children no choice took, whole, outermost
            first; nothing inside them may take a pod on its own."""
            kids = self.children.get(node)
            if kids is None:
                return
            if self.need[node] == len(kids):
                for kid in kids:
                    explore(kid)
                return
            ranked = self._ranked(kids, feasible, cost)
            for kid in sorted(ranked[:self.need[node]], key=self.order.__getitem__):
                explore(kid)
            for kid in ranked[self.need[node]:]:
                if cost[kid]:
                    closed.update(self._below[kid])
                    alternatives.append(Step(tuple(parts(kid)), whole=True))
                else:
                    explore(kid)
        visit(ROOT)
        explore(ROOT)
        return Plan(tuple(needed), tuple(alternatives),
                    frozenset(leaf for leaf in self.leaves if leaf not in closed))

    def _ranked(self, kids: Sequence[str], feasible: Mapping[str, bool],
                cost: Mapping[str, int]) -> list[str]:
        """Children best first: those that can be met, then the fewest pods
        still missing (met ones first), then declared order."""
        return sorted(kids, key=lambda k: (not feasible[k], cost[k], self.order[k]))

    # -- what an eviction may take --------------------------------------------------------
    def units_for(self, leaf: str | None) -> tuple[str, ...]:
        """The nodes whose pods may go together with a pod of `leaf`, smallest
        first: the leaf itself, then each subgroup above it (not the root)."""
        if leaf is None or leaf not in self.minimum:
            return ()
        out = []
        at = leaf
        while at != ROOT:
            out.append(at)
            at = self.parent[at]
        return tuple(out)

    # -- what to say ---------------------------------------------------------------------------
    def shortfall(self, have: Counts, alive: Counts | None = None, node: str = ROOT) -> str:
        """Which subtree is short, in numbers: "needs 2 of 4 subgroups
        [stage-a 2/2, stage-b 1/2, ...]"; alive adds how many pods exist."""
        met = self.met_nodes(have)
        kids = self.children.get(node)
        if kids is None:
            text = f"{node} {have.get(node, 0)}/{self.minimum[node]}"
            if alive is not None and alive.get(node, 0) < self.minimum[node]:
                text += f" ({alive.get(node, 0)} pod(s) exist)"
            return text
        inner = ", ".join(f"{k} met" if met[k] and k not in self.minimum
                          else self.shortfall(have, alive, k) for k in kids)
        met_kids = sum(met[k] for k in kids)
        whom = "the PodGroup" if node == ROOT else node
        count = "all" if self.need[node] == len(kids) else str(self.need[node])
        return f"{whom} needs {count} of its {len(kids)} subgroups met, has {met_kids}: [{inner}]"


@functools.lru_cache(maxsize=4096)
def tree_of(subgroups: tuple[SubGroup, ...], root_min_sub_group: int | None) -> SubGroupTree:
    """The tree of a spec's subgroups; specs are shared values, so it is made once each."""
    return SubGroupTree(subgroups, root_min_sub_group)


def tree_problems(subgroups: Sequence[SubGroup], root_min_sub_group: int | None,
                  where: str = "spec.subGroups") -> list[str]:
    """What makes a declared tree unusable, as an API server with kaisched's
    CRD (or KAI's webhook) refuses it: names once each, parents that exist,
    no cycle, minSubGroup only where there are children (and no more than
    them), minMember only on leaves."""
    problems: list[str] = []
    names: dict[str, int] = {}
    for i, sg in enumerate(subgroups):
        if sg.name in names:
            problems.append(f"{where}[{i}]: subgroup {sg.name!r} is declared twice")
        names.setdefault(sg.name, i)
    children: dict[str, int] = {}
    for sg in subgroups:
        if sg.parent is not None:
            children[sg.parent] = children.get(sg.parent, 0) + 1
    by_name = {sg.name: sg for sg in subgroups}
    for i, sg in enumerate(subgroups):
        at = f"{where}[{i}] ({sg.name})"
        if sg.parent is not None and sg.parent not in names:
            problems.append(f"{at}: parent {sg.parent!r} is not a subgroup of this PodGroup")
        seen, up = {sg.name}, sg.parent
        while up is not None and up in by_name:
            if up in seen:
                problems.append(f"{at}: its parents form a cycle")
                break
            seen.add(up)
            up = by_name[up].parent
        kids = children.get(sg.name, 0)
        if kids and sg.min_member:
            problems.append(f"{at} has subgroups of its own: give minSubGroup (how many of "
                            f"them must be met), not minMember")
        if not kids and sg.min_sub_group is not None:
            problems.append(f"{at}: minSubGroup needs subgroups under it; a subgroup with no "
                            "children gives minMember")
        if kids and sg.min_sub_group is not None and sg.min_sub_group > kids:
            problems.append(f"{at}: minSubGroup {sg.min_sub_group} exceeds its {kids} "
                            "subgroup(s)")
    top = sum(1 for sg in subgroups if sg.parent is None)
    if root_min_sub_group is not None:
        if top == 0:
            problems.append("spec.minSubGroup needs subgroups (spec.subGroups without a parent)")
        elif root_min_sub_group > top:
            problems.append(f"spec.minSubGroup {root_min_sub_group} exceeds the {top} top-level "
                            "subgroup(s)")
    return problems
