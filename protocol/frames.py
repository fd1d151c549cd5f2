"""Kafka framing: a 4-byte big-endian signed size, then that many bytes of frame.

Rules:
- `FrameDecoder.feed(data)` returns every frame completed by `data` (without the size
  prefix) and keeps the rest. With nothing pending, frames are copied straight out of
  `data` and only a torn tail is buffered; otherwise bytes are appended to one buffer and
  each frame is copied out once, so a multi-MiB produce frame arriving in thousands of
  small reads costs linear time, not quadratic.
- The size is checked as soon as its 4 bytes are in: a negative size is `MalformedFrame`, one
  over `max_frame_bytes` is `FrameTooLarge`, before any of the payload is buffered (a client
  cannot make the broker hold 2 GiB by announcing it).
- After an error the decoder is dead: it drops its buffer and every later `feed` raises
  again, because nothing after a bad size can be framed. The frames completed before the
  bad size in that same `feed` travel on the exception (`exc.frames`), so a caller that
  wants to answer them first can.
- Pure: no sockets, no clock.
"""

from __future__ import annotations

import struct

from .errors import FrameTooLarge, MalformedFrame, ProtocolError

__all__ = ["FrameDecoder", "encode_frame", "DEFAULT_MAX_FRAME_BYTES", "SIZE"]

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024   # Kafka's socket.request.max.bytes default
SIZE = struct.Struct(">i")
# Compact the buffer once this much consumed data sits in front of it: small enough to keep
# memory bounded, large enough that the (memmove) compaction is amortised over many frames.
_COMPACT_AT = 64 * 1024


def encode_frame(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload


class FrameDecoder:
    __slots__ = ("max_frame_bytes", "_buf", "_pos", "_error")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES):
        if max_frame_bytes < 0:
            raise ValueError("max_frame_bytes must be >= 0")
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._pos = 0          # start of the first unconsumed byte in _buf
        self._error: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return len(self._buf) - self._pos

    @property
    def failed(self) -> ProtocolError | None:
        return self._error

    def feed(self, data: bytes) -> list[bytes]:
        if self._error is not None:
            raise type(self._error)(f"decoder is dead: {self._error.reason}")
        frames: list[bytes] = []
        buf = self._buf
        if len(buf) == self._pos and isinstance(data, bytes):
            # Nothing pending: frame straight out of `data`; only its torn tail is buffered
            # (the common case, whole requests per read, copies each byte once, not twice).
            buf.clear()
            pos = self._frames_from(data, 0, frames)
            if pos < len(data):
                buf += memoryview(data)[pos:]
            self._pos = 0
            return frames
        buf += data
        pos = self._frames_from(buf, self._pos, frames)
        if pos == len(buf):
            buf.clear()
            pos = 0
        elif pos >= _COMPACT_AT and pos * 2 >= len(buf):
            del buf[:pos]
            pos = 0
        self._pos = pos
        return frames

    def _frames_from(self, source, pos: int, frames: list[bytes]) -> int:
        """Append the whole frames of `source` from `pos` on; the position after them."""
        end = len(source)
        try:
            while end - pos >= 4:
                (size,) = SIZE.unpack_from(source, pos)
                if size < 0:
                    raise MalformedFrame(f"negative frame size {size}")
                if size > self.max_frame_bytes:
                    raise FrameTooLarge(
                        f"frame of {size} bytes is over the {self.max_frame_bytes}-byte limit")
                stop = pos + 4 + size
                if stop > end:
                    break
                # One copy out; the memoryview is released at once so that the buffer may
                # still be resized by the next feed.
                with memoryview(source) as view:
                    frames.append(bytes(view[pos + 4:stop]))
                pos = stop
        except ProtocolError as exc:
            exc.frames = frames
            self._error = exc
            self._buf = bytearray()
            self._pos = 0
            raise
        return pos
