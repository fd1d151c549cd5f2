"""Share-group offsets as an admin sees them (KIP-932's DescribeShareGroupOffsets,
AlterShareGroupOffsets, DeleteShareGroupOffsets; Kafka 4.2's GroupCoordinatorService and
GroupMetadataManager), pure: what to ask, what to change, what to answer.

Rules:
- A partition's offset is its share-partition start offset (SPSO) and the leader epoch of
  its last writer as the share coordinator stored them; a partition never initialized, or
  of a topic that does not exist, is start -1 and epoch -1 (absence, not an error, as
  OffsetFetch). Its lag (DescribeShareGroupOffsets v1) is the high watermark minus the SPSO
  minus the records at or past the SPSO already acknowledged or archived; -1 when the start
  or the high watermark is unknown.
- Asked for every partition (topics null), the answer lists the stored partitions of
  topics that still exist, topics and partitions sorted.
- Alter: each asked partition of an existing topic below its partition count gets its new
  SPSO; a partition past the count, or of a topic unknown, is UNKNOWN_TOPIC_OR_PARTITION.
- Delete: each asked topic with stored state has every one of its partitions' state
  dropped; a topic unknown is UNKNOWN_TOPIC_OR_PARTITION, one with no state
  UNKNOWN_TOPIC_OR_PARTITION "There is no offset information to delete.".
"""

from __future__ import annotations

from dataclasses import dataclass

from replicas.errors import ErrorCode as E
from share.partition import RecordState

NO_OFFSET = -1
NO_STATE_MESSAGE = "There is no offset information to delete."
UNKNOWN_MESSAGE = "This server does not host this topic-partition."
# Errors.<code>.message() of the per-partition errors an alteration answers
MESSAGES = {E.UNKNOWN_TOPIC_OR_PARTITION: UNKNOWN_MESSAGE,
            E.LEADER_NOT_AVAILABLE: "There is no leader for this topic-partition as we are in "
                                    "the middle of a leadership election.",
            E.NOT_LEADER_OR_FOLLOWER: "For requests intended only for the leader, this error "
                                      "indicates that the broker is not the current leader.",
            E.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available."}
_SETTLED = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass(frozen=True, slots=True)
class DescribeOffsets:
    group_id: str
    topics: dict[str, list[int]] | None = None     # None: every stored partition


@dataclass(frozen=True, slots=True)
class AlterOffsets:
    group_id: str
    offsets: dict[str, dict[int, int]]             # topic → partition → new SPSO


@dataclass(frozen=True, slots=True)
class DeleteOffsets:
    group_id: str
    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PartitionOffset:
    partition: int
    start_offset: int = NO_OFFSET
    leader_epoch: int = -1
    lag: int = -1
    error: int = E.NONE
    message: str | None = None


@dataclass(frozen=True, slots=True)
class TopicOffsets:
    topic: str
    topic_id: str | None                      # None: a topic unknown (the zero UUID)
    partitions: tuple[PartitionOffset, ...]


@dataclass(frozen=True, slots=True)
class TopicOutcome:
    """DeleteShareGroupOffsets' answer for one topic."""
    topic: str
    topic_id: str | None
    error: int = E.NONE
    message: str | None = None


@dataclass(frozen=True, slots=True)
class OffsetsAnswer:
    """DescribeShareGroupOffsets of one group, AlterShareGroupOffsets (topics' partitions
    carry their errors) or DeleteShareGroupOffsets (`outcomes`); a group-level error
    otherwise."""
    error: int = E.NONE
    message: str | None = None
    topics: tuple[TopicOffsets, ...] = ()
    outcomes: tuple[TopicOutcome, ...] = ()


def lag(high_watermark: int, state) -> int:
    """The share-partition's lag: what lies at or past its SPSO and is not settled yet."""
    if state is None or state.start_offset < 0 or high_watermark < 0:
        return -1
    settled = sum(b.last - max(b.first, state.start_offset) + 1 for b in state.batches
                  if b.state in _SETTLED and b.last >= state.start_offset)
    return max(high_watermark - state.start_offset - settled, 0)


def describe(asked: dict[str, list[int]] | None, topics: dict[str, tuple[str, int]],
             stored: dict[tuple[str, int], object],
             high_watermarks: dict[tuple[str, int], int]) -> tuple[TopicOffsets, ...]:
    """`asked` {topic: partitions} or None (every stored partition); `topics` {name: (id,
    partition count)}; `stored` {(topic, partition): ShareState}; `high_watermarks`
    {(topic, partition): offset}."""
    if asked is None:
        asked = {}
        for topic, p in sorted(stored):
            if topic in topics:
                asked.setdefault(topic, []).append(p)
    out = []
    for topic, parts in asked.items():
        known = topics.get(topic)
        rows = []
        for p in parts:
            s = stored.get((topic, p)) if known else None
            rows.append(PartitionOffset(p) if s is None else PartitionOffset(
                p, s.start_offset, s.leader_epoch,
                lag(high_watermarks.get((topic, p), -1), s)))
        out.append(TopicOffsets(topic, known[0] if known else None, tuple(rows)))
    return tuple(out)


def plan_alter(asked: dict[str, dict[int, int]], topics: dict[str, tuple[str, int]]
               ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """(the new SPSO of each partition to change, the error code of each refused)."""
    targets, errors = {}, {}
    for topic, parts in asked.items():
        known = topics.get(topic)
        for p, offset in parts.items():
            if known is None or not 0 <= p < known[1]:
                errors[(topic, p)] = E.UNKNOWN_TOPIC_OR_PARTITION
            else:
                targets[(topic, p)] = offset
    return targets, errors


def plan_delete(asked: list[str], topics: dict[str, tuple[str, int]],
                stored_topics: set[str]) -> tuple[list[tuple[str, int]], list[TopicOutcome]]:
    """(the partitions whose state goes, the topics refused)."""
    targets, refused = [], []
    for topic in asked:
        known = topics.get(topic)
        if known is None:
            refused.append(TopicOutcome(topic, None, E.UNKNOWN_TOPIC_OR_PARTITION,
                                        UNKNOWN_MESSAGE))
        elif topic not in stored_topics:
            refused.append(TopicOutcome(topic, known[0], E.UNKNOWN_TOPIC_OR_PARTITION,
                                        NO_STATE_MESSAGE))
        else:
            targets.extend((topic, p) for p in range(known[1]))
    return targets, refused
