"""The transaction coordinator's storage (Kafka 3.8's TransactionStateManager.scala): the cache
of transactional ids per `__transaction_state` partition, loading and unloading, appends, and
the lists of timed-out and expired transactional ids.

TransactionCoordinator (transactions/coordinator.py) holds one and validates every request
before it asks anything of it; the storage never answers a request on its own.

Rules:
- The cache holds, per owned partition, the coordinator epoch it was loaded at (the
  partition's leader epoch) and its transactional ids; `loading` holds the partitions being
  read (BeginLoad until LoadPartition). `get_state(tid)` is Kafka's getTransactionState: the
  partition loading → COORDINATOR_LOAD_IN_PROGRESS (even while an older load is still
  cached), not owned → NOT_COORDINATOR, else (coordinator epoch, metadata or None).
- `append_transition` is appendTransactionToLog: the transit's record (key and v0 value) is
  an `Append` effect to the transactional id's partition. On AppendDone: success → the
  cache's metadata completes the transition (transactions/metadata.py), unless the partition
  is loading again (that error is answered) or owned at another epoch (NOT_COORDINATOR);
  failure → the error is mapped (transactions/error_codes.py) and the pending state is
  cleared, unless the caller retries that error (the completion of a transaction retries
  COORDINATOR_NOT_AVAILABLE and keeps its pending state). Kafka re-checks the cache between
  preparing and appending; here both happen in one `process` call, so nothing can change.
- Unloading (or replacing a load with a newer epoch) drops the partition's transactional ids
  and every append in flight for it: the writer's `on_lost()` runs (a request waiting for
  it is answered NOT_COORDINATOR) and a later AppendDone of that token is ignored.
- Loading replays the records oldest first: the last value per transactional id wins, a
  tombstone deletes it; the metadata read back has no last producer id/epoch (Kafka 3.8's
  value has none). Undecodable records, unknown key versions and values in a state Kafka
  never writes (Dead, PrepareEpochFence) are skipped and logged (Kafka skips unknown keys
  but stops the whole load at an undecodable value, keeping only what came before it). A
  load at an epoch not newer than the cached one is stale and ignored.
- Timed out (timedOutTransactions): Ongoing, no pending transition, start + timeout < now.
  Expired (removeExpiredTransactionalIds, partitions not loading): Empty/CompleteCommit/
  CompleteAbort, no pending transition, last update ≤ now - transactional.id.expiration.ms;
  they move to pending Dead and one Append of tombstones per partition is written (Kafka
  splits it by the partition's max batch size); on success each whose pending state is still
  Dead at the same epoch leaves the cache, otherwise its pending state is cleared.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Iterable

from replicas.errors import ErrorCode as E
from transactions import messages as m
from transactions import records as rec
from transactions.config import TransactionCoordinatorConfig
from transactions.error_codes import append_error
from transactions.metadata import TransactionMetadata, TxnTransitMetadata
from transactions.states import NEVER_CURRENT, TransactionState

log = logging.getLogger(__name__)
T = TransactionState


@dataclass(slots=True)
class PartitionCache:
    """Kafka's TxnMetadataCacheEntry."""
    coordinator_epoch: int
    transactions: dict[str, TransactionMetadata] = field(default_factory=dict)


@dataclass(slots=True)
class _InFlight:
    partition: int
    on_done: Callable[[int], None]
    on_lost: Callable[[], None] | None = None


class TransactionStateManager:
    def __init__(self, config: TransactionCoordinatorConfig, emit: Callable[[object], None]):
        self.config = config
        self.cache: dict[int, PartitionCache] = {}
        self.loading: set[int] = set()
        self._emit = emit
        self._in_flight: dict[int, _InFlight] = {}
        self._next_token = 1
        self.value_version = rec.VALUE_WRITE_VERSION   # 1 once transaction.version >= 1

    def partition_for(self, transactional_id: str) -> int:
        return rec.partition_for(transactional_id, self.config.transaction_state_log_num_partitions)

    def get_state(self, transactional_id: str
                  ) -> tuple[int | None, int, TransactionMetadata | None]:
        """(error or None, coordinator epoch, metadata or None)."""
        partition = self.partition_for(transactional_id)
        if partition in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS, -1, None
        entry = self.cache.get(partition)
        if entry is None:
            return E.NOT_COORDINATOR, -1, None
        return None, entry.coordinator_epoch, entry.transactions.get(transactional_id)

    def put_if_not_exists(self, metadata: TransactionMetadata) -> TransactionMetadata:
        entry = self.cache[self.partition_for(metadata.transactional_id)]
        return entry.transactions.setdefault(metadata.transactional_id, metadata)

    def transactions(self) -> Iterable[TransactionMetadata]:
        for entry in self.cache.values():
            yield from entry.transactions.values()

    # -- appends ----------------------------------------------------------------------------
    def append(self, partition: int, records, on_done: Callable[[int], None],
               on_lost: Callable[[], None] | None = None) -> int:
        token, self._next_token = self._next_token, self._next_token + 1
        self._in_flight[token] = _InFlight(partition, on_done, on_lost)
        self._emit(m.Append(partition, tuple(records), token))
        return token

    def append_transition(self, transactional_id: str, coordinator_epoch: int,
                          transit: TxnTransitMetadata, callback: Callable[[int], None],
                          retry_on: Callable[[int], bool] = lambda error: False,
                          on_lost: Callable[[], None] | None = None) -> None:
        """Write `transit`; `callback(client error)` once it is durable and in the cache, or
        failed (the pending state cleared unless `retry_on(error)`)."""
        record = rec.transaction_record(transactional_id, transit.to_log_value(),
                                        self.value_version)

        def done(append_code: int) -> None:
            error = append_error(append_code)
            state_error, epoch, metadata = self.get_state(transactional_id)
            if error == E.NONE:
                if state_error is not None:
                    error = state_error
                elif metadata is None or epoch != coordinator_epoch:
                    error = E.NOT_COORDINATOR
                else:
                    metadata.complete_transition_to(transit)
            elif state_error is None and metadata is not None and epoch == coordinator_epoch \
                    and not retry_on(error):
                metadata.pending_state = None
            callback(error)

        self.append(self.partition_for(transactional_id), [record], done, on_lost)

    def append_done(self, token: int, error: int) -> None:
        pending = self._in_flight.pop(token, None)
        if pending is not None:
            pending.on_done(error)

    # -- loading and unloading --------------------------------------------------------------
    def begin_load(self, partition: int) -> None:
        self.loading.add(partition)

    def is_stale_load(self, partition: int, coordinator_epoch: int) -> bool:
        entry = self.cache.get(partition)
        return entry is not None and coordinator_epoch <= entry.coordinator_epoch

    def load_partition(self, partition: int, coordinator_epoch: int, records
                       ) -> list[TransactionMetadata]:
        """Own `partition` at `coordinator_epoch` with the transactional ids its records hold
        (the caller unloaded any older load first); the loaded metadata."""
        loaded: dict[str, TransactionMetadata] = {}
        for key_bytes, value_bytes in records:
            try:
                key = rec.decode_key(key_bytes)
                if isinstance(key, rec.UnknownKey):
                    log.warning("skipping a record with unknown key version %s of "
                                "__transaction_state-%s", key.version, partition)
                    continue
                tid = key.transactional_id
                if value_bytes is None:
                    loaded.pop(tid, None)
                    continue
                metadata = TransactionMetadata.from_log_value(tid, rec.decode_value(value_bytes))
                if metadata.state in NEVER_CURRENT:
                    raise rec.RecordFormatError(f"state {metadata.state!r} is never written")
                loaded[tid] = metadata
            except (rec.RecordFormatError, ValueError) as exc:
                log.error("skipping an undecodable record of __transaction_state-%s: %s",
                          partition, exc)
        self.loading.discard(partition)
        self.cache[partition] = PartitionCache(coordinator_epoch, loaded)
        return list(loaded.values())

    def is_stale_unload(self, partition: int, coordinator_epoch: int) -> bool:
        entry = self.cache.get(partition)
        return coordinator_epoch >= 0 and entry is not None \
            and coordinator_epoch < entry.coordinator_epoch

    def unload_partition(self, partition: int) -> None:
        self.loading.discard(partition)
        self.cache.pop(partition, None)
        for token, pending in list(self._in_flight.items()):
            if pending.partition == partition:
                del self._in_flight[token]
                if pending.on_lost is not None:
                    pending.on_lost()

    # -- periodic jobs ----------------------------------------------------------------------
    def timed_out_transactions(self, now_ms: int) -> list[tuple[str, int, int]]:
        """(transactional id, producer id, producer epoch) of every timed-out transaction."""
        return [(md.transactional_id, md.producer_id, md.producer_epoch)
                for md in self.transactions()
                if md.pending_state is None and md.state is T.ONGOING
                and md.txn_start_timestamp_ms + md.txn_timeout_ms < now_ms]

    def remove_expired_transactional_ids(self, now_ms: int) -> None:
        horizon = now_ms - self.config.transactional_id_expiration_ms
        for partition, entry in sorted(self.cache.items()):
            if partition in self.loading:
                continue
            expired = [(md, md.prepare_dead()) for md in list(entry.transactions.values())
                       if md.pending_state is None and md.state.expiration_allowed
                       and md.txn_last_update_timestamp_ms <= horizon]
            if expired:
                records = [rec.transaction_record(md.transactional_id, None) for md, _ in expired]
                self.append(partition, records,
                            lambda error, entry=entry, expired=expired:
                            self._on_tombstones_done(entry, expired, error))

    def _on_tombstones_done(self, entry: PartitionCache, expired, error: int) -> None:
        for md, transit in expired:
            if entry.transactions.get(md.transactional_id) is md and error == E.NONE \
                    and md.pending_state is T.DEAD \
                    and md.producer_epoch == transit.producer_epoch:
                del entry.transactions[md.transactional_id]
            else:
                log.warning("failed to remove expired transactional id %s (error %s)",
                            md.transactional_id, error)
                md.pending_state = None

    def list_transactions(self, state_filters, producer_id_filters, duration_filter_ms: int,
                          now_ms: int) -> m.ListTransactionsResult:
        """listTransactionStates: Dead is never listed; unknown state names are answered back."""
        if self.loading:
            return m.ListTransactionsResult(E.COORDINATOR_LOAD_IN_PROGRESS)
        unknown = tuple(dict.fromkeys(s for s in state_filters if T.from_name(s) is None))
        states = {T.from_name(s) for s in state_filters} - {None}
        pids = set(producer_id_filters)
        listed = tuple(
            m.ListedTransaction(md.transactional_id, md.producer_id, md.state.state_name)
            for _, entry in sorted(self.cache.items())
            for md in entry.transactions.values()
            if md.state is not T.DEAD
            and (not pids or md.producer_id in pids)
            and (not state_filters or md.state in states)
            and not (duration_filter_ms >= 0
                     and now_ms - md.txn_start_timestamp_ms <= duration_filter_ms))
        return m.ListTransactionsResult(E.NONE, unknown, listed)
