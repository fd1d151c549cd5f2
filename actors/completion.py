"""One answer, settled once, awaited by a thread or by callbacks (Kafka's DelayedOperation
completion, shared by the parked fetch, the acks=all produce and the group call).

Rules:
- `settle(store)` runs `store()` (the subclass records its answer) and marks the answer
  done, under the completion's own lock, exactly once: a later call stores nothing and
  returns False. The attached `timer` (a Timers handle: the deadline) is cancelled.
- The `when_ready` callbacks run once, after settling: from the settling thread
  (`settle`), or handed back to run outside the caller's lock (`settle_later`); a callback
  added after settling runs at once. They must be short (e.g. hand work to an event loop).
- `wait(timeout_s)` blocks a thread until settled; True if it was. A completion settles
  by its own deadline, so a waiter's `result()` bounds its wait by RESULT_TIMEOUT_S only
  against a bug that never settles it.
- `Watchers`: who waits on which partition (a purgatory's index): `watch(item, tps)`,
  `unwatch(item, tps)` (a partition left with nobody goes), `of(tp)`.
"""

from __future__ import annotations

import threading

RESULT_TIMEOUT_S = 24 * 3600


class Completion:
    __slots__ = ("timer", "_done", "_event", "_callbacks", "_lock")

    def __init__(self):
        self.timer = None
        self._done = False
        self._event = None          # made by the first wait(): most answers are never awaited
        self._callbacks: list = []
        self._lock = threading.Lock()

    @property
    def done(self) -> bool:
        return self._done

    def settle(self, store=None) -> bool:
        callbacks = self.settle_later(store)
        for callback in callbacks or ():
            callback()
        return callbacks is not None

    def settle_later(self, store=None) -> list | None:
        """As settle; the callbacks to run are returned (None: it was settled before)."""
        with self._lock:
            if self._done:
                return None
            if store is not None:
                store()
            self._done = True
            callbacks, self._callbacks = self._callbacks, []
            event = self._event
        if event is not None:
            event.set()
        timer, self.timer = self.timer, None
        if timer is not None:
            timer.cancel()
        return callbacks

    def wait(self, timeout_s: float) -> bool:
        with self._lock:
            if self._done:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout_s)

    def when_ready(self, callback) -> None:
        with self._lock:
            if not self._done:
                self._callbacks.append(callback)
                return
        callback()


class Watchers:
    """tp -> the completions waiting on it (module rules)."""

    __slots__ = ("_by_tp",)

    def __init__(self):
        self._by_tp: dict[tuple, set] = {}

    def __bool__(self) -> bool:
        return bool(self._by_tp)

    def watch(self, item, tps) -> None:
        by_tp = self._by_tp
        for tp in tps:
            waiting = by_tp.get(tp)
            if waiting is None:
                waiting = by_tp[tp] = set()
            waiting.add(item)

    def unwatch(self, item, tps) -> None:
        by_tp = self._by_tp
        for tp in tps:
            waiting = by_tp.get(tp)
            if waiting is not None:
                waiting.discard(item)
                if not waiting:
                    del by_tp[tp]

    def partitions(self) -> set:
        """The partitions someone waits on."""
        return set(self._by_tp)

    def of(self, tp):
        """The completions waiting on `tp` (a live set: copy it to change the index)."""
        return self._by_tp.get(tp, ())
