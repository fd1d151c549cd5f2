"""One queue, one thread (Kafka's ControllerEventManager).

Rules:
- Anyone may `put` an event from any thread (ZooKeeper callbacks, broker responses,
  timers); only the loop's own thread calls the processor, one event at a time, in order.
- `expire()` empties the queue and puts Expire first: whatever was queued was seen through
  a session that no longer exists (Kafka clears the queue the same way).
- A processor exception is logged and the loop goes on; losing the thread would silently
  stop the controller. Shutdown is an event, so everything queued before it is processed.
- `idle()` is for tests and benchmarks: it waits until the queue is empty and no event is
  being processed (poll-free, on a condition variable), with a deadline.
"""

from __future__ import annotations

import collections
import logging
import threading
from typing import Callable

from controller.events import Expire, Shutdown

log = logging.getLogger(__name__)


class EventLoop:
    def __init__(self, process: Callable[[object], None], name: str = "controller-event-thread"):
        self._process = process
        self._queue: collections.deque = collections.deque()
        self._cond = threading.Condition()
        self._busy = False
        self._stopped = False
        self.processed = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> "EventLoop":
        self._thread.start()
        return self

    def put(self, event) -> None:
        with self._cond:
            if self._stopped:
                return
            self._queue.append(event)
            self._cond.notify_all()

    def expire(self) -> None:
        with self._cond:
            self._queue.clear()
            self._queue.append(Expire())
            self._cond.notify_all()

    def shutdown(self, timeout_s: float = 10.0) -> None:
        self.put(Shutdown())
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout_s)

    def idle(self, timeout_s: float = 10.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue and not self._busy, timeout_s)

    def queue_size(self) -> int:
        with self._cond:
            return len(self._queue)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue)
                event = self._queue.popleft()
                self._busy = True
            try:
                self._process(event)
            except Exception:  # the thread must survive a bad event
                log.exception("error processing %s", type(event).__name__)
            finally:
                with self._cond:
                    self._busy = False
                    self.processed += 1
                    if isinstance(event, Shutdown):
                        self._stopped = True
                        self._queue.clear()
                    self._cond.notify_all()
            if isinstance(event, Shutdown):
                return
