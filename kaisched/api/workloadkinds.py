"""The workload kinds kaisched knows, in one table: the only place their facts live.

Each entry says what the rest of kaisched asks about a kind: its API group,
version, kind and plural; its roles (replica types); how its operator names
and labels the pods it makes; whether those pods are gang pods (they wait for
the PodGrouper's PodGroup rather than being scheduled alone); its start order,
where the operator has one; and whether the simulator emulates its operator.

The PodGrouper registers one grouper per entry (`podgrouper/groupers/registry.py`),
the cache tells gang pods by the table (`cache/convert/pods.py`), and the
simulator builds owners and pods from it (`kaisched/sim/`). A test keeps them
in step: a kind known to one and not the others fails it.

Pure values, no I/O: low enough for the cache, the groupers and the simulator.
"""
from __future__ import annotations

import enum

import attrs

# (API group, kind): the version is left out, so that e.g. a kubeflow.org/v1 MPIJob
# (training operator) and a kubeflow.org/v2beta1 one (MPI operator) are one kind.
GroupKind = tuple[str, str]

# Roles (replica types) as the operators label pods: lower-case.
MASTER = "master"
CHIEF = "chief"
PS = "ps"
WORKER = "worker"
EVALUATOR = "evaluator"
LAUNCHER = "launcher"
HEAD = "head"
LEADER = "leader"
NODE = "node"


class RoleFrom(enum.Enum):
    """How a pod's role is read from the labels its operator puts on it."""

    LABEL = "label"            # the role label's value, lower-cased
    NODE_TYPE = "node-type"    # the role label says the leading role or a worker; a
    #                            worker's role is its group label (KubeRay's worker groups)
    INDEX = "index"            # index 0 in its group is the leading role, any other the next


@attrs.frozen(slots=True)
class PodNaming:
    """How an operator names and labels the pods it makes.

    Name patterns take {job} (the object that makes the pods), {role}, {group}
    (the gang within the owner, or the Job's index) and {index}; a pattern that
    ends in "-" is a generateName prefix, the API server adding a suffix. ""
    when the pods are named by the controllers in between."""

    name: str = ""
    lead_name: str = ""                          # the leading role's pods, when named otherwise
    job_labels: tuple[str, ...] = ()             # labels that hold the job's name, newest first
    role_label: str = ""
    role_from: RoleFrom = RoleFrom.LABEL
    index_label: str = ""                        # the pod's index in its role (in its group)
    group_label: str = ""                        # its group: a worker group, a replica's index
    lead_labels: tuple[tuple[str, str], ...] = ()   # what the leading role's pods carry besides
    fixed_labels: tuple[tuple[str, str], ...] = ()  # what every pod carries: the operator's name
    size_annotation: str = ""                    # the size of the pod's group
    # An object (apiVersion, kind) in the pod's namespace, named by the pod's label
    # gang_label, that holds the gang the operator asks for (Grove's PodGang).
    gang_label: str = ""
    gang_object: tuple[str, str] = ("", "")

    @property
    def job_label(self) -> str:
        return self.job_labels[0] if self.job_labels else ""

    @property
    def generated(self) -> bool:
        """The API server completes the names (generateName): a pod made again gets another."""
        return self.name.endswith("-")

    def pod_name(self, job: str, role: str = "", index: int | str = "", group: int | str = "",
                 lead: bool = False) -> str:
        pattern = self.lead_name if lead and self.lead_name else self.name
        return pattern.format(job=job, role=role, index=index, group=group)


@attrs.frozen(slots=True)
class StartOrder:
    """A start order its operator knows: `field` under spec (dotted), either
    `default` (every pod at once) or `staged` (some pods only once others are
    ready), so the gang is started in steps."""

    field: str
    default: str
    staged: str

    @property
    def orders(self) -> tuple[str, ...]:
        return (self.default, self.staged)

    def written(self, value: str) -> dict[str, object]:
        """The spec entry that asks for `value`."""
        *parents, leaf = self.field.split(".")
        entry: dict[str, object] = {leaf: value}
        for part in reversed(parents):
            entry = {part: entry}
        return entry


@attrs.frozen(slots=True)
class WorkloadKind:
    """One kind of workload owner and what its operator does with it.

    roles: its replica types, in start order; leading: those that coordinate
    the others (placed first; their end is the job's end); open_roles: it
    also takes roles of any name (a JobSet's replicatedJobs, Ray worker groups).
    gang_owner: a pod whose controller is of this kind's API group is a gang
    pod; gang_by_label: so is a pod carrying its job label, whose controller is
    a plain StatefulSet or ReplicaSet. container: the pods' main container, as
    the training operator requires it named (for the other kinds, the name
    simulate gives it). simulated: `kaisched simulate` emulates its operator."""

    api_version: str
    kind: str
    plural: str
    roles: tuple[str, ...] = ()
    leading: tuple[str, ...] = ()
    open_roles: bool = False
    replica_specs: str = ""                 # the spec field mapping replica type to its spec
    pods: PodNaming = PodNaming()
    container: str = ""
    gang_owner: bool = False
    gang_by_label: bool = False
    start: StartOrder | None = None
    priority_label: str = ""                # its operator's own priority class label
    simulated: bool = False

    @property
    def group(self) -> str:
        return group_of(self.api_version)

    @property
    def group_kind(self) -> GroupKind:
        return (self.group, self.kind)

    @property
    def start_order(self) -> StartOrder:
        """Its start order, for the code of a kind that has one."""
        if self.start is None:
            raise LookupError(f"{self} has no start order")
        return self.start

    def __str__(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind


def group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def group_kind(api_version: str, kind: str) -> GroupKind:
    return (group_of(api_version), kind)


# -- the operators' label families ------------------------------------------------------------

_KUBEFLOW = "training.kubeflow.org"
_JOBSET = "jobset.sigs.k8s.io"
_LWS = "leaderworkerset.sigs.k8s.io"
_BATCH = "batch.kubernetes.io"
_KNATIVE = "serving.knative.dev"


def _training(kind: str, plural: str, roles: tuple[str, ...], field: str, operator: str,
              container: str, simulated: bool) -> WorkloadKind:
    """A Kubeflow training operator v1 kind: pods <job>-<role>-<index>, owned by the job."""
    return WorkloadKind(
        "kubeflow.org/v1", kind, plural, roles=roles,
        # A TFJob has a chief or (the older name) a master; the master is looked for first.
        leading=tuple(r for r in (MASTER, CHIEF) if r in roles), replica_specs=field,
        pods=PodNaming(name="{job}-{role}-{index}", job_labels=(f"{_KUBEFLOW}/job-name",),
                       role_label=f"{_KUBEFLOW}/replica-type",
                       index_label=f"{_KUBEFLOW}/replica-index",
                       lead_labels=((f"{_KUBEFLOW}/job-role", MASTER),),
                       fixed_labels=((f"{_KUBEFLOW}/operator-name", operator),)),
        container=container, gang_owner=True, simulated=simulated)


# KubeRay: a RayCluster's pods, whichever of the three kinds made the cluster.
_RAY_PODS = PodNaming(name="{job}-{role}-worker-", lead_name="{job}-{role}-",
                      job_labels=("ray.io/cluster",), role_label="ray.io/node-type",
                      role_from=RoleFrom.NODE_TYPE, group_label="ray.io/group",
                      fixed_labels=(("app.kubernetes.io/created-by", "kuberay-operator"),))
_RAY_PRIORITY = "ray.io/priority-class-name"


def _ray(kind: str, plural: str, simulated: bool) -> WorkloadKind:
    return WorkloadKind("ray.io/v1", kind, plural, roles=(HEAD,), leading=(HEAD,),
                        open_roles=True, pods=_RAY_PODS, container="ray", gang_owner=True,
                        priority_label=_RAY_PRIORITY, simulated=simulated)


def _plain(api_version: str, kind: str, plural: str) -> WorkloadKind:
    """An owner whose pods form no gang of their own (the default grouping)."""
    return WorkloadKind(api_version, kind, plural)


TRAIN_JOB = WorkloadKind(
    "trainer.kubeflow.org/v1alpha1", "TrainJob", "trainjobs", roles=(NODE,),
    # The trainer labels the JobSet it makes; the JobSet's labels are on the pods.
    pods=PodNaming(job_labels=("trainer.kubeflow.org/trainjob-name",)),
    container="node", gang_owner=True, simulated=True)
PYTORCH_JOB = _training("PyTorchJob", "pytorchjobs", (MASTER, WORKER), "pytorchReplicaSpecs",
                        "pytorchjob-controller", "pytorch", simulated=True)
TF_JOB = _training("TFJob", "tfjobs", (CHIEF, MASTER, PS, WORKER, EVALUATOR), "tfReplicaSpecs",
                   "tfjob-controller", "tensorflow", simulated=True)
XGBOOST_JOB = _training("XGBoostJob", "xgboostjobs", (MASTER, WORKER), "xgbReplicaSpecs",
                        "xgboostjob-controller", "xgboost", simulated=True)
JAX_JOB = _training("JAXJob", "jaxjobs", (WORKER,), "jaxReplicaSpecs", "jaxjob-controller", "jax",
                    simulated=True)
PADDLE_JOB = _training("PaddleJob", "paddlejobs", (MASTER, WORKER), "paddleReplicaSpecs",
                       "paddlejob-controller", "paddle", simulated=False)
MPI_JOB = WorkloadKind(
    "kubeflow.org/v2beta1", "MPIJob", "mpijobs", roles=(LAUNCHER, WORKER), leading=(LAUNCHER,),
    replica_specs="mpiReplicaSpecs",
    # Workers are named by the operator; the launcher is a batch Job <job>-launcher.
    pods=PodNaming(name="{job}-{role}-{index}", lead_name="{job}-{role}-",
                   job_labels=(f"{_KUBEFLOW}/job-name",), role_label=f"{_KUBEFLOW}/job-role",
                   index_label=f"{_KUBEFLOW}/replica-index",
                   fixed_labels=((f"{_KUBEFLOW}/operator-name", "mpi-operator"),)),
    container="mpi", gang_owner=True,
    start=StartOrder("launcherCreationPolicy", "AtStartup", "WaitForWorkersReady"),
    simulated=True)
JOBSET = WorkloadKind(
    "jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets", open_roles=True,
    # A Job <jobset>-<replicatedJob>-<job index> per replica; its pods are the Job's.
    pods=PodNaming(name="{job}-{role}-{group}-{index}-", job_labels=(f"{_JOBSET}/jobset-name",),
                   role_label=f"{_JOBSET}/replicatedjob-name", group_label=f"{_JOBSET}/job-index"),
    container="trainer", gang_owner=True,
    start=StartOrder("startupPolicy.startupPolicyOrder", "AnyOrder", "InOrder"), simulated=True)
RAY_CLUSTER = _ray("RayCluster", "rayclusters", simulated=False)
RAY_JOB = _ray("RayJob", "rayjobs", simulated=True)
RAY_SERVICE = _ray("RayService", "rayservices", simulated=True)
LEADER_WORKER_SET = WorkloadKind(
    "leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "leaderworkersets", roles=(LEADER, WORKER),
    leading=(LEADER,),
    # A leader StatefulSet <lws> (pods <lws>-<group>) and one worker StatefulSet per group.
    pods=PodNaming(name="{job}-{group}-{index}", lead_name="{job}-{group}",
                   job_labels=(f"{_LWS}/name",), role_from=RoleFrom.INDEX,
                   index_label=f"{_LWS}/worker-index", group_label=f"{_LWS}/group-index",
                   size_annotation=f"{_LWS}/size"),
    container="server", gang_owner=True, gang_by_label=True,
    start=StartOrder("startupPolicy", "LeaderCreated", "LeaderReady"), simulated=True)
# Grove (NVIDIA Dynamo's): a PodCliqueSet makes PodCliques, which make the pods;
# the gangs are PodGangs (scheduler.grove.io) that name their pods, and each pod
# names its PodGang by a label.
_GROVE_PODS = PodNaming(job_labels=("grove.io/podgang",), role_label="grove.io/podclique",
                        gang_label="grove.io/podgang",
                        gang_object=("scheduler.grove.io/v1alpha1", "PodGang"))
POD_CLIQUE_SET = WorkloadKind("grove.io/v1alpha1", "PodCliqueSet", "podcliquesets",
                              open_roles=True, pods=_GROVE_PODS, gang_owner=True)
POD_CLIQUE = WorkloadKind("grove.io/v1alpha1", "PodClique", "podcliques", open_roles=True,
                          pods=_GROVE_PODS, gang_owner=True)
KNATIVE_SERVICE = WorkloadKind("serving.knative.dev/v1", "Service", "services",
                               pods=PodNaming(job_labels=(f"{_KNATIVE}/service",)))
KNATIVE_CONFIGURATION = WorkloadKind("serving.knative.dev/v1", "Configuration", "configurations",
                                     pods=PodNaming(job_labels=(f"{_KNATIVE}/configuration",)))
# A Revision's pods are a Deployment's: told by their revision label.
KNATIVE_REVISION = WorkloadKind("serving.knative.dev/v1", "Revision", "revisions",
                                pods=PodNaming(job_labels=(f"{_KNATIVE}/revision",)),
                                gang_by_label=True)
WORKFLOW = WorkloadKind("argoproj.io/v1alpha1", "Workflow", "workflows",
                        pods=PodNaming(job_labels=("workflows.argoproj.io/workflow",)),
                        gang_owner=True)
CRON_WORKFLOW = WorkloadKind("argoproj.io/v1alpha1", "CronWorkflow", "cronworkflows",
                             gang_owner=True)
JOB = WorkloadKind(
    "batch/v1", "Job", "jobs", open_roles=True,
    pods=PodNaming(name="{job}-", job_labels=(f"{_BATCH}/job-name", "job-name"),
                   index_label=f"{_BATCH}/job-completion-index"),
    container="main", gang_owner=True, simulated=True)
CRON_JOB = WorkloadKind("batch/v1", "CronJob", "cronjobs", gang_owner=True)
DEPLOYMENT = _plain("apps/v1", "Deployment", "deployments")
STATEFUL_SET = _plain("apps/v1", "StatefulSet", "statefulsets")
REPLICA_SET = _plain("apps/v1", "ReplicaSet", "replicasets")
POD = _plain("v1", "Pod", "pods")

# In this order pod roles are read (a pod carries one operator's labels) and the
# PodGrouper's registry is listed.
KINDS: tuple[WorkloadKind, ...] = (
    TRAIN_JOB, PYTORCH_JOB, TF_JOB, XGBOOST_JOB, JAX_JOB, PADDLE_JOB, MPI_JOB, JOBSET,
    RAY_CLUSTER, RAY_JOB, RAY_SERVICE, LEADER_WORKER_SET, POD_CLIQUE_SET, POD_CLIQUE,
    KNATIVE_SERVICE, KNATIVE_CONFIGURATION, KNATIVE_REVISION, WORKFLOW, CRON_WORKFLOW,
    JOB, CRON_JOB, DEPLOYMENT, STATEFUL_SET, REPLICA_SET, POD,
)
_BY_GROUP_KIND = {k.group_kind: k for k in KINDS}


def lookup(group: str, kind: str) -> WorkloadKind | None:
    """The table's entry for an API group and kind (any version), if it has one."""
    return _BY_GROUP_KIND.get((group, kind))


def of_object(api_version: object, kind: object) -> WorkloadKind | None:
    """The entry for an object's (or an ownerReference's) apiVersion and kind."""
    return lookup(group_of(str(api_version or "")), str(kind or ""))
