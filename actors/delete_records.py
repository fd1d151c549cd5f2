"""DeleteRecords on a leader, answered once every live replica's log start has passed the
offset asked (Kafka 3.8's ReplicaManager.deleteRecords with DelayedDeleteRecords and its
purgatory).

Rules:
- `delete_records(broker, asks, timeout_ms)` deletes on the replica manager, partition by
  partition, under the broker's lock (replicas/record_deletion.py: the leader's log start
  moves and is checkpointed; a partition this broker does not host but the metadata knows
  answers NOT_LEADER_OR_FOLLOWER there, so clients look for its leader). When every partition
  without an error has its low watermark at or past its offset (the HW for -1), the answer
  is {tp: (error, low watermark)} at once.
- Otherwise a DelayedDeleteRecords is watched on the partitions still short
  (`DeletePurgatory`): each follower fetch of such a partition (actors/fetch.py: the fetch
  carries the follower's log start) asks the replica manager for its low watermark again;
  a partition reaching its offset answers it, one that fails (leadership gone, not hosted)
  answers that error and -1, and the request completes when none is left short. At
  `timeout_ms` (0: at once) the partitions still short answer REQUEST_TIMED_OUT (7) with
  the low watermark they had when the request came, as Kafka's do.
- The caller gets the answer, or a Deferred of it.
"""

from __future__ import annotations

from actors.completion import RESULT_TIMEOUT_S, Completion, Watchers
from protocol.api import Deferred
from replicas.errors import ErrorCode

REQUEST_TIMED_OUT = ErrorCode.REQUEST_TIMED_OUT.value


class DelayedDeleteRecords(Completion):
    """One DeleteRecords waiting for its partitions' low watermarks. `answers` {tp: (error,
    low watermark)} holds the timed-out answer of each partition still short (`short`: tp →
    the offset it waits for) until it reaches it."""

    __slots__ = ("answers", "short")

    def __init__(self, answers: dict, short: dict):
        super().__init__()
        self.answers, self.short = answers, short

    def check(self, rm, tp) -> None:
        """Ask the replica manager again for `tp` (under the broker's lock)."""
        required = self.short.get(tp)
        if required is None:
            return
        error, low = rm.low_watermark(tp)      # -1 with an error
        if error or low >= required:
            del self.short[tp]
            self.answers[tp] = (error, low)

    def result(self) -> dict:
        self.wait(RESULT_TIMEOUT_S)
        return dict(self.answers)


class DeletePurgatory:
    """The DeleteRecords waiting on this broker, by partition (the broker's lock held)."""

    def __init__(self):
        self._watchers = Watchers()

    @property
    def watched(self) -> bool:
        return bool(self._watchers)

    def watch(self, delayed: DelayedDeleteRecords) -> None:
        self._watchers.watch(delayed, delayed.short)

    def followers_fetched(self, rm, tps) -> None:
        """Followers fetched `tps` (their log starts as they said): check what waits."""
        for tp in tps:
            for delayed in list(self._watchers.of(tp)):
                delayed.check(rm, tp)
                if tp not in delayed.short:
                    self._watchers.unwatch(delayed, (tp,))
                    if not delayed.short:
                        delayed.settle()

    def expire(self, delayed: DelayedDeleteRecords) -> None:
        """Its time is up: the partitions still short keep REQUEST_TIMED_OUT."""
        self._watchers.unwatch(delayed, delayed.short)
        delayed.short.clear()
        delayed.settle()


def delete_records(broker, asks, timeout_ms: int) -> dict | Deferred:
    """{tp: (error, low watermark)} now, or a Deferred of it (module rules)."""
    rm = broker.rm
    answers, short = {}, {}
    with broker.lock:
        for tp, offset in asks:
            tp = tuple(tp)
            result = rm.delete_records(tp, int(offset))
            error, low = result.error, result.low_watermark
            if not error and low < result.offset:
                short[tp] = result.offset
                answers[tp] = (REQUEST_TIMED_OUT, low)
            else:
                answers[tp] = (error, low)
        broker.parked.journal.note_all()          # log starts moved
        if not short:
            return answers
        delayed = DelayedDeleteRecords(answers, short)
        broker.deletions.watch(delayed)
        delayed.timer = broker.timers.add(max(timeout_ms, 0) / 1000,
                                          lambda: _expire(broker, delayed))
    return Deferred(delayed.result, delayed.when_ready)


def _expire(broker, delayed: DelayedDeleteRecords) -> None:
    with broker.lock:
        broker.deletions.expire(delayed)
