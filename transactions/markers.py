"""The transactions waiting for their markers, and the CompleteCommit/CompleteAbort that ends
each (Kafka 3.8's TransactionMarkerChannelManager.scala, the coordinator's half of it).

Rules:
- `add_txn_markers_to_send` (Kafka's addTxnMarkersToSend) is called when a Prepare* record is
  durable (EndTxn, a timed-out or fenced transaction) or was found in the log on load; the
  metadata already holds the pending Complete* transit. It emits `WriteMarkers` for the
  transaction's partitions with the coordinator epoch of that write or load; a transaction
  without partitions is completed at once (maybeWriteTxnCompletion).
- The shell sends the markers and reports `MarkersWritten`. One that matches no waiting
  transaction (another transactional id, producer id, epoch, result, or an older coordinator
  epoch: the partition was reloaded meanwhile and the load sent its own markers) is ignored.
- Completion (writeTxnCompletion, tryAppendToLog): if the partition is loading or not owned,
  nothing is written (the next load finishes the transaction); if it is owned at another
  epoch, nothing either; otherwise the Complete* transit is appended. Its failure with
  COORDINATOR_NOT_AVAILABLE keeps the pending state and is retried
  LOG_APPEND_RETRY_BACKOFF_MS later (at a Tick; Kafka on its sender thread's next pass);
  NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS give up (a load will finish it). Any
  other error is logged and the transaction stays in Prepare* until the partition is loaded
  again (Kafka throws from the callback, with the same state left behind).
- Unloading a partition forgets its transactions' markers and retries
  (removeMarkersForTxnTopicPartition).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

from replicas.errors import ErrorCode as E
from transactions import messages as m
from transactions.config import LOG_APPEND_RETRY_BACKOFF_MS
from transactions.metadata import IllegalTransactionState, TransactionMetadata, TxnTransitMetadata
from transactions.storage import TransactionStateManager

log = logging.getLogger(__name__)


@dataclass(slots=True)
class PendingCompleteTxn:
    transactional_id: str
    coordinator_epoch: int
    metadata: TransactionMetadata
    transit: TxnTransitMetadata
    committed: bool


class TransactionMarkerChannelManager:
    def __init__(self, storage: TransactionStateManager, emit: Callable[[object], None],
                 clock_ms: Callable[[], int]):
        self._storage = storage
        self._emit = emit
        self._clock = clock_ms
        self.pending: dict[str, PendingCompleteTxn] = {}       # waiting for MarkersWritten
        self.retries: dict[str, tuple[int, PendingCompleteTxn]] = {}  # (due ms, completion)

    def add_txn_markers_to_send(self, coordinator_epoch: int, committed: bool,
                                metadata: TransactionMetadata, transit: TxnTransitMetadata
                                ) -> None:
        tid = metadata.transactional_id
        pending = PendingCompleteTxn(tid, coordinator_epoch, metadata, transit, committed)
        self.retries.pop(tid, None)
        if not metadata.partitions:
            self.pending.pop(tid, None)
            return self._write_txn_completion(pending)
        self.pending[tid] = pending
        self._emit(m.WriteMarkers(tid, metadata.producer_id, metadata.producer_epoch, committed,
                                  coordinator_epoch, tuple(sorted(metadata.partitions))))

    def markers_written(self, e: m.MarkersWritten) -> None:
        pending = self.pending.get(e.transactional_id)
        if pending is None or pending.coordinator_epoch != e.coordinator_epoch \
                or pending.committed != e.committed \
                or pending.metadata.producer_id != e.producer_id \
                or pending.metadata.producer_epoch != e.producer_epoch:
            return
        del self.pending[e.transactional_id]
        self._write_txn_completion(pending)

    def retry_due(self, now_ms: int) -> None:
        for tid, (due_ms, pending) in sorted(self.retries.items()):
            if due_ms <= now_ms:
                del self.retries[tid]
                self._write_txn_completion(pending)

    def next_retry_ms(self) -> int | None:
        return min((due for due, _ in self.retries.values()), default=None)

    def remove_for_partition(self, partition: int) -> None:
        for table in (self.pending, self.retries):
            for tid in [t for t in table if self._storage.partition_for(t) == partition]:
                del table[tid]

    def _write_txn_completion(self, pending: PendingCompleteTxn) -> None:
        tid = pending.transactional_id
        error, epoch, metadata = self._storage.get_state(tid)
        if error is not None or epoch != pending.coordinator_epoch:
            return  # not ours any more, or loading: the (next) load completes it
        if metadata is None:
            raise IllegalTransactionState(f"the coordinator owns the partition of {tid} but has "
                                          "no metadata for it")

        def done(error: int) -> None:
            if error == E.COORDINATOR_NOT_AVAILABLE:
                self.retries[tid] = (self._clock() + LOG_APPEND_RETRY_BACKOFF_MS, pending)
            elif error not in (E.NONE, E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS):
                log.error("unexpected error %s appending the completion of %s", error, tid)

        self._storage.append_transition(tid, pending.coordinator_epoch, pending.transit, done,
                                        retry_on=lambda error: error == E.COORDINATOR_NOT_AVAILABLE)
