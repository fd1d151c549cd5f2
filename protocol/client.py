"""The client's side of one Kafka connection, sans-I/O: requests out as bytes, responses in.

A broker speaks it to another broker (a follower fetching from its leader); the socket
loop that carries the bytes lives in the actor shell (actors/broker_link.py).

Rules:
- `request(body)` frames a kio request entity (or an EncodedRequest: a body already
  written, with its api key and version): a request header of the version its schema
  names (v1, or v2 for flexible versions), the next correlation id and this connection's
  client_id, then the body. The caller writes the bytes; nothing is buffered here.
- Kafka answers a connection's requests in the order sent, so each response is decoded as
  the answer to the OLDEST outstanding request: `receive_data(data)` then
  `next_response()` → (correlation id, response entity), or None while a frame is
  incomplete. The response header is v0 for ApiVersions (KIP-511) and for non-flexible
  versions, v1 otherwise (the response class says).
- Anything else is the end of the connection: a response with no request outstanding, a
  correlation id that is not the oldest outstanding one, a body kio cannot decode, a frame
  over max_frame_bytes. They raise ProtocolError and every later call raises
  ConnectionFailed: close the socket and open a new connection.
- Pure: no sockets, no clock.
"""

from __future__ import annotations

import io
import struct
from collections import deque
from typing import NamedTuple

from kio.serial import entity_reader, entity_writer

from . import hot_writers
from .build import request_class, response_class
from .errors import ConnectionFailed, MalformedFrame, ProtocolError
from .frames import DEFAULT_MAX_FRAME_BYTES, FrameDecoder
from .versions import ApiKey

__all__ = ["ClientConnection", "EncodedRequest"]

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
_HEAD = struct.Struct(">ihhi")        # size, api key, version, correlation id
_WRITERS: dict[type, tuple] = {}
_READERS: dict[tuple[int, int], tuple] = {}


def _writers(cls: type) -> tuple:
    """(header class, its writer, the body's writer, whether both are hand-written)."""
    found = _WRITERS.get(cls)
    if found is None:
        hot = hot_writers.writer_for(cls)
        found = _WRITERS[cls] = (cls.__header_schema__, entity_writer(cls.__header_schema__),
                                 hot or entity_writer(cls), hot is not None)
    return found


def _readers(api_key: int, version: int) -> tuple:
    found = _READERS.get((api_key, version))
    if found is None:
        cls = response_class(api_key, version)
        flexible = cls.__header_schema__.__flexible__ and api_key != ApiKey.API_VERSIONS
        found = _READERS[(api_key, version)] = (flexible, entity_reader(cls))
    return found


class EncodedRequest(NamedTuple):
    """A request body already in Kafka's bytes (a hot path's own writer made it:
    protocol/hot_writers.py `fetch_plan_bytes`); `request` frames it as it frames an entity
    of that api key and version."""
    api_key: int
    version: int
    payload: bytes


class ClientConnection:
    def __init__(self, client_id: str | None, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES):
        self.client_id = client_id
        self._decoder = FrameDecoder(max_frame_bytes)
        self._outstanding: deque[tuple[int, int, int]] = deque()  # (correlation, key, version)
        self._frames: deque[bytes] = deque()
        self._next_correlation = 1
        self._failed: ProtocolError | None = None
        self._header_tails: dict[tuple[int, int], bytes] = {}

    @property
    def in_flight(self) -> int:
        """Requests sent and not answered yet."""
        return len(self._outstanding)

    def request(self, body) -> tuple[int, bytes]:
        """(correlation id, the request's bytes) for a kio request entity or an
        EncodedRequest."""
        self._check_alive()
        if type(body) is EncodedRequest:
            return self._request_encoded(body)
        cls = type(body)
        header_cls, write_header, write_body, hot = _writers(cls)
        correlation = self._take_correlation()
        buf = io.BytesIO()
        buf.write(bytes(4))
        if hot:
            hot_writers.write_request_header(buf, cls.__api_key__, cls.__version__, correlation,
                                             self.client_id, header_cls.__flexible__)
        else:
            write_header(buf, header_cls(request_api_key=cls.__api_key__,
                                         request_api_version=cls.__version__,
                                         correlation_id=correlation, client_id=self.client_id))
        write_body(buf, body)
        with buf.getbuffer() as view:
            _SIZE.pack_into(view, 0, len(view) - 4)
        self._outstanding.append((correlation, int(cls.__api_key__), int(cls.__version__)))
        return correlation, buf.getvalue()

    def _take_correlation(self) -> int:
        correlation = self._next_correlation
        self._next_correlation = (correlation + 1) & 0x7FFFFFFF or 1
        return correlation

    def _request_encoded(self, body: EncodedRequest) -> tuple[int, bytes]:
        correlation = self._take_correlation()
        api_key, version, payload = body
        key = (api_key, version)
        tail = self._header_tails.get(key)
        if tail is None:         # the header after the correlation id: client id (and tags)
            buf = io.BytesIO()
            header_cls = _writers(request_class(api_key, version))[0]
            hot_writers.write_request_header(buf, api_key, version, 0, self.client_id,
                                             header_cls.__flexible__)
            tail = self._header_tails[key] = buf.getvalue()[_HEAD.size - 4:]
        self._outstanding.append((correlation, api_key, version))
        return correlation, b"".join((
            _HEAD.pack(_HEAD.size - 4 + len(tail) + len(payload), api_key, version, correlation),
            tail, payload))

    def receive_data(self, data: bytes) -> None:
        self._check_alive()
        try:
            self._frames.extend(self._decoder.feed(data))
        except ProtocolError as exc:
            raise self._fail(exc) from None

    def next_response(self):
        """(correlation id, response entity) of the oldest outstanding request, or None."""
        self._check_alive()
        if not self._frames:
            return None
        frame = self._frames.popleft()
        if not self._outstanding:
            raise self._fail(MalformedFrame("a response with no request outstanding"))
        correlation, api_key, version = self._outstanding.popleft()
        if len(frame) < 4 or _CORRELATION.unpack_from(frame)[0] != correlation:
            raise self._fail(MalformedFrame(f"response out of order: expected correlation id "
                                            f"{correlation}"))
        flexible, read_body = _readers(api_key, version)
        offset = 4
        try:
            if flexible:        # header v1: tagged fields after the correlation id
                if frame[offset] != 0:
                    raise ValueError("tagged fields in a response header")
                offset += 1
            body, _ = read_body(frame, offset)
        except Exception as exc:   # kio raises BufferUnderflow, ValueError, ...
            raise self._fail(MalformedFrame(f"undecodable response to api_key {api_key} "
                                            f"v{version}: {type(exc).__name__}: {exc}")) from None
        return correlation, body

    def _check_alive(self) -> None:
        if self._failed is not None:
            raise ConnectionFailed(f"connection already failed: {self._failed.reason}")

    def _fail(self, exc: ProtocolError) -> ProtocolError:
        self._failed = exc
        self._frames.clear()
        self._outstanding.clear()
        return exc
