"""Consumer groups on a real cluster (real Ray, the real ZooKeeper): the brokers' group
coordinator with offsets in `__consumer_offsets`, native members and librdkafka members
(confluent-kafka over the listeners) in the same groups.

Short timeouts keep the test fast: group.initial.rebalance.delay.ms 300,
group.min.session.timeout.ms 1000, 8 offsets partitions. Waits are polls with deadlines."""

from __future__ import annotations

import collections
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
from replicas.errors import GroupIdNotFound, InvalidRequest, NonEmptyGroup, RebalanceInProgress
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
                    except (CommitFailed, RebalanceInProgress):
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
    """Offsets committed by hand (group m) and by auto-commit on close (group a) survive the
    kill of every broker, the coordinator among them: new members resume exactly there."""
    topic, group = f"resume-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    fill(cluster, topic, 3, 300)
    tps = [(topic, p) for p in range(3)]
    kw = dict(session_timeout_ms=SESSION_MS, heartbeat_interval_ms=300)
    c = cluster.consumer(group_id=group + "m", enable_auto_commit=False, **kw)
    auto = cluster.consumer(group_id=group + "a", **kw)
    for x in (c, auto):
        x.subscribe([topic])
        got = []
        wait_for(lambda: got.extend(x.poll(timeout_ms=200)) or len(got) >= 300, TIMEOUT_S,
                 "300 read")
    ends = c.end_offsets(tps)
    half = {tp: ends[tp] // 2 for tp in tps}
    c.commit(half)
    c.close()
    auto.close()                                   # auto-commit: its positions, on close
    assert cluster.admin().committed_offsets(group + "m") == half
    assert cluster.admin().committed_offsets(group + "a") == ends
    kill_brokers_and_wait_back(cluster, (1, 2, 3), TIMEOUT_S)   # the coordinator among them
    d = cluster.consumer(group_id=group + "m", **kw)
    d.subscribe([topic])
    again = []
    want = {(tp[1], o) for tp in tps for o in range(half[tp], ends[tp])}
    wait_for(lambda: again.extend(d.poll(timeout_ms=200)) or len(again) >= len(want), TIMEOUT_S,
             "the new member read from the committed offsets")
    assert {(r.partition, r.offset) for r in again} == want      # nothing before, nothing twice
    assert len(again) == len(want)
    d.close()
    e = cluster.consumer(group_id=group + "a", **kw)
    e.subscribe([topic])
    old: list = []
    wait_for(lambda: old.extend(e.poll(timeout_ms=200)) or e.assignment() and
             not e.member.needs_join, TIMEOUT_S, "the auto-committed member joined")
    assert old == []                               # everything it read was committed
    p = cluster.producer(acks="all")
    p.send_batch(topic, [b"new-%d" % i for i in range(30)]).result(60)
    p.close()
    fresh = []
    wait_for(lambda: fresh.extend(e.poll(timeout_ms=200)) or len(fresh) >= 30, TIMEOUT_S,
             "the 30 new records")
    assert sorted(r.value for r in fresh) == sorted(b"new-%d" % i for i in range(30))
    e.close()


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
    a = cluster.consumer(group_id=group, session_timeout_ms=SESSION_MS, heartbeat_interval_ms=300,
                         enable_auto_commit=False)
    a.subscribe([topic])
    wait_for(lambda: a.poll(timeout_ms=200) is not None and a.assignment(), TIMEOUT_S, "assigned")
    with pytest.raises(InvalidRequest):               # a partition it does not own
        a.commit({("elsewhere", 0): 1})
    with pytest.raises(InvalidRequest):
        a.commit({(topic, 0): -1})
    b = cluster.consumer(group_id=group, session_timeout_ms=SESSION_MS, heartbeat_interval_ms=300,
                         enable_auto_commit=False)
    b.subscribe([topic])
    with pytest.raises(NonEmptyGroup):
        cluster.admin().delete_group(group)
    with pytest.raises(NonEmptyGroup):
        cluster.admin().reset_offsets(group, topic, "earliest")
    ends = a.end_offsets([(topic, 0), (topic, 1)])
    a.close()
    b.close()
    wait_for(lambda: cluster.admin().describe_group(group)["state"] == "Empty", TIMEOUT_S,
             "the group empty after both left")
    assert cluster.admin().committed_offsets(group, topic) == {}      # nobody committed
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


# -- the native member as Kafka's consumer: one thread, lost partitions, auto-commit ----------------
class Feed:
    """Records produced to a topic as the test goes (so every hand-over has records waiting)."""

    def __init__(self, cluster, topic: str, partitions: int):
        cluster.admin().create_topic(topic, partitions, 3)
        self.topic, self.sent = topic, 0
        self.producer = cluster.producer(acks="all")

    def more(self, n: int = 60) -> None:
        self.producer.send_batch(self.topic, [b"%d" % i for i in range(self.sent, self.sent + n)]
                                 ).result(60)
        self.sent += n

    def close(self):
        self.producer.close()


def settled(consumers, n_partitions: int) -> bool:
    owned = [set(c.assignment()) for c in consumers]
    return (all(owned) and sum(map(len, owned)) == n_partitions
            and len(set().union(*owned)) == n_partitions
            and all(not c.member.needs_join for c in consumers))


def test_members_polled_in_turn_from_one_thread_split_and_read_each_record_once(cluster):
    """Two, then three native members polled alternately from this one thread: every poll
    returns within its timeout, the partitions are split (disjoint, covering), and with
    auto-commit no record is read twice in the group, also when a member closes and hands its
    partitions over."""
    topic, group = f"turn-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    feed = Feed(cluster, topic, 6)
    reads: collections.Counter = collections.Counter()
    took: list[float] = []

    def member():
        c = cluster.consumer(group_id=group, session_timeout_ms=6000, heartbeat_interval_ms=300,
                             auto_commit_interval_ms=500, max_poll_records=50)
        c.subscribe([topic])
        return c

    def poll_in_turn(members, until, what, produce=True):
        deadline = time.monotonic() + TIMEOUT_S
        while not until():
            assert time.monotonic() < deadline, what
            if produce:
                feed.more()
            for c in members:
                t0 = time.monotonic()
                got = c.poll(timeout_ms=200)
                took.append(time.monotonic() - t0)
                owned = set(c.assignment())
                assert {(r.topic, r.partition) for r in got} <= owned
                reads.update((r.partition, r.offset) for r in got)

    c1, c2 = member(), member()
    poll_in_turn([c1, c2], lambda: settled([c1, c2], 6), "two members split the topic")
    c3 = member()
    poll_in_turn([c1, c2, c3], lambda: settled([c1, c2, c3], 6), "three members split it")
    assert [len(c.assignment()) for c in (c1, c2, c3)] == [2, 2, 2]
    c1.close()                                     # commits, revokes, leaves
    poll_in_turn([c2, c3], lambda: settled([c2, c3], 6), "two members took c1's partitions")
    poll_in_turn([c2, c3], lambda: sum(reads.values()) >= feed.sent, "every record read",
                 produce=False)
    twice = sorted(k for k, n in reads.items() if n > 1)
    assert not twice, f"read twice in the group: {twice[:10]} ({len(twice)})"
    assert len(reads) == feed.sent
    print(f"poll(200 ms) took at most {max(took) * 1000:.0f} ms over {len(took)} polls")
    assert max(took) < 0.2 + 2.0                   # the join waits in flight, never in poll
    for c in (c2, c3):
        c.close()
    feed.close()
    committed = cluster.admin().committed_offsets(group, topic)
    assert committed == cluster.consumer().end_offsets([(topic, p) for p in range(6)])


def test_a_member_whose_heartbeats_stop_returns_nothing_and_its_commits_are_refused(cluster):
    """A member whose heartbeats stop (what a frozen process looks like) while it is still
    polled: once its session may have expired it returns nothing of its partitions; the
    coordinator gives them to the other member; its commit is refused with CommitFailed and
    nothing is committed; on_lost (not on_revoke) tells it; it rejoins when it beats again."""
    topic, group = f"mute-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    feed = Feed(cluster, topic, 4)
    lost, revoked = [], []
    kw = dict(group_id=group, session_timeout_ms=SESSION_MS, heartbeat_interval_ms=300,
              enable_auto_commit=False)
    a, b = cluster.consumer(**kw), cluster.consumer(**kw)
    a.subscribe([topic], on_lost=lost.append, on_revoke=revoked.append)
    b.subscribe([topic])
    deadline = time.monotonic() + TIMEOUT_S
    while not settled([a, b], 4):
        assert time.monotonic() < deadline
        feed.more()
        a.poll(timeout_ms=200), b.poll(timeout_ms=200)
    old, generation = a.assignment(), a.group_metadata().generation_id
    positions = {tp: a.position(tp) for tp in old}
    a.member.pause_heartbeats()
    muted = time.monotonic()
    late: list = []
    taken_over = None                   # then 2 s more, records arriving on a's partitions
    while taken_over is None or time.monotonic() < taken_over + 2:
        assert time.monotonic() < deadline, "b never got a's partitions"
        feed.more()
        got = a.poll(timeout_ms=200)
        if time.monotonic() > muted + SESSION_MS / 1000:
            late += got                  # a's session may have expired: nothing may come
        b.poll(timeout_ms=200)
        if taken_over is None and set(b.assignment()) == {(topic, p) for p in range(4)}:
            taken_over = time.monotonic()
    assert late == []
    assert a.assignment() == old and a.group_metadata().generation_id == generation
    with pytest.raises(CommitFailed):
        a.commit(positions)
    assert cluster.admin().committed_offsets(group, topic) == {}
    a.member.resume_heartbeats()
    while not settled([a, b], 4):
        assert time.monotonic() < deadline, "a never rejoined"
        a.poll(timeout_ms=200), b.poll(timeout_ms=200)
    assert lost == [old] and revoked == []
    assert a.group_metadata().generation_id > generation
    for c in (a, b):
        c.close()
    feed.close()


@ray.remote(num_cpus=0)
class PollingMember:
    """A member in its own process, polling in a thread, to be frozen with SIGSTOP. Each
    poll's records are kept with the time the poll STARTED and the generation after it."""

    def __init__(self, name, group, topic):
        self.cluster = rayka.connect(name)
        self.consumer = self.cluster.consumer(group_id=group, session_timeout_ms=SESSION_MS,
                                              heartbeat_interval_ms=300)
        self.consumer.subscribe([topic])
        self.reads: list = []
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            started = time.monotonic()
            got = self.consumer.poll(timeout_ms=200)
            generation = self.consumer.group_metadata().generation_id
            self.reads += [(started, generation, r.partition) for r in got]

    def pid(self):
        import os
        return os.getpid()

    def state(self):
        return self.consumer.group_metadata().generation_id, self.consumer.assignment()

    def reads_started_after(self, t: float):
        return [r for r in self.reads if r[0] > t]


def test_a_member_frozen_past_its_session_returns_no_record_of_its_old_partitions(cluster):
    """SIGSTOP a member's process past its session timeout: the other member takes its
    partitions; after SIGCONT no poll of the frozen member returns a record of its old
    generation, and it rejoins in a newer one."""
    import os
    import signal
    topic, group = f"frozen-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    feed = Feed(cluster, topic, 4)
    feed.more(400)
    remote = PollingMember.options(namespace=cluster.namespace).remote(cluster.name, group, topic)
    local = Member(cluster, group, [topic])
    everything = {(topic, p) for p in range(4)}
    wait_for(lambda: feed.more() or (ray.get(remote.state.remote())[1] and local.consumer.assignment()
                                     and not local.consumer.member.needs_join),
             TIMEOUT_S, "both members own partitions")
    generation, _ = ray.get(remote.state.remote())
    pid = ray.get(remote.pid.remote())
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: feed.more() or set(local.consumer.assignment()) == everything,
                 TIMEOUT_S, "the local member took every partition")
    finally:
        resumed = time.monotonic()
        os.kill(pid, signal.SIGCONT)
    wait_for(lambda: feed.more() or ray.get(remote.state.remote())[0] > generation
             and ray.get(remote.state.remote())[1], TIMEOUT_S, "the frozen member rejoined")
    wait_for(lambda: feed.more() or any(r[1] > generation for r in ray.get(
        remote.reads_started_after.remote(resumed))), TIMEOUT_S, "it reads in its new generation")
    after = ray.get(remote.reads_started_after.remote(resumed))
    assert [r for r in after if r[1] <= generation] == []
    local.close()
    ray.kill(remote)
    feed.close()


def test_a_member_that_stops_polling_leaves_after_max_poll_interval(cluster):
    """max_poll_interval_ms without a poll: the heartbeat thread leaves the group (its
    partitions go to the other member at once, no session timeout), and the next poll
    finds them lost and rejoins."""
    topic, group = f"stall-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    fill(cluster, topic, 4, 40)
    lost = []
    a = cluster.consumer(group_id=group, session_timeout_ms=120_000, heartbeat_interval_ms=300,
                         max_poll_interval_ms=2000)
    a.subscribe([topic], on_lost=lost.append)
    b = Member(cluster, group, [topic])
    everything = {(topic, p) for p in range(4)}
    wait_for(lambda: a.poll(timeout_ms=200) is not None and settled([a, b.consumer], 4),
             TIMEOUT_S, "a and b split the topic")
    owned = a.assignment()
    # a is not polled from here. Its session (120 s) outlasts this deadline: if b gets a's
    # partitions within it, a left on its own
    wait_for(lambda: set(b.consumer.assignment()) == everything, 60,
             "b owns everything, long before a's session could expire")
    assert len(cluster.admin().describe_group(group)["members"]) == 1
    wait_for(lambda: a.poll(timeout_ms=200) is not None and settled([a, b.consumer], 4),
             TIMEOUT_S, "a rejoined")
    assert lost == [owned]
    a.close()
    b.close()


def test_pause_resume_seek_position_committed_and_asynchronous_commit(cluster):
    """Kafka's consumer API beside poll, on manually assigned partitions of a group."""
    from replicas.errors import UnknownTopicOrPartition
    topic, group = f"api-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    fill(cluster, topic, 2, 200)
    p0, p1 = (topic, 0), (topic, 1)
    c = cluster.consumer(group_id=group, enable_auto_commit=False)
    ends = c.end_offsets([p0, p1])
    assert ends[p0] > 10 and ends[p1] > 10
    c.assign([p0, p1])
    c.pause([p0])
    assert c.paused() == [p0]
    got = []
    wait_for(lambda: got.extend(c.poll(timeout_ms=200)) or len(got) >= ends[p1], TIMEOUT_S,
             "partition 1 read")
    assert {r.partition for r in got} == {1} and len(got) == ends[p1]
    assert c.poll(timeout_ms=300) == []          # p0 paused, p1 at its end
    c.resume([p0])
    assert c.paused() == []
    got = []
    wait_for(lambda: got.extend(c.poll(timeout_ms=200)) or len(got) >= ends[p0], TIMEOUT_S,
             "partition 0 read")
    assert [r.offset for r in got] == list(range(ends[p0]))
    c.seek(p0, 5)
    assert c.position(p0) == 5
    got = []
    wait_for(lambda: got.extend(c.poll(timeout_ms=200)) or len(got) >= ends[p0] - 5, TIMEOUT_S,
             "partition 0 again from 5")
    assert [r.offset for r in got] == list(range(5, ends[p0]))
    c.seek_to_beginning([p1])
    assert c.position(p1) == 0
    c.seek_to_end([p1])
    assert c.position(p1) == ends[p1]
    done = []
    c.commit({p0: 7}, asynchronous=True, callback=lambda offsets, error: done.append(
        (offsets, error)))
    wait_for(lambda: c.poll(timeout_ms=100) is not None and done, TIMEOUT_S, "the callback ran")
    assert done == [({p0: 7}, None)]
    assert c.committed(p0) == 7 and c.committed([p0, p1]) == {p0: 7, p1: None}
    with pytest.raises(UnknownTopicOrPartition):
        c.seek((topic, 9), 1)
    with pytest.raises(InvalidRequest):
        c.seek(p0, -1)
    with pytest.raises(UnknownTopicOrPartition):
        c.pause([("elsewhere", 0)])
    c.close()
    assert cluster.admin().committed_offsets(group, topic) == {p0: 7}   # no auto-commit
