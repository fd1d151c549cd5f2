"""The Kafka socket listener inside a BrokerActor's process: bytes in, bytes out, nothing else.

Rules:
- One listening socket per configured listener (Kafka's `listeners`), bound at broker start;
  port 0 binds a free port (the broker advertises the one it got).
- Two threads per connection, a reader and a writer. The reader decodes requests in order
  (protocol.connection.Connection) and answers each (protocol.handlers.answer) before it
  takes the next, so a request sees every earlier request's effects, as in Kafka. A produce
  is appended at once and its acks=all wait is handed to the writer as a Deferred, so the
  connection's next produce is appended while this one waits (a pipelining client, e.g.
  librdkafka's 5 in flight, is not held to one acks=all round trip at a time). The writer
  sends answers strictly in request order. A long-poll fetch holds up its own connection
  only; other connections have their own threads.
- Bad input never takes the broker down: a malformed, truncated or oversized frame
  (socket.request.max.bytes) or an unknown API closes THAT connection, logged with the
  peer; a handler failure is answered UNKNOWN_SERVER_ERROR (an acks=0 produce, which gets
  no answer, closes the connection instead, as Kafka does). An idle connection closes after
  connections.max.idle.ms (Kafka's default 10 minutes).
- `stop()` closes the listening socket and every connection; threads are daemons, and the
  sockets are closed on stop so none of them outlives the broker.
- Security (actors/security.py): on an SSL or SASL_SSL listener each connection is a
  TlsTransport (actors/tls.py) whose handshake must finish within HANDSHAKE_TIMEOUT_S, else
  the connection closes (a client that sends plaintext, garbage or nothing holds no thread
  for long). Each connection has a Session (who is asking); on SASL listeners only the
  SASL exchange is served until it succeeds, and an answer that ends the exchange badly is
  the connection's last (sent, then closed). Until then a request may not be over
  SASL_MAX_RECEIVE_BYTES (Kafka's sasl.server.max.receive.size, 512 KiB: CVE-2022-34917),
  so an unauthenticated client cannot make the broker hold socket.request.max.bytes; the
  connection closes as soon as a request is known to be bigger. A TLS connection the
  broker closes ends with a close_notify (best-effort), as Kafka's does.
- Per API it counts requests, bytes in and out, and the CPU time of the thread that handled
  them (`stats()`): the broker's cost per request, waits excluded (bench/wire_bench.py).
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
import time

from controller.layout import Endpoint
from protocol.api import Deferred
from protocol.connection import Connection
from protocol.errors import ProtocolError
from protocol.handlers import answer
from protocol.security.session import Session
from actors.tls import PlainTransport, TlsError, TlsTransport

log = logging.getLogger(__name__)
READ_BYTES = 256 * 1024
MAX_PIPELINED = 64        # answers queued per connection before the reader stops reading
UNKNOWN_SERVER_ERROR = -1
HANDSHAKE_TIMEOUT_S = 10.0
SASL_MAX_RECEIVE_BYTES = 512 * 1024   # Kafka's sasl.server.max.receive.size default


class KafkaListener:
    def __init__(self, endpoint: Endpoint, api, max_frame_bytes: int, idle_ms: int,
                 name: str = "kafka", security=None):
        self.endpoint, self.api, self.name, self.security = endpoint, api, name, security
        self.max_frame_bytes, self.idle_s = max_frame_bytes, idle_ms / 1000
        self._server: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self.port = 0
        self.connections_accepted = 0
        self._stats: dict[str, list] = {}      # api name → [requests, cpu s, bytes in, bytes out]

    def start(self) -> int:
        """Bind and listen; the port actually bound."""
        host = self.endpoint.host or "0.0.0.0"
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        server = socket.socket(family, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((host, self.endpoint.port))
        server.listen(128)
        self._server, self.port = server, server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True,
                         name=f"{self.name}-accept-{self.port}").start()
        return self.port

    def stop(self) -> None:
        self._stopped.set()
        if self._server is not None:
            try:
                self._server.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._server.close()
        with self._lock:
            conns, self._conns = list(self._conns), set()
        for conn in conns:
            _close(conn)

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, peer = self._server.accept()
            except OSError:
                return                                   # closed by stop()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self._stopped.is_set():
                    _close(conn)
                    return
                self._conns.add(conn)
                self.connections_accepted += 1
            threading.Thread(target=self._serve, args=(conn, peer), daemon=True,
                             name=f"{self.name}-conn-{peer[1]}").start()

    def _open(self, sock: socket.socket, peer):
        """(transport, session) for a new connection, or None when its TLS handshake failed."""
        tls = self.security.tls_context(self.endpoint.listener) if self.security else None
        if tls is None:
            transport = PlainTransport(sock)
        else:
            transport = TlsTransport(sock, tls)
            try:
                transport.handshake(HANDSHAKE_TIMEOUT_S)
            except (TlsError, OSError) as exc:
                log.info("%s: TLS handshake with %s:%s failed: %s", self.name, *peer[:2], exc)
                with self._lock:
                    self._conns.discard(sock)
                _close(sock)
                return None
        if self.security is None:
            return transport, Session(self.endpoint.listener, peer[0])
        return transport, self.security.session(self.endpoint, peer[0],
                                                transport.peer_certificate)

    def _serve(self, sock: socket.socket, peer) -> None:
        """The reader: frames → requests → answer(), in order; the answers (bytes, or a
        Deferred for a produce whose acks=all wait is pending) go to the writer in order."""
        opened = self._open(sock, peer)
        if opened is None:
            return
        conn, session = opened
        state = Connection(self.max_frame_bytes)
        replies: queue.Queue = queue.Queue(MAX_PIPELINED)
        writer = threading.Thread(target=self._write, args=(conn, sock, peer, state, replies),
                                  daemon=True, name=f"{self.name}-write-{peer[1]}")
        writer.start()
        conn.settimeout(self.idle_s)
        try:
            while not session.closing:
                try:
                    data = conn.recv(READ_BYTES)
                except socket.timeout:
                    log.info("%s: closing %s:%s idle for %.0f s", self.name, *peer[:2], self.idle_s)
                    return
                if not data:
                    return
                state.receive_data(data)
                while (request := state.next_request()) is not None:
                    if _authenticating(session) and request.size > SASL_MAX_RECEIVE_BYTES:
                        self._too_big_before_auth(peer, request.size)
                        return
                    cpu = time.thread_time()
                    try:
                        frame = answer(state, self.api, request, session)
                    except ProtocolError:
                        raise
                    except Exception:
                        log.exception("%s: %s v%s from %s:%s failed", self.name, request.api_name,
                                      request.api_version, *peer[:2])
                        if not request.expects_response:
                            return            # acks=0 gets no answer: closing is its signal
                        frame = state.respond_error(request, UNKNOWN_SERVER_ERROR)
                    self._count(request, time.thread_time() - cpu,
                                len(frame) if isinstance(frame, bytes) else 0)
                    if frame is not None:
                        replies.put((request, frame))
                    if session.closing:       # e.g. failed authentication: its answer is last
                        log.info("%s: closing %s:%s after %s", self.name, *peer[:2],
                                 request.api_name)
                        break
                if (not session.closing and _authenticating(session)
                        and state.buffered_bytes > SASL_MAX_RECEIVE_BYTES):
                    self._too_big_before_auth(peer, state.buffered_bytes)  # a partial request
                    return
        except TlsError as exc:
            log.warning("%s: closing %s:%s: TLS: %s", self.name, *peer[:2], exc)
        except ProtocolError as exc:
            log.warning("%s: closing %s:%s: %s", self.name, *peer[:2], exc)
        except OSError:
            pass                                          # the peer went away, or stop()
        finally:
            replies.put(None)            # the writer sends what is queued, then closes

    def _too_big_before_auth(self, peer, size: int) -> None:
        log.warning("%s: closing %s:%s: a request of %s+ bytes before SASL authentication "
                    "completed (the limit is %d, Kafka's sasl.server.max.receive.size)",
                    self.name, *peer[:2], size, SASL_MAX_RECEIVE_BYTES)

    def _write(self, conn, sock: socket.socket, peer, state: Connection,
               replies: queue.Queue) -> None:
        try:
            while (item := replies.get()) is not None:
                request, frame = item
                if isinstance(frame, Deferred):
                    try:
                        frame = frame.result()
                    except Exception:
                        log.exception("%s: %s v%s from %s:%s failed", self.name,
                                      request.api_name, request.api_version, *peer[:2])
                        frame = state.respond_error(request, UNKNOWN_SERVER_ERROR)
                if frame:
                    conn.sendall(frame)
        except (OSError, TlsError):
            pass                                          # the peer went away, or stop()
        finally:
            with self._lock:
                self._conns.discard(sock)
            _close(conn)                 # the transport: TLS sends its close_notify first
            while True:                                   # unblock a reader stuck on put()
                try:
                    replies.get_nowait()
                except queue.Empty:
                    break

    def _count(self, request, cpu_s: float, sent: int) -> None:
        with self._lock:
            row = self._stats.setdefault(request.api_name, [0, 0.0, 0, 0])
            row[0] += 1
            row[1] += cpu_s
            row[2] += request.size
            row[3] += sent

    def stats(self) -> dict[str, dict]:
        with self._lock:
            return {name: {"requests": n, "cpu_s": cpu, "bytes_in": bin_, "bytes_out": bout}
                    for name, (n, cpu, bin_, bout) in self._stats.items()}


def _authenticating(session: Session) -> bool:
    """A SASL connection whose exchange has not succeeded (yet)."""
    return session.sasl is not None and not session.sasl.authenticated


def _close(conn) -> None:
    """Shut down and close a socket or a transport (actors/tls.py), never raising."""
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()
