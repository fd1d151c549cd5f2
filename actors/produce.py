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
"""

from __future__ import annotations

import time

from actors.completion import Completion
from replicas.errors import RequestTimedOut

REORDER_WAIT_S = 0.05       # an overtaken produce call waits this long for its predecessor
BACKSTOP_S = 5.0            # past the request timeout: the replica manager should have answered
RESULT_TIMEOUT_S = 24 * 3600


class PendingProduce(Completion):
    """The acknowledgement half of a produce call."""

    def __init__(self, broker):
        super().__init__()
        self.broker = broker
        self.out: dict = {}
        self.waiting: dict[int, tuple] = {}       # pending id → (request index, AppendResult)
        self.appending = True                      # produce_begin is still adding entries

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
                  reorder_wait_s: float = 0.0) -> PendingProduce:
    """See the module's rules; `broker` is the BrokerActor (its lock, rm, changed)."""
    pending = PendingProduce(broker)
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
            try:
                r = broker.rm.append(tp, data, acks, timeout_ms)
            except BaseException:       # a disk error: forget this call's waiters first
                for pid in pending.waiting:
                    broker._produce_waiters.pop(pid, None)
                raise
            if r.pending_id is None:
                pending.out[i] = {"error": r.error, "base_offset": r.base_offset,
                                  "last_offset": r.last_offset, "duplicate": r.duplicate,
                                  "message": r.message}
            else:   # registered BEFORE the effects run, so no completion is missed
                broker._produce_waiters[r.pending_id] = pending
                pending.waiting[r.pending_id] = (i, r)
            if not r.error and not r.duplicate:
                appended = True
                landed.append(tp)
            broker.apply_effects(r.effects)
        if landed:
            broker.parked.changed(landed)   # new data: complete the followers' long-polls
        if appended:
            broker.changed.notify_all()     # an overtaken produce may wait for this one
        pending.appending = False
        if pending.waiting:
            pending.timer = broker.timers.add(timeout_ms / 1000 + BACKSTOP_S,
                                              lambda: _expire(broker, pending))
        else:
            pending._finish()
    return pending


def _expire(broker, pending: PendingProduce) -> None:
    with broker.lock:
        if pending.waiting:
            pending.expire()
