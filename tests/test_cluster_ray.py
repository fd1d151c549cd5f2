"""End to end on REAL Ray and the REAL ZooKeeper: rayka.start_local with 3 broker actors and
2 controller actors, topics, acks=all production, consumption, leader and controller kills,
and bad input."""

from __future__ import annotations

import threading
import uuid

import pytest
import ray

import rayka
from rayka.admin import wait_for
from replicas.errors import (CorruptRecord, InvalidRequiredAcks, InvalidReplicationFactor,
                             RecordTooLarge, TopicAlreadyExists, UnknownTopicOrPartition)
from replicas.records import build_batch

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def ray_session():
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def cluster(ray_session, tmp_path_factory):
    c = rayka.start_local(name=f"t{uuid.uuid4().hex[:8]}", brokers=3, controllers=2,
                          data_dir=str(tmp_path_factory.mktemp("rayka")),
                          replica_lag_time_max_ms=3000)
    yield c
    c.shutdown()


def read_all(cluster, topic, expected, timeout_s=60):
    consumer = cluster.consumer()
    consumer.subscribe([topic])
    got = []
    wait_for(lambda: got.extend(consumer.poll(timeout_ms=200)) or len(got) >= expected,
             timeout_s, f"{expected} records from {topic}")
    return got


def check_exactly_once(acked, records):
    by_offset = {(r.partition, r.offset): r.value for r in records}
    assert len(by_offset) == len(records), "a record was read twice"
    for meta, value in acked:
        assert by_offset.get((meta.partition, meta.offset)) == value, f"lost or wrong: {meta}"
    for p in {r.partition for r in records}:
        offsets = [r.offset for r in records if r.partition == p]
        assert offsets == sorted(offsets) and offsets == list(range(offsets[0], offsets[0] + len(offsets)))


def test_produce_acks_all_and_consume_everything(cluster):
    infos = cluster.admin().create_topic("clicks", 3, 3, {"min.insync.replicas": 2})
    assert {i.leader for i in infos} == {1, 2, 3} and all(len(i.isr) == 3 for i in infos)
    producer = cluster.producer(acks="all")
    futures = [(producer.send("clicks", b"v%d" % i, key=b"k%d" % i), b"v%d" % i) for i in range(3000)]
    producer.flush(60)
    acked = [(f.result(), v) for f, v in futures]
    bulk = producer.send_batch("clicks", [b"bulk%d" % i for i in range(2000)], partition=1).result(60)
    acked += list(zip(bulk, [b"bulk%d" % i for i in range(2000)]))
    producer.close()
    records = read_all(cluster, "clicks", 5000)
    check_exactly_once(acked, records)
    assert {r.partition for r in records} == {0, 1, 2}


def test_leader_killed_during_production_loses_nothing(cluster):
    admin = cluster.admin()
    admin.create_topic("orders", 2, 3, {"min.insync.replicas": 2})
    producer = cluster.producer(acks="all", linger_ms=2)
    acked, stop = [], threading.Event()

    def produce():
        i = 0
        while not stop.is_set() or i < 4000:
            value = b"o%d" % i
            acked.append((producer.send("orders", value, partition=i % 2), value))
            i += 1
            if i % 500 == 0:
                producer.flush(60)
    t = threading.Thread(target=produce)
    t.start()
    wait_for(lambda: len(acked) > 1000, 30, "production under way")
    leader = admin.describe_topic("orders")[0].leader
    cluster.kill_broker(leader, restart=True)
    wait_for(lambda: admin.describe_topic("orders")[0].leader not in (-1, leader), 30, "new leader")
    stop.set()
    t.join(120)
    producer.flush(120)
    results = [(f.result(), v) for f, v in acked]
    records = read_all(cluster, "orders", len(results))
    check_exactly_once(results, records)
    assert len(records) == len(results)                         # no duplicates either
    wait_for(lambda: all(len(p.isr) == 3 for p in admin.describe_topic("orders")), 60,
             "the restarted broker back in every ISR")


def test_controller_killed_then_broker_failure_handled(cluster):
    admin = cluster.admin()
    before = admin.controller()
    killed = cluster.kill_controller(restart=True)
    wait_for(lambda: admin.controller().epoch > before.epoch and admin.controller().id is not None,
             30, "a new controller epoch")
    assert killed == before.id
    admin.create_topic("after", 1, 2)
    assert admin.describe_topic("after")[0].leader in (1, 2, 3)


def test_bad_input_is_typed_and_appends_nothing(cluster):
    admin = cluster.admin()
    with pytest.raises(InvalidReplicationFactor):
        admin.create_topic("too-many", 1, 4)
    admin.create_topic("once", 1, 1)
    with pytest.raises(TopicAlreadyExists):
        admin.create_topic("once", 1, 1)
    with pytest.raises(InvalidRequiredAcks):
        cluster.producer(acks=2)
    producer = cluster.producer()
    with pytest.raises(UnknownTopicOrPartition):
        producer.metadata.topic_wait_s = 0.5
        producer.send("no-such-topic", b"x")
    leader = admin.describe_topic("once")[0].leader
    broker = cluster.broker_actor(leader)
    good = bytes(build_batch([b"a"], timestamps_ms=0))
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    r = ray.get(broker.produce.remote(("once", 0), bytes(corrupt), -1, 5000))
    assert r["error"] == CorruptRecord.code
    huge = bytes(build_batch([b"x" * (2 << 20)], timestamps_ms=0))
    r = ray.get(broker.produce.remote(("once", 0), huge, -1, 5000))
    assert r["error"] == RecordTooLarge.code
    r = ray.get(broker.produce.remote(("once", 0), good, 7, 5000))
    assert r["error"] == InvalidRequiredAcks.code
    info = ray.get(broker.partition_info.remote(("once", 0)))
    assert info["log_end_offset"] == 0                          # nothing was appended


def test_unreachable_zookeeper_fails_fast_with_the_address(ray_session):
    from controller.store_api import ZkUnavailable
    from rayka.zookeeper import free_port
    address, name = f"127.0.0.1:{free_port()}", f"nozk{uuid.uuid4().hex[:6]}"
    with pytest.raises(ZkUnavailable, match=address):
        rayka.start_local(name=name, zookeeper=address, zk_connect_timeout_s=2)
    with pytest.raises(ValueError):        # nothing was created in Ray for it
        ray.get_actor("rayka-cluster", namespace=f"rayka-{name}")
