"""HTTP/1.1 answers read off a real socket (a socket pair, the server's side
written by a thread, in pieces where a test says so): every framing an API
server uses, cut anywhere, and what is no answer at all."""
from __future__ import annotations

import http.client
import itertools
import socket
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaisched.cluster.exchange import Answer, BadAnswer, read_answer, request_bytes


def _answer(pieces: list[bytes], method: str = "POST", pause: float = 0.0,
            then_close: bool = False) -> Answer:
    """read_answer over a socket whose other end writes the pieces (pausing
    between them, so that each arrives in a read of its own)."""
    ours, theirs = socket.socketpair()
    ours.settimeout(5.0)

    def write() -> None:
        for piece in pieces:
            theirs.sendall(piece)
            if pause:
                time.sleep(pause)
        if then_close:
            theirs.shutdown(socket.SHUT_WR)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        return read_answer(ours, method)
    finally:
        writer.join()
        ours.close()
        theirs.close()


def _cut(data: bytes, at: list[int]) -> list[bytes]:
    marks = sorted({0, len(data), *(a % (len(data) + 1) for a in at)})
    return [data[a:b] for a, b in itertools.pairwise(marks) if b > a]


def _chunked(body: bytes, sizes: list[int]) -> bytes:
    out, at = [], 0
    for size in sizes:
        if at >= len(body):
            break
        piece = body[at:at + size]
        out.append(b"%x;ext=1\r\n%s\r\n" % (len(piece), piece))
        at += len(piece)
    if at < len(body):
        out.append(b"%x\r\n%s\r\n" % (len(body) - at, body[at:]))
    return b"".join(out) + b"0\r\nX-Trailer: t\r\n\r\n"


@settings(max_examples=150, deadline=None)
@given(status=st.sampled_from([200, 201, 404, 409, 429, 500]),
       body=st.binary(max_size=3000),
       framing=st.sampled_from(["length", "chunked", "to-close"]),
       sizes=st.lists(st.integers(1, 700), max_size=8),
       cuts=st.lists(st.integers(0, 5000), max_size=6),
       close=st.booleans())
def test_any_framing_cut_anywhere_reads_the_same_answer(
        status: int, body: bytes, framing: str, sizes: list[int], cuts: list[int],
        close: bool) -> None:
    head = b"HTTP/1.1 %d Whatever\r\nContent-Type: application/json\r\n" % status
    if close:
        head += b"Connection: close\r\n"
    if framing == "length":
        data = head + b"Content-Length: %d\r\n\r\n" % len(body) + body
    elif framing == "chunked":
        data = head + b"Transfer-Encoding: chunked\r\n\r\n" + _chunked(body, sizes)
    else:
        data = head + b"\r\n" + body
    answer = _answer(_cut(data, cuts), then_close=framing == "to-close" or close)
    assert answer == Answer(status, body, not close and framing != "to-close")


def test_a_head_and_a_chunk_split_across_reads() -> None:
    data = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
    # Cut inside the head's end, a size line, a chunk and its closing CRLF.
    pieces = [data[:30], data[30:48], data[48:50], data[50:53], data[53:61], data[61:]]
    assert _answer(pieces, pause=0.02) == Answer(200, b"hello world", True)


def test_a_long_body_is_read_whole() -> None:
    body = bytes(range(256)) * 4000         # about a megabyte: many reads
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
    assert _answer([head + body[:10], body[10:]], pause=0.02) == Answer(200, body, True)


def test_an_interim_answer_is_passed_over() -> None:
    data = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}"
    assert _answer([data]) == Answer(201, b"{}", True)


@pytest.mark.parametrize(("method", "status"), [("HEAD", 200), ("DELETE", 204), ("GET", 304)])
def test_answers_without_a_body(method: str, status: int) -> None:
    data = b"HTTP/1.1 %d X\r\nContent-Length: 10\r\n\r\n" % status
    assert _answer([data], method) == Answer(status, b"", True)


def test_a_switch_of_protocols_ends_the_connection_for_requests() -> None:
    data = b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\r\n"
    assert _answer([data], "GET") == Answer(101, b"", False)


def test_http_1_0_closes_unless_kept_alive() -> None:
    assert not _answer([b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx"]).reusable
    assert _answer([b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\n"
                    b"Content-Length: 1\r\n\r\nx"]).reusable


def test_more_than_the_answer_leaves_the_connection_unusable() -> None:
    data = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 200 OK\r\n"
    assert _answer([data]) == Answer(200, b"x", False)


def test_a_connection_ended_before_any_answer_is_a_remote_disconnect() -> None:
    # What a kept connection the server closed while idle reads: the
    # transport sends the request once more on a new one.
    with pytest.raises(http.client.RemoteDisconnected):
        _answer([], then_close=True)


def test_a_connection_ended_mid_answer_is_an_incomplete_read() -> None:
    with pytest.raises(http.client.IncompleteRead):
        _answer([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"], then_close=True)
    with pytest.raises(http.client.IncompleteRead):
        _answer([b"HTTP/1.1 200 OK\r\nContent-Le"], then_close=True)


@pytest.mark.parametrize("data", [
    b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
    b"HTTP/1.1 OK\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n",
])
def test_what_is_no_http_answer_is_said_so(data: bytes) -> None:
    with pytest.raises(BadAnswer):
        _answer([data], then_close=True)


def test_a_head_without_an_end_is_refused() -> None:
    with pytest.raises(BadAnswer, match="no end of line"):
        _answer([b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70_000], then_close=True)


def test_the_request_as_sent() -> None:
    sent = request_bytes("POST", "/api/v1/namespaces/a/pods/p/binding", "10.0.0.1:6443",
                         {"Content-Type": "application/json", "Authorization": "Bearer t"}, b"{}")
    assert sent == (b"POST /api/v1/namespaces/a/pods/p/binding HTTP/1.1\r\n"
                    b"Host: 10.0.0.1:6443\r\nAccept-Encoding: identity\r\n"
                    b"Content-Type: application/json\r\nAuthorization: Bearer t\r\n"
                    b"Content-Length: 2\r\n\r\n{}")
    assert request_bytes("GET", "/api", "h", {}, None) == (
        b"GET /api HTTP/1.1\r\nHost: h\r\nAccept-Encoding: identity\r\n\r\n")
    assert b"Content-Length: 0\r\n" in request_bytes("DELETE", "/x", "h", {}, b"")
    assert b"Content-Length: 0\r\n" in request_bytes("POST", "/x", "h", {}, None)


@pytest.mark.parametrize(("target", "headers"), [
    ("/api/v1/pods?x=a b", {}),
    ("/api\r\nX: y", {}),
    ("/api", {"Authorization": "Bearer t\r\nX-Injected: 1"}),
    ("/api", {"Bad:Name": "v"}),
    ("/api", {"Host": "elsewhere"}),
])
def test_a_request_that_could_carry_another_is_refused(target: str, headers: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        request_bytes("GET", target, "h", headers, None)
