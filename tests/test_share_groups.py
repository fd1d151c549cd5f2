"""KIP-932 share groups on a real cluster, through rayka's own ShareConsumer and Ray workers
(librdkafka's share consumer runs its own suite under `make compat`): more members than
partitions read a topic together, each record accepted once; release and reject; a group's
own configs through the Admin; a share-partition's state surviving its leader's death
(`__share_group_state`): what was accepted is never delivered again; a killed Ray worker's
records delivered again to the others once their acquisition locks expire, each record
accepted exactly once; a share group's offsets described, altered and deleted (Kafka's
AlterShareGroupOffsets / DeleteShareGroupOffsets) and a deleted group's state gone."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
import ray
from confluent_kafka import Producer

import rayka
from rayka.client.admin import wait_for
from rayka.client.share_consumer import IllegalStateError
from replicas.errors import GroupIdNotFound, InvalidConfig, NonEmptyGroup
from tests.ray_cluster import kill_brokers_and_wait_back, ray_session  # noqa: F401  (fixture)

pytestmark = pytest.mark.ray
TIMEOUT_S = 120


@pytest.fixture(scope="module")
def cluster(ray_session, tmp_path_factory):
    c = rayka.start_local(name=f"s{uuid.uuid4().hex[:8]}", brokers=3, controllers=1,
                          data_dir=str(tmp_path_factory.mktemp("rayka")),
                          include_dashboard=False, offsets_topic_num_partitions=4,
                          group_share_heartbeat_interval_ms=500,
                          group_share_min_heartbeat_interval_ms=500,
                          group_share_min_record_lock_duration_ms=1000,
                          share_coordinator_state_topic_num_partitions=4)
    yield c
    c.shutdown()


def test_the_first_offsets_set_wait_for_the_state_topic_they_create(cluster):
    # First in the module on purpose: no share state exists yet, so this AlterShareGroupOffsets
    # creates __share_group_state and must wait for its leaders (Kafka's persister retries
    # COORDINATOR_NOT_AVAILABLE; franz-go's TestShareGroupOffsetsAdmin does exactly this)
    admin = cluster.admin()
    assert "__share_group_state" not in admin.list_topics()
    topic = new_topic(cluster, 1, 20)
    group = f"sg-{uuid.uuid4().hex[:6]}"
    assert admin.alter_share_group_offsets(group, {(topic, 0): 8}) == {(topic, 0): 0}
    assert admin.share_group_offsets(group)[(topic, 0)]["start_offset"] == 8


def new_topic(cluster, partitions: int, n: int) -> str:
    topic = f"share-{uuid.uuid4().hex[:6]}"
    cluster.admin().create_topic(topic, partitions, 3)
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "linger.ms": 5})
    for i in range(n):
        p.produce(topic, b"v%d" % i, key=b"k%d" % i, partition=i % partitions)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    return topic


def earliest_group(cluster, **config) -> str:
    group = f"sg-{uuid.uuid4().hex[:6]}"
    cluster.admin().set_group_config(group, {"share.auto.offset.reset": "earliest", **config})
    return group


def test_more_members_than_partitions_read_each_record_once(cluster):
    topic = new_topic(cluster, 2, 3000)
    group = earliest_group(cluster)
    members = [cluster.share_consumer(group) for _ in range(3)]
    for m in members:
        m.subscribe([topic])
    seen: dict[tuple, int] = {}
    deadline = time.monotonic() + TIMEOUT_S
    while len(seen) < 3000:
        assert time.monotonic() < deadline, f"read {len(seen)} of 3000"
        for m in members:
            for r in m.poll(200):
                key = (r.partition, r.offset)
                seen[key] = seen.get(key, 0) + 1
                assert r.delivery_count == 1
    assert set(seen) == {(i % 2, i // 2) for i in range(3000)}
    assert set(seen.values()) == {1}
    wait_for(lambda: all(m.assignment() for m in members), TIMEOUT_S,
             "every member holds a partition")
    assert {tp for m in members for tp in m.assignment()} == {(topic, 0), (topic, 1)}
    listed = {g["group"]: g for g in cluster.admin().list_groups()}
    assert (listed[group]["type"], listed[group]["state"]) == ("share", "Stable")
    described = cluster.admin().describe_group(group)
    assert (described["type"], len(described["members"])) == ("share", 3)
    assert {(p["partition"], len(p["owner"].split(","))) for p in described["partitions"]} \
        == {(0, 2), (1, 2)}                      # 3 members on 2 partitions: each read by 2
    for m in members:
        m.close()
    with pytest.raises(IllegalStateError):
        members[0].poll(10)


def test_release_delivers_again_and_reject_never(cluster):
    topic = new_topic(cluster, 1, 10)
    group = earliest_group(cluster)
    c = cluster.share_consumer(group, acknowledgement_mode="explicit")
    c.subscribe([topic])
    got = []
    wait_for(lambda: got.extend(c.poll(200)) or len(got) == 10, TIMEOUT_S, "10 records")
    with pytest.raises(IllegalStateError, match="must be acknowledged"):
        c.poll(10)
    for r in got:
        c.acknowledge(r, {0: "release", 1: "reject"}.get(r.offset, "accept"))
    assert set(c.commit_sync().values()) == {0}
    again = []
    wait_for(lambda: again.extend(c.poll(200)) or again, TIMEOUT_S, "the released record")
    assert [(r.offset, r.delivery_count) for r in again] == [(0, 2)]
    c.acknowledge(again[0])
    c.commit_sync()
    assert c.poll(1000) == []          # offset 1 was rejected: archived, never again
    c.close()


def test_accepted_records_stay_accepted_when_the_leader_dies(cluster):
    topic = new_topic(cluster, 1, 100)
    group = earliest_group(cluster)
    c = cluster.share_consumer(group, max_records=50)
    c.subscribe([topic])
    first = []
    wait_for(lambda: first.extend(c.poll(200)) or len(first) >= 50, TIMEOUT_S, "50 records")
    assert [r.offset for r in first] == list(range(50))
    assert set(c.commit_sync().values()) == {0}          # written to __share_group_state
    leader = cluster.admin().describe_topic(topic)[0].leader
    kill_brokers_and_wait_back(cluster, [leader])
    rest = []
    wait_for(lambda: rest.extend(c.poll(200)) or len({r.offset for r in rest}) >= 50,
             TIMEOUT_S, "the other 50 records from the new leader")
    assert min(r.offset for r in rest) == 50, "an accepted record came back"
    assert {r.offset for r in rest} == set(range(50, 100))
    c.close()


def test_a_groups_own_configs_through_the_admin(cluster):
    admin = cluster.admin()
    group = f"cfg-{uuid.uuid4().hex[:6]}"
    admin.set_group_config(group, {"share.record.lock.duration.ms": 2000,
                                   "share.auto.offset.reset": "EARLIEST"})
    got = admin.group_config(group)
    assert (got["share.record.lock.duration.ms"], got["share.auto.offset.reset"]) == \
        ("2000", "earliest")
    assert got["consumer.session.timeout.ms"] == "45000"          # the broker's default
    with pytest.raises(InvalidConfig, match="share.record.lock.duration.ms must be less "
                                            "than or equal to"):
        admin.set_group_config(group, {"share.record.lock.duration.ms": 70000})
    with pytest.raises(InvalidConfig, match="Unknown group config name: share.nope"):
        admin.set_group_config(group, {"share.nope": 1})
    admin.set_group_config(group, {"share.record.lock.duration.ms": None})
    assert admin.group_config(group)["share.record.lock.duration.ms"] == "30000"


@ray.remote(num_cpus=0)
class Latch:
    """Which worker actor is stuck holding the record the test picked."""

    def __init__(self):
        self.holder = None

    def hold(self, actor_id: str) -> None:
        self.holder = actor_id

    def held(self):
        return self.holder


def hold_one(record):
    """Accept after 20 ms; the first delivery of partition 0's offset 5 never finishes (its
    worker is then killed)."""
    if (record.partition, record.offset, record.delivery_count) == (0, 5, 1):
        latch = ray.get_actor("share-latch")
        ray.get(latch.hold.remote(ray.get_runtime_context().get_actor_id()))
        time.sleep(3600)
    time.sleep(0.02)
    return "accept"


def test_ray_workers_as_a_share_group_survive_a_killed_worker(cluster):
    topic = new_topic(cluster, 2, 600)
    # a poll's records (10 per partition, 20 ms each) are processed well within the lock
    group = earliest_group(cluster, **{"share.record.lock.duration.ms": 3000})
    latch = Latch.options(name="share-latch").remote()
    workers = cluster.share_workers(group, [topic], hold_one, workers=4, max_records=10)
    try:
        wait_for(lambda: ray.get(latch.held.remote()) is not None, TIMEOUT_S,
                 "a worker to hold partition 0's offset 5")
        holder = ray.get(latch.held.remote())
        victim = next(i for i, a in enumerate(workers.actors)
                      if a._actor_id.hex() == holder)
        before = ray.get(workers.actors[victim].log.remote())     # it is stuck: final
        workers.kill(victim)
        accepted: dict = {}

        def done():
            accepted.clear()
            for _t, p, o, n, outcome, settled in before + workers.log():
                if outcome == "accept" and settled:
                    accepted[(p, o)] = accepted.get((p, o), []) + [n]
            return len(accepted) == 600
        wait_for(done, TIMEOUT_S, "every record accepted once by the workers")
        assert all(len(counts) == 1 for counts in accepted.values()), "accepted twice"
        assert accepted[(0, 5)] == [2]          # delivered again once the lock expired
    finally:
        workers.stop()
        ray.kill(latch)
    listed = {g["group"]: g for g in cluster.admin().list_groups()}
    assert listed[group]["type"] == "share"


def test_ack_bookkeeping_is_thread_safe_under_concurrent_commits(cluster):
    topic = new_topic(cluster, 1, 200)
    group = earliest_group(cluster)
    c = cluster.share_consumer(group)
    c.subscribe([topic])
    total, errors = [], []
    stop = threading.Event()

    def committer():
        while not stop.is_set():
            try:
                c.commit_sync()
            except Exception as exc:          # noqa: BLE001 - reported below
                errors.append(exc)
    t = threading.Thread(target=committer)
    t.start()
    try:
        wait_for(lambda: total.extend(c.poll(100)) or len(total) >= 200, TIMEOUT_S, "200")
    finally:
        stop.set()
        t.join()
    assert errors == [] and sorted(r.offset for r in total) == list(range(200))
    c.close()


def test_share_group_offsets_are_described_reset_and_deleted(cluster):
    admin = cluster.admin()
    topic = new_topic(cluster, 2, 100)
    group = earliest_group(cluster)
    c = cluster.share_consumer(group)
    c.subscribe([topic])
    got = []
    wait_for(lambda: got.extend(c.poll(200)) or len(got) >= 100, TIMEOUT_S, "100 records")
    assert set(c.commit_sync().values()) == {0}
    offsets = admin.share_group_offsets(group)
    assert {tuple(tp): (o["start_offset"], o["lag"]) for tp, o in offsets.items()} == \
        {(topic, 0): (50, 0), (topic, 1): (50, 0)}           # all accepted: the SPSO at the end
    with pytest.raises(NonEmptyGroup):
        admin.alter_share_group_offsets(group, {(topic, 0): 10})
    c.close()
    wait_for(lambda: not admin.describe_group(group)["members"], TIMEOUT_S, "an empty group")
    assert admin.reset_offsets(group, topic, 40, [0]) == {(topic, 0): 40}
    assert admin.share_group_offsets(group, [topic])[(topic, 0)]["lag"] == 10
    described = {p["partition"]: p for p in admin.describe_group(group)["partitions"]}
    assert (described[0]["committed"], described[0]["lag"], described[1]["committed"]) == \
        (40, 10, 50)
    assert admin.delete_share_group_offsets(group, [topic, "no-such-topic"]) == \
        {topic: 0, "no-such-topic": 3}
    assert admin.share_group_offsets(group) == {}
    again = cluster.share_consumer(group)
    again.subscribe([topic])
    read = []
    wait_for(lambda: read.extend(again.poll(200)) or len(read) >= 100, TIMEOUT_S,
             "the topic again from share.auto.offset.reset (earliest)")
    assert sorted((r.partition, r.offset) for r in read) == \
        sorted((i % 2, i // 2) for i in range(100))
    assert {r.delivery_count for r in read} == {1}
    again.close()
    wait_for(lambda: not admin.describe_group(group)["members"], TIMEOUT_S, "an empty group")
    admin.delete_group(group)
    wait_for(lambda: admin.share_group_offsets(group) == {}, TIMEOUT_S,
             "the deleted group's state gone")
    consumer_group = f"cg-{uuid.uuid4().hex[:6]}"
    admin.commit_offsets(consumer_group, {(topic, 0): 1})
    with pytest.raises(GroupIdNotFound, match="is not a share group"):
        admin.alter_share_group_offsets(consumer_group, {(topic, 0): 1})


def test_find_coordinator_v6_names_the_leader_of_a_share_partitions_state(cluster):
    """FindCoordinator v6, key type 2 ("<group>:<topic id>:<partition>"): the leader of the
    key's __share_group_state partition (Java String.hashCode of the key, as Kafka)."""
    import socket
    import struct
    from kafka.protocol.metadata import FindCoordinatorRequest
    from share.records import ShareKey, partition_for
    from tests.protocol_samples import RESPONSES, frame_of
    key = ShareKey("sg-find", "AAAAAAAAAAAAAAAAAAAAAQ", 5)
    host, port = cluster.bootstrap_servers().split(",")[0].rsplit(":", 1)

    def ask():
        with socket.create_connection((host, int(port)), timeout=30) as s:
            s.sendall(frame_of(FindCoordinatorRequest[6](
                key_type=2, coordinator_keys=[key.coordinator_key()]), 1))
            size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
            frame = s.recv(size, socket.MSG_WAITALL)
        c = RESPONSES[10].decode(frame, version=6, header=True).coordinators[0]
        return c if c.error_code == 0 else None
    found = wait_for(ask, TIMEOUT_S, "the share coordinator found")
    leaders = {p.partition: p.leader for p in cluster.admin().describe_topic(
        "__share_group_state")}
    assert found.node_id == leaders[partition_for(key, len(leaders))]

