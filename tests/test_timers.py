"""actors/timers.py: timers fire on the broker's loop, in deadline order, never after
cancel() or stop(), armed from the loop or from any other thread."""

from __future__ import annotations

import threading

import pytest

from actors.listener import EventLoop
from actors.timers import Timers

pytestmark = pytest.mark.unit


@pytest.fixture
def loop():
    loop = EventLoop("test-timers")
    yield loop
    loop.stop()


def on_loop(loop, fn):
    """fn() on the loop, its result here."""
    out, done = [], threading.Event()
    loop.call(lambda: (out.append(fn()), done.set()))
    assert done.wait(5)
    return out[0]


@pytest.mark.parametrize("from_loop", [False, True])
def test_timers_fire_on_the_loop_in_deadline_order(loop, from_loop):
    timers = Timers(loop)
    fired, threads, done = [], set(), threading.Event()

    def fire(name):
        fired.append(name)
        threads.add(threading.get_ident())
        if len(fired) == 2:
            done.set()

    def arm():
        timers.add(0.05, lambda: fire("late"))
        timers.add(0.01, lambda: fire("early"))
        return timers.add(0.02, lambda: fire("cancelled"))

    cancelled = on_loop(loop, arm) if from_loop else arm()
    cancelled.cancel()
    assert cancelled.fn is None                 # let go at once
    assert done.wait(5)
    assert fired == ["early", "late"]
    assert threads == {loop._thread.ident}


def test_a_failing_callback_does_not_stop_the_others(loop):
    timers = Timers(loop)
    done = threading.Event()
    timers.add(0.0, lambda: 1 / 0)
    timers.add(0.01, done.set)
    assert done.wait(5)


def test_nothing_fires_after_stop(loop):
    timers = Timers(loop)
    fired = []
    timers.add(0.05, lambda: fired.append(1))
    timers.stop()
    marker = threading.Event()
    Timers(loop).add(0.1, marker.set)           # another user of the loop still runs
    assert marker.wait(5) and fired == []
