"""One HTTP/1.1 request and its answer, written and read straight on a
connection's socket (kaisched.cluster.transport's short requests).

http.client reads an answer's head through the email package's header
parser: 0.15 ms of CPU an answer, half of what a whole request costs the
client (TLS included), and h11 costs as much. A bind is one small request
with a small answer, thousands a second when a cycle places a big gang, on a
machine whose cores the API server shares: what the client does not burn,
the server gets. Only the framing is read here (the status line, the length
or the chunks, whether the connection stays open); a connection is still
opened, and a proxy's tunnel made, by http.client.

The errors are http.client's, so that a caller tells them as it told its:
RemoteDisconnected when a connection ends before any answer (a kept one the
server closed while it was idle), IncompleteRead when it ends mid-answer,
another HTTPException when what came is no HTTP answer.
"""
from __future__ import annotations

import http.client
import re
import socket
from typing import Mapping, NamedTuple

_RECV = 1 << 16
_HEAD_LIMIT = 1 << 16           # a head (or a chunk's size line) no API server writes longer
_NO_BODY = frozenset({204, 304})
_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})    # a Content-Length even when empty
_BAD_TARGET = re.compile(r"[\x00-\x20\x7f]")
_BAD_VALUE = re.compile(r"[\r\n\x00]")
_OURS = frozenset({"host", "accept-encoding", "content-length"})


class BadAnswer(http.client.HTTPException):
    """What the server sent is not an HTTP/1.1 answer."""


class Answer(NamedTuple):
    status: int
    body: bytes
    reusable: bool          # the connection may carry the next request


def request_bytes(method: str, target: str, host: str, headers: Mapping[str, str],
                  body: bytes | None) -> bytes:
    """The request as sent: its line, Host (host: as the Host header names the
    server), no compression asked for (as http.client asks), the headers
    given, a Content-Length with a body (or for a method that has one)."""
    if _BAD_TARGET.search(target):
        raise ValueError(f"a request target with a space or a control character: {target!r}")
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", "Accept-Encoding: identity"]
    for name, value in headers.items():
        if _BAD_VALUE.search(value) or _BAD_VALUE.search(name) or ":" in name:
            raise ValueError(f"header {name!r}: a name or value no request may carry")
        if name.lower() in _OURS:
            raise ValueError(f"header {name!r}: set by the transport itself")
        lines.append(f"{name}: {value}")
    if body is not None or method in _WITH_BODY:
        lines.append(f"Content-Length: {len(body) if body else 0}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + body if body else head


def read_answer(sock: socket.socket, method: str) -> Answer:
    """The answer to the request just sent on sock (interim 1xx answers
    passed over). Not reusable when the server says it closes, when the body
    runs to the connection's end, or when more came than the answer."""
    buf = _Buffer(sock)
    while True:
        lines = buf.until(b"\r\n\r\n").split(b"\r\n")
        version, _, rest = lines[0].partition(b" ")
        if not version.startswith(b"HTTP/1.") or not rest[:3].isdigit():
            raise BadAnswer(f"not an HTTP answer: {lines[0][:80]!r}")
        status = int(rest[:3])
        if not 100 <= status < 200 or status == 101:
            break
    length: int | None = None
    chunked = False
    close = version == b"HTTP/1.0" or status == 101      # 101: no longer HTTP after it
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            if not value.strip().isdigit():
                raise BadAnswer(f"Content-Length {value.strip()[:40]!r}")
            length = int(value)
        elif name == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        elif name == b"connection":
            value = value.lower()
            close = b"close" in value or close and b"keep-alive" not in value
    if method == "HEAD" or status in _NO_BODY or status < 200:
        body = b""
    elif chunked:
        body = _chunks(buf)
    elif length is not None:
        body = buf.take(length)
    else:                   # the body runs to the connection's end
        body, close = buf.rest(), True
    return Answer(status, body, not close and not buf.left())


def _chunks(buf: _Buffer) -> bytes:
    parts = []
    while True:
        size_line = buf.until(b"\r\n").split(b";", 1)[0].strip()
        try:
            size = int(size_line, 16)
        except ValueError:
            raise BadAnswer(f"a chunk's size {size_line[:40]!r}") from None
        if size == 0:
            break
        parts.append(buf.take(size))
        if buf.take(2) != b"\r\n":
            raise BadAnswer("a chunk longer than its size")
    while buf.until(b"\r\n"):
        pass                # trailers, up to the empty line
    return b"".join(parts)


class _Buffer:
    """What was read off the socket and not taken yet."""

    __slots__ = ("sock", "data", "pos", "got")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.data = bytearray()
        self.pos = 0
        self.got = False

    def until(self, sep: bytes) -> bytes:
        """What comes before sep (taken, and sep with it)."""
        searched = 0            # of what follows pos, looked through already
        while True:
            at = self.data.find(sep, self.pos + searched)
            if at >= 0:
                out = bytes(self.data[self.pos:at])
                self.pos = at + len(sep)
                return out
            have = len(self.data) - self.pos
            if have > _HEAD_LIMIT:
                raise BadAnswer(f"no end of line in {_HEAD_LIMIT} bytes")
            searched = max(0, have - len(sep) + 1)
            self._more()

    def take(self, n: int) -> bytes:
        """The next n bytes: a long body read straight into its place."""
        have = len(self.data) - self.pos
        if have >= n:
            self.pos += n
            return bytes(self.data[self.pos - n:self.pos])
        out = bytearray(n)
        out[:have] = self.data[self.pos:]
        self.data, self.pos = bytearray(), 0
        view, got = memoryview(out), have
        while got < n:
            k = self.sock.recv_into(view[got:])
            if not k:
                raise http.client.IncompleteRead(bytes(out[:got]), n - got)
            got += k
        return bytes(out)

    def rest(self) -> bytes:
        """Everything up to the connection's end."""
        parts = [bytes(self.data[self.pos:])]
        self.data, self.pos = bytearray(), 0
        while chunk := self.sock.recv(_RECV):
            parts.append(chunk)
        return b"".join(parts)

    def left(self) -> bool:
        return len(self.data) > self.pos

    def _more(self) -> None:
        chunk = self.sock.recv(_RECV)
        if not chunk:
            if not self.got:
                raise http.client.RemoteDisconnected("Remote end closed connection without response")
            raise http.client.IncompleteRead(bytes(self.data[self.pos:]))
        self.got = True
        if self.pos > _RECV:            # what was taken goes, once it is worth a move
            del self.data[:self.pos]
            self.pos = 0
        self.data += chunk
