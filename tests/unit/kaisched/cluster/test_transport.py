"""The keep-alive transport against a real HTTP server on loopback: answers,
a kept connection the server closed, and failures in a few words."""
from __future__ import annotations

import http.server
import socket
import threading
import time
from typing import Iterator

import pytest

from kaisched.cluster.transport import ConnectionLost, Endpoint, Transport


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
