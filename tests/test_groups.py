"""Consumer groups on a real cluster (real Ray, the real ZooKeeper): the brokers' group
coordinator with offsets in `__consumer_offsets`, native members and librdkafka members
(confluent-kafka over the listeners) in the same groups.

Short timeouts keep the test fast: group.initial.rebalance.delay.ms 300,
group.min.session.timeout.ms 1000, 8 offsets partitions. Waits are polls with deadlines."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
import ray
from confluent_kafka import Consumer as KafkaConsumer

import rayka
from coordinator.records import decode_key, decode_offset_commit_value, partition_for
from rayka.client.admin import wait_for
from rayka.client.group import CommitFailed
from replicas.errors import GroupIdNotFound, InvalidRequest, NonEmptyGroup
from tests.ray_cluster import kill_brokers_and_wait_back, ray_session  # noqa: F401  (fixture)

pytestmark = pytest.mark.ray
TIMEOUT_S = 120
SESSION_MS = 3000
OFFSETS_PARTITIONS = 8


@pytest.fixture(scope="module")
def cluster(ray_session, tmp_path_factory):
    c = rayka.start_local(name=f"g{uuid.uuid4().hex[:8]}", brokers=3, controllers=2,
                          data_dir=str(tmp_path_factory.mktemp("rayka")),
                          replica_lag_time_max_ms=3000, include_dashboard=False,
                          group_initial_rebalance_delay_ms=300, group_min_session_timeout_ms=1000,
                          offsets_topic_num_partitions=OFFSETS_PARTITIONS)
    yield c
    c.shutdown()


def fill(cluster, topic: str, partitions: int, n: int) -> None:
    cluster.admin().create_topic(topic, partitions, 3)
    p = cluster.producer(acks="all")
    p.send_batch(topic, [b"%s-%d" % (topic.encode(), i) for i in range(n)],
                 keys=[b"k%d" % i for i in range(n)]).result(60)
    p.close()


class Member:
    """A native group member polling in a thread; records what it read and was assigned."""

    def __init__(self, cluster, group: str, topics, commit=True, **kw):
        self.consumer = cluster.consumer(group_id=group, session_timeout_ms=SESSION_MS,
                                         heartbeat_interval_ms=300, **kw)
        self.read: list = []
        self.assigned: set = set()
        self.stop, self.commit = threading.Event(), commit
        self.errors: list = []
        self.consumer.subscribe(topics, on_assign=lambda tps: self.assigned.update(tps),
                                on_revoke=lambda tps: self.assigned.difference_update(tps))
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            while not self.stop.is_set():
                got = self.consumer.poll(timeout_ms=200)
                self.read += got
                if got and self.commit:
                    try:
                        self.consumer.commit()
                    except CommitFailed:
                        pass              # rebalanced meanwhile: the new owner re-reads
        except Exception as exc:          # surfaced by the test
            self.errors.append(exc)

    def close(self, leave=True):
        self.stop.set()
        self.thread.join(30)
        if leave:
            self.consumer.close()


def owners_settle(members, partitions):
    """Every partition owned by exactly one live member."""
    owned = [tp for m in members for tp in m.consumer.assignment()]
    return sorted(owned) == sorted(partitions) and all(not m.consumer.member.needs_join
                                                       for m in members)


def test_two_members_split_a_topic_and_one_takes_over_when_the_other_leaves(cluster):
    topic, group = f"split-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    fill(cluster, topic, 6, 600)
    tps = [(topic, p) for p in range(6)]
    a = Member(cluster, group, [topic])
    wait_for(lambda: owners_settle([a], tps), TIMEOUT_S, "A owns everything")
    b = Member(cluster, group, [topic])
    wait_for(lambda: owners_settle([a, b], tps) and a.consumer.assignment() and
             b.consumer.assignment(), TIMEOUT_S, "A and B split the partitions")
    assert not set(a.consumer.assignment()) & set(b.consumer.assignment())
    wait_for(lambda: sum(map(len, (a.read, b.read))) >= 600, TIMEOUT_S, "600 records read")
    described = cluster.admin().describe_group(group)
    assert described["state"] == "Stable" and len(described["members"]) == 2
    a.close()                                         # LeaveGroup: no session timeout needed
    wait_for(lambda: owners_settle([b], tps), TIMEOUT_S, "B owns everything after A left")
    values = [r.value for r in a.read + b.read]
    assert set(values) == {b"%s-%d" % (topic.encode(), i) for i in range(600)}
    b.close()
    assert not a.errors and not b.errors
    assert cluster.admin().describe_group(group)["state"] == "Empty"


@ray.remote(num_cpus=0)
class RemoteMember:
    """A member in another process, to be killed without leaving."""

    def __init__(self, name, group, topic):
        self.cluster = rayka.connect(name)
        self.consumer = self.cluster.consumer(group_id=group, session_timeout_ms=SESSION_MS,
                                              heartbeat_interval_ms=300)
        self.consumer.subscribe([topic])
        self.stop = False
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while not self.stop:
            self.consumer.poll(timeout_ms=200)

    def assignment(self):
        return self.consumer.assignment()


def test_a_dead_member_is_expired_after_its_session_timeout(cluster):
    topic, group = f"dead-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    fill(cluster, topic, 4, 40)
    tps = [(topic, p) for p in range(4)]
    remote = RemoteMember.options(namespace=cluster.namespace).remote(cluster.name, group, topic)
    survivor = Member(cluster, group, [topic], commit=False)
    wait_for(lambda: len(ray.get(remote.assignment.remote())) + len(survivor.consumer.assignment())
             == 4 and survivor.consumer.assignment() and ray.get(remote.assignment.remote()),
             TIMEOUT_S, "both members own partitions")
    ray.kill(remote)                                  # no LeaveGroup: heartbeats just stop
    t0 = time.monotonic()
    wait_for(lambda: owners_settle([survivor], tps), TIMEOUT_S, "the survivor owns everything")
    assert time.monotonic() - t0 >= SESSION_MS / 1000 * 0.5    # it took the session timeout
    survivor.close()


def test_a_new_member_resumes_from_committed_offsets_after_every_broker_restarted(cluster):
    topic, group = f"resume-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    fill(cluster, topic, 3, 300)
    tps = [(topic, p) for p in range(3)]
    c = cluster.consumer(group_id=group, session_timeout_ms=SESSION_MS, heartbeat_interval_ms=300)
    c.subscribe([topic])
    got = []
    wait_for(lambda: got.extend(c.poll(timeout_ms=200)) or len(got) >= 300, TIMEOUT_S, "300 read")
    ends = c.end_offsets(tps)
    half = {tp: ends[tp] // 2 for tp in tps}
    c.commit(half)
    c.close()
    assert cluster.admin().committed_offsets(group) == half
    kill_brokers_and_wait_back(cluster, (1, 2, 3), TIMEOUT_S)   # the coordinator among them
    d = cluster.consumer(group_id=group, session_timeout_ms=SESSION_MS, heartbeat_interval_ms=300)
    d.subscribe([topic])
    again = []
    want = {(tp[1], o) for tp in tps for o in range(half[tp], ends[tp])}
    wait_for(lambda: again.extend(d.poll(timeout_ms=200)) or len(again) >= len(want), TIMEOUT_S,
             "the new member read from the committed offsets")
    assert {(r.partition, r.offset) for r in again} == want      # nothing before, nothing twice
    assert len(again) == len(want)
    d.close()


def test_librdkafka_and_native_members_share_a_group(cluster):
    topic, group = f"mixed-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    fill(cluster, topic, 4, 400)
    native = Member(cluster, group, [topic])
    wire = KafkaConsumer({"bootstrap.servers": cluster.bootstrap_servers(), "group.id": group,
                          "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 300,
                          "partition.assignment.strategy": "range", "auto.offset.reset": "earliest",
                          "enable.auto.commit": False})
    wire.subscribe([topic])
    wire_read, wire_assigned = [], set()
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        msg = wire.poll(0.2)
        if msg is not None and msg.error() is None:
            wire_read.append(msg)
            wire.commit(msg, asynchronous=False)
        wire_assigned = {(tp.topic, tp.partition) for tp in wire.assignment()}
        native_owned = set(native.consumer.assignment())
        if (wire_assigned and native_owned and not wire_assigned & native_owned
                and len(wire_assigned | native_owned) == 4
                and len(wire_read) + len(native.read) >= 400):
            break
    assert wire_assigned and native.consumer.assignment()
    assert not wire_assigned & set(native.consumer.assignment())
    assert {r.partition for r in native.read} <= {p for _, p in native.consumer.assignment()}
    values = {m.value() for m in wire_read} | {r.value for r in native.read}
    assert len(values) == 400
    described = cluster.admin().describe_group(group)
    assert {m["client_id"] for m in described["members"]} >= {"rayka"}
    assert len(described["members"]) == 2
    # each side sees the other's commits
    committed = cluster.admin().committed_offsets(group, topic)
    assert {p for _, p in committed} == {0, 1, 2, 3}
    wire.close()
    native.close()


def test_offsets_are_kafka_records_in_consumer_offsets(cluster):
    """An independent reader: the segment files of __consumer_offsets, decoded with
    kafka-python's RecordBatch reader, hold Kafka's OffsetCommit key/value records."""
    from kafka.record import MemoryRecords
    topic, group = f"rec-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    fill(cluster, topic, 1, 10)
    cluster.admin().commit_offsets(group, {(topic, 0): 7})
    p = partition_for(group, OFFSETS_PARTITIONS)
    leader = cluster.admin().describe_topic("__consumer_offsets")[p].leader
    actor = cluster.broker_actor(leader)
    data = ray.get(actor.fetch_many.remote(-1, [(("__consumer_offsets", p), 0, -1, -1)], 0, 1,
                                           16 << 20))[("__consumer_offsets", p)]["records"]
    found = []
    batches = MemoryRecords(data)
    while (batch := batches.next_batch()) is not None:
        for r in batch:
            key = decode_key(r.key)
            if getattr(key, "group", None) == group and r.value is not None:
                found.append((key.topic, key.partition, decode_offset_commit_value(r.value).offset))
    assert found == [(topic, 0, 7)]


def test_bad_group_input_gets_kafka_errors_and_commits_nothing(cluster):
    topic, group = f"bad-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    fill(cluster, topic, 2, 20)
    a = cluster.consumer(group_id=group, session_timeout_ms=SESSION_MS, heartbeat_interval_ms=300)
    a.subscribe([topic])
    wait_for(lambda: a.poll(timeout_ms=200) is not None and a.assignment(), TIMEOUT_S, "assigned")
    with pytest.raises(InvalidRequest):               # a partition it does not own
        a.commit({("elsewhere", 0): 1})
    generation = a.member.generation
    b = cluster.consumer(group_id=group, session_timeout_ms=SESSION_MS, heartbeat_interval_ms=300)
    b.subscribe([topic])
    wait_for(lambda: b.poll(timeout_ms=200) is not None and b.member.generation > generation,
             TIMEOUT_S, "a second member's join bumps the generation")
    a.member.generation = generation                  # a stale generation, as after a pause
    with pytest.raises(CommitFailed):
        a.member.commit({(topic, 0): 5})
    assert (topic, 0) not in cluster.admin().committed_offsets(group, topic)
    with pytest.raises(NonEmptyGroup):
        cluster.admin().delete_group(group)
    with pytest.raises(NonEmptyGroup):
        cluster.admin().reset_offsets(group, topic, "earliest")
    ends = a.end_offsets([(topic, 0), (topic, 1)])
    a.close()
    b.close()
    wait_for(lambda: cluster.admin().describe_group(group)["state"] == "Empty", TIMEOUT_S,
             "the group empty after both left")
    assert cluster.admin().reset_offsets(group, topic, "latest") == ends
    assert cluster.admin().committed_offsets(group, topic) == ends
    assert cluster.admin().reset_offsets(group, topic, 3, partitions=[0]) == {(topic, 0): 3}
    cluster.admin().delete_group(group)
    with pytest.raises(GroupIdNotFound):
        cluster.admin().delete_group(group)


def test_kcat_kafka_python_and_aiokafka_consume_in_groups_and_commit(cluster):
    import asyncio
    import subprocess

    from aiokafka import AIOKafkaConsumer
    from kafka import KafkaConsumer as KPConsumer

    topic = f"clients-{uuid.uuid4().hex[:6]}"
    fill(cluster, topic, 4, 200)
    bootstrap = cluster.bootstrap_servers()
    want = {b"%s-%d" % (topic.encode(), i) for i in range(200)}
    tps = [(topic, p) for p in range(4)]
    ends = cluster.consumer().end_offsets(tps)

    kcat = subprocess.run(["/usr/bin/kcat", "-b", bootstrap, "-G", f"kc-{topic}", "-o", "beginning",
                           "-e", "-X", "session.timeout.ms=6000", topic],
                          capture_output=True, timeout=120)
    assert kcat.returncode == 0 and set(kcat.stdout.split()) == want   # librdkafka 2.0.2 -G

    kp = KPConsumer(topic, bootstrap_servers=bootstrap, group_id=f"kp-{topic}",
                    auto_offset_reset="earliest", enable_auto_commit=False,
                    consumer_timeout_ms=8000)
    assert {m.value for m in kp} == want
    kp.commit()
    kp.close()
    assert cluster.admin().committed_offsets(f"kp-{topic}", topic) == ends

    async def aio():
        c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"aio-{topic}",
                             auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        got, deadline = set(), time.monotonic() + TIMEOUT_S
        while got != want and time.monotonic() < deadline:
            for msgs in (await c.getmany(timeout_ms=500)).values():
                got |= {m.value for m in msgs}
        await c.commit()
        await c.stop()
        return got
    assert asyncio.run(aio()) == want
    assert cluster.admin().committed_offsets(f"aio-{topic}", topic) == ends
    listed = {g["group"]: g["state"] for g in cluster.admin().list_groups()}
    assert listed[f"kp-{topic}"] == listed[f"aio-{topic}"] == "Empty"
