"""Timers on the broker's event loop (Kafka's SystemTimer under its delayed operations: a
parked fetch's max_wait, a produce's acknowledgement timeout).

Rules:
- `add(delay_s, fn)` → a Timer handle; fn() runs ON THE LOOP once the delay has passed,
  unless `cancel()`ed first. Callbacks are short (take the broker's lock, complete an
  operation, return); one that raises is logged and the loop goes on.
- No thread of its own: a timer is the loop's own `call_at` (a heap the loop already
  sleeps on), so arming one from the loop costs no wake-up and no GIL hand-off; from
  another thread it is handed to the loop first.
- `cancel()` from any thread lets go of the callback at once (it often refers to the
  operation that holds the timer: a cycle only the garbage collector would break, and a
  broker makes thousands a second); from the loop it also drops the loop's entry.
- `stop()`: timers not yet due never fire.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


class Timer:
    __slots__ = ("fn", "handle", "cancelled", "_timers")

    def __init__(self, timers: "Timers", fn):
        self._timers, self.fn, self.handle, self.cancelled = timers, fn, None, False

    def cancel(self) -> None:
        self.cancelled = True
        self.fn = None                # what it would have called is freed now, not at its time
        handle = self.handle
        if handle is not None and self._timers.loop.in_loop:
            handle.cancel()


class Timers:
    def __init__(self, loop):
        self.loop = loop              # actors.listener.EventLoop
        self._stopped = False

    def add(self, delay_s: float, fn) -> Timer:
        timer = Timer(self, fn)
        if self.loop.in_loop:
            timer.handle = self.loop.loop.call_later(max(0.0, delay_s), self._fire, timer)
        else:
            deadline = self.loop.loop.time() + max(0.0, delay_s)
            self.loop.call(self._arm, timer, deadline)
        return timer

    def stop(self) -> None:
        self._stopped = True

    def _arm(self, timer: Timer, deadline: float) -> None:
        if not timer.cancelled:
            timer.handle = self.loop.loop.call_at(deadline, self._fire, timer)

    def _fire(self, timer: Timer) -> None:
        fn, timer.fn, timer.handle = timer.fn, None, None
        if fn is None or self._stopped:
            return
        try:
            fn()
        except Exception:              # one bad callback must not stop the others
            log.exception("timer callback failed")
