"""The storage part of the cache: which pods use each claim, and whether
some pod not placed yet waits on one (counted as pods come and go, asked at
every sync) -- always what a look over every use would say."""
from __future__ import annotations

import random

from kaisched.cache.convert import PodFacts, pod_facts
from kaisched.cache.volumestore import VolumeStore
from tests.builders.objects import build_pod


def _pod(name: str, claims: list[str], node: str | None, phase: str | None) -> PodFacts:
    pod = build_pod(name, node=node, phase=phase)
    pod["spec"]["volumes"] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
                              for i, c in enumerate(claims)]
    return pod_facts(pod)


def _looked_over(store: VolumeStore) -> bool:
    return any(node is None for users in store.users.values() for node in users.values())


def test_a_pod_waiting_on_a_claim_is_awaited_until_placed_or_gone() -> None:
    store = VolumeStore()
    assert not store.awaited()
    waiting = _pod("p", ["a", "b"], None, None)
    store.put_pod(None, waiting)
    assert store.awaited()
    placed = _pod("p", ["a", "b"], "node-1", "Running")
    store.put_pod(waiting, placed)
    assert not store.awaited()
    again = _pod("p", ["b"], None, None)            # made again, mounting one of them
    store.put_pod(placed, again)
    assert store.awaited()
    store.put_pod(again, None)
    assert not store.awaited() and store.users == {}


def test_the_count_says_what_a_look_over_every_use_says() -> None:
    rng = random.Random(7)
    store = VolumeStore()
    pods: dict[str, PodFacts] = {}
    for _ in range(2000):
        name = f"p{rng.randrange(20)}"
        before = pods.get(name)
        if before is not None and rng.random() < 0.2:
            store.put_pod(before, None)
            del pods[name]
        else:
            claims = rng.sample(["a", "b", "c", "d"], rng.randrange(0, 3))
            node, phase = rng.choice([(None, None), ("node-1", "Running"), ("node-2", "Pending"),
                                      ("node-1", "Succeeded"), ("node-2", "Failed")])
            after = _pod(name, claims, node, phase)
            store.put_pod(before, after)
            pods[name] = after
        assert store.awaited() is _looked_over(store)
