"""The Kafka socket listener: ONE event loop per broker serves every connection of every
listener (Kafka's network processors, here an asyncio loop in a thread of its own). Bytes
in, bytes out; no thread per connection, so thousands of idle connections cost nothing.

Rules:
- `EventLoop`: the asyncio loop (uvloop's) and its thread; the broker makes one and hands it
  to each of its listeners (a listener made without one makes its own, for tests). The same
  loop runs the broker's follower fetchers (actors/fetcher.py) and timers (actors/timers.py).
  Nothing on it may block: no Ray get, no ZooKeeper call, no wait on another thread; what
  must wait goes to the worker pool. `call(fn)` from another thread hands work to the loop
  (call_soon_threadsafe); from the loop itself it is queued without a wake-up.
- One listening socket per configured listener (Kafka's `listeners`), bound by `start()`;
  port 0 binds a free port (the broker advertises the one it got). `start(serve=False)`
  only binds: until `serve()` nothing listens there, so a client's connection is refused
  at once (a broker that does not know the cluster yet, see actors/broker.py).
- A connection's requests are decoded in order (protocol.connection.Connection); each gets
  a slot in the connection's queue, and answers leave from the head of the queue as they
  are ready: strictly in request order, pipelining kept.
- The hot APIs are answered on the loop, never blocking it (INLINE: Produce, Fetch,
  ListOffsets, OffsetForLeaderEpoch, ApiVersions, the group APIs, the transaction APIs of
  a running transaction: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, WriteTxnMarkers,
  TxnOffsetCommit). A request that has to
  wait answers a Deferred (protocol/api.py) and its slot is filled when the Deferred says it
  is ready: a produce waiting for acks=all (the connection's next requests go on meanwhile,
  so a pipelining client's appends follow each other), a parked fetch or a parked group
  request (the connection is MUTED until it is answered, as Kafka mutes a channel with a
  request in flight). A Deferred already settled when it is registered is answered in the
  same loop pass. Every other API (admin, Metadata, FindCoordinator, ACLs, SASL,
  InitProducerId: they write to ZooKeeper, wait for metadata or run PBKDF2) runs in the
  listener's worker pool, the connection muted meanwhile, so a request still sees every
  earlier request's effects.
- Backpressure: a connection with MAX_PIPELINED answers pending, or whose transport's write
  buffer is over its high-water mark, or muted with MUTED_BUFFER_BYTES of requests waiting,
  is not read until that drains (a muted connection is otherwise still read into its
  buffer: pausing and resuming the socket for every parked fetch cost two epoll calls).
- Bad input never takes the broker down: a malformed, truncated or oversized frame
  (socket.request.max.bytes) or an unknown API closes THAT connection, logged with the
  peer; a handler failure is answered UNKNOWN_SERVER_ERROR (an acks=0 produce, which gets
  no answer, closes the connection instead, as Kafka does). An idle connection closes after
  connections.max.idle.ms (Kafka's default 10 minutes).
- Security (actors/security.py): on an SSL or SASL_SSL listener each connection runs a
  TlsSession (actors/tls.py: TLS as bytes in, bytes out) over its plain transport; a
  handshake not finished within HANDSHAKE_TIMEOUT_S closes the connection (a client that
  sends plaintext, garbage or nothing holds nothing for long); a connection the broker
  closes ends with a close_notify. Each connection has a Session (who is asking); on SASL
  listeners only the SASL exchange is served until it succeeds, and an answer that ends the
  exchange badly is the connection's last (sent, then closed). Until then a request may not
  be over SASL_MAX_RECEIVE_BYTES (Kafka's sasl.server.max.receive.size, 512 KiB:
  CVE-2022-34917): the connection closes as soon as a request is known to be bigger.
- `stop()` closes the listening socket and every connection.
- Client quotas (protocol/quotas.py, fed by actors/dynamic_config.py): when any quota is
  configured, each request gets a hook that measures it (its handling time, a Produce's
  bytes, a Fetch's record bytes); an answer over a quota carries throttle_time_ms, and
  once it is written the connection is THROTTLED for that time: nothing more is read or
  handled from it (Kafka's ThrottledChannel, KIP-219), then it resumes. Nothing is refused.
- Per API it counts requests and bytes in and out (`stats()`); the broker's CPU per request
  is its process's CPU time over these counts (bench/wire_bench.py): a clock read per
  request cost more than it measured under a busy GIL.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import socket
import threading
import time
from collections import deque

import uvloop

from controller.layout import Endpoint
from protocol.api import Deferred
from protocol.connection import Connection
from protocol.errors import ProtocolError
from protocol.handlers import answer
from protocol import quotas as q
from protocol.security.session import Session
from actors.tls import TlsError, TlsSession
from replicas.errors import ErrorCode

log = logging.getLogger(__name__)
MAX_PIPELINED = 64        # answers pending per connection before it is not read any more
MUTED_BUFFER_BYTES = 1 << 20   # what a muted connection may buffer before it is not read
HANDSHAKE_TIMEOUT_S = 10.0
SASL_MAX_RECEIVE_BYTES = 512 * 1024   # Kafka's sasl.server.max.receive.size default
WORKERS = 8               # threads for the requests that may block
PRODUCE = 0
# answered on the loop: they never block (a wait is a Deferred)
INLINE = frozenset({0, 1, 2, 18, 23, 8, 9, 11, 12, 13, 14, 15, 16, 42, 24, 25, 26, 27, 28})


def write_at_once(fd: int, transport, data: bytes) -> None:
    """`data` by a write(2) of its own on the transport's socket `fd` (nothing may be
    buffered before it): uvloop sends a transport's writes only once the loop pass's I/O
    callbacks are done. What the socket does not take goes to the transport."""
    try:
        sent = os.write(fd, data)
    except OSError:            # EAGAIN, or a broken connection the transport will see
        sent = 0
    if sent < len(data):
        transport.write(memoryview(data)[sent:])


class EventLoop:
    """An asyncio loop running in a thread of its own (the broker's network thread): uvloop's
    (libuv), whose loop pass costs less Python per request than the stdlib's selector loop
    (~5 % of a 3-broker cluster's CPU at one record at a time, tests/broker_world.py)."""

    def __init__(self, name: str = "kafka-network"):
        self.loop = uvloop.new_event_loop()
        self.handling = None          # the connection whose requests are being handled
        self.handled = 0              # requests handled: which handling an answer falls in
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def call(self, fn, *args) -> None:
        """fn(*args) on the loop, soon (from any thread). From the loop's own thread this
        skips the wake-up write to the loop's self-pipe (a syscall and an epoll round)."""
        try:
            if threading.get_ident() == self._thread.ident:
                self.loop.call_soon(fn, *args)
            else:
                self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:          # the loop is closed: the broker is stopping
            pass

    @property
    def in_loop(self) -> bool:
        return threading.get_ident() == self._thread.ident

    def run(self, coro, timeout_s: float = 30.0):
        """Run a coroutine on the loop and wait for its result (from another thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()


class KafkaListener:
    def __init__(self, endpoint: Endpoint, api, max_frame_bytes: int, idle_ms: int,
                 name: str = "kafka", security=None, loop: EventLoop | None = None):
        self.endpoint, self.api, self.name, self.security = endpoint, api, name, security
        self.max_frame_bytes, self.idle_s = max_frame_bytes, idle_ms / 1000
        self._own_loop = loop is None
        self._loop = loop
        self._server = None
        self._serve_lock = threading.Lock()
        self._serving = False
        self._sock: socket.socket | None = None
        self._conns: set[_Conn] = set()
        self._lock = threading.Lock()
        self._stopped = False
        self._workers = concurrent.futures.ThreadPoolExecutor(
            WORKERS, thread_name_prefix=f"{name}-worker")
        self._tls = None
        self._handshake_s = HANDSHAKE_TIMEOUT_S
        self.port = 0
        self.connections_accepted = 0
        self._stats: dict[str, list] = {}      # api name → [requests, bytes in, bytes out]
        self.quotas = getattr(api, "quota_tracker", None)   # protocol.quotas.QuotaTracker
        self._bytes_later = 0

    @property
    def loop(self) -> EventLoop:
        return self._loop

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._conns)

    def start(self, serve: bool = True) -> int:
        """Bind (and serve, unless `serve` is False); the port actually bound."""
        host = self.endpoint.host or "0.0.0.0"
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, self.endpoint.port))
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._sock, self.port = sock, sock.getsockname()[1]
        self._tls = self.security.tls_context(self.endpoint.listener) if self.security else None
        self._handshake_s = HANDSHAKE_TIMEOUT_S        # read now: tests change it before start
        if self._loop is None:
            self._loop = EventLoop(f"{self.name}-loop-{self.port}")
        if serve:
            self.serve()
        return self.port

    def serve(self, wait: bool = True) -> None:
        """Listen and accept (once). `wait=False` only asks the loop to: for a caller that
        holds a lock the loop may be waiting for (the broker's)."""
        with self._serve_lock:
            if self._serving or self._stopped:
                return
            self._serving = True
        if wait:
            self._loop.run(self._open())
        else:
            self._loop.call(lambda: self._loop.loop.create_task(self._open()))

    async def _open(self) -> None:
        if self._stopped:
            return
        self._server = await self._loop.loop.create_server(lambda: _Conn(self), sock=self._sock,
                                                           backlog=1024)
        self._check_idle()

    @property
    def serving(self) -> bool:
        return self._serving

    def stop(self) -> None:
        with self._serve_lock:
            if self._stopped:
                return
            self._stopped = True
        if self._loop is not None and self._sock is not None:
            async def close():           # after an `_open` already asked for (one loop, FIFO)
                if self._server is None:
                    self._sock.close()    # bound, never served
                    return
                self._server.close()
                for conn in list(self._conns):
                    conn.close()
            try:
                self._loop.run(close(), timeout_s=10)
            except Exception:          # the loop is gone already
                pass
        if self._own_loop and self._loop is not None:
            self._loop.stop()
        self._workers.shutdown(wait=False, cancel_futures=True)

    # -- what a connection needs ------------------------------------------------------------------
    def session(self, peer_host: str, peer_cert: dict | None) -> Session:
        if self.security is None:
            return Session(self.endpoint.listener, peer_host)
        return self.security.session(self.endpoint, peer_host, peer_cert)

    def _check_idle(self) -> None:
        if self._stopped:
            return
        limit = time.monotonic() - self.idle_s
        for conn in list(self._conns):
            if conn.last_active < limit and not conn.slots:
                log.info("%s: closing %s:%s idle for %.0f s", self.name, *conn.peer[:2],
                         self.idle_s)
                conn.close()
        self._loop.loop.call_later(min(1.0, self.idle_s / 4), self._check_idle)

    def count(self, request, sent: int) -> None:
        with self._lock:
            row = self._stats.setdefault(request.api_name, [0, 0, 0])
            row[0] += 1
            row[1] += request.size
            row[2] += sent

    def count_out(self, sent: int) -> None:
        with self._lock:
            self._bytes_later += sent

    def stats(self) -> dict[str, dict]:
        """Per API: requests, bytes in, bytes out (answers sent at once; those sent later,
        parked fetches and acknowledged produces, are `later_bytes_out` of the listener)."""
        with self._lock:
            out = {name: {"requests": n, "bytes_in": bin_, "bytes_out": bout}
                   for name, (n, bin_, bout) in self._stats.items()}
            out["*"] = {"requests": 0, "bytes_in": 0, "bytes_out": self._bytes_later}
            return out


class _Slot:
    __slots__ = ("request", "frame", "ready", "mutes", "throttle_ms")

    def __init__(self, request):
        self.request, self.frame, self.ready, self.mutes = request, None, False, False
        self.throttle_ms = 0


class _ReadyNow:
    """The callback handed to Deferred.when_ready: called during the registration itself
    (the answer was already there: the caller answers at once, in this loop pass), it only
    notes it; called later, from any thread, it runs `later`. The lock decides a call that
    races the end of the registration."""

    __slots__ = ("later", "_registering", "_now", "_lock")

    def __init__(self, later):
        self.later = later
        self._registering, self._now = True, False
        self._lock = threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            if self._registering:
                self._now = True
                return
        self.later()

    def settled_during_registration(self) -> bool:
        with self._lock:
            self._registering = False
            return self._now


class _QuotaHook:
    """protocol.handlers.QuotaHook for one request: measures it against the broker's
    QuotaTracker and keeps the largest throttle on its slot (read when the answer is sent)."""

    __slots__ = ("tracker", "slot", "client_id", "t0")

    def __init__(self, tracker, slot: _Slot, client_id: str | None):
        self.tracker, self.slot, self.client_id = tracker, slot, client_id or ""
        self.t0 = time.perf_counter_ns()

    def _keep(self, ms: int) -> int:
        if ms > self.slot.throttle_ms:
            self.slot.throttle_ms = ms
        return ms

    def request_time(self, request, principal: str) -> int:
        if not self.tracker.enabled(q.REQUEST):
            return 0
        spent = q.request_percentage(time.perf_counter_ns() - self.t0)
        return self._keep(self.tracker.record(q.REQUEST, q.principal_name(principal),
                                              self.client_id, spent))

    def bandwidth(self, request, principal: str, nbytes: int) -> int:
        kind = q.PRODUCE if request.api_key == PRODUCE else q.FETCH
        if not self.tracker.enabled(kind):
            return 0
        return self._keep(self.tracker.record(kind, q.principal_name(principal), self.client_id,
                                              nbytes))


class _Conn(asyncio.Protocol):
    """One connection, on the loop. Everything here runs on the loop thread."""

    def __init__(self, listener: KafkaListener):
        self.listener = listener
        self.loop = listener.loop
        self.transport = None
        self.peer = ("?", 0)
        self.state = Connection(listener.max_frame_bytes)
        self.slots: deque[_Slot] = deque()
        self.session: Session | None = None
        self.tls: TlsSession | None = None
        self.muted = False              # a request in flight blocks the next ones
        self.throttled_until = 0.0      # client quotas: nothing is read before (monotonic s)
        self._unthrottle_timer = None
        self.draining = False           # no more requests: close once the answers are out
        self.write_paused = False
        self.read_paused = False
        self.closing = False
        self.last_active = time.monotonic()
        self._handshake_timer = None
        self._fd = -1                   # the socket's, for an answer sent at once
        self._send_now = False
        self._sent_now_in = -1          # the handling (loop.handled) of the last one

    # -- asyncio's callbacks -------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._fd = sock.fileno()
            except OSError:
                pass
        self.peer = transport.get_extra_info("peername") or ("?", 0)
        listener = self.listener
        with listener._lock:
            listener._conns.add(self)
            listener.connections_accepted += 1
        if listener._stopped:
            self.close()
            return
        if listener._tls is not None:
            self.tls = TlsSession(listener._tls)
            self._handshake_timer = self.loop.loop.call_later(listener._handshake_s,
                                                              self._handshake_timeout)
        else:
            self.session = listener.session(self.peer[0], None)

    def connection_lost(self, exc) -> None:
        self.closing = True
        if self._unthrottle_timer is not None:
            self._unthrottle_timer.cancel()
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
        with self.listener._lock:
            self.listener._conns.discard(self)

    def eof_received(self):
        """The peer is done sending: answer what it asked, then close."""
        self._close_after_answers()
        return True                   # keep the transport open for those answers

    def pause_writing(self) -> None:
        self.write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self.write_paused = False
        self._update_reading()
        self._pump()

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        self.last_active = time.monotonic()
        if self.tls is not None:
            try:
                data = self.tls.receive(data)
            except TlsError as exc:
                log.info("%s: closing %s:%s: TLS: %s", self.listener.name, *self.peer[:2], exc)
                self._send_tls()              # the alert OpenSSL made, best-effort
                self.close()
                return
            self._send_tls()
            if self.session is None and self.tls.handshake_done:
                self._handshake_timer.cancel()
                self.session = self.listener.session(self.peer[0], self.tls.peer_certificate)
            if self.tls.peer_closed:          # close_notify: answer what came before it
                self.draining = True
            if not data:
                if self.draining:
                    self._close_after_answers()
                return
        try:
            self.state.receive_data(data)
        except ProtocolError as exc:
            log.warning("%s: closing %s:%s: %s", self.listener.name, *self.peer[:2], exc)
            self.close()
            return
        draining, self.draining = self.draining, False
        self._pump()                          # what came before a close_notify is answered
        if draining:
            self._close_after_answers()

    # -- requests --------------------------------------------------------------------------------
    def _pump(self) -> None:
        """Handle what can be handled now, in order."""
        session = self.session
        while not (self.closing or self.draining or self.muted or session is None
                   or session.closing or self._unthrottle_timer is not None) \
                and len(self.slots) < MAX_PIPELINED:
            try:
                request = self.state.next_request()
            except ProtocolError as exc:
                log.warning("%s: closing %s:%s: %s", self.listener.name, *self.peer[:2], exc)
                self._close_after_answers()
                return
            if request is None:
                break
            if _authenticating(session) and request.size > SASL_MAX_RECEIVE_BYTES:
                self._too_big_before_auth(request.size)
                return
            loop, before = self.loop, self.loop.handling
            loop.handling = self
            loop.handled += 1
            try:
                self._handle(request)
            finally:
                loop.handling = before
        if (session is not None and not self.closing and not session.closing
                and _authenticating(session)
                and self.state.buffered_bytes > SASL_MAX_RECEIVE_BYTES):
            self._too_big_before_auth(self.state.buffered_bytes)    # a partial request
            return
        self._update_reading()

    def _handle(self, request) -> None:
        slot = _Slot(request)
        self.slots.append(slot)
        tracker = self.listener.quotas
        hook = _QuotaHook(tracker, slot, request.client_id) \
            if tracker is not None and tracker.enabled() else None
        if request.api_key not in INLINE:
            self.muted = slot.mutes = True
            self._submit(self._answer_in_worker, slot, request, self.session, hook)
            return
        frame = self._answer(request, self.session, hook)
        if frame is _CLOSE:
            self.close()
            return
        self.listener.count(request, len(frame) if isinstance(frame, bytes) else 0)
        if isinstance(frame, Deferred):
            if request.api_key != PRODUCE:
                self.muted = slot.mutes = True
            ready = _ReadyNow(lambda: self._ready_later(slot, frame))
            if not frame.when_ready(ready):
                self._submit(self._wait_in_worker, slot, frame)
            elif ready.settled_during_registration():
                self._deferred_ready(slot, frame, pump=False)   # this _pump goes on
            return
        slot.frame, slot.ready = frame, True
        self._flush()
        if self.session.closing:      # e.g. failed authentication: its answer is the last
            log.info("%s: closing %s:%s after %s", self.listener.name, *self.peer[:2],
                     request.api_name)
            self._close_after_answers()

    def _answer(self, request, session, hook=None):
        """The answer (bytes, a Deferred, None) or _CLOSE; from the loop or a worker."""
        try:
            return answer(self.state, self.listener.api, request, session, hook)
        except ProtocolError as exc:
            log.warning("%s: closing %s:%s: %s", self.listener.name, *self.peer[:2], exc)
            return _CLOSE
        except Exception:
            log.exception("%s: %s v%s from %s:%s failed", self.listener.name, request.api_name,
                          request.api_version, *self.peer[:2])
            if not request.expects_response:
                return _CLOSE                  # acks=0 gets no answer: closing is its signal
            return self.state.respond_error(request, ErrorCode.UNKNOWN_SERVER_ERROR)

    def _submit(self, fn, *args) -> None:
        try:
            self.listener._workers.submit(fn, *args)
        except RuntimeError:          # the pool is shut down: the listener is stopping
            self.close()

    def _deferred_ready(self, slot: _Slot, deferred: Deferred, pump: bool = True) -> None:
        try:
            frame = deferred.result()
            if isinstance(frame, bytes):
                self.listener.count_out(len(frame))
        except Exception:
            log.exception("%s: %s v%s from %s:%s failed", self.listener.name,
                          slot.request.api_name, slot.request.api_version, *self.peer[:2])
            frame = self.state.respond_error(slot.request, ErrorCode.UNKNOWN_SERVER_ERROR)
        self._fill(slot, frame, pump)

    def _ready_later(self, slot: _Slot, deferred: Deferred) -> None:
        """A Deferred of this connection settled after its registration, on any thread. On
        the loop, in the middle of ANOTHER connection's request (the append that completed
        a follower's parked fetch, the follower's fetch that acknowledged a produce) or
        of a fetcher's or a timer's work, the answer is written at once: handing it to
        the loop's next pass made it wait for the rest of that request's handling and a
        loop round (~0.2 ms of an acks=all produce's 2 at 200 records/s). The first such
        answer of a handling is sent by a write(2) of its own when nothing is buffered
        before it (`_write`): uvloop sends a transport's writes only once the loop pass's
        I/O callbacks are done.
        Reading this connection's next request waits for the loop; an answer never runs
        inside its own connection's handling."""
        loop = self.loop
        if not loop.in_loop or loop.handling is self:
            loop.call(self._deferred_ready, slot, deferred)
            return
        # One write(2) per connection and handling: more answers settled by the same request
        # (acks of several produces by one follower fetch) go out together at the loop
        # pass's end, as uvloop coalesces them, not as a segment each.
        self._send_now = loop.handling is None or self._sent_now_in != loop.handled
        try:
            self._deferred_ready(slot, deferred, pump=False)
        except Exception:              # never into the append or fetch that settled it
            log.exception("%s: answering %s:%s", self.listener.name, *self.peer[:2])
            self.close()
            return
        finally:
            self._send_now = False
        loop.call(self._pump)

    def _wait_in_worker(self, slot: _Slot, deferred: Deferred) -> None:
        try:
            deferred.result()
        except Exception:             # _deferred_ready answers it, on the loop
            pass
        self.loop.call(self._deferred_ready, slot, deferred)

    def _answer_in_worker(self, slot: _Slot, request, session, hook=None) -> None:
        frame = self._answer(request, session, hook)
        if isinstance(frame, Deferred):
            try:
                frame = frame.result()
            except Exception:
                log.exception("%s: %s v%s from %s:%s failed", self.listener.name,
                              request.api_name, request.api_version, *self.peer[:2])
                frame = self.state.respond_error(request, ErrorCode.UNKNOWN_SERVER_ERROR)
        self.listener.count(request, len(frame) if isinstance(frame, bytes) else 0)
        self.loop.call(self._fill, slot, frame)

    def _fill(self, slot: _Slot, frame, pump: bool = True) -> None:
        if frame is _CLOSE:
            self.close()
            return
        slot.frame, slot.ready = frame, True
        if slot.mutes:
            self.muted = False
        self._flush()
        if self.session is not None and self.session.closing:
            log.info("%s: closing %s:%s after %s", self.listener.name, *self.peer[:2],
                     slot.request.api_name)
            self._close_after_answers()
            return
        if pump:
            self._pump()

    def _flush(self) -> None:
        while self.slots and self.slots[0].ready:
            slot = self.slots.popleft()
            if slot.frame and not self.closing:
                self._write(slot.frame)
            if slot.throttle_ms > 0:
                self._throttle(slot.throttle_ms)
        if self.draining and not self.slots:
            self.close()

    def _throttle(self, ms: int) -> None:
        """Kafka's ThrottledChannel: read nothing more from this connection for `ms`."""
        until = time.monotonic() + ms / 1000.0
        if until <= self.throttled_until:
            return
        self.throttled_until = until
        if self._unthrottle_timer is not None:
            self._unthrottle_timer.cancel()
        self._unthrottle_timer = self.loop.loop.call_later(ms / 1000.0, self._unthrottle)
        self._update_reading()

    def _unthrottle(self) -> None:
        self._unthrottle_timer = None
        if self.closing:
            return
        self._update_reading()
        self._pump()

    def _write(self, data: bytes) -> None:
        if self.tls is not None:
            try:
                self.tls.send(data)
            except TlsError as exc:
                log.warning("%s: closing %s:%s: TLS: %s", self.listener.name, *self.peer[:2], exc)
                self.close()
                return
            self._send_tls()
        elif self._send_now and self._fd >= 0 and not self.closing \
                and self.transport.get_write_buffer_size() == 0:
            self._send_now, self._sent_now_in = False, self.loop.handled
            write_at_once(self._fd, self.transport, data)
        else:
            self.transport.write(data)

    def _send_tls(self) -> None:
        out = self.tls.outgoing()
        if out and self.transport is not None and not self.transport.is_closing():
            self.transport.write(out)

    def _update_reading(self) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        stop = (self.write_paused or len(self.slots) >= MAX_PIPELINED
                or ((self.muted or self._unthrottle_timer is not None)
                    and self.state.buffered_bytes > MUTED_BUFFER_BYTES))
        if stop and not self.read_paused:
            self.transport.pause_reading()
            self.read_paused = True
        elif not stop and self.read_paused:
            self.transport.resume_reading()
            self.read_paused = False

    # -- closing ----------------------------------------------------------------------------------
    def _close_after_answers(self) -> None:
        """No more requests; close once every pending answer is out."""
        self.draining = True
        if not self.slots:
            self.close()

    def _too_big_before_auth(self, size: int) -> None:
        log.warning("%s: closing %s:%s: a request of %s+ bytes before SASL authentication "
                    "completed (the limit is %d, Kafka's sasl.server.max.receive.size)",
                    self.listener.name, *self.peer[:2], size, SASL_MAX_RECEIVE_BYTES)
        self.slots.clear()
        self.close()

    def _handshake_timeout(self) -> None:
        if self.session is None and not (self.transport and self.transport.is_closing()):
            log.info("%s: closing %s:%s: TLS handshake not finished in %g s", self.listener.name,
                     *self.peer[:2], self.listener._handshake_s)
            self.close()

    def close(self) -> None:
        """Close now (what is queued is dropped); a TLS connection sends close_notify."""
        self.closing = True
        self.slots.clear()
        if self.transport is None or self.transport.is_closing():
            return
        if self.tls is not None:
            self.tls.close()
            self._send_tls()
        self.transport.close()


_CLOSE = object()


def _authenticating(session: Session | None) -> bool:
    """A SASL connection whose exchange has not succeeded (yet)."""
    return session is not None and session.sasl is not None and not session.sasl.authenticated
