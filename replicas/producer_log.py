"""One partition's log as its producers and read_committed consumers see it: the producer
state kept in step with the log, the `.txnindex` entries of aborted transactions, the last
stable offset and KIP-890 verification (the producer-state half of Kafka's UnifiedLog).

Rules (Kafka 3.8 core/.../log/UnifiedLog.scala append, analyzeAndValidateProducerState,
updateProducers, lastStableOffset, maybeIncrementFirstUnstableOffset,
collectAbortedTransactions, maybeStartTransactionVerification, rebuildProducerState;
storage/.../log/LogSegment.java updateTxnIndex and recover; LogValidator.java validateBatch;
core/.../server/ReplicaManager.scala handleProduceAppend):
- Leader append, origin CLIENT (a producer) or COORDINATOR: a client buffer holding a
  control batch → INVALID_RECORD (87) ("Clients are not allowed to write control
  records"); then the producer checks (replicas/producer_state.py `prepare`, with the
  verification guard the append carries). Corruption (CRC, size) is reported before any
  producer error; a duplicate answers with the original offsets and writes nothing; else
  the log write (replicas/log.py), then `commit`. Batches without a producer id never
  touch the producer state: the hot path stays header-only.
- End-transaction markers (`append_marker`, the leader side of WriteTxnMarkers): the
  producer state's marker checks (INVALID_PRODUCER_EPOCH 47, TRANSACTION_COORDINATOR_FENCED
  52), then the marker batch (replicas/control.py) is written as a leader append (offset,
  leader epoch), applied, and an ABORT that completed a transaction is indexed in the
  `.txnindex` of the segment holding the marker with its last stable offset.
- Follower append: the batches are applied one at a time, the transaction a marker
  completes right after the marker (LogSegment.recover's order), so the last stable offset
  an ABORT records, and so the `.txnindex`, is the same on every replica as on the leader.
  The one record of each marker batch is the only record ever decoded on these paths.
- Lazy: the state is rebuilt (every batch header, plus the record of each marker batch)
  only when something needs it: a producer append or marker on the leader (the leader
  rebuilds when it takes over), a follower append of a marker, an LSO or verification
  question, the cleaner. The rebuild also rewrites the stale `.txnindex` files (replicas/
  log.py `rewrite_txn_indexes`). Any truncation that removed data invalidates the state and
  ends pending verifications. A rebuild starts from the first segment: a transaction
  opened in a segment retention already deleted is seen from its first surviving batch
  (Kafka keeps producer snapshots for that; rayka keeps none).
- Last stable offset (UnifiedLog.lastStableOffset): the first unstable offset (clamped at
  the log start) when it is below the HW, else the HW.
- Aborted transactions of a read_committed fetch: (producer id, first offset) of the index
  entries overlapping [fetch offset, end of the batches returned), in index order; none
  when nothing is returned. Kafka bounds the search by the offset index instead (a few
  more entries at most); a consumer needs exactly these.
- Verification (KIP-890 part 1): `needs_verification` names the (producer id, epoch) of a
  buffer's transactional batches (more than one pair → INVALID_PRODUCER_ID_MAPPING 49, as
  handleProduceAppend); `maybe_start_verification` returns None when that producer already
  has a transaction open here, else its guard (replicas/producer_state.py).
"""

from __future__ import annotations

from typing import NamedTuple

from replicas import records
from replicas.control import (ABORT, COMMIT, CONTROL_FLAG, TRANSACTIONAL_FLAG, control_type,
                              end_txn_marker, end_txn_marker_batch)
from replicas.errors import InvalidProducerIdMapping, InvalidRecord
from replicas.log import AppendInfo, Log
from replicas.producer_state import (CLIENT, BatchMetadata, CompletedTxn, ProducerStateManager,
                                     VerificationGuard)
from replicas.txn_index import AbortedTxn


class TxnProducer(NamedTuple):
    producer_id: int
    producer_epoch: int


def _aborted(txn: CompletedTxn) -> AbortedTxn:
    return AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset)


def needs_verification(headers) -> TxnProducer | None:
    """The (producer id, epoch) of the transactional batches of a produce buffer, None
    when it has none; InvalidProducerIdMapping when they name more than one."""
    found = {TxnProducer(h.producer_id, h.producer_epoch) for h in headers
             if h.producer_id >= 0 and h.attributes & TRANSACTIONAL_FLAG}
    if len(found) > 1:
        raise InvalidProducerIdMapping(
            f"transactional records of more than one producer id and epoch: {sorted(found)}")
    return next(iter(found), None)


class ProducerLog:
    def __init__(self, log: Log, verification_enabled: bool = True):
        self.log = log
        self.state = ProducerStateManager(verification_enabled)
        if log.size_bytes == 0:
            self.state.loaded = True     # nothing to scan: appends keep it current

    @property
    def loaded(self) -> bool:
        return self.state.loaded

    def ensure_loaded(self) -> None:
        """Rebuild the state from the log (and the stale `.txnindex` files) if stale."""
        if self.state.loaded:
            return
        completed = self.state.rebuild(self.log.headers(), self.log.read_marker)
        self.log.rewrite_txn_indexes([_aborted(t) for t in completed if t.aborted])

    def invalidate(self) -> None:
        """The log lost data (truncation): rebuild before the next use; verifications end."""
        self.state.invalidate()

    def clear_verifications(self) -> None:
        self.state.clear_verifications()

    # -- appends ---------------------------------------------------------------------------
    def append_as_leader(self, buf, leader_epoch: int, origin: str = CLIENT,
                         guard: VerificationGuard | None = None) -> AppendInfo | BatchMetadata:
        """Check and write a producer's buffer (see module rules); a BatchMetadata is the
        duplicate to answer with (nothing written). Raises the typed Kafka error."""
        log = self.log
        # corruption (CRC, size) is answered before anything a producer did wrong
        headers = records.validate_batches(buf, log.config.max_message_bytes)
        control = with_producer = False
        for h in headers:
            control |= bool(h.attributes & CONTROL_FLAG)
            with_producer |= h.producer_id >= 0
        if origin == CLIENT and control:
            raise InvalidRecord(f"Clients are not allowed to write control records in topic "
                                f"partition {log.dir.name}")
        prepared = None
        if with_producer:
            self.ensure_loaded()
            prepared = self.state.prepare(headers, log.log_end_offset, origin, guard)
            if prepared.duplicate is not None:
                return prepared.duplicate
        info = log.append_as_leader(buf, leader_epoch, headers)
        if prepared is not None:
            self.state.commit(prepared)
        return info

    def append_marker(self, producer_id: int, producer_epoch: int, committed: bool,
                      coordinator_epoch: int, leader_epoch: int, timestamp_ms: int) -> AppendInfo:
        """Write a COMMIT or ABORT marker for `producer_id` (see module rules); raises."""
        self.ensure_loaded()
        self.state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        kind = COMMIT if committed else ABORT
        batch = end_txn_marker_batch(producer_id, producer_epoch, kind, coordinator_epoch,
                                     timestamp_ms)
        info = self.log.append_as_leader(batch, leader_epoch)
        self._completed(self.state.apply_marker(producer_id, producer_epoch, kind,
                                                coordinator_epoch, info.first_offset,
                                                timestamp_ms))
        return info

    def append_as_follower(self, buf) -> AppendInfo:
        """Append the leader's batches as they are and apply them to the state."""
        headers = records.validate_batches(buf, None, require_records=False)
        markers = {}
        for i, h in enumerate(headers):
            if h.attributes & CONTROL_FLAG and h.producer_id >= 0:
                raw = memoryview(buf)[h.position:h.position + h.size]
                markers[i] = end_txn_marker(raw) if control_type(raw) in (ABORT, COMMIT) \
                    else None
        if markers:
            self.ensure_loaded()
        info = self.log.append_as_follower(buf, headers)
        if self.state.loaded:
            for i, h in enumerate(headers):
                if h.producer_id >= 0:
                    self._completed(self.state.update(h, markers.get(i)))
        return info

    def _completed(self, txn: CompletedTxn | None) -> None:
        if txn is not None and txn.aborted:
            self.log.append_aborted(_aborted(txn))

    # -- queries -------------------------------------------------------------------------
    def first_unstable_offset(self, high_watermark: int) -> int | None:
        self.ensure_loaded()
        first = self.state.first_unstable_offset(high_watermark)
        return None if first is None else max(first, self.log.log_start_offset)

    def last_stable_offset(self, high_watermark: int) -> int:
        first = self.first_unstable_offset(high_watermark)
        return first if first is not None and first < high_watermark else high_watermark

    def aborted_transactions(self, fetch_offset: int, data) -> tuple[tuple[int, int], ...]:
        """(producer id, first offset) of the aborted transactions a read_committed
        consumer needs for the batches `data` read from `fetch_offset`."""
        last = None
        for last in records.iter_headers(data):
            pass
        if last is None:
            return ()
        return tuple((t.producer_id, t.first_offset)
                     for t in self.log.collect_aborted(fetch_offset, last.next_offset))

    def maybe_start_verification(self, producer_id: int, producer_epoch: int | None = None,
                                 base_sequence: int | None = None,
                                 supports_epoch_bump: bool = False) -> VerificationGuard | None:
        self.ensure_loaded()
        return self.state.maybe_start_verification(producer_id, producer_epoch, base_sequence,
                                                   supports_epoch_bump)
