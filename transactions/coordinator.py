"""Kafka's transaction coordinator as a pure state machine: `process(event) -> [effect]`.

Rules (Kafka 3.8's TransactionCoordinator.scala, with KafkaApis.scala's checks before it):
- Events, results and effects: messages.py. The cache, appends, loading: storage.py
  (TransactionStateManager). Markers and completion: markers.py. One transactional id's
  metadata and its prepare/complete transitions: metadata.py; the state table: states.py.
- Every request looks its transactional id up in Kafka's order: empty (or null) id →
  INVALID_REQUEST; its `__transaction_state` partition loading → COORDINATOR_LOAD_IN_PROGRESS;
  not owned → NOT_COORDINATOR; then the request's own checks, where a pending transition
  (an append in flight) → CONCURRENT_TRANSACTIONS. A request that changes the metadata is
  answered after its append (persist before answer); a failed append rolls the pending
  transition back and answers the mapped error (error_codes.py).
- InitProducerId: (producer id, epoch) must be both -1 or both set, else INVALID_REQUEST; a
  null transactional id gets a fresh producer id at epoch 0 and nothing is written;
  timeout ≤ 0 or > transaction.max.timeout.ms → INVALID_TRANSACTION_TIMEOUT; an unknown id
  gets a new producer id (metadata Empty at epoch -1 enters the cache at once, as in Kafka);
  then: pending → CONCURRENT_TRANSACTIONS; a given (producer id, epoch) is valid only if the
  metadata has no epoch yet, or its producer id is the current one, or it is the last one
  with an exhausted epoch (a retried rotation), else PRODUCER_FENCED; Prepare* →
  CONCURRENT_TRANSACTIONS; Empty/Complete* → a new producer id at epoch 0 when the epoch is
  exhausted (≥ Short.MaxValue - 1) and the given epoch (if any) is the current one, else the
  epoch bump of metadata.py (KIP-360: PRODUCER_FENCED for a stale epoch); Ongoing → the epoch
  is fenced (PrepareEpochFence) and the transaction aborted as a coordinator abort, and the
  client gets CONCURRENT_TRANSACTIONS once the PrepareAbort is written (it retries and
  bumps again). The answer is the written producer id and epoch.
- AddPartitionsToTxn and AddOffsetsToTxn (the group's `__consumer_offsets` partition,
  `partition_for(group, offsets.topic.num.partitions)`): unknown id or another producer id →
  INVALID_PRODUCER_ID_MAPPING; another epoch → PRODUCER_FENCED; pending or Prepare* →
  CONCURRENT_TRANSACTIONS; Ongoing with every partition already in → NONE at once; else
  Ongoing with the union written (the start timestamp set when it begins). Every partition
  gets the one code. Topic authorization and unknown topics are the shell's (KafkaApis).
- verify_only (handleVerifyPartitionsInTransaction): unknown id or another producer id →
  INVALID_PRODUCER_ID_MAPPING; another epoch → PRODUCER_FENCED; Prepare* →
  CONCURRENT_TRANSACTIONS (a pending transition is not checked); else per partition NONE if
  it is in the transaction, TRANSACTION_ABORTABLE if not. Nothing is written.
- EndTxn (endTransaction): unknown id or another producer id → INVALID_PRODUCER_ID_MAPPING;
  epoch ≠ current (client) or < current (coordinator) → PRODUCER_FENCED; pending (other than
  an epoch fence) → CONCURRENT_TRANSACTIONS; Ongoing → PrepareCommit/PrepareAbort written,
  then NONE and WriteMarkers (the metadata already pending Complete*); CompleteCommit +
  commit / CompleteAbort + abort → NONE (a retry); PrepareCommit + commit / PrepareAbort +
  abort → CONCURRENT_TRANSACTIONS; any other pair, and Empty → INVALID_TXN_STATE. The fence
  path: the PrepareAbort carries the bumped epoch; if its write fails the bump stays in
  memory, marked `has_failed_epoch_fence`, and the next fence reuses that epoch.
- Transaction version 2 (KIP-890 part 2, Kafka 4's TransactionCoordinator.endTransaction):
  a request's version says the client's (AddPartitionsToTxn v4+, EndTxn v5+: 2; a
  partition leader's AddPartitionsToTxn for a Produce v12 or TxnOffsetCommit v5 adds the
  partition for the client). EndTxn at version 2: pending (other than an epoch fence) →
  CONCURRENT_TRANSACTIONS; another producer id (unless a retry after an epoch overflow) →
  INVALID_PRODUCER_ID_MAPPING; the epoch must be the current one in Ongoing/Empty, one below
  it in Prepare* (a retry after the bump) and either in Complete* → else PRODUCER_FENCED;
  Ongoing → Prepare* with the epoch bumped (a new producer id named when the bump reaches
  Short.MaxValue, taken at Complete* with epoch 0); a retried commit/abort of the completed
  transaction → NONE; an abort from Empty/Complete* (nothing added) is written as an empty
  transaction; the answer carries the producer id and epoch of the next transaction. The
  coordinator's own aborts (a fence, a timeout) follow the cluster's finalized
  transaction.version (`FinalizedTransactionVersion`), which also picks the log value's
  version (records.py).
- DescribeTransactions: per id, empty → INVALID_REQUEST, the lookup errors, unknown →
  TRANSACTIONAL_ID_NOT_FOUND. ListTransactions: storage.py.
- Tick, every transaction.abort.timed.out.transaction.cleanup.interval.ms: each Ongoing
  transaction past start + timeout without a pending transition is fenced
  (prepareFenceProducerEpoch) and aborted as a coordinator abort; every
  transaction.remove.expired.transaction.cleanup.interval.ms: expired transactional ids are
  tombstoned (storage.py). Both run at the first Tick at or after their deadline, and the
  next deadline is counted from that Tick (Kafka's scheduler runs at a fixed rate).
- LoadPartition(p, epoch): a load at an epoch not newer than the one cached is ignored;
  otherwise any older load is unloaded first, the log replayed, and each transaction in
  PrepareCommit/PrepareAbort gets its pending Complete* and its markers sent again with the
  new coordinator epoch. UnloadPartition(p, epoch): ignored when older than the load; else
  every request waiting for an append of p is answered NOT_COORDINATOR, later AppendDone and
  MarkersWritten of p's old epoch are ignored, and p's transactional ids are dropped.
Decisions where Kafka leaves a gap (each with its reason):
- A null transactional id is allowed only for InitProducerId (it is Kafka's idempotent
  producer); the other requests answer it INVALID_REQUEST as they do an empty id.
- Kafka's coordinator answers UNKNOWN_SERVER_ERROR (its IllegalStateException) when a
  stale epoch reaches the epoch bump of an exhausted epoch; here that answer is explicit.
- The generator of producer ids may raise a replicas/errors.py KafkaError; its code is the
  answer (Kafka's Errors.forException).
"""

from __future__ import annotations

import logging
from typing import Callable

from replicas.dispatch import handler_for
from replicas.errors import ErrorCode as E
from replicas.errors import KafkaError
from transactions import messages as m
from transactions.config import TransactionCoordinatorConfig
from transactions.error_codes import for_version
from transactions.markers import TransactionMarkerChannelManager
from transactions.metadata import (NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_TIMESTAMP, SHORT_MAX,
                                   IllegalTransactionState, TransactionMetadata, TxnTransitMetadata,
                                   is_epoch_exhausted)
from transactions.records import partition_for
from transactions.states import TransactionState
from transactions.storage import TransactionStateManager

log = logging.getLogger(__name__)
T = TransactionState
OFFSETS_TOPIC = "__consumer_offsets"


class TransactionCoordinator:
    def __init__(self, broker_id: int, clock_ms: Callable[[], int],
                 new_producer_id: Callable[[], int],
                 config: TransactionCoordinatorConfig | None = None):
        self.broker_id = broker_id
        self.config = config or TransactionCoordinatorConfig()
        self._clock = clock_ms
        self._new_producer_id = new_producer_id
        self._out: list = []
        self._storage = TransactionStateManager(self.config, self._emit)
        self._markers = TransactionMarkerChannelManager(self._storage, self._emit, clock_ms)
        now = clock_ms()
        self._next_abort_check_ms = \
            now + self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms
        self._next_expiration_check_ms = \
            now + self.config.transaction_remove_expired_transaction_cleanup_interval_ms
        self.transaction_version = 0        # the cluster's finalized transaction.version

    # -- the one entry point ----------------------------------------------------------------
    def process(self, event) -> list:
        handler = handler_for(self, event)
        if handler is None:
            raise TypeError(f"the transaction coordinator has no handler for "
                            f"{type(event).__name__}")
        self._out = []
        handler(event)
        out, self._out = self._out, []
        return out

    # -- read-only views --------------------------------------------------------------------
    def transaction(self, transactional_id: str) -> TransactionMetadata | None:
        entry = self._storage.cache.get(self.partition_for(transactional_id))
        return None if entry is None else entry.transactions.get(transactional_id)

    @property
    def owned_partitions(self) -> frozenset[int]:
        return frozenset(self._storage.cache)

    @property
    def loading_partitions(self) -> frozenset[int]:
        return frozenset(self._storage.loading)

    def coordinator_epoch(self, partition: int) -> int | None:
        entry = self._storage.cache.get(partition)
        return None if entry is None else entry.coordinator_epoch

    def partition_for(self, transactional_id: str) -> int:
        return self._storage.partition_for(transactional_id)

    def next_deadline_ms(self) -> int:
        """When the next Tick has something to do."""
        times = [self._next_abort_check_ms, self._next_expiration_check_ms]
        retry = self._markers.next_retry_ms()
        return min(times if retry is None else times + [retry])

    # -- plumbing ---------------------------------------------------------------------------
    def _now(self) -> int:
        return self._clock()

    def _emit(self, effect) -> None:
        self._out.append(effect)

    def _respond(self, request_id: int, result) -> None:
        self._out.append(m.Respond(request_id, result))

    def _generate_producer_id(self) -> tuple[int, int]:
        """(error, producer id)."""
        try:
            return E.NONE, self._new_producer_id()
        except KafkaError as exc:
            return exc.code, NO_PRODUCER_ID

    # -- InitProducerId ---------------------------------------------------------------------
    def process_init_producer_id(self, e: m.InitProducerId) -> None:
        def answer(error: int, transit: TxnTransitMetadata | None = None) -> None:
            if error == E.NONE and transit is not None:
                result = m.InitProducerIdResult(E.NONE, transit.producer_id,
                                                transit.producer_epoch)
            else:
                result = m.InitProducerIdResult(for_version("InitProducerId", e.version, error))
            self._respond(e.request_id, result)

        if (e.producer_id == NO_PRODUCER_ID) != (e.producer_epoch == NO_PRODUCER_EPOCH):
            return answer(E.INVALID_REQUEST)
        expected = None if e.producer_id == NO_PRODUCER_ID else (e.producer_id, e.producer_epoch)
        tid = e.transactional_id
        if tid is None:
            error, pid = self._generate_producer_id()
            return self._respond(e.request_id, m.InitProducerIdResult(error, pid, 0)
                                 if error == E.NONE else m.InitProducerIdResult(error))
        if tid == "":
            return answer(E.INVALID_REQUEST)
        if not 0 < e.transaction_timeout_ms <= self.config.transaction_max_timeout_ms:
            return answer(E.INVALID_TRANSACTION_TIMEOUT)
        error, coordinator_epoch, md = self._storage.get_state(tid)
        if error is not None:
            return answer(error)
        if md is None:
            error, pid = self._generate_producer_id()
            if error != E.NONE:
                return answer(error)
            md = self._storage.put_if_not_exists(TransactionMetadata(
                tid, pid, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH,
                e.transaction_timeout_ms, T.EMPTY, set(), NO_TIMESTAMP, self._now()))
        transit = self._prepare_init_producer_id_transit(md, e.transaction_timeout_ms, expected)
        if isinstance(transit, int):
            return answer(transit)
        if transit.txn_state is T.PREPARE_EPOCH_FENCE:
            return self._coordinator_abort(
                tid, transit.producer_id, transit.producer_epoch,
                callback=lambda err: answer(E.CONCURRENT_TRANSACTIONS if err == E.NONE else err),
                on_lost=lambda: answer(E.NOT_COORDINATOR))
        self._storage.append_transition(tid, coordinator_epoch, transit,
                                        lambda err: answer(err, transit),
                                        on_lost=lambda: answer(E.NOT_COORDINATOR))

    def _prepare_init_producer_id_transit(self, md: TransactionMetadata, timeout_ms: int,
                                          expected: tuple[int, int] | None
                                          ) -> TxnTransitMetadata | int:
        """prepareInitProducerIdTransit: the transit, or an error code."""
        if md.pending_transition_in_progress:
            return E.CONCURRENT_TRANSACTIONS
        if expected is not None and not (
                md.producer_epoch == NO_PRODUCER_EPOCH or expected[0] == md.producer_id
                or (expected[0] == md.last_producer_id and is_epoch_exhausted(expected[1]))):
            return E.PRODUCER_FENCED
        if md.state in (T.PREPARE_ABORT, T.PREPARE_COMMIT):
            return E.CONCURRENT_TRANSACTIONS
        if md.state is T.ONGOING:
            # this epoch is never returned: the client retries and bumps again
            return md.prepare_fence_producer_epoch()
        if md.state not in (T.EMPTY, T.COMPLETE_ABORT, T.COMPLETE_COMMIT):
            raise IllegalTransactionState(f"found {md.transactional_id} in state {md.state!r}")
        if md.is_producer_epoch_exhausted and (expected is None
                                               or expected[1] == md.producer_epoch):
            error, pid = self._generate_producer_id()
            if error != E.NONE:
                return error
            return md.prepare_producer_id_rotation(pid, timeout_ms, self._now(),
                                                   record_last_epoch=expected is not None)
        if md.is_producer_epoch_exhausted:
            return E.UNKNOWN_SERVER_ERROR
        return md.prepare_increment_producer_epoch(
            timeout_ms, None if expected is None else expected[1], self._now())

    # -- AddPartitionsToTxn, AddOffsetsToTxn ------------------------------------------------
    def process_add_partitions_to_txn(self, e: m.AddPartitionsToTxn) -> None:
        partitions = tuple(dict.fromkeys(e.partitions))
        if e.verify_only:
            return self._verify_partitions(e, partitions)

        def answer(error: int) -> None:
            code = for_version("AddPartitionsToTxn", e.version, error)
            self._respond(e.request_id,
                          m.AddPartitionsResult(code, {tp: code for tp in partitions}))

        self._add_partitions(e.transactional_id, e.producer_id, e.producer_epoch, partitions,
                             answer, tv=2 if e.version > 3 else 0)

    def process_add_offsets_to_txn(self, e: m.AddOffsetsToTxn) -> None:
        group_partition = (OFFSETS_TOPIC,
                           partition_for(e.group_id, self.config.offsets_topic_num_partitions))
        self._add_partitions(
            e.transactional_id, e.producer_id, e.producer_epoch, (group_partition,),
            lambda error: self._respond(e.request_id, m.AddOffsetsResult(
                for_version("AddOffsetsToTxn", e.version, error))))

    def _add_partitions(self, tid: str | None, producer_id: int, producer_epoch: int,
                        partitions: tuple, answer: Callable[[int], None], tv: int = 0) -> None:
        """handleAddPartitionsToTransaction (Kafka 4's order: a pending transition first,
        the producer may use an id that is only pending after an epoch overflow)."""
        if not tid:
            return answer(E.INVALID_REQUEST)
        error, coordinator_epoch, md = self._storage.get_state(tid)
        if error is None and md is not None and md.pending_transition_in_progress:
            error = E.CONCURRENT_TRANSACTIONS
        if error is None:
            error = self._check_producer(md, producer_id, producer_epoch)
        if error is not None:
            return answer(error)
        if md.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT):
            return answer(E.CONCURRENT_TRANSACTIONS)
        if md.state is T.ONGOING and set(partitions) <= md.partitions:
            return answer(E.NONE)
        transit = md.prepare_add_partitions(partitions, self._now(), tv)
        self._storage.append_transition(tid, coordinator_epoch, transit, answer,
                                        on_lost=lambda: answer(E.NOT_COORDINATOR))

    @staticmethod
    def _check_producer(md: TransactionMetadata | None, producer_id: int,
                        producer_epoch: int) -> int | None:
        if md is None or md.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if md.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED
        return None

    def _verify_partitions(self, e: m.AddPartitionsToTxn, partitions: tuple) -> None:
        """handleVerifyPartitionsInTransaction."""
        if not e.transactional_id:
            error = E.INVALID_REQUEST
        else:
            error, _, md = self._storage.get_state(e.transactional_id)
            if error is None:
                error = self._check_producer(md, e.producer_id, e.producer_epoch)
            if error is None and md.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT):
                error = E.CONCURRENT_TRANSACTIONS
            if error is None:
                codes = {tp: E.NONE if tp in md.partitions else E.TRANSACTION_ABORTABLE
                         for tp in partitions}
                uniform = set(codes.values())
                return self._respond(e.request_id, m.AddPartitionsResult(
                    uniform.pop() if len(uniform) == 1 else E.NONE, codes))
        self._respond(e.request_id,
                      m.AddPartitionsResult(error, {tp: error for tp in partitions}))

    # -- EndTxn -----------------------------------------------------------------------------
    def process_end_txn(self, e: m.EndTxn) -> None:
        def answer(error: int, producer_id: int = NO_PRODUCER_ID,
                   producer_epoch: int = NO_PRODUCER_EPOCH) -> None:
            self._respond(e.request_id, m.EndTxnResult(
                for_version("EndTxn", e.version, error), producer_id, producer_epoch))

        end = self._end_transaction_v2 if e.version > 4 else self._end_transaction
        end(e.transactional_id, e.producer_id, e.producer_epoch, e.committed,
            from_client=True, callback=answer, on_lost=lambda: answer(E.NOT_COORDINATOR))

    def _coordinator_abort(self, tid: str, producer_id: int, producer_epoch: int,
                           callback: Callable[[int], None],
                           on_lost: Callable[[], None] | None) -> None:
        """The coordinator's own abort of a fenced transaction, at the cluster's finalized
        transaction version (Kafka's txnManager.transactionVersionLevel())."""
        if self.transaction_version >= 2:
            return self._end_transaction_v2(tid, producer_id, producer_epoch, committed=False,
                                            from_client=False,
                                            callback=lambda error, *_: callback(error),
                                            on_lost=on_lost)
        self._end_transaction(tid, producer_id, producer_epoch, committed=False,
                              from_client=False, callback=callback, on_lost=on_lost)

    def _end_transaction_v2(self, tid: str | None, producer_id: int, producer_epoch: int,
                            committed: bool, from_client: bool,
                            callback: Callable[..., None],
                            on_lost: Callable[[], None] | None) -> None:
        """endTransaction at transaction version 2 (see the module's rules);
        `callback(error, next producer id, next epoch)`."""
        if not tid:
            return callback(E.INVALID_REQUEST)
        error, coordinator_epoch, md = self._storage.get_state(tid)
        if error is not None:
            return callback(error)
        if md is None:
            return callback(E.INVALID_PRODUCER_ID_MAPPING)
        current = (md.producer_id, md.producer_epoch)
        is_epoch_fence = md.pending_state is T.PREPARE_EPOCH_FENCE
        retry_on_overflow = not is_epoch_fence and md.last_producer_id == producer_id \
            and producer_epoch == SHORT_MAX - 1 and md.producer_epoch == 0
        retry_on_epoch_bump = not is_epoch_fence and md.producer_epoch == producer_epoch + 1
        if is_epoch_fence:
            valid = (not from_client or producer_epoch == md.producer_epoch) \
                and producer_epoch >= md.producer_epoch
        elif md.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT):
            valid = retry_on_epoch_bump
        elif md.state in (T.COMPLETE_COMMIT, T.COMPLETE_ABORT):
            valid = retry_on_epoch_bump or retry_on_overflow \
                or producer_epoch == md.producer_epoch
        else:
            valid = producer_epoch == md.producer_epoch
        is_retry = retry_on_epoch_bump or retry_on_overflow
        if md.pending_transition_in_progress and not is_epoch_fence:
            return callback(E.CONCURRENT_TRANSACTIONS)
        if md.producer_id != producer_id and not retry_on_overflow:
            return callback(E.INVALID_PRODUCER_ID_MAPPING)
        if not valid:
            return callback(E.PRODUCER_FENCED)
        wanted = T.PREPARE_COMMIT if committed else T.PREPARE_ABORT
        done = T.COMPLETE_COMMIT if committed else T.COMPLETE_ABORT
        if md.state is T.ONGOING:
            no_partition_added = False
        elif md.state is done and is_retry:
            return callback(E.NONE, *current)
        elif not committed and not is_retry \
                and md.state in (T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT):
            no_partition_added = True
        elif md.state is wanted:
            return callback(E.CONCURRENT_TRANSACTIONS)
        elif md.state in (T.DEAD, T.PREPARE_EPOCH_FENCE):
            raise IllegalTransactionState(f"found {tid} in state {md.state!r}")
        else:
            return callback(E.INVALID_TXN_STATE)
        next_producer_id = NO_PRODUCER_ID
        if not is_epoch_fence and md.is_producer_epoch_exhausted:
            error, next_producer_id = self._generate_producer_id()
            if error != E.NONE:
                return callback(error)
        if is_epoch_fence:
            md.pending_state = None      # the fence becomes this abort, bumped once more
        transit = md.prepare_abort_or_commit(wanted, self._now(), tv=2,
                                             next_producer_id=next_producer_id,
                                             no_partition_added=no_partition_added)

        def send_markers(error: int) -> None:
            if error != E.NONE:
                return callback(error)
            error, epoch_now, md_now = self._storage.get_state(tid)
            if error is None and epoch_now != coordinator_epoch:
                error = E.NOT_COORDINATOR
            if error is None:
                # the Prepare* write bumped the epoch, unless it was a retry already bumped
                error = self._check_prepared(md_now, producer_id,
                                             (producer_epoch, producer_epoch + 1), committed)
            if error is not None:
                return callback(error)
            complete = md_now.prepare_complete(self._now())
            callback(E.NONE, complete.producer_id, complete.producer_epoch)
            self._markers.add_txn_markers_to_send(coordinator_epoch, committed, md_now, complete)

        self._storage.append_transition(tid, coordinator_epoch, transit, send_markers,
                                        on_lost=on_lost)

    def _end_transaction(self, tid: str | None, producer_id: int, producer_epoch: int,
                         committed: bool, from_client: bool, callback: Callable[[int], None],
                         on_lost: Callable[[], None] | None) -> None:
        """endTransaction: a client's EndTxn, or the coordinator's own abort of a fenced
        transaction (from_client False: its epoch is the bumped one)."""
        if not tid:
            return callback(E.INVALID_REQUEST)
        error, coordinator_epoch, md = self._storage.get_state(tid)
        if error is not None:
            return callback(error)
        if md is None or md.producer_id != producer_id:
            return callback(E.INVALID_PRODUCER_ID_MAPPING)
        if (from_client and producer_epoch != md.producer_epoch) \
                or producer_epoch < md.producer_epoch:
            return callback(E.PRODUCER_FENCED)
        if md.pending_state not in (None, T.PREPARE_EPOCH_FENCE):
            return callback(E.CONCURRENT_TRANSACTIONS)
        if md.state is not T.ONGOING:
            return callback(self._end_txn_answer(md, committed))
        next_state = T.PREPARE_COMMIT if committed else T.PREPARE_ABORT
        is_epoch_fence = next_state is T.PREPARE_ABORT \
            and md.pending_state is T.PREPARE_EPOCH_FENCE
        if is_epoch_fence:
            # the fence becomes this abort: the bumped epoch goes into the PrepareAbort
            md.pending_state = None
            md.producer_epoch = producer_epoch
            md.last_producer_epoch = NO_PRODUCER_EPOCH
        transit = md.prepare_abort_or_commit(next_state, self._now())

        def send_markers(error: int) -> None:
            if error != E.NONE:
                if is_epoch_fence:
                    _, epoch_now, md_now = self._storage.get_state(tid)
                    if md_now is not None and epoch_now == coordinator_epoch:
                        md_now.has_failed_epoch_fence = True
                return callback(error)
            error, epoch_now, md_now = self._storage.get_state(tid)
            if error is None and epoch_now != coordinator_epoch:
                error = E.NOT_COORDINATOR
            if error is None:
                error = self._check_prepared(md_now, producer_id, (producer_epoch,), committed)
            if error is not None:
                return callback(error)
            complete = md_now.prepare_complete(self._now())
            callback(E.NONE)
            self._markers.add_txn_markers_to_send(coordinator_epoch, committed, md_now, complete)

        self._storage.append_transition(tid, coordinator_epoch, transit, send_markers,
                                        on_lost=on_lost)

    @staticmethod
    def _end_txn_answer(md: TransactionMetadata, committed: bool) -> int:
        """EndTxn's answer in a state other than Ongoing."""
        done, preparing = (T.COMPLETE_COMMIT, T.PREPARE_COMMIT) if committed else \
            (T.COMPLETE_ABORT, T.PREPARE_ABORT)
        if md.state is done:
            return E.NONE
        if md.state is preparing:
            return E.CONCURRENT_TRANSACTIONS
        if md.state in (T.DEAD, T.PREPARE_EPOCH_FENCE):
            raise IllegalTransactionState(f"found {md.transactional_id} in state {md.state!r}")
        return E.INVALID_TXN_STATE

    @staticmethod
    def _check_prepared(md: TransactionMetadata | None, producer_id: int,
                        producer_epochs: tuple[int, ...], committed: bool) -> int | None:
        """The checks after the Prepare* write, before the markers are sent; the epoch must
        be one of `producer_epochs`."""
        if md is None:
            raise IllegalTransactionState("the coordinator owns the partition but has no "
                                          "metadata for a transaction it just prepared")
        if md.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if md.producer_epoch not in producer_epochs:
            return E.PRODUCER_FENCED
        if md.pending_transition_in_progress:
            return E.CONCURRENT_TRANSACTIONS
        if md.state is not (T.PREPARE_COMMIT if committed else T.PREPARE_ABORT):
            return E.INVALID_TXN_STATE
        return None

    # -- DescribeTransactions, ListTransactions ---------------------------------------------
    def process_describe_transactions(self, e: m.DescribeTransactions) -> None:
        self._respond(e.request_id, m.DescribeTransactionsResult(tuple(
            self._describe(tid) for tid in e.transactional_ids)))

    def _describe(self, tid: str) -> m.TransactionDescription:
        if not tid:
            return m.TransactionDescription(E.INVALID_REQUEST, tid)
        error, _, md = self._storage.get_state(tid)
        if error is not None:
            return m.TransactionDescription(error, tid)
        if md is None or md.state is T.DEAD:
            return m.TransactionDescription(E.TRANSACTIONAL_ID_NOT_FOUND, tid)
        return m.TransactionDescription(E.NONE, tid, md.state.state_name, md.txn_timeout_ms,
                                        md.txn_start_timestamp_ms, md.producer_id,
                                        md.producer_epoch, tuple(sorted(md.partitions)))

    def process_list_transactions(self, e: m.ListTransactions) -> None:
        self._respond(e.request_id, self._storage.list_transactions(
            e.state_filters, e.producer_id_filters, e.duration_filter_ms, self._now()))

    # -- appends, markers, loading and unloading --------------------------------------------
    def process_append_done(self, e: m.AppendDone) -> None:
        self._storage.append_done(e.token, e.error)

    def process_markers_written(self, e: m.MarkersWritten) -> None:
        self._markers.markers_written(e)

    def process_begin_load(self, e: m.BeginLoad) -> None:
        self._storage.begin_load(e.partition)

    def process_load_partition(self, e: m.LoadPartition) -> None:
        if self._storage.is_stale_load(e.partition, e.coordinator_epoch):
            return
        self._unload(e.partition)  # an older load: its appends and markers are stale
        now = self._now()
        for md in self._storage.load_partition(e.partition, e.coordinator_epoch, e.records):
            if md.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT):
                complete = md.prepare_complete(now)
                self._markers.add_txn_markers_to_send(
                    e.coordinator_epoch, md.state is T.PREPARE_COMMIT, md, complete)

    def process_unload_partition(self, e: m.UnloadPartition) -> None:
        if not self._storage.is_stale_unload(e.partition, e.coordinator_epoch):
            self._unload(e.partition)

    def _unload(self, partition: int) -> None:
        self._markers.remove_for_partition(partition)
        self._storage.unload_partition(partition)

    def process_finalized_transaction_version(self, e: m.FinalizedTransactionVersion) -> None:
        self.transaction_version = e.level
        self._storage.value_version = 1 if e.level >= 1 else 0

    # -- Tick: the periodic jobs ------------------------------------------------------------
    def process_tick(self, _e: m.Tick) -> None:
        now = self._now()
        if self._next_abort_check_ms <= now:
            self._next_abort_check_ms = \
                now + self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms
            self._abort_timed_out_transactions(now)
        if self._next_expiration_check_ms <= now:
            self._next_expiration_check_ms = \
                now + self.config.transaction_remove_expired_transaction_cleanup_interval_ms
            self._storage.remove_expired_transactional_ids(now)
        self._markers.retry_due(now)

    def _abort_timed_out_transactions(self, now_ms: int) -> None:
        for tid, producer_id, _ in self._storage.timed_out_transactions(now_ms):
            error, _, md = self._storage.get_state(tid)
            if error is not None or md is None or md.producer_id != producer_id \
                    or md.pending_transition_in_progress:
                continue
            fence = md.prepare_fence_producer_epoch()

            def on_complete(error: int, tid=tid) -> None:
                if error != E.NONE:
                    log.info("rollback of timed-out transaction %s failed with %s", tid, error)

            self._coordinator_abort(tid, fence.producer_id, fence.producer_epoch,
                                    callback=on_complete, on_lost=None)
