"""RecordFuture: the producer's per-record concurrent.futures.Future, paid for only when used.

Rules:
- A RecordFuture is (batch, index) and nothing else until someone waits on it: its state IS
  its batch's (done, base_offset, error), so completing a batch of 10,000 records touches no
  record (a plain Future costs a Condition and an RLock at creation and a lock hand-off at
  completion: 40% of the per-record send path in the issue-18 profile).
- result() / exception() / done() on a completed batch take no lock. Waiting on a pending
  one, add_done_callback, and Future internals used by concurrent.futures.wait /
  as_completed (`_condition`, `_state`, `_waiters`) "materialise" a real Future state under
  the module lock, registering the future as a watcher of its batch.
- `complete(batches)` is the only way a batch finishes: it marks each batch done under the
  module lock and takes its watchers, then (outside the lock) finishes materialised futures
  the way Future.set_result does (notify waiters) and runs callbacks in registration order
  (`fn(future)`, or `on_delivery(error, metadata)`), logging what a callback raises.
- index None is a bulk batch: the result is the metadata of every record of the batch, a
  MetadataRun (a lazy Sequence of RecordMetadata).
- A RecordFuture cannot be cancelled (a record handed to the producer will be sent).
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Future, TimeoutError
from concurrent.futures._base import FINISHED, PENDING

from rayka.client.types import RecordMetadata

log = logging.getLogger(__name__)
_LOCK = threading.Lock()
_new = tuple.__new__          # builds a NamedTuple without its Python-level __new__ (hot path)
_MATERIALISED = ("_condition", "_state", "_waiters", "_result", "_exception",
                 "_done_callbacks")


class MetadataRun(Sequence):
    """The RecordMetadata of bulk records, computed on access: runs of consecutive offsets
    [(topic, partition, base offset, count)]. A list of a million NamedTuples cost more
    than producing the million records; this compares equal to any sequence of the same
    RecordMetadata."""

    __slots__ = ("runs", "_starts")

    def __init__(self, runs):
        self.runs = list(runs)
        self._starts, n = [], 0
        for run in self.runs:
            self._starts.append(n)
            n += run[3]
        self._starts.append(n)

    @classmethod
    def concat(cls, parts) -> "MetadataRun":
        return cls(run for part in parts for run in part.runs)

    def __len__(self) -> int:
        return self._starts[-1]

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        k = bisect.bisect_right(self._starts, i) - 1
        topic, partition, base, _ = self.runs[k]
        return _new(RecordMetadata, (topic, partition, base + i - self._starts[k]))

    def __iter__(self):
        for topic, partition, base, count in self.runs:
            for offset in range(base, base + count):
                yield _new(RecordMetadata, (topic, partition, offset))

    def __eq__(self, other) -> bool:
        if isinstance(other, MetadataRun):
            return self.runs == other.runs
        try:
            return len(other) == len(self) and all(a == b for a, b in zip(self, other))
        except TypeError:
            return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return f"MetadataRun({self.runs!r})"


def metadata_of(batch, index):
    """The RecordMetadata of record `index` of a completed batch (None: all of them)."""
    topic, partition = batch.tp
    base = batch.base_offset
    if index is None:
        return MetadataRun([(topic, partition, base, batch.record_count)])
    return _new(RecordMetadata, (topic, partition, base + index))


class RecordFuture(Future):
    def __init__(self, batch, index: int | None):   # no Future.__init__: that is the point
        self._batch, self._index = batch, index

    def __getattr__(self, name):
        """Future's private state, made real on first use (concurrent.futures.wait)."""
        if name in _MATERIALISED:
            self._materialise()
            return self.__dict__[name]
        raise AttributeError(name)

    def _materialise(self) -> None:
        with _LOCK:
            if "_condition" in self.__dict__:
                return
            batch, d = self._batch, self.__dict__
            d["_condition"] = threading.Condition()
            d["_waiters"], d["_done_callbacks"] = [], []
            d["_result"] = d["_exception"] = None
            if batch.done:
                self._set_final_state()
            else:
                d["_state"] = PENDING
                batch.watchers.append((self, None))

    def _set_final_state(self) -> None:
        d, batch = self.__dict__, self._batch
        d["_state"] = FINISHED
        if batch.error is not None:
            d["_exception"] = batch.error
        else:
            d["_result"] = metadata_of(batch, self._index)

    def _on_complete(self) -> None:
        """Finish a materialised future as Future.set_result / set_exception do."""
        with self._condition:
            self._set_final_state()
            for waiter in self._waiters:
                if self._exception is not None:
                    waiter.add_exception(self)
                else:
                    waiter.add_result(self)
            self._condition.notify_all()

    # -- Future's API --------------------------------------------------------------------------------
    def cancel(self) -> bool:
        return False

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return not self._batch.done

    def done(self) -> bool:
        return self._batch.done

    def _wait(self, timeout) -> None:
        if self._batch.done:
            return
        self._materialise()
        with self._condition:
            if not self._condition.wait_for(lambda: self._state == FINISHED, timeout):
                raise TimeoutError()

    def result(self, timeout=None):
        self._wait(timeout)
        batch = self._batch
        if batch.error is not None:
            raise batch.error
        return metadata_of(batch, self._index)

    def exception(self, timeout=None):
        self._wait(timeout)
        return self._batch.error

    def add_done_callback(self, fn) -> None:
        with _LOCK:
            if not self._batch.done:
                self._batch.watchers.append((self, fn))
                return
        _call(fn, self)

    def set_result(self, result) -> None:
        raise RuntimeError("a RecordFuture is completed by its producer only")

    set_exception = set_running_or_notify_cancel = set_result

    def __repr__(self) -> str:
        state = "finished" if self._batch.done else "pending"
        return f"<RecordFuture {self._batch.tp} #{self._index} {state}>"


def on_delivery_callback(on_delivery):
    """A done-callback calling librdkafka-style on_delivery(error, metadata)."""
    def call(future: RecordFuture) -> None:
        batch = future._batch
        if batch.error is not None:
            on_delivery(batch.error, None)
        else:
            on_delivery(None, metadata_of(batch, future._index))
    return call


def _call(fn, future) -> None:
    try:
        fn(future)
    except Exception:     # as Future does: a callback's error must not stop the others
        log.exception("exception calling callback for %r", future)


def complete(batches) -> None:
    """Finish batches already given their outcome (batch.base_offset / batch.error set):
    mark them done, then wake waiters and run callbacks outside the lock."""
    with _LOCK:
        watchers = []
        for batch in batches:
            batch.done = True
            if batch.watchers:
                watchers.extend(batch.watchers)
                batch.watchers = []
    for future, fn in watchers:
        if fn is None:
            future._on_complete()
        else:
            _call(fn, future)
