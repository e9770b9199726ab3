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

import math
from typing import Any, Mapping, Sequence

import attrs

from kaisched.api import labels as L
from kaisched.api import workloadkinds as K
from kaisched.api.workloadkinds import HEAD, LAUNCHER, LEADER, WORKER, WorkloadKind
from kaisched.cluster.kinds import Kind
from kaisched.sim.draspecs import pod_claims
from kaisched.sim.specs import WORKLOADS, JobKind, JobSpec, RoleSpec, VolumeSpec

Obj = dict[str, Any]

# The workload inside the pods: how long the container runs once started.
DURATION_ANNOTATION = "sim.kaisched.io/duration"
IMAGE = "registry.example.com/sim/trainer:1.0"
GRACE_SECONDS = 10
_GANG_CONTAINER = "main"          # a plain gang's pods: no operator names their container
_RAY_HEAD_GROUP = "headgroup"     # KubeRay's ray.io/group on the head
WORKLOAD_GANG = "main"      # the one podGroup of a v1alpha1 Workload a PodGroup job writes


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
    name = WORKLOADS[job.kind].container if job.kind in WORKLOADS else _GANG_CONTAINER
    container: Obj = {"name": name, "image": IMAGE, "resources": resources}
    spec: Obj = {"schedulerName": scheduler_name, "containers": [container],
                 "restartPolicy": "Never" if job.kind is JobKind.JOB else "OnFailure",
                 "terminationGracePeriodSeconds": GRACE_SECONDS}
    if job.kind is JobKind.GANG:
        spec["restartPolicy"] = "Never"
    if job.priority_class:
        spec["priorityClassName"] = job.priority_class
    if job.runtime_limit is not None:     # the kubelet ends the pod this long after its start
        spec["activeDeadlineSeconds"] = math.ceil(job.runtime_limit)
    if job.node_selector:
        spec["nodeSelector"] = dict(job.node_selector)
    if job.tolerations:
        spec["tolerations"] = [dict(t) for t in job.tolerations]
    if role.volumes:
        spec["volumes"] = pod_volumes(role.volumes)
    if role.claims:     # devices (DRA): each pod its claims, made from the role's templates
        spec["resourceClaims"] = pod_claims(job, role)
        container["resources"]["claims"] = [{"name": c.name} for c in role.claims]
    # A share of GPUs, as KAI's users ask for it: annotations, no nvidia.com/gpu request.
    return {"metadata": {"labels": {L.QUEUE_LABEL: job.queue},
                         "annotations": {DURATION_ANNOTATION: f"{job.duration:g}s",
                                         **dict(role.gpu_share)}},
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


def _object(kind: WorkloadKind | Kind, metadata: Obj, spec: Obj) -> Obj:
    return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": metadata, "spec": spec}


def _training(job: JobSpec, templates: Mapping[str, Obj]) -> Blueprint:
    """PyTorchJob / TFJob / XGBoostJob / JAXJob, training operator: pods
    <job>-<role>-<index>, owned by the job."""
    kind = WORKLOADS[job.kind]
    naming = kind.pods
    spec: Obj = {"runPolicy": _run_policy(job, "None"),
                 kind.replica_specs: _replica_specs(job, templates, "OnFailure")}
    if job.kind is JobKind.PYTORCH and job.elastic_min is not None:
        # torchrun's --nnodes=minReplicas:maxReplicas counts every pod, the master too:
        # "the master and elastic.minReplicas workers" is minReplicas masters + that.
        masters = sum(r.replicas for r in job.roles if r.name != WORKER)
        workers = sum(r.replicas for r in job.roles if r.name == WORKER)
        spec["elasticPolicy"] = {"minReplicas": masters + job.elastic_min,
                                 "maxReplicas": masters + workers}
    owner = _object(kind, _meta(job), spec)
    names = {r.name for r in job.roles}
    lead = next((n for n in kind.leading if n in names), None)
    pods = []
    for role in job.roles:
        for i in range(role.replicas):
            labels = {naming.job_label: job.name, **dict(naming.fixed_labels),
                      naming.role_label: role.name, naming.index_label: str(i)}
            if role.name == lead:
                labels.update(naming.lead_labels)
            leader = role.name == lead if lead else (role.name == WORKER and i == 0)
            pods.append(PodPlan(role.name, i, 0, naming.pod_name(job.name, role.name, i), "",
                                tuple(sorted(labels.items())), leader))
    return Blueprint((owner,), (None,), tuple(pods), templates)


def _mpi(job: JobSpec, templates: Mapping[str, Obj]) -> Blueprint:
    """MPIJob v2beta1, MPI operator: workers <job>-worker-<i> owned by the MPIJob;
    the launcher is a batch Job <job>-launcher whose pod the Job controller makes.
    With launcherCreationPolicy WaitForWorkersReady the launcher's Job is made
    only once every worker runs (stage 1)."""
    kind, naming, order = K.MPI_JOB, K.MPI_JOB.pods, K.MPI_JOB.start_order
    wait = job.startup_policy == order.staged
    spec: Obj = {"slotsPerWorker": 1, "runPolicy": _run_policy(job, "Running"),
                 kind.replica_specs: _replica_specs(job, templates, "OnFailure")}
    if wait:
        spec.update(order.written(order.staged))
    owner = _object(kind, _meta(job), spec)
    later = 1 if wait else 0
    objects: list[Obj] = [owner]
    parents: list[int | None] = [None]
    pods = []
    base = {naming.job_label: job.name, **dict(naming.fixed_labels)}
    for role in job.roles:
        if role.name == LAUNCHER:
            launcher = f"{job.name}-{LAUNCHER}"
            objects.append(_object(K.JOB, _meta(job, launcher),
                                   {"backoffLimit": 6, "completions": 1, "parallelism": 1,
                                    "template": templates[LAUNCHER]}))
            parents.append(0)
            labels = {**base, naming.role_label: LAUNCHER,
                      **{label: launcher for label in K.JOB.pods.job_labels}}
            pods.append(PodPlan(LAUNCHER, 0, len(objects) - 1, None, K.JOB.pods.pod_name(launcher),
                                tuple(sorted(labels.items())), True, later))
            continue
        for i in range(role.replicas):
            labels = {**base, naming.role_label: WORKER, naming.index_label: str(i)}
            pods.append(PodPlan(WORKER, i, 0, naming.pod_name(job.name, WORKER, i), "",
                                tuple(sorted(labels.items())), False))
    if not any(p.leader for p in pods):      # no launcher: the workers finish the job
        pods = [attrs.evolve(p, leader=True) for p in pods]
    return Blueprint(tuple(objects), tuple(parents), tuple(pods), templates,
                     stages=(0,) + (later,) * (len(objects) - 1))


def _jobset(job: JobSpec, templates: Mapping[str, Obj]) -> Blueprint:
    """JobSet: one indexed Job <jobset>-<replicatedJob>-0 per role, parallelism =
    completions = replicas; pods <job>-<index>-<suffix> owned by that Job. With
    startupPolicy InOrder each replicatedJob is made once the ones before it run."""
    order = K.JOBSET.start_order
    in_order = job.startup_policy == order.staged
    replicated = _replicated_jobs(job, templates)
    spec: Obj = {"replicatedJobs": replicated, "successPolicy": {"operator": "All"}}
    if in_order:
        spec.update(order.written(order.staged))
    owner = _object(K.JOBSET, _meta(job, **_min_member_annotation(job)), spec)
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
    naming = K.JOBSET.pods
    objects: list[Obj] = []
    parents: list[int] = []
    pods = []
    for stage, (role, entry) in enumerate(zip(job.roles, replicated, strict=True)):
        child = f"{jobset}-{role.name}-0"
        objects.append(_object(K.JOB, _meta(job, child, labels={
            L.QUEUE_LABEL: job.queue, naming.job_label: jobset, naming.role_label: role.name}),
            entry["template"]["spec"]))
        parents.append(parent)
        for i in range(role.replicas):
            labels = {naming.job_label: jobset, naming.role_label: role.name,
                      naming.group_label: "0", K.JOB.pods.index_label: str(i),
                      **{label: child for label in K.JOB.pods.job_labels}}
            pods.append(PodPlan(role.name, i, parent + len(objects), None,
                                naming.pod_name(jobset, role.name, i, group=0),
                                tuple(sorted(labels.items())), True, stage if in_order else 0))
    return objects, parents, pods


def _trainjob(job: JobSpec, templates: Mapping[str, Obj]) -> Blueprint:
    """TrainJob (Kubeflow Trainer v2) on the torch-distributed runtime: the
    trainer makes a JobSet <job> owned by the TrainJob, with one replicatedJob
    `node` of numNodes pods; the JobSet's Job owns the pods."""
    role = job.roles[0]
    resources = templates[role.name]["spec"]["containers"][0]["resources"]
    owner = _object(K.TRAIN_JOB, _meta(job, **_min_member_annotation(job)),
                    {"runtimeRef": {"name": "torch-distributed",
                                    "apiGroup": K.TRAIN_JOB.group,
                                    "kind": "ClusterTrainingRuntime"},
                     "trainer": {"numNodes": role.replicas, "image": IMAGE,
                                 "resourcesPerNode": resources}})
    replicated = _replicated_jobs(job, templates)
    jobset = _object(K.JOBSET, _meta(job, labels={L.QUEUE_LABEL: job.queue,
                                                  K.TRAIN_JOB.pods.job_label: job.name}),
                     {"replicatedJobs": replicated, "successPolicy": {"operator": "All"}})
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
    kind, naming, order = K.LEADER_WORKER_SET, K.LEADER_WORKER_SET.pods, \
        K.LEADER_WORKER_SET.start_order
    groups = next(r.replicas for r in job.roles if r.name == LEADER)
    workers = next((r.replicas for r in job.roles if r.name == WORKER), 0) // groups
    size = str(1 + workers)
    ready = job.startup_policy == order.staged
    spec: Obj = {"replicas": groups, **order.written(order.staged if ready else order.default),
                 "leaderWorkerTemplate": {"size": 1 + workers,
                                          "restartPolicy": "RecreateGroupOnPodRestart",
                                          "leaderTemplate": templates[LEADER]}}
    if workers:
        spec["leaderWorkerTemplate"]["workerTemplate"] = templates[WORKER]
    owner = _object(kind, _meta(job, **_min_member_annotation(job)), spec)
    base = {naming.job_label: job.name}
    leaders = _object(K.STATEFUL_SET, _meta(job, labels={L.QUEUE_LABEL: job.queue, **base}),
                      _statefulset(job.name, groups, {**base, naming.index_label: "0"},
                                   templates[LEADER]))
    objects: list[Obj] = [owner, leaders]
    parents: list[int | None] = [None, 0]
    stages = [0, 0]
    pods = []
    for g in range(groups):
        group = {**base, naming.group_label: str(g)}
        leader = naming.pod_name(job.name, LEADER, group=g, lead=True)
        pods.append(PodPlan(LEADER, g, 1, leader, "", tuple(sorted(
            {**group, naming.index_label: "0"}.items())), True))
        if not workers:
            continue
        # The group's worker StatefulSet is named after its leader pod.
        objects.append(_object(K.STATEFUL_SET,
                               _meta(job, leader, labels={L.QUEUE_LABEL: job.queue, **group}),
                               _statefulset(job.name, workers, group, templates[WORKER])))
        parents.append(1)
        stages.append(1 if ready else 0)
        for w in range(1, workers + 1):
            pods.append(PodPlan(WORKER, g * workers + w - 1, len(objects) - 1,
                                naming.pod_name(job.name, WORKER, w, group=g), "", tuple(sorted(
                                    {**group, naming.index_label: str(w)}.items())),
                                True, 1 if ready else 0))
    return Blueprint(tuple(objects), tuple(parents), tuple(pods),
                     {**templates, LEADER: _annotated(templates[LEADER], size),
                      **({WORKER: _annotated(templates[WORKER], size)} if workers else {})},
                     stages=tuple(stages), first_group=(0, "0"))


def _statefulset(service: str, replicas: int, labels: Mapping[str, str], template: Obj) -> Obj:
    return {"replicas": replicas, "serviceName": service, "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": dict(labels)},
            "template": {**template, "metadata": {**template["metadata"], "labels": {
                **template["metadata"]["labels"], **labels}}}}


def _annotated(template: Obj, size: str) -> Obj:
    return {**template, "metadata": {**template["metadata"], "annotations": {
        **template["metadata"]["annotations"], K.LEADER_WORKER_SET.pods.size_annotation: size}}}


def _ray(job: JobSpec, templates: Mapping[str, Obj]) -> Blueprint:
    """RayJob (KubeRay): a RayCluster <job>-raycluster owned by the RayJob; head
    and worker pods owned by the cluster. RayService: the same, its cluster
    <job>-raycluster-<suffix> made from spec.rayClusterConfig; its PodGroup is
    named after the cluster. The Ray job's (or the service's run's) end is the head's."""
    service = job.kind is JobKind.RAYSERVICE
    kind, naming = WORKLOADS[job.kind], WORKLOADS[job.kind].pods
    cluster_name = f"{job.name}-raycluster" + ("-x7k2q" if service else "")
    workers = []
    for role in job.roles:
        if role.name == HEAD:
            continue
        low = job.elastic_min if job.elastic_min is not None else role.replicas
        workers.append({"groupName": role.name, "replicas": role.replicas,
                        "minReplicas": min(low, role.replicas), "maxReplicas": role.replicas,
                        "rayStartParams": {}, "template": templates[role.name]})
    cluster_spec = {"headGroupSpec": {"rayStartParams": {}, "template": templates[HEAD]},
                    "workerGroupSpecs": workers}
    if service:
        owner = _object(kind, _meta(job, **_min_member_annotation(job)),
                        {"serveConfigV2": "applications:\n  - name: app\n    import_path: app:deployment\n",
                         "rayClusterConfig": cluster_spec})
    else:
        owner = _object(kind, _meta(job, **_min_member_annotation(job)),
                        {"entrypoint": "python train.py", "submissionMode": "HTTPMode",
                         "shutdownAfterJobFinishes": True, "rayClusterSpec": cluster_spec})
    cluster = _object(K.RAY_CLUSTER, _meta(job, cluster_name), cluster_spec)
    pods = []
    for role in job.roles:
        head = role.name == HEAD
        for i in range(role.replicas):
            labels = {naming.job_label: cluster_name, naming.role_label: HEAD if head else WORKER,
                      naming.group_label: _RAY_HEAD_GROUP if head else role.name,
                      **dict(naming.fixed_labels)}
            prefix = naming.pod_name(cluster_name, role.name, lead=head)
            pods.append(PodPlan(role.name, i, 1, None, prefix, tuple(sorted(labels.items())), head))
    return Blueprint((owner, cluster), (None, 0), tuple(pods), templates,
                     first_group=(1, "") if service else (0, ""))


def _batch_job(job: JobSpec, templates: Mapping[str, Obj]) -> Blueprint:
    """batch/v1 Job: parallelism = completions = replicas, pods <job>-<suffix>."""
    role = job.roles[0]
    owner = _object(K.JOB, _meta(job, **_min_member_annotation(job)),
                    {"parallelism": role.replicas, "completions": role.replicas,
                     "backoffLimit": 6, "template": templates[role.name]})
    labels = tuple(sorted({label: job.name for label in K.JOB.pods.job_labels}.items()))
    pods = tuple(PodPlan(role.name, i, 0, None, K.JOB.pods.pod_name(job.name), labels, True)
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
