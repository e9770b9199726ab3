"""The ClusterClient of a real cluster, through the `kubernetes` client's
ApiClient: raw JSON parsed with orjson, never the client's model classes
(they cost more than the scheduling), and watches in background threads (watch.py).

The only module of kaisched that imports `kubernetes`.
"""
from __future__ import annotations

import builtins
import logging
import re
from concurrent.futures import Future
from typing import Any, Iterable, Iterator, Sequence, TypedDict
from urllib.parse import quote

import orjson
import urllib3
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from kaisched.cluster import collector
from kaisched.cluster.background import in_background
from kaisched.cluster.client import Obj
from kaisched.cluster.kinds import POD, Kind, kind_of, object_key
from kaisched.cluster.reachability import Reachability
from kaisched.cluster.transport import ConnectionLost, Endpoint, Transport
from kaisched.cluster.watch import KubeSubscription
from kaisched.errors import (
    ApiError,
    ConfigError,
    ConflictError,
    GoneError,
    MissingConfigFile,
    NotFoundError,
    PermanentApiError,
    TransientApiError,
    UnreachableError,
)

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
PAGE_SIZE = 500                 # as client-go's informers: bounded responses, few round trips
CONNECT_TIMEOUT = 5.0
# Connections besides the binders': one watch per kind, the Lease, a few reads.
SPARE_CONNECTIONS = 12
Query = Sequence[tuple[str, str]]


class WatchOptions(TypedDict):
    """What every subscription is given (KubeSubscription's keywords)."""

    watch_timeout: int
    backoff: float
    max_backoff: float
    missing_retry: float


def load_configuration(kubeconfig: str | None = None,
                       context: str | None = None) -> k8s_client.Configuration:
    """The in-cluster config when no kubeconfig (nor context) is named, else the
    kubeconfig, as kubectl finds it. Any failure is one ConfigError sentence."""
    cfg = k8s_client.Configuration()
    if kubeconfig is None and context is None:
        try:
            k8s_config.load_incluster_config(client_configuration=cfg)
            return cfg
        except k8s_config.ConfigException:
            pass                # not in a pod: the default kubeconfig, as kubectl would
    if kubeconfig is not None:
        _check_kubeconfig(kubeconfig)
        failed = f"cannot load kubeconfig {kubeconfig}"
    else:
        failed = "cannot load the default kubeconfig ($KUBECONFIG or ~/.kube/config)"
        if context is None:
            failed = f"not running in a cluster, and {failed}"
    try:
        # persist_config=False: a scheduler never rewrites the user's kubeconfig.
        k8s_config.load_kube_config(config_file=kubeconfig, context=context,
                                    client_configuration=cfg, persist_config=False)
    except (k8s_config.ConfigException, yaml.YAMLError, OSError, ValueError, TypeError,
            KeyError, AttributeError) as exc:
        reason = " ".join(str(exc).split()) or exc.__class__.__name__
        raise ConfigError(f"{failed}: {reason}") from None
    return cfg


def _check_kubeconfig(path: str) -> None:
    """What the kubernetes loader reports badly (a missing file, not a mapping)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except FileNotFoundError:
        raise MissingConfigFile(f"kubeconfig {path} does not exist") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        reason = " ".join(str(exc).split()) or exc.__class__.__name__
        raise ConfigError(f"cannot load kubeconfig {path}: {reason}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"cannot load kubeconfig {path}: it is not a YAML mapping "
                          "(apiVersion, clusters, users, contexts)")


class KubeCluster:
    """Implements ClusterClient against an API server.

    timeout: seconds for one request to be answered; connect_timeout: seconds
    to open a connection; watch_timeout: the timeoutSeconds of one
    watch (the server ends it, the thread re-watches); backoff/max_backoff:
    the delays between failed watches; missing_retry: how often a kind the
    server does not serve (a CRD not installed) is looked for again;
    workers: how many requests the binder sends at once (the HTTP pool is sized
    for them, the watches and the Lease); health: shared by clients of one server.
    """

    def __init__(self, kubeconfig: str | None = None, *, context: str | None = None,
                 api_client: k8s_client.ApiClient | None = None, timeout: float = 30.0,
                 connect_timeout: float = CONNECT_TIMEOUT, watch_timeout: int = 60,
                 backoff: float = 0.5, max_backoff: float = 8.0,
                 missing_retry: float = 300.0, workers: int = 8,
                 health: Reachability | None = None, transport: Transport | None = None) -> None:
        if api_client is None:
            cfg = load_configuration(kubeconfig, context)
            api_client = k8s_client.ApiClient(_pooled(cfg, workers))
        if transport is None:
            transport = _transport(api_client.configuration, workers, connect_timeout)
        # urllib3 logs every retry of every request at WARNING (a dozen lines per
        # failed bind during an outage); Reachability says it once instead.
        logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
        self.api = api_client
        self.transport = transport      # None: every request through urllib3 (a proxy)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.health = health or Reachability()
        self.watch_options = WatchOptions(watch_timeout=watch_timeout, backoff=backoff,
                                          max_backoff=max_backoff, missing_retry=missing_retry)
        self._subscriptions: list[KubeSubscription] = []
        # The first lists started before anyone subscribed (prefetch): kinds, their subscription.
        self._prefetched: tuple[tuple[Kind, ...], Future[KubeSubscription]] | None = None

    @classmethod
    def at(cls, url: str, workers: int = 8, **options: Any) -> "KubeCluster":
        """A client of an unauthenticated server at url (an emulator, a proxy)."""
        cfg = k8s_client.Configuration(host=url)
        return cls(api_client=k8s_client.ApiClient(_pooled(cfg, workers)), workers=workers,
                   **options)

    def with_timeout(self, timeout: float) -> "KubeCluster":
        """The same connection pool and health, with another request timeout (the
        Lease's renewals must give up well within the renew deadline)."""
        other = KubeCluster(api_client=self.api, timeout=timeout,
                            connect_timeout=self.connect_timeout, health=self.health,
                            transport=self.transport)
        other.watch_options = self.watch_options
        return other

    def watching(self) -> bool:
        """True while every watch of this client is connected (or none runs)."""
        return all(sub.healthy for sub in self._subscriptions)

    def close(self) -> None:
        """Stop every watch this client started (the ApiClient is the caller's)."""
        self._early_lists(())           # lists started and never asked for: stopped too
        for sub in self._subscriptions:
            sub.close()
        self._subscriptions.clear()
        if self.transport is not None:
            self.transport.close()      # its idle connections (a later request opens one)

    # -- reading ---------------------------------------------------------------
    def list(self, kind: Kind, namespace: str | None = None) -> list[Obj]:
        items, _ = self.list_with_version(kind, namespace)
        return sorted(items, key=object_key)

    def list_with_version(self, kind: Kind, namespace: str | None = None, *, cached: bool = False
                          ) -> tuple[builtins.list[Obj], str]:   # list: the method above
        """Every object (page by page) and the resourceVersion to watch from.
        cached: from the API server's watch cache (resourceVersion 0, as an
        informer's first list), not a quorum read of etcd page by page."""
        # Paused for the whole list, not page by page: between pages the
        # collector would walk all that the pages before brought (a full
        # collection each time their count grows by a quarter).
        with collector.paused():
            return self._pages(kind, namespace, cached)

    def _pages(self, kind: Kind, namespace: str | None, cached: bool
               ) -> tuple[builtins.list[Obj], str]:
        items: list[Obj] = []
        token = ""
        while True:
            query = [("limit", str(PAGE_SIZE))] + ([("continue", token)] if token else [])
            if cached and not token:
                query.append(("resourceVersion", "0"))
            query += _selected(kind)
            page = self._call("list", kind, f"in {namespace}" if namespace else "", "GET",
                              _path(kind, namespace), query=query)
            for item in page.get("items") or ():
                # List items carry no apiVersion/kind; consumers expect them. The
                # dicts were parsed just now and are not shared yet, so set in place.
                item["apiVersion"], item["kind"] = kind.api_version, kind.kind
                items.append(item)
            meta = page.get("metadata") or {}
            token = meta.get("continue") or ""
            if not token:
                return items, str(meta.get("resourceVersion") or "")

    def count(self, kind: Kind) -> int | None:
        """How many objects of the kind there are, from a list of one: the API
        server says how many remain (None when it does not say)."""
        page = self._call("list", kind, "", "GET", _path(kind), query=[("limit", "1")])
        meta = page.get("metadata") or {}
        items = len(page.get("items") or ())
        remaining = meta.get("remainingItemCount")
        if isinstance(remaining, int):
            return items + remaining
        return None if meta.get("continue") else items

    def get(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        return self._call("get", kind, _where(kind, namespace, name), "GET",
                          _path(kind, namespace, name), missing_ok=True)

    # -- writing ---------------------------------------------------------------
    def create(self, obj: Obj) -> Obj:
        kind = kind_of(obj)
        meta = obj.get("metadata") or {}
        namespace = (meta.get("namespace") or "default") if kind.namespaced else ""
        name = meta.get("name") or f"{meta.get('generateName', '')}*"
        return self._call("create", kind, _where(kind, namespace, name), "POST",
                          _path(kind, namespace), body=obj)

    def patch(self, kind: Kind, namespace: str, name: str, patch: Obj) -> Obj:
        # status goes through patch_status only, as the status subresource demands.
        body = {k: v for k, v in patch.items() if k != "status"}
        return self._call("patch", kind, _where(kind, namespace, name), "PATCH",
                          _path(kind, namespace, name), body=body, content_type=MERGE_PATCH)

    def patch_status(self, kind: Kind, namespace: str, name: str, status: Obj) -> Obj:
        return self._call("patch status of", kind, _where(kind, namespace, name), "PATCH",
                          _path(kind, namespace, name, "status"), body={"status": status},
                          content_type=MERGE_PATCH)

    def delete(self, kind: Kind, namespace: str, name: str, propagation: str = "") -> None:
        """propagation: the DeleteOptions' propagationPolicy (Background, Foreground,
        Orphan); the kind's own default when empty (Orphan for a batch/v1 Job)."""
        body = ({"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
                if propagation else None)
        self._call("delete", kind, _where(kind, namespace, name), "DELETE",
                   _path(kind, namespace, name), body=body)

    def delete_all(self, kind: Kind, namespace: str | None = None, label_selector: str = "",
                   grace_seconds: int | None = None) -> None:
        """Delete every object of the kind (in the namespace, with the labels):
        one request. grace_seconds 0 deletes pods at once, as where no kubelet
        would confirm a graceful delete."""
        query = [("labelSelector", label_selector)] if label_selector else []
        body = {"apiVersion": "v1", "kind": "DeleteOptions",
                **({"gracePeriodSeconds": grace_seconds} if grace_seconds is not None else {})}
        self._call("delete all", kind, f"in {namespace}" if namespace else "", "DELETE",
                   _path(kind, namespace), query=query, body=body)

    # -- subresources ----------------------------------------------------------
    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        meta = {"name": name, "namespace": namespace, **({"uid": uid} if uid else {})}
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        self._call("bind", POD, f"{namespace}/{name} to {node}", "POST",
                   _path(POD, namespace, name, "binding"), body=body)

    def evict(self, namespace: str, name: str) -> None:
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace}}
        self._call("evict", POD, f"{namespace}/{name}", "POST",
                   _path(POD, namespace, name, "eviction"), body=body)

    # -- watching --------------------------------------------------------------
    def subscribe(self, kinds: Iterable[Kind]) -> KubeSubscription:
        kinds = tuple(kinds)
        early = self._early_lists(kinds)
        sub = early if early is not None else KubeSubscription(self, kinds, **self.watch_options)
        self._subscriptions.append(sub)
        return sub

    def prefetch(self, kinds: Iterable[Kind]) -> None:
        """Start the first lists of kinds now, on a thread of their own: the
        subscribe() that asks for the same kinds takes the subscription they
        made, or raises what stopped them, as it would have itself. A process
        that lists at start does its other work (imports) meanwhile."""
        kinds = tuple(kinds)
        self._prefetched = (kinds, in_background(
            lambda: KubeSubscription(self, kinds, **self.watch_options), "first-lists"))

    def _early_lists(self, kinds: tuple[Kind, ...]) -> KubeSubscription | None:
        early, self._prefetched = self._prefetched, None
        if early is None:
            return None
        asked, made = early
        if asked == kinds:
            return made.result()        # or raises what stopped the lists
        if made.exception() is None:
            made.result().close()       # listed for nothing: another set of kinds is wanted
        return None

    def watch_stream(self, kind: Kind, resource_version: str, timeout: int) -> "_Stream":
        query = [("watch", "true"), ("allowWatchBookmarks", "true"),
                 ("timeoutSeconds", str(timeout))]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        query += _selected(kind)
        what = f"watch {kind.kind}"
        # The server ends the watch after timeoutSeconds; a connection silent for
        # longer than that (plus slack) is dead, and the read timeout says so.
        resp = self._send(what, "GET", _path(kind), query, None, JSON, timeout + 15.0)
        if not 200 <= resp.status < 300:
            raise api_error(resp.status, what, _read(resp, what))
        return _Stream(resp, what)

    # -- the wire --------------------------------------------------------------
    def _call(self, verb: str, kind: Kind, where: str, method: str, path: str, *,
              query: Query = (), body: Obj | None = None, content_type: str = JSON,
              missing_ok: bool = False) -> Any:
        what = f"{verb} {kind.kind} {where}".rstrip()
        status, data = self._exchange(what, method, path, query, body, content_type)
        if 200 <= status < 300:
            try:
                return orjson.loads(data) if data else {}
            except orjson.JSONDecodeError:      # a proxy's page, a cut-off answer
                raise TransientApiError(f"{what}: the answer is not JSON: {data[:100]!r}",
                                        status) from None
        if status == 404 and missing_ok:
            return None
        raise api_error(status, what, data)

    def _exchange(self, what: str, method: str, path: str, query: Query, body: Obj | None,
                  content_type: str) -> tuple[int, bytes]:
        """The status and body of a request that is not a watch."""
        if self.transport is None:
            resp = self._send(what, method, path, query, body, content_type, self.timeout)
            return resp.status, _read(resp, what)
        # The client's own header and query building: its auth (a token, and
        # the hook that refreshes one) applies as to every other request.
        method, url, headers, _, _ = self.api.param_serialize(
            method, path, query_params=list(query),
            header_params={"Accept": JSON, "Content-Type": content_type},
            auth_settings=["BearerToken"])
        target = url[len(self.api.configuration.host):]
        try:
            answer = self.transport.request(method, target, headers,
                                            orjson.dumps(body) if body is not None else None,
                                            self.timeout)
        except ConnectionLost as exc:
            raise self._unreachable(what, exc.cause) from None
        self.health.answered()
        return answer

    def _send(self, what: str, method: str, path: str, query: Query, body: Obj | None,
              content_type: str, timeout: float) -> Any:
        """The urllib3 response, body unread (_preload_content=False)."""
        headers = {"Accept": JSON, "Content-Type": content_type}
        limits = (self.connect_timeout, timeout)
        try:
            # The body is not handed to param_serialize: it would walk it for
            # model objects; the REST layer encodes the plain dict itself.
            method, url, headers, _, _ = self.api.param_serialize(
                method, path, query_params=list(query), header_params=headers,
                auth_settings=["BearerToken"])
            resp = self.api.call_api(method, url, header_params=headers, body=body,
                                     _request_timeout=limits).response
        except ApiException as exc:
            if exc.status:
                self.health.answered()
                raise api_error(exc.status, what, exc.body or b"") from None
            raise self._unreachable(what, str(exc.reason)) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise self._unreachable(what, _cause(exc)) from None
        self.health.answered()
        return resp

    def _unreachable(self, what: str, cause: str) -> UnreachableError:
        cause = f"{self.api.configuration.host}: {cause}"
        self.health.failed(cause)
        return UnreachableError(f"{what}: cannot reach the API server {cause}")


def _transport(cfg: k8s_client.Configuration, workers: int,
               connect_timeout: float) -> Transport | None:
    """http.client's connections to the configuration's server; None when it
    is reached through a proxy (urllib3 then carries every request)."""
    if cfg.proxy:
        return None
    server_name = cfg.tls_server_name or (cfg.assert_hostname
                                          if isinstance(cfg.assert_hostname, str) else None)
    endpoint = Endpoint(cfg.host, ca_file=cfg.ssl_ca_cert, ca_data=cfg.ca_cert_data,
                        cert_file=cfg.cert_file, key_file=cfg.key_file,
                        verify=bool(cfg.verify_ssl), check_name=cfg.assert_hostname is not False,
                        server_name=server_name)
    return Transport(endpoint, workers + SPARE_CONNECTIONS, connect_timeout)


def _pooled(cfg: k8s_client.Configuration, workers: int) -> k8s_client.Configuration:
    # A pooled connection per request in flight: more would be opened and
    # thrown away on every burst of binds (urllib3 says "pool is full").
    cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0,
                                      workers + SPARE_CONNECTIONS)
    # One quick retry for a pooled connection the server closed; beyond that
    # our own backoff decides, within its time budget.
    cfg.retries = 1
    return cfg


class _Stream:
    """The lines of a chunked watch response, as they arrive."""

    def __init__(self, resp: Any, what: str) -> None:
        self.resp = resp
        self.what = what
        self.closed = False

    def lines(self) -> Iterator[bytes]:
        pending: list[bytes] = []
        try:
            for chunk in self.resp.stream(amt=None, decode_content=True):
                parts = chunk.split(b"\n")
                if len(parts) == 1:
                    pending.append(chunk)       # part of a long line
                    continue
                pending.append(parts[0])
                yield b"".join(pending)
                yield from parts[1:-1]
                pending = [parts[-1]]
        except urllib3.exceptions.ReadTimeoutError:
            return                              # silent past timeoutSeconds: re-watch
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if not self.closed:
                raise UnreachableError(f"{self.what}: connection dropped: {_cause(exc)}") from None
        if pending and not self.closed:
            yield b"".join(pending)

    def interrupt(self) -> None:
        """From another thread: unblock the read. shutdown() needs urllib3 >= 2.3;
        without it the reader ends at its read timeout."""
        self.closed = True
        shutdown = getattr(self.resp, "shutdown", None)
        if shutdown is None:
            return
        try:
            shutdown()
        except (OSError, ValueError, RuntimeError):
            pass        # the reader closed it meanwhile: there is nothing left to unblock

    def close(self) -> None:
        self.closed = True
        self.resp.close()
        self.resp.release_conn()


def _read(resp: Any, what: str) -> bytes:
    try:
        data = resp.data
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise UnreachableError(f"{what}: connection dropped: {_cause(exc)}") from None
    finally:
        resp.release_conn()
    return data.encode() if isinstance(data, str) else (data or b"")


_POOL_PREFIX = re.compile(r"^\w+\((host=)?[^)]*\): ")


def _cause(exc: BaseException) -> str:
    """The root of a urllib3 error in a few words: "Failed to establish a new
    connection: [Errno 111] Connection refused", not three nested reprs."""
    reason = getattr(exc, "reason", None)
    while isinstance(reason, BaseException):
        exc, reason = reason, getattr(reason, "reason", None)
    text = _POOL_PREFIX.sub("", " ".join(str(exc).split())) or exc.__class__.__name__
    if "object at 0x" in text:
        text = text.split(">: ", 1)[-1]
    return text[:200]


def api_error(status: int, what: str, data: str | bytes) -> ApiError:
    """The errors-hierarchy exception of an HTTP status, with the API's own message."""
    message = _status_message(data) or f"HTTP {status}"
    text = f"{what}: {message} (HTTP {status})"
    if status == 404:
        return NotFoundError(text)
    if status == 409:
        return ConflictError(text)
    if status == 410:
        return GoneError(text)
    if status == 429 or status >= 500:
        return TransientApiError(text, status)
    return PermanentApiError(text, status)


def _status_message(data: str | bytes) -> str:
    try:
        status = orjson.loads(data)
    except orjson.JSONDecodeError:
        text = data[:200] if isinstance(data, str) else data[:200].decode(errors="replace")
        return " ".join(text.split())
    if isinstance(status, dict):
        return str(status.get("message") or status.get("reason") or "")
    return ""


def _path(kind: Kind, namespace: str | None = None, name: str = "", sub: str = "") -> str:
    base = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
    if kind.namespaced and namespace:
        base += f"/namespaces/{quote(namespace, safe='')}"
    base += f"/{kind.plural}"
    if name:
        base += f"/{quote(name, safe='')}"
    return f"{base}/{sub}" if sub else base


def _selected(kind: Kind) -> list[tuple[str, str]]:
    return [("fieldSelector", kind.field_selector)] if kind.field_selector else []


def _where(kind: Kind, namespace: str, name: str) -> str:
    return f"{namespace}/{name}" if kind.namespaced and namespace else name
