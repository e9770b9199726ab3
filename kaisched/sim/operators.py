"""What each operator creates for a job: the top owner (PyTorchJob, TFJob,
XGBoostJob, JAXJob, MPIJob v2beta1, JobSet, TrainJob, LeaderWorkerSet, RayJob,
RayService, a batch Job, or a plain PodGroup), the objects in between (the MPI
launcher's Job, a JobSet's Jobs, a TrainJob's JobSet, a LeaderWorkerSet's
StatefulSets, a RayJob's or RayService's RayCluster), and the pods, with the
names, labels and ownerReferences the Kubeflow training operator and trainer,
the MPI operator, JobSet, LeaderWorkerSet, KubeRay and the Job controller give
them.

Operators that start a job in steps say so with stages: the objects and pods
of stage k are made only once every pod of the stages before it is running
(an InOrder JobSet's later replicatedJobs, the launcher of an MPIJob that
waits for its workers, a LeaderReady LeaderWorkerSet's workers).

Pods are what an API server accepts: DNS-1123 names, a container with an
image, limits equal to requests for GPUs and every other extended resource
or hugepages (they may not be overcommitted), and spec.priority resolved from the priority class as the
admission plugin does.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import attrs

from kaisched.api import labels as L
from kaisched.sim.draspecs import pod_claims
from kaisched.sim.specs import JobKind, JobSpec, RoleSpec, VolumeSpec

Obj = dict[str, Any]

# The workload inside the pods: how long the container runs once started.
DURATION_ANNOTATION = "sim.kaisched.io/duration"
IMAGE = "registry.example.com/sim/trainer:1.0"
GRACE_SECONDS = 10
_KUBEFLOW = "training.kubeflow.org"
WORKLOAD_GANG = "main"      # the one podGroup of a v1alpha1 Workload a PodGroup job writes
_CONTAINER = {JobKind.PYTORCH: "pytorch", JobKind.TF: "tensorflow", JobKind.MPI: "mpi",
              JobKind.JOBSET: "trainer", JobKind.RAY: "ray", JobKind.JOB: "main",
              JobKind.GANG: "main", JobKind.XGBOOST: "xgboost", JobKind.JAX: "jax",
              JobKind.TRAINJOB: "node", JobKind.LWS: "server", JobKind.RAYSERVICE: "ray"}
# Training operator v1 kinds: their replica specs field and the operator label.
_TRAINING = {JobKind.PYTORCH: ("pytorchReplicaSpecs", "pytorchjob-controller"),
             JobKind.TF: ("tfReplicaSpecs", "tfjob-controller"),
             JobKind.XGBOOST: ("xgbReplicaSpecs", "xgboostjob-controller"),
             JobKind.JAX: ("jaxReplicaSpecs", "jaxjob-controller")}
_LWS = "leaderworkerset.sigs.k8s.io"


@attrs.frozen
class PodPlan:
    """One pod the operator keeps alive: its role and index, who owns it
    (an index into the blueprint's objects; None for a bare pod), and its name
    (fixed, as the training and MPI operators name pods) or name prefix
    (generateName, as the Job controller and KubeRay do)."""

    role: str
    index: int
    parent: int | None
    name: str | None
    prefix: str
    labels: tuple[tuple[str, str], ...]
    leader: bool          # its success completes the job (with the other leaders)
    stage: int = 0        # made once every pod of the stages before it runs


@attrs.frozen
class Blueprint:
    """objects[0] is the top owner; objects[i] for i > 0 is owned by objects[parents[i]].
    stages: per object, the stage that makes it (none: all at once), in
    non-decreasing order. first_group: the object and part that name the
    PodGroup the job's first pods join (see podgroup_name)."""

    objects: tuple[Obj, ...]
    parents: tuple[int | None, ...]
    pods: tuple[PodPlan, ...]
    templates: Mapping[str, Obj]       # role -> pod template
    recreates: bool = True             # a controller brings evicted pods back
    stages: tuple[int, ...] = ()
    first_group: tuple[int, str] = (0, "")

    def stage_of(self, index: int) -> int:
        return self.stages[index] if self.stages else 0

    @property
    def last_stage(self) -> int:
        return max([p.stage for p in self.pods] + list(self.stages), default=0)


def _overcommittable(name: str) -> bool:
    return name in ("cpu", "memory", "ephemeral-storage")


def blueprint(job: JobSpec, scheduler_name: str) -> Blueprint:
    templates = {r.name: pod_template(job, r, scheduler_name) for r in job.roles}
    return _BUILDERS[job.kind](job, templates)


def pod_template(job: JobSpec, role: RoleSpec, scheduler_name: str) -> Obj:
    requests = dict(role.requests)
    resources: Obj = {"requests": requests}
    # Extended resources and hugepages cannot be overcommitted: the API server
    # wants their limits, equal to the requests.
    fixed = {name: amount for name, amount in requests.items() if not _overcommittable(name)}
    if fixed:
        resources["limits"] = fixed
    container: Obj = {"name": _CONTAINER[job.kind], "image": IMAGE, "resources": resources}
    spec: Obj = {"schedulerName": scheduler_name, "containers": [container],
                 "restartPolicy": "Never" if job.kind is JobKind.JOB else "OnFailure",
                 "terminationGracePeriodSeconds": GRACE_SECONDS}
    if job.kind is JobKind.GANG:
        spec["restartPolicy"] = "Never"
    if job.priority_class:
        spec["priorityClassName"] = job.priority_class
    if job.node_selector:
        spec["nodeSelector"] = dict(job.node_selector)
    if job.tolerations:
        spec["tolerations"] = [dict(t) for t in job.tolerations]
    if role.volumes:
        spec["volumes"] = pod_volumes(role.volumes)
    if role.claims:     # devices (DRA): each pod its claims, made from the role's templates
        spec["resourceClaims"] = pod_claims(job, role)
        container["resources"]["claims"] = [{"name": c.name} for c in role.claims]
    return {"metadata": {"labels": {L.QUEUE_LABEL: job.queue},
                         "annotations": {DURATION_ANNOTATION: f"{job.duration:g}s"}},
            "spec": spec}


def pod_volumes(volumes: Sequence[VolumeSpec]) -> list[Obj]:
    """Each pod its own claim per volume: ephemeral volumes, whose claims the
    simulated ephemeral volume controller makes (kaisched.sim.provisioner)."""
    return [{"name": v.name, "ephemeral": {"volumeClaimTemplate": {"spec": {
        "storageClassName": v.storage_class, "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": v.size}}}}}} for v in volumes]


def pod_object(plan: PodPlan, template: Obj, namespace: str, owner: Obj | None,
               priorities: Mapping[str, int]) -> Obj:
    meta: Obj = {"namespace": namespace,
                 "labels": {**template["metadata"]["labels"], **dict(plan.labels)},
                 "annotations": dict(template["metadata"]["annotations"])}
    if plan.name:
        meta["name"] = plan.name
    else:
        meta["generateName"] = plan.prefix
    if owner is not None:
        meta["ownerReferences"] = [owner_reference(owner)]
    spec = dict(template["spec"])
    # The priority admission plugin: the class's value, else zero.
    spec["priority"] = priorities.get(str(spec.get("priorityClassName") or ""), 0)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": {"phase": "Pending"}}


def owner_reference(owner: Obj) -> Obj:
    meta = owner["metadata"]
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"],
            "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}


# -- one builder per kind --------------------------------------------------------------------

def _meta(job: JobSpec, name: str | None = None, **extra: Any) -> Obj:
    meta: Obj = {"name": name or job.name, "namespace": job.namespace,
                 "labels": {L.QUEUE_LABEL: job.queue}}
    meta.update(extra)
    return meta


def _min_member_annotation(job: JobSpec) -> Obj:
    return {"annotations": {L.MIN_MEMBER_ANNOTATION: str(job.min_available)}} \
        if job.min_available is not None else {}


def _run_policy(job: JobSpec, clean: str) -> Obj:
    policy: Obj = {"queue": job.queue}
    if job.priority_class:
        policy["priorityClass"] = job.priority_class
    if job.min_available is not None:
        policy["minAvailable"] = job.min_available
    return {"cleanPodPolicy": clean, "schedulingPolicy": policy}


def _replica_specs(job: JobSpec, templates: Mapping[str, Obj], restart: str) -> Obj:
    return {r.name.capitalize(): {"replicas": r.replicas, "restartPolicy": restart,
                                  "template": templates[r.name]} for r in job.roles}


def _training(job: JobSpec, templates: Mapping[str, Obj]) -> Blueprint:
    """PyTorchJob / TFJob / XGBoostJob / JAXJob, training operator: pods
    <job>-<role>-<index>, owned by the job."""
    pytorch = job.kind is JobKind.PYTORCH
    field, operator = _TRAINING[job.kind]
    spec: Obj = {"runPolicy": _run_policy(job, "None"),
                 field: _replica_specs(job, templates, "OnFailure")}
    if pytorch and job.elastic_min is not None:
        workers = sum(r.replicas for r in job.roles if r.name == "worker")
        spec["elasticPolicy"] = {"minReplicas": job.elastic_min, "maxReplicas": workers}
    owner = {"apiVersion": "kubeflow.org/v1", "kind": job.kind.value, "metadata": _meta(job),
             "spec": spec}
    names = {r.name for r in job.roles}
    lead = next((n for n in ("master", "chief") if n in names), None)
    pods = []
    for role in job.roles:
        for i in range(role.replicas):
            labels = {f"{_KUBEFLOW}/job-name": job.name, f"{_KUBEFLOW}/operator-name": operator,
                      f"{_KUBEFLOW}/replica-type": role.name,
                      f"{_KUBEFLOW}/replica-index": str(i)}
            if role.name == lead:
                labels[f"{_KUBEFLOW}/job-role"] = "master"
            leader = role.name == lead if lead else (role.name == "worker" and i == 0)
            pods.append(PodPlan(role.name, i, 0, f"{job.name}-{role.name}-{i}", "",
                                tuple(sorted(labels.items())), leader))
    return Blueprint((owner,), (None,), tuple(pods), templates)


def _mpi(job: JobSpec, templates: Mapping[str, Obj]) -> Blueprint:
    """MPIJob v2beta1, MPI operator: workers <job>-worker-<i> owned by the MPIJob;
    the launcher is a batch Job <job>-launcher whose pod the Job controller makes.
    With launcherCreationPolicy WaitForWorkersReady the launcher's Job is made
    only once every worker runs (stage 1)."""
    wait = job.startup_policy == "WaitForWorkersReady"
    spec: Obj = {"slotsPerWorker": 1, "runPolicy": _run_policy(job, "Running"),
                 "mpiReplicaSpecs": _replica_specs(job, templates, "OnFailure")}
    if wait:
        spec["launcherCreationPolicy"] = "WaitForWorkersReady"
    owner = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": _meta(job),
             "spec": spec}
    later = 1 if wait else 0
    objects: list[Obj] = [owner]
    parents: list[int | None] = [None]
    pods = []
    base = {f"{_KUBEFLOW}/job-name": job.name, f"{_KUBEFLOW}/operator-name": "mpi-operator"}
    for role in job.roles:
        if role.name == "launcher":
            launcher = f"{job.name}-launcher"
            objects.append({"apiVersion": "batch/v1", "kind": "Job",
                            "metadata": _meta(job, launcher),
                            "spec": {"backoffLimit": 6, "completions": 1, "parallelism": 1,
                                     "template": templates["launcher"]}})
            parents.append(0)
            labels = {**base, f"{_KUBEFLOW}/job-role": "launcher",
                      "batch.kubernetes.io/job-name": launcher, "job-name": launcher}
            pods.append(PodPlan("launcher", 0, len(objects) - 1, None, f"{launcher}-",
                                tuple(sorted(labels.items())), True, later))
            continue
        for i in range(role.replicas):
            labels = {**base, f"{_KUBEFLOW}/job-role": "worker",
                      f"{_KUBEFLOW}/replica-index": str(i)}
            pods.append(PodPlan("worker", i, 0, f"{job.name}-worker-{i}", "",
                                tuple(sorted(labels.items())), False))
    if not any(p.leader for p in pods):      # no launcher: the workers finish the job
        pods = [attrs.evolve(p, leader=True) for p in pods]
    return Blueprint(tuple(objects), tuple(parents), tuple(pods), templates,
                     stages=(0,) + (later,) * (len(objects) - 1))


def _jobset(job: JobSpec, templates: Mapping[str, Obj]) -> Blueprint:
    """JobSet: one indexed Job <jobset>-<replicatedJob>-0 per role, parallelism =
    completions = replicas; pods <job>-<index>-<suffix> owned by that Job. With
    startupPolicy InOrder each replicatedJob is made once the ones before it run."""
    in_order = job.startup_policy == "InOrder"
    replicated = _replicated_jobs(job, templates)
    spec: Obj = {"replicatedJobs": replicated, "successPolicy": {"operator": "All"}}
    if in_order:
        spec["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    owner = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
             "metadata": _meta(job, **_min_member_annotation(job)), "spec": spec}
    objects, parents, pods = _jobset_jobs(job, job.name, replicated, 0, in_order)
    stages = (0,) + tuple(i if in_order else 0 for i in range(len(replicated)))
    first = job.roles[0].name if in_order else ""
    return Blueprint((owner, *objects), (None, *parents), tuple(pods), templates,
                     stages=stages, first_group=(0, first))


def _replicated_jobs(job: JobSpec, templates: Mapping[str, Obj]) -> list[Obj]:
    return [{"name": r.name, "replicas": 1,
             "template": {"spec": {"parallelism": r.replicas, "completions": r.replicas,
                                   "completionMode": "Indexed", "backoffLimit": 6,
                                   "template": templates[r.name]}}} for r in job.roles]


def _jobset_jobs(job: JobSpec, jobset: str, replicated: list[Obj], parent: int, in_order: bool
                 ) -> tuple[list[Obj], list[int], list[PodPlan]]:
    """The Jobs a JobSet controller makes (owned by objects[parent]) and their pods."""
    objects: list[Obj] = []
    parents: list[int] = []
    pods = []
    for stage, (role, entry) in enumerate(zip(job.roles, replicated, strict=True)):
        child = f"{jobset}-{role.name}-0"
        objects.append({"apiVersion": "batch/v1", "kind": "Job",
                        "metadata": _meta(job, child, labels={
                            L.QUEUE_LABEL: job.queue, "jobset.sigs.k8s.io/jobset-name": jobset,
                            "jobset.sigs.k8s.io/replicatedjob-name": role.name}),
                        "spec": entry["template"]["spec"]})
        parents.append(parent)
        for i in range(role.replicas):
            labels = {"jobset.sigs.k8s.io/jobset-name": jobset,
                      "jobset.sigs.k8s.io/replicatedjob-name": role.name,
                      "jobset.sigs.k8s.io/job-index": "0",
                      "batch.kubernetes.io/job-completion-index": str(i),
                      "batch.kubernetes.io/job-name": child, "job-name": child}
            pods.append(PodPlan(role.name, i, parent + len(objects), None, f"{child}-{i}-",
                                tuple(sorted(labels.items())), True, stage if in_order else 0))
    return objects, parents, pods


def _trainjob(job: JobSpec, templates: Mapping[str, Obj]) -> Blueprint:
    """TrainJob (Kubeflow Trainer v2) on the torch-distributed runtime: the
    trainer makes a JobSet <job> owned by the TrainJob, with one replicatedJob
    `node` of numNodes pods; the JobSet's Job owns the pods."""
    role = job.roles[0]
    resources = templates[role.name]["spec"]["containers"][0]["resources"]
    owner = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
             "metadata": _meta(job, **_min_member_annotation(job)),
             "spec": {"runtimeRef": {"name": "torch-distributed",
                                     "apiGroup": "trainer.kubeflow.org",
                                     "kind": "ClusterTrainingRuntime"},
                      "trainer": {"numNodes": role.replicas, "image": IMAGE,
                                  "resourcesPerNode": resources}}}
    replicated = _replicated_jobs(job, templates)
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": _meta(job, labels={L.QUEUE_LABEL: job.queue,
                                             "trainer.kubeflow.org/trainjob-name": job.name}),
              "spec": {"replicatedJobs": replicated, "successPolicy": {"operator": "All"}}}
    objects, parents, pods = _jobset_jobs(job, job.name, replicated, 1, False)
    return Blueprint((owner, jobset, *objects), (None, 0, *parents), tuple(pods), templates)


def _lws(job: JobSpec, templates: Mapping[str, Obj]) -> Blueprint:
    """LeaderWorkerSet: `leader` replicas groups of size 1 + workers/groups. The
    LWS controller makes a leader StatefulSet <job> (pods <job>-<group>) and a
    worker StatefulSet <job>-<group> per group (pods <job>-<group>-<worker>);
    every pod carries its group-index and worker-index (0: the leader). On a
    cluster a group's worker StatefulSet is owned by its leader pod; here by
    the leader StatefulSet, so that a leader made again after an eviction
    keeps its workers' chain (the garbage collector would otherwise remove the
    group with it). With startupPolicy LeaderReady the workers come once their
    leader runs (stage 1)."""
    groups = next(r.replicas for r in job.roles if r.name == "leader")
    workers = next((r.replicas for r in job.roles if r.name == "worker"), 0) // groups
    size = str(1 + workers)
    ready = job.startup_policy == "LeaderReady"
    spec: Obj = {"replicas": groups, "startupPolicy": "LeaderReady" if ready else "LeaderCreated",
                 "leaderWorkerTemplate": {"size": 1 + workers,
                                          "restartPolicy": "RecreateGroupOnPodRestart",
                                          "leaderTemplate": templates["leader"]}}
    if workers:
        spec["leaderWorkerTemplate"]["workerTemplate"] = templates["worker"]
    owner = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
             "metadata": _meta(job, **_min_member_annotation(job)), "spec": spec}
    base = {f"{_LWS}/name": job.name}
    leaders = {"apiVersion": "apps/v1", "kind": "StatefulSet",
               "metadata": _meta(job, labels={L.QUEUE_LABEL: job.queue, **base}),
               "spec": _statefulset(job.name, groups, {**base, f"{_LWS}/worker-index": "0"},
                                    templates["leader"])}
    objects: list[Obj] = [owner, leaders]
    parents: list[int | None] = [None, 0]
    stages = [0, 0]
    pods = []
    for g in range(groups):
        group = {**base, f"{_LWS}/group-index": str(g)}
        pods.append(PodPlan("leader", g, 1, f"{job.name}-{g}", "", tuple(sorted(
            {**group, f"{_LWS}/worker-index": "0"}.items())), True))
        if not workers:
            continue
        objects.append({"apiVersion": "apps/v1", "kind": "StatefulSet",
                        "metadata": _meta(job, f"{job.name}-{g}",
                                          labels={L.QUEUE_LABEL: job.queue, **group}),
                        "spec": _statefulset(job.name, workers, group, templates["worker"])})
        parents.append(1)
        stages.append(1 if ready else 0)
        for w in range(1, workers + 1):
            pods.append(PodPlan("worker", g * workers + w - 1, len(objects) - 1,
                                f"{job.name}-{g}-{w}", "", tuple(sorted(
                                    {**group, f"{_LWS}/worker-index": str(w)}.items())),
                                True, 1 if ready else 0))
    return Blueprint(tuple(objects), tuple(parents), tuple(pods),
                     {**templates, "leader": _annotated(templates["leader"], size),
                      **({"worker": _annotated(templates["worker"], size)} if workers else {})},
                     stages=tuple(stages), first_group=(0, "0"))


def _statefulset(service: str, replicas: int, labels: Mapping[str, str], template: Obj) -> Obj:
    return {"replicas": replicas, "serviceName": service, "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": dict(labels)},
            "template": {**template, "metadata": {**template["metadata"], "labels": {
                **template["metadata"]["labels"], **labels}}}}


def _annotated(template: Obj, size: str) -> Obj:
    return {**template, "metadata": {**template["metadata"], "annotations": {
        **template["metadata"]["annotations"], f"{_LWS}/size": size}}}


def _ray(job: JobSpec, templates: Mapping[str, Obj]) -> Blueprint:
    """RayJob (KubeRay): a RayCluster <job>-raycluster owned by the RayJob; head
    and worker pods owned by the cluster. RayService: the same, its cluster
    <job>-raycluster-<suffix> made from spec.rayClusterConfig; its PodGroup is
    named after the cluster. The Ray job's (or the service's run's) end is the head's."""
    service = job.kind is JobKind.RAYSERVICE
    cluster_name = f"{job.name}-raycluster" + ("-x7k2q" if service else "")
    workers = []
    for role in job.roles:
        if role.name == "head":
            continue
        low = job.elastic_min if job.elastic_min is not None else role.replicas
        workers.append({"groupName": role.name, "replicas": role.replicas,
                        "minReplicas": min(low, role.replicas), "maxReplicas": role.replicas,
                        "rayStartParams": {}, "template": templates[role.name]})
    cluster_spec = {"headGroupSpec": {"rayStartParams": {}, "template": templates["head"]},
                    "workerGroupSpecs": workers}
    if service:
        owner = {"apiVersion": "ray.io/v1", "kind": "RayService",
                 "metadata": _meta(job, **_min_member_annotation(job)),
                 "spec": {"serveConfigV2": "applications:\n  - name: app\n    import_path: app:deployment\n",
                          "rayClusterConfig": cluster_spec}}
    else:
        owner = {"apiVersion": "ray.io/v1", "kind": "RayJob",
                 "metadata": _meta(job, **_min_member_annotation(job)),
                 "spec": {"entrypoint": "python train.py", "submissionMode": "HTTPMode",
                          "shutdownAfterJobFinishes": True, "rayClusterSpec": cluster_spec}}
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": _meta(job, cluster_name), "spec": cluster_spec}
    pods = []
    for role in job.roles:
        head = role.name == "head"
        for i in range(role.replicas):
            labels = {"ray.io/cluster": cluster_name, "ray.io/node-type": "head" if head else "worker",
                      "ray.io/group": "headgroup" if head else role.name,
                      "app.kubernetes.io/created-by": "kuberay-operator"}
            prefix = f"{cluster_name}-head-" if head else f"{cluster_name}-{role.name}-worker-"
            pods.append(PodPlan(role.name, i, 1, None, prefix, tuple(sorted(labels.items())), head))
    return Blueprint((owner, cluster), (None, 0), tuple(pods), templates,
                     first_group=(1, "") if service else (0, ""))


def _batch_job(job: JobSpec, templates: Mapping[str, Obj]) -> Blueprint:
    """batch/v1 Job: parallelism = completions = replicas, pods <job>-<suffix>."""
    role = job.roles[0]
    owner = {"apiVersion": "batch/v1", "kind": "Job",
             "metadata": _meta(job, **_min_member_annotation(job)),
             "spec": {"parallelism": role.replicas, "completions": role.replicas,
                      "backoffLimit": 6, "template": templates[role.name]}}
    labels = tuple(sorted({"batch.kubernetes.io/job-name": job.name, "job-name": job.name}.items()))
    pods = tuple(PodPlan(role.name, i, 0, None, f"{job.name}-", labels, True)
                 for i in range(role.replicas))
    return Blueprint((owner,), (None,), pods, templates)


def _gang(job: JobSpec, templates: Mapping[str, Obj]) -> Blueprint:
    """A gang written by hand and bare pods that name it, in the API the job
    says (kaisched's PodGroup by default): nobody recreates an evicted bare pod."""
    api = job.gang_api
    several = len(job.roles) > 1
    if api.startswith("scheduling.k8s.io/"):
        # The upstream Workload API has no subgroups: one gang of all the roles.
        gang = {"gang": {"minCount": job.gang_min()}}
        if api.endswith("/v1alpha1"):
            owner = {"apiVersion": api, "kind": "Workload", "metadata": _meta(job),
                     "spec": {"podGroups": [{"name": WORKLOAD_GANG, "policy": gang}]}}
            join: Obj = {"workloadRef": {"name": job.name, "podGroup": WORKLOAD_GANG}}
        else:
            spec: Obj = {"schedulingPolicy": gang}
            if job.priority_class:
                spec["priorityClassName"] = job.priority_class
            owner = {"apiVersion": api, "kind": "PodGroup", "metadata": _meta(job), "spec": spec}
            join = {"schedulingGroup": {"podGroupName": job.name}}
        named = {name: {**t, "spec": {**t["spec"], **join}} for name, t in templates.items()}
        subgroup_label = None
    else:
        kai = api.startswith("scheduling.run.ai/")
        spec = {"minMember": job.gang_min(), "queue": job.queue}
        if job.priority_class:
            spec["priorityClassName"] = job.priority_class
        if several:
            spec["subGroups"] = [{"name": r.name, "minMember": r.replicas} for r in job.roles]
        owner = {"apiVersion": api, "kind": "PodGroup", "metadata": _meta(job), "spec": spec}
        annotation = L.KAI_POD_GROUP_ANNOTATION if kai else L.POD_GROUP_ANNOTATION
        named = {name: {**t, "metadata": {**t["metadata"], "annotations": {
            **t["metadata"]["annotations"], annotation: job.name}}}
            for name, t in templates.items()}
        subgroup_label = L.KAI_SUBGROUP_LABEL if kai else L.SUBGROUP_LABEL
    pods = []
    for role in job.roles:
        for i in range(role.replicas):
            labels = {subgroup_label: role.name} if several and subgroup_label else {}
            pods.append(PodPlan(role.name, i, None, f"{job.name}-{role.name}-{i}", "",
                                tuple(sorted(labels.items())), True))
    return Blueprint((owner,), (None,), tuple(pods), named, recreates=False)


def gang_name(job: JobSpec) -> str:
    """The name of a PodGroup job's gang as the scheduler keys it."""
    return f"{job.name}:{WORKLOAD_GANG}" if job.gang_api.endswith("k8s.io/v1alpha1") else job.name


_BUILDERS = {JobKind.PYTORCH: _training, JobKind.TF: _training, JobKind.MPI: _mpi,
             JobKind.JOBSET: _jobset, JobKind.RAY: _ray, JobKind.JOB: _batch_job,
             JobKind.GANG: _gang, JobKind.XGBOOST: _training, JobKind.JAX: _training,
             JobKind.TRAINJOB: _trainjob, JobKind.LWS: _lws, JobKind.RAYSERVICE: _ray}
