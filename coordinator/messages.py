"""What goes into the group coordinator (events) and what comes out (results, effects).

Rules:
- Every event is a frozen dataclass handled by `GroupCoordinator.process_<snake name>`.
- Every request event carries a `request_id`; its answer is the effect
  `Respond(request_id, result)`, exactly once, maybe in a later `process` call (JoinGroup and
  SyncGroup are parked; OffsetCommit, TxnOffsetCommit and a leader's SyncGroup wait for
  their append).
- `Append(partition, records, token)`: records to append to `__consumer_offsets`-`partition`
  with acks=-1, in effect order. A TxnOffsetCommit's Append is `transactional`: ONE
  transactional batch of (`producer_id`, `producer_epoch`) (Kafka's generateOffsetRecords);
  every other Append keeps producer id and epoch -1. The broker reports the outcome with
  `AppendDone(token, error)`; an answer that depends on the append is only sent after it
  (the coordinator's cache changes only once the append succeeded). Some appends have no
  answer waiting (the empty group record, the tombstones of DeleteGroups and of offset
  expiry: Kafka does not wait for them either); their AppendDone is still expected and
  simply ignored, as is any AppendDone for a partition unloaded meanwhile.
- `BeginLoad(p)` (optional) marks partition p as loading (COORDINATOR_LOAD_IN_PROGRESS) while
  the broker reads its log; `LoadPartition(p, records)` hands the log over and makes the
  coordinator own p; `UnloadPartition(p)` gives it up. The records are in log order: every
  key/value as an `OffsetsRecord` (with its batch's producer id, whether that batch is
  transactional, and its log offset) and every control batch as a `TxnMarkerRecord`.
- `CompleteTxn(producer_id, partitions, committed)`: the producer's COMMIT or ABORT marker was
  appended to these offsets partitions (Kafka's onTransactionCompleted); no answer.
- Result fields are Kafka's response fields (JoinGroupResponse, SyncGroupResponse, ...) in the
  coordinator's terms: error codes are Kafka's ints (replicas/errors.py's table), "no protocol" is
  None, "no leader" is "", "no generation" is -1, "no leader epoch" / "no offset" is -1.
- `Tick()` says the injected clock moved: the coordinator reads it and fires every deadline
  that passed (sessions, join phase, initial delay, sync phase, offset retention).
"""

from __future__ import annotations

from dataclasses import dataclass

from typing import Mapping

from coordinator.consumer_group import HeartbeatRequest
from coordinator.records import OffsetsRecord, TxnMarkerRecord
from replicas.errors import ErrorCode as E

NO_GENERATION = -1
UNKNOWN_MEMBER = ""


# ---------------------------------------------------------------- request events
@dataclass(frozen=True, slots=True)
class JoinGroup:
    request_id: int
    group_id: str
    member_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata), in the member's preference order
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    version: int = 5  # v4+: a dynamic member without an id gets MEMBER_ID_REQUIRED (KIP-394);
    #                   v9+: a static leader replaced while Stable may skip the assignment
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class SyncGroup:
    request_id: int
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[tuple[str, bytes], ...] = ()  # (member id, assignment); the leader's


@dataclass(frozen=True, slots=True)
class Heartbeat:
    request_id: int
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveGroup:
    request_id: int
    group_id: str
    members: tuple[LeaveMember, ...]


@dataclass(frozen=True, slots=True)
class CommitOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""  # None is stored as "" (Kafka's NO_METADATA)


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    request_id: int
    group_id: str
    offsets: tuple[CommitOffset, ...]
    generation_id: int = NO_GENERATION  # < 0: a commit from outside group management
    member_id: str = UNKNOWN_MEMBER
    group_instance_id: str | None = None
    version: int = 9    # a consumer group's members commit with v9+ (their member epoch)


@dataclass(frozen=True, slots=True)
class TxnOffsetCommit:
    """A transactional producer's commit of a group's offsets (KIP-98); v3+ carries the
    consumer's group metadata (KIP-447), which older versions do not have on the wire."""
    request_id: int
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    offsets: tuple[CommitOffset, ...]
    generation_id: int = NO_GENERATION
    member_id: str = UNKNOWN_MEMBER
    group_instance_id: str | None = None
    version: int = 3


@dataclass(frozen=True, slots=True)
class OffsetFetch:
    request_id: int
    group_id: str
    partitions: tuple[tuple[str, int], ...] | None = None  # None: every committed partition
    require_stable: bool = False
    member_id: str | None = None    # v9: a consumer group's member and its epoch
    member_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ListGroups:
    request_id: int
    states: frozenset[str] = frozenset()  # state names, any case; empty: all
    types: frozenset[str] = frozenset()   # "classic", "consumer", any case; empty: all


@dataclass(frozen=True, slots=True)
class DescribeGroups:
    request_id: int
    group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeleteGroups:
    request_id: int
    group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class OffsetDelete:
    request_id: int
    group_id: str
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeat:
    """KIP-848's one membership call; answered with a consumer_group.HeartbeatAnswer.
    `topics` is the cluster's {topic name: (topic id, partition count)} when it was sent."""
    request_id: int
    request: HeartbeatRequest
    topics: Mapping[str, tuple[str, int]]
    version: int = 1     # v0: an empty member id at epoch 0 gets one from the coordinator


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescribe:
    request_id: int
    group_ids: tuple[str, ...]


# ---------------------------------------------------------------- broker events
@dataclass(frozen=True, slots=True)
class Tick:
    pass


@dataclass(frozen=True, slots=True)
class GroupConfigs:
    """Every group's own configs as stored (/config/groups), replacing the last ones."""
    configs: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]


@dataclass(frozen=True, slots=True)
class AppendDone:
    token: int
    error: int = E.NONE


@dataclass(frozen=True, slots=True)
class CompleteTxn:
    producer_id: int
    partitions: tuple[int, ...]  # the offsets partitions the marker was appended to
    committed: bool


@dataclass(frozen=True, slots=True)
class BeginLoad:
    """This broker became leader of offsets partition `partition` and started reading it:
    its groups answer COORDINATOR_LOAD_IN_PROGRESS until LoadPartition."""
    partition: int


@dataclass(frozen=True, slots=True)
class LoadPartition:
    partition: int
    records: tuple[OffsetsRecord | TxnMarkerRecord, ...]  # the partition's log, start to end


@dataclass(frozen=True, slots=True)
class UnloadPartition:
    partition: int


# ---------------------------------------------------------------- results
@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    error: int
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinGroupMember, ...] = ()  # all members' metadata for the leader only


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: int


@dataclass(frozen=True, slots=True)
class LeaveMemberResult:
    member_id: str
    group_instance_id: str | None
    error: int


@dataclass(frozen=True, slots=True)
class LeaveGroupResult:
    error: int
    members: tuple[LeaveMemberResult, ...] = ()


@dataclass(frozen=True, slots=True)
class CommitPartitionResult:
    topic: str
    partition: int
    error: int


@dataclass(frozen=True, slots=True)
class OffsetCommitResult:
    partitions: tuple[CommitPartitionResult, ...]


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int  # -1: none committed
    leader_epoch: int = -1
    metadata: str = ""
    error: int = E.NONE

    def __reduce__(self):
        # An OffsetFetch answer carries one per partition across Ray (10,000 for a group on
        # a 10,000-partition topic): a plain constructor call unpickles in half the time of
        # slots dataclasses' __setstate__, which looks the fields up for every object.
        return (FetchedOffset, (self.topic, self.partition, self.offset, self.leader_epoch,
                                self.metadata, int(self.error)))


@dataclass(frozen=True, slots=True)
class OffsetFetchResult:
    error: int
    partitions: tuple[FetchedOffset, ...] = ()


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class ListGroupsResult:
    error: int
    groups: tuple[ListedGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    error: int
    group_id: str
    state: str
    protocol_type: str = ""
    protocol: str = ""
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribeGroupsResult:
    groups: tuple[DescribedGroup, ...]


@dataclass(frozen=True, slots=True)
class DeletedGroup:
    group_id: str
    error: int


@dataclass(frozen=True, slots=True)
class DeleteGroupsResult:
    groups: tuple[DeletedGroup, ...]


@dataclass(frozen=True, slots=True)
class OffsetDeleteResult:
    error: int                                          # the group's: no partitions then
    partitions: tuple[tuple[str, int, int], ...] = ()   # (topic, partition, error)


@dataclass(frozen=True, slots=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: Mapping[str, frozenset[int]]         # {topic id: partitions}
    target_assignment: Mapping[str, frozenset[int]]
    subscribed_topic_regex: str | None = None


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    error: int
    group_id: str
    message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescribeResult:
    groups: tuple[DescribedConsumerGroup, ...]


# ---------------------------------------------------------------- effects
@dataclass(frozen=True, slots=True)
class Respond:
    request_id: int
    result: object


@dataclass(frozen=True, slots=True)
class Append:
    partition: int
    records: tuple[OffsetsRecord, ...]
    token: int
    producer_id: int = -1
    producer_epoch: int = -1
    transactional: bool = False
