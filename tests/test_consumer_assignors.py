"""The KIP-848 server-side assignors (coordinator/consumer_assignors.py): Kafka's
RangeAssignorTest and uniform cases as tables, then properties against what the module
promises: every subscribed partition assigned exactly once and only to a subscriber,
balance, stickiness, determinism."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from coordinator.consumer_assignors import (ASSIGNORS, MemberSpec, PartitionAssignorError,
                                            assign, range_assign, uniform)

pytestmark = pytest.mark.unit


def spec(mid, *topics, instance=None, **assigned):
    return MemberSpec(mid, frozenset(topics), {t: frozenset(p) for t, p in assigned.items()},
                      instance)


def a(**topics):
    return {t: frozenset(ps) for t, ps in topics.items() if ps}


def group(*specs):
    return {s.member_id: s for s in specs}


# -- range ---------------------------------------------------------------------------------
@pytest.mark.parametrize("members, partitions, expected", [
    (group(spec("A")), {"t1": 3}, {"A": {}}),
    (group(spec("A", "t1", "t2"), spec("B", "t1", "t2")), {"t1": 3, "t2": 3},
     {"A": a(t1=[0, 1], t2=[0, 1]), "B": a(t1=[2], t2=[2])}),
    (group(spec("A", "t1", "t2"), spec("B", "t3"), spec("C", "t2", "t3")),
     {"t1": 3, "t2": 3, "t3": 2},
     {"A": a(t1=[0, 1, 2], t2=[0, 1]), "B": a(t3=[0]), "C": a(t2=[2], t3=[1])}),
    (group(spec("A", "t1"), spec("B", "t1"), spec("C", "t1")), {"t1": 2},
     {"A": a(t1=[0]), "B": a(t1=[1]), "C": {}}),
    # static members first, by instance id; then the rest by member id
    (group(spec("m1", "t1"), spec("m2", "t1", instance="i2"), spec("m3", "t1", instance="i1")),
     {"t1": 5}, {"m3": a(t1=[0, 1]), "m2": a(t1=[2, 3]), "m1": a(t1=[4])}),
], ids=["one member no topic", "two members two topics", "three members different topics",
        "more members than partitions", "static members first"])
def test_range_as_kafka(members, partitions, expected):
    assert range_assign(members, partitions) == expected


def test_range_keeps_a_static_members_partitions_across_a_new_member_id():
    before = range_assign(group(spec("a", "t", instance="iA"), spec("c", "t", instance="iC"),
                                spec("b", "t")), {"t": 5})
    after = range_assign(group(spec("a1", "t", instance="iA"), spec("c", "t", instance="iC"),
                               spec("b", "t")), {"t": 5})
    assert after["a1"] == before["a"] and after["c"] == before["c"] and after["b"] == before["b"]


# -- uniform -------------------------------------------------------------------------------
@pytest.mark.parametrize("members, partitions, expected", [
    (group(spec("A", "t1"), spec("B", "t1")), {"t1": 3},
     {"A": a(t1=[0, 1]), "B": a(t1=[2])}),
    # sticky: B keeps what it had, A fills up
    (group(spec("A", "t1"), spec("B", "t1", t1=[0, 1])), {"t1": 4},
     {"A": a(t1=[2, 3]), "B": a(t1=[0, 1])}),
    # over quota: the extra one is released to the new member
    (group(spec("A", "t1", t1=[0, 1, 2]), spec("B", "t1")), {"t1": 3},
     {"A": a(t1=[0, 1]), "B": a(t1=[2])}),
    # an unsubscribed topic's partitions are released
    (group(spec("A", "t1", t2=[0]), spec("B", "t1")), {"t1": 2, "t2": 1},
     {"A": a(t1=[0]), "B": a(t1=[1])}),
    # heterogeneous: only subscribers get a topic, the loads even out
    (group(spec("A", "t1", "t2"), spec("B", "t2")), {"t1": 2, "t2": 2},
     {"A": a(t1=[0, 1]), "B": a(t2=[0, 1])}),
], ids=["fresh", "sticky", "over quota", "unsubscribed topic", "heterogeneous"])
def test_uniform_cases(members, partitions, expected):
    assert uniform(members, partitions) == expected


@pytest.mark.parametrize("fn", [uniform, range_assign])
def test_a_topic_missing_from_the_metadata_is_an_assignor_error(fn):
    with pytest.raises(PartitionAssignorError, match="doesn't exist"):
        fn(group(spec("A", "gone")), {"t": 1})


def test_assign_by_name():
    members = group(spec("A", "t"), spec("B", "t"))
    assert assign("range", members, {"t": 2}) == range_assign(members, {"t": 2})
    assert assign("uniform", members, {"t": 2}) == uniform(members, {"t": 2})
    assert sorted(ASSIGNORS) == ["range", "uniform"]
    with pytest.raises(PartitionAssignorError, match="unknown server assignor"):
        assign("sticky", members, {"t": 2})


def test_no_members_no_assignment():
    assert uniform({}, {"t": 3}) == {} and range_assign({}, {"t": 3}) == {}


# -- properties ----------------------------------------------------------------------------
TOPICS = ["t0", "t1", "t2", "t3"]


@st.composite
def groups(draw, homogeneous: bool):
    partitions = {t: draw(st.integers(1, 9)) for t in TOPICS[:draw(st.integers(1, 4))]}
    n = draw(st.integers(1, 7))
    common = frozenset(draw(st.sets(st.sampled_from(sorted(partitions)), min_size=1)))
    members = {}
    for i in range(n):
        subs = common if homogeneous else frozenset(
            draw(st.sets(st.sampled_from(sorted(partitions)), min_size=0)))
        prior = {t: frozenset(draw(st.sets(st.integers(0, partitions[t] - 1), max_size=4)))
                 for t in draw(st.sets(st.sampled_from(sorted(partitions)), max_size=2))}
        members[f"m{i}"] = MemberSpec(f"m{i}", subs, prior,
                                      draw(st.one_of(st.none(), st.sampled_from(["x", "y"]))
                                           ) if i % 3 == 0 else None)
    return members, partitions


def _check_exact_cover(members, partitions, out):
    assert set(out) == set(members)
    seen = {}
    for mid, asg in out.items():
        for t, ps in asg.items():
            assert t in members[mid].subscribed, f"{mid} got {t} it does not subscribe to"
            assert ps, "empty topics are left out"
            for p in ps:
                assert 0 <= p < partitions[t]
                assert (t, p) not in seen, f"{t}-{p} given to {seen[(t, p)]} and {mid}"
                seen[(t, p)] = mid
    wanted = {(t, p) for s in members.values() for t in s.subscribed
              for p in range(partitions[t])}
    assert set(seen) == wanted


def _size(asg) -> int:
    return sum(len(ps) for ps in asg.values())


@settings(max_examples=150, deadline=None)
@given(groups(homogeneous=True))
def test_uniform_homogeneous_covers_balances_and_sticks(g):
    members, partitions = g
    out = uniform(members, partitions)
    _check_exact_cover(members, partitions, out)
    sizes = [_size(x) for x in out.values()]
    assert max(sizes) - min(sizes) <= 1
    # stickiness: a member keeps as many of its (consistent) partitions as its quota allows
    total = sum(partitions[t] for t in next(iter(members.values())).subscribed)
    claimed: set = set()
    for mid in sorted(members):
        own = {(t, p) for t, ps in members[mid].assignment.items()
               if t in members[mid].subscribed for p in ps} - claimed
        claimed |= own
        kept = {(t, p) for t, ps in out[mid].items() for p in ps} & own
        assert len(kept) >= min(len(own), total // len(members))
    assert uniform(members, partitions) == out


@settings(max_examples=150, deadline=None)
@given(groups(homogeneous=False))
def test_uniform_heterogeneous_covers_and_cannot_be_improved_by_one_move(g):
    members, partitions = g
    out = uniform(members, partitions)
    _check_exact_cover(members, partitions, out)
    size = {mid: _size(x) for mid, x in out.items()}
    for mid, asg in out.items():
        for t in asg:
            for other in members:
                if t in members[other].subscribed:
                    assert size[other] + 1 >= size[mid], (
                        f"{mid} holds {size[mid]}, {other} ({size[other]}) could take {t}")
    assert uniform(members, partitions) == out


@settings(max_examples=150, deadline=None)
@given(st.one_of(groups(homogeneous=True), groups(homogeneous=False)))
def test_range_covers_with_contiguous_blocks(g):
    members, partitions = g
    out = range_assign(members, partitions)
    _check_exact_cover(members, partitions, out)
    for asg in out.values():
        for t, ps in asg.items():
            assert sorted(ps) == list(range(min(ps), max(ps) + 1))
    for t in partitions:
        counts = [len(asg.get(t, ())) for mid, asg in out.items() if t in members[mid].subscribed]
        if counts:
            assert max(counts) - min(counts) <= 1
