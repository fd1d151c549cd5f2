"""rayka.client.consumer_protocol and rayka.client.assignors: the consumer protocol's embedded
formats (byte-exact against kafka-python's independent encoders) and Kafka's assignors (range,
roundrobin, cooperative-sticky), checked on cases ported from Kafka's own unit tests (apache/kafka trunk
1eb7644: RangeAssignorTest, RoundRobinAssignorTest, AbstractStickyAssignorTest,
CooperativeStickyAssignorTest), against naive references and kafka-python's range/roundrobin,
and on hypothesis properties."""

from __future__ import annotations

import itertools
import struct
from collections import namedtuple
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.protocol.consumer.metadata import (ConsumerProtocolAssignment as KpAssignment,
                                              ConsumerProtocolSubscription as KpSubscription)
from kafka.protocol.old.consumer_protocol import (ConsumerProtocolMemberAssignment_v0,
                                                  ConsumerProtocolMemberMetadata_v0)

from rayka.client import assignors as A
from rayka.client import consumer_protocol as CP
from rayka.client.assignors import (CooperativeStickyAssignor, RangeAssignor, RoundRobinAssignor,
                                    get_assignor)
from rayka.client.consumer_protocol import (Assignment, SchemaError, Subscription,
                                            decode_assignment, decode_subscription,
                                            encode_assignment, encode_subscription, read_version)
from rayka.client.types import TopicPartition

pytestmark = pytest.mark.unit

RANGE, ROUNDROBIN, COOP = RangeAssignor(), RoundRobinAssignor(), CooperativeStickyAssignor()
GEN = 1  # AbstractStickyAssignorTest.generationId


def tp(s: str) -> TopicPartition:
    topic, _, p = s.rpartition("-")
    return TopicPartition(topic, int(p))


def tps(s: str) -> list[TopicPartition]:
    """"t1-0, t2-3" -> partitions, in that order (Kafka's tests' string form)."""
    return [tp(x) for x in s.split(", ")] if s else []


def lists(result) -> dict[str, list[TopicPartition]]:
    return {m: list(a.partitions) for m, a in result.items()}


def sorted_strings(result) -> dict[str, str]:
    """AbstractPartitionAssignorTest.toSortedString per member."""
    return {m: ", ".join(sorted(f"{t}-{p}" for t, p in a.partitions)) for m, a in result.items()}


def sub(topics, owned="", generation=None, instance=None, user_data=None) -> Subscription:
    return Subscription(topics=topics.split(",") if isinstance(topics, str) else topics,
                        owned_partitions=tps(owned) if isinstance(owned, str) else owned,
                        generation=generation, group_instance_id=instance, user_data=user_data)


def java_key(s: str):
    """Java's String.compareTo order: UTF-16 code units."""
    data = s.encode("utf-16-be", "surrogatepass")
    return struct.unpack(f">{len(data) // 2}H", data)


# == wire format ================================================================================
SUB = Subscription(topics=("b", "a"), owned_partitions=(("a", 1), ("a", 0)), generation=7,
                   rack="r1", user_data=b"\x01\x02")
SUB_V3 = ("0003" "00000002" "000161" "000162" "00000002" "0102"
          "00000001" "000161" "00000002" "00000000" "00000001" "00000007" "00027231")


def test_subscription_bytes_by_hand():
    """ConsumerProtocolSubscription.json read by hand: topics and owned partitions sorted,
    fields a version lacks dropped; a version above 3 is written as 3."""
    assert encode_subscription(SUB).hex() == SUB_V3
    assert encode_subscription(SUB, 9).hex() == SUB_V3
    assert encode_subscription(SUB, 2).hex() == "0002" + SUB_V3[4:-8]
    assert encode_subscription(SUB, 1).hex() == "0001" + SUB_V3[4:-16]
    assert encode_subscription(SUB, 0).hex() == "0000" + SUB_V3[4:36]
    assert encode_subscription(Subscription(topics=())).hex() == "0003" "00000000" "ffffffff" \
        "00000000" "ffffffff" "ffff"


def test_assignment_bytes_by_hand():
    """One AssignedPartitions entry per topic, in order of first appearance."""
    a = Assignment(partitions=(("b", 1), ("a", 0), ("b", 0)))
    assert encode_assignment(a).hex() == ("0003" "00000002" "000162" "00000002" "00000001"
                                          "00000000" "000161" "00000001" "00000000" "ffffffff")
    assert decode_assignment(encode_assignment(a)).partitions == tuple(tps("b-1, b-0, a-0"))
    assert encode_assignment(Assignment((), b"u"), 0).hex() == "0000" "00000000" "00000001" "75"


def test_v0_matches_kafka_pythons_old_structs():
    """kafka-python's hand-written v0 structs (ConsumerProtocolMemberMetadata_v0/Assignment_v0)."""
    old = ConsumerProtocolMemberMetadata_v0(version=0, topics=["a", "b"], user_data=b"\x01\x02")
    assert encode_subscription(SUB, 0) == old.encode()
    old_a = ConsumerProtocolMemberAssignment_v0(version=0, assigned_partitions=[("t", [1, 0])],
                                                user_data=None)
    assert encode_assignment(Assignment(tps("t-1, t-0")), 0) == old_a.encode()
    assert decode_subscription(old.encode()) == Subscription(topics=("a", "b"),
                                                             user_data=b"\x01\x02")


def test_decoding_reads_what_it_knows_of_a_higher_version():
    """Kafka's rule: a newer version only appends fields, so read it as the newest known."""
    future = bytes.fromhex("0007" + SUB_V3[4:]) + b"\x00\x00\x00\x09more fields"
    assert read_version(future) == 7
    assert decode_subscription(future) == decode_subscription(bytes.fromhex(SUB_V3))
    fa = bytes.fromhex("0005") + encode_assignment(Assignment(tps("x-3")))[2:] + b"\x01"
    assert decode_assignment(fa) == Assignment(tps("x-3"))


def test_decoded_subscription_is_javas():
    """Topics stay in wire order, -1 generation and empty rack read as absent, the
    group.instance.id comes from JoinGroup, not these bytes."""
    s = decode_subscription(bytes.fromhex(SUB_V3), group_instance_id="i1")
    assert s == Subscription(topics=("a", "b"), owned_partitions=tps("a-0, a-1"), generation=7,
                             rack="r1", user_data=b"\x01\x02", group_instance_id="i1")
    empty_rack = Subscription(topics=("a",), generation=-1, rack="")
    assert encode_subscription(empty_rack).endswith(b"\xff\xff\xff\xff\x00\x00")
    assert decode_subscription(encode_subscription(empty_rack)) == Subscription(topics=("a",))
    old = decode_subscription(encode_subscription(SUB, 1))
    assert (old.owned_partitions, old.generation, old.rack) == (tuple(tps("a-0, a-1")), None, None)


@pytest.mark.parametrize("data", [
    b"", b"\x00", b"\xff\xff" + bytes.fromhex(SUB_V3)[2:],        # short, negative version
    bytes.fromhex("0003" "ffffffff"),                              # null topics array
    bytes.fromhex("0003" "00000001" "ffff"),                       # null topic string
    bytes.fromhex("0003" "7fffffff"),                              # absurd array size
])
def test_malformed_subscriptions_raise_schema_error(data):
    with pytest.raises(SchemaError):
        decode_subscription(data)


def test_every_truncation_raises_schema_error():
    full = bytes.fromhex(SUB_V3)
    for n in range(len(full)):
        with pytest.raises(SchemaError):
            decode_subscription(full[:n])
    fa = encode_assignment(Assignment(tps("t-0, u-1"), b"xy"))
    for n in range(len(fa)):
        with pytest.raises(SchemaError):
            decode_assignment(fa[:n])
    with pytest.raises(SchemaError):
        encode_subscription(SUB, -1)
    with pytest.raises(SchemaError):
        encode_subscription(Subscription(topics=("x" * 0x8000,)))


names = st.text(max_size=6)
partition_lists = st.lists(st.tuples(names, st.integers(0, 2**31 - 1)), max_size=6)
subscriptions = st.builds(
    Subscription, topics=st.lists(names, max_size=5), owned_partitions=partition_lists,
    generation=st.none() | st.integers(-1, 2**31 - 1), rack=st.none() | names,
    user_data=st.none() | st.binary(max_size=8))


def kp_subscription(s: Subscription, version: int) -> KpSubscription:
    """The same subscription as kafka-python's JSON-schema-driven ConsumerProtocolSubscription,
    sorted as Kafka's ConsumerProtocol.serializeSubscription sorts."""
    owned = sorted(s.owned_partitions, key=lambda x: (java_key(x.topic), x.partition))
    groups = [KpSubscription.TopicPartition(topic=t, partitions=[p for _, p in g])
              for t, g in itertools.groupby(owned, key=lambda x: x.topic)]
    return KpSubscription(version=version, topics=sorted(s.topics, key=java_key),
                          user_data=s.user_data, owned_partitions=groups,
                          generation_id=-1 if s.generation is None else s.generation,
                          rack_id=s.rack)


@settings(max_examples=300, deadline=None)
@given(s=subscriptions, version=st.integers(0, 3))
def test_subscription_bytes_equal_kafka_pythons(s, version):
    data = encode_subscription(s, version)
    assert data == kp_subscription(s, version).encode()
    theirs = KpSubscription.decode(data)
    mine = decode_subscription(data)
    assert list(mine.topics) == theirs.topics and mine.user_data == theirs.user_data
    if version >= 1:
        assert sorted(mine.owned_partitions) == sorted(s.owned_partitions)
        assert [(g.topic, g.partitions) for g in theirs.owned_partitions] == [
            (t, [p for _, p in g]) for t, g in itertools.groupby(mine.owned_partitions,
                                                                 key=lambda x: x.topic)]
    if version >= 2:
        assert mine.generation == s.generation == (theirs.generation_id if
                                                   theirs.generation_id >= 0 else None)
    if version >= 3:
        assert mine.rack == (s.rack or None)


@settings(max_examples=300, deadline=None)
@given(parts=partition_lists, user_data=st.none() | st.binary(max_size=8),
       version=st.integers(0, 3))
def test_assignment_bytes_equal_kafka_pythons(parts, user_data, version):
    a = Assignment(tuple(parts), user_data)
    groups: dict[str, list[int]] = {}
    for t, p in parts:
        groups.setdefault(t, []).append(p)
    kp = KpAssignment(version=version, user_data=user_data, assigned_partitions=[
        KpAssignment.TopicPartition(topic=t, partitions=ps) for t, ps in groups.items()])
    assert encode_assignment(a, version) == kp.encode()
    back = decode_assignment(kp.encode())
    assert back.user_data == user_data
    assert sorted(back.partitions) == sorted(a.partitions)  # regrouped by topic, else equal


# == range and roundrobin: Kafka's cases ========================================================
def static(topics, instance):
    return sub(topics, instance=instance)


RANGE_CASES = {  # RangeAssignorTest, non-rack-aware (assertAssignment compares sets)
    "OneConsumerNoTopic": ({}, {"consumer1": sub([])}, {"consumer1": ""}),
    "OneConsumerNonexistentTopic": ({}, {"consumer1": sub("topic1")}, {"consumer1": ""}),
    "OneConsumerOneTopic": ({"topic1": 3}, {"consumer1": sub("topic1")},
                            {"consumer1": "topic1-0, topic1-1, topic1-2"}),
    "OnlyAssignsPartitionsFromSubscribedTopics": (
        {"topic1": 3, "other": 3}, {"consumer1": sub("topic1")},
        {"consumer1": "topic1-0, topic1-1, topic1-2"}),
    "OneConsumerMultipleTopics": ({"topic1": 1, "topic2": 2}, {"consumer1": sub("topic1,topic2")},
                                  {"consumer1": "topic1-0, topic2-0, topic2-1"}),
    "TwoConsumersOneTopicOnePartition": (
        {"topic1": 1}, {"consumer1": sub("topic1"), "consumer2": sub("topic1")},
        {"consumer1": "topic1-0", "consumer2": ""}),
    "TwoConsumersOneTopicTwoPartitions": (
        {"topic1": 2}, {"consumer1": sub("topic1"), "consumer2": sub("topic1")},
        {"consumer1": "topic1-0", "consumer2": "topic1-1"}),
    "MultipleConsumersMixedTopics": (
        {"topic1": 3, "topic2": 2},
        {"consumer1": sub("topic1"), "consumer2": sub("topic1,topic2"), "consumer3": sub("topic1")},
        {"consumer1": "topic1-0", "consumer2": "topic1-1, topic2-0, topic2-1",
         "consumer3": "topic1-2"}),
    "TwoConsumersTwoTopicsSixPartitions": (
        {"topic1": 3, "topic2": 3},
        {"consumer1": sub("topic1,topic2"), "consumer2": sub("topic1,topic2")},
        {"consumer1": "topic1-0, topic1-1, topic2-0, topic2-1", "consumer2": "topic1-2, topic2-2"}),
    "TwoStaticConsumersTwoTopicsSixPartitions": (  # instance ids rank, not member ids
        {"topic1": 3, "topic2": 3},
        {"consumer-b": static("topic1,topic2", "instance1"),
         "consumer-a": static("topic1,topic2", "instance2")},
        {"consumer-b": "topic1-0, topic1-1, topic2-0, topic2-1",
         "consumer-a": "topic1-2, topic2-2"}),
    "OneStaticConsumerAndOneDynamicConsumerTwoTopicsSixPartitions": (  # static ranks first
        {"topic1": 3, "topic2": 3},
        {"consumer-b": static("topic1,topic2", "instance1"), "consumer-a": sub("topic1,topic2")},
        {"consumer-b": "topic1-0, topic1-1, topic2-0, topic2-1",
         "consumer-a": "topic1-2, topic2-2"}),
}
T3 = ["t1", "t2", "t3"]
NON_RACK_AWARE = [  # RangeAssignorTest.verifyNonRackAwareAssignment cases (consumer0..2)
    ({"t1": 6, "t2": 7, "t3": 2}, [T3, T3, T3],
     ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1",
      "t1-4, t1-5, t2-5, t2-6"]),
    ({"t1": 6, "t2": 7, "t3": 2}, [T3, T3, ["t1", "t3"]],
     ["t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0", "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1",
      "t1-4, t1-5"]),
    ({"t1": 5, "t2": 5, "t3": 5}, [T3, T3, T3],
     ["t1-0, t1-1, t2-0, t2-1, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3",
      "t1-4, t2-4, t3-4"]),
    ({"t1": 5, "t2": 5, "t3": 5}, [T3, T3, ["t1", "t3"]],
     ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1", "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3",
      "t1-4, t3-4"]),
    ({"t1": 6, "t2": 6, "t3": 2, "t4": 2, "t5": 4, "t6": 4}, [[f"t{i}" for i in range(1, 10)]] * 3,
     ["t1-0, t1-1, t2-0, t2-1, t3-0, t4-0, t5-0, t5-1, t6-0, t6-1",
      "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1, t5-2, t6-2", "t1-4, t1-5, t2-4, t2-5, t5-3, t6-3"]),
]


@pytest.mark.parametrize("name", sorted(RANGE_CASES))
def test_range_kafka_cases(name):
    counts, members, expected = RANGE_CASES[name]
    got = RANGE.assign(members, counts)
    assert {m: set(a.partitions) for m, a in got.items()} == {
        m: set(tps(s)) for m, s in expected.items()}


@pytest.mark.parametrize("counts,topics,expected", NON_RACK_AWARE)
def test_range_kafka_non_rack_aware_cases(counts, topics, expected):
    members = {f"consumer{i}": sub(t, generation=None) for i, t in enumerate(topics)}
    assert sorted_strings(RANGE.assign(members, counts)) == {
        f"consumer{i}": e for i, e in enumerate(expected)}


def static_trio(topics):
    return {f"consumer{i}": static(topics, f"instance{i}") for i in (1, 2, 3)}


def by_instance(members, result):
    return {s.group_instance_id: list(result[m].partitions) for m, s in members.items()
            if s.group_instance_id}


@pytest.mark.parametrize("assignor,expected,sizes", [
    (RANGE, {"consumer1": "topic1-0, topic1-1, topic2-0", "consumer2": "topic1-2, topic2-1",
             "consumer3": "topic1-3, topic2-2", "dynamic": "topic1-4, topic2-3"}, (5, 4)),
    (ROUNDROBIN, {"consumer1": "topic1-0, topic2-1", "consumer2": "topic1-1, topic2-2",
                  "consumer3": "topic1-2", "dynamic": "topic2-0"}, (3, 3)),
])
def test_static_assignment_persists_when_the_dynamic_member_changes(assignor, expected, sizes):
    """testStatic{Member}{Range,RoundRobin}AssignmentPersistent: three static members keep their
    partitions when the dynamic member is replaced (Kafka compares the lists)."""
    counts = dict(zip(("topic1", "topic2"), sizes))
    members = static_trio("topic1,topic2")
    for dynamic in ("consumer4", "consumer5"):
        result = lists(assignor.assign({**members, dynamic: sub("topic1,topic2")}, counts))
        assert result == {(dynamic if m == "dynamic" else m): tps(s) for m, s in expected.items()}


@pytest.mark.parametrize("assignor,expected", [
    (RANGE, {"instance1": "topic1-0, topic1-1, topic2-0, topic2-1",
             "instance2": "topic1-2, topic1-3, topic2-2, topic2-3",
             "instance3": "topic1-4, topic2-4"}),
    (ROUNDROBIN, {"instance1": "topic1-0, topic1-3, topic2-1, topic2-4",
                  "instance2": "topic1-1, topic1-4, topic2-2",
                  "instance3": "topic1-2, topic2-0, topic2-3"}),
])
def test_static_assignment_persists_after_member_id_changes(assignor, expected):
    """testStatic...AssignmentPersistentAfterMemberIdChanges: keyed by group.instance.id."""
    counts = {"topic1": 5, "topic2": 5}
    members = static_trio("topic1,topic2")
    before = by_instance(members, assignor.assign(members, counts))
    assert {i: set(ps) for i, ps in before.items()} == {
        i: set(tps(s)) for i, s in expected.items()}
    swapped = {"consumer1": members["consumer1"], "consumer5": members["consumer2"],
               "consumer4": members["consumer3"]}
    assert by_instance(swapped, assignor.assign(swapped, counts)) == before


ROUNDROBIN_CASES = {  # RoundRobinAssignorTest (assertEquals on the lists)
    "OneConsumerNoTopic": ({}, {"consumer": sub([])}, {"consumer": ""}),
    "OneConsumerNonexistentTopic": ({}, {"consumer": sub("topic")}, {"consumer": ""}),
    "OneConsumerOneTopic": ({"topic": 3}, {"consumer": sub("topic")},
                            {"consumer": "topic-0, topic-1, topic-2"}),
    "OnlyAssignsPartitionsFromSubscribedTopics": (
        {"topic": 3, "other": 3}, {"consumer": sub("topic")},
        {"consumer": "topic-0, topic-1, topic-2"}),
    "OneConsumerMultipleTopics": ({"topic1": 1, "topic2": 2}, {"consumer": sub("topic1,topic2")},
                                  {"consumer": "topic1-0, topic2-0, topic2-1"}),
    "TwoConsumersOneTopicOnePartition": (
        {"topic": 1}, {"consumer1": sub("topic"), "consumer2": sub("topic")},
        {"consumer1": "topic-0", "consumer2": ""}),
    "TwoConsumersOneTopicTwoPartitions": (
        {"topic": 2}, {"consumer1": sub("topic"), "consumer2": sub("topic")},
        {"consumer1": "topic-0", "consumer2": "topic-1"}),
    "MultipleConsumersMixedTopics": (
        {"topic1": 3, "topic2": 2},
        {"consumer1": sub("topic1"), "consumer2": sub("topic1,topic2"), "consumer3": sub("topic1")},
        {"consumer1": "topic1-0", "consumer2": "topic1-1, topic2-0, topic2-1",
         "consumer3": "topic1-2"}),
    "TwoDynamicConsumersTwoTopicsSixPartitions": (
        {"topic1": 3, "topic2": 3},
        {"consumer1": sub("topic1,topic2"), "consumer2": sub("topic1,topic2")},
        {"consumer1": "topic1-0, topic1-2, topic2-1", "consumer2": "topic1-1, topic2-0, topic2-2"}),
    "TwoStaticConsumersTwoTopicsSixPartitions": (
        {"topic1": 3, "topic2": 3},
        {"consumer-b": static("topic1,topic2", "instance1"),
         "consumer-a": static("topic1,topic2", "instance2")},
        {"consumer-b": "topic1-0, topic1-2, topic2-1",
         "consumer-a": "topic1-1, topic2-0, topic2-2"}),
    "OneStaticConsumerAndOneDynamicConsumerTwoTopicsSixPartitions": (
        {"topic1": 3, "topic2": 3},
        {"consumer-b": static("topic1,topic2", "instance1"), "consumer-a": sub("topic1,topic2")},
        {"consumer-b": "topic1-0, topic1-2, topic2-1",
         "consumer-a": "topic1-1, topic2-0, topic2-2"}),
}


@pytest.mark.parametrize("name", sorted(ROUNDROBIN_CASES))
def test_roundrobin_kafka_cases(name):
    counts, members, expected = ROUNDROBIN_CASES[name]
    assert lists(ROUNDROBIN.assign(members, counts)) == {m: tps(s) for m, s in expected.items()}


def test_names_are_kafkas_protocol_names():
    assert [get_assignor(n).name for n in ("range", "roundrobin", "cooperative-sticky")] == [
        "range", "roundrobin", "cooperative-sticky"]
    assert COOP.rebalance_protocols == ("cooperative", "eager")
    with pytest.raises(KeyError):
        get_assignor("sticky")


# == range and roundrobin: references and kafka-python ==========================================
TOPICS = ["a", "b", "c", "d"]


@st.composite
def groups(draw, max_members=6, topics=TOPICS):
    counts = {t: draw(st.integers(0, 7)) for t in draw(st.sets(st.sampled_from(topics)))}
    ids = draw(st.lists(st.sampled_from([f"m{i}" for i in range(10)]), min_size=1,
                        max_size=max_members, unique=True))
    instances = iter(draw(st.permutations([f"i{i}" for i in range(10)])))
    same = draw(st.booleans()) and draw(st.sets(st.sampled_from(topics)))  # one subscription
    members = {}
    for m in ids:
        mine = same if same is not False else draw(st.sets(st.sampled_from(topics)))
        members[m] = Subscription(topics=tuple(mine), group_instance_id=next(instances)
                                  if draw(st.booleans()) else None)
    return members, counts


def member_order(members):
    return sorted(members, key=lambda m: (members[m].group_instance_id is None,
                                          members[m].group_instance_id or "", m))


def naive_range(members, counts):
    out = {m: [] for m in members}
    for topic in sorted(t for t, n in counts.items() if n > 0):
        consumers = [m for m in member_order(members) if topic in members[m].topics]
        for i, m in enumerate(consumers):  # consumer i's slice, as a closed formula
            per, extra = divmod(counts[topic], len(consumers))
            start = per * i + min(i, extra)
            out[m] += [TopicPartition(topic, p) for p in range(start, start + per + (i < extra))]
    return out


def naive_roundrobin(members, counts):
    out = {m: [] for m in members}
    ring = itertools.cycle(member_order(members))
    wanted = {t for s in members.values() for t in s.topics}
    for topic in sorted(t for t in counts if t in wanted):
        for p in range(counts[topic]):
            m = next(ring)
            while topic not in members[m].topics:
                m = next(ring)
            out[m].append(TopicPartition(topic, p))
    return out


def assert_exactly_once(members, counts, result):
    """Every partition of a topic someone subscribes to is assigned exactly once, to a member
    subscribed to its topic; nothing else is assigned."""
    given = [x for a in result.values() for x in a.partitions]
    assert len(given) == len(set(given))
    wanted = {TopicPartition(t, p) for t, n in counts.items() for p in range(n)
              if any(t in s.topics for s in members.values())}
    assert set(given) == wanted
    assert all(x.topic in members[m].topics for m, a in result.items() for x in a.partitions)
    assert set(result) == set(members)


@settings(max_examples=300, deadline=None)
@given(g=groups())
def test_range_and_roundrobin_equal_naive_references(g):
    members, counts = g
    for assignor, naive in ((RANGE, naive_range), (ROUNDROBIN, naive_roundrobin)):
        result = assignor.assign(members, counts)
        assert_exactly_once(members, counts, result)
        assert lists(result) == naive(members, counts)


KpMember = namedtuple("KpMember", "member_id group_instance_id metadata")


class KpCluster:
    def __init__(self, counts):
        self.counts = counts

    def partitions_for_topic(self, topic):
        return set(range(self.counts[topic])) if topic in self.counts else None


@settings(max_examples=300, deadline=None)
@given(g=groups())
def test_range_and_roundrobin_equal_kafka_pythons(g):
    """kafka-python's own assignors. Both split static from dynamic members with an unsorted
    itertools.groupby, which loses members unless statics come first, so they get them so; its
    roundrobin raises KeyError (it rebinds the member id to a tuple) as soon as it must skip a
    member not subscribed to a topic, so it is compared on identical subscriptions only."""
    members, counts = g
    kp_members = [KpMember(m, members[m].group_instance_id,
                           KpSubscription(version=0, topics=list(members[m].topics), user_data=b""))
                  for m in sorted(members, key=lambda m: members[m].group_instance_id is None)]
    pairs = [(RANGE, RangePartitionAssignor)]
    if len({frozenset(s.topics) for s in members.values()}) == 1:
        pairs.append((ROUNDROBIN, RoundRobinPartitionAssignor))
    for mine, theirs in pairs:
        kp = theirs.assign(KpCluster(counts), kp_members)
        assert lists(mine.assign(members, counts)) == {
            m: [TopicPartition(t, p) for t, ps in a.assigned_partitions for p in ps]
            for m, a in kp.items()}


# == cooperative-sticky: Kafka's cases ==========================================================
def cooperative_validity(members, result) -> bool:
    """CooperativeStickyAssignorTest.verifyCooperativeValidity: no partition is given to a new
    owner in the round its old owner revokes it; True when something is revoked."""
    added, revoked = set(), set()
    for m, a in result.items():
        owned = set(members[m].owned_partitions)
        added |= set(a.partitions) - owned
        revoked |= owned - set(a.partitions)
    assert not added & revoked
    return bool(revoked)


def kafka_validity_and_balance(members, result):
    """AbstractStickyAssignorTest.verifyValidityAndBalance."""
    consumers = sorted(result)
    for i, c in enumerate(consumers):
        mine = list(result[c].partitions)
        assert all(x.topic in members[c].topics for x in mine)
        for other in consumers[i + 1:]:
            theirs = list(result[other].partitions)
            assert not set(mine) & set(theirs)
            if abs(len(mine) - len(theirs)) > 1:  # then no topic may be shared
                assert not {x.topic for x in mine} & {x.topic for x in theirs}


def settle(members, counts, result=None, assignor=COOP):
    """CooperativeStickyAssignorTest.verifyValidityAndBalance: while partitions are revoked,
    rejoin owning what was assigned (generation 1) and rebalance; at most 4 follow-ups."""
    result = result if result is not None else assignor.assign(members, counts)
    rounds = 0
    while cooperative_validity(members, result):
        members = {m: Subscription(members[m].topics, result[m].partitions, GEN,
                                   members[m].group_instance_id) for m in result}
        result = assignor.assign(members, counts)
        rounds += 1
        assert rounds <= 4
    kafka_validity_and_balance(members, result)
    return members, result


def fully_balanced(result) -> bool:
    sizes = [len(a.partitions) for a in result.values()]
    return max(sizes) - min(sizes) <= 1


def unassigned(counts, result) -> set[TopicPartition]:
    given = {x for a in result.values() for x in a.partitions}
    return {TopicPartition(t, p) for t, n in counts.items() for p in range(n)} - given


def v2(topics, owned="", generation=GEN):
    return sub(topics, owned, generation)


STICKY_CASES = {  # name: (counts, members, withheld in round 1, result after settling)
    "OneConsumerNoTopic": ({}, {"consumer": sub([])}, "", {"consumer": ""}),
    "OneConsumerNonexistentTopic": ({}, {"consumer": sub("topic")}, "", {"consumer": ""}),
    "OneConsumerOneTopic": ({"topic": 3}, {"consumer": sub("topic")}, "",
                            {"consumer": "topic-0, topic-1, topic-2"}),
    "OnlyAssignsPartitionsFromSubscribedTopics": (
        {"topic": 2}, {"consumer": v2("topic", "topic-0, topic-1, other-0, other-1")}, "",
        {"consumer": "topic-0, topic-1"}),
    "OneConsumerMultipleTopics": ({"topic1": 1, "topic2": 2}, {"consumer": sub("topic1,topic2")},
                                  "", {"consumer": "topic1-0, topic2-0, topic2-1"}),
    "TwoConsumersOneTopicTwoPartitions": (
        {"topic": 2}, {"consumer1": sub("topic"), "consumer2": sub("topic")}, "",
        {"consumer1": "topic-0", "consumer2": "topic-1"}),
    "MultipleConsumersMixedTopicSubscriptions": (
        {"topic1": 3, "topic2": 2},
        {"consumer1": sub("topic1"), "consumer2": sub("topic1,topic2"), "consumer3": sub("topic1")},
        "", {"consumer1": "topic1-0, topic1-2", "consumer2": "topic2-0, topic2-1",
             "consumer3": "topic1-1"}),
    "TwoConsumersTwoTopicsSixPartitions": (
        {"topic1": 3, "topic2": 3},
        {"consumer1": sub("topic1,topic2"), "consumer2": sub("topic1,topic2")}, "",
        {"consumer1": "topic1-0, topic1-2, topic2-1", "consumer2": "topic1-1, topic2-0, topic2-2"}),
    "ConsumerOwningMinQuotaExpectedMaxQuota": (
        {"topic1": 2, "topic2": 3},
        {"consumer1": v2("topic1,topic2", "topic1-0, topic2-1"),
         "consumer2": v2("topic1,topic2", "topic1-1, topic2-2")}, "",
        {"consumer1": "topic1-0, topic2-1, topic2-0", "consumer2": "topic1-1, topic2-2"}),
    "MaxQuotaConsumerMoreThanNumExpectedMaxCapacityMembers": (
        {"topic1": 2, "topic2": 2},
        {"consumer1": v2("topic1,topic2", "topic1-0, topic2-0"),
         "consumer2": v2("topic1,topic2", "topic1-1, topic2-1"),
         "consumer3": v2("topic1,topic2")}, "topic2-0",
        {"consumer1": "topic1-0", "consumer2": "topic1-1, topic2-1", "consumer3": "topic2-0"}),
    "AllConsumersAreUnderMinQuota": (
        {"topic1": 2, "topic2": 3},
        {"consumer1": v2("topic1,topic2", "topic1-0"), "consumer2": v2("topic1,topic2", "topic1-1"),
         "consumer3": v2("topic1,topic2")}, "",
        {"consumer1": "topic1-0, topic2-1", "consumer2": "topic1-1, topic2-2",
         "consumer3": "topic2-0"}),
    "AllConsumersReachExpectedQuotaAndAreConsideredFilled": (
        {"topic": 4},
        {"consumer1": v2("topic", "topic-0, topic-1"), "consumer2": v2("topic", "topic-2"),
         "consumer3": v2("topic")}, "",
        {"consumer1": "topic-0, topic-1", "consumer2": "topic-2", "consumer3": "topic-3"}),
    "PartitionsTransferringOwnershipIncludeThePartitionClaimedByMultipleConsumersInSame"
    "Generation": (
        {"topic": 3},
        {"consumer1": v2("topic", "topic-0, topic-1"), "consumer2": v2("topic", "topic-0, topic-2"),
         "consumer3": v2("topic")}, "topic-0",
        {"consumer1": "topic-1", "consumer2": "topic-2", "consumer3": "topic-0"}),
    "AssignorWithOldVersionSubscriptions": (  # v1 members: the generation is in user_data
        {"topic1": 3},
        {"consumer1": sub("topic1", "topic1-0", user_data=COOP.subscription_user_data(GEN)),
         "consumer2": sub("topic1", "topic1-1", user_data=COOP.subscription_user_data(GEN)),
         "consumer3": v2("topic1")}, "",
        {"consumer1": "topic1-0", "consumer2": "topic1-1", "consumer3": "topic1-2"}),
}


@pytest.mark.parametrize("name", sorted(STICKY_CASES))
def test_cooperative_sticky_kafka_cases(name):
    """Kafka asserts the lists after verifyValidityAndBalance has run the follow-up rounds;
    the partitions withheld in round 1 are its partitionsTransferringOwnership."""
    counts, members, withheld, expected = STICKY_CASES[name]
    first = COOP.assign(members, counts)
    assert unassigned(counts, first) == set(tps(withheld))
    _, result = settle(members, counts, first)
    assert lists(result) == {m: tps(s) for m, s in expected.items()}
    assert fully_balanced(result)


@pytest.mark.parametrize("name,counts,members,expected", [
    ("OwnedPartitionsAreInvalidatedForConsumerWithStaleGeneration", {"topic": 3, "topic2": 3},
     {"consumer1": v2("topic,topic2", "topic-0, topic-2, topic2-1", 10),
      "consumer2": v2("topic,topic2", "topic-0, topic-2, topic2-1", 9)},
     {"consumer1": "topic-0, topic-2, topic2-1", "consumer2": "topic-1, topic2-0, topic2-2"}),
    ("OwnedPartitionsAreInvalidatedForConsumerWithNoGeneration", {"topic": 3, "topic2": 3},
     {"consumer1": v2("topic,topic2", "topic-0, topic-2, topic2-1", 10),
      "consumer2": v2("topic,topic2", "topic-0, topic-2, topic2-1", None)},
     {"consumer1": "topic-0, topic-2, topic2-1", "consumer2": "topic-1, topic2-0, topic2-2"}),
    ("EnsurePartitionsAssignedToHighestGeneration", {"topic": 3, "topic2": 3, "topic3": 3},
     {"consumer1": v2("topic,topic2,topic3", "topic-0, topic2-0, topic3-0", 10),
      "consumer2": v2("topic,topic2,topic3", "topic-1, topic2-1, topic3-1", 9),
      "consumer3": v2("topic,topic2,topic3", "topic2-1, topic3-0, topic3-2", 8)},
     {"consumer1": "topic-0, topic2-0, topic3-0", "consumer2": "topic-1, topic2-1, topic3-1",
      "consumer3": "topic-2, topic2-2, topic3-2"}),
    ("NoReassignmentOnCurrentMembers", {"topic": 3, "topic1": 3, "topic2": 3, "topic3": 3},
     {"consumer1": v2("topic,topic2,topic3,topic1", "", None),
      "consumer2": v2("topic,topic2,topic3,topic1", "topic-0, topic2-0, topic1-0", 9),
      "consumer3": v2("topic,topic2,topic3,topic1", "topic3-2, topic2-2, topic1-1", 8),
      "consumer4": v2("topic,topic2,topic3,topic1", "topic3-1, topic-1, topic-2", 7)},
     {"consumer1": "topic1-2, topic2-1, topic3-0"}),
    ("OwnedPartitionsAreInvalidatedForConsumerWithMultipleGeneration", {"topic": 3, "topic2": 3},
     {"consumer1": v2("topic,topic2", "topic-0, topic2-1, topic-1", 10),
      "consumer2": v2("topic,topic2", "topic-0, topic2-1, topic2-2", 8)},
     {"consumer1": "topic-0, topic2-1, topic-1", "consumer2": "topic-2, topic2-2, topic2-0"}),
])
def test_cooperative_sticky_generations_decide_ownership(name, counts, members, expected):
    """Kafka's generation cases: nothing withheld, the stale claim loses (sets compared)."""
    result = COOP.assign(members, counts)
    assert not unassigned(counts, result)
    assert {m: set(result[m].partitions) for m in expected} == {
        m: set(tps(s)) for m, s in expected.items()}
    settle(members, counts, result)
    assert fully_balanced(result)


@pytest.mark.parametrize("partitions,expected", [
    (3, {"consumer1": "topic-1", "consumer2": "topic-2", "consumer3": ""}),
    (4, {"consumer1": "topic-1, topic-3", "consumer2": "topic-2", "consumer3": ""}),
])
def test_doubly_claimed_partition_waits_for_both_to_revoke(partitions, expected):
    """CooperativeStickyAssignorTest.testAllConsumersHaveOwnedPartitionInvalidatedWhenClaimedBy
    MultipleConsumersInSameGenerationWith{Equal,Unequal}PartitionsPerConsumer."""
    members = {"consumer1": v2("topic", "topic-0, topic-1"),
               "consumer2": v2("topic", "topic-0, topic-2"), "consumer3": v2("topic")}
    result = COOP.assign(members, {"topic": partitions})
    assert lists(result) == {m: tps(s) for m, s in expected.items()}
    _, final = settle(members, {"topic": partitions}, result)
    assert fully_balanced(final)


def test_add_remove_consumer_one_topic():
    counts = {"topic": 3}
    r = COOP.assign({"consumer1": sub("topic")}, counts)
    assert lists(r) == {"consumer1": tps("topic-0, topic-1, topic-2")}
    members = {"consumer1": v2("topic", r["consumer1"].partitions), "consumer2": v2("topic")}
    r = COOP.assign(members, counts)
    assert unassigned(counts, r) == {tp("topic-2")}
    _, r = settle(members, counts, r)
    assert lists(r) == {"consumer1": tps("topic-0, topic-1"), "consumer2": tps("topic-2")}
    r = COOP.assign({"consumer2": v2("topic", r["consumer2"].partitions)}, counts)
    assert set(r["consumer2"].partitions) == set(tps("topic-0, topic-1, topic-2"))


def test_add_remove_two_consumers_two_topics():
    counts, both = {"topic1": 3, "topic2": 4}, "topic1,topic2"
    r = COOP.assign({"consumer1": sub(both), "consumer2": sub(both)}, counts)
    assert lists(r) == {"consumer1": tps("topic1-0, topic1-2, topic2-1, topic2-3"),
                        "consumer2": tps("topic1-1, topic2-0, topic2-2")}
    members = {"consumer1": v2(both, r["consumer1"].partitions),
               "consumer2": v2(both, r["consumer2"].partitions),
               "consumer3": v2(both), "consumer4": v2(both)}
    r = COOP.assign(members, counts)
    assert unassigned(counts, r) == set(tps("topic1-2, topic2-3, topic2-2"))
    _, r = settle(members, counts, r)
    assert lists(r) == {"consumer1": tps("topic1-0, topic2-1"),
                        "consumer2": tps("topic2-0, topic1-1"),
                        "consumer3": tps("topic1-2, topic2-3"), "consumer4": tps("topic2-2")}
    members = {"consumer3": v2(both, r["consumer3"].partitions),
               "consumer4": v2(both, r["consumer4"].partitions)}
    r = COOP.assign(members, counts)
    assert lists(r) == {"consumer3": tps("topic1-2, topic2-3, topic1-0, topic2-1"),
                        "consumer4": tps("topic2-2, topic1-1, topic2-0")}


def test_add_remove_topic_two_consumers():
    counts = {"topic": 3}
    r = COOP.assign({"consumer1": sub("topic"), "consumer2": sub("topic")}, counts)
    first = lists(r)
    assert sorted(map(len, first.values())) == [1, 2]
    counts["topic2"] = 3
    members = {m: v2("topic,topic2", ps) for m, ps in first.items()}
    r = COOP.assign(members, counts)
    assert not unassigned(counts, r)
    second = lists(r)
    assert all(len(ps) == 3 and set(first[m]) <= set(ps) for m, ps in second.items())
    del counts["topic"]
    r = COOP.assign({m: v2("topic2", ps) for m, ps in second.items()}, counts)
    assert sorted(len(a.partitions) for a in r.values()) == [1, 2]
    assert all(set(a.partitions) <= set(second[m]) for m, a in r.items())


def test_stickiness_when_the_leader_leaves():
    counts = {"topic1": 3}
    r = COOP.assign({f"consumer{i}": sub("topic1") for i in range(1, 5)}, counts)
    before = {m: a.partitions for m, a in r.items()}
    assert all(len(ps) <= 1 for ps in before.values())
    members = {m: v2("topic1", before[m]) for m in ("consumer2", "consumer3", "consumer4")}
    r = COOP.assign(members, counts)
    assert not unassigned(counts, r)
    assert all(len(a.partitions) == 1 and set(before[m]) <= set(a.partitions)
               for m, a in r.items())


CONSUMERS_ALL3 = [T3, T3, T3]
CONSUMERS_UNEQUAL = [T3, T3, ["t1", "t3"]]
OWNED = ["t1-0, t1-1, t1-2, t1-3, t1-4", "t1-5, t2-0, t2-1, t2-2, t2-3",
         "t2-4, t2-5, t2-6, t3-0, t3-1"]


def rack_test_group(topics, owned=None):
    return {f"consumer{i}": Subscription(t, tps(owned[i]) if owned else ())
            for i, t in enumerate(topics)}


@pytest.mark.parametrize("topics,owned,expected", [
    # testRackAwareAssignmentWith{Uniform,NonEqual}Subscription, non-rack-aware expectations:
    # nothing owned, and the expected assignment owned (it must stay put).
    (CONSUMERS_ALL3, None, ["t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0",
                            "t1-2, t1-5, t2-2, t2-5, t3-1"]),
    (CONSUMERS_UNEQUAL, None, ["t1-5, t2-0, t2-2, t2-4, t2-6", "t1-3, t2-1, t2-3, t2-5, t3-0",
                               "t1-0, t1-1, t1-2, t1-4, t3-1"]),
    # "result is same as non-rack-aware assignment if all racks match": from OWNED the general
    # algorithm first revokes (intermediate), then fills.
    (CONSUMERS_UNEQUAL, OWNED, ["t1-2, t1-3, t1-4", "t2-0, t2-1, t2-2, t2-3", "t3-0, t3-1"]),
    (CONSUMERS_UNEQUAL, ["t1-2, t1-3, t1-4", "t2-0, t2-1, t2-2, t2-3", "t3-0, t3-1"],
     ["t1-2, t1-3, t1-4, t2-4, t2-5", "t2-0, t2-1, t2-2, t2-3, t2-6",
      "t1-0, t1-1, t1-5, t3-0, t3-1"]),
])
def test_cooperative_sticky_kafka_exact_assignments(topics, owned, expected):
    counts = {"t1": 6, "t2": 7, "t3": 2}
    want = {f"consumer{i}": e for i, e in enumerate(expected)}
    assert sorted_strings(COOP.assign(rack_test_group(topics, owned), counts)) == want
    if owned is None:
        assert sorted_strings(COOP.assign(rack_test_group(topics, expected), counts)) == want


def padded(prefix, i, width):
    return f"{prefix}{i:0{width}d}"  # getCanonicalName


@pytest.mark.parametrize("case", ["PoorRoundRobin", "MoveExisting", "OneConsumerLeaves",
                                  "SameSubscriptions", "OneConsumerAdded", "NewSubscription"])
def test_cooperative_sticky_kafka_validity_cases(case):
    """Kafka's cases that check only validity and balance (after the follow-up rounds)."""
    if case == "PoorRoundRobin":
        counts = {f"topic{i}": i % 2 + 1 for i in range(1, 6)}
        wide, narrow = "topic1,topic2,topic3,topic4,topic5", "topic1,topic3,topic5"
        members = {"consumer1": sub(wide), "consumer2": sub(narrow),
                   "consumer3": sub(narrow), "consumer4": sub(wide)}
        settle(members, counts)
    elif case == "MoveExisting":
        counts = {f"topic{i}": 1 for i in range(1, 7)}
        members = {"consumer1": v2("topic1,topic2", "topic1-0"),
                   "consumer2": v2("topic1,topic2,topic3,topic4", "topic2-0, topic3-0"),
                   "consumer3": v2("topic2,topic3,topic4,topic5,topic6",
                                   "topic4-0, topic5-0, topic6-0")}
        settle(members, counts)
    elif case == "OneConsumerLeaves":
        counts = {padded("t", i, 2): i for i in range(1, 20)}
        members = {padded("c", i, 2): sub([padded("t", j, 2) for j in range(1, i + 1)])
                   for i in range(1, 20)}
        members, r = settle(members, counts)
        members = {m: v2(s.topics, r[m].partitions, GEN) for m, s in members.items()
                   if m != "c10"}
        settle(members, counts)
    elif case == "SameSubscriptions":
        counts = {padded("t", i, 2): i for i in range(1, 15)}
        members = {f"c{i}": sub(sorted(counts)) for i in range(1, 9)}
        members, r = settle(members, counts)
        members = {m: v2(s.topics, r[m].partitions) for m, s in members.items() if m != "c1"}
        _, r = settle(members, counts)
        assert fully_balanced(r)
    elif case == "OneConsumerAdded":
        counts = {"topic": 20}
        members, r = settle({padded("c", i, 2): sub("topic") for i in range(1, 10)}, counts)
        members = {**{m: v2("topic", r[m].partitions) for m in members}, "c10": sub("topic")}
        settle(members, counts)
    else:  # NewSubscription: consumer i takes topics i..3i-2, then c0 adds t1
        counts = {f"t{i}": 1 for i in range(1, 5)}
        members = {f"c{i}": sub([f"t{j}" for j in range(i, 3 * i - 1)]) for i in range(3)}
        members, r = settle(members, counts)
        members["c0"] = v2(["t1"], r["c0"].partitions)
        settle(members, counts)


def test_subscription_not_equal_and_same_partition_claimed_in_three_generations():
    counts = {"topic": 6, "topic1": 1}
    for g1, g2, g3 in itertools.permutations((1, 2, 3)):
        members = {"consumer1": v2("topic", "topic-0, topic-2", g1),
                   "consumer2": v2("topic", "topic-1, topic-2, topic-3", g2),
                   "consumer3": v2("topic", "topic-2, topic-4, topic-5", g3),
                   "consumer4": v2("topic1", "topic1-0", 2)}
        r = COOP.assign(members, counts)
        given = [x for a in r.values() for x in a.partitions]
        assert len(given) == len(set(given))
        assert all(1 <= len(a.partitions) <= 2 for a in r.values())


def test_members_are_visited_in_java_hashmap_order():
    """Kafka's exact cases depend on it: "consumer1".."consumer4" hash to buckets 12, 11, 10, 9
    of a 16-slot table, so Java visits consumer4 first; "Aa" and "BB" share String.hashCode
    2112, so they stay in insertion order; 13 keys grow the table to 32 (chr(17): bucket 17)."""
    assert A._hashmap_order([f"consumer{i}" for i in range(1, 5)]) == [
        "consumer4", "consumer3", "consumer2", "consumer1"]
    assert A._hashmap_order(["BB", "Aa", "c"]) == ["BB", "Aa", "c"]  # buckets 0, 0, 3
    assert A._hashmap_order(["c", "Aa", "BB"]) == ["Aa", "BB", "c"]
    keys = [chr(c) for c in (17, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)]
    assert A._hashmap_order(keys)[:2] == [chr(17), chr(2)]  # 16 slots: 17 sits in bucket 1
    assert A._hashmap_order(keys + [chr(13)])[-1] == chr(17)  # 32 slots: bucket 17, last


def test_member_generation_sources():
    """CooperativeStickyAssignor.memberData: the v2 field, else user_data's int32, else none;
    unreadable user_data reads as -1 (testEncodeAndDecodeGeneration, testDecodeGeneration)."""
    assert A._member_generation(sub("t", generation=3, user_data=b"\x00\x00\x00\x09")) == 3
    assert A._member_generation(sub("t", user_data=COOP.subscription_user_data(10))) == 10
    assert A._member_generation(sub("t", user_data=COOP.subscription_user_data())) == -1
    assert A._member_generation(sub("t", user_data=b"\x01")) == -1
    assert A._member_generation(sub("t")) is None


# == cooperative-sticky: properties =============================================================
@st.composite
def sticky_groups(draw, uniform: bool, consistent: bool):
    """A group whose members (uniform: all on the same topics) claim partitions: consistent
    claims are disjoint and of one generation; others may overlap, across generations, and
    name partitions that do not exist."""
    topics = draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=4, unique=True))
    counts = {t: draw(st.integers(0, 6)) for t in topics}
    ids = draw(st.lists(st.sampled_from([f"m{i}" for i in range(8)]), min_size=1, max_size=6,
                        unique=True))
    shared = draw(st.sets(st.sampled_from(topics), min_size=1))
    everything = [TopicPartition(t, p) for t in TOPICS for p in range(7)]
    owned = {m: [] for m in ids}
    if consistent:
        for x in everything:
            if owner := draw(st.sampled_from([None, None] + ids)):
                owned[owner].append(x)
        gens = {m: 5 for m in ids}
    else:
        for m in ids:
            owned[m] = draw(st.lists(st.sampled_from(everything), max_size=8, unique=True))
        gens = {m: draw(st.sampled_from([None, 1, 2, 3])) for m in ids}
    members = {m: Subscription(topics=tuple(shared if uniform else
                                            draw(st.sets(st.sampled_from(topics)))),
                               owned_partitions=tuple(owned[m]), generation=gens[m])
               for m in ids}
    return members, counts


def follow_up(members, result, generation):
    """The next JoinGroup: every member owns what it was just assigned."""
    return {m: Subscription(members[m].topics, result[m].partitions, generation)
            for m in members}


def check_round(members, counts, result):
    given = [x for a in result.values() for x in a.partitions]
    assert len(given) == len(set(given))
    assert all(x.topic in members[m].topics and x.partition < counts[x.topic]
               for m, a in result.items() for x in a.partitions)
    cooperative_validity(members, result)


@settings(max_examples=300, deadline=None)
@given(g=sticky_groups(uniform=True, consistent=False))
def test_cooperative_sticky_two_round_convergence(g):
    """Uniform subscriptions (the constrained algorithm), any claims: round 1 never hands a
    partition to a new owner while its old owner still claims it; after the follow-up rebalance
    (everyone owning its round-1 partitions) every partition is assigned, nothing more is
    revoked, and the assignment is balanced."""
    members, counts = g
    first = COOP.assign(members, counts)
    check_round(members, counts, first)
    again = follow_up(members, first, 6)
    second = COOP.assign(again, counts)
    check_round(again, counts, second)
    assert_exactly_once(again, counts, second)
    assert not cooperative_validity(again, second)  # nothing revoked: a fixed point
    assert fully_balanced(second)


@settings(max_examples=300, deadline=None)
@given(g=sticky_groups(uniform=False, consistent=False))
def test_cooperative_sticky_general_case_converges(g):
    """Different subscriptions (the general algorithm): every round is valid and cooperative,
    and within Kafka's own bound (CooperativeStickyAssignorTest: at most 4 follow-ups) a round
    revokes nothing and assigns every partition. Two rounds are not always enough (below)."""
    members, counts = g
    result = COOP.assign(members, counts)
    for generation in range(6, 11):
        check_round(members, counts, result)
        if not cooperative_validity(members, result):
            break
        members = follow_up(members, result, generation)
        result = COOP.assign(members, counts)
    else:
        pytest.fail("still revoking after 4 follow-up rebalances")
    assert_exactly_once(members, counts, result)


def test_general_case_can_need_a_third_round():
    """m0 owns a-0, a-1, b-0, b-1. Round 1 moves b-0 to m4 and a-0 to m3 (both withheld);
    in round 2 m0 (tied with m4 at 2, first by id) takes b-0 back, leaving m3 one short, so
    a-1 moves to m3 and is withheld again; round 3 settles. Kafka's algorithm does the same."""
    counts = {"a": 2, "b": 4}
    members = {"m0": v2("a,b", "a-0, a-1, b-0, b-1", 3), "m3": v2("a", "", 3),
               "m4": v2("a,b", "", 3)}
    first = COOP.assign(members, counts)
    assert sorted_strings(first) == {"m0": "a-1, b-1", "m3": "", "m4": "b-2, b-3"}
    members = follow_up(members, first, 4)
    second = COOP.assign(members, counts)
    assert sorted_strings(second) == {"m0": "b-0, b-1", "m3": "a-0", "m4": "b-2, b-3"}
    members = follow_up(members, second, 5)
    assert sorted_strings(COOP.assign(members, counts)) == {
        "m0": "b-0, b-1", "m3": "a-0, a-1", "m4": "b-2, b-3"}


@settings(max_examples=300, deadline=None)
@given(g=sticky_groups(uniform=True, consistent=True))
def test_cooperative_sticky_keeps_owned_partitions_up_to_quota(g):
    """Uniform subscriptions, valid claims: a member keeps min(what it validly owns, floor quota),
    never holds more than the ceil quota, and loses an owned partition only when it owns more
    than the floor quota or the partition's topic is not (or no longer) subscribed/existing."""
    members, counts = g
    result = COOP.assign(members, counts)
    total = sum(counts[t] for t in next(iter(members.values())).topics)
    floor_q, ceil_q = total // len(members), -(-total // len(members))
    for m, s in members.items():
        valid = {x for x in s.owned_partitions
                 if x.topic in s.topics and x.partition < counts[x.topic]}
        kept = valid & set(result[m].partitions)
        assert len(kept) >= min(len(valid), floor_q)
        assert len(result[m].partitions) <= ceil_q
        if kept != valid:
            assert len(valid) > floor_q
    _, final = settle(members, counts, result)
    assert fully_balanced(final)


@settings(max_examples=300, deadline=None)
@given(g=sticky_groups(uniform=True, consistent=False))
def test_cooperative_sticky_conflicting_claims_follow_generation(g):
    """Uniform case: a partition several members claim goes, in round 1, only to the claimer
    with the strictly highest generation (or to no one until the next round)."""
    members, counts = g
    result = COOP.assign(members, counts)
    holder = {x: m for m, a in result.items() for x in a.partitions}
    claims: dict[TopicPartition, list[str]] = {}
    for m, s in members.items():
        for x in s.owned_partitions:
            claims.setdefault(x, []).append(m)
    for x, claimers in claims.items():
        if len(claimers) > 1 and x in holder:
            gens = sorted((A._gen(members[m].generation), m) for m in claimers)
            assert gens[-1][0] > gens[-2][0] and holder[x] == gens[-1][1]


# == the module's own rules =====================================================================
@pytest.mark.parametrize("module, allowed", [
    (A, {"rayka.client.types", "rayka.client.consumer_protocol"}),
    (CP, {"rayka.client.types"}),
])
def test_assignors_and_consumer_protocol_are_pure(module, allowed):
    """rayka/client's pure parts import only the stdlib, replicas/ and the record codec; these
    need only the stdlib, rayka.client.types (itself pure) and each other."""
    from tests.test_import_boundaries import STDLIB, raw_imports
    imported = {t for t, _, _ in raw_imports(Path(module.__file__), module.__name__)}
    assert {t.split(".")[0] for t in imported} - STDLIB == {"rayka"}
    assert {t for t in imported if t.startswith("rayka")} == allowed
