"""autoscale: a gang the cluster cannot hold gets one ProvisioningRequest for exactly what
it lacks, owned by its PodGroup; it binds whole once the capacity is provisioned; a gang
its queue's limit holds back, or without a PodGroup, gets none; a request the gang no
longer needs is withdrawn; a failed one is asked again after a backoff, then given up.

The real scheduler, binder and memory backend; the autoscaler's part (conditions, new
Nodes) is played by the test."""
from __future__ import annotations

from kaisched.api.provisioning import ATOMIC_CLASS, CLASS_ANNOTATION, CONSUME_ANNOTATION
from kaisched.cluster.kinds import POD, POD_TEMPLATE
from tests.builders.objects import build_pod
from tests.builders.provisioning import World, big_gang, gpu_nodes


def test_a_gang_of_4_on_room_for_2_asks_for_exactly_2_and_binds_whole_once_provisioned() -> None:
    world = World([*gpu_nodes("n1", "n2"), *big_gang()])
    assert world.session() == {}
    [request] = world.requests()
    spec = request["spec"]
    assert spec["provisioningClassName"] == ATOMIC_CLASS
    assert [s["count"] for s in spec["podSets"]] == [2]
    owner = request["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("PodGroup", "big")
    template = world.cluster.get(POD_TEMPLATE, "default", spec["podSets"][0]["podTemplateRef"]["name"])
    assert template is not None and template["metadata"]["ownerReferences"][0]["name"] == "big"
    limits = template["template"]["spec"]["containers"][0]["resources"]
    assert "nodeName" not in template["template"]["spec"] and limits
    for i in range(4):
        notes = world.cluster.get(POD, "default", f"big-{i}")["metadata"]["annotations"]
        assert notes[CONSUME_ANNOTATION] == request["metadata"]["name"]
        assert notes[CLASS_ANNOTATION] == ATOMIC_CLASS
    assert world.session() == {}                # nothing bound before the capacity
    assert "asked the autoscaler for 2 pods x 8 GPUs" in world.condition("big")
    assert world.reason("big") == "WaitingForCapacity"
    assert len(world.requests()) == 1           # asked once
    world.answer(request, "Provisioned")
    for node in gpu_nodes("n3", "n4"):
        world.cluster.create(node)
    bound = world.session()
    bound.update(world.session())
    assert sorted(bound) == [f"default/big-{i}" for i in range(4)]      # whole, within 2 sessions
    world.session()
    assert world.requests() == []               # placed: the request has done its part


def test_a_gang_its_queue_limit_holds_back_gets_no_request() -> None:
    queue = {"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "Queue",
             "metadata": {"name": "capped"},
             "spec": {"resources": {"nvidia.com/gpu": {"quota": 0, "limit": 16}}}}
    world = World([queue, *gpu_nodes("n1", "n2"), *big_gang(queue="capped")])
    world.session()
    world.session()
    assert world.requests() == []


def test_a_gang_without_a_podgroup_gets_no_request() -> None:
    pods = [build_pod(f"p-{i}", cpu=1, gpu=8) for i in range(3)]
    world = World([*gpu_nodes("n1", "n2"), *pods])
    world.session(10.0)
    assert world.requests() == []


def test_a_queue_may_say_no() -> None:
    queue = {"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "Queue",
             "metadata": {"name": "manual"}, "spec": {"autoscaling": False}}
    world = World([queue, *gpu_nodes("n1", "n2"), *big_gang(queue="manual")])
    world.session()
    assert world.requests() == []


def test_a_request_the_gang_no_longer_needs_is_withdrawn() -> None:
    """Room appears otherwise (a job ends) before the capacity: the request goes."""
    blocker = build_pod("other", cpu=1, gpu=8, node="n3", phase="Running")
    world = World([*gpu_nodes("n1", "n2", "n3", "n4"), blocker, *big_gang()])
    world.session()
    [request] = world.requests()
    assert [s["count"] for s in request["spec"]["podSets"]] == [1]
    template = request["spec"]["podSets"][0]["podTemplateRef"]["name"]
    world.cluster.delete(POD, "default", "other")
    bound = world.session()
    assert sorted(bound) == [f"default/big-{i}" for i in range(4)]
    world.session()
    assert world.requests() == [] and world.cluster.get(POD_TEMPLATE, "default", template) is None


def test_a_failed_request_is_asked_again_after_a_backoff_then_given_up() -> None:
    world = World([*gpu_nodes("n1"), *big_gang(2)])
    world.session()
    [first] = world.requests()
    world.answer(first, "Failed", "no node group can hold 8 GPUs")
    world.session()
    assert "the autoscaler answered Failed: no node group can hold 8 GPUs; asking again in" \
        in world.condition("big")
    assert [r["metadata"]["name"] for r in world.requests()] == [first["metadata"]["name"]]
    world.session(60.0)                     # backoff 60 s: asked again, the second try
    [second] = world.requests()
    assert second["metadata"]["name"] != first["metadata"]["name"]
    assert second["metadata"]["annotations"]["kaisched.io/provisioning-attempt"] == "2"
    for attempt in (2, 3):
        [current] = world.requests()
        world.answer(current, "Failed", "still no")
        world.session(60.0 * 2 ** (attempt - 1))
    [last] = world.requests()
    assert last["metadata"]["annotations"]["kaisched.io/provisioning-attempt"] == "4"
    world.answer(last, "Failed", "still no")
    world.session(1000.0)
    assert "gave up after 4 request(s)" in world.condition("big")
    assert world.reason("big") == "Unschedulable"       # no capacity is coming
    assert [r["metadata"]["name"] for r in world.requests()] == [last["metadata"]["name"]]


def test_a_gang_given_up_on_is_asked_again_once_it_lacks_less() -> None:
    """Given up on 2 pods, the gang is asked for again from the first try once a job
    ends and it lacks only 1."""
    blocker = build_pod("other", cpu=1, gpu=8, node="n1", phase="Running")
    world = World([*gpu_nodes("n1", "n2"), blocker, *big_gang(3)])
    world.session()
    for _ in range(4):
        [current] = world.requests()
        assert [s["count"] for s in current["spec"]["podSets"]] == [2]
        world.answer(current, "Failed", "no room in any node group")
        world.session(1000.0)
    assert "gave up after 4 request(s)" in world.condition("big")
    world.session(1000.0)
    assert len(world.requests()) == 1           # still given up: it lacks the same
    world.cluster.delete(POD, "default", "other")
    world.session()
    [fresh] = world.requests()
    assert [s["count"] for s in fresh["spec"]["podSets"]] == [1]
    assert fresh["metadata"]["annotations"]["kaisched.io/provisioning-attempt"] == "1"
