"""The replica manager's follower side: what Kafka's AbstractFetcherThread calls in
Partition / UnifiedLog for a follower replica. A part of
`replicas.replica_manager.ReplicaManager` (its state: `_partitions`, `_process`,
`_persist`, `_write_recovery_points`, `_raising_storage_error`, `_raise_storage_error`).

Rules:
- `follower_fetch_request` gives (LEO, latest epoch of the epoch cache, current leader
  epoch); the shell MUST send all three. Truncation: either ask `offsets_for_leader_epoch`
  while `partition_info(tp)["truncation_pending"]`, or fetch and act on `diverging_epoch`;
  both answers go to `follower_truncate` (epoch_cache.follower_truncation; never to the HW
  alone, KAFKA-1211), repeated with `next_epoch` while not `completed`. A NON-diverging
  fetch answer to a fetch that carried last_fetched_epoch proves the logs agree (the leader
  validated it), so `append_as_follower` completes a pending truncation at the current LEO
  first (truncate-on-fetch, Kafka >= 2.7). Answers carrying a fetch_offset / leader_epoch
  that no longer match are stale and ignored. A truncation at or beyond the LEO still cuts
  the epoch cache at the LEO (Kafka's UnifiedLog.truncateTo): a replica that led an epoch
  without appending must not keep offering that epoch. Follower appends keep the leader's
  offsets and epochs (the epoch cache follows the batch epochs) and feed the producer state.
- A fetch answer carries the leader's log start offset; a follower moves its own log start
  up to it, never past its own HW (retention or DeleteRecords on the leader reach every
  replica).
- OFFSET_OUT_OF_RANGE with our LEO below the leader's log start: the log restarts empty at
  that start (`follower_start_at_leader_log_start`); the HW follows the leader's.
- An I/O error in any of these calls takes the partition's log directory offline and
  raises KafkaStorageError (the fetcher drops the partition; replicas/log_dirs.py).
"""

from __future__ import annotations

from replicas import partition_state as ps
from replicas.epoch_cache import follower_truncation
from replicas.errors import NotLeaderOrFollower
from replicas.partition_state import NO_EPOCH
from replicas.replica_types import FetchPosition, TruncationResult


class FollowerSide:
    def _follower(self, tp):
        part = self._get(tp)
        if part.state.role is not ps.Role.FOLLOWER:
            raise NotLeaderOrFollower(f"{tp[0]}-{tp[1]} is {part.state.role.value} on broker "
                                      f"{self.broker_id}, not a follower")
        return part

    def follower_fetch_request(self, tp) -> FetchPosition:
        part = self._follower(tp)
        return FetchPosition(part.log.log_end_offset, part.log.latest_epoch,
                             part.state.leader_epoch)

    def follower_truncate(self, tp, leader_epoch_answer: int, leader_end_offset: int, *,
                          leader_epoch: int | None = None) -> TruncationResult:
        """Truncate on the leader's (epoch, end offset) answer or a diverging epoch."""
        part = self._follower(tp)
        with self._raising_storage_error(part):
            return self._follower_truncate(part, leader_epoch_answer, leader_end_offset,
                                           leader_epoch)

    def _follower_truncate(self, part, leader_epoch_answer: int,
                           leader_end_offset: int, leader_epoch: int | None) -> TruncationResult:
        state, log = part.state, part.log
        if leader_epoch is not None and leader_epoch != state.leader_epoch:
            return TruncationResult(log.log_end_offset, 0, False, log.latest_epoch, stale=True)
        if not state.truncation_pending:   # a diverging epoch arrived in a fetch answer
            self._process(part, ps.FollowerFetchResponse(log.log_end_offset,
                                                         state.high_watermark, diverging=True))
        decision = follower_truncation(log.epoch_cache, log.log_end_offset, leader_epoch_answer,
                                       leader_end_offset, state.high_watermark)
        removed = self._truncate(part, decision.offset)
        effects = []
        if decision.completed:
            effects = self._process(part, ps.TruncationCompleted(log.log_end_offset))
        self._persist()
        return TruncationResult(log.log_end_offset, removed, decision.completed,
                                NO_EPOCH if decision.completed else log.latest_epoch, effects)

    def _truncate(self, part, offset: int) -> int:
        log = part.log
        if offset >= log.log_end_offset:
            # Kafka's UnifiedLog.truncateTo: ALWAYS cut the epoch cache at the LEO. A replica
            # that led an epoch without appending keeps (epoch, LEO) at its end, would keep
            # sending it as last_fetched_epoch and diverge forever.
            log.epoch_cache.truncate_from_end(log.log_end_offset)
            return 0
        removed = log.truncate_to(offset)
        part.state.log_end_offset = log.log_end_offset
        part.producers.invalidate()
        self._write_recovery_points()
        return removed

    def append_as_follower(self, tp, records_buf, leader_high_watermark: int, *,
                           fetch_offset: int | None = None,
                           leader_epoch: int | None = None,
                           leader_log_start_offset: int | None = None) -> list:
        """Append a fetch answer from the leader; [] if the answer is stale (see the module
        docstring, "Follower side")."""
        part = self._follower(tp)
        try:        # `_raising_storage_error`, inline: a follower calls this every round
            return self._append_as_follower(part, records_buf, leader_high_watermark,
                                            fetch_offset, leader_epoch, leader_log_start_offset)
        except OSError as exc:
            self._raise_storage_error(part, exc)

    def _append_as_follower(self, part, records_buf, leader_high_watermark: int,
                            fetch_offset: int | None, leader_epoch: int | None,
                            leader_log_start_offset: int | None) -> list:
        state, log = part.state, part.log
        if (leader_epoch is not None and leader_epoch != state.leader_epoch) or \
                (fetch_offset is not None and fetch_offset != log.log_end_offset):
            return []
        effects = []
        if state.truncation_pending:
            effects += self._process(part, ps.TruncationCompleted(log.log_end_offset))
        if records_buf:
            part.producers.append_as_follower(records_buf)
            if self.config.log_flush_before_ack:
                part.log.sync_data()    # the next fetch's offset tells the leader it is on disk
        effects += self._process(part, ps.FollowerFetchResponse(log.log_end_offset,
                                                                leader_high_watermark))
        # Kafka's maybeIncrementLogStartOffset(LeaderOffsetIncremented): never past our HW
        new_start = min(leader_log_start_offset or 0, state.high_watermark)
        if new_start > log.log_start_offset:
            log.delete_records_before(new_start)
            self._write_recovery_points()          # the log-start checkpoint with them
        self._persist()
        return effects

    def follower_start_at_leader_log_start(self, tp, leader_log_start_offset: int,
                                           leader_high_watermark: int, *,
                                           leader_epoch: int | None = None) -> list:
        """The leader answered OFFSET_OUT_OF_RANGE because our LEO is below its log start
        (retention or DeleteRecords removed what we lack): drop everything and start empty
        at the leader's log start (Kafka's fetchOffsetAndTruncate → truncateFullyAndStartAt).
        [] and nothing changed if the answer is stale or our LEO is not below that start."""
        part = self._follower(tp)
        with self._raising_storage_error(part):
            return self._follower_start_at(part, leader_log_start_offset, leader_high_watermark,
                                           leader_epoch)

    def _follower_start_at(self, part, leader_log_start_offset: int,
                           leader_high_watermark: int, leader_epoch: int | None) -> list:
        state, log = part.state, part.log
        if (leader_epoch is not None and leader_epoch != state.leader_epoch) or \
                leader_log_start_offset <= log.log_end_offset:
            return []
        log.truncate_fully_and_start_at(leader_log_start_offset)
        part.producers.invalidate()
        self._write_recovery_points()
        effects = []
        if state.truncation_pending:     # nothing of ours is left to diverge
            effects += self._process(part, ps.TruncationCompleted(log.log_end_offset))
        effects += self._process(part, ps.FollowerFetchResponse(log.log_end_offset,
                                                                leader_high_watermark))
        self._persist()
        return effects

