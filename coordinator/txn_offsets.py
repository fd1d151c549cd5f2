"""One group's pending transactional offsets (KIP-98): the TxnOffsetCommit values waiting for
their producer's COMMIT or ABORT marker.

Rules (Kafka 3.8's GroupMetadata.scala: pendingTransactionalOffsetCommits, prepareTxnOffsetCommit,
onTxnOffsetCommitAppend, failPendingTxnOffsetCommit, completePendingTxnOffsetCommit,
hasPendingOffsetCommitsFromProducer, hasPendingOffsetCommitsForTopicPartition, removeOffsets):
- Per producer id and (topic, partition): the value acknowledged last, with its position in
  the log, and the values whose append is still in flight, by append token. All of them are
  pending from the TxnOffsetCommit until the producer's marker: a require_stable OffsetFetch
  of the partition answers UNSTABLE_OFFSET_COMMIT, and the group counts as having offsets.
- An acknowledged append becomes the producer's value when it is later in the log than the
  one it has; a failed append drops only its own value. Decision: Kafka keeps one entry per
  producer and partition, so a failed retry also drops an acknowledged value; here every
  append is tracked on its own, as group.py does for plain commits.
- A marker (`complete`) ends the producer's pending offsets of the group: a COMMIT hands the
  acknowledged values to the group, which keeps each one only if it is later in the log than
  its committed offset (CommitRecordMetadataAndOffset.olderThan); an ABORT drops them.
- Decision (Kafka throws IllegalStateException when a COMMIT finds an append not yet
  acknowledged): an append still in flight is resolved by the marker that came first
  (`resolved`), committed when it is acknowledged or dropped. It was appended before the
  marker: a client sends EndTxn only once its TxnOffsetCommit is answered, and a timed-out
  transaction is aborted with its epoch fenced, so a later append of it fails.
- Removing a partition's offsets (DeleteGroups) drops its pending values of every producer
  and its resolved appends; offset expiry does not touch them (removeExpiredOffsets spares
  only the plain commits in flight).
- Positions are opaque and totally ordered (group.py makes them); values are opaque too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class PendingTxnOffset:
    """One producer's pending offset of one partition."""
    acknowledged: tuple | None = None                 # (position, value): appended, in the log
    in_flight: dict = field(default_factory=dict)     # append token → value

    def is_empty(self) -> bool:
        return self.acknowledged is None and not self.in_flight


@dataclass(slots=True)
class ResolvedAppend:
    """An append still in flight when its producer's marker came: its outcome is known."""
    committed: bool
    partitions: set


class PendingTxnOffsets:
    def __init__(self):
        self.by_producer: dict[int, dict[TopicPartition, PendingTxnOffset]] = {}
        self.resolved: dict[int, ResolvedAppend] = {}   # append token → its marker's outcome

    def __bool__(self) -> bool:
        return bool(self.by_producer) or any(r.committed and r.partitions
                                             for r in self.resolved.values())

    # -- queries ----------------------------------------------------------------------------
    def producers(self) -> list[int]:
        return list(self.by_producer)

    def has_producer(self, producer_id: int) -> bool:
        return producer_id in self.by_producer

    def has_pending(self, tp: TopicPartition) -> bool:
        """Kafka's hasPendingOffsetCommitsForTopicPartition, for the transactional half; an
        append resolved as committed still counts until it lands."""
        return any(tp in offsets for offsets in self.by_producer.values()) or any(
            r.committed and tp in r.partitions for r in self.resolved.values())

    def partitions(self) -> set[TopicPartition]:
        out = {tp for offsets in self.by_producer.values() for tp in offsets}
        for r in self.resolved.values():
            out |= r.partitions
        return out

    # -- a TxnOffsetCommit's append -----------------------------------------------------------
    def prepare(self, producer_id: int, offsets: dict, token: int) -> None:
        mine = self.by_producer.setdefault(producer_id, {})
        for tp, value in offsets.items():
            mine.setdefault(tp, PendingTxnOffset()).in_flight[token] = value

    def acknowledge(self, producer_id: int, token: int, offsets: dict, position) -> dict:
        """The append `token` of `offsets` is in the log at `position`; the (position, value)
        per partition to commit now (its marker came first), else {}."""
        resolved = self.resolved.pop(token, None)
        if resolved is not None:
            if not resolved.committed:
                return {}
            return {tp: (position, v) for tp, v in offsets.items() if tp in resolved.partitions}
        mine = self.by_producer.get(producer_id, {})
        for tp, value in offsets.items():
            entry = mine.get(tp)
            if entry is None or entry.in_flight.pop(token, None) is None:
                continue  # removed meanwhile (DeleteGroups): do not bring it back
            if entry.acknowledged is None or entry.acknowledged[0] < position:
                entry.acknowledged = (position, value)
        return {}

    def fail(self, producer_id: int, token: int, tps: Iterable[TopicPartition]) -> None:
        if self.resolved.pop(token, None) is not None:
            return
        mine = self.by_producer.get(producer_id)
        if mine is None:
            return
        for tp in tps:
            entry = mine.get(tp)
            if entry is not None:
                entry.in_flight.pop(token, None)
                if entry.is_empty():
                    del mine[tp]
        if not mine:
            del self.by_producer[producer_id]

    def load(self, producer_id: int, tp: TopicPartition, position, value) -> None:
        """A transactional record read from the log with no marker of its producer after it."""
        self.by_producer.setdefault(producer_id, {})[tp] = PendingTxnOffset((position, value))

    # -- the marker -------------------------------------------------------------------------
    def complete(self, producer_id: int, committed: bool) -> dict:
        """The producer's marker: its pending offsets end; the (position, value) per partition
        a COMMIT makes committed (the caller keeps the later ones)."""
        out = {}
        for tp, entry in self.by_producer.pop(producer_id, {}).items():
            if committed and entry.acknowledged is not None:
                out[tp] = entry.acknowledged
            for token in entry.in_flight:
                self.resolved.setdefault(token, ResolvedAppend(committed, set())).partitions.add(tp)
        return out

    # -- removal ----------------------------------------------------------------------------
    def remove(self, tps: Iterable[TopicPartition]) -> None:
        tps = set(tps)
        for producer_id in list(self.by_producer):
            mine = self.by_producer[producer_id]
            for tp in tps & set(mine):
                del mine[tp]
            if not mine:
                del self.by_producer[producer_id]
        for r in self.resolved.values():
            r.partitions -= tps
