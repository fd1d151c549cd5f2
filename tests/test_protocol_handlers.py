"""protocol/handlers/ end to end, without Ray or sockets: requests encoded by kafka-python go
through protocol.connection.Connection and protocol.handlers.answer against FakeBrokerApi
(tests/fake_broker_api.py), and the bytes that come back are decoded by kafka-python's
response classes (and read by kio's own reader, which must consume the whole frame).
Table-driven over every served version where a rule depends on the version.
"""

from __future__ import annotations

import inspect
import struct
import uuid

import pytest
from kafka.protocol.admin import (
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeClusterRequest,
    DescribeConfigsRequest, IncrementalAlterConfigsRequest,
)
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kio.index import load_response_schema
from kio.serial import entity_reader

from protocol.api import BrokerApi, ConfigResource, Deferred, FetchAsk, topic_id_text, topic_uuid
from protocol.codec import has_request_schema
from protocol.connection import Connection
from protocol.handlers import HANDLERS, answer
from protocol.versions import REJECTED_VERSIONS, SUPPORTED
from protocol.errors import ProtocolError
from replicas.errors import KafkaStorageError, NotController
from replicas.records import build_batch
from tests.fake_broker_api import FakeBrokerApi, Partition
from tests.protocol_samples import (ASKED, RESPONSES, TOPIC_IDS, asked_names, frame_of,
                                    sample_request,
                                    walk)

pytestmark = pytest.mark.unit

# The BrokerApi method each API's handler calls.
METHOD = {0: "produce", 1: "fetch", 2: "list_offsets", 3: "metadata", 19: "create_topics",
          20: "delete_topics", 21: "delete_records", 22: "init_producer_id", 23: "offsets_for_leader_epoch",
          32: "describe_configs", 37: "create_partitions", 44: "alter_configs",
          60: "metadata", 10: "find_coordinator", 27: "write_txn_markers",
          61: "describe_producers", 33: "replace_configs", 35: "describe_log_dirs",
          43: "elect_leaders", 45: "alter_partition_reassignments",
          46: "list_partition_reassignments", 47: "group_call",
          **dict.fromkeys((8, 9, 11, 12, 13, 14, 15, 16, 42, 28), "group_call"),
          **dict.fromkeys((24, 25, 26, 65, 66), "txn_call")}
# Kafka 3.8 answers these from ZooKeeper or from the log's segments
LEGACY_METHOD = {(2, 0): "legacy_offsets", (8, 0): "zk_commit_offsets",
                 (9, 0): "zk_fetch_offsets"}
SERVED = [(k, v) for k, (lo, hi) in SUPPORTED.items() if k in HANDLERS
          for v in range(lo, hi + 1) if v not in REJECTED_VERSIONS.get(k, ())]


def versions(api_key: int, lo: int | None = None, hi: int | None = None) -> list[int]:
    smin, smax = SUPPORTED[api_key]
    lo = smin if lo is None else lo
    hi = smax if hi is None else hi
    return [v for v in range(lo, hi + 1) if v not in REJECTED_VERSIONS.get(api_key, ())]


# -- plumbing ----------------------------------------------------------------------------------
def send(fake, msg, listener="PLAINTEXT", correlation_id=4242, conn=None):
    """One kafka-python request through a Connection and answer(): (request, bytes | None)."""
    conn = conn or Connection()
    conn.receive_data(frame_of(msg, correlation_id))
    request = conn.next_request()
    assert request is not None and conn.next_request() is None
    return request, answer(conn, fake, request, listener)


def kio_read(frame: bytes, cls):
    """kio's reader on a whole response frame: it must consume every byte."""
    header, n = entity_reader(cls.__header_schema__)(frame, 4)
    body, m = entity_reader(cls)(frame, 4 + n)
    assert 4 + n + m == len(frame)
    return header, body


def ask(fake, msg, listener="PLAINTEXT", conn=None):
    """Send `msg`, check the frame (size, echoed correlation id, kio reads it all) and return
    kafka-python's decoding of the answer."""
    api_key, version = msg.API_KEY, msg.API_VERSION
    _, out = send(fake, msg, listener, 4242, conn)
    if isinstance(out, Deferred):            # a coordinator's answer: the fake's is ready
        out = out.result()
    assert out is not None
    assert struct.unpack_from(">ii", out) == (len(out) - 4, 4242)
    if has_request_schema(api_key, version):             # not protocol/legacy.py's
        header, _ = kio_read(out, load_response_schema(api_key, version))
        assert header.correlation_id == 4242
    decoded = RESPONSES[api_key].decode(out[4:], version=version, header=True)
    assert decoded.header.correlation_id == 4242
    return decoded


def cluster() -> FakeBrokerApi:
    """Broker 1 (us) and 2 on PLAINTEXT, 1 and 3 on EXTERNAL; broker 9 is not live.
    orders: 3 partitions on (1, 2, 9) at leader epoch 4; audit: 1 partition on broker 1."""
    fake = FakeBrokerApi(broker_id=1, cluster_id="rayka-test", controller_id=2)
    fake.add_broker(1, rack="r1", PLAINTEXT=("10.0.0.1", 9092), EXTERNAL=("ext-1", 19092))
    fake.add_broker(2, rack=None, PLAINTEXT=("10.0.0.2", 9092))
    fake.add_broker(3, rack="r3", EXTERNAL=("ext-3", 19093))
    fake.add_topic("orders", 3, replicas=(1, 2, 9), leader_epoch=4)
    fake.add_topic("audit", 1)
    return fake


def metadata_request(version, names, allow=True):
    t = MetadataRequest.MetadataRequestTopic
    topics = None if names is None else [t(name=n) for n in names]
    return MetadataRequest[version](topics=topics, allow_auto_topic_creation=allow,
                                    include_cluster_authorized_operations=False,
                                    include_topic_authorized_operations=False)


# -- Metadata ----------------------------------------------------------------------------------
def test_metadata_v0_empty_topic_list_means_all_topics():
    fake = cluster()
    resp = ask(fake, metadata_request(0, []))
    assert [t.name for t in resp.topics] == ["orders", "audit"]
    assert fake.calls_of("metadata") == [
        {"topics": None, "allow_auto_create": True, "listener": "PLAINTEXT"}]


@pytest.mark.parametrize("version", versions(3, 1))
def test_metadata_v1_up_null_means_all_topics_and_empty_means_none(version):
    fake = cluster()
    every = ask(fake, metadata_request(version, None))
    assert [t.name for t in every.topics] == ["orders", "audit"]
    none = ask(fake, metadata_request(version, []))
    assert none.topics == []
    assert [c["topics"] for c in fake.calls_of("metadata")] == [None, []]


@pytest.mark.parametrize("allow", [True, False])
@pytest.mark.parametrize("version", versions(3))
def test_metadata_unknown_topic_auto_creation_follows_the_request(version, allow):
    # v0-3 have no flag: always allowed. v4+: the flag decides.
    fake = cluster()
    resp = ask(fake, metadata_request(version, ["orders", "fresh"], allow=allow))
    allowed = allow or version < 4
    assert fake.calls_of("metadata")[0]["allow_auto_create"] is allowed
    assert [(t.name, t.error_code) for t in resp.topics] == [
        ("orders", 0), ("fresh", 5 if allowed else 3)]
    assert resp.topics[1].partitions == []
    assert ("fresh" in fake.topics) is allowed


@pytest.mark.parametrize("version", [0, 4, 12])
def test_metadata_topic_error_is_what_the_broker_says(version):
    fake = cluster()
    fake.errors["audit"] = 29                   # TOPIC_AUTHORIZATION_FAILED, say
    resp = ask(fake, metadata_request(version, ["audit", "bad name!"]))
    assert [(t.name, t.error_code) for t in resp.topics] == [("audit", 29), ("bad name!", 17)]


@pytest.mark.parametrize("listener,expected", [
    ("PLAINTEXT", [(1, "10.0.0.1", 9092, "r1"), (2, "10.0.0.2", 9092, None)]),
    ("EXTERNAL", [(1, "ext-1", 19092, "r1"), (3, "ext-3", 19093, "r3")]),
    ("INTERNAL", []),
])
@pytest.mark.parametrize("version", versions(3))
def test_metadata_lists_the_brokers_with_an_endpoint_for_the_listener_asked_on(
        version, listener, expected):
    fake = cluster()
    resp = ask(fake, metadata_request(version, ["orders"]), listener=listener)
    assert fake.calls_of("metadata")[0]["listener"] == listener
    got = [(b.node_id, b.host, b.port, b.rack) for b in resp.brokers]
    # rack exists from v1 (kafka-python reads an absent field as its default, None).
    assert got == [(n, h, p, r if version >= 1 else None) for n, h, p, r in expected]


@pytest.mark.parametrize("version", versions(3))
def test_metadata_partitions_controller_and_cluster_by_version(version):
    fake = cluster()
    fake.partition(("orders", 2)).leader = 9          # leader not live
    fake.partition(("orders", 1)).isr = (1, 9)
    fake.errors[("orders", 1)] = 9                    # REPLICA_NOT_AVAILABLE, injected
    resp = ask(fake, metadata_request(version, ["orders"]))
    (topic,) = resp.topics
    assert (topic.name, topic.error_code, topic.is_internal) == ("orders", 0, False)
    if version >= 10:
        assert topic.topic_id == TOPIC_IDS["orders"]
    rows = [(p.partition_index, p.error_code, p.leader_id, p.leader_epoch, p.replica_nodes,
             p.isr_nodes, p.offline_replicas) for p in topic.partitions]
    epoch = 4 if version >= 7 else -1
    offline = [9] if version >= 5 else []
    assert rows == [(0, 0, 1, epoch, [1, 2, 9], [1, 2], offline),
                    (1, 9, 1, epoch, [1, 2, 9], [1], offline),
                    (2, 5, -1, epoch, [1, 2, 9], [1, 2], offline)]
    assert resp.controller_id == (2 if version >= 1 else -1)
    assert resp.cluster_id == ("rayka-test" if version >= 2 else None)


@pytest.mark.parametrize("listener", ["PLAINTEXT", "EXTERNAL"])
@pytest.mark.parametrize("version", versions(60))
def test_describe_cluster_lists_brokers_controller_and_cluster(version, listener):
    fake = cluster()
    resp = ask(fake, DescribeClusterRequest[version](include_cluster_authorized_operations=False),
               listener=listener)
    assert fake.calls_of("metadata") == [
        {"topics": [], "allow_auto_create": False, "listener": listener}]
    assert (resp.error_code, resp.cluster_id, resp.controller_id) == (0, "rayka-test", 2)
    assert [(b.broker_id, b.host, b.port) for b in resp.brokers] == (
        [(1, "10.0.0.1", 9092), (2, "10.0.0.2", 9092)] if listener == "PLAINTEXT"
        else [(1, "ext-1", 19092), (3, "ext-3", 19093)])
    if version >= 1:
        assert resp.endpoint_type == 1


# -- Produce -----------------------------------------------------------------------------------
def produce_request(version, parts, acks=-1, transactional_id=None):
    """parts: {topic: [(index, records)]}."""
    tpd = ProduceRequest.TopicProduceData
    ppd = tpd.PartitionProduceData
    return ProduceRequest[version](
        transactional_id=transactional_id, acks=acks, timeout_ms=1500,
        topic_data=[tpd(name=t, partition_data=[ppd(index=i, records=r) for i, r in ps])
                    for t, ps in parts.items()])


@pytest.mark.parametrize("version", versions(0, 3))
def test_produce_names_each_bad_record_from_v8(version):
    """KIP-467: a compacted topic's keyless records fail their batch; v8+ say which."""
    fake = cluster()
    fake.add_topic("keyed", 1, configs={"cleanup.policy": "compact"})
    batch = build_batch([b"a", b"b", b"c"], keys=[b"k", None, None], timestamps_ms=1)
    resp = ask(fake, produce_request(version, {"keyed": [(0, bytes(batch))],
                                               "audit": [(0, bytes(batch))]}))
    keyed, audit = (t.partition_responses[0] for t in resp.responses)
    assert (keyed.error_code, audit.error_code) == (87, 0)
    assert fake.partition(("keyed", 0)).batches == []
    if version >= 8:
        assert [(e.batch_index, e.batch_index_error_message) for e in keyed.record_errors] == [
            (i, "Compacted topic cannot accept message without key in topic partition "
                "keyed-0.") for i in (1, 2)]
        assert keyed.error_message.startswith("One or more records have been rejected due "
                                              "to 2 record errors in total")
        assert audit.record_errors == [] and audit.error_message is None


@pytest.mark.parametrize("version", versions(0, 3))
def test_produce_acks_0_is_answered_with_no_bytes(version):
    fake = cluster()
    conn = Connection()
    request, out = send(fake, produce_request(version, {"audit": [(0, b"fire")]}, acks=0),
                        conn=conn)
    assert not request.expects_response
    assert out is None and conn.responses_sent == 0
    assert fake.calls_of("produce") == [
        {"acks": 0, "timeout_ms": 1500, "partitions": [(("audit", 0), b"fire")]}]
    assert [b.data for b in fake.partition(("audit", 0)).batches] == [b"fire"]


@pytest.mark.parametrize("version", versions(0, 3))
def test_a_failed_acks_0_produce_closes_the_connection_instead_of_answering(version):
    # Kafka never answers acks=0 (the producer reads no response): on a whole-request error
    # it closes the connection. Bytes here would be read as the answer to the NEXT request.
    fake = cluster()
    fake.raises["produce"] = KafkaStorageError("disk gone")
    conn = Connection()
    with pytest.raises(ProtocolError, match="acks=0"):
        send(fake, produce_request(version, {"audit": [(0, b"fire")]}, acks=0), conn=conn)
    assert len(fake.calls_of("produce")) == 1 and conn.responses_sent == 0


@pytest.mark.parametrize("version", versions(0, 3))
def test_produce_maps_each_partitions_outcome(version):
    fake = cluster()
    fake.partition(("audit", 0)).log_start = 100
    fake.append(("audit", 0), b"older", count=5)               # offsets 100..104
    fake.partition(("orders", 0)).leader = 1
    fake.errors[("orders", 2)] = 19                           # NOT_ENOUGH_REPLICAS
    fake.partition(("orders", 1)).leader = 2                  # not us: NOT_LEADER (6)
    resp = ask(fake, produce_request(version, {
        "audit": [(0, b"batch-a")],
        "orders": [(0, b"batch-0"), (1, b"batch-1"), (2, b"batch-2")],
        "ghost": [(0, b"batch-g")]}))
    assert fake.calls_of("produce")[0]["partitions"] == [
        (("audit", 0), b"batch-a"), (("orders", 0), b"batch-0"), (("orders", 1), b"batch-1"),
        (("orders", 2), b"batch-2"), (("ghost", 0), b"batch-g")]
    rows = [(t.name, p.index, p.error_code, p.base_offset, p.log_start_offset,
             p.error_message) for t in resp.responses for p in t.partition_responses]
    start = (lambda n: n) if version >= 5 else (lambda n: -1)
    msg = (lambda code, tp: f"error {code} for {tp}") if version >= 8 else (lambda *_: None)
    assert rows == [
        ("audit", 0, 0, 105, start(100), None),
        ("orders", 0, 0, 0, start(0), None),
        ("orders", 1, 6, -1, start(-1), msg(6, ("orders", 1))),
        ("orders", 2, 19, -1, start(-1), msg(19, ("orders", 2))),
        ("ghost", 0, 3, -1, start(-1), msg(3, ("ghost", 0)))]
    assert all(p.log_append_time_ms == -1 for t in resp.responses
               for p in t.partition_responses)


@pytest.mark.parametrize("version", versions(0, 3))
def test_produce_null_records_fail_that_partition_only(version):
    fake = cluster()
    resp = ask(fake, produce_request(version, {"orders": [(0, b"x")], "audit": [(0, None)]}))
    assert [(t.name, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
            for t in resp.responses] == [("orders", [(0, 0, 0)]), ("audit", [(0, 87, -1)])]
    assert fake.calls_of("produce")[0]["partitions"] == [(("orders", 0), b"x")]
    assert fake.partition(("audit", 0)).batches == []


@pytest.mark.parametrize("version", versions(0))
def test_zstd_needs_produce_v7(version):
    from replicas.records import build_batch
    zstd = bytes(build_batch([b"z" * 50] * 4, timestamps_ms=1, compression_type=4))
    fake = cluster()
    resp = ask(fake, produce_request(version, {"orders": [(0, zstd)]}))
    (code,) = [p.error_code for t in resp.responses for p in t.partition_responses]
    assert code == (76 if version < 7 else 0)                 # UNSUPPORTED_COMPRESSION_TYPE
    assert len(fake.calls_of("produce")) == (0 if version < 7 else 1)


@pytest.mark.parametrize("version", versions(0, 3))
def test_produce_with_a_transactional_id_reaches_the_broker_with_it(version):
    fake = cluster()
    txn = bytes(build_batch([b"x"], timestamps_ms=1, producer_id=7, producer_epoch=0,
                            base_sequence=0, transactional=True))
    resp = ask(fake, produce_request(version, {"orders": [(0, txn)]}, transactional_id="tx-1"))
    assert [(t.name, p.index, p.error_code) for t in resp.responses
            for p in t.partition_responses] == [("orders", 0, 0)]
    assert fake.calls_of("produce")[0]["transactional_id"] == "tx-1"


@pytest.mark.parametrize("version", versions(0))
def test_transactional_records_without_a_transactional_id_are_refused_everywhere(version):
    """KafkaApis: only a named transactional id can be authorised to write them (53)."""
    fake = cluster()
    txn = bytes(build_batch([b"x"], timestamps_ms=1, producer_id=7, producer_epoch=0,
                            base_sequence=0, transactional=True))
    resp = ask(fake, produce_request(version, {"orders": [(0, txn), (1, b"y")]}))
    assert {(t.name, p.index, p.error_code) for t in resp.responses
            for p in t.partition_responses} == {("orders", 0, 53), ("orders", 1, 53)}
    assert fake.calls_of("produce") == []


# -- Fetch -------------------------------------------------------------------------------------
def fetch_topic(version, name) -> dict:
    """How Fetch names a topic: by name, or from v13 by the id cluster() gave it."""
    return dict(topic_id=TOPIC_IDS[name]) if version >= 13 else dict(topic=name)


def name_of(t) -> str:
    """A Fetch answer's topic: its name, or from v13 the name of its id."""
    return t.topic or {i: n for n, i in TOPIC_IDS.items()}.get(t.topic_id)


def fetch_request(version, parts, isolation=0, session_id=0, session_epoch=-1, replica_id=-1,
                  max_wait_ms=500):
    """parts: {topic: [(partition, offset, current_leader_epoch, last_fetched_epoch,
    partition_max_bytes)]}."""
    ft = FetchRequest.FetchTopic
    fp = ft.FetchPartition
    state = FetchRequest[15].ReplicaState(replica_id=replica_id, replica_epoch=-1) \
        if version >= 15 else None                  # v15+: the replica in replica_state
    return FetchRequest[version](
        replica_id=replica_id, replica_state=state, max_wait_ms=max_wait_ms, min_bytes=7,
        max_bytes=123456,
        isolation_level=isolation, session_id=session_id, session_epoch=session_epoch,
        rack_id="", forgotten_topics_data=[],
        topics=[ft(**fetch_topic(version, t), partitions=[
            fp(partition=p, fetch_offset=o, current_leader_epoch=cle, last_fetched_epoch=lfe,
               log_start_offset=-1, partition_max_bytes=mb) for p, o, cle, lfe, mb in ps])
            for t, ps in parts.items()])


def fetch_cluster() -> FakeBrokerApi:
    fake = cluster()
    tp = ("orders", 0)
    for data, count in ((b"first-batch", 2), (b"second-batch", 3), (b"third-batch", 1)):
        fake.append(tp, data, count=count)                    # 0-1, 2-4, 5
    fake.partition(tp).hw = 5                                 # offset 5 not yet committed
    fake.partition(tp).log_start = 1
    fake.partition(("orders", 1)).leader = 2                  # not us
    return fake


@pytest.mark.parametrize("version", versions(1, 4))          # v0-3: test_protocol_legacy
def test_fetch_passes_the_request_to_the_broker(version):
    fake = fetch_cluster()
    ask(fake, fetch_request(version, {"orders": [(0, 3, 4, 4, 1000), (2, 0, -1, -1, 50)],
                                      "audit": [(0, 0, -1, -1, 4096)]}, isolation=1,
                            max_wait_ms=750))
    (call,) = fake.calls_of("fetch")
    assert (call["replica_id"], call["max_wait_ms"], call["min_bytes"], call["max_bytes"],
            call["isolation_level"]) == (-1, 750, 7, 123456, 1)
    assert type(call["max_wait_ms"]) is int
    cle = 4 if version >= 9 else -1
    lfe = 4 if version >= 12 else -1
    assert call["asks"] == [FetchAsk(("orders", 0), 3, cle, lfe, 1000),
                            FetchAsk(("orders", 2), 0, -1, -1, 50),
                            FetchAsk(("audit", 0), 0, -1, -1, 4096)]


@pytest.mark.parametrize("isolation", [0, 1])
@pytest.mark.parametrize("version", versions(1, 4))          # v0-3: test_protocol_legacy
def test_fetch_answers_every_partition_asked(version, isolation):
    fake = fetch_cluster()
    resp = ask(fake, fetch_request(version, {"orders": [(0, 3, -1, -1, 1 << 20),
                                                        (1, 0, -1, -1, 1 << 20)],
                                             "audit": [(0, 0, -1, -1, 1 << 20),
                                                       (7, 0, -1, -1, 1 << 20)]},
                                   isolation=isolation))
    if version >= 7:
        assert (resp.error_code, resp.session_id) == (0, 0)
    start = (lambda n: n) if version >= 5 else (lambda n: -1)
    rows = [(name_of(t), p.partition_index, p.error_code, p.high_watermark,
             p.last_stable_offset, p.log_start_offset, p.records)
            for t in resp.responses for p in t.partitions]
    # The batch holding offset 3, unchanged; the one at 5 is above the HW.
    assert rows[0] == ("orders", 0, 0, 5, 5, start(1), b"second-batch")
    assert [r[:3] for r in rows[1:]] == [("orders", 1, 6), ("audit", 0, 0), ("audit", 7, 3)]
    assert rows[2][3:6] == (0, 0, start(0))
    assert rows[2][6] in (b"", None)
    aborted = [] if isolation == 1 else None
    assert [p.aborted_transactions for t in resp.responses for p in t.partitions] == \
        [aborted] * 4
    if version >= 12:
        p = resp.responses[0].partitions[0]
        assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, 4)
        assert p.diverging_epoch is None          # tagged field left out: no divergence
    if version >= 11:
        assert resp.responses[0].partitions[0].preferred_read_replica == -1


@pytest.mark.parametrize("version", versions(1, 4))          # v0-3: test_protocol_legacy
def test_fetch_returns_the_first_batch_even_when_larger_than_max_bytes(version):
    fake = fetch_cluster()
    resp = ask(fake, fetch_request(version, {"orders": [(0, 1, -1, -1, 3)]}))
    assert resp.responses[0].partitions[0].records == b"first-batch"
    resp = ask(fake, fetch_request(version, {"orders": [(0, 1, -1, -1, 1 << 20)]}))
    assert resp.responses[0].partitions[0].records == b"first-batch" b"second-batch"


@pytest.mark.parametrize("version", versions(1, 7))
def test_fetch_with_a_session_id_we_never_gave_is_session_not_found(version):
    fake = fetch_cluster()
    resp = ask(fake, fetch_request(version, {"orders": [(0, 0, -1, -1, 1 << 20)]},
                                   session_id=99, session_epoch=1))
    assert (resp.error_code, resp.session_id, resp.responses) == (70, 0, [])
    assert fake.calls_of("fetch") == []


@pytest.mark.parametrize("version", versions(1, 7))
def test_fetch_session_full_then_incremental_answers_only_what_changed(version):
    fake = fetch_cluster()
    parts = {"orders": [(0, 2, -1, -1, 1 << 20)], "audit": [(0, 0, -1, -1, 1 << 20)]}
    full = ask(fake, fetch_request(version, parts, session_epoch=0))
    assert full.session_id > 0
    assert [(name_of(t), len(t.partitions)) for t in full.responses] == \
        [("orders", 1), ("audit", 1)]
    # Only the moved position is sent; nothing new: the broker reads both, answers none.
    quiet = ask(fake, fetch_request(version, {"orders": [(0, 5, -1, -1, 1 << 20)]},
                                    session_id=full.session_id, session_epoch=1))
    assert (quiet.error_code, quiet.session_id, quiet.responses) == (0, full.session_id, [])
    assert [(a.tp, a.offset) for a in fake.calls_of("fetch")[-1]["asks"]] == \
        [(("orders", 0), 5), (("audit", 0), 0)]
    fake.append(("audit", 0), b"news", count=1)                  # HW 1: audit changed
    news = ask(fake, fetch_request(version, {}, session_id=full.session_id, session_epoch=2))
    assert [(name_of(t), [p.records for p in t.partitions]) for t in news.responses] == \
        [("audit", [b"news"])]
    stale = ask(fake, fetch_request(version, {}, session_id=full.session_id, session_epoch=2))
    assert (stale.error_code, stale.responses) == (71, [])       # INVALID_FETCH_SESSION_EPOCH


def test_a_session_with_a_change_journal_reads_only_what_changed():
    """With the broker's ChangeJournal (and a clock) an incremental fetch reads the
    partitions asked, changed or unfinished, and watches the rest."""
    clock = [0]
    fake = FakeBrokerApi(broker_id=1, clock_ms=lambda: clock[0], full_read_interval_ms=1000)
    fake.add_broker(1, PLAINTEXT=("10.0.0.1", 9092))
    fake.add_topic("orders", 2)
    fake.add_topic("audit", 1)
    parts = {"orders": [(0, 0, -1, -1, 1 << 20), (1, 0, -1, -1, 1 << 20)],
             "audit": [(0, 0, -1, -1, 1 << 20)]}
    full = ask(fake, fetch_request(12, parts, session_epoch=0, replica_id=2))
    assert fake.calls_of("fetch")[-1]["reads"] is None
    quiet = ask(fake, fetch_request(12, {}, session_id=full.session_id, session_epoch=1,
                                    replica_id=2))
    call = fake.calls_of("fetch")[-1]
    assert call["reads"] == set() and len(call["asks"]) == 3 and quiet.responses == []
    fake.append(("audit", 0), b"news", count=1)
    news = ask(fake, fetch_request(12, {}, session_id=full.session_id, session_epoch=2,
                                   replica_id=2))
    assert fake.calls_of("fetch")[-1]["reads"] == {("audit", 0)}
    assert [(name_of(t), [p.records for p in t.partitions]) for t in news.responses] == \
        [("audit", [b"news"])]
    ask(fake, fetch_request(12, {"audit": [(0, 1, -1, -1, 1 << 20)]},
                            session_id=full.session_id, session_epoch=3, replica_id=2))
    assert fake.calls_of("fetch")[-1]["reads"] == {("audit", 0)}    # asked, had records
    clock[0] = 1000
    ask(fake, fetch_request(12, {}, session_id=full.session_id, session_epoch=4,
                            replica_id=2))
    assert fake.calls_of("fetch")[-1]["reads"] is None                # the interval passed


class AppendsBeforeItReads(FakeBrokerApi):
    """A broker where another thread's append lands after the handler was called but
    before the broker takes its lock to read: the decision of what to read must see it."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.land = None

    def fetch(self, *args, **kw):
        if self.land is not None:
            self.append(*self.land)
            self.land = None
        return super().fetch(*args, **kw)


def test_what_a_session_reads_is_decided_where_the_broker_orders_its_changes():
    fake = AppendsBeforeItReads(broker_id=1, clock_ms=lambda: 0)
    fake.add_broker(1, PLAINTEXT=("10.0.0.1", 9092))
    fake.add_topic("audit", 1)
    full = ask(fake, fetch_request(12, {"audit": [(0, 0, -1, -1, 1 << 20)]}, session_epoch=0,
                                   replica_id=2))
    fake.land = (("audit", 0), b"late", 1)
    got = ask(fake, fetch_request(12, {}, session_id=full.session_id, session_epoch=1,
                                  replica_id=2))
    assert [(name_of(t), [p.records for p in t.partitions]) for t in got.responses] == \
        [("audit", [b"late"])]


def test_fetch_session_forgets_partitions_a_follower_drops():
    from kafka.protocol.consumer import FetchRequest as FR
    fake = fetch_cluster()
    full = ask(fake, fetch_request(12, {"orders": [(0, 2, -1, -1, 1 << 20)],
                                        "audit": [(0, 0, -1, -1, 1 << 20)]},
                                   session_epoch=0, replica_id=2))
    req = fetch_request(12, {}, session_id=full.session_id, session_epoch=1, replica_id=2)
    req.forgotten_topics_data = [FR.ForgottenTopic(topic="audit", partitions=[0])]
    ask(fake, req)
    assert [a.tp for a in fake.calls_of("fetch")[-1]["asks"]] == [("orders", 0)]


def test_fetch_v12_carries_a_diverging_epoch_to_a_follower():
    fake = fetch_cluster()
    fake.new_leader_epoch(("orders", 0))                     # epochs [(4, 0), (5, 6)]
    fake.partition(("orders", 0)).epochs = [(3, 0), (4, 2), (5, 6)]
    # A follower that last fetched epoch 3 at offset 4: epoch 3 ended at offset 2.
    resp = ask(fake, fetch_request(12, {"orders": [(0, 4, 5, 3, 1 << 20)]}, replica_id=2))
    p = resp.responses[0].partitions[0]
    assert (p.error_code, p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (0, 3, 2)
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, 5)
    assert p.records in (b"", None)
    assert fake.calls_of("fetch")[0]["replica_id"] == 2


# -- ListOffsets, OffsetForLeaderEpoch, InitProducerId ---------------------------------------
@pytest.mark.parametrize("version", versions(21))
def test_delete_records_answers_each_partition_its_low_watermark_or_error(version):
    from kafka.protocol.admin import DeleteRecordsRequest
    fake = cluster()
    for p in range(3):
        fake.append(("orders", p), b"batch", count=6)           # HW 6: the log end
    t = DeleteRecordsRequest.DeleteRecordsTopic
    dp = t.DeleteRecordsPartition
    resp = ask(fake, DeleteRecordsRequest[version](timeout_ms=1500, topics=[
        t(name="orders", partitions=[dp(partition_index=0, offset=3), dp(partition_index=1, offset=-1),
                                     dp(partition_index=2, offset=7)]),
        t(name="audit", partitions=[dp(partition_index=5, offset=0)])]))
    (call,) = fake.calls_of("delete_records")
    assert call["timeout_ms"] == 1500
    rows = [(t.name, p.partition_index, p.error_code, p.low_watermark)
            for t in resp.topics for p in t.partitions]
    assert rows == [("orders", 0, 0, 3), ("orders", 1, 0, 6), ("orders", 2, 1, -1),
                    ("audit", 5, 3, -1)]


@pytest.mark.parametrize("version", versions(2, 1))      # v0: test_protocol_legacy
def test_list_offsets_by_timestamp_and_version(version):
    fake = cluster()
    for p in range(3):
        tp = ("orders", p)
        for ts, count in ((1000, 2), (2000, 3), (3000, 1)):   # 0-1, 2-4, 5
            fake.append(tp, b"batch", count=count, timestamp=ts)
        fake.partition(tp).epochs = [(2, 0), (4, 2)]
    fake.partition(("orders", 1)).log_start = 1
    t = ListOffsetsRequest.ListOffsetsTopic
    lp = t.ListOffsetsPartition
    resp = ask(fake, ListOffsetsRequest[version](replica_id=-1, isolation_level=1, topics=[
        t(name="orders", partitions=[lp(partition_index=0, timestamp=-1, current_leader_epoch=4),
                                     lp(partition_index=1, timestamp=-2),
                                     lp(partition_index=2, timestamp=1500)]),
        t(name="audit", partitions=[lp(partition_index=0, timestamp=-1,
                                       current_leader_epoch=3)])]))
    (call,) = fake.calls_of("list_offsets")
    assert call["isolation_level"] == (1 if version >= 2 else 0)
    epoch = (lambda e: e) if version >= 4 else (lambda e: -1)
    assert call["asks"] == [(("orders", 0), -1, epoch(4)), (("orders", 1), -2, -1),
                            (("orders", 2), 1500, -1), (("audit", 0), -1, epoch(3))]
    rows = [(t.name, p.partition_index, p.error_code, p.timestamp, p.offset, p.leader_epoch)
            for t in resp.topics for p in t.partitions]
    assert rows == [("orders", 0, 0, -1, 6, epoch(4)),
                    ("orders", 1, 0, -1, 1, epoch(2)),
                    ("orders", 2, 0, 2000, 2, epoch(4)),
                    # audit is at epoch 0: a client at epoch 3 is ahead (UNKNOWN_LEADER_EPOCH)
                    ("audit", 0, 75, -1, -1, -1) if version >= 4 else ("audit", 0, 0, -1, 0, -1)]


@pytest.mark.parametrize("version", versions(23))
def test_offset_for_leader_epoch_answers_end_offsets(version):
    fake = cluster()
    for p in range(3):
        tp = ("orders", p)
        fake.append(tp, b"batch", count=25)
        fake.partition(tp).epochs = [(1, 0), (3, 10), (4, 20)]
    t = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    lp = t.OffsetForLeaderPartition
    resp = ask(fake, OffsetForLeaderEpochRequest[version](replica_id=-1, topics=[
        t(topic="orders", partitions=[lp(partition=0, current_leader_epoch=4, leader_epoch=2),
                                      lp(partition=1, current_leader_epoch=-1, leader_epoch=0),
                                      lp(partition=2, current_leader_epoch=3, leader_epoch=4)]),
        t(topic="audit", partitions=[lp(partition=5, current_leader_epoch=-1,
                                        leader_epoch=0)])]))
    current = (lambda e: e) if version >= 2 else (lambda e: -1)    # v0-1 carry no fencing
    epoch = (lambda e: e) if version >= 1 else (lambda e: -1)      # v0 answers no epoch
    assert fake.calls_of("offsets_for_leader_epoch")[0]["asks"] == [
        (("orders", 0), current(4), 2), (("orders", 1), -1, 0), (("orders", 2), current(3), 4),
        (("audit", 5), -1, 0)]
    assert [(t.topic, p.partition, p.error_code, p.leader_epoch, p.end_offset)
            for t in resp.topics for p in t.partitions] == [
        ("orders", 0, 0, epoch(1), 10),   # epoch 2 unknown: epoch 1, which ended at 10
        ("orders", 1, 0, -1, -1),         # before the first epoch
        ("orders", 2, 74, -1, -1) if version >= 2 else   # client's epoch 3 < 4: fenced
        ("orders", 2, 0, epoch(4), 25),
        ("audit", 5, 3, -1, -1)]


@pytest.mark.parametrize("version", versions(22))
def test_init_producer_id_returns_the_brokers_producer(version):
    fake = cluster()
    first = ask(fake, InitProducerIdRequest[version](
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
    assert (first.error_code, first.producer_id, first.producer_epoch) == (0, 1000, 0)
    again = ask(fake, InitProducerIdRequest[version](
        transactional_id=None, transaction_timeout_ms=60000, producer_id=1000,
        producer_epoch=0))
    # v3+ carries the producer to bump (KIP-360); before, every call is a new producer.
    expected = (0, 1000, 1) if version >= 3 else (0, 1001, 0)
    assert (again.error_code, again.producer_id, again.producer_epoch) == expected
    assert fake.calls_of("init_producer_id") == [
        {"transactional_id": None, "producer_id": -1, "producer_epoch": -1},
        {"transactional_id": None, "producer_id": 1000 if version >= 3 else -1,
         "producer_epoch": 0 if version >= 3 else -1}]


@pytest.mark.parametrize("version", versions(22))
def test_init_producer_id_with_a_transactional_id_goes_to_the_transaction_coordinator(version):
    fake = cluster()
    ask_init = lambda: ask(fake, InitProducerIdRequest[version](  # noqa: E731
        transactional_id="tx-1", transaction_timeout_ms=60000, producer_id=-1,
        producer_epoch=-1))
    resp = ask_init()                    # its __transaction_state partition is not ours
    assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (16, -1, -1)
    fake.own_txns()
    first, second = ask_init(), ask_init()
    assert (first.error_code, first.producer_epoch) == (0, 0) and first.producer_id >= 0
    assert (second.error_code, second.producer_id, second.producer_epoch) == (
        0, first.producer_id, 1)                     # the same id, fenced by a new epoch
    assert fake.calls_of("init_producer_id") == []
    assert [type(c["event"]).__name__ for c in fake.calls_of("txn_call")] == \
        ["InitProducerId"] * 3


# -- CreateTopics, DeleteTopics, CreatePartitions ------------------------------------------
@pytest.mark.parametrize("validate_only", [False, True])
@pytest.mark.parametrize("version", versions(19))
def test_create_topics(version, validate_only):
    fake = cluster()
    fake.num_partitions = 4
    t = CreateTopicsRequest.CreatableTopic
    c = t.CreatableTopicConfig
    resp = ask(fake, CreateTopicsRequest[version](timeout_ms=25000, validate_only=validate_only,
                                                  topics=[
        t(name="twice", num_partitions=3, replication_factor=1, assignments=[], configs=[]),
        t(name="fresh", num_partitions=-1, replication_factor=-1, assignments=[],
          configs=[c(name="retention.ms", value="1000")]),
        t(name="twice", num_partitions=1, replication_factor=1, assignments=[], configs=[]),
        t(name="audit", num_partitions=1, replication_factor=1, assignments=[], configs=[])]))
    (call,) = fake.calls_of("create_topics")
    validate_only = validate_only and version >= 1                # v0 cannot ask
    assert (call["timeout_ms"], call["validate_only"]) == (25000, validate_only)
    assert [(s.name, s.partitions, s.replication_factor, dict(s.configs))
            for s in call["specs"]] == [("fresh", -1, -1, {"retention.ms": "1000"}),
                                        ("audit", 1, 1, {})]
    # every copy of a duplicated name is answered (Kafka's multi-collection of results)
    assert [(r.name, r.error_code) for r in resp.topics] == [
        ("twice", 42), ("fresh", 0), ("twice", 42), ("audit", 36)]
    if version >= 1:                    # error messages from v1
        assert resp.topics[0].error_message == "Found multiple entries for this topic."
        assert resp.topics[1].error_message is None
    assert ("fresh" in fake.topics) is not validate_only and "twice" not in fake.topics
    fresh, audit = resp.topics[1], resp.topics[3]
    if version >= 5:                     # the broker's numbers and configs, from v5
        assert (fresh.num_partitions, fresh.replication_factor) == (4, 1)
        assert {c.name: (c.value, c.config_source) for c in fresh.configs}["retention.ms"] \
            == ("1000", 1)
        assert len(fresh.configs) == 4
        assert audit.configs is None and resp.topics[0].configs is None
    else:
        assert (fresh.num_partitions, fresh.replication_factor) == (-1, -1)
        assert fresh.configs in ([], None)


def delete_topics_request(version, names):
    s = DeleteTopicsRequest.DeleteTopicState
    return DeleteTopicsRequest[version](timeout_ms=20000, topic_names=names,
                                        topics=[s(name=n, topic_id=uuid.UUID(int=0))
                                                for n in names])


@pytest.mark.parametrize("version", versions(20))
def test_delete_topics(version):
    fake = cluster()
    fake.add_topic("dup")
    req = delete_topics_request(version, ["orders", "ghost", "dup", "dup"])
    resp = ask(fake, req)
    # Kafka 3.8 has no duplicate rule here: deleted once, every copy answered
    assert fake.calls_of("delete_topics") == [{"names": ["orders", "ghost", "dup"],
                                               "timeout_ms": 20000}]
    assert [(r.name, r.error_code) for r in resp.responses] == [
        ("orders", 0), ("ghost", 3), ("dup", 0), ("dup", 0)]
    if version >= 5:
        assert [r.error_message is None for r in resp.responses] == [True, False, True, True]
    if version >= 6:
        assert [r.topic_id for r in resp.responses] == [None] * 4     # the zero UUID
    assert set(fake.topics) == {"audit"}


def test_delete_topics_v6_by_id_deletes_known_ids_and_answers_unknown_topic_id():
    fake = cluster()
    s = DeleteTopicsRequest.DeleteTopicState
    some_id = uuid.UUID("0123456789abcdef0123456789abcdef")
    resp = ask(fake, DeleteTopicsRequest[6](timeout_ms=1000, topics=[
        s(name="audit", topic_id=uuid.UUID(int=0)), s(name=None, topic_id=some_id),
        s(name=None, topic_id=TOPIC_IDS["orders"])]))
    assert [(r.name, r.topic_id, r.error_code) for r in resp.responses] == [
        ("audit", None, 0), (None, some_id, 100), ("orders", TOPIC_IDS["orders"], 0)]
    assert fake.calls_of("delete_topics") == [{"names": ["audit", "orders"], "timeout_ms": 1000}]
    assert fake.topics == {}


def test_delete_topics_v6_with_a_name_and_an_id_is_invalid_request():
    fake = cluster()
    s = DeleteTopicsRequest.DeleteTopicState
    resp = ask(fake, DeleteTopicsRequest[6](timeout_ms=1000, topics=[
        s(name="audit", topic_id=TOPIC_IDS["audit"])]))
    assert [(r.name, r.error_code) for r in resp.responses] == [("audit", 42)]
    assert fake.calls_of("delete_topics") == [] and "audit" in fake.topics


def test_metadata_v12_by_topic_id():
    fake = cluster()
    t = MetadataRequest.MetadataRequestTopic
    ghost = uuid.UUID(int=5)
    resp = ask(fake, MetadataRequest[12](topics=[t(name=None, topic_id=TOPIC_IDS["audit"]),
                                                 t(name=None, topic_id=ghost)],
                                         allow_auto_topic_creation=True,
                                         include_topic_authorized_operations=False))
    assert [(x.name, x.topic_id, x.error_code, len(x.partitions)) for x in resp.topics] == [
        ("audit", TOPIC_IDS["audit"], 0, 1), (None, ghost, 100, 0)]
    assert set(fake.topics) == {"orders", "audit"}        # an id is never auto-created


@pytest.mark.parametrize("version", versions(19, 7))
def test_create_topics_v7_answers_the_new_topic_id(version):
    fake = cluster()
    t = CreateTopicsRequest.CreatableTopic
    resp = ask(fake, CreateTopicsRequest[version](timeout_ms=1000, validate_only=False, topics=[
        t(name="fresh", num_partitions=1, replication_factor=1, assignments=[], configs=[])]))
    (result,) = resp.topics
    assert result.error_code == 0
    assert result.topic_id == topic_uuid(fake.topic_id_of["fresh"]) != uuid.UUID(int=0)


@pytest.mark.parametrize("version", versions(1, 13))
def test_fetch_by_topic_id_unknown_and_reused_ids(version):
    fake = fetch_cluster()
    ghost = uuid.UUID(int=5)
    ft, fp = FetchRequest.FetchTopic, FetchRequest.FetchTopic.FetchPartition
    req = fetch_request(version, {"orders": [(0, 3, -1, -1, 1 << 20)]}, session_epoch=0)
    req.topics.append(ft(topic_id=ghost, partitions=[fp(partition=0, fetch_offset=0,
                                                        current_leader_epoch=-1,
                                                        last_fetched_epoch=-1,
                                                        log_start_offset=-1,
                                                        partition_max_bytes=100)]))
    resp = ask(fake, req)
    rows = [(t.topic_id, p.partition_index, p.error_code) for t in resp.responses
            for p in t.partitions]
    assert rows == [(TOPIC_IDS["orders"], 0, 0), (ghost, 0, 100)]
    assert [a.tp for a in fake.calls_of("fetch")[0]["asks"]] == [("orders", 0)]
    # "orders" is re-created under a new id: the session's partition is inconsistent
    sid = resp.session_id
    fake.topic_id_of["orders"] = topic_id_text(uuid.UUID(int=0x7777))
    again = ask(fake, fetch_request(version, {}, session_id=sid, session_epoch=1))
    assert [(t.topic_id, p.error_code) for t in again.responses for p in t.partitions] == \
        [(uuid.UUID(int=0x7777), 103)]
    # a session made by v13+ is not for v12, nor the other way round
    old = ask(fake, fetch_request(12, {}, session_id=sid, session_epoch=2))
    assert (old.error_code, old.session_id) == (106, 0)


def test_fetch_v15_reads_the_replica_from_replica_state():
    fake = fetch_cluster()
    req = fetch_request(15, {"orders": [(0, 3, -1, -1, 1 << 20)]}, replica_id=2)
    ask(fake, req)
    assert fake.calls_of("fetch")[0]["replica_id"] == 2


def test_fetch_v16_answers_the_new_leaders_endpoint():
    fake = fetch_cluster()
    resp = ask(fake, fetch_request(16, {"orders": [(1, 0, -1, -1, 1 << 20)]}))
    (p,) = resp.responses[0].partitions
    assert (p.error_code, p.current_leader.leader_id) == (6, 2)
    assert [(n.node_id, n.host, n.port) for n in resp.node_endpoints] == [(2, "10.0.0.2", 9092)]


@pytest.mark.parametrize("validate_only", [False, True])
@pytest.mark.parametrize("version", versions(37))
def test_create_partitions(version, validate_only):
    fake = cluster()
    fake.add_topic("pair", 2)
    t = CreatePartitionsRequest.CreatePartitionsTopic
    a = t.CreatePartitionsAssignment
    resp = ask(fake, CreatePartitionsRequest[version](
        timeout_ms=15000, validate_only=validate_only, topics=[
            t(name="orders", count=5, assignments=[a(broker_ids=[1, 2]), a(broker_ids=[2, 1])]),
            t(name="pair", count=1, assignments=None),
            t(name="ghost", count=2, assignments=None),
            t(name="audit", count=2, assignments=None),
            t(name="audit", count=3, assignments=None)]))
    assert fake.calls_of("create_partitions") == [{
        "asks": [("orders", 5, [(1, 2), (2, 1)]), ("pair", 1, None), ("ghost", 2, None)],
        "timeout_ms": 15000, "validate_only": validate_only}]
    assert [(r.name, r.error_code) for r in resp.results] == [
        ("orders", 0), ("pair", 37), ("ghost", 3), ("audit", 42)]
    assert resp.results[0].error_message is None
    assert "higher than the requested 1" in resp.results[1].error_message
    orders = fake.topics["orders"]
    if validate_only:
        assert len(orders) == 3
    else:
        assert [orders[p].replicas for p in (3, 4)] == [(1, 2), (2, 1)]
    assert len(fake.topics["audit"]) == 1


# -- Configs -----------------------------------------------------------------------------------
@pytest.mark.parametrize("version", versions(32))
def test_describe_configs(version):
    fake = cluster()
    fake.topic_configs["orders"] = {"retention.ms": "1000"}
    r = DescribeConfigsRequest.DescribeConfigsResource
    resp = ask(fake, DescribeConfigsRequest[version](
        include_synonyms=False, include_documentation=True, resources=[
            r(resource_type=2, resource_name="orders", configuration_keys=None),
            r(resource_type=2, resource_name="audit", configuration_keys=["retention.ms"]),
            r(resource_type=4, resource_name="1", configuration_keys=["log.dirs"]),
            r(resource_type=2, resource_name="ghost", configuration_keys=None)]))
    assert fake.calls_of("describe_configs") == [{"resources": [
        (ConfigResource(2, "orders"), None), (ConfigResource(2, "audit"), ["retention.ms"]),
        (ConfigResource(4, "1"), ["log.dirs"]), (ConfigResource(2, "ghost"), None)]}]
    assert [(x.resource_type, x.resource_name, x.error_code) for x in resp.results] == [
        (2, "orders", 0), (2, "audit", 0), (4, "1", 0), (2, "ghost", 3)]
    # v0 has no config source: is_default says what source 5 (DEFAULT_CONFIG) says
    source = (lambda n: n) if version >= 1 else (lambda n: -1)
    orders = {c.name: (c.value, c.config_source, c.read_only) for c in resp.results[0].configs}
    assert orders == {"cleanup.policy": ("delete", source(5), False),
                      "retention.ms": ("1000", source(1), False),
                      "segment.bytes": ("1073741824", source(5), False),
                      "min.insync.replicas": ("1", source(5), False)}
    if version == 0:
        assert {c.name for c in resp.results[0].configs if c.is_default} == {
            "cleanup.policy", "segment.bytes", "min.insync.replicas"}
    (audit,) = resp.results[1].configs
    assert (audit.name, audit.value, audit.config_source) == ("retention.ms", "604800000",
                                                              source(5))
    (broker,) = resp.results[2].configs
    assert (broker.name, broker.value, broker.read_only, broker.config_source) == (
        "log.dirs", "/tmp/rayka", True, source(4))
    assert resp.results[3].configs == [] and resp.results[3].error_message
    if version >= 3:                     # documentation asked for, and the field exists
        assert audit.documentation == "the retention.ms default"
        assert broker.documentation is None


@pytest.mark.parametrize("version", [3, 4])
def test_describe_configs_documentation_only_when_asked(version):
    fake = cluster()
    r = DescribeConfigsRequest.DescribeConfigsResource
    resp = ask(fake, DescribeConfigsRequest[version](
        include_synonyms=False, include_documentation=False,
        resources=[r(resource_type=2, resource_name="audit", configuration_keys=None)]))
    assert resp.results[0].configs and all(c.documentation is None
                                           for c in resp.results[0].configs)


@pytest.mark.parametrize("validate_only", [False, True])
@pytest.mark.parametrize("version", versions(44))
def test_incremental_alter_configs(version, validate_only):
    fake = cluster()
    fake.topic_configs["orders"] = {"cleanup.policy": "compact"}
    r = IncrementalAlterConfigsRequest.AlterConfigsResource
    c = r.AlterableConfig
    resp = ask(fake, IncrementalAlterConfigsRequest[version](
        validate_only=validate_only, resources=[
            r(resource_type=2, resource_name="orders", configs=[
                c(name="retention.ms", config_operation=0, value="1000"),
                c(name="cleanup.policy", config_operation=1, value=None)]),
            r(resource_type=2, resource_name="audit", configs=[
                c(name="cleanup.policy", config_operation=2, value="compact")]),
            r(resource_type=2, resource_name="ghost", configs=[]),
            r(resource_type=4, resource_name="1", configs=[
                c(name="log.dirs", config_operation=0, value="/x")])]))
    assert fake.calls_of("alter_configs") == [{"validate_only": validate_only, "resources": [
        (ConfigResource(2, "orders"), [("retention.ms", 0, "1000"),
                                       ("cleanup.policy", 1, None)]),
        (ConfigResource(2, "audit"), [("cleanup.policy", 2, "compact")]),
        (ConfigResource(2, "ghost"), []),
        (ConfigResource(4, "1"), [("log.dirs", 0, "/x")])]}]
    assert [(x.resource_type, x.resource_name, x.error_code) for x in resp.responses] == [
        (2, "orders", 0), (2, "audit", 0), (2, "ghost", 3), (4, "1", 42)]
    assert resp.responses[0].error_message is None and resp.responses[3].error_message
    if validate_only:
        assert fake.topic_configs["orders"] == {"cleanup.policy": "compact"}
    else:
        assert fake.topic_configs["orders"] == {"retention.ms": "1000"}
        assert fake.topic_configs["audit"] == {"cleanup.policy": "delete,compact"}


# -- errors and versions -----------------------------------------------------------------------
@pytest.mark.parametrize("api_key,version", SERVED)
def test_a_kafka_error_raised_by_the_broker_is_answered_everywhere(api_key, version):
    fake = cluster()
    method = LEGACY_METHOD.get((api_key, version), METHOD[api_key])
    fake.raises[method] = NotController("moved")
    resp = ask(fake, sample_request(api_key, version))
    assert len(fake.calls_of(method)) == 1                # the call was made, and raised
    tree = resp.to_dict()
    codes = list(walk(tree, "error_code")) + list(walk(tree, "partition_error_code"))
    if api_key == 35 and version < 3:        # DescribeLogDirs v0-2: no field for it (Kafka)
        assert codes == [] and tree["results"] == []
        return
    assert codes and set(codes) == {41}
    groups_batched = api_key == 9 and version >= 8
    if api_key in (0, 1, 2, 3, 8, 9, 19, 20, 23, 37, 27, 28, 61) and not groups_batched or \
            (api_key, version) < (24, 4) and api_key == 24:     # topics asked are echoed
        assert asked_names(tree) == set(ASKED)
    if api_key in (15, 42) or groups_batched or (api_key, version) == (10, 4):  # groups
        assert set(walk(tree, "group_id")) | set(walk(tree, "key")) == (
            {"g1"} if api_key == 10 else {"g1", "g2"})


def test_any_other_exception_propagates_to_the_caller():
    fake = cluster()
    fake.raises["fetch"] = RuntimeError("disk on fire")
    with pytest.raises(RuntimeError, match="disk on fire"):
        send(fake, sample_request(1, 12))


@pytest.mark.parametrize("api_key,version", [(3, 13), (1, 17), (2, 9), (22, 6), (60, 2)])
def test_a_version_not_served_is_answered_unsupported_version(api_key, version):
    assert has_request_schema(api_key, version)           # decodable, just not served
    fake = cluster()
    request, _ = send(fake, sample_request(api_key, version))
    assert not request.served
    resp = ask(fake, sample_request(api_key, version))
    codes = list(walk(resp.to_dict(), "error_code"))
    assert codes and set(codes) == {35}
    assert fake.calls == []


def test_apiversions_v4_gets_the_kip_511_answer_then_v3_works():
    fake = cluster()
    conn = Connection()
    hello = ApiVersionsRequest[4](client_software_name="kafka-python",
                                  client_software_version="3.0.12")
    request, out = send(fake, hello, correlation_id=1, conn=conn)
    assert not request.served
    # Header v0 (no tagged-field byte), v0 body: error 35 and our ApiVersions range only.
    assert out == (b"\x00\x00\x00\x10" b"\x00\x00\x00\x01" b"\x00\x23"
                   b"\x00\x00\x00\x01" b"\x00\x12\x00\x00\x00\x03")
    first = ApiVersionsResponse.decode(out[4:], version=0, header=True)
    assert first.error_code == 35
    assert [(a.api_key, a.min_version, a.max_version) for a in first.api_keys] == [(18, 0, 3)]
    retry = min(4, first.api_keys[0].max_version)
    request, out = send(fake, ApiVersionsRequest[retry](
        client_software_name="kafka-python", client_software_version="3.0.12"),
        correlation_id=2, conn=conn)
    assert request.served
    assert out[4:10] == b"\x00\x00\x00\x02\x00\x00"        # header v0, then error 0
    second = ApiVersionsResponse.decode(out[4:], version=retry, header=True)
    assert second.error_code == 0
    assert {a.api_key: (a.min_version, a.max_version) for a in second.api_keys} == SUPPORTED
    assert conn.responses_sent == 2 and fake.calls == []


def test_the_fake_is_a_real_broker_api():
    # Every BrokerApi method exists on the fake with the same parameter names.
    for name, member in vars(BrokerApi).items():
        if inspect.isfunction(member) and not name.startswith("_"):
            ours = getattr(FakeBrokerApi, name)
            assert list(inspect.signature(ours).parameters) == \
                list(inspect.signature(member).parameters), name
    assert isinstance(FakeBrokerApi().broker_id, int)
    assert Partition(leader=1, replicas=(1,), isr=(1,)).log_end == 0
