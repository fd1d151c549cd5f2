"""The cyclic garbage collector's pauses of this process, kept as a JVM's GC log keeps its.

Rules:
- CPython's cyclic collector runs holding the GIL: while it runs no thread of the process
  runs Python, so every request of a broker hosted here waits (reference counting frees
  most garbage without any pause; only the cyclic collector is recorded).
- `install()` hooks `gc.callbacks` once per process (idempotent) and keeps the last `KEEP`
  collections as (wall time it began s, ms, generation) in a ring; the hook's own cost is
  two calls per collection.
- `between(since_s, until_s)` lists those that began in the window, oldest first (the
  benchmark puts them beside Kafka's G1 pauses over the same paced runs).
"""

from __future__ import annotations

import collections
import gc
import threading
import time

KEEP = 4096

_ring: collections.deque = collections.deque(maxlen=KEEP)
_started: list = []                  # (wall s, perf s) of the collection running, if any
_lock = threading.Lock()
_installed = False


def _on_gc(phase: str, info: dict) -> None:
    if phase == "start":
        _started[:] = [time.time(), time.perf_counter()]
    elif _started:
        wall, t0 = _started
        _ring.append((wall, (time.perf_counter() - t0) * 1000, info.get("generation", -1)))
        _started.clear()


def install() -> None:
    global _installed
    with _lock:
        if not _installed:
            gc.callbacks.append(_on_gc)
            _installed = True


def between(since_s: float, until_s: float) -> list[tuple[float, float, str]]:
    """(wall time s, ms, "gen N") of each collection that began in [since_s, until_s]."""
    return [(wall, ms, f"gen {gen}") for wall, ms, gen in list(_ring)
            if since_s <= wall <= until_s]
