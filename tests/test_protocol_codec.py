"""protocol/codec.py and protocol/build.py against an independent encoder (kafka-python).

Requests are encoded by kafka-python and decoded by rayka's codec; answers encoded by the
codec are decoded by kafka-python's response classes and, where kio has the schema, by
kio's own reader. Every (api_key, version) in SUPPORTED is covered table-driven; the
versions kio lacks (protocol/legacy.py) have more tests of their own in
tests/test_protocol_legacy.py.
"""

from __future__ import annotations

import datetime
import struct

import pytest
from kafka.protocol.consumer import LeaveGroupRequest, LeaveGroupResponse, OffsetFetchRequest
from kafka.protocol.metadata import (
    ApiVersionsRequest, ApiVersionsResponse, FindCoordinatorRequest, MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.old.produce import ProduceResponse_v0, ProduceResponse_v1, ProduceResponse_v2
from kafka.protocol.producer import ProduceResponse
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from protocol.build import build, build_entity, error_code, response_class
from protocol.codec import (
    Request, api_versions_response, decode_request, encode_error_frame, encode_response,
    error_response, has_request_schema,
)
from protocol.errors import MalformedRequest, NoResponseSchema, ProtocolError
from protocol.versions import REJECTED_VERSIONS, SUPPORTED, is_served
from replicas.errors import NotLeaderOrFollower, UnknownTopicOrPartition
from tests.protocol_samples import (ASKED, RESPONSES, TOPIC_IDS, asked_names, frame_of,
                                   sample_frame,
                                   sample_request, walk)

pytestmark = pytest.mark.unit

SERVED = [(k, v) for k, (lo, hi) in SUPPORTED.items() for v in range(lo, hi + 1)
          if v not in REJECTED_VERSIONS.get(k, ())]
KIO_VERSIONS = [(k, v) for k, v in SERVED if has_request_schema(k, v)]
MIRRORED = {0, 1, 2, 3, 8, 9, 19, 20, 23, 37, 27, 28, 61}  # error answers name each topic


def decode(frame: bytes) -> Request:
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    return decode_request(frame[4:])


def kio_read(frame: bytes, cls):
    header, n = entity_reader(cls.__header_schema__)(frame, 4)
    body, m = entity_reader(cls)(frame, 4 + n)
    assert 4 + n + m == len(frame)
    return header, body


# -- requests ----------------------------------------------------------------------------------
@pytest.mark.parametrize("api_key,version", SERVED)
def test_kafka_python_requests_decode(api_key, version):
    frame = sample_frame(api_key, version, correlation_id=1234, client_id="kp")
    req = decode(frame)
    assert (req.api_key, req.api_version, req.correlation_id) == (api_key, version, 1234)
    assert req.client_id == "kp" and req.header.client_id == "kp"
    assert req.size == len(frame) - 4
    assert req.served == (api_key != 18 or version <= 3)
    if has_request_schema(api_key, version):
        assert type(req.body) is load_request_schema(api_key, version)
    else:                     # protocol/legacy.py: named as kio's classes of later versions
        newest = SUPPORTED[api_key][1]
        assert type(req.body).__name__ == load_request_schema(api_key, newest).__name__


def test_decoded_fields_match_what_kafka_python_sent():
    produce = decode(sample_frame(0, 9)).body
    assert produce.acks == -1 and produce.timeout == datetime.timedelta(milliseconds=1500)
    assert [(t.name, [(p.index, p.records) for p in t.partition_data])
            for t in produce.topic_data] == [
        ("orders", [(0, b"batch-0"), (2, b"batch-2")]), ("audit", [(1, None)])]
    fetch = decode(sample_frame(1, 12)).body
    assert fetch.isolation_level == 1 and fetch.session_epoch == -1
    assert [(t.topic, [(p.partition, p.fetch_offset) for p in t.partitions])
            for t in fetch.topics] == [("orders", [(0, 10), (2, 0)]), ("audit", [(1, 5)])]
    assert decode(sample_frame(20, 6)).body.topics[1].topic_id == TOPIC_IDS["audit"]


@pytest.mark.parametrize("version", [1, 3, 9, 12])
def test_a_null_client_id_is_accepted(version):
    req = decode(sample_frame(3, version, client_id=None))
    assert req.client_id is None and req.body is not None


@pytest.mark.parametrize("version", [9, 10, 12])
def test_all_topics_metadata_with_trailing_bytes_decodes(version):
    # librdkafka's all-topics Metadata v9+ ends with extra bytes (seen with librdkafka).
    msg = MetadataRequest[version](topics=None, allow_auto_topic_creation=True,
                                   include_cluster_authorized_operations=False,
                                   include_topic_authorized_operations=False)
    payload = frame_of(msg)[4:] + b"\x00\x00\x00"
    req = decode_request(payload)
    assert req.body.topics is None and req.size == len(payload)


def test_frames_too_short_for_a_header_are_malformed():
    for n in range(8):
        with pytest.raises(MalformedRequest) as info:
            decode_request(b"\x00" * n)
        assert info.value.api_key is None


def test_a_truncated_body_is_malformed_and_says_which_request():
    frame = sample_frame(0, 9, correlation_id=77)
    with pytest.raises(MalformedRequest) as info:
        decode_request(frame[4:-5])
    err = info.value
    assert (err.api_key, err.api_version, err.correlation_id) == (0, 9, 77)
    assert isinstance(err, ProtocolError) and "correlation_id=77" in str(err)


def test_an_unknown_tagged_field_is_malformed_because_kio_rejects_it():
    frame = bytearray(sample_frame(18, 3)[4:])
    assert frame[-1] == 0          # body tagged-field count
    frame[-1:] = b"\x01\x05\x00"   # one tag, number 5, empty
    with pytest.raises(MalformedRequest, match="KeyError"):
        decode_request(bytes(frame))


def test_what_no_schema_can_decode_comes_back_without_a_body():
    unknown = decode_request(struct.pack(">hhih", 999, 0, 5, 2) + b"id" + b"junk")
    assert (unknown.body, unknown.header, unknown.client_id) == (None, None, "id")
    assert not unknown.served and unknown.api_name == "API_KEY_999"
    assert decode(sample_frame(3, 12)).api_name == "METADATA"
    fetch_v13 = decode_request(struct.pack(">hhih", 1, 99, 5, -1) + b"junk")
    assert fetch_v13.body is None and fetch_v13.client_id is None and not fetch_v13.served
    produce_v2 = decode(sample_frame(0, 2))
    assert produce_v2.served and produce_v2.header.client_id == "rayka-test"


@pytest.mark.parametrize("version", [0, 1, 2])
def test_a_truncated_produce_v0_to_v2_is_malformed(version):
    with pytest.raises(MalformedRequest):
        decode_request(sample_frame(0, version)[4:-3])


def test_served_and_expects_response():
    assert decode(sample_frame(0, 9)).expects_response
    msg = sample_request(0, 9)
    msg.acks = 0
    acks0 = decode(frame_of(msg))
    assert acks0.served and not acks0.expects_response
    find = decode(frame_of(FindCoordinatorRequest[5](key="g", key_type=0,
                                                     coordinator_keys=["g"])))
    assert find.body is not None and find.served
    find6 = decode(frame_of(FindCoordinatorRequest[6](key="g", key_type=2,
                                                      coordinator_keys=["g:x:0"])))
    assert find6.body is not None and find6.served        # Kafka 4.2's v6
    metadata13 = decode(sample_frame(3, 13))
    assert metadata13.body is not None and not metadata13.served   # decodable, not served
    assert is_served(0, 3) and is_served(0, 2) and is_served(1, 3) and is_served(1, 16)
    assert not is_served(1, 17)


# -- error answers -----------------------------------------------------------------------------
@pytest.mark.parametrize("api_key,version", SERVED)
def test_error_answers_round_trip_through_kio_and_kafka_python(api_key, version):
    req = decode(sample_frame(api_key, version, correlation_id=4321))
    code = 35 if api_key == 18 else 6
    body = error_response(req, code)
    frame = encode_error_frame(req, code)
    assert frame == encode_response(req, body)
    if has_request_schema(api_key, version):
        header, back = kio_read(frame, type(body))
        assert header.correlation_id == 4321 and back == body

    answer_version = 0 if api_key == 18 else version
    answer = RESPONSES[api_key].decode(frame[4:], version=answer_version, header=True)
    assert answer.header.correlation_id == 4321
    tree = answer.to_dict()
    codes = list(walk(tree, "error_code")) + list(walk(tree, "partition_error_code"))
    if api_key == 35 and version < 3:     # DescribeLogDirs v0-2 has no field for it (Kafka)
        assert codes == [] and tree["results"] == []
        return
    assert codes and set(codes) == {code}
    if api_key in MIRRORED and not (api_key == 9 and version >= 8):
        assert asked_names(tree) == set(ASKED)
        per_partition = sorted(p for key in ("index", "partition_index", "partition")
                               for p in walk(tree, key))
        if api_key in (0, 1, 2, 8, 9, 23):
            assert per_partition == [0, 1, 2]


GROUP_VERSIONS = [(k, v) for k, v in SERVED if k in (8, 9, 10, 11, 12, 13, 14, 15, 16, 42)]


@pytest.mark.parametrize("api_key,version", GROUP_VERSIONS)
def test_group_error_answers_echo_what_was_asked(api_key, version):
    # Kafka's getErrorResponse for the group APIs: whatever the request names comes back
    # with the error, with "no node" / "no offset" / "no generation" sentinels.
    req = decode(sample_frame(api_key, version))
    frame = encode_error_frame(req, 16)
    answer = RESPONSES[api_key].decode(frame[4:], version=version, header=True)
    if api_key == 8:
        assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions])
                for t in answer.topics] == [("orders", [(0, 16), (2, 16)]), ("audit", [(1, 16)])]
    elif api_key == 9 and version >= 8:    # each group with the error, nothing else
        assert [(g.group_id, g.error_code, g.topics) for g in answer.groups] == [
            ("g1", 16, []), ("g2", 16, [])]
    elif api_key == 9:
        assert [(t.name, [(p.partition_index, p.committed_offset, p.metadata, p.error_code)
                          for p in t.partitions]) for t in answer.topics] == [
            ("orders", [(0, -1, "", 16), (2, -1, "", 16)]), ("audit", [(1, -1, "", 16)])]
        if version >= 5:
            assert {p.committed_leader_epoch for t in answer.topics for p in t.partitions} \
                == {-1}
        if version >= 2:
            assert answer.error_code == 16
    elif api_key == 10 and version >= 4:
        assert [(c.key, c.node_id, c.host, c.port, c.error_code)
                for c in answer.coordinators] == [("g1", -1, "", -1, 16)]
    elif api_key == 10:
        assert (answer.error_code, answer.node_id, answer.host, answer.port) == (16, -1, "", -1)
    elif api_key == 11:
        assert (answer.error_code, answer.generation_id, answer.leader, answer.member_id,
                answer.members) == (16, -1, "", "", [])
        assert answer.protocol_name == (None if version >= 7 else "")
    elif api_key == 13 and version >= 3:
        assert answer.error_code == 16
        assert [(x.member_id, x.group_instance_id, x.error_code) for x in answer.members] == [
            ("m1", None, 16)]
    elif api_key == 15:
        assert [(g.group_id, g.error_code, g.group_state, g.members)
                for g in answer.groups] == [("g1", 16, "", []), ("g2", 16, "", [])]
    elif api_key == 42:
        assert [(r.group_id, r.error_code) for r in answer.results] == [("g1", 16), ("g2", 16)]
    else:                                 # Heartbeat, LeaveGroup v0-2, SyncGroup, ListGroups
        assert answer.error_code == 16


@pytest.mark.parametrize("version", [3, 4])
def test_leave_group_error_echoes_member_and_instance_ids(version):
    i = LeaveGroupRequest.MemberIdentity
    req = decode(frame_of(LeaveGroupRequest[version](group_id="g", members=[
        i(member_id="m1", group_instance_id=None), i(member_id="", group_instance_id="i-2")])))
    answer = LeaveGroupResponse.decode(encode_error_frame(req, 15)[4:], version=version,
                                       header=True)
    assert [(x.member_id, x.group_instance_id, x.error_code) for x in answer.members] == [
        ("m1", None, 15), ("", "i-2", 15)]


def test_offset_fetch_all_partitions_error_names_no_topic():
    body = error_response(decode(frame_of(OffsetFetchRequest[7](
        group_id="g", topics=None, require_stable=False))), 14)
    assert body.topics == () and body.error_code == 14


def test_fetch_errors_carry_the_top_level_code_from_v7_and_kafkas_sentinels():
    for version, top in ((6, None), (7, 6), (12, 6)):
        body = error_response(decode(sample_frame(1, version)), 6)
        assert getattr(body, "error_code", None) == top
        part = body.responses[0].partitions[0]
        assert (part.high_watermark, part.last_stable_offset, part.records) == (-1, -1, None)


def test_init_producer_id_error_carries_no_producer():
    body = error_response(decode(sample_frame(22, 4)), 15)
    assert (body.error_code, body.producer_id, body.producer_epoch) == (15, -1, -1)


def test_all_topics_metadata_error_lists_no_topics():
    msg = MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)
    body = error_response(decode(frame_of(msg)), 3)
    assert body.topics == () and body.brokers == ()


def test_error_codes_may_be_kafka_errors_or_unknown_ints():
    req = decode(sample_frame(3, 12))
    assert error_response(req, UnknownTopicOrPartition).topics[0].error_code == 3
    assert error_response(req, NotLeaderOrFollower("x")).topics[0].error_code == 6
    # kio's writer takes a code its enum lacks (its reader would not: ValueError).
    frame = encode_error_frame(req, 4242)
    answer = MetadataResponse.decode(frame[4:], version=12, header=True)
    assert answer.topics[0].error_code == 4242


def test_no_answer_without_a_response_schema():
    unknown = decode_request(struct.pack(">hhih", 999, 0, 5, -1))
    assert encode_error_frame(unknown, 35) is None
    with pytest.raises(NoResponseSchema):
        error_response(unknown, 35)


@pytest.mark.parametrize("version,cls", [(0, ProduceResponse_v0), (1, ProduceResponse_v1),
                                         (2, ProduceResponse_v2)])
def test_produce_v0_to_v2_get_a_hand_encoded_unsupported_version(version, cls):
    req = decode(sample_frame(0, version, correlation_id=31))
    frame = encode_error_frame(req, 35)
    assert struct.unpack_from(">ii", frame) == (len(frame) - 4, 31)
    for answer in (ProduceResponse.decode(frame[8:], version=version),
                   cls.decode(frame[8:])):
        tree = answer.to_dict() if hasattr(answer, "to_dict") else {
            "responses": [{"name": t[0], "partition_responses": [
                {"index": p[0], "error_code": p[1], "base_offset": p[2]} for p in t[1]]}
                for t in answer.topics]}
        assert [(t["name"], [(p["index"], p["error_code"], p["base_offset"])
                             for p in t["partition_responses"]])
                for t in tree["responses"]] == [("orders", [(0, 35, -1), (2, 35, -1)]),
                                                ("audit", [(1, 35, -1)])]
    assert len(frame) == 4 + 4 + 4 + (2 + 6 + 4 + 2 + 5 + 4) + [14, 14, 22][version] * 3 \
        + (4 if version else 0)


# -- ApiVersions -------------------------------------------------------------------------------
def test_kip_511_an_apiversions_version_above_ours_gets_v0_error_35_bytes():
    req = decode(frame_of(ApiVersionsRequest[4](client_software_name="kafka-python",
                                                client_software_version="3.0.12"), 9))
    assert req.body is not None and not req.served
    frame = encode_error_frame(req, 35)
    assert frame == (b"\x00\x00\x00\x10" b"\x00\x00\x00\x09"   # size, correlation id (v0)
                     b"\x00\x23"                                 # UNSUPPORTED_VERSION
                     b"\x00\x00\x00\x01" b"\x00\x12\x00\x00\x00\x03")   # [ApiVersions 0-3]
    assert encode_response(req, api_versions_response(req)) == frame
    answer = ApiVersionsResponse.decode(frame[4:], version=4, header=True)
    assert answer.error_code == 35 and answer.api_keys[0].max_version == 3


def test_kip_511_applies_even_where_kio_has_no_schema():
    req = decode_request(struct.pack(">hhih", 18, 9, 3, -1) + b"\x00\x01\x02")
    assert req.body is None
    assert encode_error_frame(req, 35)[8:10] == b"\x00\x23"


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_apiversions_lists_supported_and_always_uses_response_header_v0(version):
    req = decode(sample_frame(18, version, correlation_id=0x01020304))
    frame = encode_response(req, api_versions_response(req))
    assert frame[4:8] == b"\x01\x02\x03\x04"
    assert frame[8:10] == b"\x00\x00"        # error_code right after the correlation id
    if version == 3:
        assert frame[10] == len(SUPPORTED) + 1   # compact array, no header tag byte before
    answer = ApiVersionsResponse.decode(frame[4:], version=version, header=True)
    assert answer.error_code == 0
    assert {a.api_key: (a.min_version, a.max_version) for a in answer.api_keys} == SUPPORTED
    if version == 3:
        assert answer.finalized_features_epoch == -1 and answer.zk_migration_ready is False


def test_flexible_responses_get_response_header_v1():
    req = decode(sample_frame(3, 12, correlation_id=5))
    frame = encode_response(req, build(3, 12, None, cluster_id="c"))
    assert frame[4:9] == b"\x00\x00\x00\x05\x00"      # correlation id + no tagged fields
    assert MetadataResponse.decode(frame[4:], version=12, header=True).cluster_id == "c"
    v8 = decode(sample_frame(3, 8, correlation_id=5))
    frame8 = encode_response(v8, build(3, 8, None, cluster_id="c"))
    assert frame8[8:12] == b"\x00\x00\x00\x00"   # throttle_time right after (header v0)


def test_encode_response_refuses_another_apis_body():
    with pytest.raises(ValueError):
        encode_response(decode(sample_frame(3, 12)), build(0, 9, None))


# -- build -------------------------------------------------------------------------------------
def test_build_drops_unknown_fields_and_fills_the_rest_with_zero_values():
    old = build(0, 3, "PartitionProduceResponse", index=1, error_code=0, base_offset=5,
                log_start_offset=2, record_errors=(), not_a_field=1)
    assert (old.index, old.base_offset, old.log_append_time) == (1, 5, None)
    new = build(0, 9, "PartitionProduceResponse", index=1)
    assert (new.error_code, new.base_offset, new.log_start_offset, new.record_errors,
            new.error_message) == (ErrorCode.none, 0, -1, (), None)
    meta = build(3, 12, "MetadataResponseTopic", name="t", partitions=())
    assert meta.topic_id is None and meta.is_internal is False


def test_build_converts_plain_numbers():
    resp = build(0, 9, None, throttle_time_ms=250)
    assert resp.throttle_time == datetime.timedelta(milliseconds=250)
    assert build(3, 12, None, throttle_time=7).throttle_time == datetime.timedelta(
        milliseconds=7)
    part = build(0, 9, "PartitionProduceResponse", index=0, error_code=6,
                 log_append_time=1_700_000_000_123)
    assert part.error_code is ErrorCode.not_leader_or_follower
    assert part.log_append_time.timestamp() == 1_700_000_000.123
    assert build(0, 9, "PartitionProduceResponse", log_append_time=-1).log_append_time is None
    assert error_code(UnknownTopicOrPartition) is ErrorCode.unknown_topic_or_partition


def test_built_responses_encode_and_kafka_python_reads_them():
    part = build(0, 9, "PartitionProduceResponse", index=2, base_offset=100,
                 log_append_time=-1, log_start_offset=0)
    body = build(0, 9, None, responses=(build(0, 9, "TopicProduceResponse", name="orders",
                                              partition_responses=(part,)),),
                 throttle_time_ms=3)
    frame = encode_response(decode(sample_frame(0, 9, correlation_id=8)), body)
    answer = ProduceResponse.decode(frame[4:], version=9, header=True)
    p = answer.responses[0].partition_responses[0]
    assert (answer.throttle_time_ms, p.index, p.base_offset, p.log_append_time_ms,
            p.error_code) == (3, 2, 100, -1, 0)


def test_zero_filled_entities_exist_for_every_served_request_and_response():
    for api_key, version in KIO_VERSIONS:
        build_entity(load_request_schema(api_key, version))
        assert build(api_key, version, None).__version__ == version


def test_unknown_classes_and_apis_are_reported():
    with pytest.raises(KeyError):
        build(0, 9, "NoSuchEntity")
    with pytest.raises(NoResponseSchema):
        response_class(999, 0)
    assert response_class(3, 12).__name__ == "MetadataResponse"


def test_none_for_a_field_this_version_cannot_null_becomes_its_default_or_zero():
    # Metadata's topic name is nullable from v12; a topic-id-only v10 request echoed into
    # a v10 error answer must still encode.
    assert build(3, 10, "MetadataResponseTopic", name=None).name == ""
    assert build(3, 12, "MetadataResponseTopic", name=None).name is None
    assert build(3, 12, None, controller_id=None).controller_id == -1


def test_apiversions_v3_carries_the_supported_and_finalized_features():
    # decoded by kio's own reader: the tagged fields a Java 4.x client reads to pick
    # transaction.version 2 (TransactionManager.maybeUpdateTransactionV2Enabled)
    from kio.schema.api_versions.v3.response import ApiVersionsResponse as Kio3
    req = decode(sample_frame(18, 3, correlation_id=5))
    frame = encode_response(req, api_versions_response(
        req, finalized=({"transaction.version": 2}, 7)))
    answer, size = entity_reader(Kio3)(frame, 8)     # after size and correlation id
    assert 8 + size == len(frame)
    assert [(f.name, f.min_version, f.max_version) for f in answer.supported_features] == \
        [("transaction.version", 0, 2)]
    assert answer.finalized_features_epoch == 7
    assert [(f.name, f.min_version_level, f.max_version_level)
            for f in answer.finalized_features] == [("transaction.version", 2, 2)]
    unknown = encode_response(req, api_versions_response(req))   # no /feature read yet
    answer, _ = entity_reader(Kio3)(unknown, 8)
    assert answer.finalized_features_epoch == -1 and answer.finalized_features == ()
