"""protocol/connection.py: the per-connection state machine a socket loop drives."""

from __future__ import annotations

import struct

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataResponse
from kafka.protocol.producer import ProduceResponse

from protocol.codec import api_versions_response
from protocol.build import build
from protocol.connection import Connection
from protocol.errors import (
    ConnectionFailed, FrameTooLarge, MalformedFrame, MalformedRequest, ProtocolError,
    UnsupportedRequest,
)
from protocol.frames import encode_frame
from tests.protocol_samples import frame_of, sample_frame

pytestmark = pytest.mark.unit


def drain(conn: Connection) -> list:
    out = []
    while (req := conn.next_request()) is not None:
        out.append(req)
    return out


def test_nothing_until_a_whole_frame_arrived_then_exactly_that_request():
    conn = Connection()
    frame = sample_frame(3, 12, correlation_id=1)
    for byte in frame[:-1]:
        conn.receive_data(bytes([byte]))
        assert conn.next_request() is None
    conn.receive_data(frame[-1:])
    req = conn.next_request()
    assert (req.api_key, req.api_version, req.correlation_id, req.served) == (3, 12, 1, True)
    assert conn.next_request() is None
    assert (conn.requests_received, conn.bytes_received) == (1, len(frame))


def test_pipelined_requests_come_out_in_order():
    conn = Connection()
    frames = [sample_frame(18, 3, 1), sample_frame(3, 12, 2), sample_frame(0, 9, 3),
              sample_frame(1, 12, 4)]
    conn.receive_data(b"".join(frames))
    assert [r.correlation_id for r in drain(conn)] == [1, 2, 3, 4]
    assert conn.requests_received == 4 and conn.buffered_bytes == 0


def test_a_client_handshake_kafka_python_style():
    # kafka-python sends ApiVersions v4 first, gets the KIP-511 answer, retries at our max.
    conn = Connection()
    conn.receive_data(frame_of(ApiVersionsRequest[4](client_software_name="kafka-python",
                                                     client_software_version="3.0.12"), 1))
    first = conn.next_request()
    assert not first.served
    out = conn.respond_error(first, 35)
    answer = ApiVersionsResponse.decode(out[4:], version=4, header=True)
    assert answer.error_code == 35
    retry = min(4, answer.api_keys[0].max_version)
    conn.receive_data(sample_frame(18, retry, correlation_id=2))
    second = conn.next_request()
    assert second.served
    out = conn.respond(second, api_versions_response(second))
    assert ApiVersionsResponse.decode(out[4:], version=retry, header=True).error_code == 0
    assert conn.responses_sent == 2


def test_a_decodable_unserved_request_is_answered_not_closed():
    conn = Connection()
    conn.receive_data(sample_frame(3, 13, correlation_id=11))          # Metadata v13 > our 12
    req = conn.next_request()
    assert req.body is not None and not req.served
    answer = MetadataResponse.decode(conn.respond_error(req, 35)[4:], version=13, header=True)
    assert answer.header.correlation_id == 11
    assert answer.error_code == 35 and answer.topics
    conn.receive_data(sample_frame(3, 13, correlation_id=12))     # Metadata v13 > our 12
    req = conn.next_request()
    assert not req.served
    answer = MetadataResponse.decode(conn.respond_error(req, 35)[4:], version=13, header=True)
    assert [t.error_code for t in answer.topics] == [35, 35]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_is_served_and_its_error_answers_name_every_partition(version):
    conn = Connection()
    conn.receive_data(sample_frame(0, version, correlation_id=5))
    req = conn.next_request()
    assert req.body is not None and req.served
    answer = ProduceResponse.decode(conn.respond_error(req, 2)[8:], version=version)
    assert [(t.name, [(p.index, p.error_code) for p in t.partition_responses])
            for t in answer.responses] == [("orders", [(0, 2), (2, 2)]), ("audit", [(1, 2)])]


@pytest.mark.parametrize("api_key,version", [(999, 0), (1, 19), (-1, 0)])
def test_an_unanswerable_api_closes_the_connection(api_key, version):
    conn = Connection()
    conn.receive_data(encode_frame(struct.pack(">hhih", api_key, version, 8, -1)))
    with pytest.raises(UnsupportedRequest) as info:
        conn.next_request()
    assert (info.value.api_key, info.value.correlation_id) == (api_key, 8)
    assert isinstance(conn.failed, UnsupportedRequest)
    with pytest.raises(ConnectionFailed):
        conn.next_request()
    with pytest.raises(ConnectionFailed):
        conn.receive_data(b"more")


def test_a_malformed_request_closes_the_connection():
    conn = Connection()
    bad = sample_frame(0, 9, correlation_id=3)
    conn.receive_data(encode_frame(bad[4:-6]))
    with pytest.raises(MalformedRequest) as info:
        conn.next_request()
    assert info.value.correlation_id == 3
    with pytest.raises(ConnectionFailed, match="already failed"):
        conn.next_request()


def test_requests_before_a_bad_size_are_still_handed_out_then_it_fails():
    conn = Connection(max_frame_bytes=1024)
    good = sample_frame(3, 12, correlation_id=1)
    conn.receive_data(good + struct.pack(">i", 5000) + b"x" * 100)
    conn.receive_data(b"y" * 4000)                     # dropped, never buffered
    assert conn.buffered_bytes == len(good) - 4
    assert conn.next_request().correlation_id == 1
    with pytest.raises(FrameTooLarge):
        conn.next_request()
    assert conn.bytes_received == len(good) + 4104
    with pytest.raises(ConnectionFailed):
        conn.next_request()


def test_a_negative_size_fails_the_connection():
    conn = Connection()
    conn.receive_data(b"\x80\x00\x00\x00")
    with pytest.raises(MalformedFrame):
        conn.next_request()


def test_every_failure_is_a_protocol_error():
    for exc in (ConnectionFailed, FrameTooLarge, MalformedFrame, MalformedRequest,
                UnsupportedRequest):
        assert issubclass(exc, ProtocolError)


def test_respond_builds_the_frame_for_that_request():
    conn = Connection()
    conn.receive_data(sample_frame(3, 12, correlation_id=42))
    req = conn.next_request()
    broker = build(3, 12, "MetadataResponseBroker", node_id=1, host="10.0.0.1", port=9092)
    out = conn.respond(req, build(3, 12, None, brokers=(broker,), cluster_id="rayka",
                                  controller_id=1))
    answer = MetadataResponse.decode(out[4:], version=12, header=True)
    assert answer.header.correlation_id == 42
    assert (answer.brokers[0].host, answer.brokers[0].port, answer.cluster_id) == (
        "10.0.0.1", 9092, "rayka")
