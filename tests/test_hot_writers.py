"""protocol/hot_writers.py writes exactly kio's bytes: generated FetchResponse and
ProduceResponse entities of every covered version, and the followers' FetchRequest with its
header, each encoded by kio's generic writer and by the hand-written one, must give the same
bytes; and the codec and the client connection use the hand-written ones."""

from __future__ import annotations

import datetime
import importlib
import io
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from protocol import codec
from protocol.build import build
from protocol.hot_writers import (FETCH_REQUEST_VERSIONS, FETCH_VERSIONS, PRODUCE_VERSIONS,
                                  write_request_header, writer_for)

pytestmark = pytest.mark.unit

I32 = st.integers(-2**31, 2**31 - 1)
I64 = st.integers(-2**63, 2**63 - 1)
SMALL = st.sampled_from([-1, 0, 1, 7, 127, 128, 300, 2**31 - 1])
ERRORS = st.sampled_from([ErrorCode.none, ErrorCode.not_leader_or_follower,
                          ErrorCode.offset_out_of_range, ErrorCode.unknown_server_error])
TEXT = st.text(max_size=40) | st.sampled_from(["", "é" * 70, "x" * 200])
RECORDS = st.none() | st.binary(max_size=300) | st.sampled_from([b"r" * 127, b"r" * 128])


def _response_module(api: str, version: int):
    return importlib.import_module(f"kio.schema.{api}.v{version}.response")


COVERED = {_response_module("fetch", v).FetchResponse for v in FETCH_VERSIONS} | \
    {_response_module("produce", v).ProduceResponse for v in PRODUCE_VERSIONS}


def _maybe_endpoints(draw, module, cls, kw: dict) -> None:
    """node_endpoints (a top-level tagged field) for the versions that have it."""
    if "node_endpoints" in cls.__dataclass_fields__:
        kw["node_endpoints"] = tuple(
            module.NodeEndpoint(node_id=draw(SMALL), host=draw(TEXT), port=draw(SMALL),
                                rack=draw(st.none() | TEXT))
            for _ in range(draw(st.integers(0, 2))))


@st.composite
def fetch_responses(draw, version: int):
    m = _response_module("fetch", version)

    def partition():
        kw = dict(
            partition_index=draw(I32), error_code=draw(ERRORS), high_watermark=draw(I64),
            last_stable_offset=draw(I64 | SMALL), log_start_offset=draw(I64 | SMALL),
            aborted_transactions=draw(st.none() | st.lists(st.builds(
                m.AbortedTransaction, producer_id=I64, first_offset=I64), max_size=3)
                .map(tuple)),
            preferred_read_replica=draw(SMALL), records=draw(RECORDS))
        if draw(st.booleans()):
            kw["diverging_epoch"] = m.EpochEndOffset(epoch=draw(SMALL), end_offset=draw(I64))
        if draw(st.booleans()):
            kw["current_leader"] = m.LeaderIdAndEpoch(leader_id=draw(SMALL),
                                                      leader_epoch=draw(SMALL))
        if draw(st.booleans()):
            kw["snapshot_id"] = m.SnapshotId(end_offset=draw(SMALL), epoch=draw(SMALL))
        return m.PartitionData(**kw)

    def topic():
        parts = tuple(partition() for _ in range(draw(st.integers(0, 3))))
        if "topic_id" in m.FetchableTopicResponse.__dataclass_fields__:
            tid = draw(st.none() | st.uuids())
            return m.FetchableTopicResponse(topic_id=tid, partitions=parts)
        return m.FetchableTopicResponse(topic=draw(TEXT), partitions=parts)

    kw = dict(throttle_time=datetime.timedelta(milliseconds=draw(st.integers(0, 10**6))),
              error_code=draw(ERRORS), session_id=draw(I32),
              responses=tuple(topic() for _ in range(draw(st.integers(0, 3)))))
    _maybe_endpoints(draw, m, m.FetchResponse, kw)
    return m.FetchResponse(**kw)


@st.composite
def produce_responses(draw, version: int):
    m = _response_module("produce", version)
    fields = m.PartitionProduceResponse.__dataclass_fields__

    def partition():
        at = draw(st.none() | st.integers(0, 2**41).map(
            lambda ms: datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)))
        kw = dict(index=draw(I32), error_code=draw(ERRORS), base_offset=draw(I64),
                  log_append_time=at, log_start_offset=draw(I64 | SMALL),
                  record_errors=tuple(m.BatchIndexAndErrorMessage(
                      batch_index=draw(SMALL), batch_index_error_message=draw(st.none() | TEXT))
                      for _ in range(draw(st.integers(0, 2)))),
                  error_message=draw(st.none() | TEXT))
        if "current_leader" in fields and draw(st.booleans()):
            kw["current_leader"] = m.LeaderIdAndEpoch(leader_id=draw(SMALL),
                                                      leader_epoch=draw(SMALL))
        return m.PartitionProduceResponse(**kw)

    kw = dict(responses=tuple(
        m.TopicProduceResponse(name=draw(TEXT), partition_responses=tuple(
            partition() for _ in range(draw(st.integers(0, 3)))))
        for _ in range(draw(st.integers(0, 3)))),
        throttle_time=datetime.timedelta(milliseconds=draw(st.integers(0, 10**6))))
    _maybe_endpoints(draw, m, m.ProduceResponse, kw)
    return m.ProduceResponse(**kw)


def _both(entity) -> tuple[bytes, bytes]:
    kio_buf, hot_buf = io.BytesIO(), io.BytesIO()
    entity_writer(type(entity))(kio_buf, entity)
    writer_for(type(entity))(hot_buf, entity)
    return kio_buf.getvalue(), hot_buf.getvalue()


STRATEGIES = {"fetch": fetch_responses, "produce": produce_responses}


@pytest.mark.parametrize("api,version", [("fetch", v) for v in FETCH_VERSIONS] +
                         [("produce", v) for v in PRODUCE_VERSIONS])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_answers_are_kios_bytes(api, version, data):
    entity = data.draw(STRATEGIES[api](version))
    reference, hot = _both(entity)
    assert hot == reference
    read, size = entity_reader(type(entity))(hot, 0)
    assert read == entity and size == len(hot)


def test_every_covered_class_and_only_those_is_written_by_hand_and_the_codec_uses_it():
    neighbours = {_response_module("fetch", 11).FetchResponse,
                  _response_module("produce", 8).ProduceResponse,
                  _response_module("produce", 13).ProduceResponse,
                  _response_module("fetch", 12).PartitionData}
    for cls in COVERED:
        assert writer_for(cls) is not None
        assert codec.writer_for(cls).__qualname__ == writer_for(cls).__qualname__
    for cls in neighbours:
        assert writer_for(cls) is None
        assert codec.writer_for(cls).__qualname__ == entity_writer(cls).__qualname__
    requests = {v: _request_module("fetch", v).FetchRequest for v in (11, 12, 13)}
    assert {v for v, cls in requests.items() if writer_for(cls) is not None} == \
        set(FETCH_REQUEST_VERSIONS) == {12}


def test_a_fetch_answer_as_the_handlers_build_it_is_the_same_frame():
    """A typical follower answer (one partition, its records, the current leader tagged)
    through the codec: the frame kio would have written."""
    part = build(1, 16, "PartitionData", partition_index=3, error_code=0, high_watermark=10,
                 last_stable_offset=10, log_start_offset=0,
                 diverging_epoch=build(1, 16, "EpochEndOffset", epoch=-1, end_offset=-1),
                 current_leader=build(1, 16, "LeaderIdAndEpoch", leader_id=2, leader_epoch=5),
                 snapshot_id=build(1, 16, "SnapshotId", end_offset=-1, epoch=-1),
                 aborted_transactions=None, preferred_read_replica=-1, records=b"x" * 70)
    body = build(1, 16, "FetchResponse", error_code=0, session_id=9, responses=(
        build(1, 16, "FetchableTopicResponse", topic=None, topic_id=uuid.UUID(int=7),
              partitions=(part,)),), node_endpoints=())
    request = codec.Request(api_key=1, api_version=16, correlation_id=42, client_id="c",
                            header=None, body=None, size=0)
    frame = codec.encode_response(request, body)
    buf = io.BytesIO()
    entity_writer(type(body))(buf, body)
    assert frame[8:9] == b"\x00" and frame[9:] == buf.getvalue()


def _request_module(api: str, version: int):
    return importlib.import_module(f"kio.schema.{api}.v{version}.request")


@st.composite
def fetch_requests(draw, version: int):
    m = _request_module("fetch", version)
    topics = tuple(m.FetchTopic(topic=draw(TEXT), partitions=tuple(
        m.FetchPartition(partition=draw(I32), current_leader_epoch=draw(I32 | SMALL),
                         fetch_offset=draw(I64), last_fetched_epoch=draw(I32 | SMALL),
                         log_start_offset=draw(I64 | SMALL), partition_max_bytes=draw(I32))
        for _ in range(draw(st.integers(0, 3)))))
        for _ in range(draw(st.integers(0, 3))))
    forgotten = tuple(m.ForgottenTopic(topic=draw(TEXT), partitions=tuple(
        draw(st.lists(I32, max_size=3)))) for _ in range(draw(st.integers(0, 2))))
    return m.FetchRequest(
        cluster_id=draw(st.none() | TEXT), replica_id=draw(I32),
        max_wait=datetime.timedelta(milliseconds=draw(st.integers(0, 2**31 - 1))),
        min_bytes=draw(I32), max_bytes=draw(I32), isolation_level=draw(st.integers(0, 1)),
        session_id=draw(I32), session_epoch=draw(I32), topics=topics,
        forgotten_topics_data=forgotten, rack_id=draw(TEXT))


@pytest.mark.parametrize("version", FETCH_REQUEST_VERSIONS)
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_the_followers_fetch_request_is_kios_bytes(version, data):
    entity = data.draw(fetch_requests(version))
    reference, hot = _both(entity)
    assert hot == reference
    read, size = entity_reader(type(entity))(hot, 0)
    assert read == entity and size == len(hot)


@settings(max_examples=200, deadline=None)
@given(correlation=I32, client_id=st.none() | TEXT, version=st.sampled_from([1, 2]))
def test_the_request_header_is_kios_bytes(correlation, client_id, version):
    header_cls = importlib.import_module(f"kio.schema.request_header.v{version}.header") \
        .RequestHeader
    reference, hot = io.BytesIO(), io.BytesIO()
    entity_writer(header_cls)(reference, header_cls(
        request_api_key=1, request_api_version=12, correlation_id=correlation,
        client_id=client_id))
    write_request_header(hot, 1, 12, correlation, client_id, flexible=version == 2)
    assert hot.getvalue() == reference.getvalue()


def test_a_follower_fetch_through_the_client_connection_is_the_frame_kio_writes():
    """protocol/client.ClientConnection frames the hand-written request: the frame a
    kio-only client writes for the same entity and correlation id."""
    from kio.schema.request_header.v2.header import RequestHeader
    from protocol.client import ClientConnection
    m = _request_module("fetch", 12)
    body = m.FetchRequest(
        replica_id=2, max_wait=datetime.timedelta(milliseconds=500), min_bytes=1,
        max_bytes=10 << 20, isolation_level=0, session_id=77, session_epoch=3,
        topics=(m.FetchTopic(topic="t", partitions=(m.FetchPartition(
            partition=0, current_leader_epoch=4, fetch_offset=1234, last_fetched_epoch=4,
            log_start_offset=0, partition_max_bytes=1 << 20),)),),
        forgotten_topics_data=(), rack_id="")
    correlation, frame = ClientConnection("broker-2").request(body)
    buf = io.BytesIO()
    entity_writer(RequestHeader)(buf, RequestHeader(request_api_key=1, request_api_version=12,
                                                    correlation_id=correlation,
                                                    client_id="broker-2"))
    entity_writer(type(body))(buf, body)
    assert frame[4:] == buf.getvalue() and int.from_bytes(frame[:4], "big") == len(frame) - 4
