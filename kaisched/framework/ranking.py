"""The best row of a class's cached answers, without a pass over every node.

NodeSelection caches, per equivalence class of tasks, which nodes pass the
filters (mask), which have the room idle now (idle_fit) and each node's score.
The node it picks is the first (lowest row: nodes are in name order) of the
highest score among the rows that pass -- numpy's argmax over the rows that
pass. Ranking keeps that answer for both kinds of pick as rows change:

- the rows are sorted once, in bulk, by (score descending, row);
- a row refreshed later gets a new stamp, which retires its place in the
  sorted rows and in the heap, and goes into a heap under its new key if it
  still passes;
- the best row is the better of the first sorted row and the heap's top that
  are still current (stale ones are skipped as they are met, once each).

A placement then costs a few heap operations, not a pass over 50,000 rows.
The order is argmax's exactly: a NaN score wins (argmax returns the first
NaN), then the highest score, then the lowest row; scores of -inf, where
argmax would answer a row that does not pass, are left to the full scan.
"""
from __future__ import annotations

import heapq
import math

import numpy as np

Key = tuple[int, float, int]    # (0 for NaN else 1, -score, row): the least is the best


def _key(score: float, row: int) -> Key:
    if math.isnan(score):
        return (0, 0.0, row)
    return (1, -score, row)


class _Ranked:
    """The rows of one kind of pick, best first."""

    __slots__ = ("order", "cursor", "heap")

    def __init__(self, rows: np.ndarray, score: np.ndarray) -> None:
        nan = np.isnan(score[rows])
        neg = np.where(nan, 0.0, -score[rows])
        self.order: list[int] = rows[np.lexsort((rows, neg, ~nan))].tolist()
        self.cursor = 0
        self.heap: list[tuple[int, float, int, int]] = []   # (*key, stamp)

    def push(self, key: Key, stamp: int) -> None:
        heapq.heappush(self.heap, (*key, stamp))

    def best(self, stamps: list[int], score: np.ndarray) -> Key | None:
        order, cursor = self.order, self.cursor
        while cursor < len(order) and stamps[order[cursor]]:
            cursor += 1         # refreshed since the bulk sort: its key is in the heap if any
        self.cursor = cursor
        heap = self.heap
        while heap and stamps[heap[0][2]] != heap[0][3]:
            heapq.heappop(heap)
        found: Key | None = None
        if cursor < len(order):
            row = order[cursor]
            found = _key(float(score[row]), row)
        if heap:
            top = heap[0]
            key = (top[0], top[1], top[2])
            if found is None or key < found:
                found = key
        return found


class Ranking:
    """Per class: the best row that passes, and the best that passes with room
    idle now, kept as rows are refreshed."""

    __slots__ = ("stamps", "passing", "idle", "entries", "size")

    def __init__(self, mask: np.ndarray, idle_fit: np.ndarray, score: np.ndarray) -> None:
        self.size = len(mask)
        self.stamps = [0] * self.size       # 0: as sorted in bulk
        self.passing = _Ranked(np.flatnonzero(mask), score)
        self.idle = _Ranked(np.flatnonzero(mask & idle_fit), score)
        self.entries = 0

    def refreshed(self, rows: list[int], mask: np.ndarray, idle_fit: np.ndarray,
                  score: np.ndarray) -> bool:
        """The rows' answers changed (mask, idle_fit, score: the whole cache).
        False when so many entries piled up that a rebuild is cheaper."""
        self.entries += len(rows)
        if self.entries > self.size:
            return False
        stamps = self.stamps
        for row in rows:
            stamp = stamps[row] = stamps[row] + 1
            if mask[row]:
                key = _key(float(score[row]), row)
                self.passing.push(key, stamp)
                if idle_fit[row]:
                    self.idle.push(key, stamp)
        return True

    def best(self, idle: bool, score: np.ndarray) -> int | None:
        """The row argmax would pick among those passing (with idle room, if
        idle); None when there is none; -1 when the best score is -inf (the
        caller scans, as argmax's answer is then not a row that passes)."""
        key = (self.idle if idle else self.passing).best(self.stamps, score)
        if key is None:
            return None
        if key[1] == math.inf:
            return -1
        return key[2]
