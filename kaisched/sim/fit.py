"""Jobs that can never start, found before the run: a pod no node can take
(too big, a taint it does not tolerate, a nodeSelector no pool matches), a
gang minimum larger than the nodes it may use, or than its queue's limit (or
a parent queue's). They are still submitted, and reported as never fitting
rather than left silently pending."""
from __future__ import annotations

from kaisched.api.resource import GPU, PODS
from kaisched.sim.fields import amount, show
from kaisched.sim.specs import JobSpec, NodePool, RoleSpec, Scenario


def never_fits(job: JobSpec, scenario: Scenario) -> str | None:
    usable: list[NodePool] = []
    for role in job.roles:
        pools = [p for p in scenario.reachable_pools if _pod_fits(job, role, p)]
        if not pools:
            return f"a {role.name} pod ({_requests(role)}) fits no node"
        usable.extend(p for p in pools if p not in usable)
    # GPUs first: the resource a reader asks about.
    resources = sorted({n for r in job.roles for n, _ in r.requests} - {PODS},
                       key=lambda n: (n != GPU, n))
    for res in resources:
        need = job.minimum(res)
        have = sum(p.count * _capacity(p, res) for p in usable)
        if need > have:
            return (f"needs {show(res, need)} {res} at once, the nodes it may use have "
                    f"{show(res, have)}")
    queue = scenario.queue(job.queue)
    seen: set[str] = set()
    while queue is not None and queue.name not in seen:
        seen.add(queue.name)
        for res in resources:
            limit = queue.limit(res)
            if limit is not None and job.minimum(res) > limit:
                return (f"needs {show(res, job.minimum(res))} {res} at once, over queue "
                        f"{queue.name}'s limit of {show(res, limit)}")
        queue = scenario.queue(queue.parent) if queue.parent else None
    return None


def _pod_fits(job: JobSpec, role: RoleSpec, pool: NodePool) -> bool:
    labels = dict(pool.labels)
    labels["sim.kaisched.io/pool"] = pool.name
    if any(labels.get(k) != v for k, v in job.node_selector if k != "kubernetes.io/hostname"):
        return False
    for key, value, effect in pool.taints:
        if effect == "PreferNoSchedule":
            continue
        if not any(_tolerates(dict(t), key, value, effect) for t in job.tolerations):
            return False
    return all(role.amount(name) <= _capacity(pool, name)
               for name, _ in role.requests if name != PODS)


def _tolerates(toleration: dict[str, str], key: str, value: str, effect: str) -> bool:
    if toleration.get("effect") and toleration["effect"] != effect:
        return False
    operator = toleration.get("operator", "Equal")
    if not toleration.get("key"):
        return operator == "Exists"
    if toleration["key"] != key:
        return False
    return operator == "Exists" or toleration.get("value", "") == value


def _capacity(pool: NodePool, name: str) -> float:
    return sum(amount(name, q) for n, q in pool.capacity if n == name)


def _requests(role: RoleSpec) -> str:
    return ", ".join(f"{n} {q}" for n, q in role.requests)
