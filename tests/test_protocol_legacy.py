"""The versions Kafka 3.8 serves below kio's schemas (protocol/legacy.py) and the version rules
the newest ones add, end to end without Ray: requests encoded by kafka-python decode field
for field; every legacy response structure, filled, is decoded by kafka-python and re-encoded
by it byte for byte; and the handlers answer old clients as Kafka 3.8 does (message formats
v0/v1 up- and down-converted, ListOffsets v0, offsets kept in ZooKeeper by OffsetCommit /
OffsetFetch v0, raw SASL tokens after SaslHandshake v0, ...), against FakeBrokerApi."""

from __future__ import annotations

import struct

import pytest
import scramp
from kafka.protocol.admin import (DeleteTopicsRequest, ListGroupsRequest)
from kafka.protocol.consumer import (FetchRequest, JoinGroupRequest, LeaveGroupRequest,
                                     ListOffsetsRequest, OffsetCommitRequest,
                                     OffsetFetchRequest)
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import ProduceRequest
from kafka.protocol.sasl import SaslBytesRequest, SaslHandshakeRequest

from coordinator import messages as gm
from protocol import legacy
from protocol.api import TopicOutcome
from protocol.codec import decode_request, encode_response
from protocol.connection import Connection
from protocol.errors import ProtocolError
from protocol.handlers import answer
from protocol.legacy import SCHEMAS, Arr, Const, S
from protocol.security.acl import AclOperation as Op, PatternType as Pat, ResourceType as Res
from replicas.errors import KafkaStorageError
from replicas.legacy_records import read_messages
from replicas.records import build_batch, decode_records
from tests.fake_broker_api import Batch
from tests.handler_wire import ask, cluster, send
from tests.protocol_samples import (ACL_ANY, ACL_READ, RESPONSES, frame_of, legacy_message_set,
                                    sample_frame, sample_request)
from tests.test_legacy_records import kp_read
from tests.test_protocol_group_handlers import groups_cluster
from tests.test_protocol_security import _create_acls, _describe_acls, acl, session_for
from tests.test_protocol_security import ask as secure_ask
from tests.test_protocol_security_apis import MECHANISM, PASSWORD, sasl_fake, sasl_session

pytestmark = pytest.mark.unit

LEGACY = sorted(SCHEMAS)
TS = 1_700_000_000_000
INVALID_REQUEST, TOPIC_DELETION_DISABLED = 42, 73


# -- the codec ---------------------------------------------------------------------------------
def _kp_value(msg, name):
    """kafka-python's value of a field kio (and legacy.py) name without its `_ms`."""
    for attr in (name, name + "_ms"):
        if hasattr(msg, attr):
            return getattr(msg, attr)
    raise AttributeError(name)


def _same(ours, theirs, s: S) -> None:
    for name, kind, _ in s.fields:
        if isinstance(kind, Const):
            continue
        value, expected = getattr(ours, name), _kp_value(theirs, name)
        if isinstance(kind, Arr) and isinstance(kind.item, S):
            assert len(value) == len(expected), name
            for a, b in zip(value, expected):
                _same(a, b, kind.item)
        elif isinstance(kind, Arr):
            assert (None if value is None else list(value)) == expected, name
        else:
            assert value == expected, name


@pytest.mark.parametrize("api_key,version", LEGACY)
def test_legacy_requests_decode_field_for_field_and_to_the_last_byte(api_key, version):
    frame = sample_frame(api_key, version, correlation_id=77, client_id="old")
    req = decode_request(frame[4:])
    assert (req.api_key, req.api_version, req.correlation_id, req.client_id) == (
        api_key, version, 77, "old")
    assert req.served and req.header.client_id == "old"
    schema = SCHEMAS[(api_key, version)][0]
    _same(req.body, sample_request(api_key, version), schema)
    start = 4 + 10 + len(b"old")                      # size, header v1
    _, end = schema.read(frame, start)
    assert end == len(frame)


def _filled(kind):
    """A value for every field: 3 for numbers, "txt", b"rec", two items per array."""
    if isinstance(kind, S):
        return kind.cls(**{n: (t.value if isinstance(t, Const) else _filled(t))
                           for n, t, _ in kind.fields})
    if isinstance(kind, Arr):
        return (_filled(kind.item), _filled(kind.item))
    if kind is legacy.BOOL:
        return True
    if kind in (legacy.STR, legacy.NSTR):
        return "txt"
    return b"rec" if kind is legacy.RECORDS else 3


@pytest.mark.parametrize("api_key,version", LEGACY)
def test_legacy_responses_are_what_kafka_python_reads_and_writes_back(api_key, version):
    body = _filled(SCHEMAS[(api_key, version)][1])
    frame = legacy.encode_response(api_key, version, 99, body)
    assert struct.unpack_from(">ii", frame) == (len(frame) - 4, 99)
    decoded = RESPONSES[api_key].decode(frame[4:], version=version, header=True)
    assert decoded.header.correlation_id == 99
    assert bytes(decoded.encode(header=True, framed=False)) == frame[4:]


def test_responses_are_built_like_kios_dropping_and_defaulting_fields():
    part = legacy.response(0, 2, "PartitionProduceResponse", index=1, error_code=6,
                           base_offset=-1, log_start_offset=9, record_errors=())
    assert (part.index, part.error_code, part.log_append_time) == (1, 6, -1)
    top = legacy.response(0, 1, "ProduceResponse", responses=(), throttle_time_ms=25)
    assert top.throttle_time == 25 and type(top).__api_key__ == 0
    with pytest.raises(KeyError):
        legacy.response(1, 0, "AbortedTransaction")       # v4+ only
    offsets = legacy.response(2, 0, "ListOffsetsPartitionResponse", partition_index=0)
    assert offsets.old_style_offsets == ()


# -- Produce v0-2 ------------------------------------------------------------------------------
def produce(version, parts, acks=-1):
    tpd = ProduceRequest.TopicProduceData
    return ProduceRequest[version](transactional_id=None, acks=acks, timeout_ms=1500,
                                   topic_data=[tpd(name=t, partition_data=[
                                       tpd.PartitionProduceData(index=i, records=r)
                                       for i, r in ps]) for t, ps in parts.items()])


def appended(fake, tp) -> list[tuple]:
    return [(r.timestamp_ms, r.key, r.value) for b in fake.partition(tp).batches
            for r in decode_records(b.data)]


@pytest.mark.parametrize("codec", [0, 1, 2])
@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_message_sets_are_stored_as_v2_batches(version, codec):
    magic = int(version == 2)                       # kafka-python's: v0-1 magic 0, v2 magic 1
    fake = cluster()
    fake.append(("audit", 0), b"older", count=4)
    sets = {"audit": [(0, legacy_message_set(magic, [b"a", b"b", b"c"], codec,
                                             keys=[b"k", None, b"k"]))],
            "orders": [(0, legacy_message_set(magic, [b"solo"]))]}
    resp = ask(fake, produce(version, sets))
    rows = [(t.name, p.index, p.error_code, p.base_offset) for t in resp.responses
            for p in t.partition_responses]
    assert rows == [("audit", 0, 0, 4), ("orders", 0, 0, 0)]
    if version >= 1:
        assert resp.throttle_time_ms == 0
    if version == 2:
        assert {p.log_append_time_ms for t in resp.responses for p in t.partition_responses} \
            == {-1}
    stamp = (lambda i: TS + i) if magic else (lambda i: -1)
    assert appended(fake, ("audit", 0)) == [(stamp(0), b"k", b"a"), (stamp(1), None, b"b"),
                                            (stamp(2), b"k", b"c")]
    (batch,) = fake.partition(("audit", 0)).batches[1:]
    assert batch.data[16] == 2 and batch.data[22] & 0x07 == codec


def test_produce_v0_answers_each_bad_message_set_with_kafkas_code():
    fake = cluster()
    good = legacy_message_set(0, [b"fine"])
    corrupt = good[:-1] + bytes([good[-1] ^ 0xFF])
    mixed = legacy_message_set(0, [b"x"]) + legacy_message_set(1, [b"y"])
    resp = ask(fake, produce(0, {"orders": [(0, good), (1, corrupt), (2, mixed)],
                                 "audit": [(0, good[:10])]}))
    assert [(t.name, p.index, p.error_code, p.base_offset) for t in resp.responses
            for p in t.partition_responses] == [
        ("orders", 0, 0, 0), ("orders", 1, 2, -1),      # CORRUPT_MESSAGE
        ("orders", 2, 87, -1),                          # INVALID_RECORD: magics differ
        ("audit", 0, 0, -1)]                            # no whole message: nothing appended
    assert [tp for tp, _ in fake.calls_of("produce")[0]["partitions"]] == [("orders", 0)]


def test_produce_v0_to_v2_take_v2_batches_as_they_are_and_v3_up_only_v2():
    fake = cluster()
    v2 = bytes(build_batch([b"new"], timestamps_ms=TS))
    assert ask(fake, produce(1, {"audit": [(0, v2)]})).responses[0] \
        .partition_responses[0].error_code == 0
    assert fake.partition(("audit", 0)).batches[0].data == v2
    resp = ask(fake, produce(3, {"audit": [(0, legacy_message_set(1, [b"old"]))]}))
    assert resp.responses[0].partition_responses[0].error_code == 87   # INVALID_RECORD
    assert len(fake.partition(("audit", 0)).batches) == 1


def test_an_acks_0_produce_v0_is_converted_and_unanswered():
    fake = cluster()
    request, out = send(fake, produce(0, {"audit": [(0, legacy_message_set(0, [b"q"]))]},
                                      acks=0))
    assert out is None and not request.expects_response
    assert appended(fake, ("audit", 0)) == [(-1, None, b"q")]


@pytest.mark.parametrize("version", [10, 11])
def test_produce_v10_up_names_the_current_leader_of_a_moved_partition(version):
    fake = cluster()
    fake.partition(("orders", 1)).leader = 2          # not us: NOT_LEADER_OR_FOLLOWER
    resp = ask(fake, produce(version, {"orders": [(0, b"x"), (1, b"y")]}))
    ok, moved = resp.responses[0].partition_responses
    assert (ok.error_code, moved.error_code) == (0, 6)
    assert (moved.current_leader.leader_id, moved.current_leader.leader_epoch) == (2, 4)
    assert [(n.node_id, n.host, n.port) for n in resp.node_endpoints] == [(2, "10.0.0.2", 9092)]


# -- Fetch v0-3 --------------------------------------------------------------------------------
def legacy_fetch(version, offset=0, partition="orders"):
    ft = FetchRequest.FetchTopic
    return FetchRequest[version](replica_id=-1, max_wait_ms=100, min_bytes=1,
                                 max_bytes=1 << 20, topics=[ft(topic=partition, partitions=[
                                     ft.FetchPartition(partition=0, fetch_offset=offset,
                                                       partition_max_bytes=1 << 20)])])


def with_batches(*batches):
    fake = cluster()
    part, offset = fake.partition(("orders", 0)), 0
    for data in batches:
        data = bytearray(data)
        struct.pack_into(">q", data, 0, offset)
        count = struct.unpack_from(">i", data, 57)[0]
        part.batches.append(Batch(offset, count, -1, bytes(data)))
        offset += count
    return fake


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_fetch_v0_to_v3_get_their_records_down_converted(version):
    fake = with_batches(build_batch([b"a", b"b"], timestamps_ms=TS, keys=[b"k", None]),
                        build_batch([b"c"], timestamps_ms=TS + 7, compression_type=1))
    resp = ask(fake, legacy_fetch(version, offset=1))
    (p,) = resp.responses[0].partitions
    assert (p.error_code, p.high_watermark) == (0, 3)
    magic = 0 if version <= 1 else 1
    assert {m.magic for m in read_messages(p.records)} == {magic}
    stamp = (lambda t: t) if magic else (lambda t: None)        # magic 0 has no timestamps
    assert kp_read(p.records) == [(1, stamp(TS), None, b"b"), (2, stamp(TS + 7), None, b"c")]


def test_fetch_v0_of_a_zstd_batch_is_unsupported_compression_type():
    fake = with_batches(build_batch([b"z"], timestamps_ms=TS, compression_type=4))
    (p,) = ask(fake, legacy_fetch(0)).responses[0].partitions
    assert (p.error_code, p.records) == (76, b"")


@pytest.mark.parametrize("version", [0, 3, 5, 6])
def test_a_storage_error_is_not_leader_for_fetch_up_to_v5(version):
    fake = cluster()
    fake.errors[("orders", 0)] = KafkaStorageError.code
    (p,) = ask(fake, legacy_fetch(version) if version <= 3 else FetchRequest[version](
        replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        topics=[FetchRequest.FetchTopic(topic="orders", partitions=[
            FetchRequest.FetchTopic.FetchPartition(partition=0, fetch_offset=0,
                                                   log_start_offset=-1,
                                                   partition_max_bytes=1024)])])
        ).responses[0].partitions
    assert p.error_code == (6 if version <= 5 else 56)


# -- ListOffsets -------------------------------------------------------------------------------
def test_list_offsets_v0_answers_old_style_offsets_the_burrow_way():
    fake = cluster()
    for ts, count in ((1000, 2), (2000, 3)):
        fake.append(("orders", 0), b"batch", count=count, timestamp=ts)
    fake.partition(("orders", 0)).hw = 4
    fake.partition(("orders", 1)).leader = 2
    t = ListOffsetsRequest.ListOffsetsTopic
    p = t.ListOffsetsPartition

    def offsets(max_num):
        resp = ask(fake, ListOffsetsRequest[0](replica_id=-1, topics=[
            t(name="orders", partitions=[p(partition_index=0, timestamp=-1,
                                           max_num_offsets=max_num),
                                         p(partition_index=1, timestamp=-2, max_num_offsets=1)]),
            t(name="ghost", partitions=[p(partition_index=0, timestamp=-1, max_num_offsets=1)])]))
        return [(t.name, p.partition_index, p.error_code, p.old_style_offsets)
                for t in resp.topics for p in t.partitions]
    assert offsets(1) == [("orders", 0, 0, [4]),      # the HW, not the log end 5 (a consumer)
                          ("orders", 1, 6, []),       # led elsewhere
                          ("ghost", 0, 3, [])]
    assert offsets(5)[0] == ("orders", 0, 0, [4, 2, 0])   # then segment starts, newest first
    assert fake.calls_of("list_offsets") == []
    twice = ask(fake, ListOffsetsRequest[0](replica_id=-1, topics=[       # v0 may ask twice
        t(name="orders", partitions=[p(partition_index=0, timestamp=-1, max_num_offsets=1),
                                     p(partition_index=0, timestamp=-2, max_num_offsets=1)])]))
    assert [x.old_style_offsets for x in twice.topics[0].partitions] == [[4], [0]]


def test_list_offsets_v8_earliest_local_is_the_log_start():
    fake = cluster()
    fake.append(("orders", 0), b"batch", count=5)
    fake.partition(("orders", 0)).log_start = 2
    t = ListOffsetsRequest.ListOffsetsTopic
    resp = ask(fake, ListOffsetsRequest[8](replica_id=-1, isolation_level=0, topics=[
        t(name="orders", partitions=[t.ListOffsetsPartition(
            partition_index=0, timestamp=-4, current_leader_epoch=-1)])]))
    (p,) = resp.topics[0].partitions
    assert (p.error_code, p.timestamp, p.offset) == (0, -1, 2)
    assert fake.calls_of("list_offsets")[0]["asks"] == [(("orders", 0), -2, -1)]


# -- groups ------------------------------------------------------------------------------------
def test_offset_commit_and_fetch_v0_keep_offsets_in_zookeeper_apart_from_the_coordinator():
    fake = groups_cluster()
    t = OffsetCommitRequest.OffsetCommitRequestTopic
    resp = ask(fake, OffsetCommitRequest[0](group_id="g2", topics=[
        t(name="orders", partitions=[t.OffsetCommitRequestPartition(
            partition_index=1, committed_offset=42, committed_metadata="m")]),
        t(name="ghost", partitions=[t.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=1, committed_metadata=None)])]))
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions])
            for t in resp.topics] == [("orders", [(1, 0)]), ("ghost", [(0, 3)])]
    assert fake.zk_offsets == {("g2", ("orders", 1)): 42}
    assert not [e for e in fake.group_events if isinstance(e, gm.OffsetCommit)]
    ft = OffsetFetchRequest.OffsetFetchRequestTopic
    back = ask(fake, OffsetFetchRequest[0](group_id="g2", topics=[
        ft(name="orders", partition_indexes=[1, 2])]))
    assert [(p.partition_index, p.committed_offset, p.metadata, p.error_code)
            for p in back.topics[0].partitions] == [(1, 42, "", 0), (2, -1, "", 3)]
    v1 = ask(fake, OffsetFetchRequest[1](group_id="g2", topics=[
        ft(name="orders", partition_indexes=[1])]))          # the coordinator knows nothing
    assert [(p.committed_offset, p.error_code) for p in v1.topics[0].partitions] == [(-1, 0)]


@pytest.mark.parametrize("version", [8, 9])
def test_offset_fetch_v8_answers_each_group_asked(version):
    fake = groups_cluster("g1", "g2")
    done = fake.group_call(lambda rid: gm.OffsetCommit(rid, "g1", (
        gm.CommitOffset("orders", 0, 5), gm.CommitOffset("audit", 0, 7))))
    assert done.result().partitions[0].error == 0
    far = next(g for g in (f"x{i}" for i in range(100))
               if fake.group_partition(g) not in (fake.group_partition("g1"),
                                                  fake.group_partition("g2")))
    g = OffsetFetchRequest.OffsetFetchRequestGroup
    resp = ask(fake, OffsetFetchRequest[version](require_stable=False, groups=[
        g(group_id="g1", member_id="m", member_epoch=3, topics=[
            g.OffsetFetchRequestTopics(name="orders", partition_indexes=[0, 1])]),
        g(group_id="g2", member_id=None, member_epoch=-1, topics=None),
        g(group_id=far, member_id=None, member_epoch=-1, topics=None)]))
    assert [(x.group_id, x.error_code) for x in resp.groups] == [("g1", 0), ("g2", 0),
                                                                  (far, 16)]
    assert [(p.partition_index, p.committed_offset) for p in resp.groups[0].topics[0].partitions] \
        == [(0, 5), (1, -1)]
    assert resp.groups[1].topics == [] and resp.groups[2].topics == []


def test_list_groups_v5_lists_classic_groups_only_for_a_classic_filter():
    fake = groups_cluster()
    done = fake.group_call(lambda rid: gm.OffsetCommit(
        rid, "g1", (gm.CommitOffset("orders", 0, 1),)))
    assert done.result().partitions[0].error == 0
    every = ask(fake, ListGroupsRequest[5](states_filter=[], types_filter=[]))
    assert [(g.group_id, g.group_type) for g in every.groups] == [("g1", "classic")]
    assert [g.group_id for g in ask(fake, ListGroupsRequest[5](
        states_filter=[], types_filter=["Classic"])).groups] == ["g1"]
    assert ask(fake, ListGroupsRequest[5](states_filter=[], types_filter=["consumer"])).groups \
        == []


def test_join_group_v8_and_leave_group_v5_carry_the_reason():
    fake = groups_cluster()
    p = JoinGroupRequest.JoinGroupRequestProtocol
    send(fake, JoinGroupRequest[8](group_id="g1", session_timeout_ms=10000,
                                   rebalance_timeout_ms=30000, member_id="",
                                   group_instance_id=None, protocol_type="consumer",
                                   reason="scaling", protocols=[p(name="range", metadata=b"m")]))
    i = LeaveGroupRequest.MemberIdentity
    send(fake, LeaveGroupRequest[5](group_id="g1", members=[
        i(member_id="m1", group_instance_id=None, reason="shutdown")]))
    join, leave = [e for e in fake.group_events if isinstance(e, (gm.JoinGroup, gm.LeaveGroup))]
    assert (join.reason, join.version) == ("scaling", 8)
    assert leave.members[0].reason == "shutdown"


# -- admin -------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [0, 2, 3])
def test_delete_topics_before_v3_cannot_say_deletion_disabled(version):
    fake = cluster()
    fake.delete_topics = lambda names, timeout_ms: {      # delete.topic.enable=false
        n: TopicOutcome(TOPIC_DELETION_DISABLED, "Topic deletion is disabled.") for n in names}
    resp = ask(fake, DeleteTopicsRequest[version](topic_names=["orders"], timeout_ms=1000,
                                                  topics=[]))
    assert [r.error_code for r in resp.responses] == [
        INVALID_REQUEST if version < 3 else TOPIC_DELETION_DISABLED]


def test_acl_apis_v0_speak_of_literal_patterns_only():
    admin = session_for([acl(Res.CLUSTER, "kafka-cluster", Op.ALTER),
                         acl(Res.CLUSTER, "kafka-cluster", Op.DESCRIBE),
                         acl(Res.TOPIC, "audit", Op.READ),
                         acl(Res.TOPIC, "ord", Op.WRITE, pattern=Pat.PREFIXED)])
    fake = cluster()
    created = secure_ask(fake, _create_acls(0, {**ACL_READ, "resource_pattern_type": 4}), admin)
    assert [r.error_code for r in created.results] == [0]
    assert fake.acls == [acl(Res.TOPIC, "orders", Op.READ, pattern=Pat.LITERAL)]
    described = secure_ask(fake, _describe_acls(0, **{**ACL_ANY, "resource_type_filter": 2}),
                           admin)
    assert [r.resource_name for r in described.resources] == ["audit"]   # not the prefixed


# -- SASL: SaslHandshake v0 and raw tokens -----------------------------------------------------
def raw_exchange(password=PASSWORD):
    fake, session, conn = sasl_fake(), sasl_session(), Connection()
    hello = ask(fake, ApiVersionsRequest[0](), session, conn)
    assert hello.error_code == 0
    hs = ask(fake, SaslHandshakeRequest[0](mechanism=MECHANISM), session, conn)
    assert (hs.error_code, hs.mechanisms) == (0, [MECHANISM])
    assert conn.sasl_tokens
    client = scramp.ScramClient([MECHANISM], "alice", password)

    def token(data: bytes):
        conn.receive_data(SaslBytesRequest(data).encode())     # kafka-python's raw framing
        request = conn.next_request()
        assert request.raw_sasl and request.api_key == 36
        out = answer(conn, fake, request, session)
        (size,) = struct.unpack_from(">i", out)
        assert size == len(out) - 4
        return out[4:]
    first = token(client.get_client_first().encode())
    client.set_server_first(first.decode())
    return fake, session, conn, client, token


def test_saslhandshake_v0_then_raw_scram_tokens_authenticate():
    fake, session, conn, client, token = raw_exchange()
    final = token(client.get_client_final().encode())
    client.set_server_final(final.decode())                     # the server proved itself
    assert session.principal == "User:alice" and not conn.sasl_tokens
    from tests.handler_wire import metadata_request
    md = ask(fake, metadata_request(12, ["orders"]), session, conn)   # framed again
    assert [t.name for t in md.topics] == ["orders"]


def test_a_failed_raw_token_closes_the_connection_without_an_answer():
    fake, session, conn, client, token = raw_exchange(password="wrong")
    with pytest.raises(ProtocolError, match="SASL authentication failed"):
        token(client.get_client_final().encode())
    assert session.principal == "User:ANONYMOUS"


def test_a_raw_token_answer_is_only_the_token():
    req = Connection()
    req.sasl_tokens = True
    req.receive_data(struct.pack(">i", 3) + b"abc")
    token = req.next_request()
    assert (token.raw_sasl, token.body.auth_bytes, token.size) == (True, b"abc", 3)
    from protocol.build import build
    assert encode_response(token, build(36, 0, None, auth_bytes=b"xyz")) == \
        struct.pack(">i", 3) + b"xyz"


def test_the_samples_cover_every_legacy_version():
    for api_key, version in LEGACY:
        frame_of(sample_request(api_key, version))
