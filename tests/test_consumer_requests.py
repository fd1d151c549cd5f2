"""KIP-848 consumer groups inside the group coordinator (coordinator/consumer_requests.py)
and their `__consumer_offsets` records (coordinator/consumer_records.py): heartbeats
persisted before they are answered, the coordinator's own checks, conversion between
classic and consumer groups, offsets with member epochs, ListGroups / DescribeGroups /
DeleteGroups / OffsetDelete on consumer groups, expiry, and the group coming back from
its records on another coordinator — against a property: any group replayed from what
was appended is the group that wrote it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from coordinator import messages as m
from coordinator import records as R
from coordinator.config import GroupCoordinatorConfig
from coordinator.consumer_group import ConsumerGroup, HeartbeatAnswer, HeartbeatRequest
from coordinator.consumer_records import (ConsumerKey, decode_consumer_key,
                                          encode_consumer_key, group_records, restore)
from coordinator.states import GroupState as S
from replicas.errors import ErrorCode as E
from tests.coordinator_sim import Driver

pytestmark = pytest.mark.unit

GID = "g"
ID_FOO, ID_BAR = "AAAAAAAAAAAAAAAAAAAAAQ", "AAAAAAAAAAAAAAAAAAAAAg"   # two topic ids
TOPICS = {"foo": (ID_FOO, 4), "bar": (ID_BAR, 2)}


def join(member_id, *topics, epoch=0, owned=None, group=GID):
    return HeartbeatRequest(group, member_id, epoch, rebalance_timeout_ms=5000,
                            subscribed_topic_names=tuple(topics) or ("foo",),
                            owned={} if owned is None else owned)


def beat(d: Driver, request: HeartbeatRequest, version: int = 1) -> int:
    return d.request(m.ConsumerGroupHeartbeat, request=request, topics=TOPICS, version=version)


def answered(d: Driver, request: HeartbeatRequest, version: int = 1) -> HeartbeatAnswer:
    rid = beat(d, request, version)
    assert rid in d.answers, "parked"
    return d.answers[rid]


def owned_driver(**config) -> Driver:
    d = Driver(GroupCoordinatorConfig(**config))
    d.own(GID)
    return d


# -- the coordinator's checks ------------------------------------------------------------------
def test_the_request_is_checked_before_the_coordinator():
    d = Driver()                                   # owns nothing
    a = answered(d, HeartbeatRequest("", "m", 0))
    assert (a.error, a.message) == (E.INVALID_REQUEST, "GroupId can't be empty.")
    assert answered(d, join("m")).error == E.NOT_COORDINATOR
    d.send(m.BeginLoad(d.partition(GID)))
    assert answered(d, join("m")).error == E.COORDINATOR_LOAD_IN_PROGRESS


def test_a_heartbeat_is_answered_only_after_its_records_are_appended():
    d = owned_driver()
    d.auto_ack = False
    rid = beat(d, join("m1", "foo"))
    assert rid not in d.answers and len(d.appends) == 1
    keys = {decode_consumer_key(r.key).version for r in d.appends[0].records}
    assert keys == {3, 4, 5, 6, 7, 8}
    d.ack(d.appends[0].token)
    a = d.answers[rid]
    assert (a.error, a.member_epoch, a.assignment) == (E.NONE, 1, {ID_FOO: frozenset(range(4))})


def test_a_heartbeat_that_changes_nothing_appends_nothing():
    d = owned_driver()
    answered(d, join("m1", "foo"))
    n = len(d.appends)
    a = answered(d, HeartbeatRequest(GID, "m1", 1, owned={ID_FOO: (0, 1, 2, 3)}))
    assert a.error == E.NONE and len(d.appends) == n


@pytest.mark.parametrize("error, answer", [(E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
                                           (E.NOT_ENOUGH_REPLICAS,
                                            E.COORDINATOR_NOT_AVAILABLE)])
def test_a_failed_append_answers_kafkas_mapped_error(error, answer):
    d = owned_driver()
    d.auto_ack = False
    rid = beat(d, join("m1"))
    d.ack(d.appends[0].token, error)
    assert d.answers[rid].error == answer


def test_records_of_a_failed_append_are_written_again_by_the_next_one():
    """A join whose append fails, then the same member's rejoin: its records must reach the
    log (a moved coordinator would otherwise load the group without it)."""
    d = owned_driver()
    d.auto_ack = False
    first = beat(d, join("m1"))
    d.ack(d.appends[0].token, E.NOT_ENOUGH_REPLICAS, written=False)
    assert d.answers[first].error == E.COORDINATOR_NOT_AVAILABLE
    again = beat(d, join("m1"))                    # the client retries its join
    d.ack(d.appends[-1].token)
    assert d.answers[again].error == E.NONE
    p = d.partition(GID)
    d.unload(p)
    d.load(p)
    assert set(d.coord.group(GID).consumer.members) == {"m1"}


def test_an_unloaded_partition_answers_a_waiting_heartbeat_not_coordinator():
    d = owned_driver()
    d.auto_ack = False
    rid = beat(d, join("m1"))
    d.unload(d.partition(GID))
    assert d.answers[rid].error == E.NOT_COORDINATOR


def test_v0_gets_a_member_id_from_the_coordinator_v1_must_bring_its_own():
    d = owned_driver()
    a = answered(d, join(""), version=0)
    assert a.error == E.NONE and len(a.member_id) == 36
    a = answered(d, join(""), version=1)
    assert (a.error, a.message) == (E.INVALID_REQUEST, "MemberId can't be empty.")


def test_an_unknown_group_is_not_found_unless_the_member_joins():
    d = owned_driver()
    a = answered(d, HeartbeatRequest(GID, "m1", 3))
    assert (a.error, a.message) == (E.GROUP_ID_NOT_FOUND, "Consumer group g not found.")
    assert d.coord.group(GID) is None


# -- classic and consumer groups -------------------------------------------------------------
def test_a_non_empty_classic_group_is_not_a_consumer_group():
    d = owned_driver()
    d.stable_group(GID, 1)
    a = answered(d, join("m1"))
    assert (a.error, a.message) == (E.GROUP_ID_NOT_FOUND, "Group g is not a consumer group.")
    assert d.coord.group(GID).consumer is None


def test_an_empty_classic_group_becomes_a_consumer_group_with_its_offsets():
    d = owned_driver()
    ids, gen = d.stable_group(GID, 1)
    d.commit(GID, {("foo", 0): 7}, ids[0], gen)
    d.leave(GID, ids[0])
    assert d.coord.group(GID).is_(S.EMPTY) and d.coord.group(GID).generation_id > 0
    n = len(d.appends)
    assert answered(d, join("m1")).error == E.NONE
    records = [r for a in d.appends[n:] for r in a.records]
    assert R.group_metadata_record(GID, None) in records       # the classic record's tombstone
    assert d.committed(GID, ("foo", 0)) == 7
    assert d.coord.group(GID).generation_id == 0


def test_a_classic_join_is_refused_by_a_consumer_group_with_members():
    d = owned_driver()
    answered(d, join("m1"))
    res = d.answer(d.join(GID))
    assert res.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert set(d.coord.group(GID).consumer.members) == {"m1"}


def test_an_empty_consumer_group_becomes_classic_its_records_tombstoned():
    d = owned_driver()
    answered(d, join("m1"))
    answered(d, HeartbeatRequest(GID, "m1", -1))                # leaves
    written = dict(d.coord.group(GID).consumer_records)
    n = len(d.appends)
    ids, _ = d.stable_group(GID, 1)
    assert d.coord.group(GID).consumer is None and ids
    tombstones = {r.key for a in d.appends[n:] for r in a.records if r.value is None}
    assert set(written) <= tombstones


# -- offsets --------------------------------------------------------------------------------------
@pytest.mark.parametrize("member_id, epoch, version, expected", [
    ("m1", 1, 9, E.NONE),
    ("m1", 0, 9, E.STALE_MEMBER_EPOCH),
    ("m1", 2, 9, E.STALE_MEMBER_EPOCH),
    ("m1", 1, 8, E.UNSUPPORTED_VERSION),
    ("nobody", 1, 9, E.UNKNOWN_MEMBER_ID),
    ("", -1, 9, E.UNKNOWN_MEMBER_ID),            # the group has a member: no simple commits
])
def test_commits_to_a_consumer_group_carry_the_member_epoch(member_id, epoch, version, expected):
    d = owned_driver()
    answered(d, join("m1"))
    rid = d.request(m.OffsetCommit, group_id=GID, generation_id=epoch, member_id=member_id,
                    offsets=(m.CommitOffset("foo", 0, 5),), version=version)
    assert d.answers[rid].partitions[0].error == expected


def test_an_empty_consumer_group_takes_simple_commits():
    d = owned_driver()
    answered(d, join("m1"))
    answered(d, HeartbeatRequest(GID, "m1", -1))
    rid = d.request(m.OffsetCommit, group_id=GID, offsets=(m.CommitOffset("foo", 0, 5),))
    assert d.answers[rid].partitions[0].error == E.NONE


@pytest.mark.parametrize("member_id, epoch, expected", [
    (None, -1, E.NONE), ("m1", 1, E.NONE), ("m1", 0, E.STALE_MEMBER_EPOCH),
    ("nobody", 1, E.UNKNOWN_MEMBER_ID)])
def test_offset_fetch_checks_the_member_when_it_names_one(member_id, epoch, expected):
    d = owned_driver()
    answered(d, join("m1"))
    res = d.call(m.OffsetFetch, group_id=GID, partitions=(("foo", 0),), member_id=member_id,
                 member_epoch=epoch)
    assert res.error == expected


def test_a_transactional_commit_needs_no_v9_but_the_member_epoch():
    d = owned_driver()
    answered(d, join("m1"))
    ok = d.txn_commit(GID, {("foo", 0): 3}, member_id="m1", generation=1)
    stale = d.txn_commit(GID, {("foo", 1): 3}, member_id="m1", generation=0)
    assert d.answers[ok].partitions[0].error == E.NONE
    assert d.answers[stale].partitions[0].error == E.STALE_MEMBER_EPOCH


# -- administration -------------------------------------------------------------------------------
def test_list_groups_shows_both_kinds_and_filters_by_type_and_state():
    d = owned_driver()
    d.own("c")
    answered(d, join("m1"))
    d.stable_group("c", 1)
    every = d.call(m.ListGroups).groups
    assert {(g.group_id, g.protocol_type, g.state, g.group_type) for g in every} == {
        (GID, "consumer", "Stable", "consumer"), ("c", "consumer", "Stable", "classic")}
    assert [g.group_id for g in d.call(m.ListGroups, types=frozenset({"Consumer"})).groups] \
        == [GID]
    assert [g.group_id for g in d.call(m.ListGroups, types=frozenset({"classic"}),
                                       states=frozenset({"stable"})).groups] == ["c"]


def test_describe_groups_sees_a_consumer_group_as_dead_and_consumer_describe_sees_it():
    d = owned_driver()
    d.own("nope")
    answered(d, join("m1", "foo", "bar"))
    assert d.call(m.DescribeGroups, group_ids=(GID,)).groups[0].state == "Dead"
    g = d.call(m.ConsumerGroupDescribe, group_ids=(GID, "nope")).groups
    assert (g[0].error, g[0].state, g[0].group_epoch, g[0].assignment_epoch, g[0].assignor) \
        == (E.NONE, "Stable", 1, 1, "uniform")
    (x,) = g[0].members
    assert (x.member_id, x.member_epoch, x.subscribed_topic_names) == ("m1", 1, ("bar", "foo"))
    assert x.assignment == x.target_assignment == {ID_FOO: frozenset(range(4)),
                                                   ID_BAR: frozenset(range(2))}
    assert (g[1].error, g[1].message) == (E.GROUP_ID_NOT_FOUND, "Group nope not found.")


def test_delete_groups_refuses_a_consumer_group_with_members_and_deletes_an_empty_one():
    d = owned_driver()
    answered(d, join("m1"))
    assert d.call(m.DeleteGroups, group_ids=(GID,)).groups[0].error == E.NON_EMPTY_GROUP
    answered(d, HeartbeatRequest(GID, "m1", -1))
    written = set(d.coord.group(GID).consumer_records)
    n = len(d.appends)
    assert d.call(m.DeleteGroups, group_ids=(GID,)).groups[0].error == E.NONE
    assert d.coord.group(GID) is None
    assert written <= {r.key for a in d.appends[n:] for r in a.records if r.value is None}


def test_offset_delete_refuses_subscribed_topics_of_a_consumer_group():
    d = owned_driver()
    answered(d, join("m1", "foo"))
    d.commit(GID, {("foo", 0): 1, ("bar", 0): 1}, "m1", 1)
    rid = d.request(m.OffsetCommit, group_id=GID, generation_id=1, member_id="m1",
                    offsets=(m.CommitOffset("foo", 0, 1), m.CommitOffset("bar", 0, 1)))
    assert {x.error for x in d.answers[rid].partitions} == {E.NONE}
    res = d.call(m.OffsetDelete, group_id=GID, partitions=(("foo", 0), ("bar", 0)))
    assert set(res.partitions) == {("foo", 0, E.GROUP_SUBSCRIBED_TO_TOPIC), ("bar", 0, E.NONE)}


def test_an_empty_consumer_group_stays_when_its_last_offset_is_deleted():
    """Kafka 4's OffsetMetadataManager.deleteOffsets leaves the group (only the periodic
    cleanup deletes it), unlike Kafka 3.8's classic handleDeleteOffsets."""
    d = owned_driver()
    answered(d, join("m1", "foo"))
    d.commit(GID, {("foo", 0): 1}, "m1", 1)
    answered(d, HeartbeatRequest(GID, "m1", -1))
    res = d.call(m.OffsetDelete, group_id=GID, partitions=(("foo", 0),))
    assert set(res.partitions) == {("foo", 0, E.NONE)}
    g = d.call(m.ConsumerGroupDescribe, group_ids=(GID,)).groups[0]
    assert (g.error, g.state) == (E.NONE, "Empty")
    assert d.call(m.DeleteGroups, group_ids=(GID,)).groups[0].error == E.NONE


# -- timers, loading ------------------------------------------------------------------------------
def test_a_silent_member_is_fenced_at_its_session_timeout_and_that_is_written():
    d = owned_driver(group_consumer_min_session_timeout_ms=6000,
                     group_consumer_session_timeout_ms=6000)
    answered(d, join("m1"))
    answered(d, join("m2"))
    assert d.coord.next_deadline_ms() <= 6000
    n = len(d.appends)
    d.advance(3000)
    answered(d, HeartbeatRequest(GID, "m1", d.coord.group(GID).consumer.members["m1"]
                                 .assignment.member_epoch))
    d.advance(3500)
    assert set(d.coord.group(GID).consumer.members) == {"m1"}
    gone = {decode_consumer_key(r.key).member for a in d.appends[n:] for r in a.records
            if r.value is None}
    assert gone == {"m2"}


def test_the_group_comes_back_from_its_records_on_another_coordinator():
    d = owned_driver()
    a1 = answered(d, join("m1", "foo", "bar"))
    a2 = answered(d, join("m2", "foo"))
    before = d.coord.group(GID).consumer
    p = d.partition(GID)
    d.unload(p)
    assert d.coord.group(GID) is None
    d.load(p)
    after = d.coord.group(GID).consumer
    assert group_records(after) == group_records(before)
    assert after.state == before.state and set(after.session_deadline) == {"m1", "m2"}
    m2 = after.members["m2"].assignment.member_epoch
    assert answered(d, HeartbeatRequest(GID, "m2", m2, owned={})).error == E.NONE
    assert a1.error == a2.error == E.NONE


def test_an_undecodable_consumer_record_loses_only_its_group():
    d = owned_driver()
    p = d.partition(GID)
    other = next(g for g in (f"o{i}" for i in range(1000)) if d.partition(g) == p)
    answered(d, join("m1"))
    answered(d, join("m1", group=other))
    d.logs[p].append(R.OffsetsRecord(encode_consumer_key(ConsumerKey(3, GID)), b"\x00\x07junk"))
    d.unload(p)
    d.load(p)
    assert d.coord.group(GID) is None
    assert set(d.coord.group(other).consumer.members) == {"m1"}


# -- the records --------------------------------------------------------------------------------
def test_the_keys_are_kafkas_bytes():
    assert encode_consumer_key(ConsumerKey(3, "g")) == b"\x00\x03\x00\x01g"
    assert encode_consumer_key(ConsumerKey(8, "g", "m")) == b"\x00\x08\x00\x01g\x00\x01m"
    assert decode_consumer_key(b"\x00\x05\x00\x01g\x00\x02ab") == ConsumerKey(5, "g", "ab")
    with pytest.raises(R.RecordFormatError):
        decode_consumer_key(b"\x00\x03\x00\x01g!")


def test_a_current_assignment_value_is_kafkas_bytes():
    g = ConsumerGroup(GID)
    g.heartbeat(join("m1", "bar"), TOPICS, 0)
    records = group_records(g)
    value = records[encode_consumer_key(ConsumerKey(8, GID, "m1"))]
    # version 0; epoch 1; previous 0; STABLE; one topic: uuid, 2 partitions (0, 1), no tags;
    # nothing pending; no tags
    assert value == (b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00" + b"\x00"
                     + b"\x02" + bytes(15) + b"\x02" + b"\x03" + b"\x00\x00\x00\x00"
                     + b"\x00\x00\x00\x01" + b"\x00" + b"\x01" + b"\x00")


@st.composite
def groups(draw):
    g = ConsumerGroup(GID)
    now = 0
    live: dict[str, int] = {}
    for _ in range(draw(st.integers(1, 12))):
        now += draw(st.integers(0, 4000))
        mid = draw(st.sampled_from(["a", "b", "c", "d"]))
        if mid not in live:
            topics = draw(st.lists(st.sampled_from(["foo", "bar"]), min_size=1, unique=True))
            regex = draw(st.sampled_from([None, "b.*", "f.*|bar"]))
            a = g.heartbeat(HeartbeatRequest(GID, mid, 0, rebalance_timeout_ms=5000,
                                             subscribed_topic_names=tuple(topics),
                                             subscribed_topic_regex=regex, owned={}),
                            TOPICS, now)
        elif draw(st.booleans()):
            a = g.heartbeat(HeartbeatRequest(GID, mid, -1), TOPICS, now)
        else:
            owned = {t: tuple(ps) for t, ps in g.members[mid].assignment.assigned.items()}
            a = g.heartbeat(HeartbeatRequest(GID, mid, live[mid], owned=owned), TOPICS, now)
        if a.error == E.NONE and a.member_epoch >= 0:
            live[mid] = a.member_epoch
        else:
            live.pop(mid, None)
    return g


@settings(max_examples=150, deadline=None)
@given(groups())
def test_any_group_replayed_from_its_records_is_the_group_that_wrote_them(g):
    records = [R.OffsetsRecord(k, v) for k, v in group_records(g).items()]
    back = restore(GID, records, g.config, 0)
    assert back is not None
    assert group_records(back) == group_records(g)
    assert (back.group_epoch, back.target_epoch, back.state) == (g.group_epoch, g.target_epoch,
                                                                  g.state)
    assert back.members == g.members and back.target == g.target
    assert back.subscription == g.subscription
