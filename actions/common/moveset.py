"""Which of a node's blocks consolidation moves to free the room a pending
pod lacks there: the sets that free it, fewest pods first, and of those
moving equally many the one whose pods come first in the victim order
(actions/common/movable.py). A block is what frees room together (a pod, or
every sharer of one GPU); its pods are those its units move.

The sets are searched by size, each size's in the victim order, up to a
bound: a node with many small pods is searched as far as the bound lets,
and the caller falls back to its greedy order beyond.
"""
from __future__ import annotations

from itertools import combinations
from typing import Sequence

import attrs
import numpy as np

from kaisched.api.node import EPSILON

SETS_WEIGHED = 512      # sets of blocks looked at, at most, per node
SETS_TRIED = 8          # sets that free the room tried in turn, at most


@attrs.frozen(slots=True)
class Block:
    """Pods that free room together, what they free on the node, the pods
    moving them moves, and their first place in the victim order."""

    index: int          # the caller's block
    freed: np.ndarray
    pods: int
    rank: tuple[int, ...]


def move_sets(blocks: Sequence[Block], lacking: np.ndarray) -> list[tuple[int, ...]]:
    """The sets of blocks (the callers' indexes, in victim order) that free
    at least `lacking`: fewest pods first, then victims first; at most
    SETS_TRIED of them."""
    ordered = sorted(blocks, key=lambda b: (b.rank, b.index))
    short = lacking > EPSILON
    need = lacking[short] - EPSILON
    found: list[tuple[int, tuple[tuple[int, ...], ...], tuple[int, ...]]] = []
    weighed = 0
    for size in range(1, len(ordered) + 1):
        # Every block moves at least one pod: once enough sets are found that
        # move no more than `size` pods each, no bigger set comes before them.
        if sum(1 for f in found if f[0] <= size) >= SETS_TRIED:
            break
        for chosen in combinations(ordered, size):
            weighed += 1
            if weighed > SETS_WEIGHED:
                break
            freed = sum((b.freed[short] for b in chosen), np.zeros(len(need)))
            if (freed >= need).all():
                found.append((sum(b.pods for b in chosen), tuple(sorted(b.rank for b in chosen)),
                              tuple(b.index for b in chosen)))
        if weighed > SETS_WEIGHED:
            break
    found.sort(key=lambda f: (f[0], f[1]))
    return [indexes for _, _, indexes in found[:SETS_TRIED]]
