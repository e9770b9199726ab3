"""Requests to the API server: short ones on keep-alive connections, one
request at a time on each, and streams (watches) on connections of their own.

Binds above all go this way, thousands a second when a cycle places a big
gang. urllib3 (under the `kubernetes` client) spends about 0.4 ms of CPU on
one request to a loopback server, http.client about 0.3 ms, a short request
written and its answer read straight on the socket (exchange.py) 0.1 ms: on
a machine whose cores the API server shares, what the client does not burn
the server gets. Connections are opened by the standard library's
http.client, and streams read through it. Through a proxy, every connection
is a tunnel (HTTP CONNECT).
"""
from __future__ import annotations

import base64
import http.client
import os
import queue
import socket
import ssl
import tempfile
from typing import Iterator, Mapping
from urllib.parse import unquote, urlsplit

import attrs

from kaisched.cluster.exchange import read_answer, request_bytes

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
    cert_data: bytes | None = None   # the client's certificate itself (PEM), if not in a file
    key_file: str | None = None
    key_data: bytes | None = None    # ... and its key
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
    by a burst, and closed after it). proxy: an http:// proxy's URL, its
    user and password (if any) shown to it; proxy_headers: more to show it."""

    def __init__(self, endpoint: Endpoint, size: int, connect_timeout: float,
                 proxy: str | None = None, proxy_headers: Mapping[str, str] | None = None) -> None:
        parts = urlsplit(endpoint.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {endpoint.url}")
        self.secure = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.secure else 80)
        self.prefix = parts.path.rstrip("/")
        # The Host header, as http.client writes it: the port only when not the scheme's own.
        host = self.host.encode("idna").decode("ascii") if not self.host.isascii() else self.host
        host = f"[{host}]" if ":" in host else host
        self._host = host if self.port == (443 if self.secure else 80) else f"{host}:{self.port}"
        self.connect_timeout = connect_timeout
        self._context = _context(endpoint) if self.secure else None
        self._server_name = endpoint.server_name
        self._tunnel = _tunnel(proxy, proxy_headers or {}) if proxy else None
        self._idle: queue.LifoQueue[http.client.HTTPConnection] = queue.LifoQueue(size)

    def request(self, method: str, target: str, headers: Mapping[str, str], body: bytes | None,
                timeout: float) -> tuple[int, bytes]:
        """The status and body of one request (target: its path and query).
        A kept connection the server closed meanwhile fails before any answer
        is read: the request is sent once more, on a new connection."""
        message = request_bytes(method, self.prefix + target, self._host, headers, body)
        try:
            conn, reused = self._idle.get_nowait(), True
        except queue.Empty:
            conn, reused = self._connect(), False
        try:
            return self._exchange(conn, method, message, timeout)
        except _CLOSED_BY_SERVER:
            conn.close()
            if not reused:
                raise ConnectionLost("the server closed the connection") from None
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise ConnectionLost(_cause(exc)) from None
        conn = self._connect()
        try:
            return self._exchange(conn, method, message, timeout)
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise ConnectionLost(_cause(exc)) from None

    def stream(self, target: str, headers: Mapping[str, str], timeout: float) -> "Stream":
        """A GET whose answer is read as it arrives (a watch), on a connection
        of its own; timeout: how long the answer may be silent."""
        conn = self._connect()
        try:
            conn.connect()
            conn.sock.settimeout(timeout)
            conn.request("GET", self.prefix + target, None, dict(headers))
            return Stream(conn, conn.getresponse())
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise ConnectionLost(_cause(exc)) from None

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return

    def _exchange(self, conn: http.client.HTTPConnection, method: str, message: bytes,
                  timeout: float) -> tuple[int, bytes]:
        """The request sent and its answer read on the connection's socket
        (see exchange.py); the connection kept when it may carry the next."""
        if conn.sock is None:
            conn.connect()              # within connect_timeout; the answer within timeout
        sock = conn.sock
        sock.settimeout(timeout)
        sock.sendall(message)
        answer = read_answer(sock, method)
        if not answer.reusable:
            conn.close()
        else:
            try:
                self._idle.put_nowait(conn)
            except queue.Full:
                conn.close()            # a burst's extra connection
        return answer.status, answer.body

    def _connect(self) -> http.client.HTTPConnection:
        host, port = (self.host, self.port) if self._tunnel is None else self._tunnel[:2]
        if self._context is None:
            conn = http.client.HTTPConnection(host, port, timeout=self.connect_timeout)
        else:
            conn = _TlsConnection(host, port, timeout=self.connect_timeout,
                                  context=self._context, server_name=self._server_name)
        if self._tunnel is not None:
            conn.set_tunnel(self.host, self.port, dict(self._tunnel[2]))
        return conn


class Stream:
    """An answer read as it arrives, on a connection of its own."""

    _CHUNK = 1 << 16

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        self.status = resp.status
        self.closed = False
        self._conn = conn
        self._resp = resp

    def read(self) -> bytes:
        """The whole answer (an error's), the connection closed after."""
        try:
            return self._resp.read()
        except (OSError, http.client.HTTPException):
            return b""
        finally:
            self.close()

    def lines(self) -> Iterator[bytes]:
        """Its lines as they come. Ends when the server ends the answer, or
        when it is silent past the timeout (its watch is over: watch again);
        ConnectionLost when the connection fails (not after close or interrupt)."""
        pending: list[bytes] = []
        try:
            while chunk := self._resp.read1(self._CHUNK):
                parts = chunk.split(b"\n")
                if len(parts) == 1:
                    pending.append(chunk)       # part of a long line
                    continue
                pending.append(parts[0])
                yield b"".join(pending)
                yield from parts[1:-1]
                pending = [parts[-1]]
        except TimeoutError:
            return
        except (OSError, ValueError, http.client.HTTPException) as exc:
            if not self.closed:
                raise ConnectionLost(_cause(exc)) from None
        rest = b"".join(pending)
        if rest and not self.closed:
            yield rest                          # a last line without its newline

    def interrupt(self) -> None:
        """From another thread: the reader in lines() stops."""
        self.closed = True
        sock = self._conn.sock
        if sock is not None:
            try:
                # The socket's own shutdown, not TLS's: that one would drop
                # the TLS state under the reader's feet.
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass            # closed meanwhile: nothing left to unblock

    def close(self) -> None:
        self.closed = True
        self._conn.close()


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
        http.client.HTTPConnection.connect(self)   # TCP, and the tunnel through a proxy
        self.sock = self._tls.wrap_socket(self.sock, server_hostname=self._server_name)


def _tunnel(proxy: str, headers: Mapping[str, str]) -> tuple[str, int, Mapping[str, str]]:
    """Where a proxy is and what it is shown (its URL's user and password
    as basic auth, as curl does)."""
    parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"proxy {proxy}: only an http:// proxy is supported")
    shown = dict(headers)
    if parts.username is not None:
        user = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        shown.setdefault("Proxy-Authorization",
                         "Basic " + base64.b64encode(user.encode()).decode("ascii"))
    return parts.hostname, parts.port or 80, shown


def _context(endpoint: Endpoint) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=endpoint.ca_file, cadata=endpoint.ca_data)
    if not endpoint.verify or not endpoint.check_name:
        context.check_hostname = False
    if not endpoint.verify:
        context.verify_mode = ssl.CERT_NONE
    if endpoint.cert_data is None and endpoint.key_data is None:
        if endpoint.cert_file:
            context.load_cert_chain(endpoint.cert_file, endpoint.key_file)
        return context
    # ssl reads a certificate and key only from files: written to a folder
    # only this user reads, for as long as they are read.
    with tempfile.TemporaryDirectory(prefix="kaisched-tls-") as folder:
        cert = _written(folder, "cert.pem", endpoint.cert_data) or endpoint.cert_file
        key = _written(folder, "key.pem", endpoint.key_data) or endpoint.key_file
        if cert:
            context.load_cert_chain(cert, key)
    return context


def _written(folder: str, name: str, data: bytes | None) -> str | None:
    if data is None:
        return None
    path = os.path.join(folder, name)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
        f.write(data)
    return path


def _cause(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, ssl.SSLError):
        return f"TLS: {exc.reason or exc}"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror             # Connection refused, Name or service not known
    text = " ".join(str(exc).split())
    return (text or exc.__class__.__name__)[:200]
