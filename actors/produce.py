"""The broker's produce path (appendRecords + the acks=all wait, Kafka's DelayedProduce).

Rules:
- `produce_begin(broker, [(tp, batches)], acks, timeout_ms)` appends every entry now, in
  order, under the broker lock, and returns a PendingProduce: {request index: result}
  once every acks=all entry is acknowledged (the replica manager's ProduceDone, the moment
  the HW passes it) or timed out. A partition may appear more than once (the native
  producer's pipeline sends consecutive batches of one partition in one call); each entry
  has its own result.
- Waiting never costs a thread: `result()` blocks its caller (a Ray call), `when_ready(cb)`
  calls back from the thread that completes it (the listener's event loop takes it from
  there). The broker maps each pending id to its PendingProduce, so a ProduceDone wakes
  exactly the call that waits for it. The replica manager times produces out itself
  (its tick); a timer 5 s past the request timeout is the backstop.
- Ray calls pass `reorder_wait_s` (REORDER_WAIT_S): Ray starts the calls of ONE caller on a
  threaded actor in parallel threads, so a producer's later request can take the lock
  first. An idempotent batch past its producer's next sequence (ReplicaManager.
  sequence_ahead) waits on `changed` up to that long for the call carrying the missing
  batches; after it, the append goes ahead and is answered OUT_OF_ORDER_SEQUENCE as Kafka
  would. The Kafka listener passes 0: a connection's requests are appended in order.
- New data wakes the parked fetches of those partitions (actors/purgatory.py): the
  followers' long-polls answer at once, which is what moves the HW.
- `origin` COORDINATOR: a coordinator's own append (group metadata, offsets, transaction
  state): no duplicate or sequence checks (Kafka's AppendOrigin.COORDINATOR).
- Transactions (KIP-890 part 1, Kafka's ReplicaManager.appendRecords with verification):
  a transactional buffer whose producer has no transaction open on the partition starts
  a verification (`ReplicaManager.maybe_start_verification`) and waits, unappended, while
  `verify(transactional_id, producer_id, epoch, [tp])` asks the transaction coordinator
  whether the partition is in the transaction; the coordinator's error answers it (Kafka
  maps the coordinator-side errors to NOT_ENOUGH_REPLICAS, which clients retry), else it
  is appended with its guard. Buffers of one producer on one partition stay in order: a
  later one waits behind the one being verified. A Produce v12 (`add_partitions`,
  transaction.version 2) has the coordinator ADD the partition instead of only checking it,
  and a producer's transaction counts as open here only at its epoch (a new transaction's
  bumped epoch is verified even while the previous one's marker is on its way).
- `markers_begin(broker, markers, timeout_ms)`: WriteTxnMarkers' leader side, each marker
  (producer id, epoch, committed, coordinator epoch, partitions) appended as an acks=-1
  write; the answer, once acknowledged, is {tp: error} per marker. Markers written to
  `__consumer_offsets` complete that producer's pending offset commits in the group
  coordinator (Kafka's onTransactionCompleted).
"""

from __future__ import annotations

import time

from actors.completion import RESULT_TIMEOUT_S, Completion
from actors.txn_verification import produce_error
from replicas.errors import ErrorCode as E
from replicas.errors import KafkaError, RequestTimedOut
from replicas.records import iter_headers
from replicas.replica_manager import CLIENT

REORDER_WAIT_S = 0.05       # an overtaken produce call waits this long for its predecessor
BACKSTOP_S = 5.0            # past the request timeout: the replica manager should have answered


class PendingProduce(Completion):
    """The acknowledgement half of a produce call."""

    def __init__(self, broker):
        super().__init__()
        self.broker = broker
        self.out: dict = {}
        self.waiting: dict[int, tuple] = {}       # pending id → (request index, AppendResult)
        self.appending = True                      # produce_begin is still adding entries
        self.held = 0                              # entries waiting for a verification
        self.markers_result = None

    # -- completion (the broker's lock is held) ----------------------------------------------
    def acknowledged(self, done) -> None:
        key, r = self.waiting.pop(done.pending_id)
        self.out[key] = {"error": done.error, "base_offset": done.base_offset,
                         "last_offset": done.last_offset, "duplicate": r.duplicate}
        if not self.waiting and not self.appending:
            self._finish()

    def expire(self) -> None:
        """The backstop: what is still waiting is answered REQUEST_TIMED_OUT."""
        for pid, (key, r) in self.waiting.items():
            self.broker._produce_waiters.pop(pid, None)
            self.out[key] = {"error": RequestTimedOut.code, "base_offset": r.base_offset,
                             "last_offset": r.last_offset, "duplicate": r.duplicate}
        self.waiting.clear()
        self._finish()

    def _finish(self) -> None:
        self.settle()

    # -- the waiting side --------------------------------------------------------------------------
    def result(self) -> dict:
        self.wait(RESULT_TIMEOUT_S)
        return self.out


def produce_begin(broker, requests, acks: int, timeout_ms: int,
                  reorder_wait_s: float = 0.0, origin: str = CLIENT,
                  transactional_id: str | None = None,
                  add_partitions: bool = False) -> PendingProduce:
    """See the module's rules; `broker` is the Broker (its lock, rm, changed)."""
    pending = PendingProduce(broker)
    verifying: list[_Unverified] = []
    with broker.lock:
        appended = False
        landed = []
        deadline = None
        for i, (tp, data) in enumerate(requests):
            while reorder_wait_s and broker.rm.sequence_ahead(tp, data):
                deadline = deadline or time.monotonic() + reorder_wait_s
                if deadline <= time.monotonic():
                    break
                if appended:               # what this call appended may be the gap
                    broker.changed.notify_all()
                    appended = False
                broker.changed.wait(deadline - time.monotonic())
            if origin == CLIENT and transactional_id is not None:
                held = _hold_for_verification(broker, pending, i, tp, data, acks, timeout_ms,
                                              add_partitions)
                if held is not None:
                    if held.first:
                        verifying.append(held)
                    continue
            if _append(broker, pending, i, tp, data, acks, timeout_ms, origin=origin):
                appended = True
                landed.append(tp)
        if landed:
            broker.parked.changed(landed)   # new data: complete the followers' long-polls
        if appended:
            broker.changed.notify_all()     # an overtaken produce may wait for this one
        _close_appending(broker, pending, timeout_ms)
    for held in verifying:
        _verify(broker, transactional_id, held)
    return pending


def _append(broker, pending: PendingProduce, i, tp, data, acks, timeout_ms, guard=None,
            origin: str = CLIENT) -> bool:
    """Append one entry (caller holds the lock); True when it added data. A coordinator's
    transactional append carries the guard its host's verification started."""
    if origin != CLIENT and guard is None:
        guard = broker.rm.verification_guard_for(tp, data)
    try:
        r = broker.rm.append(tp, data, acks, timeout_ms, verification_guard=guard, origin=origin)
    except BaseException:       # a disk error: forget this call's waiters first
        for pid in pending.waiting:
            broker._produce_waiters.pop(pid, None)
        raise
    if r.pending_id is None:
        pending.out[i] = {"error": r.error, "base_offset": r.base_offset,
                          "last_offset": r.last_offset, "duplicate": r.duplicate,
                          "message": r.message, "record_errors": r.record_errors}
    else:   # registered BEFORE the effects run, so no completion is missed
        broker._produce_waiters[r.pending_id] = pending
        pending.waiting[r.pending_id] = (i, r)
    broker.apply_effects(r.effects)
    return not r.error and not r.duplicate


def _close_appending(broker, pending: PendingProduce, timeout_ms: int) -> None:
    """Every entry of the call is appended (or answered): settle, or arm the backstop."""
    if pending.held:
        return
    pending.appending = False
    if pending.waiting:
        pending.timer = broker.timers.add(timeout_ms / 1000 + BACKSTOP_S,
                                          lambda: _expire(broker, pending))
    elif not pending.done:
        pending._finish()


class _Unverified:
    """Buffers of one producer on one partition waiting for the coordinator's word, in
    arrival order (the first one asked; later ones queue behind it)."""

    __slots__ = ("tp", "producer_id", "producer_epoch", "guard", "entries", "first", "add")

    def __init__(self, tp, producer_id: int, producer_epoch: int, guard, add: bool):
        self.tp, self.producer_id, self.producer_epoch = tp, producer_id, producer_epoch
        self.guard, self.entries, self.first, self.add = guard, [], True, add


def _hold_for_verification(broker, pending: PendingProduce, i, tp, data, acks: int,
                           timeout_ms: int, add: bool = False) -> _Unverified | None:
    """Hold a transactional buffer that needs the coordinator's word (caller holds the
    lock): the queue it joined, or None to append it now (an error answers it)."""
    rm = broker.rm
    try:
        who = rm.needs_verification(tp, data)
        if who is None:
            return None
        queue = broker._verifying.get((tp, who.producer_id))
        if queue is None:
            first = next(iter_headers(data), None)
            guard = rm.maybe_start_verification(tp, who.producer_id, who.producer_epoch,
                                                first.base_sequence if first else None, add)
            if guard is None:       # a transaction is open here: no question to ask
                return None
            queue = broker._verifying[(tp, who.producer_id)] = _Unverified(
                tp, who.producer_id, who.producer_epoch, guard, add)
        else:
            queue.first = False
    except KafkaError as exc:
        pending.out[i] = {"error": exc.code, "base_offset": -1, "last_offset": -1,
                          "duplicate": False, "message": str(exc)}
        return _ANSWERED
    queue.entries.append((pending, i, data, acks, timeout_ms))
    pending.held += 1
    return queue


def _verify(broker, transactional_id: str, held: _Unverified) -> None:
    asked = broker.verifier.verify(transactional_id, held.producer_id, held.producer_epoch,
                                   [held.tp], add=held.add)
    asked.when_ready(lambda: _verified(broker, held, produce_error(
        asked.errors.get(held.tp, E.NONE), held.add)))


def _verified(broker, held: _Unverified, error: int) -> None:
    """The coordinator answered: append the held buffers in order with the guard, or answer
    them the error; then each call whose last held entry this was is complete."""
    with broker.lock:
        if broker._verifying.get((held.tp, held.producer_id)) is held:
            del broker._verifying[(held.tp, held.producer_id)]
        landed = False
        calls = []
        for pending, i, data, acks, timeout_ms in held.entries:
            if error:
                pending.out[i] = {"error": error, "base_offset": -1, "last_offset": -1,
                                  "duplicate": False,
                                  "message": "unable to verify the partition is in the "
                                             f"transaction ({E(error).name})"}
            else:
                landed |= _append(broker, pending, i, held.tp, data, acks, timeout_ms,
                                  guard=held.guard)
            pending.held -= 1
            calls.append((pending, timeout_ms))
        if landed:
            broker.parked.changed([held.tp])
            broker.changed.notify_all()
        for pending, timeout_ms in {id(c[0]): c for c in calls}.values():
            _close_appending(broker, pending, timeout_ms)


class _AnsweredMarker:
    first = False


_ANSWERED = _AnsweredMarker()


def markers_begin(broker, markers, timeout_ms: int):
    """WriteTxnMarkers' leader side (see the module's rules): a PendingProduce whose
    `markers_result()` is [{tp: error}] per marker once every marker is acknowledged."""
    pending = PendingProduce(broker)
    keys = []
    wall_ms = int(time.time() * 1000)
    with broker.lock:
        landed = []
        for index, (producer_id, epoch, committed, coordinator_epoch, tps) in enumerate(markers):
            for tp in tps:
                tp = tuple(tp)
                key = (index, tp)
                keys.append(key)
                r = broker.rm.append_markers(tp, producer_id, epoch, committed,
                                             coordinator_epoch, timeout_ms, wall_ms)
                if r.pending_id is None:
                    pending.out[key] = {"error": r.error, "base_offset": r.base_offset,
                                        "last_offset": r.last_offset, "duplicate": False}
                else:
                    broker._produce_waiters[r.pending_id] = pending
                    pending.waiting[r.pending_id] = (key, r)
                if not r.error:
                    landed.append(tp)
                broker.apply_effects(r.effects)
        if landed:
            broker.parked.changed(landed)
        _close_appending(broker, pending, timeout_ms)

    def completed():
        per_marker = [{} for _ in markers]
        offsets = {}
        for (index, tp), r in pending.out.items():
            per_marker[index][tp] = r["error"]
            if tp[0] == broker.groups.topic and r["error"] == E.NONE:
                offsets.setdefault(index, []).append(tp[1])
        for index, parts in offsets.items():
            producer_id, _, committed, _, _ = markers[index]
            broker.groups.complete_txn(producer_id, parts, committed)
        return per_marker
    pending.markers_result = completed
    return pending


def _expire(broker, pending: PendingProduce) -> None:
    with broker.lock:
        if pending.waiting:
            pending.expire()
