"""How a client reaches the API server (an Access): where the server is, how
to trust it, and the credentials a request shows, read from a pod's service
account or from a kubeconfig.

kaisched reads the plain cases itself: a service account, and a kubeconfig
whose user holds a client certificate and key or a bearer token, without a
proxy, an auth provider or a credential command. That is what a scheduler's
pod and an admin's kubeconfig hold, and reading them needs neither the
`kubernetes` client nor urllib3, whose imports (a fifth of a second) would
otherwise come before the first list is asked for. For anything more (an
exec plugin, OIDC, a cloud's auth provider, basic auth, a proxy, several
kubeconfig files merged, a file this reader finds odd) read_access answers
None and kube.py hands the case to the `kubernetes` client's loader, which
stays the reference: where this module answers, it answers as that loader
would (the same context, cluster, user, files and precedence).
"""
from __future__ import annotations

import base64
import binascii
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import attrs
import yaml

from kaisched.cluster.transport import Endpoint

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# A service account's token is projected and rotated by the kubelet: read
# again after this long, as the kubernetes clients do.
TOKEN_REFRESH_SECONDS = 60.0

# The headers that authenticate one request, as they are now (a rotated
# token is read again when due).
Credentials = Callable[[], Mapping[str, str]]


def anonymous() -> Mapping[str, str]:
    return {}


@attrs.frozen
class Access:
    """What a client needs to reach the API server."""

    endpoint: Endpoint
    credentials: Credentials = attrs.field(default=anonymous, eq=False)
    proxy: str | None = None            # an HTTP proxy's URL (kubeconfig's proxy-url)
    proxy_headers: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen
class BearerToken:
    """A token written in the kubeconfig (or read once from its tokenFile, as
    kubectl's loader in Python does)."""

    header: str                         # the whole value: "Bearer <token>"

    def __call__(self) -> Mapping[str, str]:
        return {"Authorization": self.header}


class TokenFile:
    """A token read from a file and read again every TOKEN_REFRESH_SECONDS
    (a service account's, which the kubelet rotates)."""

    def __init__(self, path: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._header = ""
        self._read_at = -TOKEN_REFRESH_SECONDS

    def read(self) -> str:
        """The token now in the file (OSError when it cannot be read)."""
        with open(self.path, encoding="utf-8") as f:
            # Trailing whitespace (a newline an editor left) is no part of a
            # token, and would make the header invalid.
            return f.read().strip()

    def __call__(self) -> Mapping[str, str]:
        with self._lock:
            now = self._clock()
            if now - self._read_at >= TOKEN_REFRESH_SECONDS:
                try:
                    token = self.read()
                except (OSError, ValueError):   # mid-rotation, or not text
                    token = ""          # kept: the last token read stays in use
                if token:
                    self._header = f"Bearer {token}"
                self._read_at = now
            return {"Authorization": self._header} if self._header else {}


def read_access(kubeconfig: str | None, context: str | None,
                environ: Mapping[str, str] = os.environ,
                service_account: Path = SERVICE_ACCOUNT) -> Access | None:
    """The Access a client finds as kubectl does (with neither named: the pod's
    service account when in a pod, else $KUBECONFIG or ~/.kube/config), when
    its case is plain; None for every other case (see the module)."""
    if kubeconfig is None and context is None:
        found = _in_cluster(environ, service_account)
        if found is not _NOT_IN_A_POD:
            return found if isinstance(found, Access) else None
    path = kubeconfig if kubeconfig is not None else _default_kubeconfig(environ)
    return _from_kubeconfig(path, context) if path is not None else None


_NOT_IN_A_POD = object()


def _in_cluster(environ: Mapping[str, str], account: Path) -> Access | object | None:
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        return _NOT_IN_A_POD
    token, ca_file = TokenFile(str(account / "token")), account / "ca.crt"
    try:
        # What the kubernetes loader takes for "not in a pod" too: files
        # missing or empty (it then reads the default kubeconfig).
        if not Path(token.path).is_file() or not ca_file.is_file() or not token.read() \
                or not ca_file.read_bytes():
            return _NOT_IN_A_POD
    except (OSError, ValueError):       # unreadable, or not text: the library's to say
        return None
    # As Go's net.JoinHostPort: an IPv6 address in brackets.
    where = f"[{host}]:{port}" if ":" in host or "%" in host else f"{host}:{port}"
    return Access(Endpoint(f"https://{where}", ca_file=str(ca_file)), credentials=token)


def _default_kubeconfig(environ: Mapping[str, str]) -> str | None:
    paths = environ.get("KUBECONFIG")
    if paths is None:
        return os.path.expanduser("~/.kube/config")
    if not paths or os.pathsep in paths:
        return None                 # several files merged (or none): the library's loader
    return os.path.expanduser(paths)


def _from_kubeconfig(path: str, context: str | None) -> Access | None:
    try:
        with open(path, "rb") as f:
            doc = yaml.load(f, Loader=_LOADER)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if not isinstance(doc, dict):
        return None
    try:
        return _plain(doc, os.path.dirname(os.path.abspath(path)), context)
    except _NotPlain:
        return None


class _NotPlain(Exception):
    """The kubeconfig asks for more than this module reads, or is odd: the
    library's loader takes it (and says what is wrong, if anything)."""


def _plain(doc: dict[str, Any], base: str, context: str | None) -> Access:
    name = context if context is not None else doc.get("current-context")
    ctx = _entry(doc.get("contexts"), name, "context")
    if ctx is None:
        raise _NotPlain
    user = _entry(doc.get("users"), ctx.get("user"), "user") \
        if ctx.get("user") and doc.get("users") else None
    cluster = _entry(doc.get("clusters"), ctx.get("cluster"), "cluster")
    if cluster is None or "proxy-url" in cluster:
        raise _NotPlain
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        raise _NotPlain
    host = server.rstrip("/")
    credentials = _credentials(user or {}, base)
    ca_file = ca_data = cert_file = cert_data = key_file = key_data = None
    if host.startswith("https"):
        ca_file, ca_pem = _file_or_data(cluster, "certificate-authority", base)
        ca_data = _certificates(ca_pem)
        cert_file, cert_data = _file_or_data(user or {}, "client-certificate", base)
        key_file, key_data = _file_or_data(user or {}, "client-key", base)
    insecure = cluster.get("insecure-skip-tls-verify", False)
    if not isinstance(insecure, bool):
        raise _NotPlain
    server_name = cluster.get("tls-server-name")
    if server_name is not None and not isinstance(server_name, str):
        raise _NotPlain
    return Access(Endpoint(host, ca_file=ca_file, ca_data=ca_data, cert_file=cert_file,
                           cert_data=cert_data, key_file=key_file, key_data=key_data,
                           verify=not insecure, server_name=server_name),
                  credentials=credentials)


def _entry(entries: object, name: object, key: str) -> dict[str, Any] | None:
    """The first entry of a kubeconfig list with that name (as the loader
    merges one file: the first of a name wins), its inner mapping."""
    if name is None or not isinstance(entries, list):
        return None
    for entry in entries:
        if not isinstance(entry, dict) or "name" not in entry:
            raise _NotPlain
        if entry["name"] == name:
            inner = entry.get(key)
            if not isinstance(inner, dict):
                raise _NotPlain
            return inner
    return None


def _credentials(user: dict[str, Any], base: str) -> Credentials:
    # The loader's order: an auth provider, then a token, then a command, then basic auth.
    if "auth-provider" in user:
        raise _NotPlain
    if "token" in user:
        token = user["token"]
    elif "tokenFile" in user:
        try:
            with open(os.path.normpath(os.path.join(base, str(user["tokenFile"]))),
                      encoding="utf-8") as f:
                token = f.read().strip()       # (a trailing newline is no part of it)
        except (OSError, UnicodeDecodeError):
            raise _NotPlain from None
    else:
        token = None
    if token:
        if not isinstance(token, str):
            raise _NotPlain
        return BearerToken(f"Bearer {token}")
    if "exec" in user or ("username" in user and "password" in user):
        raise _NotPlain
    return anonymous


def _file_or_data(obj: dict[str, Any], key: str, base: str) -> tuple[str | None, bytes | None]:
    """A file the kubeconfig names (relative to its folder) or the data it
    holds (base64, `<key>-data`, first when both are there)."""
    data_key = f"{key}-data"
    if data_key in obj:
        data = obj[data_key]
        if not data:
            return None, None
        if not isinstance(data, str):
            raise _NotPlain
        try:
            return None, base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise _NotPlain from None
    if key in obj:
        if not isinstance(obj[key], str):
            raise _NotPlain
        path = os.path.normpath(os.path.join(base, obj[key]))
        if not os.path.isfile(path):
            raise _NotPlain
        return path, None
    return None, None


def _certificates(data: bytes | None) -> str | bytes | None:
    """A CA's certificates as ssl takes them: PEM as text, DER as bytes."""
    if data is None:
        return None
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        return data
    return text if "-----BEGIN" in text else data


_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
