"""One Kafka connection as a state machine the socket loop drives (bytes in, bytes out).

Rules:
- The loop calls `receive_data(data)` with whatever it read, then `next_request()` until it
  returns None (more bytes needed), answering each request with `respond` / `respond_error`
  before asking for the next: Kafka handles one request at a time per connection and
  answers in order, so there is no other state to keep.
- `next_request()` raises a `ProtocolError` when the connection must close: a bad frame
  size, a malformed request, or an (api_key, version) that can be neither decoded nor
  answered (an unknown api_key: Kafka closes the connection then too, since without a
  schema it cannot even write a response header). Errors surface in stream order: requests
  framed before a bad size prefix are still handed out first.
- A decoded request whose version is not served (not advertised) comes out
  with `request.served == False`: the caller answers `respond_error(request, 35)`
  (UNSUPPORTED_VERSION) rather than closing, since closing makes clients reconnect in a
  storm (seen with librdkafka). ApiVersions above our max is answered the KIP-511 way.
- After a successful SaslHandshake v0 the client sends bare SASL tokens until it is
  authenticated: while `sasl_tokens` is set (protocol.handlers.answer sets and clears it)
  each frame comes out as a SaslAuthenticate v0 request answered with a bare token.
- After a fatal error the connection is dead: every later call raises `ConnectionFailed`.
- Pure: no sockets, no clock, no threads.
"""

from __future__ import annotations

from collections import deque

from .codec import (Request, decode_request, encode_error_frame, encode_response,
                    sasl_token_request)
from .errors import ConnectionFailed, ProtocolError, UnsupportedRequest
from .frames import DEFAULT_MAX_FRAME_BYTES, FrameDecoder
from .versions import ApiKey

__all__ = ["Connection"]


class Connection:
    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES):
        self._decoder = FrameDecoder(max_frame_bytes)
        self._frames: deque[bytes] = deque()
        self._pending_error: ProtocolError | None = None   # framing error not yet surfaced
        self._failed: ProtocolError | None = None
        self.requests_received = 0
        self.bytes_received = 0
        self.responses_sent = 0
        self.sasl_tokens = False        # frames are bare SASL tokens (SaslHandshake v0)

    @property
    def failed(self) -> ProtocolError | None:
        """The error that killed the connection, once surfaced by `next_request`."""
        return self._failed

    @property
    def buffered_bytes(self) -> int:
        return self._decoder.buffered + sum(len(f) for f in self._frames)

    def receive_data(self, data: bytes) -> None:
        self._check_alive()
        self.bytes_received += len(data)
        if self._pending_error is not None:
            return        # nothing after a bad size prefix can be framed: drop it
        try:
            self._frames.extend(self._decoder.feed(data))
        except ProtocolError as exc:
            self._frames.extend(getattr(exc, "frames", ()))
            self._pending_error = exc

    def next_request(self) -> Request | None:
        self._check_alive()
        if not self._frames:
            if self._pending_error is not None:
                raise self._fail(self._pending_error)
            return None
        try:
            frame = self._frames.popleft()
            request = sasl_token_request(frame) if self.sasl_tokens else decode_request(frame)
        except ProtocolError as exc:
            raise self._fail(exc)
        if request.body is None and not _answerable(request):
            raise self._fail(UnsupportedRequest(
                "no schema for this api_key/version", api_key=request.api_key,
                api_version=request.api_version, correlation_id=request.correlation_id))
        self.requests_received += 1
        return request

    def respond(self, request: Request, body) -> bytes:
        frame = encode_response(request, body)
        self.responses_sent += 1
        return frame

    def respond_error(self, request: Request, code: int) -> bytes | None:
        """The error answer, or None when none can be encoded (then close the connection)."""
        frame = encode_error_frame(request, code)
        if frame is not None:
            self.responses_sent += 1
        return frame

    def _check_alive(self) -> None:
        if self._failed is not None:
            raise ConnectionFailed(f"connection already failed: {self._failed.reason}")

    def _fail(self, exc: ProtocolError) -> ProtocolError:
        self._failed = exc
        self._frames.clear()
        return exc


def _answerable(request: Request) -> bool:
    # Without a request schema only ApiVersions can still be answered, at any version
    # (KIP-511: header v0 + v0 body need only the correlation id).
    return request.api_key == ApiKey.API_VERSIONS
