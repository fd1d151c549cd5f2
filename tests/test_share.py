"""The pure share room (share/): share groups' membership and the SimpleAssignor, one
share-partition's records (acquisition, acknowledgement, locks, delivery counts, the SPSO)
and share sessions — as tables, and as hypothesis properties against a naive reference:
a record is never held by two members, never delivered past the limit, the SPSO is the
first incomplete offset, and what is persisted restores the same states."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from replicas.errors import ErrorCode as E
from share.group import ShareGroupConfig, ShareGroups, ShareHeartbeat, _share_out, assign
from share.partition import (AckType, RecordState, ShareConfig, SharePartition, Span,
                             StateBatch)
from share.sessions import ShareSessionCache

pytestmark = pytest.mark.unit

TOPICS = {"foo": ("ID-foo", 3), "bar": ("ID-bar", 2)}
S = RecordState


def beat(groups, member, epoch, topics=("foo",), now=0, group="g", **kw):
    return groups.heartbeat(ShareHeartbeat(group, member, epoch, subscribed_topic_names=topics,
                                           **kw), TOPICS, now, False)


# -- membership ---------------------------------------------------------------------------------
@pytest.mark.parametrize("request_, message", [
    (ShareHeartbeat("", "m", 0, subscribed_topic_names=("foo",)), "GroupId can't be empty."),
    (ShareHeartbeat("g", "", 0, subscribed_topic_names=("foo",)), "MemberId can't be empty."),
    (ShareHeartbeat("g", "m", 0, rack_id="", subscribed_topic_names=("foo",)),
     "RackId can't be empty."),
    (ShareHeartbeat("g", "m", -2, subscribed_topic_names=("foo",)), "MemberEpoch is invalid."),
    (ShareHeartbeat("g", "m", 0), "SubscribedTopicNames must be set in first request."),
    (ShareHeartbeat("g", "m", 0, subscribed_topic_names=()),
     "SubscribedTopicNames must be set in first request."),
])
def test_the_requests_own_checks(request_, message):
    a = ShareGroups(ShareGroupConfig()).heartbeat(request_, TOPICS, 0, False)
    assert (a.error, a.message) == (E.INVALID_REQUEST, message)


def test_a_group_of_another_kind_or_an_unknown_group_is_not_found():
    groups = ShareGroups(ShareGroupConfig())
    a = groups.heartbeat(ShareHeartbeat("g", "m", 0, subscribed_topic_names=("foo",)),
                         TOPICS, 0, True)
    assert (a.error, a.message) == (E.GROUP_ID_NOT_FOUND, "Group g is not a share group.")
    a = beat(groups, "m", 3)
    assert (a.error, a.message) == (E.GROUP_ID_NOT_FOUND, "Share group g not found.")


def test_join_assign_leave_and_epochs():
    groups = ShareGroups(ShareGroupConfig(heartbeat_interval_ms=777))
    a = beat(groups, "m1", 0)
    assert a.error == E.NONE and a.heartbeat_interval_ms == 777
    assert a.assignment == {"ID-foo": (0, 1, 2)} and a.member_epoch > 0
    first = a.member_epoch
    quiet = beat(groups, "m1", first, topics=None)
    assert quiet.assignment is None and quiet.member_epoch == first   # nothing changed
    b = beat(groups, "m2", 0)
    assert b.assignment == {"ID-foo": (2,)}
    moved = beat(groups, "m1", first, topics=None)
    assert moved.assignment == {"ID-foo": (0, 1)} and moved.member_epoch == b.member_epoch
    assert beat(groups, "m1", 99).error == E.FENCED_MEMBER_EPOCH
    assert beat(groups, "m1", first, topics=None).error == E.NONE      # the previous epoch
    assert beat(groups, "m1", 0).error == E.FENCED_MEMBER_EPOCH         # rejoin while known
    assert beat(groups, "zz", 5).error == E.UNKNOWN_MEMBER_ID
    left = beat(groups, "m2", -1, topics=None)
    assert (left.error, left.member_epoch) == (E.NONE, -1)
    assert beat(groups, "m1", moved.member_epoch, topics=None).assignment == \
        {"ID-foo": (0, 1, 2)}
    assert groups.describe("g").state == "Stable"
    assert groups.delete("g") == E.NON_EMPTY_GROUP


def test_sessions_expire_and_the_group_size_is_bounded():
    groups = ShareGroups(ShareGroupConfig(session_timeout_ms=100, max_size=2))
    beat(groups, "m1", 0, now=0)
    beat(groups, "m2", 0, now=50)
    a = beat(groups, "m3", 0, now=60)
    assert (a.error, a.message) == (E.GROUP_MAX_SIZE_REACHED, "The share group has reached "
                                    "its maximum capacity of 2 members.")
    assert groups.next_deadline_ms() == 100
    assert groups.expire(120, TOPICS) == {"g": ["m1"]}
    assert beat(groups, "m3", 0, now=130).error == E.NONE
    assert groups.expire(1000, TOPICS) == {"g": ["m2", "m3"]}
    assert groups.describe("g").state == "Empty" and groups.delete("g") == E.NONE
    assert groups.describe("g").error == E.GROUP_ID_NOT_FOUND


@pytest.mark.parametrize("members, partitions, counts", [
    (3, 10, [4, 3, 3]), (2, 3, [2, 1]), (3, 2, [2, 1, 1]), (5, 2, [2, 1, 1, 1, 1]),
    (6, 4, [2, 1, 1, 2, 1, 1]), (1, 1, [1]), (4, 4, [1, 1, 1, 1]), (2, 0, [0, 0]),
])
def test_the_simple_assignors_counts_are_kafkas(members, partitions, counts):
    got = _share_out([f"m{i}" for i in range(members)], list(range(partitions)))
    assert [len(got[f"m{i}"]) for i in range(members)] == counts


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12), st.integers(1, 12))
def test_every_partition_is_read_and_no_member_reads_one_twice(m, p):
    got = _share_out([f"m{i:02d}" for i in range(m)], list(range(p)))
    readers = {q: sum(q in ps for ps in got.values()) for q in range(p)}
    sharing = -(-m // p)
    assert all(n == sharing for n in readers.values())
    assert all(len(ps) == len(set(ps)) and ps for ps in got.values())


def test_heterogeneous_subscriptions_deal_each_topic_among_its_readers():
    from share.group import ShareMember
    members = {"a": ShareMember("a", subscribed_topic_names=("foo",)),
               "b": ShareMember("b", subscribed_topic_names=("foo", "bar"))}
    assert assign(members, TOPICS) == {"a": {"ID-foo": (0, 1)},
                                       "b": {"ID-bar": (0, 1), "ID-foo": (2,)}}


# -- one share-partition -------------------------------------------------------------------------
CFG = ShareConfig(lock_duration_ms=1000, delivery_limit=3, max_in_flight=10)


def spans(first, last, control=()):
    return [Span(o, o, o in control) for o in range(first, last + 1)]


def test_initial_offsets_follow_share_auto_offset_reset():
    assert SharePartition.initial("latest", 5, 40, CFG).start_offset == 40
    assert SharePartition.initial("earliest", 5, 40, CFG).start_offset == 5


def test_acquire_acknowledge_and_the_spso():
    p = SharePartition(0, CFG)
    got = p.acquire("m", spans(0, 4), 3, now_ms=0)
    assert [(g.first, g.last, g.delivery_count) for g in got] == [(0, 2, 1)]
    assert p.acquire("n", spans(0, 4), 10, 0)[0].first == 3       # the rest, to another
    assert p.acknowledge("m", [(0, 1, (AckType.ACCEPT,))], 0) == E.NONE
    assert p.start_offset == 2
    assert p.acknowledge("m", [(3, 3, (AckType.ACCEPT,))], 0) == E.INVALID_RECORD_STATE
    assert p.state_of(3) == (S.ACQUIRED, 1)                     # nothing changed
    assert p.acknowledge("m", [(2, 2, (AckType.RELEASE,))], 0) == E.NONE
    assert p.next_fetch_offset() == 2
    again = p.acquire("n", spans(0, 4), 10, 0)
    assert [(g.first, g.last, g.delivery_count) for g in again] == [(2, 2, 2)]
    assert p.acknowledge("n", [(2, 4, (AckType.REJECT, AckType.ACCEPT, AckType.GAP))], 0) \
        == E.NONE
    assert p.start_offset == p.end_offset == 5 and p.records == {}


@pytest.mark.parametrize("batches", [
    [(3, 2, (1,))], [(0, 3, (1,)), (2, 4, (1,))], [(0, 2, (1, 1))], [(0, 0, (5,))],
    [(0, 0, ())],
])
def test_malformed_acknowledgements_are_invalid_requests(batches):
    p = SharePartition(0, CFG)
    p.acquire("m", spans(0, 5), 10, 0)
    assert p.acknowledge("m", batches, 0) == E.INVALID_REQUEST
    assert all(p.state_of(o)[0] == S.ACQUIRED for o in range(6))


def test_locks_expire_and_the_delivery_limit_archives():
    p = SharePartition(0, CFG)
    for attempt in range(1, 4):
        got = p.acquire("m", spans(0, 0), 1, now_ms=attempt * 10_000)
        assert [(g.first, g.delivery_count) for g in got] == [(0, attempt)]
        assert p.next_deadline_ms() == attempt * 10_000 + 1000
        assert p.expire_locks(attempt * 10_000 + 999) == 0
        assert p.expire_locks(attempt * 10_000 + 1000) == 1
    assert p.start_offset == 1 and p.acquire("m", spans(0, 0), 1, 99_999) == []


def test_a_closed_session_gives_back_its_delivery():
    p = SharePartition(0, CFG)
    p.acquire("m", spans(0, 1), 2, 0)
    assert p.release_member("m", undelivered=True) == 2
    assert p.state_of(0) == (S.AVAILABLE, 0)
    p.acquire("m", spans(0, 1), 2, 0)
    p.release_member("m")
    assert p.state_of(1) == (S.AVAILABLE, 1)


def test_control_batches_and_compacted_gaps_are_never_delivered():
    p = SharePartition(0, CFG)
    got = p.acquire("m", [Span(0, 1), Span(2, 2, control=True), Span(5, 6)], 10, 0)
    assert [(g.first, g.last) for g in got] == [(0, 1), (5, 6)]
    assert p.state_of(2)[0] == S.ARCHIVED and p.state_of(3)[0] == S.ARCHIVED


def test_the_window_holds_at_most_max_in_flight_offsets():
    p = SharePartition(0, CFG)
    assert len(p.acquire("m", spans(0, 30), 100, 0)[0:]) == 1
    assert p.end_offset == 10 and not p.can_acquire(high_watermark=31)
    p.acknowledge("m", [(0, 4, (AckType.ACCEPT,))], 0)
    assert p.can_acquire(31) and p.acquire("m", spans(0, 30), 100, 0)[0].first == 10


def test_a_log_start_past_the_spso_drops_what_is_below():
    p = SharePartition(0, CFG)
    p.acquire("m", spans(0, 5), 10, 0)
    p.maybe_move_start(4)
    assert p.start_offset == 4 and min(p.records) == 4


def test_restore_rebuilds_the_window_with_locks_given_back():
    p = SharePartition(0, CFG)
    p.acquire("m", spans(0, 6), 10, 0)
    p.acknowledge("m", [(1, 1, (AckType.ACCEPT,)), (3, 4, (AckType.REJECT,))], 0)
    saved = p.state_batches()
    assert saved == [StateBatch(0, 0, 0, 1), StateBatch(1, 1, 2, 1), StateBatch(2, 2, 0, 1),
                     StateBatch(3, 4, 4, 1), StateBatch(5, 6, 0, 1)]
    q = SharePartition.restore(p.start_offset, saved, CFG)
    assert [q.state_of(o) for o in range(7)] == [(S.AVAILABLE, 1), (S.ACKNOWLEDGED, 1),
                                                 (S.AVAILABLE, 1), (S.ARCHIVED, 1),
                                                 (S.ARCHIVED, 1), (S.AVAILABLE, 1),
                                                 (S.AVAILABLE, 1)]


# -- a property against a naive reference ----------------------------------------------------------
MEMBERS = ("a", "b", "c")
ops = st.lists(st.one_of(
    st.tuples(st.just("acquire"), st.sampled_from(MEMBERS), st.integers(1, 6)),
    st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.integers(0, 19),
              st.integers(0, 3), st.sampled_from([0, 1, 2, 3, 4])),
    st.tuples(st.just("expire"), st.integers(0, 3000)),
    st.tuples(st.just("close"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("produce"), st.integers(1, 5)),
), max_size=60)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_a_share_partition_against_a_naive_model(script):
    cfg = ShareConfig(lock_duration_ms=1000, delivery_limit=3, max_in_flight=8)
    p = SharePartition(0, cfg)
    hw, now = 4, 0
    model: dict[int, list] = {}          # offset → [state, count, member]
    for op in script:
        now += 100
        if op[0] == "produce":
            hw += op[1]
        elif op[0] == "acquire":
            _, member, n = op
            got = p.acquire(member, spans(p.next_fetch_offset(), hw - 1), n, now)
            for g in got:
                for o in range(g.first, g.last + 1):
                    entry = model.setdefault(o, [S.AVAILABLE, 0, None])
                    assert entry[0] == S.AVAILABLE, "acquired a record that was not available"
                    entry[:] = [S.ACQUIRED, entry[1] + 1, member]
                    assert entry[1] == g.delivery_count <= cfg.delivery_limit
        elif op[0] == "ack":
            _, member, first, length, kind = op
            last = first + length
            mine = all(o < p.start_offset or (model.get(o, [None])[0] == S.ACQUIRED
                                              and model[o][2] == member)
                       for o in range(first, last + 1))
            code = p.acknowledge(member, [(first, last, (kind,))], now)
            assert code == (E.NONE if mine else E.INVALID_RECORD_STATE)
            if mine:
                for o in range(max(first, 0), last + 1):
                    if o not in model or model[o][0] != S.ACQUIRED:
                        continue
                    if kind == AckType.ACCEPT:
                        model[o][0] = S.ACKNOWLEDGED
                    elif kind == AckType.RELEASE:
                        model[o][0] = S.ARCHIVED if model[o][1] >= 3 else S.AVAILABLE
                    elif kind != AckType.RENEW:
                        model[o][0] = S.ARCHIVED
                    if kind != AckType.RENEW:
                        model[o][2] = None
        elif op[0] == "expire":
            now += op[1]
            p.expire_locks(now)
            for o, e in model.items():
                if e[0] == S.ACQUIRED and p.state_of(o)[0] != S.ACQUIRED:
                    e[:] = [S.ARCHIVED if e[1] >= 3 else S.AVAILABLE, e[1], None]
        else:
            p.release_member(op[1], undelivered=True)
            for e in model.values():
                if e[0] == S.ACQUIRED and e[2] == op[1]:
                    e[:] = [S.AVAILABLE, e[1] - 1, None]
        # the invariants
        incomplete = [o for o, e in model.items() if e[0] not in (S.ACKNOWLEDGED, S.ARCHIVED)]
        assert p.start_offset <= (min(incomplete) if incomplete else p.end_offset)
        assert p.end_offset - p.start_offset <= cfg.max_in_flight
        for o in range(p.start_offset, p.end_offset):
            state, count = p.state_of(o)
            if o in model:
                assert (state, count) == tuple(model[o][:2])
        restored = SharePartition.restore(p.start_offset, p.state_batches(), cfg)
        for o in range(p.start_offset, p.end_offset):
            state, count = p.state_of(o)
            assert restored.state_of(o) == (S.AVAILABLE if state == S.ACQUIRED else state,
                                            count)


# -- share sessions -------------------------------------------------------------------------------
def test_share_session_epochs():
    c = ShareSessionCache(max_sessions=1)
    assert c.fetch("g", "m", 1, [], [], False).error == E.SHARE_SESSION_NOT_FOUND
    assert c.fetch("g", "m", 0, [("t", 0)], [], True).error == E.INVALID_REQUEST
    opened = c.fetch("g", "m", 0, [("t", 0)], [], False)
    assert opened.full and opened.session.partitions == {("t", 0)}
    assert c.fetch("g", "x", 0, [], [], False).error == E.SHARE_SESSION_LIMIT_REACHED
    assert c.fetch("g", "m", 2, [], [], False).error == E.INVALID_SHARE_SESSION_EPOCH
    more = c.fetch("g", "m", 1, [("t", 1)], [("t", 0)], True)
    assert more.error == E.NONE and more.session.partitions == {("t", 1)}
    assert c.acknowledge("g", "m", 0).error == E.INVALID_SHARE_SESSION_EPOCH
    assert c.acknowledge("g", "m", 2).error == E.NONE
    assert c.fetch("g", "m", -1, [], [("t", 1)], False).error == E.INVALID_REQUEST
    assert c.fetch("g", "m", -1, [], [], True).closing
    again = c.fetch("g", "m", 0, [("t", 2)], [], False)
    assert again.full and again.session.partitions == {("t", 2)}


# -- the native consumer's acknowledgement batches (rayka/client/share_consumer.py) ------------
@pytest.mark.parametrize("acks, batches", [
    ({}, []),
    ({5: 1}, [(5, 5, (1,))]),
    ({5: 1, 6: 1, 7: 1}, [(5, 7, (1,))]),
    ({5: 1, 6: 2, 7: 1}, [(5, 7, (1, 2, 1))]),
    ({5: 1, 7: 1, 8: 0}, [(5, 5, (1,)), (7, 8, (1, 0))]),
])
def test_acknowledgements_become_kafkas_batches(acks, batches):
    from rayka.client.share_consumer import ack_batches
    assert ack_batches(acks) == batches
    assert SharePartition.check_batches(batches) is None
