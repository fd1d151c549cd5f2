"""The native member's group protocol (rayka/client/membership.py), pure: events in, effects
out, no Ray, no threads, no clock. Tables for the transitions and for each answer's errors;
flows for joining, revoking, losing, confirming ownership, auto-commit and close."""

from __future__ import annotations

import pytest

from coordinator import messages as m
from rayka.client import membership as ms
from rayka.client.consumer_protocol import (Assignment, Subscription, encode_assignment,
                                            encode_subscription)
from rayka.client.types import TopicPartition
from replicas.errors import ErrorCode as E
from replicas.errors import (FencedInstanceId, InconsistentGroupProtocol, InvalidSessionTimeout,
                             RebalanceInProgress)

pytestmark = pytest.mark.unit

S = ms.State
T = "t"
P0, P1, P2 = (T, 0), (T, 1), (T, 2)
SESSION, HEARTBEAT, MAX_POLL = 3000, 500, 20_000


def config(**kw) -> ms.MemberConfig:
    base = dict(group_id="g", assignors=("range",), session_timeout_ms=SESSION,
                heartbeat_interval_ms=HEARTBEAT, max_poll_interval_ms=MAX_POLL,
                auto_commit_interval_ms=1000)
    base.update(kw)
    return ms.MemberConfig(**base)


def assignment(*tps) -> bytes:
    return encode_assignment(Assignment(tuple(TopicPartition(*tp) for tp in tps)))


class Member:
    """A Membership with a clock and the last effects, answering its own requests."""

    def __init__(self, **kw):
        self.machine = ms.Membership(config(**kw))
        self.now = 0
        self.effects: list = []

    def __getattr__(self, name):
        return getattr(self.machine, name)

    def feed(self, event) -> list:
        self.effects = self.machine.process(event)
        return self.effects

    def at(self, now: int) -> "Member":
        self.now = now
        return self

    def sent(self, kind=None) -> list:
        return [e for e in self.effects if isinstance(e, ms.Send)
                and (kind is None or isinstance(e.request, kind))]

    def one(self, kind):
        found = self.sent(kind)
        assert len(found) == 1, self.effects
        return found[0]

    def of(self, cls) -> list:
        return [e for e in self.effects if isinstance(e, cls)]

    def answer(self, effect, result, sent: int | None = None) -> list:
        return self.feed(ms.Answered(effect.token, result, self.now if sent is None else sent,
                                     self.now))

    # -- whole steps ---------------------------------------------------------------------------
    def join(self, generation=1, leader=False, members=(), member_id="me") -> None:
        """From UNJOINED with a subscription: Poll, JoinGroup answered (as leader: with
        `members`), the state COMPLETING_REBALANCE."""
        self.feed(ms.Poll(self.now))
        join = self.one(m.JoinGroup)
        self.answer(join, m.JoinGroupResult(0, member_id, generation, "consumer",
                                            self.config.assignors[0],
                                            member_id if leader else "other", False, members))

    def rejoin(self, now: int = 10):
        """A rejoin asked for while STABLE: the poll's prepare (its commit answered); the
        JoinGroup effect it ends with."""
        self.machine._request_rejoin()
        self.at(now).feed(ms.Poll(now))
        for commit in self.of(ms.SendCommit):
            self.answer(commit, m.OffsetCommitResult(()))
        return self.one(m.JoinGroup)

    def stable(self, *tps, generation=1, member_id="me") -> None:
        """Joined and synced with `tps` assigned."""
        self.join(generation, member_id=member_id)
        sync = self.one(m.SyncGroup)
        self.answer(sync, m.SyncGroupResult(0, "consumer", self.config.assignors[0],
                                            assignment(*tps)))
        assert self.state is S.STABLE


def subscribed(**kw) -> Member:
    member = Member(**kw)
    member.feed(ms.Subscribe((T,), 0))
    return member


# ---------------------------------------------------------------- the transition table
@pytest.mark.parametrize("source", list(S))
@pytest.mark.parametrize("target", list(S))
def test_transitions_follow_the_table(source, target):
    machine = ms.Membership(config())
    machine.state = source
    if source in ms.VALID_PREVIOUS[target]:
        machine._transition(target)
        assert machine.state is target
    else:
        with pytest.raises(ms.IllegalTransition):
            machine._transition(target)


# ---------------------------------------------------------------- joining
def test_a_first_join_takes_the_member_id_it_is_given_then_follows_the_leader():
    a = subscribed()
    a.feed(ms.Poll(0))
    first = a.one(m.JoinGroup)
    assert first.request.member_id == "" and first.request.rebalance_timeout_ms == MAX_POLL
    assert a.state is S.PREPARING_REBALANCE
    a.answer(first, m.JoinGroupResult(E.MEMBER_ID_REQUIRED, "given"))
    again = a.one(m.JoinGroup)
    assert again.request.member_id == "given"
    a.answer(again, m.JoinGroupResult(0, "given", 4, "consumer", "range", "leader-id"))
    sync = a.one(m.SyncGroup)
    assert (sync.request.generation_id, sync.request.member_id, sync.request.assignments) == \
        (4, "given", ())
    assert a.state is S.COMPLETING_REBALANCE


def test_the_leader_asks_for_the_plan_and_syncs_it():
    a = subscribed()
    sub = encode_subscription(Subscription((T,)))
    members = (m.JoinGroupMember("me", None, sub), m.JoinGroupMember("you", None, sub))
    a.join(leader=True, members=members)
    compute = a.of(ms.ComputeAssignment)[0]
    plan = ms.compute_assignment(compute, lambda topics: {T: 4})
    assert dict(plan) == {"me": assignment(P0, P1), "you": assignment((T, 2), (T, 3))}
    a.feed(ms.Assigned(1, plan, 0))
    assert a.one(m.SyncGroup).request.assignments == plan


def test_a_plan_for_a_generation_that_moved_on_is_dropped():
    a = subscribed()
    a.join(generation=3, leader=True)
    assert a.feed(ms.Assigned(2, (), 0)) == []


def test_poll_returns_while_the_join_is_parked_and_never_sends_a_second_one():
    a = subscribed()
    a.feed(ms.Poll(0))
    a.one(m.JoinGroup)
    for now in (100, 200, 5000):
        assert a.feed(ms.Poll(now)) == []


@pytest.mark.parametrize("error, member_id, resend, fatal", [
    (E.MEMBER_ID_REQUIRED, "given", True, None),
    (E.UNKNOWN_MEMBER_ID, "", True, None),
    (E.ILLEGAL_GENERATION, "me", True, None),
    (E.REBALANCE_IN_PROGRESS, "me", True, None),
    (E.COORDINATOR_NOT_AVAILABLE, "me", False, None),
    (E.NOT_COORDINATOR, "me", False, None),
    (23, "me", False, InconsistentGroupProtocol),
    (26, "me", False, InvalidSessionTimeout),
    (E.FENCED_INSTANCE_ID, "me", False, FencedInstanceId),
])
def test_join_errors(error, member_id, resend, fatal):
    a = subscribed()
    a.machine.member_id = "me"
    a.feed(ms.Poll(0))
    join = a.one(m.JoinGroup)
    a.answer(join, m.JoinGroupResult(error, "given"))
    assert bool(a.sent(m.JoinGroup)) == resend
    assert a.member_id == member_id
    got = a.take_fatal()
    assert type(got) is fatal if fatal else got is None
    if not resend:      # retried by the next poll after the backoff
        assert a.feed(ms.Poll(1)) == [] or fatal
        assert a.feed(ms.Poll(1 + a.config.retry_backoff_ms)) and a.sent(m.JoinGroup)


@pytest.mark.parametrize("error, lost_member_id, rejoins", [
    (E.UNKNOWN_MEMBER_ID, True, True),
    (E.ILLEGAL_GENERATION, False, True),
    (E.REBALANCE_IN_PROGRESS, False, True),
])
def test_sync_errors_rejoin(error, lost_member_id, rejoins):
    a = subscribed()
    a.join()
    a.answer(a.one(m.SyncGroup), m.SyncGroupResult(error))
    join = a.one(m.JoinGroup)
    assert (join.request.member_id == "") == lost_member_id


def test_an_answer_to_a_request_of_a_member_that_reset_is_ignored():
    a = subscribed()
    a.join()
    sync = a.one(m.SyncGroup)
    a.feed(ms.Close(0))                       # leaves: the sync answer comes too late
    assert a.answer(sync, m.SyncGroupResult(0, "consumer", "range", assignment(P0))) == []
    assert a.owned == frozenset()


# ---------------------------------------------------------------- ownership and heartbeats
def test_partitions_are_fetchable_only_while_the_coordinator_confirms_the_member():
    a = subscribed()
    a.at(1000).stable(P0, P1)
    assert a.fetchable(1000) == {P0, P1}
    # the JoinGroup was sent at 1000: confirmed until 1000 + session
    assert a.fetchable(1000 + SESSION - 1) == {P0, P1} and a.fetchable(1000 + SESSION) == set()
    a.at(3500).feed(ms.HeartbeatDue(3500))
    beat = a.one(m.Heartbeat)
    a.at(3900).answer(beat, m.HeartbeatResult(0), sent=3500)
    assert a.fetchable(3500 + SESSION - 1) == {P0, P1}
    assert a.fetchable(3500 + SESSION) == set()


def test_a_heartbeat_answered_late_confirms_from_when_it_was_sent():
    a = subscribed()
    a.stable(P0)
    a.at(1000).feed(ms.HeartbeatDue(1000))
    beat = a.one(m.Heartbeat)
    a.at(9000).answer(beat, m.HeartbeatResult(0), sent=1000)      # frozen in between
    assert a.fetchable(9000) == set()


@pytest.mark.parametrize("error, state, lost, member_id_kept, rejoin, fatal", [
    (0, S.STABLE, False, True, False, None),
    (E.REBALANCE_IN_PROGRESS, S.STABLE, False, True, True, None),
    (E.REBALANCE_IN_PROGRESS, S.COMPLETING_REBALANCE, False, True, True, None),
    (E.UNKNOWN_MEMBER_ID, S.STABLE, True, False, True, None),
    (E.ILLEGAL_GENERATION, S.STABLE, True, True, True, None),
    (E.FENCED_INSTANCE_ID, S.STABLE, True, False, True, FencedInstanceId),
    (E.COORDINATOR_NOT_AVAILABLE, S.STABLE, False, True, False, None),
    # sent before the JoinGroup in flight, maybe overtaken by it: the join's answer decides
    (E.UNKNOWN_MEMBER_ID, S.PREPARING_REBALANCE, False, True, True, None),
    (E.ILLEGAL_GENERATION, S.PREPARING_REBALANCE, False, True, True, None),
])
def test_heartbeat_answers(error, state, lost, member_id_kept, rejoin, fatal):
    a = subscribed()
    a.stable(P0, P1)
    if state is not S.STABLE:                   # a JoinGroup (or SyncGroup) in flight
        a.machine.state, a.machine._rebalance_token = state, 999
        a.machine.rejoin_needed = True
    a.at(600).feed(ms.HeartbeatDue(600))
    a.answer(a.one(m.Heartbeat), m.HeartbeatResult(error))
    assert bool(a.of(ms.Lose)) == lost
    if lost:
        assert a.of(ms.Lose)[0].partitions == {P0, P1}
        assert a.owned == frozenset() and a.fetchable(a.now) == set()
        assert a.generation == -1 and a.state is S.UNJOINED
    assert (a.member_id == "me") == member_id_kept
    assert a.rejoin_needed == rejoin
    got = a.take_fatal()
    assert type(got) is fatal if fatal else got is None


def test_a_failed_heartbeat_is_retried_after_the_backoff():
    a = subscribed()
    a.stable(P0)
    a.at(600).feed(ms.HeartbeatDue(600))
    a.answer(a.one(m.Heartbeat), m.HeartbeatResult(E.NOT_COORDINATOR))
    assert a.next_heartbeat_ms() == 600 + a.config.retry_backoff_ms
    a.feed(ms.NoAnswer(0, 7, 600))                 # an unknown token changes nothing


def test_heartbeats_go_one_at_a_time_on_the_interval():
    a = subscribed()
    a.stable(P0)
    assert a.next_heartbeat_ms() == HEARTBEAT
    a.at(HEARTBEAT).feed(ms.HeartbeatDue(HEARTBEAT))
    beat = a.one(m.Heartbeat)
    assert a.feed(ms.HeartbeatDue(HEARTBEAT + 1000)) == []      # one in flight
    a.answer(beat, m.HeartbeatResult(0), sent=HEARTBEAT)
    assert a.next_heartbeat_ms() == 2 * HEARTBEAT


def test_no_poll_for_max_poll_interval_leaves_the_group_and_loses_the_partitions():
    a = subscribed()
    a.stable(P0, P1)
    a.feed(ms.Poll(100))
    assert a.next_heartbeat_ms() <= 100 + MAX_POLL
    a.at(100 + MAX_POLL + 1).feed(ms.HeartbeatDue(a.now))
    leave = a.one(m.LeaveGroup)
    assert leave.request.members[0].member_id == "me"
    assert a.of(ms.Lose)[0].partitions == {P0, P1} and a.member_id == ""
    a.feed(ms.Poll(a.now))                         # the next poll rejoins
    assert a.one(m.JoinGroup).request.member_id == ""


# ---------------------------------------------------------------- rebalances
def test_eager_prepare_commits_the_positions_then_revokes_everything_then_joins():
    a = subscribed(enable_auto_commit=True)
    a.stable(P0, P1)
    a.at(700).feed(ms.HeartbeatDue(700))
    a.answer(a.one(m.Heartbeat), m.HeartbeatResult(E.REBALANCE_IN_PROGRESS))
    assert a.rebalancing and a.fetchable(700) == {P0, P1}
    a.feed(ms.Poll(700))
    commit = a.of(ms.SendCommit)[0]
    assert commit.partitions == {P0, P1} and commit.generation == 1
    assert a.fetchable(700) == set()             # pending revocation: nothing more returned
    assert not a.sent(m.JoinGroup) and not a.of(ms.Revoke)
    a.answer(commit, m.OffsetCommitResult(()))
    assert a.of(ms.Revoke)[0].partitions == {P0, P1}
    a.feed(ms.Revoked(frozenset({P0, P1}), 700))
    assert a.one(m.JoinGroup) and a.owned == frozenset()


def test_eager_prepare_without_auto_commit_revokes_at_once():
    a = subscribed(enable_auto_commit=False)
    a.stable(P0)
    a.machine._request_rejoin()
    a.feed(ms.Poll(10))
    assert a.of(ms.Revoke)[0].partitions == {P0} and not a.of(ms.SendCommit)


def test_cooperative_revocation_commits_then_revokes_then_rejoins():
    a = subscribed(assignors=("cooperative-sticky",))
    a.stable(P0, P1)
    join = a.rejoin()
    assert not a.of(ms.Revoke)                   # cooperative: keeps its partitions to rejoin
    assert a.fetchable(10) == {P0, P1}
    a.answer(join, m.JoinGroupResult(0, "me", 2, "consumer", "cooperative-sticky", "other"))
    a.answer(a.one(m.SyncGroup), m.SyncGroupResult(0, "consumer", "cooperative-sticky",
                                                   assignment(P0, P2)))
    assert a.of(ms.Assign)[0].partitions == {P2}
    commit = a.of(ms.SendCommit)[0]
    assert commit.partitions == {P1} and commit.generation == 2
    assert a.fetchable(a.now) == {P0, P2}
    a.answer(commit, m.OffsetCommitResult(()))
    assert a.of(ms.Revoke)[0].partitions == {P1}
    a.feed(ms.Revoked(frozenset({P1}), a.now))
    assert a.one(m.JoinGroup) and a.owned == {P0, P2}


def test_a_partition_assigned_again_is_not_reassigned():
    a = subscribed(assignors=("cooperative-sticky",))
    a.stable(P0)
    a.answer(a.rejoin(), m.JoinGroupResult(0, "me", 2, "consumer", "cooperative-sticky", "other"))
    a.answer(a.one(m.SyncGroup), m.SyncGroupResult(0, "consumer", "cooperative-sticky",
                                                   assignment(P0)))
    assert not a.of(ms.Assign) and not a.of(ms.Revoke) and not a.rebalancing


# ---------------------------------------------------------------- commits
@pytest.mark.parametrize("state, expected", [
    (S.PREPARING_REBALANCE, RebalanceInProgress),
    (S.COMPLETING_REBALANCE, RebalanceInProgress),
    (S.UNJOINED, ms.CommitFailed),
])
def test_an_application_commit_outside_a_stable_generation_is_refused(state, expected):
    a = subscribed()
    a.machine.state = state
    a.feed(ms.CommitRequested(7, ((P0, 5),), 0))
    done = a.of(ms.CommitDone)[0]
    assert done.ticket == 7 and type(done.error) is expected
    assert not a.of(ms.SendCommit)


@pytest.mark.parametrize("error, expected, lost", [
    (0, None, False),
    (E.ILLEGAL_GENERATION, ms.CommitFailed, True),
    (E.UNKNOWN_MEMBER_ID, ms.CommitFailed, True),
    (E.REBALANCE_IN_PROGRESS, RebalanceInProgress, False),
    (E.FENCED_INSTANCE_ID, FencedInstanceId, True),
    (12, "OffsetMetadataTooLarge", False),
    (28, "InvalidCommitOffsetSize", False),
])
def test_application_commit_answers(error, expected, lost):
    a = subscribed()
    a.stable(P0)
    a.feed(ms.CommitRequested(1, ((P0, 5),), 0))
    commit = a.of(ms.SendCommit)[0]
    assert commit.offsets == ((P0, 5),) and commit.generation == 1 and commit.member_id == "me"
    a.answer(commit, m.OffsetCommitResult((m.CommitPartitionResult(T, 0, error),)))
    done = a.of(ms.CommitDone)[0]
    if expected is None:
        assert done.error is None
    else:
        name = expected if isinstance(expected, str) else expected.__name__
        assert type(done.error).__name__ == name
    assert bool(a.of(ms.Lose)) == lost


def test_a_manually_assigned_consumer_commits_as_a_simple_group():
    a = Member()
    a.feed(ms.CommitRequested(1, ((P0, 9),), 0))
    commit = a.of(ms.SendCommit)[0]
    assert (commit.generation, commit.member_id, commit.offsets) == (-1, "", ((P0, 9),))


def test_auto_commit_runs_on_the_interval_one_at_a_time():
    a = subscribed(enable_auto_commit=True)
    a.stable(P0, P1)
    assert a.feed(ms.Poll(500)) == []            # the interval runs from the assignment
    a.feed(ms.Poll(1000))
    commit = a.of(ms.SendCommit)[0]
    assert commit.partitions == {P0, P1} and commit.offsets is None
    assert a.feed(ms.Poll(2500)) == []           # the previous one is in flight
    a.answer(commit, m.OffsetCommitResult(()))
    a.feed(ms.Poll(2600))
    assert a.of(ms.SendCommit)


def test_no_auto_commit_when_disabled():
    a = subscribed(enable_auto_commit=False)
    a.stable(P0)
    assert a.feed(ms.Poll(10_000)) == []


# ---------------------------------------------------------------- close and unsubscribe
def test_close_commits_revokes_and_leaves():
    a = subscribed(enable_auto_commit=True)
    a.stable(P0)
    a.feed(ms.Close(10))
    assert a.fetchable(10) == set()
    commit = a.of(ms.SendCommit)[0]
    a.answer(commit, m.OffsetCommitResult(()))
    a.feed(ms.Revoked(a.of(ms.Revoke)[0].partitions, 10))
    assert a.one(m.LeaveGroup) and a.closed


def test_close_during_a_rebalance_commits_under_the_generation_it_makes():
    a = subscribed(assignors=("cooperative-sticky",), enable_auto_commit=True)
    a.stable(P0, P1)
    join = a.rejoin()
    a.feed(ms.Close(5))
    assert not a.of(ms.SendCommit)               # generation 1 is about to end: wait
    a.answer(join, m.JoinGroupResult(0, "me", 2, "consumer", "cooperative-sticky", "other"))
    a.answer(a.one(m.SyncGroup), m.SyncGroupResult(0, "consumer", "cooperative-sticky",
                                                   assignment(P0)))
    commit = a.of(ms.SendCommit)[0]
    assert commit.generation == 2 and commit.partitions == {P0, P1}


def test_closing_without_a_generation_just_leaves():
    a = subscribed()
    a.feed(ms.Close(0))
    assert a.closed and not a.sent()


def test_unsubscribe_revokes_and_leaves_without_committing():
    a = subscribed(enable_auto_commit=True)
    a.stable(P0)
    a.feed(ms.Subscribe((), 0))
    assert not a.of(ms.SendCommit)
    a.feed(ms.Revoked(a.of(ms.Revoke)[0].partitions, 0))
    assert a.one(m.LeaveGroup) and not a.closed and a.subscription is None
