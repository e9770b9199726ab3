"""Short requests to the API server over keep-alive connections of the
standard library's http.client, one request at a time on each.

Every request but a watch goes this way: binds above all, thousands a second
when a cycle places a big gang. urllib3 (under the `kubernetes` client) spends
about 0.4 ms of CPU on one request to a loopback server, http.client about 0.2
ms: on a machine whose cores the API server shares, what the client does not
burn the server gets. Watches keep urllib3's streaming (kube.py).
"""
from __future__ import annotations

import http.client
import queue
import socket
import ssl
from typing import Mapping
from urllib.parse import urlsplit

import attrs

# How a kept connection the server closed while it was idle fails: on the
# first write or the first read, before any answer.
_CLOSED_BY_SERVER = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
                     ssl.SSLEOFError, ssl.SSLZeroReturnError)


@attrs.frozen
class Endpoint:
    """Where the API server is and how to trust it (from a kubeconfig)."""

    url: str                         # https://host:port[/prefix]
    ca_file: str | None = None
    ca_data: str | bytes | None = None   # the CA's certificates themselves (PEM or DER)
    cert_file: str | None = None
    key_file: str | None = None
    verify: bool = True              # its certificate is checked at all
    check_name: bool = True          # ... and the name it is for
    server_name: str | None = None   # that name, if not the host's


class ConnectionLost(Exception):
    """The request's connection failed: no answer was read (cause: why, in a few words)."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


class Transport:
    """A pool of connections to one server, each used by one request at a
    time; at most `size` are kept idle between requests (more may be opened
    by a burst, and closed after it)."""

    def __init__(self, endpoint: Endpoint, size: int, connect_timeout: float) -> None:
        parts = urlsplit(endpoint.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {endpoint.url}")
        self.secure = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.secure else 80)
        self.prefix = parts.path.rstrip("/")
        self.connect_timeout = connect_timeout
        self._context = _context(endpoint) if self.secure else None
        self._server_name = endpoint.server_name
        self._idle: queue.LifoQueue[http.client.HTTPConnection] = queue.LifoQueue(size)

    def request(self, method: str, target: str, headers: Mapping[str, str], body: bytes | None,
                timeout: float) -> tuple[int, bytes]:
        """The status and body of one request (target: its path and query).
        A kept connection the server closed meanwhile fails before any answer
        is read: the request is sent once more, on a new connection."""
        try:
            conn, reused = self._idle.get_nowait(), True
        except queue.Empty:
            conn, reused = self._connect(), False
        try:
            return self._exchange(conn, method, target, headers, body, timeout)
        except _CLOSED_BY_SERVER:
            conn.close()
            if not reused:
                raise ConnectionLost("the server closed the connection") from None
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise ConnectionLost(_cause(exc)) from None
        conn = self._connect()
        try:
            return self._exchange(conn, method, target, headers, body, timeout)
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise ConnectionLost(_cause(exc)) from None

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return

    def _exchange(self, conn: http.client.HTTPConnection, method: str, target: str,
                  headers: Mapping[str, str], body: bytes | None,
                  timeout: float) -> tuple[int, bytes]:
        if conn.sock is None:
            conn.connect()              # within connect_timeout; the answer within timeout
        conn.sock.settimeout(timeout)
        conn.request(method, self.prefix + target, body, dict(headers))
        resp = conn.getresponse()
        data = resp.read()
        if resp.will_close:
            conn.close()
        else:
            try:
                self._idle.put_nowait(conn)
            except queue.Full:
                conn.close()            # a burst's extra connection
        return resp.status, data

    def _connect(self) -> http.client.HTTPConnection:
        if self._context is None:
            return http.client.HTTPConnection(self.host, self.port, timeout=self.connect_timeout)
        return _TlsConnection(self.host, self.port, timeout=self.connect_timeout,
                              context=self._context, server_name=self._server_name)


class _TlsConnection(http.client.HTTPSConnection):
    """HTTPS whose certificate may be checked for another name than the host's
    (a kubeconfig's tls-server-name)."""

    def __init__(self, host: str, port: int, *, timeout: float, context: ssl.SSLContext,
                 server_name: str | None) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._tls = context
        self._server_name = server_name

    def connect(self) -> None:
        if self._server_name is None:
            super().connect()
            return
        sock = socket.create_connection((self.host, self.port), self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = self._tls.wrap_socket(sock, server_hostname=self._server_name)


def _context(endpoint: Endpoint) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=endpoint.ca_file, cadata=endpoint.ca_data)
    if not endpoint.verify or not endpoint.check_name:
        context.check_hostname = False
    if not endpoint.verify:
        context.verify_mode = ssl.CERT_NONE
    if endpoint.cert_file:
        context.load_cert_chain(endpoint.cert_file, endpoint.key_file)
    return context


def _cause(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, ssl.SSLError):
        return f"TLS: {exc.reason or exc}"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror             # Connection refused, Name or service not known
    text = " ".join(str(exc).split())
    return (text or exc.__class__.__name__)[:200]
