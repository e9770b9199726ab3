"""Proxies for the tests over loopback: relay, the bytes of one connection
to another; ConnectProxy, an HTTP proxy that only tunnels (CONNECT), as a
corporate proxy does for HTTPS, noting what each tunnel was asked with."""
from __future__ import annotations

import socket
import threading


class ConnectProxy(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True, name="connect-proxy")
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.asked: list[bytes] = []            # each CONNECT's head, as received

    def run(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return                          # closed
            head = b""
            while b"\r\n\r\n" not in head:
                data = client.recv(4096)
                if not data:
                    break
                head += data
            self.asked.append(head)
            host, port = head.split(b" ")[1].decode().rsplit(":", 1)
            upstream = socket.create_connection((host, int(port)))
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=relay, args=(a, b), daemon=True).start()

    def close(self) -> None:
        self.listener.close()


def relay(a: socket.socket, b: socket.socket) -> None:
    """Bytes from a to b until either side ends; then both are shut."""
    try:
        while data := a.recv(65536):
            b.sendall(data)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
