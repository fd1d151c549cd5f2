"""Kafka's client-side partition assignors (pure): who gets which partition in a group.

The leader member runs the assignor the broker chose on every member's Subscription and
answers each an Assignment (rayka/client/consumer_protocol.py, the bytes they travel in).
Rules:
- Assignors have Kafka's names (JoinGroup's protocol names): "range", "roundrobin",
  "cooperative-sticky". `assign(members, partitions_per_topic)` answers every member; only
  topics someone subscribes to and that have partitions are assigned (AbstractPartitionAssignor).
- Member order is MemberInfo's: static members (group.instance.id) first by instance id, then
  dynamic ones by member id. Strings compare as Java's String.compareTo (UTF-16 code units).
- cooperative-sticky is AbstractStickyAssignor + CooperativeStickyAssignor: the constrained
  algorithm when every member subscribes to the same topics, the general one otherwise. Owned
  partitions are kept up to the quota; claims conflict by generation (the higher wins, equal
  generations void the claim). A partition moving between members is withheld from its new
  owner this round: the old owner revokes it and rejoins, the new owner gets it next round.
  Where Kafka's result depends on which member its HashMap visits first, that order is
  emulated (a HashMap<String, _> filled in `members` order).
- Differences from Kafka: no rack-aware assignment (KIP-881 needs the replicas' racks, which
  `assign` is not given; `rack` travels unused, as in Kafka when brokers have no racks). Range
  lists a member's topics sorted (Java: HashMap order). Of several partitions that could move
  back along a pair of members Java takes a HashSet's first, this the smallest. Kafka compares
  subscriptions with the first non-empty one (a member with no topics can get partitions);
  here all are compared. The general algorithm returns a partition to its previous owner only
  if that one still subscribes to its topic (Kafka does not check). Claims past a topic's
  partition count are ignored. The max generation is per call (Java keeps it per instance).
"""

from __future__ import annotations

import struct
from typing import Mapping

from rayka.client.consumer_protocol import (DEFAULT_GENERATION, Assignment, Subscription,
                                            java_order, partition_order)
from rayka.client.types import TopicPartition

__all__ = ["RangeAssignor", "RoundRobinAssignor", "CooperativeStickyAssignor", "ASSIGNORS",
           "get_assignor"]


def _gen(g: int | None) -> int:
    return DEFAULT_GENERATION if g is None else g  # Optional<Integer>.orElse(-1)


def _hashmap_order(keys: list[str]) -> list[str]:
    """How a java.util.HashMap<String, _> with `keys` put in this order iterates: by bucket
    (spread String.hashCode & capacity-1; 16, doubled past 3/4 full), then insertion order
    (treeified buckets, 9+ keys in one bucket of a 64+ table, are not emulated)."""
    cap = 16
    while len(keys) > cap * 3 // 4:
        cap *= 2

    def bucket(key: str) -> int:
        h = 0
        for (unit,) in struct.iter_unpack(">H", java_order(key)):
            h = (31 * h + unit) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (cap - 1)
    return sorted(keys, key=bucket)  # stable: insertion order within a bucket


# -- range and roundrobin ---------------------------------------------------------------------
def _member_key(member_id: str, sub: Subscription):
    # AbstractPartitionAssignor.MemberInfo.compareTo; the member id breaks ties between two
    # members claiming one instance id (Java leaves them in HashMap order).
    if sub.group_instance_id is not None:
        return (0, java_order(sub.group_instance_id), java_order(member_id))
    return (1, java_order(member_id), b"")


def _subscribed_counts(members, partitions_per_topic: Mapping[str, int]) -> dict[str, int]:
    # AbstractPartitionAssignor.assign(Cluster, ...): subscribed topics with partitions only.
    wanted = {t for s in members.values() for t in s.topics}
    return {t: n for t, n in partitions_per_topic.items() if t in wanted and n > 0}


def _answer(lists: Mapping[str, list[TopicPartition]]) -> dict[str, Assignment]:
    return {m: Assignment(tuple(ps)) for m, ps in lists.items()}  # no user data, as Java's


class RangeAssignor:
    """RangeAssignor: per topic, its subscribers in member order each take a contiguous block of
    P // C partitions, the first P % C one more."""
    name = "range"
    rebalance_protocols = ("eager",)

    def assign(self, members: Mapping[str, Subscription],
               partitions_per_topic: Mapping[str, int]) -> dict[str, Assignment]:
        counts = _subscribed_counts(members, partitions_per_topic)
        out: dict[str, list[TopicPartition]] = {m: [] for m in members}
        for topic in sorted(counts, key=java_order):
            consumers = sorted((m for m, s in members.items() if topic in s.topics),
                               key=lambda m: _member_key(m, members[m]))
            per, extra = divmod(counts[topic], len(consumers))
            start = 0
            for i, member in enumerate(consumers):  # maxAssignable: per, +1 while extras last
                n = per + (1 if i < extra else 0)
                out[member] += [TopicPartition(topic, p) for p in range(start, start + n)]
                start += n
        return _answer(out)


class RoundRobinAssignor:
    """RoundRobinAssignor: every partition of every subscribed topic (topics sorted) dealt to the
    members in member order, a member not subscribed to the partition's topic is skipped."""
    name = "roundrobin"
    rebalance_protocols = ("eager",)

    def assign(self, members: Mapping[str, Subscription],
               partitions_per_topic: Mapping[str, int]) -> dict[str, Assignment]:
        counts = _subscribed_counts(members, partitions_per_topic)
        out: dict[str, list[TopicPartition]] = {m: [] for m in members}
        ring = sorted(members, key=lambda m: _member_key(m, members[m]))
        at = 0  # Kafka's CircularIterator
        for topic in sorted(counts, key=java_order):
            for p in range(counts[topic]):
                while topic not in members[ring[at]].topics:
                    at = (at + 1) % len(ring)
                out[ring[at]].append(TopicPartition(topic, p))
                at = (at + 1) % len(ring)
        return _answer(out)


# -- cooperative-sticky -----------------------------------------------------------------------
def _member_generation(sub: Subscription) -> int | None:
    """CooperativeStickyAssignor.memberData's generation: the v2+ field, else the int32 the
    assignor put in user_data (v1 members), -1 when that cannot be read, None without either."""
    if sub.generation is not None or sub.user_data is None:
        return sub.generation
    if len(sub.user_data) < 4:
        return DEFAULT_GENERATION
    return struct.unpack_from(">i", sub.user_data)[0]


class CooperativeStickyAssignor:
    """CooperativeStickyAssignor (AbstractStickyAssignor's algorithms, cooperative protocol)."""
    name = "cooperative-sticky"
    rebalance_protocols = ("cooperative", "eager")

    @staticmethod
    def subscription_user_data(generation: int = DEFAULT_GENERATION) -> bytes:
        """What the Java assignor puts in user_data: its last generation as an int32 (read only
        when the subscription is below v2 and so has no GenerationId field)."""
        return struct.pack(">i", generation)

    def assign(self, members: Mapping[str, Subscription],
               partitions_per_topic: Mapping[str, int]) -> dict[str, Assignment]:
        if not members:
            return {}
        counts = _subscribed_counts(members, partitions_per_topic)
        order = _hashmap_order(list(members))  # Java iterates its HashMap of subscriptions
        owned, doubly_claimed, max_gen = self._valid_ownership(members, counts, order)
        first = frozenset(members[order[0]].topics)
        if all(frozenset(members[m].topics) == first for m in order):
            transferring: dict[TopicPartition, str] = {}
            lists = _constrained(counts, owned, doubly_claimed, order, transferring)
        else:
            lists = _General(counts, members, owned, order, max_gen).build()
            transferring = self._transferring(members, lists)
        for tp, member in transferring.items():  # adjustAssignment: revoke first, give later
            lists[member].remove(tp)
        return _answer({m: lists[m] for m in members})

    @staticmethod
    def _valid_ownership(members, counts, order):  # -> owned lists, doubly claimed, max gen
        """allSubscriptionsEqual's ownership pass: each member's claimed partitions that still
        exist; a partition claimed twice goes to the higher generation, or to nobody (and into
        `doubly_claimed`) when the generations are equal."""
        owned: dict[str, list[TopicPartition]] = {m: [] for m in order}
        claimer: dict[TopicPartition, str] = {}
        doubly_claimed: set[TopicPartition] = set()
        max_gen = DEFAULT_GENERATION
        for m in order:
            gen = _gen(_member_generation(members[m]))
            max_gen = max(max_gen, gen)
            for tp in members[m].owned_partitions:
                if not 0 <= tp.partition < counts.get(tp.topic, 0):
                    continue
                other = claimer.get(tp)
                other_gen = 0 if other is None else _gen(members[other].generation)  # raw field
                if other is None or gen > other_gen:
                    owned[m].append(tp)
                elif gen == other_gen:
                    doubly_claimed.add(tp)
                else:
                    continue  # the other claim is newer
                if other is not None and tp in owned[other]:
                    owned[other].remove(tp)  # java.util.List.remove: the first occurrence
                claimer[tp] = m
        return owned, doubly_claimed, max_gen

    @staticmethod
    def _transferring(members, lists) -> dict[TopicPartition, str]:
        """computePartitionsTransferringOwnership (general case): new to one, lost by another."""
        added: dict[TopicPartition, str] = {}
        revoked: set[TopicPartition] = set()
        for m, assigned in lists.items():
            claimed = set(members[m].owned_partitions)
            added.update((tp, m) for tp in assigned if tp not in claimed)
            revoked.update(claimed - set(assigned))
        return {tp: m for tp, m in added.items() if tp in revoked}


def _constrained(counts, owned, doubly_claimed, order, transferring):
    """ConstrainedAssignmentBuilder (all members subscribe to the same topics), without racks."""
    total = sum(counts.values())
    min_quota, extra = divmod(total, len(order))
    max_quota = min_quota + (1 if extra else 0)
    expected_over, over = extra, 0  # members that may / do hold max_quota when it > min_quota
    assignment: dict[str, list[TopicPartition]] = {m: [] for m in order}
    maybe_revoked: dict[TopicPartition, str] = {}
    under: list[str] = []    # unfilledMembersWithUnderMinQuotaPartitions
    exactly: list[str] = []  # unfilledMembersWithExactlyMinQuotaPartitions
    assigned: set[TopicPartition] = set()
    for m in order:  # assignOwnedPartitions: keep owned partitions up to the quota
        mine = sorted(owned[m], key=lambda tp: (tp.partition, java_order(tp.topic)))
        mine = [tp for tp in mine if tp not in doubly_claimed]
        if len(mine) < min_quota:  # keep all, fill later
            keep = mine
            under.append(m)
        elif len(mine) >= max_quota and over < expected_over:  # one of the max_quota members
            over += 1
            if over == expected_over:
                exactly.clear()
            keep = mine[:max_quota]
        else:  # min_quota, maybe one more later
            keep = mine[:min_quota]
            if over < expected_over:
                exactly.append(m)
        maybe_revoked.update((tp, m) for tp in mine[len(keep):])
        assignment[m] += keep
        assigned.update(keep)
    unassigned = [TopicPartition(t, p) for t in sorted(counts, key=java_order)
                  for p in range(counts[t]) if TopicPartition(t, p) not in assigned]
    under.sort(key=java_order)
    exactly.sort(key=java_order)
    # assignRoundRobin, with Java's iterator over `under` as (next index, last returned index).
    nxt, last = 0, None
    for tp in unassigned:
        if nxt < len(under):
            m, last, nxt = under[nxt], nxt, nxt + 1
        elif not under and not exactly:
            raise RuntimeError("No more unfilled consumers to be assigned.")
        elif not under:
            m = exactly.pop(0)
        else:
            m, last, nxt = under[0], 0, 1
        assignment[m].append(tp)  # assignNewPartition: a move, or a voided claim, waits
        if (tp in maybe_revoked and maybe_revoked[tp] != m) or tp in doubly_claimed:
            transferring[tp] = m
        if len(assignment[m]) == min_quota:
            if last is None:
                raise RuntimeError("member reached minQuota outside the unfilled list")
            del under[last]
            nxt, last = last, None
            exactly.append(m)
        elif len(assignment[m]) == max_quota:
            over += 1
    if under and (over != expected_over or any(len(assignment[m]) != min_quota for m in under)):
        raise RuntimeError("members left under minQuota, no partition left")  # verifyUnfilled...
    return assignment


class _General:
    """GeneralAssignmentBuilder (members subscribe to different topics), without racks."""

    def __init__(self, counts, members, owned, order, max_gen):
        self.counts, self.members, self.order, self.max_gen = counts, members, order, max_gen
        self.total = sum(counts.values())
        self.topic_consumers: dict[str, list[str]] = {t: [] for t in counts}
        self.consumer_topics: dict[str, list[str]] = {}
        for m in order:
            self.consumer_topics[m] = [t for t in dict.fromkeys(members[m].topics) if t in counts]
            for t in self.consumer_topics[m]:
                self.topic_consumers[t].append(m)
        self.current: dict[str, list[TopicPartition]] = {m: list(owned[m]) for m in order}
        self.owner = {tp: m for m, tps in self.current.items() for tp in tps}
        topics = sorted(counts, key=lambda t: (len(self.topic_consumers[t]), java_order(t)))
        self.all_partitions = [TopicPartition(t, p) for t in topics for p in range(counts[t])]
        self.active: set[str] = set()  # the members in Java's sortedCurrentSubscriptions
        # PartitionMovements: topic -> (from, to) -> partitions moved so, and each move's pair
        self.moves_by_topic: dict[str, dict[tuple[str, str], set[TopicPartition]]] = {}
        self.moves: dict[TopicPartition, tuple[str, str]] = {}
        self.revocation_required = False

    def sorted_members(self) -> list[str]:
        # TreeSet ordered by (assignment size, member id); Java re-inserts on every change.
        return sorted(self.active, key=lambda m: (len(self.current[m]), java_order(m)))

    def build(self) -> dict[str, list[TopicPartition]]:
        prev: dict[TopicPartition, tuple[str, int]] = {}  # owners below the max generation
        for m in self.order:  # prepopulateCurrentAssignments (a missing generation counts as -1)
            gen = _member_generation(self.members[m])
            if (gen is not None and gen < self.max_gen) or (
                    gen is None and self.max_gen > DEFAULT_GENERATION):
                for tp in self.members[m].owned_partitions:  # updatePrevAssignment
                    if tp not in prev or _gen(gen) > prev[tp][1]:
                        prev[tp] = (m, _gen(gen))
        assigned: set[TopicPartition] = set()
        for m, tps in self.current.items():  # assignOwnedPartitions
            for tp in list(tps):
                if tp.topic not in self.members[m].topics:
                    tps.remove(tp)  # no longer subscribed: Java leaves `owner` stale too
                    self.revocation_required = True
                else:
                    assigned.add(tp)
        unassigned = [tp for tp in self.all_partitions if tp not in assigned]
        self.active.update(self.current)
        self.balance(prev, unassigned)
        return self.current

    def max_size(self, m: str) -> int:  # getMaxAssignmentSize
        return sum(self.counts[t] for t in self.consumer_topics[m])

    def can_participate(self, m: str) -> bool:
        if len(self.current[m]) < self.max_size(m):
            return True
        return any(len(self.topic_consumers[tp.topic]) >= 2 for tp in self.current[m])

    def is_balanced(self) -> bool:
        ranked = self.sorted_members()
        if len(self.current[ranked[0]]) >= len(self.current[ranked[-1]]) - 1:
            return True
        owner = {tp: m for m, tps in self.current.items() for tp in tps}
        for m in ranked:  # could a partition move to a member 2+ smaller than its owner?
            size, mine = len(self.current[m]), set(self.current[m])
            if size == self.max_size(m):
                continue
            for t in self.consumer_topics[m]:
                for p in range(self.counts[t]):
                    tp = TopicPartition(t, p)
                    if tp not in mine and size + 1 < len(self.current[owner[tp]]):
                        return False
        return True

    def balance(self, prev, unassigned: list[TopicPartition]) -> None:
        initializing = not self.current[self.sorted_members()[-1]]
        for tp in unassigned:  # maybeAssign: to the least loaded member subscribed to it
            m = next((c for c in self.sorted_members() if tp.topic in self.consumer_topics[c]),
                     None)
            if m is not None:
                self.current[m].append(tp)
                self.owner[tp] = m
        fixed_topics = {t for t, cs in self.topic_consumers.items() if len(cs) < 2}
        self.all_partitions = [tp for tp in self.all_partitions if tp.topic not in fixed_topics]
        unassigned = [tp for tp in unassigned if tp.topic not in fixed_topics]
        fixed: dict[str, list[TopicPartition]] = {}
        for m in self.order:
            if not self.can_participate(m):
                self.active.discard(m)
                fixed[m] = self.current.pop(m)
        before, before_owner = {m: list(tps) for m, tps in self.current.items()}, dict(self.owner)
        if not self.revocation_required:  # first try moving only the newly added partitions
            self.reassign_all(unassigned, prev)
        moved = self.reassign_all(self.all_partitions, prev)
        if not initializing and moved and _score(self.current) >= _score(before):
            self.current, self.owner = before, before_owner  # not better: keep the sticky one
        self.current.update(fixed)  # the members that could not change come back
        self.active.update(fixed)

    def reassign_all(self, partitions: list[TopicPartition], prev) -> bool:
        """performReassignments: move partitions until balanced or nothing moves."""
        performed, modified = False, True
        while modified:
            modified = False
            for tp in partitions:
                if self.is_balanced():
                    break
                size = len(self.current[self.owner[tp]])
                back = prev.get(tp, (None,))[0]  # its previous owner, if still subscribed
                if (back in self.current and tp.topic in self.consumer_topics[back]
                        and size > len(self.current[back]) + 1):
                    self.reassign(tp, back)
                    performed = modified = True
                elif any(size > len(self.current[c]) + 1 for c in self.topic_consumers[tp.topic]
                         if c in self.current):
                    self.reassign(tp, next(c for c in self.sorted_members()
                                           if tp.topic in self.consumer_topics[c]))
                    performed = modified = True
        return performed

    def reassign(self, tp: TopicPartition, new: str) -> None:
        # getTheActualPartitionToBeMoved: if partitions of this topic already moved new -> old,
        # move one of those back instead (the smallest; Java: a HashSet's first).
        src = self.moves[tp][0] if tp in self.moves else self.owner[tp]
        back = self.moves_by_topic.get(tp.topic, {}).get((new, src))
        tp = min(back, key=partition_order) if back else tp
        old = self.owner[tp]
        if tp in self.moves:  # movePartition: fold a second move into the first
            pair = self.moves.pop(tp)
            pairs = self.moves_by_topic[tp.topic]
            pairs[pair].discard(tp)
            if not pairs[pair]:
                del pairs[pair]
            if not pairs:
                del self.moves_by_topic[tp.topic]
            src = pair[0]
        else:
            src = old
        if src != new:  # not back where it came from
            self.moves[tp] = (src, new)
            self.moves_by_topic.setdefault(tp.topic, {}).setdefault((src, new), set()).add(tp)
        self.current[old].remove(tp)
        self.current[new].append(tp)
        self.owner[tp] = new


def _score(assignment: Mapping[str, list]) -> int:
    """getBalanceScore: the sum over member pairs of their size difference (0 = balanced)."""
    sizes = sorted(len(tps) for tps in assignment.values())
    return sum(b - a for i, a in enumerate(sizes) for b in sizes[i + 1:])


ASSIGNORS = {a.name: a for a in (RangeAssignor(), RoundRobinAssignor(),
                                 CooperativeStickyAssignor())}


def get_assignor(name: str):
    """The assignor JoinGroup names `name` (KeyError when unknown)."""
    return ASSIGNORS[name]
