"""One contract, two brokers: the handler tests' FakeBrokerApi and the real broker's
KafkaBrokerApi (actors.broker.Broker, two of them with a real controller over a real
ZooKeeper, in this process: tests/broker_world.py) answer the same BrokerApi calls the
same way.

The handler tests trust the fake; this suite is what ties the fake to the broker. Each
test runs against both; a difference is a bug in one of them (the real broker is the
reference: Kafka's rules as its sources state them).

`side.leader(tp)` is the api of the broker leading tp; `side.not_leader(tp)` one of a
live broker that does not lead it; topics are created through the api itself.
"""

from __future__ import annotations

import time
import uuid

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from protocol.api import ConfigResource, FetchAsk, TopicSpec
from replicas.errors import (CoordinatorNotAvailable, FencedLeaderEpoch, InvalidPartitions, InvalidReplicationFactor,
                             InvalidTopic, NotLeaderOrFollower, OffsetOutOfRange,
                             TopicAlreadyExists, UnknownLeaderEpoch, UnknownTopicOrPartition)
from tests.broker_world import InProcessCluster, settled
from tests.fake_broker_api import FakeBrokerApi

pytestmark = pytest.mark.zk

EARLIEST, LATEST = -2, -1
CONSUMER = -1
TOPIC_RESOURCE = 2
SOURCE_TOPIC = 1


def batch(*values: bytes, timestamp: int = 1_000) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp=timestamp + i, key=None, value=v, headers=[])
    return bytes(b.build())


class FakeSide:
    name = "fake"

    def __init__(self):
        self.api = FakeBrokerApi(broker_id=1)
        self.api.add_broker(2, PLAINTEXT=("127.0.0.1", 9093))

    def new_topic(self, partitions: int = 1, configs=None) -> str:
        name = f"t-{uuid.uuid4().hex[:8]}"
        out = self.api.create_topics([TopicSpec(name, partitions, 1, {}, dict(configs or {}))],
                                     1000, False)[name]
        assert out.error == 0, out
        return name

    def led_elsewhere(self) -> str:
        name = f"t-{uuid.uuid4().hex[:8]}"
        self.api.add_topic(name, replicas=(2,))
        return name

    def leader(self, tp):
        return self.api

    def not_leader(self, tp):
        return self.api


class RealSide:
    name = "real"

    def __init__(self, cluster: InProcessCluster):
        self.cluster = cluster

    def new_topic(self, partitions: int = 1, configs=None, via: int = 1) -> str:
        name = f"t-{uuid.uuid4().hex[:8]}"
        self.cluster.create_topic(name, partitions, 1, configs, via=via)
        for b in self.cluster.brokers:     # every broker's metadata knows it before a test asks
            self.cluster.wait_for(lambda b=b: all(
                (name, p) in self.cluster.brokers[b].rm.metadata.partitions
                for p in range(partitions)), 30, f"{name} in broker {b}'s metadata")
        return name

    def led_elsewhere(self) -> str:
        return self.new_topic()          # not_leader() picks the broker that does not lead it

    def _leader_id(self, tp) -> int:
        return self.cluster.brokers[1].rm.metadata.partitions[tp].leader

    def leader(self, tp):
        return self.cluster.api(self._leader_id(tp))

    def not_leader(self, tp):
        lid = self._leader_id(tp)
        return self.cluster.api(next(b for b in self.cluster.brokers if b != lid))


@pytest.fixture(scope="module")
def real_cluster(zk_server, tmp_path_factory):
    cluster = InProcessCluster(zk_server.connect_string, tmp_path_factory.mktemp("contract"),
                               broker_ids=(1, 2))
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(params=["fake", "real"])
def side(request):
    if request.param == "fake":
        return FakeSide()
    return RealSide(request.getfixturevalue("real_cluster"))


# -- produce and fetch --------------------------------------------------------------------------
def test_a_produced_batch_is_fetched_back_byte_for_byte(side):
    tp = (side.new_topic(), 0)
    api = side.leader(tp)
    first, second = batch(b"a", b"b"), batch(b"c")
    assert settled(api.produce(-1, 5000, [(tp, first)]))[tp].base_offset == 0
    answer = settled(api.produce(-1, 5000, [(tp, second)]))[tp]
    assert (answer.error, answer.base_offset) == (0, 2)
    got = api.fetch(CONSUMER, 0, 1, 1 << 20, 0, [FetchAsk(tp, 0)])[tp]
    assert (got.error, got.high_watermark) == (0, 3)
    # From the magic byte on a batch is the producer's (the CRC covers it); the leader may
    # stamp the base offset and leader epoch in front of it (the fake keeps them as given).
    assert len(got.records) == len(first) + len(second)
    assert got.records[16:len(first)] == first[16:]
    assert got.records[len(first) + 16:] == second[16:]


def test_produce_answers_per_partition(side):
    tp = (side.new_topic(), 0)
    unknown = (tp[0], 7)
    out = settled(side.leader(tp).produce(1, 5000, [(tp, batch(b"x")), (unknown, batch(b"y"))]))
    assert out[tp].error == 0
    assert out[unknown].error == UnknownTopicOrPartition.code


def test_a_broker_not_leading_a_partition_says_so(side):
    name = side.led_elsewhere()
    tp = (name, 0)
    api = side.not_leader(tp)
    assert settled(api.produce(1, 5000, [(tp, batch(b"x"))]))[tp].error == NotLeaderOrFollower.code
    assert api.fetch(CONSUMER, 0, 1, 1 << 20, 0, [FetchAsk(tp, 0)])[tp].error == \
        NotLeaderOrFollower.code
    assert api.list_offsets(0, [(tp, LATEST, -1)])[tp].error == NotLeaderOrFollower.code


def test_fetch_outside_the_log_is_offset_out_of_range(side):
    tp = (side.new_topic(), 0)
    api = side.leader(tp)
    settled(api.produce(-1, 5000, [(tp, batch(b"a"))]))
    got = api.fetch(CONSUMER, 0, 1, 1 << 20, 0, [FetchAsk(tp, 5)])[tp]
    assert got.error == OffsetOutOfRange.code
    assert (got.high_watermark, got.log_start_offset) == (1, 0)


def test_fetch_with_a_leader_epoch_the_leader_has_not_seen_is_unknown(side):
    tp = (side.new_topic(), 0)
    api = side.leader(tp)
    got = api.fetch(CONSUMER, 0, 1, 1 << 20, 0, [FetchAsk(tp, 0, current_leader_epoch=9)])[tp]
    assert got.error == UnknownLeaderEpoch.code
    assert got.error != FencedLeaderEpoch.code


def test_a_consumer_reads_nothing_past_the_high_watermark(side):
    tp = (side.new_topic(), 0)
    api = side.leader(tp)
    settled(api.produce(-1, 5000, [(tp, batch(b"a"))]))
    got = api.fetch(CONSUMER, 0, 1, 1 << 20, 0, [FetchAsk(tp, 1)])[tp]
    assert (got.error, got.records, got.high_watermark) == (0, b"", 1)


# -- offsets -------------------------------------------------------------------------------------
def test_list_offsets_earliest_and_latest_follow_appends_and_deletes(side):
    tp = (side.new_topic(), 0)
    api = side.leader(tp)
    for v in (b"a", b"b", b"c"):
        settled(api.produce(-1, 5000, [(tp, batch(v))]))
    answers = api.list_offsets(0, [(tp, EARLIEST, -1)])
    assert (answers[tp].error, answers[tp].offset) == (0, 0)
    assert api.list_offsets(0, [(tp, LATEST, -1)])[tp].offset == 3
    assert api.delete_records([(tp, 2)], 5000)[tp] == (0, 2)
    assert api.list_offsets(0, [(tp, EARLIEST, -1)])[tp].offset == 2
    assert api.delete_records([(tp, 9)], 5000)[tp][0] == OffsetOutOfRange.code


def test_the_end_offset_of_the_current_epoch_is_the_log_end(side):
    tp = (side.new_topic(), 0)
    api = side.leader(tp)
    settled(api.produce(-1, 5000, [(tp, batch(b"a", b"b"))]))
    answer = api.offsets_for_leader_epoch([(tp, -1, 0)])[tp]
    assert (answer.error, answer.leader_epoch, answer.offset) == (0, 0, 2)


# -- topics, metadata, configs, groups ---------------------------------------------------------
def test_create_topics_answers_kafkas_errors_per_topic(side):
    existing = side.new_topic()
    api = side.leader((existing, 0))
    specs = [TopicSpec(existing, 1, 1), TopicSpec("bad/name", 1, 1),
             TopicSpec(f"z-{uuid.uuid4().hex[:6]}", 0, 1),
             TopicSpec(f"r-{uuid.uuid4().hex[:6]}", 1, 5)]
    out = api.create_topics(specs, 5000, True)
    assert [out[s.name].error for s in specs] == [
        TopicAlreadyExists.code, InvalidTopic.code, InvalidPartitions.code,
        InvalidReplicationFactor.code]


def test_metadata_names_the_partitions_and_their_leader(side):
    name = side.new_topic(partitions=2)
    api = side.leader((name, 0))
    md = api.metadata([name, "never-made"], False, "PLAINTEXT")
    topics = {t.name: t for t in md.topics}
    assert topics["never-made"].error == UnknownTopicOrPartition.code
    assert topics[name].error == 0
    assert sorted(p.partition for p in topics[name].partitions) == [0, 1]
    live = {b.id for b in md.brokers}
    assert all(p.leader in live and p.leader in p.isr for p in topics[name].partitions)


def test_a_topic_config_given_at_creation_is_described_as_the_topics(side):
    name = side.new_topic(configs={"retention.ms": "123456"})
    api = side.leader((name, 0))
    out = api.describe_configs([(ConfigResource(TOPIC_RESOURCE, name), ["retention.ms"])])
    (outcome,) = out.values() if isinstance(out, dict) else out
    entries = {e.name: e for e in outcome.entries}
    assert outcome.error == 0
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == \
        ("123456", SOURCE_TOPIC)


def test_find_coordinator_names_a_live_broker_by_its_endpoint(side):
    tp = (side.new_topic(), 0)
    api = side.leader(tp)
    # COORDINATOR_NOT_AVAILABLE (15) is Kafka's answer while __consumer_offsets is created
    answer = InProcessCluster.wait_for(
        lambda: (lambda a: a if a[0] != CoordinatorNotAvailable.code else None)(
            api.find_coordinator(["g1"], "PLAINTEXT")["g1"]), 30, "a coordinator")
    error, node, host, port = answer
    brokers = {b.id: (b.host, b.port) for b in api.metadata([], False, "PLAINTEXT").brokers}
    assert error == 0
    assert brokers[node] == (host, port)


def test_a_topic_made_compacted_refuses_keyless_records_naming_each(side):
    """IncrementalAlterConfigs APPEND on cleanup.policy reaches the replicas (the real broker
    applies it when ZooKeeper's watch fires), then a keyless batch fails whole with one
    record error per record (KIP-467)."""
    tp = (side.new_topic(), 0)
    api = side.leader(tp)
    res = ConfigResource(2, tp[0])
    assert api.alter_configs([(res, [("cleanup.policy", 2, "compact")])], False)[res].error == 0
    deadline = time.monotonic() + 30
    while True:
        out = settled(api.produce(-1, 5000, [(tp, batch(b"a", b"b"))]))[tp]
        if out.error or time.monotonic() > deadline:
            break
        time.sleep(0.05)        # poll interval until the config is applied
    assert out.error == 87 and [i for i, _ in out.record_errors] == [0, 1]
    assert out.message.startswith("One or more records have been rejected due to 2 record "
                                  "errors in total")
