"""actors/gc_pauses: every cyclic collection of the process is recorded, by when it began,
with its generation and a length."""

import gc
import time

from actors import gc_pauses


def test_collections_are_recorded_in_their_window():
    gc_pauses.install()
    gc_pauses.install()                     # once per process, however often asked
    assert gc.callbacks.count(gc_pauses._on_gc) == 1
    t0 = time.time()
    gc.collect(0)
    gc.collect(2)
    got = gc_pauses.between(t0, time.time())
    whats = [what for _, _, what in got]     # another thread's allocations may add some
    assert "gen 2" in whats
    last_full = len(whats) - 1 - whats[::-1].index("gen 2")
    assert "gen 0" in whats[:last_full]
    assert all(ms >= 0 and t0 <= wall for wall, ms, _ in got)
    assert gc_pauses.between(time.time() + 1, time.time() + 2) == []
