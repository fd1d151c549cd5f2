"""Hostile bytes: whatever a peer sends, the protocol layer answers, waits, or raises a
ProtocolError (close the connection) — never another exception, never a hang, never an
unbounded buffer."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from protocol.codec import decode_request
from protocol.connection import Connection
from protocol.errors import FrameTooLarge, MalformedRequest, ProtocolError
from protocol.frames import FrameDecoder
from protocol.versions import SUPPORTED
from tests.protocol_samples import sample_frame

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]

FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])
MAX_FRAME = 64 * 1024
VERSIONS = [(k, v) for k, (lo, hi) in SUPPORTED.items() for v in range(lo, hi + 1)]
SAMPLES = {kv: sample_frame(*kv, correlation_id=1000 + i) for i, kv in enumerate(VERSIONS)}


def chunked(data: bytes, sizes: list[int]) -> list[bytes]:
    out, pos, i = [], 0, 0
    while pos < len(data):
        step = sizes[i % len(sizes)] if sizes else len(data)
        out.append(data[pos:pos + step])
        pos += step
        i += 1
    return out


def pump(data: bytes, sizes: list[int]) -> tuple[list, ProtocolError | None]:
    """Feed `data` in chunks, handing out and answering every request as a listener would.
    Returns the requests and the error that closed the connection, if any."""
    conn = Connection(max_frame_bytes=MAX_FRAME)
    handed = []
    try:
        for chunk in chunked(data, sizes):
            conn.receive_data(chunk)
            for _ in range(len(data) + 1):          # bounded: at most one request a byte
                req = conn.next_request()
                if req is None:
                    break
                handed.append(req)
                out = conn.respond_error(req, 35)
                assert out is None or struct.unpack_from(">i", out)[0] == len(out) - 4
            else:
                raise AssertionError("next_request never returned None")
            assert conn.buffered_bytes <= len(data)
    except ProtocolError as exc:
        assert conn.failed is exc
        return handed, exc
    return handed, None


sizes = st.lists(st.integers(1, 64), min_size=1, max_size=8)


@FUZZ
@given(st.binary(max_size=512), sizes)
def test_random_bytes_in_random_chunks_only_raise_protocol_errors(data, chunk_sizes):
    pump(data, chunk_sizes)


@FUZZ
@given(st.binary(max_size=256))
def test_random_frames_decode_or_are_malformed(payload):
    try:
        decode_request(payload)
    except MalformedRequest:
        pass


@FUZZ
@given(st.integers(0, 2**15 - 1), st.integers(-2, 20), st.binary(max_size=200))
def test_random_bodies_behind_a_valid_prefix(api_key, version, body):
    # A plausible header makes kio actually parse the random body.
    payload = struct.pack(">hhih", api_key % 70, version, 1, -1) + body
    pump(struct.pack(">i", len(payload)) + payload, [len(payload) + 4])


mutation = st.one_of(
    st.tuples(st.just("truncate"), st.integers(0, 10_000)),
    st.tuples(st.just("flip"), st.lists(st.integers(0, 10_000 * 8), min_size=1, max_size=4)),
    st.tuples(st.just("size"), st.integers(-(2**31), 2**31 - 1)),
    st.tuples(st.just("size_near"), st.integers(-8, 8)),
)


def mutate(frame: bytes, how) -> bytes:
    kind, arg = how
    if kind == "truncate":
        return frame[:arg % (len(frame) + 1)]
    if kind == "flip":
        data = bytearray(frame)
        for bit in arg:
            bit %= len(data) * 8
            data[bit // 8] ^= 1 << (bit % 8)
        return bytes(data)
    size = arg if kind == "size" else len(frame) - 4 + arg
    return struct.pack(">i", size) + frame[4:]


@FUZZ
@given(st.sampled_from(VERSIONS), mutation, sizes, st.booleans())
def test_mutated_valid_requests_decode_or_close(api_version, how, chunk_sizes, follow):
    frame = mutate(SAMPLES[api_version], how)
    # A valid request after the mutated one: it comes out intact unless framing was lost.
    tail = SAMPLES[(3, 12)] if follow else b""
    handed, error = pump(frame + tail, chunk_sizes)
    if how[0] == "truncate" and len(frame) < len(SAMPLES[api_version]) and not follow:
        assert handed == [] and error is None     # an incomplete frame just waits
    if how == ("size_near", 0):
        assert error is None and len(handed) == 1 + follow


@FUZZ
@given(st.integers(MAX_FRAME + 1, 2**31 - 1), st.integers(0, 4096), sizes)
def test_an_oversized_size_is_rejected_without_buffering_the_payload(size, extra, chunk_sizes):
    decoder = FrameDecoder(max_frame_bytes=MAX_FRAME)
    data = struct.pack(">i", size) + b"\x00" * extra
    with pytest.raises(FrameTooLarge):
        for chunk in chunked(data, chunk_sizes):
            decoder.feed(chunk)
            assert decoder.buffered < 4      # never more than a partial size prefix
    assert decoder.buffered == 0

    conn = Connection(max_frame_bytes=MAX_FRAME)
    for chunk in chunked(data, chunk_sizes):
        conn.receive_data(chunk)
        assert conn.buffered_bytes < 4
    with pytest.raises(FrameTooLarge):
        conn.next_request()


@FUZZ
@given(st.lists(st.sampled_from(VERSIONS), min_size=1, max_size=6), sizes)
def test_valid_request_streams_come_out_whole_however_they_are_split(picks, chunk_sizes):
    stream = b"".join(SAMPLES[p] for p in picks)
    handed, error = pump(stream, chunk_sizes)
    assert error is None
    assert [(r.api_key, r.api_version) for r in handed] == picks
    assert [r.correlation_id for r in handed] == [
        struct.unpack_from(">i", SAMPLES[p], 8)[0] for p in picks]
