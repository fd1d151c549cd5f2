"""KIP-848 reconciliation (coordinator/consumer_reconciliation.py): Kafka's
CurrentAssignmentBuilderTest cases as a table, the member-state table, the partition ledger,
and a seeded property: members joining, leaving and reconciling in any order under the
uniform assignor never hold a partition two at a time, and the group converges to its
target once the members stop changing."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from coordinator.consumer_assignors import MemberSpec, uniform
from coordinator.consumer_reconciliation import (FencedMemberEpoch, GroupState,
                                                 InvalidMemberTransition, MemberAssignment,
                                                 MemberState, PartitionEpochs, VALID_PREVIOUS,
                                                 group_state, reconcile, transition)

pytestmark = pytest.mark.unit
S = MemberState


def a(**topics) -> dict:
    return {t: frozenset(ps) for t, ps in topics.items() if ps}


def member(state=S.STABLE, epoch=10, prev=10, assigned=None, pending=None):
    return MemberAssignment("member", epoch, prev, state, assigned or {}, pending or {})


def FREE(topic: str, partition: int) -> int:
    return -1


def held_by_other(*tps):
    return lambda t, p: 10 if (t, p) in tps else -1


# (name, member before, target epoch, target, partition epoch, owned, expected after)
CASES = [
    ("stable to stable", member(assigned=a(t1=[1, 2, 3], t2=[4, 5, 6])), 11,
     a(t1=[1, 2, 3], t2=[4, 5, 6]), FREE, None,
     member(epoch=11, prev=10, assigned=a(t1=[1, 2, 3], t2=[4, 5, 6]))),
    ("stable to stable with new partitions", member(assigned=a(t1=[1, 2, 3], t2=[4, 5, 6])),
     11, a(t1=[1, 2, 3, 4], t2=[4, 5, 6, 7]), FREE, None,
     member(epoch=11, assigned=a(t1=[1, 2, 3, 4], t2=[4, 5, 6, 7]))),
    ("stable to unrevoked", member(assigned=a(t1=[1, 2, 3], t2=[4, 5, 6])), 11,
     a(t1=[2, 3, 4], t2=[5, 6, 7]), FREE, None,
     member(S.UNREVOKED_PARTITIONS, 10, 10, a(t1=[2, 3], t2=[5, 6]), a(t1=[1], t2=[4]))),
    ("stable to unreleased", member(assigned=a(t1=[1, 2, 3], t2=[4, 5, 6])), 11,
     a(t1=[1, 2, 3, 4], t2=[4, 5, 6, 7]), held_by_other(("t1", 4), ("t2", 7)), None,
     member(S.UNRELEASED_PARTITIONS, 11, 10, a(t1=[1, 2, 3], t2=[4, 5, 6]))),
    ("stable, revoked ones already gone from owned: assigned at once",
     member(assigned=a(t1=[1, 2, 3], t2=[4, 5, 6])), 11, a(t1=[1, 2, 3, 4], t2=[4, 5, 6, 7]),
     held_by_other(("t1", 4), ("t2", 7)), {"t1": [1, 2, 3], "t2": [4, 5, 6]},
     member(S.UNRELEASED_PARTITIONS, 11, 10, a(t1=[1, 2, 3], t2=[4, 5, 6]))),
    ("unrevoked to stable",
     member(S.UNREVOKED_PARTITIONS, 10, 10, a(t1=[2, 3], t2=[5, 6]), a(t1=[1], t2=[4])), 11,
     a(t1=[2, 3], t2=[5, 6]), FREE, {"t1": [2, 3], "t2": [5, 6]},
     member(S.STABLE, 11, 10, a(t1=[2, 3], t2=[5, 6]))),
    ("remains unrevoked while it owns a revoked one",
     member(S.UNREVOKED_PARTITIONS, 10, 10, a(t1=[2, 3], t2=[5, 6]), a(t1=[1], t2=[4])), 11,
     a(t1=[3], t2=[6]), FREE, {"t1": [1, 2, 3], "t2": [5, 6]},
     member(S.UNREVOKED_PARTITIONS, 10, 10, a(t1=[2, 3], t2=[5, 6]), a(t1=[1], t2=[4]))),
    ("remains unrevoked without owned partitions",
     member(S.UNREVOKED_PARTITIONS, 10, 10, a(t1=[2, 3], t2=[5, 6]), a(t1=[1], t2=[4])), 11,
     a(t1=[3], t2=[6]), FREE, None,
     member(S.UNREVOKED_PARTITIONS, 10, 10, a(t1=[2, 3], t2=[5, 6]), a(t1=[1], t2=[4]))),
    ("unrevoked to unrevoked at epoch + 1",
     member(S.UNREVOKED_PARTITIONS, 10, 10, a(t1=[2, 3], t2=[5, 6]), a(t1=[1], t2=[4])), 12,
     a(t1=[3], t2=[6]), FREE, {"t1": [2, 3], "t2": [5, 6]},
     member(S.UNREVOKED_PARTITIONS, 11, 10, a(t1=[3], t2=[6]), a(t1=[2], t2=[5]))),
    ("unrevoked to unreleased",
     member(S.UNREVOKED_PARTITIONS, 11, 10, a(t1=[2, 3], t2=[5, 6]), a(t1=[1], t2=[4])), 11,
     a(t1=[1, 2, 3], t2=[5, 6, 7]), held_by_other(("t1", 1), ("t2", 7)),
     {"t1": [2, 3], "t2": [5, 6]},
     member(S.UNRELEASED_PARTITIONS, 11, 11, a(t1=[2, 3], t2=[5, 6]))),
    ("unreleased to stable", member(S.UNRELEASED_PARTITIONS, 11, 11, a(t1=[2, 3], t2=[5, 6])),
     12, a(t1=[2, 3], t2=[5, 6]), FREE, None,
     member(S.STABLE, 12, 11, a(t1=[2, 3], t2=[5, 6]))),
    ("unreleased to stable with the released partitions",
     member(S.UNRELEASED_PARTITIONS, 11, 11, a(t1=[2, 3], t2=[5, 6])), 11,
     a(t1=[2, 3, 4], t2=[5, 6, 7]), FREE, None,
     member(S.STABLE, 11, 11, a(t1=[2, 3, 4], t2=[5, 6, 7]))),
    ("unreleased stays unreleased", member(S.UNRELEASED_PARTITIONS, 11, 11,
                                           a(t1=[2, 3], t2=[5, 6])), 11,
     a(t1=[2, 3, 4], t2=[5, 6, 7]), held_by_other(("t1", 4), ("t2", 7)), None,
     member(S.UNRELEASED_PARTITIONS, 11, 11, a(t1=[2, 3], t2=[5, 6]))),
    ("unreleased to unrevoked", member(S.UNRELEASED_PARTITIONS, 11, 11,
                                       a(t1=[2, 3], t2=[5, 6])), 12,
     a(t1=[3], t2=[6]), FREE, None,
     member(S.UNREVOKED_PARTITIONS, 11, 11, a(t1=[3], t2=[6]), a(t1=[2], t2=[5]))),
    ("unknown state, owning nothing: starts over at the target",
     member(S.UNKNOWN, 11, 11, a(t1=[2, 3])), 12, a(t1=[3, 4]), FREE, {},
     member(S.STABLE, 12, 11, a(t1=[3, 4]))),
]


@pytest.mark.parametrize("name, before, epoch, target, partition_epoch, owned, after",
                         CASES, ids=[c[0] for c in CASES])
def test_reconcile_as_kafka(name, before, epoch, target, partition_epoch, owned, after):
    got = reconcile(before, epoch, target, partition_epoch, owned)
    assert got == after


def test_stable_at_the_target_epoch_is_left_as_is():
    m = member(assigned=a(t1=[1]))
    assert reconcile(m, 10, a(t1=[1, 2]), FREE, None) is m


@pytest.mark.parametrize("owned", [None, {"t1": [2]}])
def test_an_unknown_state_owning_partitions_is_fenced(owned):
    with pytest.raises(FencedMemberEpoch):
        reconcile(member(S.UNKNOWN, assigned=a(t1=[2])), 11, a(t1=[2]), FREE, owned)


@pytest.mark.parametrize("current", list(S))
@pytest.mark.parametrize("target", list(S))
def test_member_transitions_follow_the_table(current, target):
    if current in VALID_PREVIOUS[target]:
        assert transition("m", current, target) is target
    else:
        with pytest.raises(InvalidMemberTransition):
            transition("m", current, target)


def test_the_ledger_refuses_a_partition_held_twice():
    ledger = PartitionEpochs()
    first = MemberAssignment("a", 3, 2, S.STABLE, a(t=[0, 1]))
    ledger.update(None, first)
    assert ledger.epoch("t", 1) == 3 and ledger.epoch("t", 2) == -1
    with pytest.raises(ValueError, match="already held"):
        ledger.update(None, MemberAssignment("b", 4, 3, S.STABLE, a(t=[1, 2])))
    with pytest.raises(ValueError, match="cannot remove"):
        ledger.remove(a(t=[0]), 9)
    ledger.update(first, None)
    assert ledger.held() == {}


@pytest.mark.parametrize("members, group_epoch, target_epoch, state", [
    ([], 3, 3, GroupState.EMPTY),
    ([MemberAssignment("a", 3)], 4, 3, GroupState.ASSIGNING),
    ([MemberAssignment("a", 3), MemberAssignment("b", 2)], 3, 3, GroupState.RECONCILING),
    ([MemberAssignment("a", 3, state=S.UNRELEASED_PARTITIONS)], 3, 3, GroupState.RECONCILING),
    ([MemberAssignment("a", 3), MemberAssignment("b", 3)], 3, 3, GroupState.STABLE),
])
def test_group_state_derives_from_members(members, group_epoch, target_epoch, state):
    assert group_state(members, group_epoch, target_epoch) is state


class _Client:
    """A member's client: it consumes what it owns, gives up what it is asked to give up
    only when its (random) turn comes, and reports what it owns in each heartbeat."""

    def __init__(self, member_id: str):
        self.member_id = member_id
        self.owned: dict[str, frozenset[int]] = {}

    def take(self, m: MemberAssignment) -> None:
        # a client consumes only what the coordinator assigned; revocation: drop pending
        self.owned = {t: ps for t, ps in m.assigned.items()}


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), topics=st.integers(1, 3), members=st.integers(1, 6))
def test_no_partition_is_held_twice_and_the_group_converges(seed, topics, members):
    rng = random.Random(seed)
    partitions = {f"t{i}": rng.randint(1, 8) for i in range(topics)}
    subscribed = frozenset(partitions)
    ledger = PartitionEpochs()
    state: dict[str, MemberAssignment] = {}
    clients: dict[str, _Client] = {}
    group_epoch, target_epoch, target = 0, 0, {}
    next_id = 0

    def retarget():
        nonlocal group_epoch, target_epoch, target
        group_epoch += 1
        specs = {mid: MemberSpec(mid, subscribed, target.get(mid, {})) for mid in state}
        target = uniform(specs, partitions)
        target_epoch = group_epoch

    def heartbeat(mid):
        c, m = clients[mid], state[mid]
        new = reconcile(m, target_epoch, target.get(mid, {}), ledger.epoch, c.owned)
        ledger.update(m, new)
        state[mid] = new
        if rng.random() < 0.7:        # the client acts on the answer now, or next time
            c.take(new)

    for step in range(60):
        roll = rng.random()
        if (roll < 0.2 and len(state) < members) or not state:
            mid = f"m{next_id}"
            next_id += 1
            state[mid] = MemberAssignment(mid, 0, -1, S.STABLE)
            clients[mid] = _Client(mid)
            retarget()
        elif roll < 0.28 and len(state) > 1:
            mid = rng.choice(sorted(state))
            ledger.update(state.pop(mid), None)      # leaving frees its partitions
            clients.pop(mid)
            retarget()
        else:
            heartbeat(rng.choice(sorted(state)))
        owners: dict[tuple[str, int], str] = {}
        for mid, c in clients.items():
            for t, ps in c.owned.items():
                for p in ps:
                    assert (t, p) not in owners, (f"{t}-{p} consumed by {owners[(t, p)]} "
                                                  f"and {mid} at step {step}")
                    owners[(t, p)] = mid
    for _ in range(20 * (len(state) + 1)):               # no more changes: it converges
        for mid in sorted(state):
            clients[mid].take(state[mid])
            heartbeat(mid)
            clients[mid].take(state[mid])
    assert group_state(state.values(), group_epoch, target_epoch) is GroupState.STABLE
    assert {mid: dict(m.assigned) for mid, m in state.items()} == \
        {mid: dict(target.get(mid, {})) for mid in state}
