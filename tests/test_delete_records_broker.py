"""DeleteRecords on real brokers (tests/broker_world.py: three brokers over a real ZooKeeper,
real listeners and replication sockets, no Ray) through librdkafka's AdminClient: the answer
comes once every live replica's log start passed the offset (Kafka's low watermark), and a
replica that cannot follow (its replication link cut) makes the partition answer
REQUEST_TIMED_OUT at the operation timeout, the leader's own log start moved anyway."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.broker_world import InProcessCluster, running

pytestmark = [pytest.mark.zk, pytest.mark.timeout(180)]

BROKERS = (1, 2, 3)


@pytest.fixture(scope="module")
def world(zk_server, tmp_path_factory):
    yield from running(InProcessCluster(zk_server.connect_string,
                                        tmp_path_factory.mktemp("deletes"), broker_ids=BROKERS))


def bootstrap(world) -> str:
    return world.bootstrap_servers()


def produced(world, topic: str, n: int = 300) -> tuple[int, list[int]]:
    """`topic` (1 partition, RF 3) with n records acknowledged by every replica: (leader,
    followers)."""
    world.create_topic(topic, 1, 3)
    producer = Producer({"bootstrap.servers": bootstrap(world), "acks": "all"})
    for i in range(n):
        producer.produce(topic, b"r%04d" % i)
    assert producer.flush(30) == 0
    state = world.brokers[1].rm.metadata.partitions[(topic, 0)]
    return state.leader, [r for r in state.replicas if r != state.leader]


def test_the_answer_waits_for_every_replicas_log_start(world):
    topic = "del-wait"
    leader, followers = produced(world, topic)
    admin = AdminClient({"bootstrap.servers": bootstrap(world)})
    (future,) = admin.delete_records([TopicPartition(topic, 0, 120)],
                                     operation_timeout=20, request_timeout=30).values()
    assert future.result(40).low_watermark == 120
    # answered only once each follower's fetch said its log start is there
    starts = {b: world.brokers[b].rm.log((topic, 0)).log_start_offset for b in BROKERS}
    assert starts == dict.fromkeys(BROKERS, 120), starts


def test_a_follower_that_cannot_follow_times_the_partition_out(world):
    topic = "del-cut"
    leader, followers = produced(world, topic)
    lagging = followers[0]
    world.brokers[lagging].cut_replication(60, leader)
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(world)})
        (future,) = admin.delete_records([TopicPartition(topic, 0, 50)],
                                         operation_timeout=1, request_timeout=30).values()
        with pytest.raises(KafkaException) as raised:
            future.result(40)
        assert raised.value.args[0].code() == KafkaError.REQUEST_TIMED_OUT
        assert world.brokers[leader].rm.log((topic, 0)).log_start_offset == 50
        assert world.brokers[lagging].rm.log((topic, 0)).log_start_offset == 0
    finally:
        world.brokers[lagging].cut_replication(0, leader)
