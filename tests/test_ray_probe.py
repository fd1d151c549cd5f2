"""The probe before ray.init (rayka/cluster.py `_probe`): an address where no Ray GCS
answers fails at once with RayUnavailable instead of ray.init's minutes of retries, and a
gRPC server (what a GCS is) passes. The servers are real: grpcio's (Ray's own dependency)
and plain sockets on loopback; no Ray is started."""

from __future__ import annotations

import socket
import threading
import time
from concurrent import futures

import grpc
import pytest

from rayka.cluster import RAY_PROBE_TIMEOUT_S, _probe
from rayka.errors import RayUnavailable


@pytest.fixture
def grpc_server():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(grace=None)


class OneAnswerServer:
    """Accepts connections and answers each with `reply` (b"": says nothing) after reading
    what the client sent, then holds it open until closed."""

    def __init__(self, reply: bytes):
        self.reply, self.conns = reply, []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            conn.recv(1024)
            if self.reply:
                conn.sendall(self.reply)

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()


def test_a_grpc_server_passes(grpc_server):
    _probe(grpc_server, "given")


@pytest.mark.parametrize("reply, waits", [
    (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", False),  # a web server
    (b"\x00\x00\x00\x00\x00\x00", True),                                 # short, then open
    (b"", True),                                                         # says nothing
])
def test_what_listens_is_not_a_gcs(reply, waits):
    server = OneAnswerServer(reply)
    try:
        t0 = time.monotonic()
        with pytest.raises(RayUnavailable, match=server.address):
            _probe(server.address, "recorded in ray_current_cluster")
        took = time.monotonic() - t0
        # a silent listener costs the probe's timeout, no more; an answer ends it at once
        assert took < RAY_PROBE_TIMEOUT_S + 2 if waits else took < 2
    finally:
        server.close()


def test_a_closed_port_fails_at_once():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))            # bound, never listening: refused
        address = f"127.0.0.1:{s.getsockname()[1]}"
        with pytest.raises(RayUnavailable, match="does not answer"):
            _probe(address, "given")
