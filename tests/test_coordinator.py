"""The group coordinator against Kafka's rules (Kafka's GroupCoordinator.scala).

Table-driven: every request × every group state → Kafka's answer; the group-status checks;
the member checks. Then the scenarios: a full join/sync with parked calls, KIP-394, static
members, session and rebalance timeouts, the initial delay, LeaveGroup, commits, OffsetFetch,
admin APIs, load/unload, failed appends, offset expiry. No Ray, no sockets: a fake clock.
"""

import pytest

from coordinator import messages as m
from coordinator import records as R
from coordinator.config import GroupCoordinatorConfig
from coordinator.states import GroupState as S
from replicas.errors import ErrorCode as E
from tests.coordinator_sim import PROTOCOLS, Driver, subscription

pytestmark = pytest.mark.unit

GID = "g"
TP = ("t", 0)


def cfg(**kw) -> GroupCoordinatorConfig:
    return GroupCoordinatorConfig(**kw)


# ---------------------------------------------------------------------------------------------
# a group in each state, with a follower F that is a member not waiting for anything
def _stable(d):
    ids, gen = d.stable_group(GID, 2)
    return ids[1], gen


def in_state(state):
    d = Driver()
    if state == "unknown":
        d.own(GID)
        return d, "nobody", 1
    if state is S.COMPLETING_REBALANCE:
        d.own(GID)
        joins = [d.join_new(GID) for _ in range(2)]
        while not all(d.answer(rid) for rid, _ in joins):
            d.advance(3000)
        res = d.answer(joins[1][0])
        return d, res.member_id, res.generation_id
    follower, gen = _stable(d)
    if state is S.EMPTY:
        leader = d.coord.group(GID).leader_id
        d.leave(GID, leader, follower)
        gen = d.coord.group(GID).generation_id
    elif state is S.PREPARING_REBALANCE:
        d.join(GID, version=3)  # a new member: parked, the group rebalances
    elif state is S.DEAD:
        d.coord.group(GID).transition_to(S.DEAD, d.clock.now)  # Kafka's window before removal
    assert d.coord.group(GID).is_(state)
    return d, follower, gen


STATES = ["unknown", S.EMPTY, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE, S.DEAD]
PARKED = "parked"


def _err(res):
    if isinstance(res, m.OffsetCommitResult):
        return res.partitions[0].error
    if isinstance(res, m.LeaveGroupResult):
        return res.error if res.error else res.members[0].error
    if isinstance(res, (m.DeleteGroupsResult,)):
        return res.groups[0].error
    if isinstance(res, m.DescribeGroupsResult):
        return res.groups[0].state
    return res.error


REQUESTS = {  # (driver, group id, follower, generation) → request id
    "heartbeat": lambda d, gid, f, g: d.request(m.Heartbeat, group_id=gid, generation_id=g, member_id=f),
    "sync": lambda d, gid, f, g: d.sync(gid, f, g),
    "commit": lambda d, gid, f, g: d.commit(gid, {TP: 5}, f, g),
    "simple commit": lambda d, gid, f, g: d.commit(gid, {TP: 5}),
    "fetch": lambda d, gid, f, g: d.request(m.OffsetFetch, group_id=gid, partitions=(TP,)),
    "leave": lambda d, gid, f, g: d.request(m.LeaveGroup, group_id=gid, members=(m.LeaveMember(f),)),
    "rejoin": lambda d, gid, f, g: d.join(gid, f),
    "new join": lambda d, gid, f, g: d.join(gid, version=3),
    "new join v5": lambda d, gid, f, g: d.join(gid, version=5),
    "delete": lambda d, gid, f, g: d.request(m.DeleteGroups, group_ids=(gid,)),
    "describe": lambda d, gid, f, g: d.request(m.DescribeGroups, group_ids=(gid,)),
}
U, RIP, CNA = E.UNKNOWN_MEMBER_ID, E.REBALANCE_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE
#            unknown               Empty    Preparing   Completing   Stable   Dead
TABLE = {
    "heartbeat": [U, U, RIP, 0, 0, CNA],
    "sync": [U, U, RIP, PARKED, 0, CNA],
    "commit": [E.ILLEGAL_GENERATION, U, 0, RIP, 0, CNA],
    "simple commit": [0, 0, U, U, U, CNA],
    "fetch": [0, 0, 0, 0, 0, 0],
    "leave": [U, U, 0, 0, 0, CNA],
    "rejoin": [U, U, PARKED, 0, 0, CNA],
    "new join": [PARKED, PARKED, PARKED, PARKED, PARKED, CNA],
    "new join v5": [E.MEMBER_ID_REQUIRED] * 5 + [CNA],
    "delete": [E.GROUP_ID_NOT_FOUND, 0, E.NON_EMPTY_GROUP, E.NON_EMPTY_GROUP, E.NON_EMPTY_GROUP,
               E.GROUP_ID_NOT_FOUND],
    "describe": ["Dead", "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"],
}


@pytest.mark.parametrize("state", STATES, ids=lambda s: getattr(s, "value", s))
@pytest.mark.parametrize("request_kind", list(TABLE))
def test_each_request_in_each_state(request_kind, state):
    d, follower, gen = in_state(state)
    rid = REQUESTS[request_kind](d, GID, follower, gen)
    expected = TABLE[request_kind][STATES.index(state)]
    if expected == PARKED:
        assert d.answer(rid) is None
    else:
        assert _err(d.answer(rid)) == expected


@pytest.mark.parametrize("state", STATES, ids=lambda s: getattr(s, "value", s))
def test_offset_fetch_answers_in_every_state(state):
    d, follower, gen = in_state(state)
    res = d.fetch(GID, (TP, ("t", 9)))
    assert res.error == E.NONE
    assert [(p.offset, p.error) for p in res.partitions] == [(-1, 0), (-1, 0)]
    if state in (S.STABLE, S.PREPARING_REBALANCE):
        d.commit(GID, {TP: 7}, follower, gen)
        assert d.committed(GID, TP) == 7


# ---------------------------------------------------------------------------------------------
# the group-status checks come first, in Kafka's order
EMPTY_ID_ANSWER = {  # the only APIs that take "" (Kafka: backward compatibility, admin views)
    "commit": E.ILLEGAL_GENERATION, "simple commit": E.NONE, "fetch": E.NONE,
    "delete": E.GROUP_ID_NOT_FOUND, "describe": "Dead"}


@pytest.mark.parametrize("request_kind", list(TABLE))
def test_an_empty_group_id_is_invalid_except_for_offsets_describe_and_delete(request_kind):
    d = Driver()
    d.own("")
    rid = REQUESTS[request_kind](d, "", "m", 1)
    assert _err(d.answer(rid)) == EMPTY_ID_ANSWER.get(request_kind, E.INVALID_GROUP_ID)


def _status_error(res, request_kind):
    if request_kind == "describe":
        return res.groups[0].error
    if request_kind == "leave":
        return res.error
    return _err(res)


@pytest.mark.parametrize("request_kind", list(TABLE))
def test_a_group_of_a_partition_not_owned_gets_not_coordinator(request_kind):
    d = Driver()  # owns nothing
    rid = REQUESTS[request_kind](d, GID, "m", 1)
    assert _status_error(d.answer(rid), request_kind) == E.NOT_COORDINATOR


LOADING_ANSWER = {"heartbeat": E.NONE, "sync": E.REBALANCE_IN_PROGRESS}


@pytest.mark.parametrize("request_kind", list(TABLE))
def test_a_loading_partition_answers_load_in_progress(request_kind):
    d = Driver()
    d.send(m.BeginLoad(d.partition(GID)))
    rid = REQUESTS[request_kind](d, GID, "m", 1)
    expected = LOADING_ANSWER.get(request_kind, E.COORDINATOR_LOAD_IN_PROGRESS)
    assert _status_error(d.answer(rid), request_kind) == expected
    assert d.call(m.ListGroups).error == E.COORDINATOR_LOAD_IN_PROGRESS


# the member checks: FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID, then ILLEGAL_GENERATION
MEMBER_REQUESTS = {
    "heartbeat": lambda d, mid, gen, inst: d.request(m.Heartbeat, group_id=GID, generation_id=gen,
                                                      member_id=mid, group_instance_id=inst),
    "sync": lambda d, mid, gen, inst: d.sync(GID, mid, gen, instance=inst),
    "commit": lambda d, mid, gen, inst: d.commit(GID, {TP: 1}, mid, gen, instance=inst),
    "leave": lambda d, mid, gen, inst: d.request(m.LeaveGroup, group_id=GID,
                                                  members=(m.LeaveMember(mid, inst),)),
}


def static_group(d, *, leader_static=False):
    """Stable gen 1: members (leader, static follower 's1')."""
    d.own(GID)
    if leader_static:
        lead = d.join(GID, instance="lead")
        fol = d.join(GID, instance="s1")
    else:
        lead, _ = d.join_new(GID)
        fol = d.join(GID, instance="s1")
    while d.answer(fol) is None:
        d.advance(3000)
    leader, follower = d.answer(lead).member_id, d.answer(fol).member_id
    d.sync(GID, leader, 1, [(leader, b"L"), (follower, b"F")])
    d.sync(GID, follower, 1)
    return leader, follower


@pytest.mark.parametrize("request_kind", list(MEMBER_REQUESTS))
@pytest.mark.parametrize("case, expected", [
    ("fenced", E.FENCED_INSTANCE_ID), ("unknown instance", E.UNKNOWN_MEMBER_ID),
    ("unknown member", E.UNKNOWN_MEMBER_ID), ("old generation", E.ILLEGAL_GENERATION),
    ("fine", E.NONE)])
def test_member_checks_in_kafkas_order(request_kind, case, expected):
    d = Driver()
    leader, follower = static_group(d)
    mid, gen, inst = {
        "fenced": (leader, 0, "s1"),              # s1 is mapped to another member: checked first
        "unknown instance": (follower, 1, "nope"),
        "unknown member": ("stranger", 0, None),
        "old generation": (follower, 0, "s1"),
        "fine": (follower, 1, "s1"),
    }[case]
    if request_kind == "leave" and case == "old generation":
        expected = E.NONE  # LeaveGroup carries no generation
    rid = MEMBER_REQUESTS[request_kind](d, mid, gen, inst)
    assert _err(d.answer(rid)) == expected


# ---------------------------------------------------------------------------------------------
def test_a_full_join_and_sync_of_two_members_with_parked_calls():
    d = Driver(auto_ack=False)
    d.own(GID)
    a_join, a = d.join_new(GID)
    b_join, b = d.join_new(GID)
    assert d.answer(a_join) is None and d.answer(b_join) is None
    assert d.coord.group(GID).is_(S.PREPARING_REBALANCE)
    d.advance(2999)
    d.advance(1)  # 3000: the initial delay re-arms, b joined meanwhile
    assert d.answer(a_join) is None
    d.advance(3000)
    ra, rb = d.answer(a_join), d.answer(b_join)
    assert (ra.error, ra.member_id, ra.generation_id, ra.protocol_type, ra.protocol_name, ra.leader) == \
        (E.NONE, a, 1, "consumer", "range", a)
    assert [x.member_id for x in ra.members] == [a, b] and ra.members[0].metadata == b"r"
    assert (rb.member_id, rb.leader, rb.members) == (b, a, ())
    assert d.coord.group(GID).is_(S.COMPLETING_REBALANCE)
    assert d.heartbeat(GID, b, 1).error == E.NONE

    b_sync = d.sync(GID, b, 1)
    effects = d.send(m.Tick())
    assert d.answer(b_sync) is None and effects == []
    a_sync = d.sync(GID, a, 1, [(a, b"for-a"), (b, b"for-b")])
    (append,) = d.appends
    assert d.answer(a_sync) is None and d.answer(b_sync) is None
    assert append.partition == d.partition(GID)
    (record,) = append.records
    assert R.decode_key(record.key) == R.GroupMetadataKey(GID)
    value = R.decode_group_metadata_value(record.value)
    assert (value.protocol_type, value.generation, value.protocol, value.leader) == \
        ("consumer", 1, "range", a)
    assert [(x.member_id, x.subscription, x.assignment, x.session_timeout, x.rebalance_timeout)
            for x in value.members] == [(a, b"r", b"for-a", 10_000, 30_000),
                                        (b, b"r", b"for-b", 10_000, 30_000)]
    assert d.coord.group(GID).is_(S.COMPLETING_REBALANCE)  # not before the append succeeded

    d.ack(append.token)
    assert d.answer(a_sync) == m.SyncGroupResult(E.NONE, "consumer", "range", b"for-a")
    assert d.answer(b_sync) == m.SyncGroupResult(E.NONE, "consumer", "range", b"for-b")
    assert d.coord.group(GID).is_(S.STABLE)
    late = d.sync(GID, b, 1)  # Stable: the stored assignment at once
    assert d.answer(late).assignment == b"for-b"


def test_the_leader_may_leave_members_out_of_its_assignment():
    d = Driver()
    ids, _ = d.stable_group(GID, 3, assign=lambda ids: [(ids[0], b"x")])
    assert [d.coord.group(GID).get(i).assignment for i in ids] == [b"x", b"", b""]


# ---------------------------------------------------------------------------------------------
def test_kip_394_two_step_join():
    d = Driver()
    d.own(GID)
    first = d.call(m.JoinGroup, group_id=GID, member_id="", session_timeout_ms=10_000,
                   rebalance_timeout_ms=30_000, protocol_type="consumer", protocols=PROTOCOLS,
                   client_id="cli", version=4)
    assert first.error == E.MEMBER_ID_REQUIRED and first.member_id.startswith("cli-")
    group = d.coord.group(GID)
    assert group.is_pending_member(first.member_id) and not group.has(first.member_id)
    rid = d.join(GID, first.member_id)
    assert d.answer(rid) is None and group.has(first.member_id) and not group.pending_members
    old = d.join(GID, version=3)  # before v4: straight in
    assert d.answer(old) is None and group.size == 2


def test_a_pending_member_expires_and_holds_the_join_phase_until_then():
    d = Driver()
    (leader, follower), _ = d.stable_group(GID, 2)
    leader_join = d.join(GID, leader)  # the leader rejoins: a rebalance
    pending = d.call(m.JoinGroup, group_id=GID, member_id="", session_timeout_ms=10_000,
                     rebalance_timeout_ms=30_000, protocol_type="consumer", protocols=PROTOCOLS, version=5)
    follower_join = d.join(GID, follower)
    assert d.answer(leader_join) is None and d.answer(follower_join) is None  # the pending one
    d.advance(9_999)
    assert d.answer(leader_join) is None
    d.advance(1)  # the pending member's session timeout: gone, the phase completes
    assert not d.coord.group(GID).pending_members
    res = d.answer(leader_join)
    assert res.error == E.NONE and res.generation_id == 2
    assert [x.member_id for x in res.members] == [leader, follower]
    assert d.leave(GID, pending.member_id).members[0].error == E.UNKNOWN_MEMBER_ID


def test_a_pending_member_rejoining_completes_the_join_at_once_and_may_leave():
    d = Driver()
    (leader, follower), _ = d.stable_group(GID, 2)
    leader_join, follower_join = d.join(GID, leader), d.join(GID, follower)
    assert d.answer(leader_join).generation_id == 2  # everyone rejoined
    leader_join, follower_join = d.join(GID, leader), d.join(GID, follower)
    assert d.answer(leader_join).generation_id == 2  # CompletingRebalance: the same answer again
    d.sync(GID, leader, 2)
    d.join(GID, leader)  # Stable → PreparingRebalance
    rid, new = d.join_new(GID)
    assert d.answer(rid) is None  # the follower has not rejoined yet
    d.join(GID, follower)
    assert d.answer(rid).member_id == new and d.answer(rid).generation_id == 3
    other = d.call(m.JoinGroup, group_id=GID, member_id="", session_timeout_ms=10_000,
                   rebalance_timeout_ms=30_000, protocol_type="consumer", protocols=PROTOCOLS)
    assert d.leave(GID, other.member_id).members[0].error == E.NONE


# ---------------------------------------------------------------------------------------------
def test_a_static_member_rejoins_stable_without_a_rebalance():
    d = Driver(auto_ack=False)
    leader, old = static_group_manual_ack(d)
    rid = d.join(GID, instance="s1", client_id="restarted")
    (append,) = d.inflight.values()
    assert d.answer(rid) is None
    new = d.coord.group(GID).current_static_member_id("s1")
    assert new.startswith("s1-") and new != old
    d.ack(append.token)
    res = d.answer(rid)
    assert (res.error, res.member_id, res.generation_id, res.leader, res.members) == \
        (E.NONE, new, 1, leader, ())
    group = d.coord.group(GID)
    assert group.is_(S.STABLE) and group.generation_id == 1 and group.get(new).assignment == b"F"
    value = R.decode_group_metadata_value(append.records[0].value)
    assert [x.member_id for x in value.members] == [leader, new]
    assert d.heartbeat(GID, old, 1, "s1").error == E.FENCED_INSTANCE_ID
    assert d.heartbeat(GID, new, 1, "s1").error == E.NONE
    assert d.answer(d.sync(GID, new, 1, instance="s1")).assignment == b"F"


def static_group_manual_ack(d):
    d.auto_ack = True
    leader, follower = static_group(d)
    d.auto_ack = False
    return leader, follower


@pytest.mark.parametrize("append_error, answer", [
    (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE), (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
    (E.REQUEST_TIMED_OUT, E.REBALANCE_IN_PROGRESS), (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR)])
def test_a_failed_static_replacement_is_reverted(append_error, answer):
    d = Driver(auto_ack=False)
    leader, old = static_group_manual_ack(d)
    rid = d.join(GID, instance="s1")
    (token,) = d.inflight
    d.ack(token, append_error)
    res = d.answer(rid)
    assert (res.error, res.member_id, res.generation_id, res.leader) == (answer, "", 1, leader)
    assert d.coord.group(GID).current_static_member_id("s1") == old
    assert d.heartbeat(GID, old, 1, "s1").error == E.NONE


def test_a_static_leader_on_join_v9_learns_it_leads_but_skips_the_assignment():
    d = Driver()
    leader, follower = static_group(d, leader_static=True)
    res = d.answer(d.join(GID, instance="lead", version=9))
    assert res.error == E.NONE and res.skip_assignment and res.leader == res.member_id != leader
    assert {x.member_id for x in res.members} == {res.member_id, follower}
    old_style = d.answer(d.join(GID, instance="lead", version=5))
    assert not old_style.skip_assignment and old_style.leader == res.member_id and old_style.members == ()


def test_a_static_member_changing_the_protocol_rebalances_and_fences_the_old_id():
    d = Driver()
    leader, old = static_group(d)
    rid = d.join(GID, instance="s1", protocols=(("roundrobin", b""), ("range", b"r")))
    assert d.answer(rid).error == E.NONE and d.coord.group(GID).is_(S.STABLE)  # range still selected
    assert d.coord.group(GID).generation_id == 1
    d2 = Driver()
    leader, old = static_group(d2)
    rid = d2.join(GID, old, instance="s1", protocols=(("range", b"new"),))
    assert d2.answer(rid) is None and d2.coord.group(GID).is_(S.PREPARING_REBALANCE)
    again = d2.join(GID, instance="s1")  # a second incarnation: the parked call is fenced
    assert d2.answer(rid) == m.JoinGroupResult(E.FENCED_INSTANCE_ID, old)
    assert d2.answer(again) is None


def test_a_static_member_that_does_not_rejoin_stays_and_a_rejoined_member_leads():
    d = Driver()
    static_leader, follower = static_group(d, leader_static=True)
    rid = d.join(GID, follower, instance="s1", protocols=(("range", b"changed"),))
    for _ in range(3):
        d.heartbeat(GID, static_leader, 1, "lead")  # alive, but does not rejoin
        d.advance(9_000)
    d.heartbeat(GID, static_leader, 1, "lead")
    d.advance(2_999)
    assert d.answer(rid) is None
    d.advance(1)  # the rebalance timeout: the static leader stays, the follower leads
    res = d.answer(rid)
    assert res.error == E.NONE and res.leader == follower and res.generation_id == 2
    assert [x.member_id for x in res.members] == [static_leader, follower]


# ---------------------------------------------------------------------------------------------
def test_session_expiry_removes_the_member_and_rebalances():
    d = Driver()
    (leader, follower), _ = d.stable_group(GID, 2)
    for _ in range(2):
        d.advance(4_000)
        assert d.heartbeat(GID, leader, 1).error == E.NONE
    d.advance(1_999)
    assert d.coord.group(GID).has(follower)
    d.advance(1)  # 10 s after the follower's SyncGroup
    assert not d.coord.group(GID).has(follower) and d.coord.group(GID).is_(S.PREPARING_REBALANCE)
    assert d.heartbeat(GID, leader, 1).error == E.REBALANCE_IN_PROGRESS
    res = d.answer(d.join(GID, leader))  # every member rejoined: completes at once
    assert res.generation_id == 2 and [x.member_id for x in res.members] == [leader]
    assert d.heartbeat(GID, follower, 1).error == E.UNKNOWN_MEMBER_ID


def test_the_rebalance_timeout_removes_members_that_did_not_rejoin():
    d = Driver()
    (leader, follower), _ = d.stable_group(GID, 2)
    rid = d.join(GID, leader)  # the leader rejoins: a rebalance
    for _ in range(7):
        d.advance(4_000)
        assert d.heartbeat(GID, follower, 1).error == E.REBALANCE_IN_PROGRESS  # alive, not rejoining
    d.advance(1_999)
    assert d.answer(rid) is None
    d.advance(1)  # 30 s
    res = d.answer(rid)
    assert res.generation_id == 2 and [x.member_id for x in res.members] == [leader]
    assert d.heartbeat(GID, follower, 1).error == E.UNKNOWN_MEMBER_ID


def _completed_pair(d, rebalance):
    d.own(GID)
    (ja, a), (jb, b) = d.join_new(GID, rebalance=rebalance), d.join_new(GID, rebalance=rebalance)
    d.advance(3000)
    d.advance(3000)  # 6000: CompletingRebalance, the sync phase runs until 6000 + rebalance
    assert d.answer(ja).leader == a
    return a, b


def test_a_member_that_does_not_sync_is_removed_at_the_sync_timeout():
    d = Driver()
    a, b = _completed_pair(d, rebalance=8_000)  # shorter than the session: the sync phase decides
    leader_sync = d.sync(GID, a, 1, [(a, b"x"), (b, b"y")])
    assert d.answer(leader_sync).error == E.NONE and d.coord.group(GID).is_(S.STABLE)
    d.advance(7_999)
    assert d.coord.group(GID).has(b)
    d.advance(1)  # b never synced
    assert not d.coord.group(GID).has(b) and d.coord.group(GID).is_(S.PREPARING_REBALANCE)
    assert d.heartbeat(GID, a, 1).error == E.REBALANCE_IN_PROGRESS


def test_the_leader_not_syncing_answers_the_parked_syncs_with_rebalance_in_progress():
    d = Driver()
    a, b = _completed_pair(d, rebalance=8_000)
    parked = d.sync(GID, b, 1)
    d.advance(7_999)
    assert d.answer(parked) is None
    d.advance(1)
    assert d.answer(parked) == m.SyncGroupResult(E.REBALANCE_IN_PROGRESS)
    assert not d.coord.group(GID).has(a) and d.coord.group(GID).is_(S.PREPARING_REBALANCE)


@pytest.mark.parametrize("timeline, answered_at", [
    ([(0, "a")], 3000),
    ([(0, "a"), (1000, "b")], 6000),
    ([(0, "a"), (1000, "b"), (5000, "c")], 9000),
    ([(0, "a"), (1000, "b"), (5000, "c"), (8000, "d"), (9500, "e")], 10_000),  # capped
])
def test_the_initial_delay_is_re_armed_while_members_keep_joining(timeline, answered_at):
    d = Driver(cfg(group_initial_rebalance_delay_ms=3000))
    d.own(GID)
    joins = []
    for t in range(0, 12_001, 500):
        d.clock.now = t
        joins += [d.join(GID, rebalance=10_000, version=3) for at, _ in timeline if at == t]
        d.send(m.Tick())
        done = [d.answer(rid) is not None for rid in joins]
        assert all(done) == (t >= answered_at), t
    assert {d.answer(rid).generation_id for rid in joins} == {1}


def test_a_group_that_is_not_new_skips_the_reruns_of_the_initial_delay():
    d = Driver()
    (leader, follower), _ = d.stable_group(GID, 2)
    d.leave(GID, leader, follower)  # Empty, generation 2
    a = d.join(GID, version=3)
    d.advance(1000)
    b = d.join(GID, version=3)
    d.advance(2000)  # 3000 after the first join: no re-arm for a generation > 0
    assert d.answer(a).generation_id == 3 and d.answer(b).generation_id == 3


# ---------------------------------------------------------------------------------------------
def test_leave_group_is_batched_with_per_member_errors():
    d = Driver()
    leader, follower = static_group(d)
    res = d.leave(GID, m.LeaveMember(leader), m.LeaveMember("ghost"), m.LeaveMember("x", "s1"),
                  m.LeaveMember("", "nobody"))
    assert [x.error for x in res.members] == [E.NONE, E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID,
                                             E.UNKNOWN_MEMBER_ID]
    assert res.error == E.NONE and d.coord.group(GID).is_(S.PREPARING_REBALANCE)
    res = d.leave(GID, m.LeaveMember("", "s1"))  # removal by group.instance.id alone
    assert res.members[0].error == E.NONE
    group = d.coord.group(GID)
    assert group.is_(S.EMPTY) and group.generation_id == 2 and not group.members


def test_the_last_member_leaving_writes_the_empty_group_record():
    d = Driver()
    (leader,), _ = d.stable_group(GID, 1)
    before = len(d.appends)
    d.leave(GID, leader)
    (append,) = d.appends[before:]
    value = R.decode_group_metadata_value(append.records[0].value)
    assert (value.generation, value.protocol, value.leader, value.members) == (2, None, None, ())


def test_leave_answers_a_parked_sync_of_the_leaving_member():
    d = Driver()
    d.own(GID)
    (ja, a), (jb, b) = d.join_new(GID), d.join_new(GID)
    d.advance(3000)
    d.advance(3000)
    parked = d.sync(GID, b, 1)
    d.leave(GID, b)
    assert d.answer(parked) == m.SyncGroupResult(E.UNKNOWN_MEMBER_ID)


def test_leave_from_an_unknown_group_answers_each_member():
    d = Driver()
    d.own(GID)
    res = d.leave(GID, "a", "b")
    assert res.error == E.NONE and [x.error for x in res.members] == [E.UNKNOWN_MEMBER_ID] * 2


# ---------------------------------------------------------------------------------------------
def test_commits_are_checked_against_the_generation_and_count_as_heartbeats():
    d = Driver()
    (leader, follower), gen = d.stable_group(GID, 2)
    assert d.answer(d.commit(GID, {TP: 10}, follower, gen)).partitions[0].error == E.NONE
    assert d.answer(d.commit(GID, {TP: 11}, follower, gen - 1)).partitions[0].error == E.ILLEGAL_GENERATION
    assert d.answer(d.commit(GID, {TP: 12}, "ghost", gen)).partitions[0].error == E.UNKNOWN_MEMBER_ID
    assert d.committed(GID, TP) == 10
    for _ in range(6):  # 36 s: the follower only commits, the leader only heartbeats
        d.advance(6_000)
        assert d.heartbeat(GID, leader, gen).error == E.NONE
        assert d.answer(d.commit(GID, {TP: 13}, follower, gen)).partitions[0].error == E.NONE
    assert d.coord.group(GID).has(follower) and d.coord.group(GID).is_(S.STABLE)


def test_a_simple_group_is_created_by_a_commit_with_a_negative_generation():
    d = Driver()
    d.own(GID)
    assert d.answer(d.commit(GID, {TP: 3}, generation=0)).partitions[0].error == E.ILLEGAL_GENERATION
    assert d.coord.group(GID) is None
    assert d.answer(d.commit(GID, {TP: 3, ("t", 1): 4})).partitions[0].error == E.NONE
    group = d.coord.group(GID)
    assert group.is_(S.EMPTY) and group.protocol_type is None and group.generation_id == 0
    assert d.committed(GID, ("t", 1)) == 4
    d.answer(d.commit(GID, {TP: 5}))
    assert d.committed(GID, TP) == 5


def test_metadata_longer_than_the_limit_fails_only_its_partition():
    d = Driver()
    d.own(GID)
    rid = d.request(m.OffsetCommit, group_id=GID, offsets=(
        m.CommitOffset("t", 0, 1, metadata="x" * 4097), m.CommitOffset("t", 1, 2, 7, "é" * 4096),
        m.CommitOffset("t", 2, 3, metadata=None)))
    assert [p.error for p in d.answer(rid).partitions] == [E.OFFSET_METADATA_TOO_LARGE, E.NONE, E.NONE]
    res = d.fetch(GID, (("t", 0), ("t", 1), ("t", 2)))
    assert [(p.offset, p.leader_epoch, p.metadata) for p in res.partitions] == \
        [(-1, -1, ""), (2, 7, "é" * 4096), (3, -1, "")]
    appended = len(d.appends)
    only = d.answer(d.commit(GID, {TP: 1}, metadata="y" * 5000))
    assert only.partitions[0].error == E.OFFSET_METADATA_TOO_LARGE and len(d.appends) == appended


@pytest.mark.parametrize("append_error, answer", [
    (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.COORDINATOR_NOT_AVAILABLE),
    (E.UNKNOWN_TOPIC_OR_PARTITION, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR), (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR),
    (E.MESSAGE_TOO_LARGE, E.INVALID_COMMIT_OFFSET_SIZE),
    (E.RECORD_LIST_TOO_LARGE, E.INVALID_COMMIT_OFFSET_SIZE),
    (E.INVALID_FETCH_SIZE, E.INVALID_COMMIT_OFFSET_SIZE), (E.REQUEST_TIMED_OUT, E.REQUEST_TIMED_OUT),
])
def test_a_failed_commit_append_leaves_the_cache_unchanged(append_error, answer):
    d = Driver()
    d.own(GID)
    d.commit(GID, {TP: 1})
    d.auto_ack = False
    rid = d.commit(GID, {TP: 2})
    assert d.answer(rid) is None and d.committed(GID, TP) == 1  # not before the append
    assert d.fetch(GID, (TP,), require_stable=True).partitions[0].error == E.UNSTABLE_OFFSET_COMMIT
    (token,) = d.inflight
    d.ack(token, append_error)
    assert d.answer(rid).partitions[0].error == answer
    assert d.committed(GID, TP) == 1 and not d.coord.group(GID).pending_offset_commits


def test_an_acknowledged_commit_reaches_the_cache_even_when_a_later_one_fails_first():
    d = Driver(auto_ack=False)
    d.own(GID)
    first, second = d.commit(GID, {TP: 1}), d.commit(GID, {TP: 2})
    t1, t2 = sorted(d.inflight)
    d.ack(t2, E.NOT_ENOUGH_REPLICAS)
    d.ack(t1)
    assert d.answer(first).partitions[0].error == E.NONE and d.committed(GID, TP) == 1
    third = d.commit(GID, {TP: 3})
    fourth = d.commit(GID, {TP: 4})
    t3, t4 = sorted(d.inflight)
    d.ack(t4)
    d.ack(t3)  # older: must not overwrite the newer value
    assert d.answer(third).partitions[0].error == d.answer(fourth).partitions[0].error == E.NONE
    assert d.committed(GID, TP) == 4


@pytest.mark.parametrize("append_error, answer", [
    (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE), (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
    (E.REQUEST_TIMED_OUT, E.REBALANCE_IN_PROGRESS), (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR)])
def test_a_failed_assignment_append_answers_every_parked_sync_and_rebalances(append_error, answer):
    d = Driver(auto_ack=False)
    d.own(GID)
    (ja, a), (jb, b) = d.join_new(GID), d.join_new(GID)
    d.advance(3000)
    d.advance(3000)
    sb = d.sync(GID, b, 1)
    sa = d.sync(GID, a, 1, [(a, b"x"), (b, b"y")])
    (token,) = d.inflight
    d.ack(token, append_error)
    assert d.answer(sa) == d.answer(sb) == m.SyncGroupResult(answer)
    group = d.coord.group(GID)
    assert group.is_(S.PREPARING_REBALANCE) and [x.assignment for x in group.members.values()] == [b"", b""]


def test_offset_fetch_of_all_partitions_and_unknown_ones():
    d = Driver()
    d.own(GID)
    d.commit(GID, {("t", 0): 5, ("u", 3): 6})
    res = d.fetch(GID)
    assert {(p.topic, p.partition, p.offset) for p in res.partitions} == {("t", 0, 5), ("u", 3, 6)}
    d.own("other-group")
    assert d.fetch("other-group", (TP,)).partitions == (m.FetchedOffset("t", 0, -1, -1, "", E.NONE),)
    assert d.fetch("other-group").partitions == ()


# ---------------------------------------------------------------------------------------------
def test_describe_list_and_delete():
    d = Driver()
    ids, _ = d.stable_group(GID, 2, assign=lambda ids: [(ids[0], b"A"), (ids[1], b"B")])
    d.own("other")
    d.commit("other", {TP: 1})
    (desc,) = d.call(m.DescribeGroups, group_ids=(GID,)).groups
    assert (desc.error, desc.state, desc.protocol_type, desc.protocol) == \
        (E.NONE, "Stable", "consumer", "range")
    assert [(x.member_id, x.client_id, x.metadata, x.assignment) for x in desc.members] == \
        [(ids[0], "c", b"r", b"A"), (ids[1], "c", b"r", b"B")]
    listed = d.call(m.ListGroups)
    assert listed.error == E.NONE
    assert {(x.group_id, x.protocol_type, x.state) for x in listed.groups} == \
        {(GID, "consumer", "Stable"), ("other", "", "Empty")}
    assert [x.group_id for x in d.call(m.ListGroups, states=frozenset({"EMPTY"})).groups] == ["other"]

    d.join(GID, version=3)
    (desc,) = d.call(m.DescribeGroups, group_ids=(GID,)).groups
    assert desc.state == "PreparingRebalance" and desc.protocol == ""
    assert all(x.metadata == b"" and x.assignment == b"" for x in desc.members)

    d.own("nothing")
    res = d.call(m.DeleteGroups, group_ids=(GID, "other", "nothing", "other"))
    assert [(x.group_id, x.error) for x in res.groups] == \
        [(GID, E.NON_EMPTY_GROUP), ("other", E.NONE), ("nothing", E.GROUP_ID_NOT_FOUND)]
    assert d.coord.group("other") is None and d.fetch("other", (TP,)).partitions[0].offset == -1
    tombstones = d.appends[-1].records
    assert tombstones == (R.offset_commit_record("other", "t", 0, None),)  # generation 0: no group record


def test_deleting_a_group_that_had_generations_writes_its_tombstone():
    d = Driver()
    ids, gen = d.stable_group(GID, 1)
    d.commit(GID, {TP: 9}, ids[0], gen)
    d.leave(GID, ids[0])
    res = d.call(m.DeleteGroups, group_ids=(GID,))
    assert res.groups[0].error == E.NONE
    assert set(d.appends[-1].records) == {R.offset_commit_record(GID, "t", 0, None),
                                          R.group_metadata_record(GID, None)}
    d.advance(1)
    assert d.call(m.DescribeGroups, group_ids=(GID,)).groups[0].state == "Dead"


# ---------------------------------------------------------------------------------------------
def test_protocol_selection_takes_the_most_voted_among_those_all_support():
    d = Driver()
    d.own(GID)
    joins = [d.join(GID, protocols=p, version=3) for p in (
        (("rr", b""), ("range", b"")), (("rr", b""), ("range", b"")), (("range", b""), ("rr", b"")))]
    d.advance(3000)
    d.advance(3000)
    assert {d.answer(r).protocol_name for r in joins} == {"rr"}
    d2 = Driver()
    d2.own(GID)
    joins = [d2.join(GID, protocols=p, version=3) for p in (
        (("rr", b""), ("range", b"")), (("range", b""), ("sticky", b"")))]
    d2.advance(3000)
    d2.advance(3000)
    assert {d2.answer(r).protocol_name for r in joins} == {"range"}


@pytest.mark.parametrize("protocol_type, protocols", [
    ("connect", PROTOCOLS), ("consumer", (("sticky", b""),)), ("consumer", ())])
def test_an_inconsistent_protocol_is_refused(protocol_type, protocols):
    d = Driver()
    d.stable_group(GID, 1)
    res = d.answer(d.join(GID, protocols=protocols, protocol_type=protocol_type, version=3))
    assert res == m.JoinGroupResult(E.INCONSISTENT_GROUP_PROTOCOL, "")


def test_a_new_group_needs_a_protocol_type_and_a_protocol():
    d = Driver()
    d.own(GID)
    assert d.answer(d.join(GID, protocol_type="", version=3)).error == E.INCONSISTENT_GROUP_PROTOCOL
    assert d.answer(d.join(GID, protocols=(), version=3)).error == E.INCONSISTENT_GROUP_PROTOCOL


@pytest.mark.parametrize("session, error", [(5_999, E.INVALID_SESSION_TIMEOUT), (6_000, None),
                                             (1_800_000, None), (1_800_001, E.INVALID_SESSION_TIMEOUT)])
def test_session_timeout_bounds(session, error):
    d = Driver()
    d.own(GID)
    res = d.answer(d.join(GID, "", session=session, version=3))
    assert (res.error if res else None) == error


def test_the_group_max_size():
    d = Driver(cfg(group_max_size=2))
    ids, _ = d.stable_group(GID, 2)
    assert d.answer(d.join(GID, version=3)) == m.JoinGroupResult(E.GROUP_MAX_SIZE_REACHED, "")
    assert d.answer(d.join(GID, ids[1])).error == E.NONE  # members are still welcome


def test_a_member_id_for_an_unknown_group_is_refused():
    d = Driver()
    d.own(GID)
    assert d.answer(d.join(GID, "someone")) == m.JoinGroupResult(E.UNKNOWN_MEMBER_ID, "someone")
    assert d.coord.group(GID) is None


def test_changed_metadata_rebalances_and_answers_the_parked_syncs():
    d2 = Driver()
    a, b = _completed_pair(d2, rebalance=30_000)
    parked = d2.sync(GID, b, 1)
    rid = d2.join(GID, a, protocols=(("range", b"new"),))  # CompletingRebalance, new metadata
    assert d2.answer(parked) == m.SyncGroupResult(E.REBALANCE_IN_PROGRESS)
    assert d2.answer(rid) is None and d2.coord.group(GID).is_(S.PREPARING_REBALANCE)
    d3 = Driver()
    (leader, follower), _ = d3.stable_group(GID, 2)
    same = d3.answer(d3.join(GID, follower))
    assert same.error == E.NONE and same.generation_id == 1 and d3.coord.group(GID).is_(S.STABLE)
    rid = d3.join(GID, follower, protocols=(("range", b"new"),))  # Stable follower, new metadata
    assert d3.answer(rid) is None and d3.coord.group(GID).is_(S.PREPARING_REBALANCE)


def test_a_new_members_join_expires_after_five_minutes():
    d = Driver()
    (leader, follower), _ = d.stable_group(GID, 2)
    rid = d.join(GID, version=3, rebalance=600_000)  # the join phase may now last 10 minutes
    for _ in range(30):
        d.advance(9_990)
        d.heartbeat(GID, leader, 1)
        d.heartbeat(GID, follower, 1)
    assert d.answer(rid) is None
    d.advance(300_000 - 30 * 9_990)
    assert d.answer(rid) == m.JoinGroupResult(E.UNKNOWN_MEMBER_ID, "")
    assert d.coord.group(GID).size == 2


def test_a_superseded_parked_join_is_answered():
    d = Driver()
    (leader, follower), _ = d.stable_group(GID, 2)
    first = d.join(GID, leader)
    second = d.join(GID, leader)
    assert d.answer(first) == m.JoinGroupResult(E.REBALANCE_IN_PROGRESS, leader)
    assert d.answer(second) is None


# ---------------------------------------------------------------------------------------------
def test_unload_answers_every_parked_call_and_reload_restores_the_groups():
    d = Driver(cfg(offsets_topic_num_partitions=1))
    (l1, f1), gen = d.stable_group("a", 2)  # a: will have a parked join
    d.commit("a", {TP: 4}, f1, gen)
    d.own("b")
    (jb1, b1), (jb2, b2) = d.join_new("b"), d.join_new("b")
    d.advance(3000)
    d.advance(3000)
    parked_sync = d.sync("b", b2, 1)  # b: CompletingRebalance with a parked sync
    parked_join = d.join("a", version=3)
    d.auto_ack = False
    commit = d.commit("a", {TP: 5}, f1, gen)  # waits for its append
    (token,) = d.inflight
    assert {d.answer(r) for r in (parked_sync, parked_join, commit)} == {None}

    d.unload(0)
    joined = d.answer(parked_join)  # the id the coordinator gave the new member
    assert joined.error == E.NOT_COORDINATOR and joined.member_id.startswith("c-")
    assert d.answer(parked_sync) == m.SyncGroupResult(E.NOT_COORDINATOR)
    assert d.answer(commit).partitions[0].error == E.NOT_COORDINATOR
    assert not d.unanswered()
    d.ack(token)  # the append finished after all: ignored, no second answer
    assert d.heartbeat("a", l1, gen).error == E.NOT_COORDINATOR
    assert d.coord.group("a") is None and d.coord.owned_partitions == frozenset()

    d.load(0)
    a = d.coord.group("a")
    assert a.is_(S.STABLE) and list(a.members) == [l1, f1] and a.generation_id == gen and a.leader_id == l1
    assert d.coord.group("b") is None  # never stored
    assert d.committed("a", TP) == 5  # the append did land in the log
    d.advance(5_000)
    assert d.heartbeat("a", f1, gen).error == E.NONE
    d.advance(4_999)
    assert a.has(l1)
    d.advance(1)  # timers were re-armed at load: the silent leader expires
    assert not a.has(l1) and a.is_(S.PREPARING_REBALANCE)


def test_load_replays_last_value_wins_and_tombstones():
    value = R.GroupMetadataValue("consumer", 3, "range", "m1", 50, (
        R.MemberRecord("m1", None, "c", "h", 30_000, 10_000, b"r", b"A"),))
    ocv = lambda o: R.OffsetCommitValue(o, 2, "md", 40)  # noqa: E731
    records = (
        R.offset_commit_record("g", "t", 0, ocv(1)), R.offset_commit_record("g", "t", 0, ocv(2)),
        R.offset_commit_record("g", "t", 1, ocv(7)), R.offset_commit_record("g", "t", 1, None),
        R.group_metadata_record("gone", value), R.group_metadata_record("gone", None),
        R.group_metadata_record("g", value),
        R.offset_commit_record("simple", "t", 0, ocv(9)),
        R.OffsetsRecord(b"\x00\x09junk", b"ignored"),      # unknown key version: skipped
        R.OffsetsRecord(R.encode_key(R.GroupMetadataKey("bad")), b"\x00\x03\x00"),  # undecodable
    )
    d = Driver(cfg(offsets_topic_num_partitions=1))
    d.send(m.LoadPartition(0, records))
    g = d.coord.group("g")
    assert g.is_(S.STABLE) and g.generation_id == 3 and g.leader_id == "m1" and g.get("m1").assignment == b"A"
    assert g.current_state_timestamp == 50
    fetched = d.fetch("g", (("t", 0), ("t", 1))).partitions
    assert [(p.offset, p.leader_epoch, p.metadata) for p in fetched] == \
        [(2, 2, "md"), (-1, -1, "")]
    assert d.coord.group("gone") is None and d.coord.group("bad") is None
    simple = d.coord.group("simple")
    assert simple.is_(S.EMPTY) and simple.protocol_type is None and d.committed("simple", TP) == 9
    assert d.answer(d.sync("g", "m1", 3)).assignment == b"A"


def test_a_loaded_group_over_the_max_size_rebalances():
    value = R.GroupMetadataValue("consumer", 1, "range", "m1", 0, tuple(
        R.MemberRecord(f"m{i}", None, "c", "h", 30_000, 10_000, b"r", b"") for i in range(1, 4)))
    d = Driver(cfg(offsets_topic_num_partitions=1, group_max_size=2))
    d.send(m.LoadPartition(0, (R.group_metadata_record("g", value),)))
    assert d.coord.group("g").is_(S.PREPARING_REBALANCE)


# ---------------------------------------------------------------------------------------------
def test_offsets_of_an_empty_group_expire_after_the_retention():
    d = Driver(cfg(offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000))
    (leader,), gen = d.stable_group(GID, 1)
    d.commit(GID, {TP: 3}, leader, gen)
    d.leave(GID, leader)
    emptied = d.clock.now
    while d.clock.now < emptied + 60_000 - 10_000:
        d.advance(10_000)
        assert d.committed(GID, TP) == 3
    d.advance(20_000)
    assert d.coord.group(GID) is None and d.committed(GID, TP) == -1
    assert set(d.appends[-1].records) == {R.offset_commit_record(GID, "t", 0, None),
                                          R.group_metadata_record(GID, None)}


def test_a_stable_consumer_group_expires_only_offsets_of_topics_it_does_not_subscribe():
    d = Driver(cfg(offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000))
    d.own(GID)
    rid, mid = d.join_new(GID, protocols=(("range", subscription("t")),))
    d.advance(3000)
    d.sync(GID, mid, 1)
    d.commit(GID, {("t", 0): 1, ("old", 0): 2}, mid, 1)
    for _ in range(8):
        d.advance(9_000)
        d.heartbeat(GID, mid, 1)
    res = d.fetch(GID, (("t", 0), ("old", 0)))
    assert [p.offset for p in res.partitions] == [1, -1]
    assert d.appends[-1].records == (R.offset_commit_record(GID, "old", 0, None),)


def test_an_empty_group_without_offsets_is_cleaned_up():
    d = Driver(cfg(offsets_retention_check_interval_ms=1000))
    d.own(GID)
    assert d.answer(d.join(GID, protocol_type="", version=3)).error == E.INCONSISTENT_GROUP_PROTOCOL
    assert d.coord.group(GID).is_(S.EMPTY)  # created by the failed join
    d.advance(1000)
    assert d.coord.group(GID) is None


# ---------------------------------------------------------------------------------------------
def test_config_uses_kafkas_names_and_defaults():
    c = GroupCoordinatorConfig()
    assert (c.group_min_session_timeout_ms, c.group_max_session_timeout_ms,
            c.group_initial_rebalance_delay_ms, c.group_max_size, c.offsets_topic_num_partitions,
            c.offset_metadata_max_bytes, c.offsets_retention_minutes,
            c.offsets_retention_check_interval_ms) == \
        (6000, 1_800_000, 3000, 2**31 - 1, 50, 4096, 10_080, 600_000)
    c = GroupCoordinatorConfig.from_properties({"group.max.size": "5", "offsets.topic.num.partitions": 3})
    assert (c.group_max_size, c.offsets_topic_num_partitions) == (5, 3)
    with pytest.raises(ValueError):
        GroupCoordinatorConfig.from_properties({"group.max.sise": 5})
    with pytest.raises(ValueError):
        GroupCoordinatorConfig(group_min_session_timeout_ms=10, group_max_session_timeout_ms=5)


def test_the_coordinator_says_when_it_needs_a_tick_and_refuses_unknown_events():
    d = Driver()
    d.own(GID)
    assert d.coord.next_deadline_ms() == 600_000  # the retention check
    d.join(GID, version=3)
    assert d.coord.next_deadline_ms() == 3000
    with pytest.raises(TypeError):
        d.coord.process(object())
