"""Queue status on the wire: the binder writes it through the status
subresource of the cluster-scoped Queue, and `kubectl get queues`' printer
columns find their figures in what the API server holds."""
from __future__ import annotations

from pathlib import Path

import yaml

from kaisched.api.queue import Bucket, QueueStatus, UsageRecord
from kaisched.api.types import QueueName
from kaisched.cache.convert import queue as convert_queue
from kaisched.cluster.kinds import QUEUE
from kaisched.cluster.kube import KubeCluster
from kaisched.framework.effects import SetQueueStatus, SetQueueUsage
from kaisched.runtime.binder import Binder
from tests.builders.wire import QUEUES, Emulator, build_queue

CRD = Path(__file__).resolve().parents[2] / "config" / "crds" / "queues.yaml"
GPU = "nvidia.com/gpu"


def column_value(obj: dict, path: str) -> object:
    for key in path[1:].replace("\\.", "\0").split("."):
        obj = obj.get(key.replace("\0", ".")) if isinstance(obj, dict) else None
    return obj


def test_queue_status_goes_through_the_status_subresource(apiserver: Emulator,
                                                          cluster: KubeCluster) -> None:
    cluster.create(build_queue("team-a"))
    first = QueueStatus(allocated=(("cpu", 2500.0), (GPU, 2.0)),
                        fair_share=(("cpu", 4000.0), (GPU, 1.5)),
                        quota=(("cpu", 0.0), (GPU, 4.0)), running_jobs=1, pending_jobs=2)
    second = QueueStatus(allocated=(("cpu", 1000.0),), fair_share=(("cpu", 4000.0),),
                         quota=(("cpu", 0.0),), running_jobs=0, pending_jobs=0)
    binder = Binder(cluster, lambda: 0.0)
    report = binder.apply([SetQueueStatus(QueueName("team-a"), first, None)])
    assert report.failed == []

    stored = apiserver.object(QUEUES, None, "team-a")
    assert stored["status"] == {"allocated": {"cpu": "2500m", GPU: "2"},
                                "fairShare": {"cpu": "4", GPU: "1.5"},
                                "quota": {"cpu": "0", GPU: "4"}, "limit": {},
                                "runningJobs": 1, "pendingJobs": 2}
    (version,) = yaml.safe_load(CRD.read_text())["spec"]["versions"]
    row = {c["name"]: column_value(stored, c["jsonPath"]) for c in version["additionalPrinterColumns"]}
    assert [row[n] for n in ("GPU Allocated", "GPU Fair Share", "GPU Quota", "Running", "Pending")] \
        == ["2", "1.5", "4", 1, 2]

    # GPUs gone from the cluster: the next status clears them rather than leaving stale figures.
    report = binder.apply([SetQueueStatus(QueueName("team-a"), second, first)])
    assert report.failed == []
    stored = apiserver.object(QUEUES, None, "team-a")
    assert stored["status"]["allocated"] == {"cpu": "1"}
    assert GPU not in stored["status"]["fairShare"]
    assert stored["spec"] == {"priority": 100}


def test_queue_usage_goes_through_the_status_subresource_and_reads_back_equal(
        apiserver: Emulator, cluster: KubeCluster) -> None:
    """status.usage (fair share with memory) through the real client: the record
    reads back as written (cpu in cores on the wire), the printer column finds
    the GPU figure, the other status fields are left alone, and clearing it
    (the documented reset) leaves no usage."""
    cluster.create(build_queue("team-a"))
    binder = Binder(cluster, lambda: 0.0)
    assert binder.apply([SetQueueStatus(QueueName("team-a"), QueueStatus(running_jobs=1),
                                        None)]).failed == []
    record = UsageRecord(
        (Bucket(1767225000.0, 100.0, (("cpu", 150000.0), (GPU, 600.0)),
                (("cpu", 1600000.0), (GPU, 800.0))),
         Bucket(1767225100.0, 40.5, ((GPU, 243.0),), (("cpu", 648000.0), (GPU, 324.0)))),
        (("cpu", 0.0938), (GPU, 0.75)), 1767225140.0)
    assert binder.apply([SetQueueUsage(QueueName("team-a"), record, None)]).failed == []

    stored = apiserver.object(QUEUES, None, "team-a")
    assert stored["status"]["runningJobs"] == 1
    assert stored["status"]["usage"]["buckets"][0]["held"] == {"cpu": 150.0, GPU: 600.0}
    assert convert_queue(stored).usage == record
    (version,) = yaml.safe_load(CRD.read_text())["spec"]["versions"]
    row = {c["name"]: column_value(stored, c["jsonPath"]) for c in version["additionalPrinterColumns"]}
    assert row["GPU Usage"] == 0.75

    cluster.patch_status(QUEUE, "", "team-a", {"usage": None})
    stored = apiserver.object(QUEUES, None, "team-a")
    assert "usage" not in stored["status"] and convert_queue(stored).usage is None
    assert stored["status"]["runningJobs"] == 1
