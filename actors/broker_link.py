"""BrokerLink: this broker's connection to another broker's Kafka listener (the inter-broker
listener), on the broker's event loop, one request at a time: the socket under a replica
fetcher.

Rules:
- Everything runs on the broker's loop (actors/listener.py EventLoop): `await connect`,
  `await call`; `close()` from the loop. No thread of its own, so an answer is handled
  where the listener's requests are, without a GIL hand-off.
- `connect(endpoint)`: TCP (asyncio sets TCP_NODELAY); TLS for SSL and SASL_SSL endpoints
  (the broker's client context, actors/security.py, checking the peer's name); SASL
  (SaslHandshake v1, then SaslAuthenticate v2 rounds, protocol/security/sasl_client.py) for
  SASL endpoints before anything else. An authentication the peer refuses raises SaslFailed
  with its message. It gives up after `timeout_s`. When the peer answers a session
  lifetime (its connections.max.reauth.ms, KIP-368), the link re-authenticates on the same
  connection before its next request once 85% of it has passed, as Kafka's clients do
  (they pick 85-95%), so the peer never closes it as expired.
- `call(body, timeout_s)` sends one request (protocol/client.py frames it) and waits for its
  answer; a lost connection, a timeout or a protocol error closes the link and raises: the
  caller opens a new one (a peer that restarted, or a frozen one, costs one reconnect).
- `send(body, timeout_s, on_done)` is the same request without a wait: `on_done(answer,
  None)` runs inside the data callback that completes the answer, `on_done(None, exc)` when
  the link fails, closes or times out first (a timeout closes it). A caller that goes
  round in callbacks (the replica fetcher) applies an answer and sends its next request
  before the loop turns to anything else; an awaited answer resumes its task only after
  every other I/O callback of that loop pass. A request sent from inside an I/O callback
  on a plaintext connection with nothing buffered leaves by a write(2) of its own: uvloop
  writes a transport's data only once the pass's I/O callbacks are done. Before sending,
  a caller of `send` awaits `ready()` (the re-authentication below, when due).
- Failpoint (chaos): `cut_until(monotonic_s)` makes the link unusable until then: a link
  that is cut closes, and connecting raises ConnectionRefusedError, as a network partition
  between two live brokers would look to the fetcher.
"""

from __future__ import annotations

import asyncio
import time

from actors.listener import write_at_once
from controller.layout import Endpoint
from protocol.build import build_request
from protocol.client import ClientConnection
from protocol.errors import ProtocolError
from protocol.security.sasl_client import SaslFailed

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36

__all__ = ["BrokerLink", "SaslFailed"]


class BrokerLink:
    def __init__(self, client_id: str, security=None, max_frame_bytes: int = 100 << 20):
        self.client_id, self.security, self.max_frame_bytes = client_id, security, max_frame_bytes
        self.endpoint: Endpoint | None = None
        self._transport: asyncio.Transport | None = None
        self._wire: _Wire | None = None
        self._conn: ClientConnection | None = None
        self._pending: _Pending | None = None
        self._fd = -1                           # a plaintext socket's, for write(2) at once
        self._cut_until = 0.0
        self._reauth_at: float | None = None    # monotonic s: re-authenticate before then
        self._authenticating = False
        self.reauthentications = 0

    @property
    def connected(self) -> bool:
        return self._transport is not None

    def cut_until(self, monotonic_s: float) -> None:
        """Failpoint: no connection until then (the current one closes now; a time in the
        past lifts the cut)."""
        self._cut_until = monotonic_s
        if monotonic_s > time.monotonic():
            self.close()

    async def connect(self, endpoint: Endpoint, timeout_s: float = 10.0) -> None:
        self.close()
        if time.monotonic() < self._cut_until:
            raise ConnectionRefusedError(f"link to {endpoint.url()} cut (failpoint)")
        loop = asyncio.get_running_loop()
        tls = None
        if endpoint.security_protocol in ("SSL", "SASL_SSL"):
            tls = self.security.client_tls_context(endpoint.listener)
        self._conn = ClientConnection(self.client_id, self.max_frame_bytes)
        wire = self._wire = _Wire(self)
        try:
            transport, _ = await asyncio.wait_for(loop.create_connection(
                lambda: wire, endpoint.host, endpoint.port, ssl=tls,
                server_hostname=endpoint.host if tls else None), timeout_s)
        except BaseException:
            self._wire = None
            raise
        if self._wire is not wire:          # closed meanwhile
            transport.abort()
            raise ConnectionError("link closed while connecting")
        self._transport = transport
        self.endpoint = endpoint
        sock = transport.get_extra_info("socket")
        self._fd = sock.fileno() if sock is not None and tls is None else -1
        if endpoint.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            try:
                await self._authenticate(endpoint, timeout_s)
            except BaseException:
                self.close()
                raise

    async def _authenticate(self, endpoint: Endpoint, timeout_s: float) -> None:
        self._authenticating = True
        try:
            lifetime_ms = await self._sasl_exchange(endpoint, timeout_s)
        finally:
            self._authenticating = False
        self._reauth_at = time.monotonic() + 0.85 * lifetime_ms / 1000 if lifetime_ms else None

    async def _sasl_exchange(self, endpoint: Endpoint, timeout_s: float) -> int:
        """SaslHandshake and SaslAuthenticate rounds; the session lifetime answered (ms)."""
        client = self.security.client_sasl(endpoint.listener)
        lifetime_ms = 0
        shake = await self.call(build_request(SASL_HANDSHAKE, 1, None,
                                              mechanism=client.mechanism), timeout_s)
        if shake.error_code.value:
            raise SaslFailed(f"{endpoint.url()}: SaslHandshake {client.mechanism}: error "
                             f"{shake.error_code.value} (enabled there: {shake.mechanisms})",
                             shake.error_code.value)
        token = client.first()
        while token is not None:
            answer = await self.call(build_request(SASL_AUTHENTICATE, 2, None,
                                                   auth_bytes=token), timeout_s)
            if answer.error_code.value:
                raise SaslFailed(f"{endpoint.url()} as {client.username}: "
                                 f"{answer.error_message or 'authentication'}",
                                 answer.error_code.value)
            lifetime = answer.session_lifetime          # kio: a timedelta
            lifetime_ms = int(lifetime.total_seconds() * 1000) if lifetime else 0
            token = client.next(answer.auth_bytes)
        return lifetime_ms

    @property
    def reauthentication_due(self) -> bool:
        return (self._reauth_at is not None and not self._authenticating
                and time.monotonic() >= self._reauth_at and self.endpoint is not None)

    async def ready(self, timeout_s: float) -> None:
        """Re-authenticate first when the peer's session lifetime says so (closes the link
        and raises on failure)."""
        if self.reauthentication_due:
            try:
                await self._authenticate(self.endpoint, timeout_s)
            except BaseException:
                self.close()
                raise
            self.reauthentications += 1

    async def call(self, body, timeout_s: float):
        """Send one request and return its answer (the link closes on any failure)."""
        await self.ready(timeout_s)
        waiting = asyncio.get_running_loop().create_future()
        try:
            self.send(body, timeout_s, lambda answer, exc: _settle(waiting, answer, exc))
            return await waiting
        except BaseException:
            self.close()
            raise

    def send(self, body, timeout_s: float, on_done) -> None:
        """Send one request; `on_done(answer, None)` or `on_done(None, exc)` once (rules)."""
        transport, conn = self._transport, self._conn
        if transport is None or conn is None:
            raise ConnectionError("not connected")
        if self._pending is not None:
            raise RuntimeError("one request at a time on a BrokerLink")
        _, data = conn.request(body)
        loop = asyncio.get_running_loop()
        # a timer, not asyncio.wait_for: wait_for's own future and callback cost every
        # answer one more loop pass on the follower's path
        self._pending = _Pending(on_done, loop.call_later(timeout_s, self._time_out))
        if self._fd >= 0 and transport.get_write_buffer_size() == 0:
            write_at_once(self._fd, transport, data)
        else:
            transport.write(data)

    def close(self) -> None:
        self._abort(ConnectionError("link closed"))

    def _abort(self, exc: BaseException) -> None:
        transport, self._transport, self._wire = self._transport, None, None
        self._reauth_at = None
        self._fd = -1
        if transport is not None:
            transport.abort()
        self._fail(exc)

    def _time_out(self) -> None:
        if self._pending is not None:
            self._pending.timer = None
            self._abort(asyncio.TimeoutError("no answer in time"))

    # -- what the current connection reports (a closed one's reports are ignored) ----------------
    def on_data(self, wire: "_Wire", data: bytes) -> None:
        conn = self._conn
        if wire is not self._wire or conn is None:
            return
        try:
            conn.receive_data(data)
            got = conn.next_response()
        except ProtocolError as exc:
            self._abort(exc)
            return
        if got is not None:
            pending, self._pending = self._pending, None
            if pending is not None:
                pending.done(got[1], None)

    def on_lost(self, wire: "_Wire") -> None:
        if wire is not self._wire:
            return
        self._transport = self._wire = None
        self._fd = -1
        where = self.endpoint.url() if self.endpoint else "the peer"
        self._fail(ConnectionError(f"{where} closed the connection"))

    def _fail(self, exc: BaseException) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.done(None, exc)


class _Pending:
    """The request in flight: who hears of its end, and its timer."""

    __slots__ = ("on_done", "timer")

    def __init__(self, on_done, timer):
        self.on_done, self.timer = on_done, timer

    def done(self, answer, exc) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.on_done(answer, exc)


def _settle(waiting: asyncio.Future, answer, exc) -> None:
    if waiting.done():
        return
    if exc is not None:
        waiting.set_exception(exc)
    else:
        waiting.set_result(answer)


class _Wire(asyncio.Protocol):
    """One connection's callbacks, handed to the link that opened it."""

    def __init__(self, link: BrokerLink):
        self.link = link

    def data_received(self, data: bytes) -> None:
        self.link.on_data(self, data)

    def connection_lost(self, exc) -> None:
        self.link.on_lost(self)
