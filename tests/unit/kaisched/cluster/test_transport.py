"""The keep-alive transport against a real HTTP server on loopback: answers,
a kept connection the server closed, and failures in a few words."""
from __future__ import annotations

import base64
import http.server
import socket
import threading
import time
from typing import Iterator

import pytest

from kaisched.cluster.transport import ConnectionLost, Endpoint, Transport
from tests.builders.proxy import ConnectProxy


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"       # keep-alive, as the API server

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path.startswith("/slow"):
            time.sleep(1.0)
        self.server.seen.append((self.path, body, self.client_address[1]))  # type: ignore[attr-defined]
        answer = b'{"kind":"Status","code":201}'
        try:
            self.send_response(201)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)
        except BrokenPipeError:
            pass                # the client gave up waiting (the timeout test)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[http.server.ThreadingHTTPServer]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.seen = []             # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _transport(httpd: http.server.ThreadingHTTPServer, prefix: str = "") -> Transport:
    host, port = httpd.server_address[:2]
    return Transport(Endpoint(f"http://{host}:{port}{prefix}"), size=2, connect_timeout=2.0)


def test_requests_share_one_kept_connection(server: http.server.ThreadingHTTPServer) -> None:
    transport = _transport(server, "/base")
    for i in range(3):
        assert transport.request("POST", f"/b{i}", {"Content-Type": "application/json"},
                                 b'{"i": %d}' % i, 5.0) == (201, b'{"kind":"Status","code":201}')
    assert [(path, body) for path, body, _ in server.seen] == [
        ("/base/b0", b'{"i": 0}'), ("/base/b1", b'{"i": 1}'), ("/base/b2", b'{"i": 2}')]
    assert len({port for _, _, port in server.seen}) == 1     # one connection, kept
    transport.close()


def test_a_kept_connection_the_server_closed_is_replaced(
        server: http.server.ThreadingHTTPServer) -> None:
    transport = _transport(server)
    transport.request("POST", "/a", {}, b"1", 5.0)
    idle = transport._idle.queue[0]
    assert idle.sock is not None
    idle.sock.shutdown(socket.SHUT_RDWR)          # as a server that closes idle connections
    assert transport.request("POST", "/b", {}, b"2", 5.0)[0] == 201
    assert [path for path, _, _ in server.seen] == ["/a", "/b"]   # sent once, on a new one


def test_failures_are_said_in_a_few_words(server: http.server.ThreadingHTTPServer) -> None:
    with socket.socket() as sock:                 # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    refused = Transport(Endpoint(f"http://127.0.0.1:{port}"), size=1, connect_timeout=2.0)
    with pytest.raises(ConnectionLost, match="^Connection refused$"):
        refused.request("GET", "/", {}, None, 1.0)
    with pytest.raises(ConnectionLost, match="^timed out$"):
        _transport(server).request("POST", "/slow", {}, b"x", 0.2)


def test_only_http_urls_are_taken() -> None:
    with pytest.raises(ValueError, match="not an http"):
        Transport(Endpoint("unix:///var/run/api.sock"), size=1, connect_timeout=1.0)


class _Watcher(http.server.BaseHTTPRequestHandler):
    """Answers GET /watch with chunks that cut lines anywhere, then stays
    silent for a while (as a watch with nothing to say); GET /gone with 410."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.server.headers_seen.append(dict(self.headers))  # type: ignore[attr-defined]
        if self.path == "/gone":
            body = b'{"kind":"Status","code":410}'
            self.send_response(410)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for piece in (b'{"a":', b'1}\n{"b":2}\n{"c"', b':3}\n'):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
        time.sleep(float(self.headers.get("X-Silence", "0")))
        try:
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass                # the client went away first

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def watcher() -> Iterator[http.server.ThreadingHTTPServer]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Watcher)
    httpd.headers_seen = []     # type: ignore[attr-defined]
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def test_a_stream_gives_its_lines_as_they_come(watcher: http.server.ThreadingHTTPServer) -> None:
    stream = _transport(watcher).stream("/watch", {"Accept": "application/json"}, 5.0)
    assert stream.status == 200
    assert list(stream.lines()) == [b'{"a":1}', b'{"b":2}', b'{"c":3}']
    stream.close()
    gone = _transport(watcher).stream("/gone", {}, 5.0)
    assert (gone.status, gone.read()) == (410, b'{"kind":"Status","code":410}')


def test_a_silent_stream_ends_at_its_timeout(watcher: http.server.ThreadingHTTPServer) -> None:
    stream = _transport(watcher).stream("/watch", {"X-Silence": "3"}, 0.3)
    started = time.monotonic()
    assert list(stream.lines()) == [b'{"a":1}', b'{"b":2}', b'{"c":3}']
    assert time.monotonic() - started < 2.5     # ended by its timeout, not by the server
    stream.close()


def test_a_stream_interrupted_from_another_thread_ends_quietly(
        watcher: http.server.ThreadingHTTPServer) -> None:
    stream = _transport(watcher).stream("/watch", {"X-Silence": "5"}, 30.0)
    lines = stream.lines()
    assert next(lines) == b'{"a":1}'
    threading.Timer(0.2, stream.interrupt).start()
    started = time.monotonic()
    assert list(lines) == [b'{"b":2}', b'{"c":3}']
    assert time.monotonic() - started < 3.0
    stream.close()


def test_a_dropped_stream_is_a_lost_connection(watcher: http.server.ThreadingHTTPServer) -> None:
    stream = _transport(watcher).stream("/watch", {"X-Silence": "5"}, 30.0)
    lines = stream.lines()
    assert next(lines) == b'{"a":1}'
    # The server's side goes (a restart): the socket reads an end mid-answer.
    threading.Timer(0.2, lambda: stream._conn.sock.shutdown(socket.SHUT_RD)).start()
    with pytest.raises(ConnectionLost):
        list(lines)
    stream.close()


def test_through_a_proxy_every_connection_is_a_tunnel(
        server: http.server.ThreadingHTTPServer, watcher: http.server.ThreadingHTTPServer) -> None:
    proxy = ConnectProxy()
    proxy.start()
    for httpd, send in ((server, lambda t: t.request("POST", "/x", {}, b"1", 5.0)[0]),
                        (watcher, lambda t: len(list(t.stream("/watch", {}, 5.0).lines())))):
        host, port = httpd.server_address[:2]
        transport = Transport(Endpoint(f"http://{host}:{port}"), size=1, connect_timeout=2.0,
                              proxy=f"http://me:p%40ss@127.0.0.1:{proxy.port}")
        assert send(transport) in (201, 3)
        transport.close()
    proxy.close()
    assert len(proxy.asked) == 2
    for head in proxy.asked:
        assert head.startswith(b"CONNECT 127.0.0.1:")
        assert b"Proxy-Authorization: Basic " + base64.b64encode(b"me:p@ss") in head


def test_only_http_proxies_are_taken() -> None:
    with pytest.raises(ValueError, match="only an http:// proxy"):
        Transport(Endpoint("https://127.0.0.1:6443"), size=1, connect_timeout=1.0,
                  proxy="socks5://127.0.0.1:1080")
