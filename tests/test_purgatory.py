"""actors/purgatory.py: which parked fetches an append wakes, which partitions they read
again, and that a completed fetch leaves nothing behind (no reference cycles: the collector
stalled the broker's loop for 100-200 ms when parked fetches made garbage cycles)."""

from __future__ import annotations

import gc
import random
import threading

import pytest

from actors.purgatory import DelayedFetch, FetchPurgatory
from actors.listener import EventLoop
from actors.timers import Timers
from protocol.fetch_session import FetchData, FetchSessionCache

pytestmark = pytest.mark.unit
A, B, C = ("t", 0), ("t", 1), ("u", 0)


class Reader:
    """The broker's side of a parked fetch over `tps`: `data` says which partitions have
    something to read, `enough` whether a read completes it; every read's `only` is
    recorded, and every read's `changed` (the partitions whose marks it must refresh).
    Like the broker's, it never refers to its DelayedFetch."""

    def __init__(self, tps, enough=True):
        self.tps, self.enough = tps, enough
        self.data: set = set()
        self.reads: list = []
        self.changed: list = []

    def read(self, only=None, previous=None, changed=None):
        self.reads.append(only)
        self.changed.append(changed)
        return {tp: ("again" if only is None or tp in only else previous[tp])
                for tp in self.tps}, self.enough

    def ready(self, tp) -> bool:
        return tp in self.data


class Parked:
    def __init__(self, tps, enough=True):
        self.reader = Reader(tps, enough)
        self.data, self.reads = self.reader.data, self.reader.reads
        self.changed = self.reader.changed
        self.fetch = DelayedFetch(tps, self.reader.read, self.reader.ready,
                                  {tp: "first" for tp in tps})


def test_an_append_wakes_only_the_fetches_of_that_partition_that_can_use_it():
    p = FetchPurgatory()
    ab, c = Parked((A, B)), Parked((C,))
    p.park(ab.fetch)
    p.park(c.fetch)
    p.changed([A])                           # nothing readable yet on A
    assert ab.reads == [] and len(p) == 2
    ab.data.add(A)
    p.changed([A, C])
    assert ab.reads == [{A}] and c.reads == []
    assert ab.fetch.done and ab.fetch.result() == {A: "again", B: "first"}
    assert len(p) == 1
    p.changed([A])                           # a completed fetch is gone
    assert ab.reads == [{A}]


def test_a_read_that_is_not_enough_stays_parked_with_its_answers():
    p = FetchPurgatory()
    ab = Parked((A, B), enough=False)
    p.park(ab.fetch)
    ab.data |= {A, B}
    p.changed([A, B])
    assert ab.reads == [{A, B}] and not ab.fetch.done and len(p) == 1
    assert ab.fetch.answers == {A: "again", B: "again"}


def test_leadership_moves_read_the_moved_partitions_and_a_deadline_refreshes_marks_only():
    p = FetchPurgatory()
    ab, c = Parked((A, B)), Parked((C,))
    p.park(ab.fetch)
    p.park(c.fetch)
    p.moved([A, B, C])
    assert ab.reads == [{A, B}] and c.reads == [{C}] and len(p) == 0
    late = Parked((A,), enough=False)
    p.park(late.fetch)
    p.expire(late.fetch)
    assert late.reads == [frozenset()] and late.fetch.done and len(p) == 0


def test_callbacks_run_once_after_completion_and_late_ones_at_once():
    ab = Parked((A,))
    seen = []
    ab.fetch.when_ready(lambda: seen.append("early"))
    ab.fetch.complete({A: 1})
    ab.fetch.complete({A: 2})                # a second completion changes nothing
    ab.fetch.when_ready(lambda: seen.append("late"))
    assert seen == ["early", "late"] and ab.fetch.result() == {A: 1}


def _alive(kind):
    return sum(1 for o in gc.get_objects() if type(o) is kind)


def test_completed_and_expired_fetches_leave_no_garbage_cycles():
    """Freed by reference counting alone: with the collector off, no DelayedFetch
    or reader outlives its last reference (other threads' garbage cannot blur this; what
    earlier tests of the process still hold is the baseline)."""
    loop = EventLoop()
    timers = Timers(loop)
    p = FetchPurgatory()
    try:
        gc.collect()
        gc.disable()
        before = _alive(DelayedFetch), _alive(Reader)
        fired = threading.Event()
        for _ in range(200):
            reader = Reader((A, B))
            fetch = DelayedFetch(reader.tps, reader.read, reader.ready, {A: 0, B: 0})
            p.park(fetch)
            fetch.timer = timers.add(60, lambda f=fetch: p.expire(f))
            fetch.when_ready(lambda: None)
            reader.data.add(A)
            p.changed([A])
        reader = Reader((C,), enough=False)
        fetch = DelayedFetch(reader.tps, reader.read, reader.ready, {C: 0})
        p.park(fetch)
        fetch.timer = timers.add(0.001, lambda f=fetch: (p.expire(f), fired.set()))
        assert fired.wait(10) and fetch.done
        del fetch, reader
        assert (_alive(DelayedFetch), _alive(Reader)) == before
    finally:
        gc.enable()
        timers.stop()
        loop.stop()


def test_moved_partitions_are_read_again_only_where_watched_ready_or_not():
    p = FetchPurgatory()
    ab, c = Parked((A, B)), Parked((C,))
    p.park(ab.fetch)
    p.park(c.fetch)
    token, _ = p.journal.since(0)
    p.moved([B])                          # B's leadership moved; no data anywhere
    assert ab.reads == [{B}] and c.reads == [] and not c.fetch.done
    assert p.journal.since(token)[1] == {B}     # the fetch sessions hear of it too


def test_a_read_refreshes_only_the_marks_the_journal_saw_change_since_the_last_read():
    p = FetchPurgatory()
    abc = Parked((A, B, C), enough=False)
    p.journal.note([A, B])                # before the park: the first read saw these
    p.park(abc.fetch)
    p.changed([A])                        # A moved (above what it may read): not ready
    assert abc.reads == []
    abc.data.add(C)
    p.changed([C])
    assert abc.reads == [{C}] and abc.changed == [{A, C}]
    p.changed([C])                        # since that read: only C again
    assert abc.changed[-1] == {C}
    p.journal.note_all()                  # leadership or retention: the journal cannot tell
    p.changed([C])
    assert abc.changed[-1] is None
    p.expire(abc.fetch)                   # the deadline: what changed since the last read
    assert abc.reads[-1] == frozenset() and abc.changed[-1] == set() and abc.fetch.done


def test_a_fetch_never_parked_refreshes_every_mark():
    p = FetchPurgatory()
    a = Parked((A,), enough=False)
    p.expire(a.fetch)                     # token 0: nothing known about its read
    assert a.changed == [None]


# -- fetches of a fetch session: one watch kept between them --------------------------------
def session_of(cache, wanted, session_id=0, epoch=0, forgotten=()):
    """A fetch of `wanted` (tps at offset 0) through a real session cache: its context."""
    return cache.new_context(session_id, epoch, {tp: FetchData(0) for tp in wanted},
                             forgotten, True)


def park_session_fetch(p, context, enough=True) -> Parked:
    parked = Parked(context.asks_by_tp(), enough)
    p.park(parked.fetch, context.session, context.members)
    return parked


def answered(p, parked: Parked) -> None:
    """A parked fetch answered without a change (its deadline, say)."""
    p.unpark(parked.fetch)
    parked.fetch.complete({})


def test_a_sessions_fetches_park_on_one_watch_kept_between_them():
    p = FetchPurgatory()
    cache = FetchSessionCache(10, random.Random(1), on_close=p.session_closed)
    full = session_of(cache, (A, B))
    first = park_session_fetch(p, full)
    watch = full.session.watch
    watched = watch.tps
    first.data.add(A)
    p.changed([A])
    assert first.reads == [{A}] and first.fetch.done and not watch.fetches
    assert p.watched_partitions() == 2          # the session's partitions stay watched
    # the next fetch moves a position; no partition joins or leaves: nothing re-watched
    nxt = cache.new_context(full.session_id, 1, {A: FetchData(1)}, (), True)
    assert nxt.members == full.members
    second = park_session_fetch(p, nxt)
    assert full.session.watch is watch and watch.tps is watched and len(p) == 1
    second.data.add(B)
    p.changed([B])
    assert second.reads == [{B}] and second.fetch.done and len(p) == 0


def test_partitions_joining_or_leaving_a_session_move_its_watch():
    p = FetchPurgatory()
    cache = FetchSessionCache(10, random.Random(1), on_close=p.session_closed)
    full = session_of(cache, (A, B))
    answered(p, park_session_fetch(p, full))
    moved = session_of(cache, (C,), full.session_id, 1, forgotten=[A])
    assert moved.members > full.members
    fetch = park_session_fetch(p, moved)
    assert full.session.watch.tps == {B, C}
    fetch.data |= {A, B, C}
    p.changed([A])                              # forgotten: nobody waits on it
    assert fetch.reads == [] and p.watched_partitions() == 2
    p.changed([C])
    assert fetch.reads == [{C}] and fetch.fetch.done


def test_a_closed_sessions_watch_goes_once_no_fetch_waits_on_it():
    p = FetchPurgatory()
    cache = FetchSessionCache(10, random.Random(1), on_close=p.session_closed)
    full = session_of(cache, (A, B))
    parked = park_session_fetch(p, full)
    cache.new_context(full.session_id, -1, {}, (), True)    # FINAL: the session closes
    assert full.session.closed
    parked.data.add(A)
    p.changed([A])                              # its parked fetch is still woken
    assert parked.fetch.done and p.watched_partitions() == 0
    # a fetch of a session closed meanwhile waits as one without a session
    late = park_session_fetch(p, full, enough=False)
    assert full.session.watch.fetches == set() and p.watched_partitions() == 2
    p.expire(late.fetch)
    assert p.watched_partitions() == 0 and len(p) == 0


@pytest.mark.parametrize("how", ["final", "initial", "emptied", "evicted"])
def test_every_way_out_of_the_cache_takes_the_sessions_watch_away(how):
    p = FetchPurgatory()
    cache = FetchSessionCache(1, random.Random(1), on_close=p.session_closed,
                              clock_ms=lambda: 10**9 if how == "evicted" else 0)
    full = session_of(cache, (A, B))
    answered(p, park_session_fetch(p, full))
    assert p.watched_partitions() == 2
    if how == "final":
        cache.new_context(full.session_id, -1, {}, (), True)
    elif how == "initial":
        session_of(cache, (C,), full.session_id, 0)
    elif how == "emptied":
        cache.new_context(full.session_id, 1, {}, [A, B], True)
    else:
        cache.clock_ms = lambda: 10**9 + 200_000        # idle past the eviction time
        session_of(cache, (C,))
    p.changed([C])
    assert full.session.closed and p.watched_partitions() == 0


def test_an_older_fetch_of_a_session_does_not_take_its_watch_back():
    p = FetchPurgatory()
    cache = FetchSessionCache(10, random.Random(1), on_close=p.session_closed)
    full = session_of(cache, (A,))
    old = park_session_fetch(p, full, enough=False)
    newer = session_of(cache, (B,), full.session_id, 1)
    park_session_fetch(p, newer, enough=False)
    park_session_fetch(p, full, enough=False)             # parks after the newer one
    assert full.session.watch.tps == {A, B}
    old.data.add(A)
    p.changed([A])
    assert old.reads == [{A}]
