"""Fetch from follower (KIP-392) on real brokers (tests/broker_world.py: three brokers with
broker.rack RACK<id> and Kafka's RackAwareReplicaSelector over a real ZooKeeper, real
listeners, no Ray) with librdkafka's own clients: every broker's rack in DescribeCluster,
broker.rack and replica.selector.class in DescribeConfigs as static broker configs, and a
consumer whose client.rack is a follower's reading a replicated partition in order from
that follower (librdkafka's per-broker rxbytes, as its test 0101 checks)."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

from replicas.replica_selector import RACK_AWARE
from tests.broker_world import InProcessCluster, running

pytestmark = [pytest.mark.zk, pytest.mark.timeout(180)]

BROKERS = (1, 2, 3)
MESSAGES, SIZE = 500, 100


@pytest.fixture(scope="module")
def world(zk_server, tmp_path_factory):
    cluster = InProcessCluster(zk_server.connect_string, tmp_path_factory.mktemp("racks"),
                               broker_ids=BROKERS,
                               config={"replica.selector.class": RACK_AWARE},
                               broker_configs={b: {"broker.rack": f"RACK{b}"} for b in BROKERS})
    yield from running(cluster)


def bootstrap(world) -> str:
    return world.bootstrap_servers()


def test_every_broker_reports_its_rack(world):
    admin = AdminClient({"bootstrap.servers": bootstrap(world)})
    nodes = admin.describe_cluster(request_timeout=10).result(20).nodes
    assert {n.id: n.rack for n in nodes} == {b: f"RACK{b}" for b in BROKERS}
    for b in BROKERS:
        res = ConfigResource(ResourceType.BROKER, str(b))
        entries = admin.describe_configs([res], request_timeout=10)[res].result(20)
        rack, selector = entries["broker.rack"], entries["replica.selector.class"]
        assert (rack.value, selector.value) == (f"RACK{b}", RACK_AWARE)
        assert rack.source == selector.source == ConfigSource.STATIC_BROKER_CONFIG.value
        assert rack.is_read_only


def test_a_consumer_in_a_followers_rack_reads_from_that_follower(world):
    topic = "fff"
    world.create_topic(topic, 1, 3)
    producer = Producer({"bootstrap.servers": bootstrap(world), "acks": "all"})
    for i in range(MESSAGES):
        producer.produce(topic, f"msg={i}\n".encode().ljust(SIZE, b"."))
    assert producer.flush(30) == 0
    state = world.brokers[1].rm.metadata.partitions[(topic, 0)]
    follower = next(r for r in state.replicas if r != state.leader)

    rxbytes: dict[int, int] = {}

    def on_stats(text: str) -> None:
        for b in json.loads(text)["brokers"].values():
            if b["nodeid"] >= 0:
                rxbytes[b["nodeid"]] = b["rxbytes"]

    consumer = Consumer({"bootstrap.servers": bootstrap(world), "group.id": "fff",
                         "enable.auto.commit": False, "client.rack": f"RACK{follower}",
                         "statistics.interval.ms": 200, "stats_cb": on_stats})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = []
        deadline = time.monotonic() + 60
        while len(got) < MESSAGES and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(int(msg.value().split(b"\n")[0][4:]))
        assert got == list(range(MESSAGES))          # all of them, in order
        rxbytes.clear()                               # the stats after the last message
        deadline = time.monotonic() + 20
        while not rxbytes and time.monotonic() < deadline:
            consumer.poll(0.2)
    finally:
        consumer.close()
    assert rxbytes, "no statistics from librdkafka"
    others = {b: n for b, n in rxbytes.items() if b != follower}
    assert rxbytes[follower] > MESSAGES * SIZE, rxbytes
    assert all(n < rxbytes[follower] for n in others.values()), rxbytes
    # Kafka's per-topic BytesIn/BytesOut (actors/topic_io.py): the producer's bytes on the
    # leader, the consumer's on the follower that served it, replication counted nowhere
    io = {b: world.brokers[b].topic_io_stats().get(topic, (0, 0)) for b in BROKERS}
    assert io[state.leader][0] > MESSAGES * SIZE, io
    assert all(io[b][0] == 0 for b in BROKERS if b != state.leader), io
    assert io[follower][1] > MESSAGES * SIZE, io
    assert all(io[b][1] < MESSAGES * SIZE for b in BROKERS if b != follower), io
