"""Kafka framing: a 4-byte big-endian signed size, then that many bytes of frame.

Rules:
- `FrameDecoder.feed(data)` returns every frame completed by `data` (without the size
  prefix) and keeps the rest. Bytes are appended to one buffer and each frame is copied out
  once, so a multi-MiB produce frame arriving in thousands of small reads costs linear time,
  not quadratic.
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
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        pos, end = self._pos, len(buf)
        try:
            while end - pos >= 4:
                (size,) = SIZE.unpack_from(buf, pos)
                if size < 0:
                    raise MalformedFrame(f"negative frame size {size}")
                if size > self.max_frame_bytes:
                    raise FrameTooLarge(
                        f"frame of {size} bytes is over the {self.max_frame_bytes}-byte limit")
                stop = pos + 4 + size
                if stop > end:
                    break
                # One copy out of the buffer; the memoryview is released at once so that
                # the bytearray may still be resized by the next feed.
                with memoryview(buf) as view:
                    frames.append(bytes(view[pos + 4:stop]))
                pos = stop
        except ProtocolError as exc:
            exc.frames = frames
            self._error = exc
            self._buf = bytearray()
            self._pos = 0
            raise
        if pos == end:
            buf.clear()
            pos = 0
        elif pos >= _COMPACT_AT and pos * 2 >= end:
            del buf[:pos]
            pos = 0
        self._pos = pos
        return frames
