"""The cluster-life trace: seeded, scaled to the cluster, and the same jobs for either
scheduler but for how a fractional-GPU pod asks."""
from __future__ import annotations

from kaisched.bench.lifetrace import (
    GPU,
    GPUS_PER_NODE,
    JOB_LABEL,
    MIN_MEMBER,
    make_trace,
    manifests,
    queues,
)


def test_a_seed_gives_one_trace_and_another_seed_another() -> None:
    assert make_trace(7, 8, 300) == make_trace(7, 8, 300)
    assert make_trace(7, 8, 300) != make_trace(8, 8, 300)


def test_the_trace_holds_every_kind_and_each_fits_the_nodes_that_survive() -> None:
    trace = make_trace(1, 8, 300)
    kinds = {j.kind for j in trace.jobs}
    assert kinds == {"gang", "batch", "elastic", "inference", "big"}
    big = next(j for j in trace.jobs if j.kind == "big")
    assert big.pods * big.gpus <= (trace.nodes - 2) * GPUS_PER_NODE     # two nodes fail
    for job in trace.jobs:
        assert job.pods * job.gpus <= trace.gpus and job.arrive <= 0.6 * trace.horizon
    assert [j.arrive for j in trace.jobs] == sorted(j.arrive for j in trace.jobs)
    elastic = next(j for j in trace.jobs if j.kind == "elastic")
    assert elastic.min_member < elastic.pods


def test_a_gang_is_a_parallel_statefulset_with_its_gang_size() -> None:
    job = next(j for j in make_trace(1, 8, 300).jobs if j.kind == "gang")
    (sts,) = manifests(job, "ns", "kaisched", sharing=True)
    assert sts["kind"] == "StatefulSet" and sts["spec"]["podManagementPolicy"] == "Parallel"
    assert sts["metadata"]["annotations"][MIN_MEMBER] == str(job.min_member)
    pod = sts["spec"]["template"]
    assert pod["metadata"]["labels"][JOB_LABEL] == job.name
    assert pod["spec"]["containers"][0]["resources"]["limits"][GPU] == str(job.gpus)


def test_an_inference_pod_asks_a_fraction_where_gpus_are_shared_and_a_whole_one_else() -> None:
    job = next(j for j in make_trace(1, 8, 300).jobs if j.kind == "inference")
    pdb, shared = manifests(job, "ns", "kaisched", sharing=True)
    assert pdb["kind"] == "PodDisruptionBudget" and pdb["spec"]["minAvailable"] == job.pods - 1
    template = shared["spec"]["template"]
    assert template["metadata"]["annotations"] == {"gpu-fraction": "0.5"}
    assert GPU not in template["spec"]["containers"][0]["resources"]["requests"]
    _, whole = manifests(job, "ns", "default-scheduler", sharing=False)
    template = whole["spec"]["template"]
    assert "annotations" not in template["metadata"]
    assert template["spec"]["containers"][0]["resources"]["requests"][GPU] == "1"
    assert template["spec"]["schedulerName"] == "default-scheduler"


def test_a_batch_job_made_again_gets_the_new_name_and_keeps_its_job_label() -> None:
    job = next(j for j in make_trace(1, 8, 300).jobs if j.kind == "batch")
    (made,) = manifests(job, "ns", "kaisched", sharing=True, name=f"{job.name}-r1")
    assert made["kind"] == "Job" and made["metadata"]["name"] == f"{job.name}-r1"
    assert made["spec"]["template"]["metadata"]["labels"][JOB_LABEL] == job.name


def test_the_big_gangs_team_has_its_gpus_as_quota_and_the_others_split_the_rest() -> None:
    # 9 nodes: the big gang on 6 (60%, rounded up), 48 GPUs; 24 left, 12 each
    assert [q["spec"]["resources"][GPU]["quota"] for q in queues(9)] == [48, 12, 12]
