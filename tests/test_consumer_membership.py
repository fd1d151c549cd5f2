"""The native KIP-848 member (rayka/client/consumer_membership.py), driven step by step as
its shell drives it, then in a seeded simulation against the real pure coordinator group
(coordinator/consumer_group.py): answers delayed, lost and reordered, members fenced by
their session, closing and rejoining — no partition is ever returned by two members at
the same instant, and every partition ends up owned."""

from __future__ import annotations

import random

import pytest

from coordinator import messages as m
from coordinator.consumer_group import ConsumerGroup, ConsumerGroupConfig, HeartbeatAnswer
from rayka.client.consumer_membership import CState, ConsumerMembership
from rayka.client.membership import (Answered, Assign, Close, CommitDone, CommitFailed,
                                     CommitRequested, HeartbeatDue, Lose, MemberConfig,
                                     NoAnswer, Poll, Revoke, Revoked, Send, SendCommit,
                                     Subscribe)
from replicas.errors import ErrorCode as E
from replicas.errors import GroupMaxSizeReached, RebalanceInProgress

pytestmark = pytest.mark.unit

SESSION = 10_000
REQUEST_TIMEOUT = 2_000


def config(**kw) -> MemberConfig:
    return MemberConfig("g", session_timeout_ms=SESSION, max_poll_interval_ms=60_000,
                        retry_backoff_ms=100, group_protocol="consumer", **kw)


def tps(*pairs) -> frozenset:
    return frozenset(pairs)


class Member:
    """One machine and what it emitted."""

    def __init__(self, **kw):
        self.m = ConsumerMembership(config(**kw), "m1")
        self.effects: list = []

    def do(self, event) -> list:
        out = self.m.process(event)
        self.effects += out
        return out

    def heartbeat(self, now: int = 0) -> Send:
        (send,) = [e for e in self.do(HeartbeatDue(now)) if isinstance(e, Send)]
        return send

    def answer(self, send, now: int = 0, sent: int = 0, **fields) -> list:
        return self.do(Answered(send.token, HeartbeatAnswer(**fields), sent, now))

    def joined(self, assignment: dict, epoch: int = 1, now: int = 0) -> list:
        self.do(Subscribe(("t",), now))
        send = self.heartbeat(now)
        return self.answer(send, now, now, member_id="m1", member_epoch=epoch,
                           heartbeat_interval_ms=500, assignment=assignment)


def test_join_sends_a_full_heartbeat_at_epoch_0_and_takes_its_assignment():
    a = Member()
    a.do(Subscribe(("t",), 0))
    assert a.m.state is CState.JOINING
    send = a.heartbeat(0)
    r = send.request.request
    assert isinstance(send.request, m.ConsumerGroupHeartbeat)
    assert (r.group_id, r.member_id, r.member_epoch, r.subscribed_topic_names, r.owned,
            r.rebalance_timeout_ms) == ("g", "m1", 0, ("t",), {}, 60_000)
    out = a.answer(send, member_id="m1", member_epoch=1, heartbeat_interval_ms=500,
                   assignment={"t": frozenset({0, 1})})
    assert out == [Assign(tps(("t", 0), ("t", 1)))]
    assert a.m.state is CState.STABLE and a.m.generation == 1
    assert a.m.fetchable(100) == tps(("t", 0), ("t", 1))
    assert a.m.fetchable(SESSION) == frozenset()          # no acknowledged heartbeat since
    ack = a.heartbeat(0).request.request                  # due at once: the acknowledgement
    assert (ack.member_epoch, ack.owned) == (1, {"t": (0, 1)})


def test_partitions_taken_away_are_committed_then_revoked_before_the_heartbeat_says_so():
    a = Member()
    a.joined({"t": frozenset({0, 1})})
    a.heartbeat(0)                                        # the acknowledgement, in flight
    send = [e for e in a.effects if isinstance(e, Send)][-1]
    out = a.answer(send, 10, 10, member_id="m1", member_epoch=2, heartbeat_interval_ms=500,
                   assignment={"t": frozenset({0})})
    (commit,) = out
    assert isinstance(commit, SendCommit) and commit.partitions == tps(("t", 1))
    assert (commit.generation, commit.member_id) == (2, "m1")
    assert a.m.state is CState.RECONCILING and a.m.fetchable(20) == tps(("t", 0))
    still = a.heartbeat(600).request.request
    assert still.owned == {"t": (0, 1)}                   # not given up yet
    out = a.do(Answered(commit.token, m.OffsetCommitResult(
        (m.CommitPartitionResult("t", 1, E.NONE),)), 30, 40))
    assert out == [Revoke(tps(("t", 1)))]
    a.do(Revoked(tps(("t", 1)), 50))
    assert a.m.state is CState.STABLE and a.m.owned == tps(("t", 0))


def test_an_assignment_arriving_during_a_revocation_waits_for_it():
    a = Member(enable_auto_commit=False)
    a.joined({"t": frozenset({0, 1})})
    send = a.heartbeat(0)
    assert a.answer(send, 10, 10, member_epoch=2, heartbeat_interval_ms=500,
                    assignment={"t": frozenset({0})}) == [Revoke(tps(("t", 1)))]
    send = a.heartbeat(600)
    assert a.answer(send, 610, 600, member_epoch=3, heartbeat_interval_ms=500,
                    assignment={"t": frozenset({0, 2})}) == []       # revoking still
    assert a.do(Revoked(tps(("t", 1)), 620)) == [Assign(tps(("t", 2)))]
    assert a.m.owned == tps(("t", 0), ("t", 2)) and a.m.state is CState.STABLE


@pytest.mark.parametrize("error", [E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID])
def test_a_fenced_member_loses_everything_and_rejoins_with_its_id_at_epoch_0(error):
    a = Member()
    a.joined({"t": frozenset({0, 1})})
    send = a.heartbeat(0)
    assert a.answer(send, 10, 10, error=error) == [Lose(tps(("t", 0), ("t", 1)))]
    assert a.m.state is CState.JOINING and a.m.fetchable(20) == frozenset()
    again = a.heartbeat(20).request.request
    assert (again.member_id, again.member_epoch, again.owned) == ("m1", 0, {})


def test_coordinator_errors_and_no_answer_are_retried_and_keep_the_partitions():
    a = Member()
    a.joined({"t": frozenset({0})})
    send = a.heartbeat(0)
    assert a.answer(send, 10, 10, error=E.NOT_COORDINATOR) == []
    assert a.m.owned == tps(("t", 0)) and a.m.next_heartbeat_ms() == 110
    send = a.heartbeat(110)
    assert a.do(NoAnswer(send.token, E.COORDINATOR_NOT_AVAILABLE, 200)) == []
    assert a.m.next_heartbeat_ms() == 300 and a.m.owned == tps(("t", 0))


def test_any_other_error_is_fatal_to_the_next_poll_and_the_join_is_retried():
    a = Member()
    a.do(Subscribe(("t",), 0))
    send = a.heartbeat(0)
    a.answer(send, 5, 0, error=E.GROUP_MAX_SIZE_REACHED, message="full")
    fatal = a.m.take_fatal()
    assert isinstance(fatal, GroupMaxSizeReached) and "full" in str(fatal)
    assert a.m.take_fatal() is None and a.m.state is CState.JOINING
    assert a.m.next_heartbeat_ms() == 105


def test_commits_carry_the_epoch_and_read_kafkas_errors():
    a = Member()
    a.do(Subscribe(("t",), 0))
    (early,) = a.do(CommitRequested(1, ((("t", 0), 5),), 0))
    assert isinstance(early, CommitDone) and isinstance(early.error, RebalanceInProgress)
    a.joined({"t": frozenset({0})}, epoch=3)
    (send,) = a.do(CommitRequested(2, ((("t", 0), 5),), 10))
    assert (send.generation, send.member_id, send.offsets) == (3, "m1", ((("t", 0), 5),))
    (done,) = a.do(Answered(send.token, m.OffsetCommitResult(
        (m.CommitPartitionResult("t", 0, E.STALE_MEMBER_EPOCH),)), 10, 20))
    assert isinstance(done.error, RebalanceInProgress)
    (send,) = a.do(CommitRequested(3, None, 30))
    (done,) = a.do(Answered(send.token, m.OffsetCommitResult(
        (m.CommitPartitionResult("t", 0, E.FENCED_MEMBER_EPOCH),)), 30, 40))
    assert isinstance(done.error, CommitFailed)


def test_without_a_subscription_a_commit_is_a_simple_groups():
    a = Member()
    (send,) = a.do(CommitRequested(1, ((("t", 0), 5),), 0))
    assert (send.generation, send.member_id, send.group_instance_id) == (-1, "", None)


@pytest.mark.parametrize("instance, epoch", [(None, -1), ("i-1", -2)])
def test_close_commits_revokes_then_leaves(instance, epoch):
    a = Member(group_instance_id=instance)
    a.joined({"t": frozenset({0})})
    (commit,) = a.do(Close(10))
    assert isinstance(commit, SendCommit) and commit.partitions == tps(("t", 0))
    assert a.m.fetchable(10) == frozenset()
    assert a.do(Answered(commit.token, m.OffsetCommitResult(()), 10, 20)) == [
        Revoke(tps(("t", 0)))]
    (leave,) = a.do(Revoked(tps(("t", 0)), 30))
    r = leave.request.request
    assert (r.member_id, r.member_epoch, r.instance_id) == ("m1", epoch, instance)
    assert a.m.closed and a.m.leaving
    a.do(Answered(leave.token, HeartbeatAnswer(member_id="m1", member_epoch=epoch), 30, 40))
    assert not a.m.leaving


def test_a_leave_waits_for_the_heartbeat_in_flight():
    a = Member()
    a.do(Subscribe(("t",), 0))
    join = a.heartbeat(0)
    assert a.do(Close(5)) == []                     # nothing owned: leave, but not before
    assert a.m.closed and a.m.leaving
    (leave,) = a.answer(join, 10, 0, member_id="m1", member_epoch=1,
                        heartbeat_interval_ms=500, assignment={"t": frozenset({0})})
    assert leave.request.request.member_epoch == -1


def test_a_member_that_stops_polling_leaves_and_rejoins_at_its_next_poll():
    a = Member()
    a.do(Poll(0))
    a.joined({"t": frozenset({0})})
    out = a.do(HeartbeatDue(60_001))
    assert out[0] == Lose(tps(("t", 0)))
    assert out[1].request.request.member_epoch == -1 and a.m.state is CState.UNSUBSCRIBED
    a.do(Poll(70_000))
    assert a.m.state is CState.JOINING and a.heartbeat(70_000).request.request.member_epoch == 0


# -- a seeded simulation against the coordinator's group --------------------------------------
TOPICS = {"t": ("t", 6), "u": ("u", 2)}      # topic ids are the names here


class Sim:
    """Members and the coordinator's group with a network between them: each request
    reaches the group 0-200 ms after it is sent, each answer the member 0-200 ms after;
    while `lossy`, 5 % of requests or answers are lost (the shell then reports NoAnswer
    after its request timeout). A frozen member processes nothing; what reaches it waits
    until it thaws. The application's thread runs a revocation 0-400 ms after it is asked."""

    def __init__(self, seed: int, members: int):
        self.rng = random.Random(seed)
        self.now = 0
        self.group = ConsumerGroup("g", ConsumerGroupConfig(session_timeout_ms=SESSION,
                                                            heartbeat_interval_ms=300))
        self.members = {f"m{i}": ConsumerMembership(config(enable_auto_commit=False), f"m{i}")
                        for i in range(members)}
        self.requests: list = []       # (arrives at, member, token, request, sent at)
        self.answers: list = []        # (arrives at, member, event)
        self.frozen: set[str] = set()
        self.lossy = True
        self.revocations: list = []    # (run at, member, Revoke)

    def lost(self) -> bool:
        return self.lossy and self.rng.random() < 0.05

    def run_effects(self, mid: str, effects) -> None:
        for e in effects:
            if isinstance(e, Send):
                if self.lost():
                    self.answers.append((self.now + REQUEST_TIMEOUT, mid, NoAnswer(
                        e.token, E.REQUEST_TIMED_OUT, 0)))
                else:
                    self.requests.append((self.now + self.rng.randint(0, 200), mid, e.token,
                                          e.request, self.now))
            elif isinstance(e, Revoke):     # the application's thread runs it, later
                self.revocations.append((self.now + self.rng.randint(0, 400), mid, e))

    def step(self) -> None:
        self.now += self.rng.randint(1, 150)
        self.group.expire(self.now)
        due = sorted((x for x in self.requests if x[0] <= self.now), key=lambda x: x[0])
        self.requests = [x for x in self.requests if x[0] > self.now]
        for _, mid, token, request, sent in due:
            answer = self.group.heartbeat(request.request, TOPICS, self.now)
            if self.lost():
                self.answers.append((self.now + REQUEST_TIMEOUT, mid,
                                     NoAnswer(token, E.REQUEST_TIMED_OUT, 0)))
            else:
                self.answers.append((self.now + self.rng.randint(0, 200), mid,
                                     Answered(token, answer, sent, 0)))
        for mid, member in self.members.items():
            if mid in self.frozen:
                continue
            mine = sorted((x for x in self.answers if x[1] == mid and x[0] <= self.now),
                          key=lambda x: x[0])
            self.answers = [x for x in self.answers if not (x[1] == mid and x[0] <= self.now)]
            for _, _, event in mine:
                event = (NoAnswer(event.token, event.error, self.now)
                         if isinstance(event, NoAnswer) else
                         Answered(event.token, event.result, event.sent_ms, self.now))
                self.run_effects(mid, member.process(event))
            ready = [x for x in self.revocations if x[1] == mid and x[0] <= self.now]
            self.revocations = [x for x in self.revocations if x not in ready]
            for _, _, revoke in ready:
                self.run_effects(mid, member.process(Revoked(revoke.partitions, self.now)))
            self.run_effects(mid, member.process(Poll(self.now)))
            self.run_effects(mid, member.process(HeartbeatDue(self.now)))
        self.check()

    def check(self) -> None:
        seen: dict = {}
        for mid, member in self.members.items():
            for tp in member.fetchable(self.now):
                assert tp not in seen, f"{tp} returned by {seen[tp]} and {mid} at {self.now}"
                seen[tp] = mid


@pytest.mark.parametrize("seed", range(24))
def test_no_partition_is_returned_by_two_members_and_all_get_owned(seed):
    sim = Sim(seed, 3)
    for mid, member in sim.members.items():
        sim.run_effects(mid, member.process(Subscribe(("t", "u"), 0)))
    for i in range(1600):
        if i == 300:
            sim.frozen.add("m1")                       # stops answering: fenced by its session
        if i == 700:
            sim.frozen.discard("m1")
        if i == 900:
            sim.run_effects("m2", sim.members["m2"].process(Close(sim.now)))
        if i == 1100:
            sim.lossy = False                          # then it must settle
        sim.step()
    live = [mm for mid, mm in sim.members.items() if not mm.closed]
    owned = [tp for mm in live for tp in mm.owned]
    assert sorted(owned) == sorted({(t, p) for t, (_, n) in TOPICS.items() for p in range(n)})
    assert all(mm.state is CState.STABLE for mm in live)
    assert sim.members["m2"].closed
