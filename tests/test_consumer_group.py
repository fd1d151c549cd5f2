"""A KIP-848 consumer group (coordinator/consumer_group.py) driven by heartbeats as a client
sends them: validation, joining, epochs and fencing, revocation before assignment, leaving,
static members, the two timeouts, metadata changes, and a seeded property with clients that
follow the protocol: no partition is ever consumed by two of them, and the group settles on
its target."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from coordinator.consumer_group import (ConsumerGroup, ConsumerGroupConfig, HeartbeatRequest,
                                        LEAVE_EPOCH, LEAVE_STATIC_EPOCH)
from coordinator.consumer_reconciliation import GroupState, MemberState
from replicas.errors import ErrorCode as E

pytestmark = pytest.mark.unit

TOPICS = {"foo": ("id-foo", 6), "bar": ("id-bar", 3)}


def join(member_id, *topics, instance=None, assignor=None, timeout_ms=5000):
    return HeartbeatRequest("g", member_id, 0, instance_id=instance,
                            rebalance_timeout_ms=timeout_ms,
                            subscribed_topic_names=tuple(topics) or ("foo",),
                            server_assignor=assignor, owned={})


def beat(member_id, epoch, owned=None, instance=None):
    return HeartbeatRequest("g", member_id, epoch, instance_id=instance, owned=owned)


def size(assignment) -> int:
    return sum(len(ps) for ps in assignment.values())


@pytest.mark.parametrize("request_, message", [
    (HeartbeatRequest("", "m", 0), "GroupId can't be empty."),
    (HeartbeatRequest("g", "m", 1, instance_id=""), "InstanceId can't be empty."),
    (HeartbeatRequest("g", "m", 1, rack_id=""), "RackId can't be empty."),
    (HeartbeatRequest("g", "", 3), "MemberId can't be empty."),
    (HeartbeatRequest("g", "", LEAVE_EPOCH), "MemberId can't be empty."),
    (HeartbeatRequest("g", "m", 0, subscribed_topic_names=("foo",), owned={}),
     "RebalanceTimeoutMs must be provided in first request."),
    (HeartbeatRequest("g", "m", 0, rebalance_timeout_ms=1, subscribed_topic_names=("foo",)),
     "TopicPartitions must be empty when (re-)joining."),
    (HeartbeatRequest("g", "m", 0, rebalance_timeout_ms=1, subscribed_topic_names=("foo",),
                      owned={"id-foo": (1,)}), "TopicPartitions must be empty when (re-)joining."),
    (HeartbeatRequest("g", "m", 0, rebalance_timeout_ms=1, owned={}),
     "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
    (HeartbeatRequest("g", "m", LEAVE_STATIC_EPOCH), "InstanceId can't be null."),
    (HeartbeatRequest("g", "m", -3), "MemberEpoch is invalid."),
])
def test_invalid_requests_are_refused_as_kafka_words_them(request_, message):
    answer = ConsumerGroup("g").heartbeat(request_, TOPICS, 0)
    assert (answer.error, answer.message) == (E.INVALID_REQUEST, message)


def test_an_unknown_assignor_is_refused():
    answer = ConsumerGroup("g").heartbeat(join("m", assignor="sticky"), TOPICS, 0)
    assert answer.error == E.UNSUPPORTED_ASSIGNOR
    assert answer.message == ("ServerAssignor sticky is not supported. Supported assignors: "
                              "uniform, range.")


def test_the_first_member_gets_every_partition_at_epoch_1():
    g = ConsumerGroup("g")
    a = g.heartbeat(join("m1", "foo", "bar"), TOPICS, 0)
    assert (a.error, a.member_id, a.member_epoch, a.heartbeat_interval_ms) == (E.NONE, "m1", 1,
                                                                                 5000)
    assert a.assignment == {"id-bar": frozenset(range(3)), "id-foo": frozenset(range(6))}
    assert g.state is GroupState.STABLE and g.group_epoch == g.target_epoch == 1
    quiet = g.heartbeat(beat("m1", 1, owned={"id-foo": tuple(range(6))}), TOPICS, 100)
    assert quiet.assignment is None and quiet.member_epoch == 1       # nothing changed


def test_a_second_member_waits_until_the_first_revokes():
    g = ConsumerGroup("g")
    g.heartbeat(join("m1"), TOPICS, 0)
    a2 = g.heartbeat(join("m2"), TOPICS, 1)
    assert a2.member_epoch == 2 and a2.assignment == {}      # m1 still holds everything
    assert g.state is GroupState.RECONCILING
    a1 = g.heartbeat(beat("m1", 1, owned={"id-foo": tuple(range(6))}), TOPICS, 2)
    assert a1.member_epoch == 1 and size(a1.assignment) == 3     # revoke 3, same epoch
    assert g.members["m1"].assignment.state is MemberState.UNREVOKED_PARTITIONS
    kept = a1.assignment["id-foo"]
    # still owning a revoked one: nothing moves, m2 still waits
    still = g.heartbeat(beat("m1", 1, owned={"id-foo": tuple(range(6))}), TOPICS, 3)
    assert still.member_epoch == 1
    assert g.heartbeat(beat("m2", 2, owned={}), TOPICS, 4).assignment is None
    a1 = g.heartbeat(beat("m1", 1, owned={"id-foo": tuple(kept)}), TOPICS, 5)
    assert a1.member_epoch == 2
    a2 = g.heartbeat(beat("m2", 2, owned={}), TOPICS, 6)
    assert a2.assignment == {"id-foo": frozenset(range(6)) - kept}
    assert g.state is GroupState.STABLE


@pytest.mark.parametrize("epoch, owned, error", [
    (200, None, E.FENCED_MEMBER_EPOCH),               # ahead of the coordinator
    (1, None, E.FENCED_MEMBER_EPOCH),                 # the previous epoch, owned not sent
    (1, {"id-foo": (0, 1)}, E.NONE),                  # previous epoch, owning a subset
    (1, {"id-foo": (0, 99)}, E.FENCED_MEMBER_EPOCH),  # previous epoch, owning another
])
def test_member_epoch_validation(epoch, owned, error):
    g = ConsumerGroup("g")
    g.heartbeat(join("m1", "foo"), TOPICS, 0)
    g.heartbeat(join("m2", "bar"), TOPICS, 1)        # group epoch 2; m1 keeps foo
    g.heartbeat(beat("m1", 1, owned={"id-foo": tuple(range(6))}), TOPICS, 2)
    m = g.members["m1"].assignment
    assert (m.member_epoch, m.previous_member_epoch) == (2, 1)
    answer = g.heartbeat(beat("m1", epoch, owned), TOPICS, 3)
    assert answer.error == error
    if error == E.NONE:               # the answer with epoch 2 was lost: it is given again
        assert answer.member_epoch == 2


def test_leaving_frees_the_partitions_and_bumps_the_group_epoch():
    g = ConsumerGroup("g")
    g.heartbeat(join("m1"), TOPICS, 0)
    g.heartbeat(join("m2"), TOPICS, 0)
    epoch = g.group_epoch
    a = g.heartbeat(HeartbeatRequest("g", "m2", LEAVE_EPOCH), TOPICS, 1)
    assert (a.error, a.member_id, a.member_epoch) == (E.NONE, "m2", LEAVE_EPOCH)
    assert g.group_epoch == epoch + 1 and set(g.members) == {"m1"}
    assert g.heartbeat(HeartbeatRequest("g", "m2", LEAVE_EPOCH), TOPICS, 2).error == \
        E.UNKNOWN_MEMBER_ID
    a1 = g.heartbeat(beat("m1", 1, owned={"id-foo": tuple(range(6))}), TOPICS, 3)
    assert size(a1.assignment or g.members["m1"].assignment.assigned) == 6


def test_unknown_group_and_member():
    assert ConsumerGroup("g").heartbeat(beat("m", 3), TOPICS, 0).error == E.GROUP_ID_NOT_FOUND
    g = ConsumerGroup("g")
    g.heartbeat(join("m1"), TOPICS, 0)
    assert g.heartbeat(beat("nobody", 1), TOPICS, 0).error == E.UNKNOWN_MEMBER_ID


def test_a_fenced_member_rejoins_with_its_id_at_epoch_0():
    g = ConsumerGroup("g")
    g.heartbeat(join("m1"), TOPICS, 0)
    assert g.heartbeat(beat("m1", 9), TOPICS, 1).error == E.FENCED_MEMBER_EPOCH
    a = g.heartbeat(join("m1"), TOPICS, 2)
    assert a.error == E.NONE and a.member_epoch == g.group_epoch == 2
    assert size(a.assignment) == 6


def test_a_static_member_gets_its_assignment_back_without_a_rebalance():
    g = ConsumerGroup("g")
    g.heartbeat(join("a", instance="i-a"), TOPICS, 0)
    g.heartbeat(join("b", instance="i-b"), TOPICS, 0)
    g.heartbeat(beat("a", 1, owned={"id-foo": tuple(range(6))}, instance="i-a"), TOPICS, 1)
    g.heartbeat(beat("a", 1, owned={"id-foo": tuple(sorted(
        g.members["a"].assignment.assigned["id-foo"]))}, instance="i-a"), TOPICS, 2)
    g.heartbeat(beat("b", 2, owned={}, instance="i-b"), TOPICS, 3)
    assert g.state is GroupState.STABLE
    held = dict(g.members["b"].assignment.assigned)
    epoch = g.group_epoch
    assert g.heartbeat(join("b2", instance="i-b"), TOPICS, 4).error == E.UNRELEASED_INSTANCE_ID
    left = g.heartbeat(HeartbeatRequest("g", "b", LEAVE_STATIC_EPOCH, instance_id="i-b"),
                       TOPICS, 5)
    assert left.member_epoch == LEAVE_STATIC_EPOCH
    assert g.members["b"].assignment.assigned == held          # kept while away
    back = g.heartbeat(join("b2", instance="i-b"), TOPICS, 6)
    assert back.assignment == held and back.member_epoch == epoch
    assert g.group_epoch == epoch and "b" not in g.members
    assert g.heartbeat(HeartbeatRequest("g", "b", LEAVE_EPOCH, instance_id="i-b"),
                       TOPICS, 7).error == E.FENCED_INSTANCE_ID


def test_session_and_rebalance_timeouts_fence():
    g = ConsumerGroup("g", ConsumerGroupConfig(session_timeout_ms=1000))
    g.heartbeat(join("m1", timeout_ms=300), TOPICS, 0)
    g.heartbeat(join("m2", timeout_ms=300), TOPICS, 0)
    g.heartbeat(beat("m1", 1, owned={"id-foo": tuple(range(6))}), TOPICS, 100)
    assert g.members["m1"].assignment.state is MemberState.UNREVOKED_PARTITIONS
    assert g.rebalance_deadline["m1"] == 400
    g.heartbeat(beat("m2", 2, owned={}), TOPICS, 350)
    epoch = g.group_epoch
    assert g.expire(399) == [] and g.expire(400) == ["m1"]     # never revoked: fenced
    assert g.group_epoch == epoch + 1
    assert g.next_deadline_ms() == 1350
    assert g.expire(1350) == ["m2"] and g.state is GroupState.EMPTY


def test_more_partitions_bump_the_group_epoch_and_get_assigned():
    g = ConsumerGroup("g")
    g.heartbeat(join("m1"), {"foo": ("id-foo", 2)}, 0)
    a = g.heartbeat(beat("m1", 1, owned={"id-foo": (0, 1)}), {"foo": ("id-foo", 4)}, 1)
    assert a.member_epoch == 2 and a.assignment == {"id-foo": frozenset(range(4))}


def test_the_group_has_a_maximum_size():
    g = ConsumerGroup("g", ConsumerGroupConfig(max_size=1))
    g.heartbeat(join("m1"), TOPICS, 0)
    assert g.heartbeat(join("m2"), TOPICS, 0).error == E.GROUP_MAX_SIZE_REACHED
    assert g.heartbeat(beat("m1", 1, owned={}), TOPICS, 0).error == E.NONE


class _Client:
    """A client that follows KIP-848: it consumes what it was last told it has, stops
    consuming a revoked partition before it reports its owned partitions, and loses some
    answers (timed out); after a lost answer its next heartbeat is a full one, as Kafka's
    clients send after an error or a timeout."""

    def __init__(self, member_id: str):
        self.member_id, self.epoch, self.owned, self.full = member_id, 0, {}, False

    def request(self) -> HeartbeatRequest:
        if self.epoch == 0:
            return join(self.member_id)
        owned = {t: tuple(sorted(ps)) for t, ps in self.owned.items()}
        if self.full:
            return HeartbeatRequest("g", self.member_id, self.epoch, rebalance_timeout_ms=5000,
                                    subscribed_topic_names=("foo",), owned=owned)
        return beat(self.member_id, self.epoch, owned=owned)

    def lost(self) -> None:
        self.full = True

    def on_answer(self, a) -> None:
        if a.error == E.FENCED_MEMBER_EPOCH or a.error == E.UNKNOWN_MEMBER_ID:
            self.epoch, self.owned = 0, {}
            return
        assert a.error == E.NONE, a
        self.epoch, self.full = a.member_epoch, False
        if a.assignment is not None:
            self.owned = {t: set(ps) for t, ps in a.assignment.items()}


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_no_partition_is_consumed_twice_and_the_group_settles(seed):
    rng = random.Random(seed)
    g = ConsumerGroup("g", ConsumerGroupConfig(session_timeout_ms=10_000))
    topics = {"foo": ("id-foo", rng.randint(1, 8)), "bar": ("id-bar", rng.randint(1, 8))}
    clients: dict[str, _Client] = {}
    now = 0
    for step in range(80):
        now += rng.randint(1, 500)
        roll = rng.random()
        if roll < 0.15 and len(clients) < 5 or not clients:
            mid = f"m{step}"
            clients[mid] = _Client(mid)
        elif roll < 0.22 and len(clients) > 1:     # one stays, so there is a group to settle
            mid = rng.choice(sorted(clients))
            clients[mid].owned = {}                   # stops consuming, then leaves
            g.heartbeat(HeartbeatRequest("g", mid, LEAVE_EPOCH), topics, now)
            del clients[mid]
            continue
        mid = rng.choice(sorted(clients))
        c = clients[mid]
        answer = g.heartbeat(c.request(), topics, now)
        if answer.error == E.NONE and rng.random() < 0.3:
            c.lost()                                  # this answer never arrives
        else:
            c.on_answer(answer)
        for gone in g.expire(now):
            clients.pop(gone, None)
        owners: dict = {}
        for cid, cl in clients.items():
            for t, ps in cl.owned.items():
                for p in ps:
                    assert (t, p) not in owners, f"{t}-{p}: {owners[(t, p)]} and {cid}"
                    owners[(t, p)] = cid
    for _ in range(10 * (len(clients) + 2)):
        now += 100
        for mid in sorted(clients):
            clients[mid].on_answer(g.heartbeat(clients[mid].request(), topics, now))
    assert g.state is GroupState.STABLE
    assert {m: {t: set(ps) for t, ps in c.owned.items()} for m, c in clients.items()} == \
        {m: {t: set(ps) for t, ps in g.target.get(m, {}).items()} for m in clients}


def test_a_regular_expression_is_resolved_after_the_heartbeat_as_kafka_does():
    """Named topics at once, the expression's matches (whole names) one heartbeat later;
    a topic created later once the topics changed and 10 s passed since the refresh."""
    g = ConsumerGroup("g")
    topics = {**TOPICS, "xfoo": ("id-xfoo", 2)}
    r = HeartbeatRequest("g", "m1", 0, rebalance_timeout_ms=5000,
                         subscribed_topic_names=("bar",), subscribed_topic_regex="f.*",
                         owned={})
    a = g.heartbeat(r, topics, 0)
    assert a.assignment == {"id-bar": frozenset(range(3))}            # the names first
    b = g.heartbeat(beat("m1", 1, owned={"id-bar": (0, 1, 2)}), topics, 100)
    assert b.member_epoch == 2 and b.assignment == {"id-bar": frozenset(range(3)),
                                                    "id-foo": frozenset(range(6))}
    grown = {**topics, "fizz": ("id-fizz", 2)}
    owned = {"id-bar": (0, 1, 2), "id-foo": tuple(range(6))}
    c = g.heartbeat(beat("m1", 2, owned=owned), grown, 5_000)           # refreshed < 10 s ago
    assert c.member_epoch == 2
    g.heartbeat(beat("m1", 2, owned=owned), grown, 10_100)               # refreshes after it
    d = g.heartbeat(beat("m1", 2, owned=owned), grown, 10_200)
    assert d.member_epoch == 3 and d.assignment["id-fizz"] == frozenset({0, 1})
    assert g.members["m1"].subscribed_regex == "f.*"
    assert g.subscribed_topic_names() == {"bar", "foo", "fizz"}
    g.heartbeat(HeartbeatRequest("g", "m1", LEAVE_EPOCH), grown, 10_300)   # leaves: forgotten
    again = g.heartbeat(HeartbeatRequest("g", "m2", 0, rebalance_timeout_ms=5000,
                                         subscribed_topic_names=("bar",),
                                         subscribed_topic_regex="f.*", owned={}), grown, 10_400)
    assert again.assignment == {"id-bar": frozenset(range(3))}     # resolved afresh: later


def test_a_regular_expression_that_does_not_compile_is_refused_and_changes_nothing():
    g = ConsumerGroup("g")
    g.heartbeat(join("m1", "foo"), TOPICS, 0)
    bad = g.heartbeat(HeartbeatRequest("g", "m1", 1, subscribed_topic_regex="(oops"),
                      TOPICS, 10)
    assert bad.error == E.INVALID_REGULAR_EXPRESSION
    assert bad.message.startswith("SubscribedTopicRegex `(oops` is not a valid regular "
                                  "expression: ")
    assert g.members["m1"].subscribed_regex is None and g.group_epoch == 1
