"""KIP-848 consumer groups on the wire, with librdkafka's `group.protocol=consumer` (its
ConsumerGroupHeartbeat v1 client): assignment by the coordinator, handover when a member
leaves, offsets committed with member epochs, the group's records surviving a coordinator
move, conversion of an empty consumer group to a classic one, ListGroups and
ConsumerGroupDescribe through librdkafka's admin client; rayka's own consumer as a
KIP-848 member beside librdkafka's, and the Admin's view of such a group."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, Producer
from confluent_kafka.admin import AdminClient

import rayka
from coordinator.records import partition_for
from rayka.client.admin import wait_for
from tests.ray_cluster import kill_brokers_and_wait_back, ray_session  # noqa: F401  (fixture)

pytestmark = pytest.mark.ray
TIMEOUT_S = 120
OFFSETS_PARTITIONS = 4


@pytest.fixture(scope="module")
def cluster(ray_session, tmp_path_factory):
    c = rayka.start_local(name=f"k{uuid.uuid4().hex[:8]}", brokers=3, controllers=2,
                          data_dir=str(tmp_path_factory.mktemp("rayka")),
                          replica_lag_time_max_ms=3000, include_dashboard=False,
                          group_consumer_min_session_timeout_ms=6000,
                          group_consumer_session_timeout_ms=6000,
                          group_consumer_min_heartbeat_interval_ms=500,
                          group_consumer_heartbeat_interval_ms=500,
                          offsets_topic_num_partitions=OFFSETS_PARTITIONS)
    yield c
    c.shutdown()


def new_topic(cluster, partitions: int = 6) -> str:
    topic = f"k848-{uuid.uuid4().hex[:6]}"
    cluster.admin().create_topic(topic, partitions, 3)
    return topic


def produce(cluster, topic: str, n: int, start: int = 0) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "linger.ms": 5,
                  "enable.idempotence": True})
    for i in range(start, start + n):
        p.produce(topic, b"v%d" % i, key=b"k%d" % i)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0


def member(cluster, group: str, topic: str, **conf) -> Consumer:
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers(), "group.id": group,
                  "group.protocol": "consumer", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, **conf})
    c.subscribe([topic])
    return c


class Reader:
    """Polls a set of consumers in turn; what each read, and any error."""

    def __init__(self, *consumers: Consumer):
        self.consumers = list(consumers)
        self.read: dict[int, list] = {id(c): [] for c in consumers}
        self.errors: list = []

    def poll_until(self, done, timeout_s: float = TIMEOUT_S, what: str = "") -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            assert time.monotonic() < deadline, f"timed out: {what}"
            for c in self.consumers:
                msg = c.poll(0.1)
                if msg is None:
                    continue
                if msg.error():
                    self.errors.append(msg.error())
                else:
                    self.read[id(c)].append((msg.partition(), msg.offset(), msg.value()))

    def of(self, c: Consumer) -> list:
        return self.read[id(c)]

    def total(self) -> int:
        return sum(len(x) for x in self.read.values())


def assigned(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def split(mine: set[int], theirs: set[int], partitions: int = 6) -> bool:
    """Both members hold partitions and together all of them."""
    return bool(mine and theirs) and mine | theirs == set(range(partitions))


def coordinator_of(cluster, group: str) -> int:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers()})
    md = admin.list_topics("__consumer_offsets", timeout=30)
    return md.topics["__consumer_offsets"].partitions[
        partition_for(group, OFFSETS_PARTITIONS)].leader


def describe(cluster, group: str):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers()})
    return admin.describe_consumer_groups([group], request_timeout=30)[group].result()


def test_two_members_split_a_topic_read_each_record_once_and_hand_over_on_leave(cluster):
    topic, group = new_topic(cluster), f"g-{uuid.uuid4().hex[:6]}"
    a, b = member(cluster, group, topic), member(cluster, group, topic)
    r = Reader(a, b)
    r.poll_until(lambda: split(assigned(a), assigned(b)), what="both assigned")
    assert not assigned(a) & assigned(b)
    produce(cluster, topic, 30_000)
    r.poll_until(lambda: r.total() >= 30_000, what="30,000 records read")
    assert r.errors == []
    values = [v for c in (a, b) for _, _, v in r.of(c)]
    assert len(values) == 30_000 and len(set(values)) == 30_000
    assert {p for p, _, _ in r.of(a)} == assigned(a)        # each read only its own
    assert {p for p, _, _ in r.of(b)} == assigned(b)

    d = describe(cluster, group)
    assert d.type == ConsumerGroupType.CONSUMER and d.state == ConsumerGroupState.STABLE
    assert len(d.members) == 2
    assert sorted(tp.partition for m in d.members for tp in m.assignment.topic_partitions) \
        == list(range(6))

    a.commit(asynchronous=False)
    a.close()                                  # leaves (epoch -1): b takes every partition
    r.consumers = [b]
    r.poll_until(lambda: assigned(b) == set(range(6)), what="b owns all six")
    produce(cluster, topic, 600, start=30_000)
    before = len(r.of(b))
    r.poll_until(lambda: len({v for _, _, v in r.of(b)} - set(values)) >= 600,
                 what="b reads what was produced after a left")
    assert r.errors == []
    assert len(r.of(b)) - before >= 600
    b.close()


def test_offsets_commit_with_member_epochs_and_a_new_member_resumes_from_them(cluster):
    topic, group = new_topic(cluster, 3), f"g-{uuid.uuid4().hex[:6]}"
    produce(cluster, topic, 3_000)
    a = member(cluster, group, topic)
    r = Reader(a)
    r.poll_until(lambda: r.total() >= 3_000, what="3,000 records")
    committed = a.commit(asynchronous=False)        # OffsetCommit v9 with the member epoch
    assert all(tp.error is None for tp in committed)
    assert sum(tp.offset for tp in a.committed(a.assignment(), timeout=30)) == 3_000
    a.close()
    produce(cluster, topic, 90, start=3_000)
    b = member(cluster, group, topic)
    r2 = Reader(b)
    r2.poll_until(lambda: r2.total() >= 90, what="the 90 new records")
    r2.poll_until(lambda: True)
    assert sorted(v for _, _, v in r2.of(b)) == sorted(b"v%d" % i for i in range(3_000, 3_090))
    b.close()


def test_the_group_survives_its_coordinator_moving(cluster):
    """Its records in __consumer_offsets bring the members back on the new coordinator:
    the same member ids, no fatal error, no partition read twice."""
    topic, group = new_topic(cluster), f"g-{uuid.uuid4().hex[:6]}"
    a, b = member(cluster, group, topic), member(cluster, group, topic)
    r = Reader(a, b)
    r.poll_until(lambda: split(assigned(a), assigned(b)), what="both assigned")
    ids = sorted(m.member_id for m in describe(cluster, group).members)
    assert len(set(ids)) == 2
    coordinator = coordinator_of(cluster, group)
    kill_brokers_and_wait_back(cluster, [coordinator])
    wait_for(lambda: coordinator_of(cluster, group) not in (None, -1), TIMEOUT_S,
             "the offsets partition has a leader")
    produce(cluster, topic, 6_000)
    r.poll_until(lambda: r.total() >= 6_000, what="6,000 records after the move")
    fatal = [e for e in r.errors if e.fatal()]
    assert fatal == []
    d = describe(cluster, group)
    assert sorted(m.member_id for m in d.members) == ids    # not rejoined as new members
    values = [v for c in (a, b) for _, _, v in r.of(c)]
    assert len(set(values)) == 6_000
    a.close()
    b.close()


def test_an_empty_consumer_group_becomes_classic_and_keeps_its_offsets(cluster):
    topic, group = new_topic(cluster, 2), f"g-{uuid.uuid4().hex[:6]}"
    produce(cluster, topic, 200)
    a = member(cluster, group, topic)
    r = Reader(a)
    r.poll_until(lambda: r.total() >= 200, what="200 records")
    a.commit(asynchronous=False)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers()})
    listed = {g.group_id: g for g in admin.list_consumer_groups(request_timeout=30)
              .result().valid}
    assert listed[group].type == ConsumerGroupType.CONSUMER
    assert listed[group].state == ConsumerGroupState.STABLE
    a.close()
    produce(cluster, topic, 20, start=200)
    classic = Consumer({"bootstrap.servers": cluster.bootstrap_servers(), "group.id": group,
                        "auto.offset.reset": "earliest", "enable.auto.commit": False})
    classic.subscribe([topic])
    r2 = Reader(classic)
    r2.poll_until(lambda: r2.total() >= 20, what="the classic member reads the 20 new ones")
    assert sorted(v for _, _, v in r2.of(classic)) == sorted(b"v%d" % i for i in range(200, 220))
    listed = {g.group_id: g for g in admin.list_consumer_groups(request_timeout=30)
              .result().valid}
    assert listed[group].type == ConsumerGroupType.CLASSIC
    classic.close()


def test_a_classic_member_cannot_join_a_consumer_group_with_members(cluster):
    topic, group = new_topic(cluster, 2), f"g-{uuid.uuid4().hex[:6]}"
    a = member(cluster, group, topic)
    r = Reader(a)
    r.poll_until(lambda: assigned(a) == {0, 1}, what="a assigned")
    classic = Consumer({"bootstrap.servers": cluster.bootstrap_servers(), "group.id": group,
                        "auto.offset.reset": "earliest"})
    classic.subscribe([topic])
    r2 = Reader(classic)
    r2.poll_until(lambda: r2.errors, what="the classic member's error")
    assert any("INCONSISTENT_GROUP_PROTOCOL" in e.name() for e in r2.errors), r2.errors
    r.poll_until(lambda: True)
    assert assigned(a) == {0, 1} and r.errors == []
    classic.close()
    a.close()


def test_native_and_librdkafka_members_share_a_consumer_group(cluster):
    """rayka's own consumer with group_protocol="consumer" (its KIP-848 member) beside a
    librdkafka one: a split with no overlap, every record read once, the native member's
    commits carrying its member epoch, and a handover when it closes."""
    topic, group = new_topic(cluster), f"g-{uuid.uuid4().hex[:6]}"
    native = cluster.consumer(group_id=group, group_protocol="consumer",
                              enable_auto_commit=False)
    native.subscribe([topic])
    b = member(cluster, group, topic)
    r = Reader(b)
    got: list = []

    def mine() -> set[int]:
        return {p for _, p in native.assignment()}

    def both_poll() -> bool:
        got.extend(native.poll(timeout_ms=5))
        return True

    r.poll_until(lambda: both_poll() and split(mine(), assigned(b)), what="both assigned")
    assert not mine() & assigned(b)
    assert native.group_metadata().generation_id > 0           # its member epoch
    produce(cluster, topic, 6_000)
    r.poll_until(lambda: both_poll() and len(got) + r.total() >= 6_000, what="6,000 read")
    assert {x.partition for x in got} <= mine()
    values = [x.value for x in got] + [v for _, _, v in r.of(b)]
    assert len(values) == 6_000 and len(set(values)) == 6_000
    native.commit()                                             # OffsetCommit v9
    committed = native.committed([(topic, p) for p in mine()])
    assert sum(o for o in committed.values() if o is not None) == \
        sum(1 for x in got)                 # every record it read, committed
    d = describe(cluster, group)
    assert len(d.members) == 2 and {m.client_id for m in d.members} >= {"rayka"}
    admin = cluster.admin()                     # the native door: topics by name
    listed = {g["group"]: g for g in admin.list_groups()}
    assert (listed[group]["type"], listed[group]["state"]) == ("consumer", "Stable")
    mine_now = admin.describe_group(group)
    assert mine_now["type"] == "consumer" and mine_now["protocol"] == "uniform"
    assert sorted(tp for x in mine_now["members"] for tp in x["partitions"]) == [
        (topic, p) for p in range(6)]
    native.close()
    r.poll_until(lambda: assigned(b) == set(range(6)), what="b owns all six")
    assert r.errors == []
    b.close()


def test_a_regular_expression_subscription_takes_matching_topics_later_ones_too(cluster):
    prefix = f"rx{uuid.uuid4().hex[:4]}"
    for name, n in ((f"{prefix}-a", 2), (f"{prefix}-b", 1), (f"x{prefix}-c", 1)):
        cluster.admin().create_topic(name, n, 3)
    c = member(cluster, f"g-{uuid.uuid4().hex[:6]}", f"^{prefix}-.*")
    r = Reader(c)

    def topics() -> set:
        return {(tp.topic, tp.partition) for tp in c.assignment()}
    r.poll_until(lambda: topics() == {(f"{prefix}-a", 0), (f"{prefix}-a", 1),
                                      (f"{prefix}-b", 0)}, what="the matching topics")
    cluster.admin().create_topic(f"{prefix}-d", 1, 3)
    r.poll_until(lambda: (f"{prefix}-d", 0) in topics(), what="a topic created later")
    assert r.errors == []
    c.close()


def test_a_static_member_that_restarts_gets_its_partitions_back_and_the_other_keeps_its(
        cluster):
    """group.instance.id with the consumer protocol: a static member's close leaves at epoch
    -2 (its partitions held for it until its session ends); its restart with the same
    instance id takes them back, and the other member sees no change."""
    topic, group = new_topic(cluster), f"g-{uuid.uuid4().hex[:6]}"
    a = member(cluster, group, topic, **{"group.instance.id": "i-a"})
    b = member(cluster, group, topic, **{"group.instance.id": "i-b"})
    r = Reader(a, b)
    r.poll_until(lambda: split(assigned(a), assigned(b)), what="both assigned")
    mine, theirs = assigned(a), assigned(b)
    a.close()
    a2 = member(cluster, group, topic, **{"group.instance.id": "i-a"})
    r.consumers = [a2, b]
    r.poll_until(lambda: assigned(a2) == mine, what="the restarted member's partitions")
    r.poll_until(lambda: True)
    assert assigned(b) == theirs and r.errors == []
    static = {m.group_instance_id for m in describe(cluster, group).members}
    assert static == {"i-a", "i-b"}
    a2.close()
    b.close()
