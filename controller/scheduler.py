"""Delayed tasks for the controller (Kafka's KafkaScheduler, reduced to what it needs).

Rules:
- A scheduled task only ENQUEUES an event on the controller's loop (like a watch); it never
  touches controller state itself.
- `schedule(delay_ms, fn)` returns a handle with `cancel()`; `cancel_all()` runs on
  resignation so a former controller's timers cannot fire into a new term.
- `ThreadScheduler` uses daemon threading.Timer objects (the real shell);
  `ManualScheduler` keeps tasks in a list and fires those due when the caller advances its
  clock (deterministic tests and simulations).
"""

from __future__ import annotations

import threading
from typing import Callable


class _Handle:
    def __init__(self, cancel: Callable[[], None]):
        self._cancel = cancel
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        self._cancel()


class ThreadScheduler:
    def __init__(self):
        self._timers: set[threading.Timer] = set()
        self._lock = threading.Lock()

    def schedule(self, delay_ms: int, fn: Callable[[], None]) -> _Handle:
        def run():
            with self._lock:
                self._timers.discard(timer)
            fn()
        timer = threading.Timer(max(delay_ms, 0) / 1000.0, run)
        timer.daemon = True
        with self._lock:
            self._timers.add(timer)
        timer.start()
        return _Handle(timer.cancel)

    def cancel_all(self) -> None:
        with self._lock:
            timers, self._timers = self._timers, set()
        for t in timers:
            t.cancel()


class ManualScheduler:
    def __init__(self, now_ms: int = 0):
        self.now_ms = now_ms
        self.tasks: list[tuple[int, int, Callable[[], None], _Handle]] = []
        self._seq = 0

    def schedule(self, delay_ms: int, fn: Callable[[], None]) -> _Handle:
        handle = _Handle(lambda: None)
        self._seq += 1
        self.tasks.append((self.now_ms + max(delay_ms, 0), self._seq, fn, handle))
        return handle

    def cancel_all(self) -> None:
        for *_, handle in self.tasks:
            handle.cancelled = True
        self.tasks.clear()

    def advance(self, ms: int) -> int:
        """Move time on by `ms`, firing due tasks in time order; returns how many fired."""
        self.now_ms += ms
        fired = 0
        while True:
            due = sorted(t for t in self.tasks if t[0] <= self.now_ms)
            if not due:
                return fired
            task = due[0]
            self.tasks.remove(task)
            if not task[3].cancelled:
                task[2]()
                fired += 1
