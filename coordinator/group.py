"""One classic group's metadata: members, generation, protocol, parked calls, timers, offsets.

Rules (Kafka's GroupMetadata.scala and MemberMetadata.scala):
- Members are kept in insertion order. The LEADER is the first member added; when the leader
  is removed the oldest remaining member leads; at join completion a leader that did not
  rejoin is replaced by the first member that did (`maybe_elect_new_joined_leader`).
- The group's protocol type is set by its first member; a new member must use that type and
  support at least one protocol every member supports (`supports_protocols`; an Empty group
  takes any non-empty type with ≥ 1 protocol).
- Protocol selection: candidates = protocols supported by every member; each member votes for
  its most preferred candidate; the most votes wins. A tie goes to the protocol that got its
  first vote earliest in member order (Kafka leaves ties to HashMap order).
- Static members (KIP-345): group.instance.id → member id; replacing one keeps the member's
  place, leadership and assignment and fences the old id's parked calls.
- Pending members (KIP-394): ids handed out with MEMBER_ID_REQUIRED, each with an expiry
  deadline; the join phase waits for them too.
- A parked JoinGroup/SyncGroup is the request id stored on the member (`awaiting_join`,
  `awaiting_sync`); "is awaiting join" means a JoinGroup is parked.
- Heartbeat liveness (MemberMetadata.hasSatisfiedHeartbeat): at its deadline a NEW member (its
  first join not completed) has failed; any other member has failed unless it has a parked
  JoinGroup or SyncGroup.
- Offsets: committed values per (topic, partition) with their POSITION in the log (Kafka's
  CommitRecordMetadataAndOffset): `loaded_position(log offset)` for a record read at load,
  `appended_position(token)` for one this coordinator appended since. Appends to one
  partition land in the order issued, after everything the load read, so the two orders
  are the log's. A commit is staged in `pending_offset_commits` with its append and enters
  the cache only when that append succeeds, is still staged (removing a partition's offsets
  drops what is staged, so a late append cannot resurrect them) and is later in the log than
  what the cache holds. Decision: every staged commit is tracked by its append, where Kafka
  keeps only the latest per partition: there, when a later commit's append fails before an
  earlier one's succeeds, the earlier ACKNOWLEDGED commit never reaches the cache (OffsetFetch
  goes back until a reload); the seeded simulation found this.
- Transactional offsets (KIP-98) wait in `txn_offsets` (coordinator/txn_offsets.py) for their
  producer's marker; a COMMIT makes each one committed only if it is later in the log than the
  committed offset (a plain commit appended after it wins), an ABORT drops them. A partition
  with a pending commit of either kind is unstable (hasPendingOffsetCommitsForTopicPartition),
  and pending offsets of either kind keep an Empty group alive (hasOffsets).
- Offset expiry (removeExpiredOffsets): Empty group with a protocol type → every offset once
  retention passed since the group became Empty (or since its commit if that time is
  unknown); Stable "consumer" group with known subscriptions → offsets of unsubscribed topics
  by commit time; group without protocol type (simple) → by commit time; a partition with a
  plain commit in flight never; a KIP-848 consumer group (`consumer`) → offsets of topics no
  member subscribes to by commit time (all of them once it is empty); a pending TRANSACTIONAL offset neither spares the committed
  one nor expires itself (Kafka: only pendingOffsetCommits are checked).
"""

from __future__ import annotations

import uuid as _uuid
from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from coordinator import records as rec
from coordinator.consumer_group import ConsumerGroup
from coordinator.messages import DescribedMember, JoinGroupMember
from coordinator.states import GroupState, can_rebalance, transition
from coordinator.txn_offsets import PendingTxnOffsets

G = GroupState
TopicPartition = tuple[str, int]
CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = 0
    expire_timestamp: int = -1  # only from v1 records; -1 = broker retention applies


Position = tuple[int, int]


def loaded_position(log_offset: int) -> Position:
    return (0, log_offset)


def appended_position(token: int) -> Position:
    return (1, token)


@dataclass(slots=True)
class CommittedOffset:
    value: OffsetAndMetadata
    position: Position  # where its record is in the log (see the rules above)


@dataclass(slots=True)
class JoinTimer:
    """The join phase's deadline: Kafka's DelayedJoin, or InitialDelayedJoin when `initial`."""
    deadline_ms: int
    initial: bool = False
    delay_ms: int = 0
    remaining_ms: int = 0


@dataclass(slots=True)
class SyncTimer:
    """Kafka's DelayedSync: members of `generation` must SyncGroup before `deadline_ms`."""
    deadline_ms: int
    generation: int


@dataclass(slots=True, eq=False)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    supported_protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    awaiting_join: int | None = None
    awaiting_sync: int | None = None
    is_new: bool = False
    heartbeat_deadline_ms: int | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    @property
    def protocol_names(self) -> set[str]:
        return {name for name, _ in self.supported_protocols}

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.supported_protocols:
            if name == protocol:
                return data
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols) -> bool:
        return tuple((n, bytes(d)) for n, d in protocols) == \
            tuple((n, bytes(d)) for n, d in self.supported_protocols)

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync


class GroupMetadata:
    def __init__(self, group_id: str, state: GroupState = G.EMPTY, now_ms: int = 0):
        self.group_id = group_id
        self.state = state
        self.current_state_timestamp: int | None = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: dict[str, int] = {}  # member id → expiry deadline
        self.pending_sync_members: set[str] = set()
        self.offsets: dict[TopicPartition, CommittedOffset] = {}
        # staged commits: (topic, partition) → {append token: value}
        self.pending_offset_commits: dict[TopicPartition, dict[int, OffsetAndMetadata]] = {}
        self.txn_offsets = PendingTxnOffsets()
        self.new_member_added = False
        self.join_timer: JoinTimer | None = None
        self.sync_timer: SyncTimer | None = None
        self.subscribed_topics: frozenset[str] | None = None
        # a KIP-848 group: its membership; the classic part above stays Empty meanwhile
        self.consumer: ConsumerGroup | None = None
        self.consumer_records: dict[bytes, bytes] = {}   # what the log holds of it

    def __repr__(self) -> str:
        return (f"GroupMetadata({self.group_id!r}, {self.state.value}, gen={self.generation_id}, "
                f"leader={self.leader_id}, members={list(self.members)})")

    # -- state ----------------------------------------------------------------------------
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        self.state = transition(self.group_id, self.state, target)
        self.current_state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return can_rebalance(self.state)

    @property
    def is_empty(self) -> bool:
        """No member of either protocol (a consumer group's classic part is always Empty)."""
        return self.is_(G.EMPTY) and (self.consumer is None or not self.consumer.members)

    # -- members --------------------------------------------------------------------------
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def leader_or_empty(self) -> str:
        return self.leader_id or ""

    def add(self, member: MemberMetadata, join_request: int | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise ValueError(f"static member {member.group_instance_id} already in {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        member.awaiting_join = join_request
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync_members.discard(member_id)
        return member

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str):
        """Move the member `old_id` to `new_id`; returns (member, parked join, parked sync) —
        the parked calls of the old id, which the caller fences with FENCED_INSTANCE_ID."""
        member = self.members.pop(old_id)
        fenced_join, fenced_sync = member.awaiting_join, member.awaiting_sync
        member.awaiting_join = member.awaiting_sync = None
        member.member_id = new_id
        self.members[new_id] = member
        if self.is_leader(old_id):
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        # As Kafka, pending_sync_members keeps the OLD id: a replacement before the old id
        # synced ends in a rebalance when the sync phase expires.
        return member, fenced_join, fenced_sync

    def current_static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join() == len(self.members) and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    @staticmethod
    def generate_member_id(client_id: str, instance_id: str | None, uuid: _uuid.UUID) -> str:
        return f"{client_id if instance_id is None else instance_id}-{uuid}"

    def update_member(self, member: MemberMetadata, protocols, rebalance_timeout_ms: int,
                      session_timeout_ms: int, join_request: int | None) -> int | None:
        """Kafka's updateMember; returns a parked JoinGroup that `join_request` supersedes."""
        member.supported_protocols = tuple((n, bytes(d)) for n, d in protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        superseded = member.awaiting_join if join_request is not None else None
        member.awaiting_join = join_request
        return superseded

    # -- protocols ------------------------------------------------------------------------
    def _protocol_counts(self) -> Counter:
        return Counter(name for m in self.members.values() for name in m.protocol_names)

    def candidate_protocols(self) -> set[str]:
        return {p for p, n in self._protocol_counts().items() if n == len(self.members)}

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        names = set(names)
        if self.is_(G.EMPTY):
            return bool(protocol_type) and bool(names)
        counts = self._protocol_counts()
        return self.protocol_type == protocol_type and \
            any(counts[name] == len(self.members) for name in names)

    def select_protocol(self) -> str:
        if not self.members:
            raise ValueError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes, key=lambda p: votes[p])  # Counter keeps first-vote order on ties

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = rec.subscribed_topics(m.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return frozenset(topics)

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(G.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(G.EMPTY, now_ms)
        self.pending_sync_members.clear()

    # -- views ----------------------------------------------------------------------------
    def current_member_metadata(self) -> tuple[JoinGroupMember, ...]:
        if self.state in (G.DEAD, G.PREPARING_REBALANCE) or self.protocol_name is None:
            raise ValueError(f"no member metadata for group {self.group_id} in {self.state.value}")
        return tuple(JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                     for m in self.members.values())

    def described_members(self) -> tuple[DescribedMember, ...]:
        if self.is_(G.STABLE):
            return tuple(DescribedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                         m.metadata(self.protocol_name), m.assignment)
                         for m in self.members.values())
        return tuple(DescribedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                     b"", b"") for m in self.members.values())

    def to_record_value(self, assignment: dict[str, bytes]) -> rec.GroupMetadataValue:
        members = tuple(rec.MemberRecord(m.member_id, m.group_instance_id, m.client_id,
                                         m.client_host, m.rebalance_timeout_ms, m.session_timeout_ms,
                                         m.metadata(self.protocol_name), assignment[m.member_id])
                        for m in self.members.values())
        ts = -1 if self.current_state_timestamp is None else self.current_state_timestamp
        return rec.GroupMetadataValue(self.protocol_type or "", self.generation_id, self.protocol_name,
                                      self.leader_id, ts, members)

    @classmethod
    def from_record(cls, group_id: str, value: rec.GroupMetadataValue, now_ms: int) -> "GroupMetadata":
        """Kafka's readGroupMessageValue + loadGroup: Stable with members, else Empty."""
        group = cls(group_id, G.STABLE if value.members else G.EMPTY, now_ms)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        group.current_state_timestamp = (None if value.current_state_timestamp == -1
                                         else value.current_state_timestamp)
        for m in value.members:
            group.add(MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                     m.rebalance_timeout, m.session_timeout, value.protocol_type,
                                     ((value.protocol, m.subscription),), m.assignment))
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    # -- offsets --------------------------------------------------------------------------
    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(self.pending_offset_commits) or bool(self.txn_offsets)

    def has_pending_offset_commits(self, tp: TopicPartition) -> bool:
        return tp in self.pending_offset_commits or self.txn_offsets.has_pending(tp)

    def offset(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        committed = self.offsets.get(tp)
        return None if committed is None else committed.value

    def prepare_offset_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata], seq: int) -> None:
        for tp, value in offsets.items():
            self.pending_offset_commits.setdefault(tp, {})[seq] = value

    def _unstage(self, tp: TopicPartition, seq: int) -> bool:
        staged = self.pending_offset_commits.get(tp)
        if staged is None or seq not in staged:
            return False  # the partition's offsets were removed while the append was in flight
        del staged[seq]
        if not staged:
            del self.pending_offset_commits[tp]
        return True

    def on_offset_commit_append(self, tp: TopicPartition, value: OffsetAndMetadata, seq: int) -> None:
        if self._unstage(tp, seq):
            self.commit_offset(tp, value, appended_position(seq))

    def commit_offset(self, tp: TopicPartition, value: OffsetAndMetadata,
                      position: Position) -> bool:
        """Make `value` the committed offset unless the cache holds a later one of the log."""
        current = self.offsets.get(tp)
        if current is not None and current.position >= position:
            return False
        self.offsets[tp] = CommittedOffset(value, position)
        return True

    # -- transactional offsets (coordinator/txn_offsets.py) -------------------------------------
    def prepare_txn_offset_commit(self, producer_id: int, offsets: dict, token: int) -> None:
        self.txn_offsets.prepare(producer_id, offsets, token)

    def on_txn_offset_commit_append(self, producer_id: int, offsets: dict, token: int) -> None:
        position = appended_position(token)
        for tp, (pos, value) in self.txn_offsets.acknowledge(producer_id, token, offsets,
                                                             position).items():
            self.commit_offset(tp, value, pos)

    def fail_pending_txn_offset_commit(self, producer_id: int, offsets: dict, token: int) -> None:
        self.txn_offsets.fail(producer_id, token, offsets)

    def complete_pending_txn_offset_commit(self, producer_id: int, committed: bool) -> None:
        for tp, (position, value) in self.txn_offsets.complete(producer_id, committed).items():
            self.commit_offset(tp, value, position)

    def has_pending_offset_commits_from(self, producer_id: int) -> bool:
        return self.txn_offsets.has_producer(producer_id)

    def fail_pending_offset_write(self, tp: TopicPartition, seq: int) -> None:
        self._unstage(tp, seq)

    def remove_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        removed = {}
        tps = list(tps)
        self.txn_offsets.remove(tps)
        for tp in tps:
            self.pending_offset_commits.pop(tp, None)
            committed = self.offsets.pop(tp, None)
            if committed is not None:
                removed[tp] = committed.value
        return removed

    def remove_all_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return self.remove_offsets(list(self.offsets) + list(self.pending_offset_commits))

    def remove_expired_offsets(self, now_ms: int,
                               retention_ms: int) -> dict[TopicPartition, OffsetAndMetadata]:
        def expired(base_of, skip_topics=frozenset()):
            out = []
            for tp, committed in self.offsets.items():
                if tp[0] in skip_topics or tp in self.pending_offset_commits:
                    continue
                v = committed.value
                if v.expire_timestamp != -1:  # v1 records: their own expiry time
                    if now_ms >= v.expire_timestamp:
                        out.append(tp)
                elif now_ms - base_of(v) >= retention_ms:
                    out.append(tp)
            return out

        if self.consumer is not None:   # Kafka's ConsumerGroup: by commit time, unsubscribed
            tps = expired(lambda v: v.commit_timestamp, self.consumer.subscribed_topic_names())
        elif self.protocol_type is not None and self.is_(G.EMPTY):
            state_ts = self.current_state_timestamp
            tps = expired(lambda v: v.commit_timestamp if state_ts is None else state_ts)
        elif (self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.subscribed_topics is not None
              and self.is_(G.STABLE)):
            tps = expired(lambda v: v.commit_timestamp, self.subscribed_topics)
        elif self.protocol_type is None:
            tps = expired(lambda v: v.commit_timestamp)
        else:
            tps = []
        return {tp: self.offsets.pop(tp).value for tp in tps}
