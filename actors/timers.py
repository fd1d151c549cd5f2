"""Timers: one thread firing callbacks at their deadlines (Kafka's SystemTimer under its
delayed operations: a parked fetch's max_wait, a produce's acknowledgement timeout).

Rules:
- `add(delay_s, fn)` → a Timer handle; fn() runs on the timer thread once the delay has
  passed, unless `cancel()`ed first. Callbacks are short (take the broker's lock, complete
  an operation, return); one that raises is logged and the thread goes on.
- Deadlines are on the monotonic clock; the thread sleeps until the earliest one, and an
  earlier timer added meanwhile wakes it. Cancelled timers are dropped when they reach the
  head of the heap, so cancel is O(1); cancel lets go of the callback at once (it often
  refers to the operation that holds the timer: a cycle only the garbage collector would
  break, and a broker makes thousands a second).
- `stop()` ends the thread; timers not yet due never fire.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time

log = logging.getLogger(__name__)


class Timer:
    __slots__ = ("deadline", "fn", "cancelled")

    def __init__(self, deadline: float, fn):
        self.deadline, self.fn, self.cancelled = deadline, fn, False

    def cancel(self) -> None:
        self.cancelled = True
        self.fn = None                # what it would have called is freed now, not at its time


class Timers:
    def __init__(self, name: str = "timers"):
        self._heap: list = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)
        self._thread.start()

    def add(self, delay_s: float, fn) -> Timer:
        timer = Timer(time.monotonic() + max(0.0, delay_s), fn)
        with self._cond:
            earliest = not self._heap or timer.deadline < self._heap[0][0]
            heapq.heappush(self._heap, (timer.deadline, next(self._seq), timer))
            if earliest:
                self._cond.notify()
        return timer

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def __len__(self) -> int:
        with self._cond:
            return sum(1 for _, _, t in self._heap if not t.cancelled)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped:
                    while self._heap and self._heap[0][2].cancelled:
                        heapq.heappop(self._heap)
                    if self._heap and self._heap[0][0] <= time.monotonic():
                        break
                    wait = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cond.wait(wait)
                if self._stopped:
                    return
                _, _, timer = heapq.heappop(self._heap)
                fn, timer.fn = timer.fn, None
            if fn is None:
                continue
            try:
                fn()
            except Exception:              # one bad callback must not stop the others
                log.exception("timer callback failed")
