"""The replica manager's DeleteRecords, the leader's side (Kafka 3.8's
ReplicaManager.deleteRecordsOnLocalLog, Partition.deleteRecordsOnLeader and
lowWatermarkIfLeader). A part of `replicas.replica_manager.ReplicaManager` (its state:
`_partitions`, `metadata`, `_not_hosted`, `_storage_error`, `_write_recovery_points`,
`_offline`).

Rules:
- `delete_records(tp, offset)` → Deletion(error, low watermark, offset asked), errors in Kafka's order: unknown
  (3), internal topic (17), not leader (6), cleanup.policy without delete
  (POLICY_VIOLATION 44), offset -1 meaning the HW, below 0 or above the HW (1). The log
  start moves (whole segments below it go) and is checkpointed before the answer; an I/O
  error takes the directory offline (56).
- The low watermark is the lowest log start of the partition's replicas: the leader's own
  and each follower's as its last fetch said, for followers whose broker is live in the
  metadata cache; a follower that has not fetched since this broker led answers -1
  (Kafka's UnknownOffset). A follower adopts the leader's log start from its next fetch
  answer (below its own HW) and reports it in the fetch after, so the low watermark reaches
  the requested offset a fetch round or two after the leader moved.
- `low_watermark(tp)` → (error, low watermark) for a DeleteRecords waiting on it (Kafka's
  DelayedDeleteRecords.tryComplete): not hosted here → 3 (6 where the metadata knows the
  partition, 56 on an offline directory), not the leader → 6.
"""

from __future__ import annotations

from typing import NamedTuple

from replicas.errors import InvalidTopic, KafkaStorageError, PolicyViolation
from replicas.metadata_cache import TopicPartition
from replicas.partition_state import NONE, NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE

INVALID_TOPIC = InvalidTopic.code
POLICY_VIOLATION = PolicyViolation.code
KAFKA_STORAGE_ERROR = KafkaStorageError.code
NO_LOW_WATERMARK = -1


class Deletion(NamedTuple):
    """A DeleteRecords answer for one partition: `offset` is the offset asked (the HW for
    -1), which the low watermark must reach before the request is answered."""
    error: int
    low_watermark: int
    offset: int = NO_LOW_WATERMARK


class RecordDeletion:
    def delete_records(self, tp, offset: int) -> Deletion:
        """DeleteRecords for one partition on its leader."""
        part = self._partitions.get(TopicPartition(*tp))
        if part is None:
            return Deletion(self._not_hosted(tp), NO_LOW_WATERMARK)
        if tp[0].startswith("__"):
            return Deletion(INVALID_TOPIC, NO_LOW_WATERMARK)
        state, log = part.state, part.log
        if not state.is_leader:
            return Deletion(NOT_LEADER_OR_FOLLOWER, NO_LOW_WATERMARK)
        if not log.config.retention.delete:
            return Deletion(POLICY_VIOLATION, NO_LOW_WATERMARK)
        target = state.high_watermark if offset == -1 else offset
        if not 0 <= target <= state.high_watermark:
            return Deletion(OFFSET_OUT_OF_RANGE, NO_LOW_WATERMARK)
        if target > log.log_start_offset:
            try:
                log.delete_records_before(target)
            except OSError as exc:
                return Deletion(self._storage_error(part, exc), NO_LOW_WATERMARK)
            self._write_recovery_points()
            if part.tp in self._offline:
                return Deletion(KAFKA_STORAGE_ERROR, NO_LOW_WATERMARK)
        return Deletion(NONE, self._low_watermark(part), target)

    def low_watermark(self, tp) -> tuple[int, int]:
        """(error, the lowest log start of the partition's live replicas) on its leader."""
        part = self._partitions.get(TopicPartition(*tp))
        if part is None:
            return self._not_hosted(tp), NO_LOW_WATERMARK
        if not part.state.is_leader:
            return NOT_LEADER_OR_FOLLOWER, NO_LOW_WATERMARK
        return NONE, self._low_watermark(part)

    def _low_watermark(self, part) -> int:
        low = part.log.log_start_offset
        live = self.metadata.live_brokers
        for broker, progress in part.state.followers.items():
            if broker in live and progress.log_start_offset < low:
                low = progress.log_start_offset
        return low
