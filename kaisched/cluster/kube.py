"""The ClusterClient of a real cluster: requests and watches over the standard
library's http.client (transport.py), raw JSON parsed with orjson, watches in
background threads (watch.py).

The only module of kaisched that imports `kubernetes`, and only for what
kaisched does not read itself (access.py): a kubeconfig with a credential
plugin, an auth provider, a proxy or several files merged is loaded by the
client's own loader, whose credentials (a token it refreshes) every request
then shows. A plain kubeconfig or a pod's service account never imports it.
"""
from __future__ import annotations

import builtins
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence, TypedDict
from urllib.parse import quote, urlencode

import orjson
import yaml

from kaisched import __version__
from kaisched.cluster import collector
from kaisched.cluster.access import Access, read_access
from kaisched.cluster.background import in_background
from kaisched.cluster.client import Obj
from kaisched.cluster.kinds import POD, Kind, kind_of, object_key
from kaisched.cluster.reachability import Reachability
from kaisched.cluster.transport import ConnectionLost, Endpoint, Stream, Transport
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

if TYPE_CHECKING:
    from kubernetes.client import ApiClient, Configuration

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
PAGE_SIZE = 500                 # as client-go's informers: bounded responses, few round trips
CONNECT_TIMEOUT = 5.0
# Connections besides the binders': the Lease, a few reads (each watch has its own).
SPARE_CONNECTIONS = 12
USER_AGENT = f"kaisched/{__version__}"
Query = Sequence[tuple[str, str]]


class WatchOptions(TypedDict):
    """What every subscription is given (KubeSubscription's keywords)."""

    watch_timeout: int
    backoff: float
    max_backoff: float
    missing_retry: float


def load_access(kubeconfig: str | None = None, context: str | None = None) -> Access:
    """How to reach the cluster, found as kubectl finds it (load_configuration):
    read by kaisched when plain (access.py), else by the `kubernetes` client's
    loader. Any failure is one ConfigError sentence."""
    found = read_access(kubeconfig, context)
    return found if found is not None else access_of(load_configuration(kubeconfig, context))


def access_of(cfg: Configuration) -> Access:
    """The Access of the `kubernetes` client's configuration: its server, TLS
    files and proxy, and its credentials as the client shows them (a token it
    refreshes, by its own hook, when one is due)."""
    server_name = cfg.tls_server_name or (cfg.assert_hostname
                                          if isinstance(cfg.assert_hostname, str) else None)
    endpoint = Endpoint(cfg.host, ca_file=cfg.ssl_ca_cert, ca_data=cfg.ca_cert_data,
                        cert_file=cfg.cert_file, key_file=cfg.key_file,
                        verify=bool(cfg.verify_ssl), check_name=cfg.assert_hostname is not False,
                        server_name=server_name)

    def credentials() -> Mapping[str, str]:
        settings: Mapping[str, Any] = cfg.auth_settings()
        return {auth["key"]: auth["value"] for auth in settings.values()
                if auth.get("in") == "header" and auth.get("value")}

    return Access(endpoint, credentials, cfg.proxy or None, dict(cfg.proxy_headers or {}))


def load_configuration(kubeconfig: str | None = None,
                       context: str | None = None) -> Configuration:
    """The `kubernetes` client's configuration: the in-cluster config when no
    kubeconfig (nor context) is named, else the kubeconfig, as kubectl finds
    it. Any failure is one ConfigError sentence."""
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config

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

    access: how to reach it (default: found as kubectl finds it, from
    kubeconfig and context; api_client: a `kubernetes` client's, whose
    configuration says); timeout: seconds for one request to be answered;
    connect_timeout: seconds to open a connection; watch_timeout: the
    timeoutSeconds of one watch (the server ends it, the thread re-watches);
    backoff/max_backoff: the delays between failed watches; missing_retry: how
    often a kind the server does not serve (a CRD not installed) is looked for
    again; workers: how many requests the binder sends at once (the pool keeps
    a connection for each, and for the Lease); health: shared by clients of
    one server.
    """

    def __init__(self, kubeconfig: str | None = None, *, context: str | None = None,
                 access: Access | None = None, api_client: ApiClient | None = None,
                 timeout: float = 30.0, connect_timeout: float = CONNECT_TIMEOUT,
                 watch_timeout: int = 60, backoff: float = 0.5, max_backoff: float = 8.0,
                 missing_retry: float = 300.0, workers: int = 8,
                 health: Reachability | None = None, transport: Transport | None = None) -> None:
        if access is None:
            access = access_of(api_client.configuration) if api_client is not None \
                else load_access(kubeconfig, context)
        if transport is None:
            try:
                transport = Transport(access.endpoint, workers + SPARE_CONNECTIONS,
                                      connect_timeout, access.proxy, access.proxy_headers)
            except (ValueError, OSError, UnicodeError) as exc:   # a URL, a proxy, a certificate
                raise ConfigError(f"cannot reach the API server {access.endpoint.url}: "
                                  f"{' '.join(str(exc).split())}") from None
        self.access = access
        self.transport = transport
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
        return cls(access=Access(Endpoint(url)), workers=workers, **options)

    def with_timeout(self, timeout: float) -> "KubeCluster":
        """The same connection pool and health, with another request timeout (the
        Lease's renewals must give up well within the renew deadline)."""
        other = KubeCluster(access=self.access, timeout=timeout,
                            connect_timeout=self.connect_timeout, health=self.health,
                            transport=self.transport)
        other.watch_options = self.watch_options
        return other

    def watching(self) -> bool:
        """True while every watch of this client is connected (or none runs)."""
        return all(sub.healthy for sub in self._subscriptions)

    def close(self) -> None:
        """Stop every watch this client started, and close its idle connections
        (a later request opens one)."""
        self._early_lists(())           # lists started and never asked for: stopped too
        for sub in self._subscriptions:
            sub.close()
        self._subscriptions.clear()
        self.transport.close()

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

    def watch_stream(self, kind: Kind, resource_version: str, timeout: int) -> "_Watch":
        query = [("watch", "true"), ("allowWatchBookmarks", "true"),
                 ("timeoutSeconds", str(timeout))]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        query += _selected(kind)
        what = f"watch {kind.kind}"
        # The server ends the watch after timeoutSeconds; a connection silent for
        # longer than that (plus slack) is dead, and the read timeout says so.
        stream = self._stream(what, _path(kind), query, timeout + 15.0)
        self.health.answered()
        if not 200 <= stream.status < 300:
            raise api_error(stream.status, what, stream.read())
        return _Watch(stream, what)

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
        try:
            answer = self.transport.request(method, _target(path, query),
                                            self._headers(content_type),
                                            orjson.dumps(body) if body is not None else None,
                                            self.timeout)
        except ConnectionLost as exc:
            raise self._unreachable(what, exc.cause) from None
        self.health.answered()
        return answer

    def _stream(self, what: str, path: str, query: Query, timeout: float) -> Stream:
        """A watch's answer, its body unread."""
        try:
            return self.transport.stream(_target(path, query), self._headers(JSON), timeout)
        except ConnectionLost as exc:
            raise self._unreachable(what, exc.cause) from None

    def _headers(self, content_type: str) -> dict[str, str]:
        # The credentials asked for at each request: a token due is refreshed.
        return {"Accept": JSON, "Content-Type": content_type, "User-Agent": USER_AGENT,
                **self.access.credentials()}

    def _unreachable(self, what: str, cause: str) -> UnreachableError:
        cause = f"{self.access.endpoint.url}: {cause}"
        self.health.failed(cause)
        return UnreachableError(f"{what}: cannot reach the API server {cause}")


class _Watch:
    """A watch's lines (the WatchStream of watch.py) over a Stream: a dropped
    connection is said as the scheduler's errors say it."""

    def __init__(self, stream: Stream, what: str) -> None:
        self.stream = stream
        self.what = what

    def lines(self) -> Iterator[bytes]:
        try:
            yield from self.stream.lines()
        except ConnectionLost as exc:
            raise UnreachableError(f"{self.what}: connection dropped: {exc.cause}") from None

    def interrupt(self) -> None:
        self.stream.interrupt()

    def close(self) -> None:
        self.stream.close()


def _target(path: str, query: Query) -> str:
    return f"{path}?{urlencode(query, quote_via=quote)}" if query else path


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
