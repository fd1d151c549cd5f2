"""The server-side assignors of KIP-848 consumer groups (Kafka 4's `group.consumer.assignors`:
`uniform`, the default, and `range`): the coordinator, not a member, computes each member's
target assignment.

Rules (Kafka's group-coordinator assignor/UniformAssignor.java,
UniformHomogeneousAssignmentBuilder.java, RangeAssignor.java, trunk 1eb7644):
- Input: the members (`MemberSpec`: member id, static instance id or None, the topic ids it
  subscribes to, its current TARGET assignment) and the partition count of every topic
  (`partitions`: topic id -> count). A member subscribed to a topic missing from
  `partitions` is a PartitionAssignorError (Kafka's PartitionAssignorException: the caller
  passes the subscribed topics that exist). Output: member id -> {topic id: frozenset of
  partitions}, every member present, empty topics left out.
- A group is HOMOGENEOUS when every member subscribes to the same topics.
- uniform, homogeneous (UniformHomogeneousAssignmentBuilder): P partitions over M members:
  each gets P // M, the first P % M members (in the order below) one more. Each member
  keeps what it had of a subscribed topic up to its quota; what is over the quota, and
  every partition of a topic no longer subscribed, is released. The released and the
  never-assigned partitions (topics by id, partitions ascending; released ones after) fill
  the members below quota in member order. Balance (sizes within 1) before stickiness.
  A partition two current assignments both hold (never so in a consistent group) is kept
  by the first member only.
- uniform, heterogeneous (members subscribe to different topics; Kafka's 926-line
  UniformHeterogeneousAssignmentBuilder, here its stated goals rather than its steps):
  each member keeps the partitions of topics it still subscribes to; each other partition
  (topics with fewer subscribers first, then by id, partitions ascending) goes to the
  subscribed member holding the fewest partitions; then, while some partition's owner has
  at least two more partitions than a member subscribed to its topic, it moves to the
  least loaded such member (the sum of squared sizes falls with each move, so it ends).
  Every partition of a subscribed topic is assigned; no member is given a partition of a
  topic it does not subscribe to.
- range: members sorted static first by instance id, then the rest by member id. Per
  topic, its subscribers in that order take contiguous blocks: P // S each, the first
  P % S one more (co-partitioned when every member subscribes to the same topics and the
  topics have equal counts). No stickiness beyond the order.
- Ties and orders where Kafka leaves them to Java's HashMap (the homogeneous member order,
  the order of unassigned partitions) are fixed here: members by member id, topics by id,
  partitions ascending. So the same input always gives the same assignment.
- Pure: stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

__all__ = ["MemberSpec", "PartitionAssignorError", "ASSIGNORS", "DEFAULT_ASSIGNOR",
           "assign", "uniform", "range_assign"]

Assignment = dict[str, frozenset[int]]


class PartitionAssignorError(Exception):
    """Kafka's PartitionAssignorException: the assignor cannot assign (a member subscribes
    to a topic the metadata does not have, or a partition was left over)."""


@dataclass(frozen=True)
class MemberSpec:
    member_id: str
    subscribed: frozenset[str]
    assignment: Mapping[str, frozenset[int]] = field(default_factory=dict)
    instance_id: str | None = None


def _check_topics(members: Mapping[str, MemberSpec], partitions: Mapping[str, int]) -> None:
    for spec in members.values():
        missing = sorted(t for t in spec.subscribed if t not in partitions)
        if missing:
            raise PartitionAssignorError(
                f"member {spec.member_id} is subscribed to topic {missing[0]} which doesn't "
                "exist in the topic metadata")


def _freeze(out: Mapping[str, Mapping[str, set[int]]]) -> dict[str, Assignment]:
    return {m: {t: frozenset(ps) for t, ps in sorted(a.items()) if ps} for m, a in out.items()}


def uniform(members: Mapping[str, MemberSpec], partitions: Mapping[str, int]
            ) -> dict[str, Assignment]:
    """Kafka's `uniform` assignor (see the module's rules)."""
    _check_topics(members, partitions)
    if not members:
        return {}
    subscriptions = {spec.subscribed for spec in members.values()}
    if len(subscriptions) == 1:
        return _uniform_homogeneous(members, partitions, next(iter(subscriptions)))
    return _uniform_heterogeneous(members, partitions)


def _uniform_homogeneous(members: Mapping[str, MemberSpec], partitions: Mapping[str, int],
                         topics: frozenset[str]) -> dict[str, Assignment]:
    order = sorted(members)
    if not topics:
        return {m: {} for m in order}
    owned = {(t, p) for spec in members.values() for t, ps in spec.assignment.items()
             if t in topics for p in ps if p < partitions[t]}
    unassigned = [(t, p) for t in sorted(topics) for p in range(partitions[t])
                  if (t, p) not in owned]
    total = sum(partitions[t] for t in topics)
    base, extra = divmod(total, len(order))
    out: dict[str, dict[str, set[int]]] = {}
    unfilled: list[tuple[str, int]] = []
    kept_by_earlier: set[tuple[str, int]] = set()
    for member_id in order:
        quota = base + (1 if extra > 0 else 0)
        extra -= 1 if extra > 0 else 0
        kept: dict[str, set[int]] = {}
        for t in sorted(members[member_id].assignment):
            if t not in topics:
                continue
            for p in sorted(members[member_id].assignment[t]):
                if p >= partitions[t] or (t, p) in kept_by_earlier:
                    continue          # a partition gone, or two members claimed one: kept once
                kept_by_earlier.add((t, p))
                if quota > 0:
                    kept.setdefault(t, set()).add(p)
                    quota -= 1
                else:
                    unassigned.append((t, p))
        out[member_id] = kept
        if quota > 0:
            unfilled.append((member_id, quota))
    i = 0
    for member_id, quota in unfilled:
        for _ in range(quota):
            if i == len(unassigned):
                break
            t, p = unassigned[i]
            out[member_id].setdefault(t, set()).add(p)
            i += 1
    if i < len(unassigned):
        raise PartitionAssignorError("Partitions were left unassigned")
    return _freeze(out)


def _uniform_heterogeneous(members: Mapping[str, MemberSpec], partitions: Mapping[str, int]
                           ) -> dict[str, Assignment]:
    order = sorted(members)
    owner: dict[tuple[str, int], str] = {}
    for member_id in order:
        spec = members[member_id]
        for t, ps in spec.assignment.items():
            if t not in spec.subscribed:
                continue
            for p in ps:
                if p < partitions[t] and (t, p) not in owner:
                    owner[(t, p)] = member_id
    subscribers = {t: [m for m in order if t in members[m].subscribed]
                   for t in sorted({t for s in members.values() for t in s.subscribed})}
    count = {m: 0 for m in order}
    for m in owner.values():
        count[m] += 1
    for t in sorted(subscribers, key=lambda t: (len(subscribers[t]), t)):
        for p in range(partitions[t]):
            if (t, p) not in owner:
                m = min(subscribers[t], key=lambda m: (count[m], m))
                owner[(t, p)] = m
                count[m] += 1
    moved = True
    while moved:
        moved = False
        for tp in sorted(owner):
            current = owner[tp]
            target = min(subscribers[tp[0]], key=lambda m: (count[m], m))
            if count[target] + 1 < count[current]:
                owner[tp] = target
                count[current] -= 1
                count[target] += 1
                moved = True
    out: dict[str, dict[str, set[int]]] = {m: {} for m in order}
    for (t, p), m in owner.items():
        out[m].setdefault(t, set()).add(p)
    return _freeze(out)


def range_assign(members: Mapping[str, MemberSpec], partitions: Mapping[str, int]
                 ) -> dict[str, Assignment]:
    """Kafka's server-side `range` assignor (see the module's rules)."""
    _check_topics(members, partitions)
    order = sorted(members, key=lambda m: ((0, members[m].instance_id)
                                           if members[m].instance_id is not None else (1, m)))
    out: dict[str, dict[str, set[int]]] = {m: {} for m in order}
    for t in sorted({t for s in members.values() for t in s.subscribed}):
        subs = [m for m in order if t in members[m].subscribed]
        base, extra = divmod(partitions[t], len(subs))
        start = 0
        for i, m in enumerate(subs):
            end = min(start + base + (1 if i < extra else 0), partitions[t])
            if start < end:
                out[m][t] = set(range(start, end))
            start = end
    return _freeze(out)


ASSIGNORS: dict[str, Callable[[Mapping[str, MemberSpec], Mapping[str, int]],
                              dict[str, Assignment]]] = {
    "uniform": uniform,
    "range": range_assign,
}
DEFAULT_ASSIGNOR = "uniform"


def assign(name: str, members: Mapping[str, MemberSpec], partitions: Mapping[str, int]
           ) -> dict[str, Assignment]:
    """The assignment of assignor `name` (a key of ASSIGNORS; anything else is a
    PartitionAssignorError, as an unknown server assignor is in Kafka)."""
    fn = ASSIGNORS.get(name)
    if fn is None:
        raise PartitionAssignorError(f"unknown server assignor {name!r}: one of "
                                     f"{sorted(ASSIGNORS)}")
    return fn(members, partitions)
