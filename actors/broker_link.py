"""BrokerLink: this broker's connection to another broker's Kafka listener (the inter-broker
listener), blocking, one request at a time: the socket under a replica fetcher.

Rules:
- `connect(endpoint)`: TCP with TCP_NODELAY; TLS for SSL and SASL_SSL endpoints (the
  broker's client context, actors/security.py); SASL (SaslHandshake v1, then
  SaslAuthenticate v2 rounds, protocol/security/sasl_client.py) for SASL endpoints before
  anything else. An authentication the peer refuses raises SaslFailed with its message.
- `call(body, timeout_s)` sends one request (protocol/client.py frames it) and waits for its
  answer; a socket error, a timeout or a protocol error closes the link and raises: the
  caller opens a new one (a peer that restarted, or a frozen one, costs one reconnect).
- `close()` may come from another thread (a fetcher being stopped): it shuts the socket
  down, which ends a call waiting on it at once.
"""

from __future__ import annotations

import socket
import threading

from controller.layout import Endpoint
from protocol.build import build_request
from protocol.client import ClientConnection
from protocol.security.sasl_client import SaslFailed

READ_BYTES = 1 << 20
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36

__all__ = ["BrokerLink", "SaslFailed"]


class BrokerLink:
    def __init__(self, client_id: str, security=None, max_frame_bytes: int = 100 << 20):
        self.client_id, self.security, self.max_frame_bytes = client_id, security, max_frame_bytes
        self.endpoint: Endpoint | None = None
        self._sock: socket.socket | None = None
        self._conn: ClientConnection | None = None
        self._lock = threading.Lock()

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def connect(self, endpoint: Endpoint, timeout_s: float = 10.0) -> None:
        self.close()
        sock = socket.create_connection((endpoint.host, endpoint.port), timeout=timeout_s)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if endpoint.security_protocol in ("SSL", "SASL_SSL"):
                ctx = self.security.client_tls_context(endpoint.listener)
                sock = ctx.wrap_socket(sock, server_hostname=endpoint.host)
        except BaseException:
            sock.close()
            raise
        with self._lock:
            self._sock, self._conn = sock, ClientConnection(self.client_id, self.max_frame_bytes)
        self.endpoint = endpoint
        if endpoint.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            try:
                self._authenticate(endpoint, timeout_s)
            except BaseException:
                self.close()
                raise

    def _authenticate(self, endpoint: Endpoint, timeout_s: float) -> None:
        client = self.security.client_sasl(endpoint.listener)
        shake = self.call(build_request(SASL_HANDSHAKE, 1, None, mechanism=client.mechanism),
                          timeout_s)
        if shake.error_code.value:
            raise SaslFailed(f"{endpoint.url()}: SaslHandshake {client.mechanism}: error "
                             f"{shake.error_code.value} (enabled there: {shake.mechanisms})")
        token = client.first()
        while token is not None:
            answer = self.call(build_request(SASL_AUTHENTICATE, 2, None, auth_bytes=token),
                               timeout_s)
            if answer.error_code.value:
                raise SaslFailed(f"{endpoint.url()}: {answer.error_message or 'authentication'}"
                                 f" (error {answer.error_code.value})")
            token = client.next(answer.auth_bytes)

    def call(self, body, timeout_s: float):
        """Send one request and return its answer (the link closes on any failure)."""
        with self._lock:
            sock, conn = self._sock, self._conn
        if sock is None:
            raise ConnectionError("not connected")
        try:
            _, data = conn.request(body)
            sock.settimeout(timeout_s)
            sock.sendall(data)
            while (got := conn.next_response()) is None:
                chunk = sock.recv(READ_BYTES)
                if not chunk:
                    raise ConnectionError(f"{self.endpoint.url()} closed the connection")
                conn.receive_data(chunk)
            return got[1]
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        with self._lock:
            sock, self._sock, self._conn = self._sock, None, None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
