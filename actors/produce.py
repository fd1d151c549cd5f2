"""The broker's produce path (appendRecords + the acks=all wait), for BrokerActor.

Rules:
- `produce_begin(broker, [(tp, batches)], acks, timeout_ms)` appends every entry now, in
  order, under the broker lock, and returns a PendingProduce whose `result()` waits (on the
  call's own condition, woken only by its own pending ids) until every acks=all entry is
  acknowledged or timed out: {request index: result}. A partition may appear more than
  once (the native producer's pipeline sends consecutive batches of one partition in one
  call); each entry has its own result.
- Ray calls pass `reorder_wait_s` (REORDER_WAIT_S): Ray starts the calls of ONE caller on a
  threaded actor in parallel threads, so a producer's later request can take the lock
  first. An idempotent batch past its producer's next sequence (ReplicaManager.
  sequence_ahead) waits on `changed` up to that long for the call carrying the missing
  batches; after it, the append goes ahead and is answered OUT_OF_ORDER_SEQUENCE as Kafka
  would. The Kafka listener passes 0: a connection's requests are appended in order.
"""

from __future__ import annotations

import threading
import time

from replicas.errors import RequestTimedOut

REORDER_WAIT_S = 0.05       # an overtaken produce call waits this long for its predecessor


class PendingProduce:
    """The acknowledgement half of a produce call: `result()` waits (on the call's own
    condition) until every acks=all partition is done or timed out; {request index: result}."""

    def __init__(self, broker, cond, out: dict, waiting: dict, deadline: float):
        self.broker, self.cond, self.out, self.waiting = broker, cond, out, waiting
        self.deadline = deadline

    def result(self) -> dict:
        b, out, waiting = self.broker, self.out, self.waiting
        with b.lock:
            while waiting:
                for pid in [pid for pid in waiting if pid in b.done]:
                    key, r = waiting.pop(pid)
                    d = b.done.pop(pid)
                    b._produce_conds.pop(pid, None)
                    out[key] = {"error": d.error, "base_offset": d.base_offset,
                                "last_offset": d.last_offset, "duplicate": r.duplicate}
                remaining = self.deadline - time.monotonic()
                if waiting and remaining <= 0:
                    for pid, (key, r) in waiting.items():
                        b._produce_conds.pop(pid, None)
                        b.done.pop(pid, None)
                        out[key] = {"error": RequestTimedOut.code, "base_offset": r.base_offset,
                                    "last_offset": r.last_offset, "duplicate": r.duplicate}
                    waiting.clear()
                    break
                if waiting:
                    self.cond.wait(remaining)
        return out


def produce_begin(broker, requests, acks: int, timeout_ms: int,
                  reorder_wait_s: float = 0.0) -> PendingProduce:
    """See the module's rules; `broker` is the BrokerActor (its lock, rm, changed)."""
    out: dict = {}
    waiting: dict[int, object] = {}          # pending id → (request index, AppendResult)
    with broker.lock:
        cond = threading.Condition(broker.lock)
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
                for pid in waiting:
                    broker._produce_conds.pop(pid, None)
                raise
            if r.pending_id is None:
                out[i] = {"error": r.error, "base_offset": r.base_offset,
                          "last_offset": r.last_offset, "duplicate": r.duplicate,
                          "message": r.message}
            else:   # registered BEFORE the effects run, so no completion is missed
                broker._produce_conds[r.pending_id] = cond
                waiting[r.pending_id] = (i, r)
            if not r.error and not r.duplicate:
                appended = True
                landed.append(tp)
            broker.apply_effects(r.effects)
        if landed:
            broker.parked.wake(landed)      # new data: complete the followers' long-polls
        if appended:
            broker.changed.notify_all()     # an overtaken produce may wait for this one
    return PendingProduce(broker, cond, out, waiting,
                           time.monotonic() + timeout_ms / 1000 + 5)
