"""protocol/frames.py: Kafka's size-prefixed framing, split anywhere, bounded, linear."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st

from protocol.errors import FrameTooLarge, MalformedFrame, ProtocolError
from protocol.frames import FrameDecoder, encode_frame

pytestmark = pytest.mark.unit


def test_encode_frame_prefixes_a_big_endian_size():
    assert encode_frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert encode_frame(b"") == b"\x00\x00\x00\x00"


def test_every_complete_frame_comes_out_in_order_and_the_rest_waits():
    stream = encode_frame(b"one") + encode_frame(b"") + encode_frame(b"three") + b"\x00\x00"
    d = FrameDecoder()
    assert d.feed(stream) == [b"one", b"", b"three"]
    assert d.buffered == 2
    assert d.feed(b"\x00\x02h") == []
    assert d.feed(b"i") == [b"hi"]
    assert d.buffered == 0


@pytest.mark.parametrize("step", [1, 2, 3, 5, 7, 64])
def test_frames_split_at_every_boundary_come_out_whole(step):
    payloads = [bytes([i]) * i for i in range(0, 40, 3)]
    stream = b"".join(encode_frame(p) for p in payloads)
    d, out = FrameDecoder(), []
    for i in range(0, len(stream), step):
        out += d.feed(stream[i:i + step])
    assert out == payloads and d.buffered == 0


def test_a_frame_of_exactly_the_limit_passes_one_byte_more_is_rejected():
    d = FrameDecoder(max_frame_bytes=10)
    assert d.feed(encode_frame(b"x" * 10)) == [b"x" * 10]
    with pytest.raises(FrameTooLarge) as info:
        d.feed(struct.pack(">i", 11))
    assert "11" in info.value.reason and isinstance(info.value, ProtocolError)


def test_a_negative_size_is_malformed():
    with pytest.raises(MalformedFrame):
        FrameDecoder().feed(b"\xff\xff\xff\xfe")


def test_an_oversized_size_is_rejected_from_its_four_bytes_alone():
    d = FrameDecoder(max_frame_bytes=1024)
    with pytest.raises(FrameTooLarge):
        d.feed(struct.pack(">i", 2**31 - 1))
    assert d.buffered == 0


def test_the_decoder_is_dead_after_an_error():
    d = FrameDecoder(max_frame_bytes=4)
    with pytest.raises(FrameTooLarge):
        d.feed(encode_frame(b"ok") + struct.pack(">i", 5) + b"12345")
    assert isinstance(d.failed, FrameTooLarge)
    with pytest.raises(FrameTooLarge, match="dead"):
        d.feed(encode_frame(b"ok"))
    assert d.buffered == 0


def test_accepts_bytearray_and_memoryview_input():
    d = FrameDecoder()
    assert d.feed(bytearray(encode_frame(b"ab"))) == [b"ab"]
    assert d.feed(memoryview(encode_frame(b"cd"))) == [b"cd"]


def test_a_large_frame_in_small_reads_comes_back_whole():
    """8 MiB in 4 KiB reads (2048 feeds): nothing until the last read, every byte buffered
    meanwhile, then the one frame, byte for byte, and nothing left over. What it costs
    (linear, not quadratic: a decoder re-copying its buffer on each feed would move ~8 GiB)
    is a bench figure: bench/wire_bench.py, wire.frame_decoder.*."""
    payload = bytes(range(256)) * (1 << 15)        # 8 MiB, not uniform: order shows
    frame = encode_frame(payload)
    d, got = FrameDecoder(), []
    for i in range(0, len(frame), 4096):
        got += d.feed(frame[i:i + 4096])
        assert got or d.buffered == i + 4096
    assert got == [payload] and d.buffered == 0


def test_many_small_frames_do_not_accumulate_consumed_bytes():
    d = FrameDecoder()
    stream = b"".join(encode_frame(b"x" * 100) for _ in range(5000))
    n = 0
    for i in range(0, len(stream), 1000):     # every feed leaves a partial frame behind
        n += len(d.feed(stream[i:i + 1000]))
        assert len(d._buf) < 70 * 1024 + 1000
    assert n == 5000


def test_frames_before_a_bad_size_travel_on_the_exception():
    d = FrameDecoder(max_frame_bytes=8)
    with pytest.raises(FrameTooLarge) as info:
        d.feed(encode_frame(b"a") + encode_frame(b"b") + struct.pack(">i", 9))
    assert info.value.frames == [b"a", b"b"]


@given(st.lists(st.binary(max_size=40), max_size=8), st.lists(st.integers(1, 60), max_size=12),
       st.booleans())
@settings(max_examples=300, deadline=None)
def test_any_split_of_any_frames_gives_them_back_in_order(payloads, cuts, as_bytearray):
    """The direct path (nothing pending, frames straight out of `data`) and the buffered
    path mix as reads fall; the frames are the same either way."""
    stream = b"".join(encode_frame(p) for p in payloads)
    d, got, pos = FrameDecoder(), [], 0
    for cut in cuts + [len(stream)]:
        chunk = stream[pos:pos + cut]
        got += d.feed(bytearray(chunk) if as_bytearray else chunk)
        pos += len(chunk)
    assert got == payloads and d.buffered == 0
