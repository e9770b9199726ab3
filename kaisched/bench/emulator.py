"""An API server for tests and benches: kmock's KubernetesEmulator, extended
the way kmock's docs say to ("inherit and implement for your cases") with
what an API server does and kaisched relies on: names from generateName, uids,
creationTimestamps, resourceVersions, the pods/binding and pods/eviction
subresources, and the namespace list. pods/status and podgroups/status need
nothing: a PATCH of `.../status` is an update of the same object here.

The emulator is asyncio (aiohttp) and the kubernetes client blocks, so it
runs its own event loop in a thread (Emulator), or in a process of its own
(`python -m kaisched.bench.emulator`, for `kaisched bench binds`: the scheduler's
threads then do not share an interpreter with it). kmock is a test extra:
`pip install 'kaisched[test]'`.
"""
from __future__ import annotations

import asyncio
import collections
import itertools
import os
import sys
import threading
import time
import uuid
from typing import Any, Callable, Coroutine, Iterator, TypeVar

import aiohttp.web
import attrs
import kmock
import orjson

from kaisched.api.clock import to_rfc3339

T = TypeVar("T")
Obj = dict[str, Any]

PG_API = "scheduling.kaisched.io/v1alpha1"
PODS = "v1/pods"
PODGROUPS = f"{PG_API}/podgroups"
QUEUES = f"{PG_API}/queues"
# What the emulator serves (even while empty); scheduling.x-k8s.io is left out
# on purpose: a cluster without the scheduler-plugins CRD.
RESOURCES = {
    PODS: kmock.ResourceInfo(kind="Pod", namespaced=True,
                             subresources={"status", "binding", "eviction"}),
    "v1/nodes": kmock.ResourceInfo(kind="Node", namespaced=False, subresources={"status"}),
    "v1/events": kmock.ResourceInfo(kind="Event", namespaced=True),
    "v1/namespaces": kmock.ResourceInfo(kind="Namespace", namespaced=False),
    "scheduling.k8s.io/v1/priorityclasses": kmock.ResourceInfo(kind="PriorityClass",
                                                               namespaced=False),
    PODGROUPS: kmock.ResourceInfo(kind="PodGroup", namespaced=True, subresources={"status"}),
    QUEUES: kmock.ResourceInfo(kind="Queue", namespaced=False, subresources={"status"}),
    "batch/v1/jobs": kmock.ResourceInfo(kind="Job", namespaced=True),
    "coordination.k8s.io/v1/leases": kmock.ResourceInfo(kind="Lease", namespaced=True),
    # Storage: what volume binding reads, and writes (a claim's selected node, a volume's claimRef).
    "v1/persistentvolumeclaims": kmock.ResourceInfo(kind="PersistentVolumeClaim", namespaced=True,
                                                    subresources={"status"}),
    "v1/persistentvolumes": kmock.ResourceInfo(kind="PersistentVolume", namespaced=False,
                                               subresources={"status"}),
    "storage.k8s.io/v1/storageclasses": kmock.ResourceInfo(kind="StorageClass", namespaced=False),
    "storage.k8s.io/v1/csinodes": kmock.ResourceInfo(kind="CSINode", namespaced=False),
    # Dynamic Resource Allocation as Kubernetes 1.32-1.33 serve it (v1beta1 only).
    "resource.k8s.io/v1beta1/deviceclasses": kmock.ResourceInfo(kind="DeviceClass", namespaced=False),
    "resource.k8s.io/v1beta1/resourceslices": kmock.ResourceInfo(kind="ResourceSlice",
                                                                 namespaced=False),
    "resource.k8s.io/v1beta1/resourceclaims": kmock.ResourceInfo(kind="ResourceClaim", namespaced=True,
                                                                 subresources={"status"}),
    # Served by every cluster: what voluntary evictions may not break.
    "policy/v1/poddisruptionbudgets": kmock.ResourceInfo(kind="PodDisruptionBudget",
                                                         namespaced=True),
    "v1/podtemplates": kmock.ResourceInfo(kind="PodTemplate", namespaced=True),
}
# The gang APIs of others a cluster may serve, by what serves them (left out
# of RESOURCES: tests and benches serve the ones they are about): each
# Kubernetes version's Workload API, and KAI Scheduler's CRDs.
GANG_APIS: dict[str, dict[str, kmock.ResourceInfo]] = {
    "1.35": {"scheduling.k8s.io/v1alpha1/workloads": kmock.ResourceInfo(
        kind="Workload", namespaced=True)},
    **{version: {f"scheduling.k8s.io/{api}/workloads": kmock.ResourceInfo(
        kind="Workload", namespaced=True),
        f"scheduling.k8s.io/{api}/podgroups": kmock.ResourceInfo(
        kind="PodGroup", namespaced=True, subresources={"status"})}
        for version, api in (("1.36", "v1alpha2"), ("1.37", "v1beta1"))},
    "kai": {"scheduling.run.ai/v2alpha2/podgroups": kmock.ResourceInfo(
        kind="PodGroup", namespaced=True, subresources={"status"}),
        "scheduling.run.ai/v2/queues": kmock.ResourceInfo(
        kind="Queue", namespaced=False, subresources={"status"})},
}
# Other CRDs a cluster may serve, served where tests ask for them:
# cluster-autoscaler's ProvisioningRequests.
CRD_APIS: dict[str, dict[str, kmock.ResourceInfo]] = {
    "autoscaling": {"autoscaling.x-k8s.io/v1/provisioningrequests": kmock.ResourceInfo(
        kind="ProvisioningRequest", namespaced=True, subresources={"status"})},
}
# How long a caller waits for the emulator's loop before it gives up: patience
# that only bounds a hang (a loaded machine may be slow), never a measure.
PATIENCE = 120.0
# Lists served in pages that are kept for their next page (a count reads one
# page of one and never comes back; an API server lets such a token expire).
LISTINGS = 16
CONTINUE = "emulator-"      # how the continue tokens of its own pages begin


@attrs.define(kw_only=True)
class _PromptReactions(kmock.RawHandler):
    """kmock picks the reaction that serves a request by asking each reaction's
    view whether the request is in it, and a view answers by walking every
    request served so far: each answer slows as the history grows, and a wire
    test of a minute (thousands of requests: watches, relists, binds) got its
    answers after seconds. For the views the emulator and most tests build --
    filters and priorities over this server -- the request is in the view when
    every filter's criteria accept it, a look at this one request; any other
    view (a slice such as `[:1]`, a group, a stream) is asked as before."""

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        # kmock's own order (RawHandler._handle): highest priority first, the
        # first reaction that sees the request and does not decline serves it.
        priorities = [payload.priorities for payload in self._payloads]
        width = max((len(p) for p in priorities), default=0)
        ranks = [tuple(-p for p in prio) + (0,) * (width - len(prio)) for prio in priorities]
        for index in sorted(range(len(ranks)), key=ranks.__getitem__):
            payload = self._payloads[index]
            if payload._disabled.is_set() or not self._sees(payload._source, request):
                continue
            try:
                return await payload(request)
            except kmock.ReactionMismatchError:     # declined or used up
                payload._disabled.set()
            except NotImplementedError:             # matched, but nothing to answer with
                pass
        raise NotImplementedError(f"no reaction serves {request}")

    def _sees(self, view: kmock.View, request: kmock.Request) -> bool:
        node = view
        while node is not self:
            if type(node) is kmock.Filter:
                if not node.criteria(request):
                    return False
            elif type(node) is not kmock.Priority:
                return request in view             # kmock's walk, for what it alone can judge
            node = node._source
        return True


@attrs.define(kw_only=True)
class ApiServer(kmock.KubernetesEmulator, _PromptReactions):
    """KubernetesEmulator that stamps objects as an API server does."""

    _versions: Iterator[int] = attrs.field(factory=lambda: itertools.count(1), init=False)
    namespaces: dict[str, dict[str, str]] = attrs.field(
        factory=lambda: {"default": {}, "kube-system": {}})
    # Requests to a subresource named here ("binding", "status"), or creations
    # ("create events"), wait until its gate opens: a test holds binds or
    # status writes in flight with them.
    gates: dict[str, asyncio.Event] = attrs.field(factory=dict)
    # kmock keeps every request (tests count them) and walks that history on each
    # new one: a bench of thousands of requests must forget it as it goes.
    forgetful: bool = False
    # Lists served in pages: what the next page of each is read from, by token.
    listings: dict[str, tuple[Obj, int]] = attrs.field(factory=dict)

    def _KubernetesEmulator__get_objs(self, request: kmock.Request, strict: bool) -> list[Any]:
        # kmock scans every object for a request that names one: a bench's
        # thousands of pods make each bind slow. Named, namespaced (or strict)
        # requests are a key lookup instead.
        if request.name is not None and request.resource is not None \
                and (strict or request.namespace is not None):
            found = self._objects._objects.get((request.resource, request.namespace, request.name))
            return [found] if found is not None else []
        return super()._KubernetesEmulator__get_objs(request, strict)  # type: ignore[misc]  # kmock's private method

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        # kmock cannot parse /api/v1/namespaces (it reads "namespaces" as a
        # scope): the namespace list and its watch are served here.
        if raw_request.path.rstrip("/") == "/api/v1/namespaces":
            return await self._namespaces(raw_request)
        if self.forgetful:
            self._requests.clear()
        return await super().__call__(raw_request)

    async def _namespaces(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        await raw_request.read()
        if raw_request.query.get("watch") == "true":
            # Nothing changes: hold the watch open until its timeout or the client leaves.
            resp = aiohttp.web.StreamResponse()
            resp.content_type = "application/json"
            await resp.prepare(raw_request)
            until = time.monotonic() + float(raw_request.query.get("timeoutSeconds") or 60)
            while time.monotonic() < until:
                transport = raw_request.transport
                if transport is None or transport.is_closing():
                    break
                await asyncio.sleep(0.1)
            return resp
        items = [{"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": name, "resourceVersion": "1",
                               "labels": {"kubernetes.io/metadata.name": name, **labels}}}
                 for name, labels in sorted(self.namespaces.items())]
        return aiohttp.web.json_response({"apiVersion": "v1", "kind": "NamespaceList",
                                          "metadata": {"resourceVersion": "1"}, "items": items})

    async def _handle(self, request: kmock.Request) -> Any:
        if request.action == kmock.action.LIST and request.params.get("limit"):
            return await self._page(request)
        gate = self.gates.get(request.subresource or "")
        if gate is None and request.resource is not None and request.action == kmock.action.CREATE:
            gate = self.gates.get(f"create {request.resource.plural}")
        if gate is not None:
            await gate.wait()
        data = request.data
        if request.resource is None or not isinstance(data, dict) \
                or request.subresource not in (None, "status"):
            return await super()._handle(request)
        if request.action == kmock.action.CREATE and not request.subresource:
            meta = data.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            if request.namespace and not meta.get("namespace"):
                meta["namespace"] = request.namespace
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", _now())
            meta["resourceVersion"] = str(next(self._versions))
        elif request.action == kmock.action.UPDATE:
            self._check_version(request, data)
            # The patch carries the new version, so the merged object has it.
            data.setdefault("metadata", {})["resourceVersion"] = str(next(self._versions))
        return await super()._handle(request)


    async def _page(self, request: kmock.Request) -> Any:
        """A list in pages of `limit`, as an API server serves one: the first
        page takes the list as it is then, the next pages are read from it by
        the `continue` token; the last page has none. What a test's reaction
        answers is left as it is."""
        limit = int(request.params["limit"])
        token = request.params.get("continue")
        found = self.listings.pop(token, None) if token else None
        if found is not None:
            whole, offset = found
        elif token and token.startswith(CONTINUE):
            # One of ours, forgotten (LISTINGS): an API server's token expires too.
            raise kmock.KubernetesError(status=410, reason="Expired", message=(
                "The provided continue parameter is too old to display a consistent "
                "list result."))
        else:
            # kmock answers with the whole list, serialised: read back once, served in pages.
            answer = await super()._handle(request)
            body = getattr(answer, "body", None)
            if getattr(answer, "status", 200) != 200 or not isinstance(body, bytes):
                return answer
            try:
                whole, offset = orjson.loads(body), 0
            except orjson.JSONDecodeError:
                return answer                   # a test's reaction: not JSON at all
            meta = whole.get("metadata") or {} if isinstance(whole, dict) else {}
            if not isinstance(whole, dict) or token or meta.get("continue") \
                    or len(whole.get("items") or ()) <= limit:
                return answer                   # one page, or a test's reaction's own pages
        items = whole.get("items") or []
        page = dict(whole, items=items[offset:offset + limit],
                    metadata=dict(whole.get("metadata") or {}))
        rest = len(items) - offset - limit
        if rest > 0:
            token = CONTINUE + uuid.uuid4().hex
            self.listings[token] = (whole, offset + limit)
            while len(self.listings) > LISTINGS:     # lists begun and never finished
                self.listings.pop(next(iter(self.listings)))
            page["metadata"].update({"continue": token, "remainingItemCount": rest})
        return aiohttp.web.Response(body=orjson.dumps(page), content_type="application/json")

    def _check_version(self, request: kmock.Request, data: Obj) -> None:
        """A write that names a resourceVersion is a compare-and-swap, as on a real
        API server: 409 when the object has changed since that version."""
        sent = (data.get("metadata") or {}).get("resourceVersion")
        if not sent or request.name is None or request.resource is None:
            return
        found = self._objects._objects.get((request.resource, request.namespace, request.name))
        if found is None or found.deleted:
            return
        current = (found.raw.get("metadata") or {}).get("resourceVersion")
        if current is not None and str(sent) != str(current):
            raise kmock.KubernetesError(status=409, reason="Conflict", message=(
                f'Operation cannot be fulfilled on {request.resource.plural} "{request.name}": '
                "the object has been modified; please apply your changes to the latest "
                "version and try again"))


def _now() -> str:
    return to_rfc3339(time.time())


def _status(code: int, reason: str, message: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Status", "status": "Success" if code < 400 else "Failure",
            "code": code, "reason": reason, "message": message}


def install_subresources(emu: ApiServer) -> None:
    """pods/binding and pods/eviction, applied through the emulator's own API so
    that watches see the change (a MODIFIED with spec.nodeName, a DELETED)."""

    def pod_of(request: kmock.Request) -> kmock.Object:
        name = request.name or ""      # the route names one
        key = (kmock.resource(PODS), request.namespace, name)
        if key not in emu.objects or emu.objects[key].deleted:
            raise kmock.KubernetesObjectNotFoundError(
                message=f'pods "{request.name}" not found')
        return emu.objects[key]

    async def bind(request: kmock.Request) -> Obj:
        pod = pod_of(request)
        uid = ((request.data or {}).get("metadata") or {}).get("uid")
        if uid and uid != pod["metadata"].get("uid"):
            raise kmock.KubernetesError(status=409, reason="Conflict", message=(
                f'Operation cannot be fulfilled on pods/binding "{request.name}": '
                f"the UID in the precondition ({uid}) does not match"))
        if (pod.get("spec") or {}).get("nodeName"):
            raise kmock.KubernetesError(status=409, reason="Conflict", message=(
                f'Operation cannot be fulfilled on pods/binding "{request.name}": '
                f'pod {request.name} is already assigned to node "{pod["spec"]["nodeName"]}"'))
        node = request.data["target"]["name"]
        path = f"/api/v1/namespaces/{request.namespace}/pods/{request.name}"
        cond = {"type": "PodScheduled", "status": "True", "lastTransitionTime": _now()}
        async with emu.patch(path, json={"spec": {"nodeName": node}}) as resp:
            assert resp.status == 200, await resp.text()
        async with emu.patch(path + "/status", json={"status": {"conditions": [cond]}}) as resp:
            assert resp.status == 200, await resp.text()
        return _status(201, "", "")

    async def evict(request: kmock.Request) -> Obj:
        pod_of(request)
        path = f"/api/v1/namespaces/{request.namespace}/pods/{request.name}"
        async with emu.delete(path) as resp:
            assert resp.status == 200, await resp.text()
        return _status(201, "", "")

    pods = kmock.resource(PODS)
    emu["post", pods, kmock.subresource("binding")] << 201 << bind
    emu["post", pods, kmock.subresource("eviction")] << 201 << evict


class Emulator:
    """An ApiServer on 127.0.0.1 (an ephemeral port), served from its own thread."""

    def __init__(self, forgetful: bool = False, patience: float = PATIENCE) -> None:
        self.forgetful = forgetful
        self.patience = patience
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="apiserver", daemon=True)
        self._thread.start()
        if not self._ready.wait(self.patience) or self._failure is not None:
            raise RuntimeError(f"the emulator did not start: {self._failure!r}")

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._main())
        except BaseException as exc:        # reported by __init__, which waits for _ready
            self._failure = exc
            self._ready.set()
        finally:
            self.loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        self.buses: collections.defaultdict[Any, kmock.Bus[Any]] = \
            collections.defaultdict(kmock.Bus)
        async with ApiServer(buses=self.buses, forgetful=self.forgetful) as emu, \
                kmock.Server(emu, host="127.0.0.1") as server:
            for key, info in RESOURCES.items():
                emu.resources[key] = info
            install_subresources(emu)
            self.emu = emu
            self.url = str(server.url).rstrip("/")
            self._ready.set()
            await self._stop.wait()

    def call(self, fn: Callable[[], T]) -> T:
        """Run fn on the emulator's loop (where its state may be touched)."""
        async def run() -> T:
            return fn()
        return self.run(run())

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(self.patience)

    def stop(self) -> None:
        def release() -> None:
            for gate in self.emu.gates.values():
                gate.set()
        self.call(release)
        self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(self.patience)

    def preload(self, objects: list[Obj]) -> None:
        """Hold these objects as if created (uids and versions stamped here)."""
        def put() -> None:
            for obj in objects:
                api, kind = obj["apiVersion"], obj["kind"]
                plural = next(k for k, info in RESOURCES.items()
                              if info.kind == kind and k.rsplit("/", 1)[0] == api)
                meta = obj.setdefault("metadata", {})
                meta.setdefault("uid", str(uuid.uuid4()))
                meta.setdefault("creationTimestamp", _now())
                meta["resourceVersion"] = str(next(self.emu._versions))
                self.emu.objects[kmock.resource(plural), meta.get("namespace"), meta["name"]] = obj
        self.call(put)

    def serve(self, *apis: str) -> None:
        """Serve the APIs named (keys of GANG_APIS or CRD_APIS) from now on."""
        def add() -> None:
            for api in apis:
                self.emu.resources.update({**GANG_APIS, **CRD_APIS}[api])
        self.call(add)

    def hold(self, subresource: str) -> None:
        """Requests to the subresource wait from now on, until release()."""
        self.call(lambda: self.emu.gates.setdefault(subresource, asyncio.Event()).clear())

    def release(self, subresource: str) -> None:
        self.call(lambda: self.emu.gates[subresource].set())

    # -- conveniences for tests ------------------------------------------------
    def object(self, resource: str, namespace: str | None, name: str) -> Obj | None:
        def read() -> Obj | None:
            key = (kmock.resource(resource), namespace, name)
            if key not in self.emu.objects or self.emu.objects[key].deleted:
                return None
            return dict(self.emu.objects[key].raw)
        return self.call(read)

    def count(self, *criteria: Any) -> int:
        """How many requests matched the criteria so far."""
        return self.call(lambda: len(self.emu[criteria]))

    def wait_watched(self, *resources: str) -> None:
        """Until a watch of each resource listens. The emulator sends a watch
        only what happens after that (and no resourceVersion resumes it), so a
        test that changes objects behind a watch must wait for it."""
        keys = [kmock.resource(r) for r in resources]
        deadline = time.monotonic() + self.patience
        def watchers(key: Any) -> int:
            return self.call(lambda: self.buses[key].consumer_count)
        while not all(watchers(k) for k in keys):
            assert time.monotonic() < deadline, f"no watch of {resources} connected"
            time.sleep(0.01)


def main() -> None:
    """Serve until standard input closes; the first line printed is the URL.
    An argument names a JSON file of objects to hold from the start (a bench's
    cluster, without thousands of creations over HTTP)."""
    server = Emulator(forgetful=True)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "rb") as f:
            server.preload(orjson.loads(f.read()))
    print(server.url, flush=True)
    sys.stdout = open(os.devnull, "w")      # nobody reads the pipe any more: never block on it
    sys.stdin.read()
    server.stop()


if __name__ == "__main__":
    main()
