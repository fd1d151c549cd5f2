"""A full disk on a real rayka cluster (real Ray, the real ZooKeeper), as a user meets it.

Broker 1 keeps its log directory on an 8 MiB tmpfs (root mounts it). librdkafka produces
20,000 records of 1 KB, acks=all and idempotent, to a 6-partition RF 3 topic
(min.insync.replicas 2, 1 MiB segments): broker 1's disk fills within seconds. Every record
must be acknowledged (the producer's retries land on the leaders the controller chose
elsewhere) and read back once; `rayka status` names broker 1's directory offline with its
replicas, and its `rayka_broker_offline_log_dirs` figure is 1; the brokers with room keep running retention on a second topic. Then the space is
freed and broker 1 restarted: every ISR is full again.
"""

from __future__ import annotations

import subprocess
import uuid

import pytest
import ray
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

import rayka
from rayka.cli import status_of
from rayka.client.admin import wait_for
from rayka.errors import RequestTimedOut
from tests.ray_cluster import ray_session, wait_broker_back  # noqa: F401  (fixture)

pytestmark = [pytest.mark.ray, pytest.mark.disk, pytest.mark.timeout(600)]

PARTITIONS, RECORDS, SIZE = 6, 20_000, 1_000
TIMEOUT_S = 120
RETAINED = {"retention.bytes": 200_000, "segment.bytes": 50_000, "min.insync.replicas": 2}


@pytest.fixture(scope="module")
def small_disk(tmp_path_factory):
    path = tmp_path_factory.mktemp("small")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(path)], check=True,
                   capture_output=True)
    yield path
    subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


@pytest.fixture(scope="module")
def cluster(ray_session, tmp_path_factory, small_disk):
    c = rayka.start_local(name=f"d{uuid.uuid4().hex[:8]}", brokers=3, controllers=1,
                          data_dir=str(tmp_path_factory.mktemp("rayka")),
                          log_retention_check_interval_ms=500,
                          broker_configs={1: {"log.dirs": str(small_disk)}})
    yield c
    c.shutdown()


def produce(bootstrap: str, topic: str, n: int, **config) -> dict[int, list[bytes]]:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "message.timeout.ms": TIMEOUT_S * 1000, **config})
    acked: dict[int, list[bytes]] = {}
    failed = []

    def report(err, msg):
        if err is None:
            acked.setdefault(msg.partition(), []).append(msg.value())
        else:
            failed.append(err)
    for i in range(n):
        value = f"{topic}-{i:06d}.".encode().ljust(SIZE, b"x")
        while True:
            try:
                p.produce(topic, value, key=b"%d" % (i % 101), on_delivery=report)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(TIMEOUT_S) == 0 and failed == [], failed[:3]
    return acked


def read_back(bootstrap: str, topic: str, expected: int) -> dict[int, list[bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got: dict[int, list[bytes]] = {}
    count = [0]

    def done():
        for m in c.consume(2_000, 0.5):
            assert m.error() is None, m.error()
            got.setdefault(m.partition(), []).append(m.value())
            count[0] += 1
        return count[0] >= expected
    try:
        wait_for(done, TIMEOUT_S, f"{expected} records of {topic} read back")
    finally:
        c.close()
    return got


def test_a_full_disk_is_reported_offline_and_loses_nothing(cluster):
    topic, kept = f"full-{uuid.uuid4().hex[:6]}", f"kept-{uuid.uuid4().hex[:6]}"
    admin = cluster.admin()
    admin.create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": 2,
                                              "segment.bytes": 1 << 20})
    admin.create_topic(kept, PARTITIONS, 3, RETAINED)
    bootstrap = cluster.bootstrap_servers()

    acked = produce(bootstrap, topic, RECORDS)
    assert sum(map(len, acked.values())) == RECORDS
    # 3 MB into 200 KB per partition, in batches smaller than a segment (retention deletes
    # whole segments, never the active one)
    produce(bootstrap, kept, 3_000, **{"batch.size": 20_000})

    status = status_of(cluster)
    [offline] = status["offline_log_dirs"]
    assert offline["broker"] == 1 and offline["error"].startswith("ENOSPC")
    assert {f"{topic}-{p}" for p in range(PARTITIONS)} <= set(offline["partitions"])
    assert ray.get(cluster.broker_actor(1).metrics.remote())["offline_log_dirs"] == 1
    wait_for(lambda: all(p.leader != 1 and 1 not in p.isr
                         for p in admin.describe_topic(topic)), 30,
             "every leadership off broker 1, broker 1 out of every ISR")
    assert read_back(bootstrap, topic, RECORDS) == acked      # once each, in order

    def retained():          # brokers 2 and 3 kept deleting old segments of `kept`
        infos = [ray.get(cluster.broker_actor(b).partition_info.remote((kept, p)))
                 for b in (2, 3) for p in range(PARTITIONS)]
        seen[:] = [(i["log_start_offset"], i["size_bytes"]) for i in infos]
        return all(i["log_start_offset"] > 0 and i["size_bytes"] <= 300_000 for i in infos)
    seen = []
    try:
        wait_for(retained, 30, "retention on brokers 2 and 3")
    except RequestTimedOut:
        pytest.fail(f"no retention on brokers 2 and 3: (log start, bytes) {seen}")

    # space freed, broker 1 restarted: its replicas recover and rejoin every ISR
    subprocess.run(["mount", "-o", "remount,size=512m",
                    str(offline["path"]).rsplit("/broker-1", 1)[0]], check=True)
    before = cluster.store.get_broker(1).epoch
    cluster.kill_broker(1)
    wait_broker_back(cluster, {1: before}, TIMEOUT_S)
    assert status_of(cluster)["offline_log_dirs"] == []
    assert ray.get(cluster.broker_actor(1).metrics.remote())["offline_log_dirs"] == 0
