"""A full disk on real brokers (tests/broker_world.py: three brokers and a controller over a
real ZooKeeper, real listeners, no Ray), written to by librdkafka.

Broker 1 keeps its logs on a small tmpfs (a real ENOSPC, root mounts it). An acks=all,
idempotent librdkafka producer writes more than that disk holds to a 6-partition RF 3
topic (min.insync.replicas 2). Kafka's KIP-112 path must hold end to end: broker 1's
directory goes offline, it tells the controller through /log_dir_event_notification, the
controller moves every leadership off it and takes it out of every ISR, the producer's
retries land on the new leaders — so every record is acknowledged and read back once, in
order per partition. DescribeLogDirs answers KAFKA_STORAGE_ERROR for the dead directory.
With space freed and broker 1 restarted, its replicas recover and rejoin every ISR. With
two log directories (Kafka's JBOD), the full one goes offline and the other keeps its
replicas in their ISRs. A directory whose disk answers EIO (rayka/chaos/faultfs.py) is
treated alike.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from replicas.errors import ErrorCode
from tests.broker_world import InProcessCluster

pytestmark = [pytest.mark.zk, pytest.mark.disk, pytest.mark.timeout(300)]

BROKERS = (1, 2, 3)
TOPIC, PARTITIONS = "full", 6
RECORDS, SIZE = 6_000, 1_000        # 6 MB for a 3 MiB disk
DISK = "3m"


def mount_tmpfs(path, size: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                   check=True, capture_output=True)


def umount(path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


@pytest.fixture
def world(zk_server, tmp_path):
    small = tmp_path / "small"
    mount_tmpfs(small, DISK)
    cluster = None
    try:
        cluster = InProcessCluster(
            zk_server.connect_string, tmp_path / "data", broker_ids=BROKERS,
            config={"log.retention.check.interval.ms": 500},
            broker_configs={1: {"log.dirs": str(small)}})
        cluster.small = small
        yield cluster
    finally:
        if cluster is not None:
            cluster.close()
        umount(small)


def bootstrap(world) -> str:
    return ",".join(f"127.0.0.1:{world.brokers[b].listeners[0].port}" for b in BROKERS)


def leadership(world, via: int = 2) -> dict[int, tuple[int, tuple]]:
    meta = world.brokers[via].rm.metadata.partitions
    return {p: (meta[(TOPIC, p)].leader, tuple(meta[(TOPIC, p)].isr))
            for p in range(PARTITIONS)}


def produce_all(world) -> dict[int, list[bytes]]:
    producer = Producer({"bootstrap.servers": bootstrap(world), "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": 120_000})
    acked: dict[int, list[bytes]] = {}
    failed = []

    def report(err, msg):
        if err is not None:
            failed.append((msg.value()[:16], err))
        else:
            acked.setdefault(msg.partition(), []).append(msg.value())

    for i in range(RECORDS):
        value = f"r{i:06d}.".encode().ljust(SIZE, b"x")
        while True:
            try:
                producer.produce(TOPIC, value, key=str(i % 97).encode(), on_delivery=report)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0, "records still unacknowledged after 120 s"
    assert failed == [], failed[:5]
    return acked


def consume_all(world, expected: int) -> dict[int, list[bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap(world), "group.id": "reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got: dict[int, list[bytes]] = {}
    n = 0

    def all_read():
        nonlocal n
        for msg in consumer.consume(1000, 0.5):
            assert msg.error() is None, msg.error()
            got.setdefault(msg.partition(), []).append(msg.value())
            n += 1
        return n >= expected

    try:
        world.wait_for(all_read, 60, f"{expected} records read back")
    finally:
        consumer.close()
    return got


def test_a_full_disk_moves_leadership_and_loses_nothing(world):
    world.create_topic(TOPIC, PARTITIONS, 3, configs={"min.insync.replicas": "2",
                                                      "segment.bytes": "262144"})
    world.wait_for(lambda: all((TOPIC, p) in world.brokers[b].rm.metadata.partitions
                               for b in BROKERS for p in range(PARTITIONS)),
                   30, "every broker's metadata to list the topic")
    assert {leader for leader, _ in leadership(world).values()} == set(BROKERS)

    acked = produce_all(world)
    assert sum(len(v) for v in acked.values()) == RECORDS

    # broker 1's directory is offline, every partition led elsewhere, 1 out of every ISR
    broker = world.brokers[1]
    [d] = broker.log_dirs()
    assert not d["online"] and d["error"].startswith("ENOSPC"), d
    assert sorted(tuple(tp) for tp in d["offline_partitions"]) == \
        [(TOPIC, p) for p in range(PARTITIONS)]
    world.wait_for(lambda: all(leader != 1 and 1 not in isr
                               for leader, isr in leadership(world).values()),
                   30, "every leadership off broker 1 and 1 out of every ISR")
    [answer] = world.api(2).describe_log_dirs(None)
    assert answer.error == ErrorCode.NONE.value
    [answer] = world.api(1).describe_log_dirs(None)
    assert answer.error == ErrorCode.KAFKA_STORAGE_ERROR.value and answer.partitions == ()

    got = consume_all(world, RECORDS)
    assert got == acked                     # every record once, in acknowledgement order

    # space freed, broker 1 restarted: its replicas recover and rejoin every ISR
    subprocess.run(["mount", "-o", "remount,size=64m", str(world.small)], check=True)
    broker.shutdown()
    world.brokers.pop(1)
    world.start_broker(1)
    world.wait_for(lambda: all(set(isr) == set(BROKERS)
                               for _, isr in leadership(world).values()),
                   60, "broker 1 back in every ISR")
    [d] = world.brokers[1].log_dirs()
    assert d["online"] and {(TOPIC, p) for p in range(PARTITIONS)} <= \
        {tuple(tp) for tp in d["partitions"]}
    for p in range(PARTITIONS):
        info = world.brokers[1].partition_info((TOPIC, p))
        assert info["log_end_offset"] == world.brokers[2].partition_info((TOPIC, p))[
            "log_end_offset"] == len(acked.get(p, []))
    assert os.path.ismount(world.small)


@pytest.fixture
def jbod(zk_server, tmp_path):
    small = tmp_path / "small"
    mount_tmpfs(small, "2m")
    cluster = None
    try:
        cluster = InProcessCluster(
            zk_server.connect_string, tmp_path / "data", broker_ids=BROKERS,
            broker_configs={1: {"log.dirs": f"{small},{tmp_path / 'big'}"}})
        yield cluster
    finally:
        if cluster is not None:
            cluster.close()
        umount(small)


def test_one_failed_directory_of_several_leaves_the_others_serving(jbod):
    world = jbod
    world.create_topic(TOPIC, PARTITIONS, 3, configs={"min.insync.replicas": "2",
                                                      "segment.bytes": "262144"})
    world.wait_for(lambda: all((TOPIC, p) in world.brokers[b].rm.metadata.partitions
                               for b in BROKERS for p in range(PARTITIONS)),
                   30, "every broker's metadata to list the topic")
    broker = world.brokers[1]
    dirs = {d["path"].rsplit("/", 2)[1]: d for d in broker.log_dirs()}
    on_small = {tuple(tp) for tp in dirs["small"]["partitions"] if tp[0] == TOPIC}
    on_big = {tuple(tp) for tp in dirs["big"]["partitions"] if tp[0] == TOPIC}
    assert on_small and on_big                          # spread over both directories
    acked = produce_all(world)
    dirs = {d["path"].rsplit("/", 2)[1]: d for d in broker.log_dirs()}
    assert not dirs["small"]["online"] and dirs["big"]["online"]
    assert {tuple(tp) for tp in dirs["small"]["offline_partitions"]} >= on_small
    # the replicas on the healthy directory stay in their ISRs and keep up with the leader
    world.wait_for(lambda: all(1 in leadership(world)[p][1] for _, p in on_big)
                   and all(1 not in leadership(world)[p][1] for _, p in on_small),
                   30, "broker 1 in the ISRs of its healthy directory's partitions only")
    world.wait_for(lambda: all(broker.partition_info(tp)["log_end_offset"] ==
                               len(acked.get(tp[1], [])) for tp in on_big),
                   30, "broker 1's healthy replicas at the leaders' log end")
    assert consume_all(world, RECORDS) == acked


@pytest.fixture
def eio_world(zk_server, tmp_path):
    from rayka.chaos.faultfs import FaultFs
    (tmp_path / "src").mkdir()
    (tmp_path / "mnt").mkdir()
    fs = FaultFs.start(tmp_path / "src", tmp_path / "mnt", tmp_path / "ctl.sock")
    cluster = None
    try:
        cluster = InProcessCluster(zk_server.connect_string, tmp_path / "data",
                                   broker_ids=BROKERS,
                                   broker_configs={1: {"log.dirs": str(tmp_path / "mnt")}})
        cluster.fs = fs
        yield cluster
    finally:
        if cluster is not None:
            cluster.close()
        fs.stop()


def test_a_directory_failing_with_eio_goes_offline_like_a_full_one(eio_world):
    world = eio_world
    world.create_topic(TOPIC, PARTITIONS, 3, configs={"min.insync.replicas": "2"})
    world.wait_for(lambda: all((TOPIC, p) in world.brokers[b].rm.metadata.partitions
                               for b in BROKERS for p in range(PARTITIONS)),
                   30, "every broker's metadata to list the topic")
    world.fs.set_mode("eio")                # the disk under broker 1 dies
    acked = produce_all(world)
    [d] = world.brokers[1].log_dirs()
    assert not d["online"] and d["error"].startswith("EIO"), d
    world.wait_for(lambda: all(leader != 1 and 1 not in isr
                               for leader, isr in leadership(world).values()),
                   30, "every leadership off broker 1 and 1 out of every ISR")
    assert consume_all(world, RECORDS) == acked
