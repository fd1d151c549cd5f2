"""One KIP-848 consumer group and Kafka's ConsumerGroupHeartbeat rules, as a pure object:
members with epochs, the group epoch, the target assignment, reconciliation, leaving and
the two timeouts. Not on the wire yet and not persisted (no __consumer_offsets records).

Rules (Kafka's GroupMetadataManager.consumerGroupHeartbeat, consumerGroupLeave,
throwIfConsumerGroupHeartbeatRequestIsInvalid, throwIfConsumerGroupMemberEpochIsInvalid,
ConsumerGroup.java; trunk 1eb7644; KIP-848 where the snapshot is silent, said below):
- Validation, in Kafka's order, answered INVALID_REQUEST (42) with Kafka's message: an
  empty group id, instance id or rack id; member epoch > 0 or -1 without a member id; member epoch 0 without a
  rebalance timeout, with owned partitions missing or not empty, or with neither topic
  names nor a regular expression (Kafka 4.0's check; an empty list or "" joins with no
  topics); -2 without a member id or an instance id; any other epoch. A server assignor not
  in `assignors` → UNSUPPORTED_ASSIGNOR (112).
- Leaving: epoch -1 removes the member (a static one only if the member id matches its
  instance, else FENCED_INSTANCE_ID 82); epoch -2 (static) keeps the member and its
  assignment at member epoch -2 until it rejoins or its session expires. An unknown group
  → GROUP_ID_NOT_FOUND (69), an unknown member → UNKNOWN_MEMBER_ID (25). The answer
  echoes the member id with member epoch -1 (or -2).
- A group object that never had a member answers as an unknown group. Joining (epoch 0)
  creates the group if needed; a group at `max_size` refuses a member it does not know
  (GROUP_MAX_SIZE_REACHED 81). A new static member takes its instance id; a rejoining
  static member replaces the one that left with -2 (its assignment and target carried over
  at member epoch 0, the group epoch unchanged unless its subscription is), and is refused
  UNRELEASED_INSTANCE_ID (111) while the old one has not left. KIP-848: a fenced member
  rejoins "with the same member ID and a member epoch equals to zero": a known member id
  at epoch 0 starts over as a new member (its partitions were given up). Other epochs: an
  unknown group → GROUP_ID_NOT_FOUND, an unknown member → UNKNOWN_MEMBER_ID, an epoch
  above the member's → FENCED_MEMBER_EPOCH (110), below it → FENCED_MEMBER_EPOCH unless it
  is the previous epoch and every owned partition is assigned (the answer with the new
  epoch was lost).
- The member's subscription, rack, assignor and rebalance timeout are updated from the
  request (fields sent as None keep their value; a regular expression "" is none). A
  subscription is topic names and/or a regular expression matching whole topic names
  (Python's re for Kafka's RE2/J); a new expression that does not compile →
  INVALID_REGULAR_EXPRESSION (128) with Kafka's message, before anything changes.
  Expressions are resolved as Kafka resolves them, asynchronously: AFTER a heartbeat,
  a new expression at once and the others when the cluster's topics changed and
  REGEX_REFRESH_MS (10 s) passed since the last refresh; so a member's named topics come
  in one heartbeat and those its expression matches in a later one (librdkafka's tests
  expect exactly that). A group read back from the log resolves at its first heartbeat. A new member or a changed subscription
  bumps the group epoch; so does a change of the subscription metadata (the subscribed
  topics that exist, with their ids and partition counts) — computed on every heartbeat
  here (Kafka refreshes it on a subscription change or after its refresh interval).
- When the group epoch is above the target assignment's, the target is recomputed
  (coordinator/consumer_assignors.py) with the assignor most members name (ties: by
  name), or the first of `assignors` when none does, and takes the group epoch.
- The member is then reconciled (coordinator/consumer_reconciliation.py) against its
  target with the group's partition-epoch ledger. Entering UNREVOKED_PARTITIONS (or a new
  epoch in it) arms its rebalance deadline (now + its rebalance timeout); any other state
  clears it. Every heartbeat arms its session deadline (now + session timeout).
- The answer: member id, member epoch, heartbeat interval, and the assignment when the
  request was full (epoch 0, or rebalance timeout, names or expression, and owned
  partitions all sent) or the member's assigned partitions changed.
- `expire(now_ms)`: a member past its session deadline, or past its rebalance deadline
  while still UNREVOKED_PARTITIONS, is removed (fenced); every removal bumps the group
  epoch. Returns the removed member ids.
- Pure: stdlib and the coordinator's own modules; the clock is passed in.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Mapping

from coordinator.consumer_assignors import DEFAULT_ASSIGNOR, MemberSpec, assign
from coordinator.consumer_reconciliation import (FencedMemberEpoch, GroupState,
                                                 MemberAssignment, MemberState,
                                                 PartitionEpochs, group_state, reconcile)
from replicas.errors import ErrorCode as E

__all__ = ["ConsumerGroupConfig", "HeartbeatRequest", "HeartbeatAnswer", "Member",
           "ConsumerGroup", "check_request", "LEAVE_EPOCH", "LEAVE_STATIC_EPOCH"]

LEAVE_EPOCH, LEAVE_STATIC_EPOCH = -1, -2
REGEX_REFRESH_MS = 10_000      # Kafka's REGEX_BATCH_REFRESH_INTERVAL_MS
Owned = Mapping[str, tuple[int, ...]]


@dataclass(frozen=True)
class ConsumerGroupConfig:
    """Kafka's group.consumer.* defaults."""
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = (DEFAULT_ASSIGNOR, "range")


@dataclass(frozen=True)
class HeartbeatRequest:
    """ConsumerGroupHeartbeat in the coordinator's terms; None is a field not sent.
    `owned` is {topic id: partitions}."""
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Owned | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True)
class HeartbeatAnswer:
    error: int = E.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Mapping[str, frozenset[int]] | None = None


@dataclass(frozen=True)
class Member:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    assignment: MemberAssignment = None

    def __post_init__(self):
        if self.assignment is None:
            object.__setattr__(self, "assignment", MemberAssignment(self.member_id))


class _Refused(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def _invalid(message: str) -> _Refused:
    return _Refused(E.INVALID_REQUEST, message)


def check_request(r: HeartbeatRequest, assignors) -> HeartbeatAnswer | None:
    """The request's own checks, before any group is looked at (None: valid)."""
    try:
        _validate(r, assignors)
    except _Refused as exc:
        return HeartbeatAnswer(exc.code, exc.message)
    return None


def _validate(r: HeartbeatRequest, assignors) -> None:
    if r.group_id == "":
        raise _invalid("GroupId can't be empty.")
    if r.instance_id == "":
        raise _invalid("InstanceId can't be empty.")
    if r.rack_id == "":
        raise _invalid("RackId can't be empty.")
    if r.member_epoch > 0 or r.member_epoch == LEAVE_EPOCH:
        if r.member_id == "":
            raise _invalid("MemberId can't be empty.")
    elif r.member_epoch == 0:
        if r.rebalance_timeout_ms == -1:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        if r.owned is None or any(r.owned.values()):
            raise _invalid("TopicPartitions must be empty when (re-)joining.")
        if r.subscribed_topic_names is None and r.subscribed_topic_regex is None:
            raise _invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be "
                           "non-null when (re-)joining.")
    elif r.member_epoch == LEAVE_STATIC_EPOCH:
        if r.member_id == "":
            raise _invalid("MemberId can't be empty.")
        if r.instance_id is None:
            raise _invalid("InstanceId can't be null.")
    else:
        raise _invalid("MemberEpoch is invalid.")
    if r.server_assignor is not None and r.server_assignor not in assignors:
        raise _Refused(E.UNSUPPORTED_ASSIGNOR,
                       f"ServerAssignor {r.server_assignor} is not supported. Supported "
                       f"assignors: {', '.join(assignors)}.")


@dataclass
class ConsumerGroup:
    group_id: str
    config: ConsumerGroupConfig = field(default_factory=ConsumerGroupConfig)
    group_epoch: int = 0
    target_epoch: int = 0
    members: dict[str, Member] = field(default_factory=dict)
    target: dict[str, dict[str, frozenset[int]]] = field(default_factory=dict)
    subscription: dict[str, tuple[str, int]] = field(default_factory=dict)  # name: (id, n)
    static: dict[str, str] = field(default_factory=dict)        # instance id: member id
    session_deadline: dict[str, int] = field(default_factory=dict)
    rebalance_deadline: dict[str, int] = field(default_factory=dict)
    ledger: PartitionEpochs = field(default_factory=PartitionEpochs)
    resolved: dict[str, frozenset[str]] = field(default_factory=dict)   # regex: topic names
    regex_refreshed_ms: int = -(2**62)
    regex_topics: frozenset[str] = frozenset()      # the topic names the last refresh saw
    resolve_now: bool = False                       # read back from the log: resolve at once

    # -- views --------------------------------------------------------------------------
    @property
    def state(self) -> GroupState:
        return group_state((m.assignment for m in self.members.values()), self.group_epoch,
                           self.target_epoch)

    def next_deadline_ms(self) -> int | None:
        times = list(self.session_deadline.values()) + list(self.rebalance_deadline.values())
        return min(times) if times else None

    def subscribed_topic_names(self) -> frozenset[str]:
        return frozenset(t for m in self.members.values() for t in m.subscribed) \
            | frozenset(self.subscription)

    def preferred_assignor(self) -> str:
        """The assignor most members name (ties: by name), else the first configured."""
        counts = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        return (min(counts, key=lambda n: (-counts[n], n)) if counts
                else self.config.assignors[0])

    # -- the request --------------------------------------------------------------------
    def heartbeat(self, r: HeartbeatRequest, topics: Mapping[str, tuple[str, int]],
                  now_ms: int) -> HeartbeatAnswer:
        """One ConsumerGroupHeartbeat (see the module's rules); `topics` is the cluster's
        {topic name: (topic id, partition count)}."""
        try:
            _validate(r, self.config.assignors)
            if r.member_epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
                answer = self._leave(r, now_ms)
                self._prune_regexes()
                return answer
            if self.resolve_now:
                self.resolve_now = False
                self._refresh_regexes(topics, now_ms, force=True)
            answer = self._heartbeat(r, topics, now_ms)
            self._refresh_regexes(topics, now_ms)
            return answer
        except _Refused as exc:
            return HeartbeatAnswer(exc.code, exc.message)

    def _heartbeat(self, r: HeartbeatRequest, topics, now_ms: int) -> HeartbeatAnswer:
        member, is_new = self._member_for(r)
        updated = replace(
            member,
            instance_id=r.instance_id if r.instance_id is not None else member.instance_id,
            rack_id=r.rack_id if r.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(r.rebalance_timeout_ms if r.rebalance_timeout_ms != -1
                                  else member.rebalance_timeout_ms),
            server_assignor=(r.server_assignor if r.server_assignor is not None
                             else member.server_assignor),
            subscribed=(tuple(sorted(set(r.subscribed_topic_names)))
                        if r.subscribed_topic_names is not None else member.subscribed),
            subscribed_regex=(member.subscribed_regex if r.subscribed_topic_regex is None
                              else r.subscribed_topic_regex or None),
            client_id=r.client_id, client_host=r.client_host)
        if updated.subscribed_regex != member.subscribed_regex \
                and updated.subscribed_regex is not None:
            compiled(updated.subscribed_regex)             # refused before anything changes
        bump = is_new or (updated.subscribed, updated.subscribed_regex) != (
            member.subscribed, member.subscribed_regex)
        self._put(updated)
        subscription = self._subscription(topics)
        if subscription != self.subscription:
            self.subscription = subscription
            bump = True
        if bump:
            self.group_epoch += 1
        if self.group_epoch > self.target_epoch:
            self._retarget()
        before = self.members[updated.member_id].assignment
        self._reconcile(updated.member_id, r.owned, now_ms)
        after = self.members[updated.member_id].assignment
        self.session_deadline[updated.member_id] = now_ms + self.config.session_timeout_ms
        full = r.member_epoch == 0 or (r.rebalance_timeout_ms != -1
                                       and (r.subscribed_topic_names is not None
                                            or r.subscribed_topic_regex is not None)
                                       and r.owned is not None)
        return HeartbeatAnswer(
            member_id=updated.member_id, member_epoch=after.member_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            assignment=dict(after.assigned) if full or after.assigned != before.assigned
            else None)

    def _member_for(self, r: HeartbeatRequest) -> tuple[Member, bool]:
        """The member the request is from, and whether it is new to the group."""
        joining = r.member_epoch == 0
        if (len(self.members) >= self.config.max_size
                and (r.member_id == "" or r.member_id not in self.members)):
            raise _Refused(E.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its "
                           f"maximum capacity of {self.config.max_size} members.")
        if r.instance_id is not None:
            old_id = self.static.get(r.instance_id)
            old = self.members.get(old_id) if old_id is not None else None
            if joining:
                if old is None:
                    return self._fresh(r.member_id), True
                if old.assignment.member_epoch != LEAVE_STATIC_EPOCH:
                    raise _Refused(E.UNRELEASED_INSTANCE_ID,
                                   f"Static member {old.member_id} with instance id "
                                   f"{r.instance_id} is not released yet.")
                # the new id takes the old member's place, assignment and target and all
                target = self.target.get(old.member_id)
                self._remove(old.member_id, bump=False)
                if target is not None:
                    self.target[r.member_id] = target
                carried = replace(old.assignment, member_id=r.member_id, member_epoch=0,
                                  previous_member_epoch=0)
                return replace(old, member_id=r.member_id, assignment=carried), False
            if old is None:
                raise _Refused(E.UNKNOWN_MEMBER_ID,
                               f"Instance id {r.instance_id} is unknown.")
            if old.member_id != r.member_id:
                raise _Refused(E.FENCED_INSTANCE_ID,
                               f"Instance id {r.instance_id} is used by {old.member_id}.")
            self._check_epoch(old, r)
            return old, False
        member = self.members.get(r.member_id)
        if joining:
            if member is not None:
                # KIP-848: a fenced member rejoins with its id and epoch 0: start over
                self._remove(member.member_id, bump=False)
            return self._fresh(r.member_id), True
        if not self.members and self.group_epoch == 0:
            raise _Refused(E.GROUP_ID_NOT_FOUND, f"Group {self.group_id} not found.")
        if member is None:
            raise _Refused(E.UNKNOWN_MEMBER_ID,
                           f"Member {r.member_id} is not a member of group {self.group_id}.")
        self._check_epoch(member, r)
        return member, False

    @staticmethod
    def _fresh(member_id: str) -> Member:
        if member_id == "":
            raise _invalid("MemberId can't be empty.")   # the id is the client's (KIP-1082)
        return Member(member_id)

    @staticmethod
    def _check_epoch(member: Member, r: HeartbeatRequest) -> None:
        a = member.assignment
        if r.member_epoch > a.member_epoch:
            raise _Refused(E.FENCED_MEMBER_EPOCH,
                           f"The consumer group member has a greater member epoch "
                           f"({r.member_epoch}) than the one known by the group coordinator "
                           f"({a.member_epoch}). The member must abandon all its partitions "
                           "and rejoin.")
        if r.member_epoch < a.member_epoch:
            owned_ok = r.owned is not None and all(
                set(ps) <= set(a.assigned.get(t, ())) for t, ps in r.owned.items())
            if r.member_epoch != a.previous_member_epoch or not owned_ok:
                raise _Refused(E.FENCED_MEMBER_EPOCH,
                               f"The consumer group member has a smaller member epoch "
                               f"({r.member_epoch}) than the one known by the group "
                               f"coordinator ({a.member_epoch}). The member must abandon all "
                               "its partitions and rejoin.")

    def _leave(self, r: HeartbeatRequest, now_ms: int) -> HeartbeatAnswer:
        if not self.members and self.group_epoch == 0:
            raise _Refused(E.GROUP_ID_NOT_FOUND, f"Group {self.group_id} not found.")
        if r.instance_id is None:
            if r.member_id not in self.members:
                raise _Refused(E.UNKNOWN_MEMBER_ID, f"Member {r.member_id} is not a member "
                               f"of group {self.group_id}.")
            self._remove(r.member_id, bump=True)
            return HeartbeatAnswer(member_id=r.member_id, member_epoch=LEAVE_EPOCH)
        old_id = self.static.get(r.instance_id)
        if old_id is None:
            raise _Refused(E.UNKNOWN_MEMBER_ID, f"Instance id {r.instance_id} is unknown.")
        if old_id != r.member_id:
            raise _Refused(E.FENCED_INSTANCE_ID,
                           f"Instance id {r.instance_id} is used by {old_id}.")
        if r.member_epoch == LEAVE_STATIC_EPOCH:
            m = self.members[old_id]
            # still held, at epoch -2
            self._put(replace(m, assignment=replace(m.assignment,
                                                    member_epoch=LEAVE_STATIC_EPOCH)))
            self.rebalance_deadline.pop(old_id, None)
            return HeartbeatAnswer(member_id=r.member_id, member_epoch=LEAVE_STATIC_EPOCH)
        self._remove(old_id, bump=True)
        return HeartbeatAnswer(member_id=r.member_id, member_epoch=LEAVE_EPOCH)

    def restore_member(self, member: Member, now_ms: int) -> None:
        """A member read back from the log: its session (and, while it must revoke, its
        rebalance timeout) starts again now, as Kafka's onLoaded does."""
        self._put(member)
        self.session_deadline[member.member_id] = now_ms + self.config.session_timeout_ms
        if member.assignment.state is MemberState.UNREVOKED_PARTITIONS:
            self.rebalance_deadline[member.member_id] = now_ms + max(
                member.rebalance_timeout_ms, 0)

    # -- timers -------------------------------------------------------------------------
    def expire(self, now_ms: int) -> list[str]:
        """Fence every member past its session deadline, or past its rebalance deadline
        still holding partitions it must revoke; the removed ids."""
        gone = sorted(mid for mid, t in self.session_deadline.items() if t <= now_ms)
        gone += sorted(mid for mid, t in self.rebalance_deadline.items()
                       if t <= now_ms and mid not in gone
                       and self.members[mid].assignment.state is MemberState.UNREVOKED_PARTITIONS)
        for mid in gone:
            self._remove(mid, bump=True)
        self._prune_regexes()
        return gone

    # -- inside -------------------------------------------------------------------------
    def _put(self, member: Member) -> None:
        """Add or update a member; the ledger follows its assignment."""
        old = self.members.get(member.member_id)
        if old is None or old.assignment != member.assignment:
            self.ledger.update(old.assignment if old is not None else None, member.assignment)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static[member.instance_id] = member.member_id

    def _remove(self, member_id: str, bump: bool) -> None:
        m = self.members.pop(member_id)
        self.ledger.update(m.assignment, None)
        if m.instance_id is not None and self.static.get(m.instance_id) == member_id:
            del self.static[m.instance_id]
        self.target.pop(member_id, None)
        self.session_deadline.pop(member_id, None)
        self.rebalance_deadline.pop(member_id, None)
        if bump:
            self.group_epoch += 1

    def _topics_of(self, member: Member, topics) -> set[str]:
        """The topics of `topics` (names) the member subscribes to: by name, or by its
        regular expression as last resolved."""
        names = {t for t in member.subscribed if t in topics}
        if member.subscribed_regex:
            names |= {t for t in self.resolved.get(member.subscribed_regex, ()) if t in topics}
        return names

    def _refresh_regexes(self, topics, now_ms: int, force: bool = False) -> None:
        """Kafka's asynchronous resolution, after the heartbeat: a new expression at once,
        the others when the topics changed and REGEX_REFRESH_MS passed; the next heartbeat
        sees what changed (and the group epoch moves then)."""
        in_use = self._prune_regexes()
        names = frozenset(topics)
        if not force and in_use <= set(self.resolved) and (
                names == self.regex_topics
                or now_ms - self.regex_refreshed_ms < REGEX_REFRESH_MS):
            return
        self.resolved = {regex: frozenset(t for t in names if compiled(regex).fullmatch(t))
                         for regex in in_use}
        self.regex_refreshed_ms, self.regex_topics = now_ms, names

    def _prune_regexes(self) -> set[str]:
        """Forget the resolutions no member uses any more (Kafka deletes their records): a
        later subscription with one is resolved afresh. The expressions in use."""
        in_use = {m.subscribed_regex for m in self.members.values() if m.subscribed_regex}
        self.resolved = {k: v for k, v in self.resolved.items() if k in in_use}
        return in_use

    def _subscription(self, topics) -> dict[str, tuple[str, int]]:
        names = {t for m in self.members.values() for t in self._topics_of(m, topics)}
        return {t: (topics[t][0], topics[t][1]) for t in sorted(names) if t in topics}

    def _retarget(self) -> None:
        name = self.preferred_assignor()
        ids = {name: tid for name, (tid, _) in self.subscription.items()}
        specs = {mid: MemberSpec(mid, frozenset(ids[t] for t in self._topics_of(m, ids)),
                                 self.target.get(mid, {}), m.instance_id)
                 for mid, m in self.members.items()}
        partitions = {tid: n for tid, n in self.subscription.values()}
        self.target = {mid: dict(a) for mid, a in assign(name, specs, partitions).items()}
        self.target_epoch = self.group_epoch

    def _reconcile(self, member_id: str, owned: Owned | None, now_ms: int) -> None:
        m = self.members[member_id]
        before = m.assignment
        try:
            after = reconcile(before, self.target_epoch, self.target.get(member_id, {}),
                              self.ledger.epoch, owned)
        except FencedMemberEpoch as exc:
            raise _Refused(E.FENCED_MEMBER_EPOCH, str(exc)) from None
        if after is before:
            return
        self._put(replace(m, assignment=after))
        if after.state is MemberState.UNREVOKED_PARTITIONS:
            if (before.state is not MemberState.UNREVOKED_PARTITIONS
                    or before.member_epoch != after.member_epoch):
                self.rebalance_deadline[member_id] = now_ms + max(m.rebalance_timeout_ms, 0)
        else:
            self.rebalance_deadline.pop(member_id, None)


@functools.lru_cache(maxsize=256)
def compiled(regex: str) -> re.Pattern:
    """The member's regular expression (Python's re standing in for Kafka's RE2/J: the
    same for the patterns topic names need); INVALID_REGULAR_EXPRESSION when it does not
    compile."""
    try:
        return re.compile(regex)
    except re.error as exc:
        raise _Refused(E.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex `{regex}` is not "
                       f"a valid regular expression: {exc}.") from None


