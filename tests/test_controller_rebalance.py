"""Pure pieces of preferred elections, reassignment arithmetic and the manual scheduler."""

import pytest

from controller.context import ControllerContext, ReplicaAssignment, TopicPartition
from controller.reassignment import reassign_to
from controller.rebalance import can_preferred_lead, imbalanced_partitions, split_election_request
from controller.scheduler import ManualScheduler
from controller.layout import BrokerRegistration, LeaderIsrAndControllerEpoch
from replicas.errors import ElectionNotNeeded, InvalidTopic, UnknownTopicOrPartition

pytestmark = pytest.mark.unit


def ctx_with(partitions, live=(1, 2, 3)):
    """partitions: {(topic, p): (replicas, leader, isr)}"""
    ctx = ControllerContext(epoch=1)
    ctx.live_brokers = {b: BrokerRegistration(b, "h", b, epoch=b) for b in live}
    for (t, p), (replicas, leader, isr) in partitions.items():
        tp = TopicPartition(t, p)
        ctx.set_assignment(tp, ReplicaAssignment(tuple(replicas)))
        ctx.leadership[tp] = LeaderIsrAndControllerEpoch(leader, 1, tuple(isr), 1, 0)
    return ctx


def test_imbalance_over_ten_percent_moves_only_electable_partitions():
    # broker 1 prefers 10 partitions; 1 led elsewhere = 10% → no action (strictly greater)
    parts = {("t", p): ([1, 2], 1, [1, 2]) for p in range(10)}
    parts[("t", 0)] = ([1, 2], 2, [1, 2])
    assert imbalanced_partitions(ctx_with(parts), 10) == []
    # 2 of 10 = 20% → both move if the preferred replica is in the ISR
    parts[("t", 1)] = ([1, 2], 2, [2])               # 1 is not in the ISR: cannot lead
    assert imbalanced_partitions(ctx_with(parts), 10) == [("t", 0)]
    ctx = ctx_with(parts)
    ctx.topics_to_delete.add("t")
    assert imbalanced_partitions(ctx, 10) == []
    ctx = ctx_with(parts)
    ctx.shutting_down.add(1)                         # not live for elections
    assert imbalanced_partitions(ctx, 10) == [] and not can_preferred_lead(ctx, ("t", 0))


def test_admin_election_answers_per_partition():
    ctx = ctx_with({("t", 0): ([1, 2], 1, [1, 2]), ("t", 1): ([1, 2], 2, [1, 2]),
                    ("d", 0): ([1], 1, [1])})
    ctx.topics_to_delete.add("d")
    electable, answers = split_election_request(ctx, [("t", 0), ("t", 1), ("d", 0), ("x", 3)])
    assert electable == [("t", 1)]
    assert isinstance(answers[("t", 0)], ElectionNotNeeded)
    assert isinstance(answers[("d", 0)], InvalidTopic)
    assert isinstance(answers[("x", 3)], UnknownTopicOrPartition)


@pytest.mark.parametrize("current, target, rs, adding, removing", [
    ((1, 2, 3), (4, 5, 6), (4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3)),
    ((1, 2, 3), (3, 2, 1), (3, 2, 1), (), ()),      # same set: nothing moves, order of TRS
    ((1, 2), (2, 3), (2, 3, 1), (3,), (1,)),
])
def test_reassign_to_is_kafkas_arithmetic(current, target, rs, adding, removing):
    got = reassign_to(ReplicaAssignment(current), target)
    assert (got.replicas, got.adding, got.removing) == (rs, adding, removing)
    assert got.target_replicas == tuple(target) and set(got.origin_replicas) == set(current)


def test_reassigning_an_ongoing_reassignment_keeps_the_origin():
    ongoing = reassign_to(ReplicaAssignment((1, 2)), (3, 4))
    again = reassign_to(ongoing, (2, 5))
    assert set(again.origin_replicas) == {1, 2} and again.target_replicas == (2, 5)
    assert set(again.removing) == {1} and set(again.adding) == {5}


def test_manual_scheduler_fires_in_time_order_and_cancels():
    s, fired = ManualScheduler(), []
    s.schedule(200, lambda: fired.append("b"))
    h = s.schedule(100, lambda: fired.append("a"))
    s.schedule(300, lambda: fired.append("c"))
    h.cancel()
    assert s.advance(250) == 1 and fired == ["b"]
    s.cancel_all()
    assert s.advance(1000) == 0 and fired == ["b"]
