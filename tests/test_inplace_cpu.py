"""bench/inplace_cpu.py's Meter: thread CPU inside wrapped entry points, counted once per
outermost call on a thread, with a clock the test drives."""

from __future__ import annotations

import threading
import types

import pytest

from bench.inplace_cpu import DEFAULT_ENTRIES, Meter, resolve

pytestmark = pytest.mark.unit


class StepClock:
    """A thread CPU clock that moves one second each time it is read."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


class Work:
    def leaf(self) -> int:
        return 1

    def nested(self, depth: int) -> int:
        return self.leaf() + (self.nested(depth - 1) if depth else 0)

    @staticmethod
    def static(x: int) -> int:
        return x * 2


def test_each_outermost_call_counts_once_under_every_label_it_passes():
    meter = Meter(clock=StepClock())
    meter.wrap(Work, "leaf", "leaf")
    meter.wrap(Work, "nested", "nested")
    assert Work().nested(2) == 3                 # nested -> nested -> nested, a leaf at each
    assert meter.calls == {"nested": 1, "leaf": 3}
    # the outer nested spans its three leaves' two clock reads each: 1 + 6 + 1 = 8 reads
    assert meter.cpu_s["nested"] == 7.0 and meter.cpu_s["leaf"] == 3.0
    rows = meter.rows(units=2)
    assert rows["leaf"] == {"us_per_unit": 1.5e6, "calls_per_unit": 1.5, "us_per_call": 1e6}
    meter.reset()
    assert not meter.calls and not meter.cpu_s


def test_a_static_method_and_a_module_function_stay_what_they_were():
    meter = Meter(clock=StepClock())
    meter.wrap(Work, "static", "static")
    assert Work.static(4) == 8 and Work().static(5) == 10
    module = types.ModuleType("m")
    module.f = lambda x: x + 1
    meter.wrap(module, "f", "f")
    assert module.f(1) == 2
    assert meter.calls == {"static": 2, "f": 1}


def test_threads_count_apart():
    """A call on another thread while the first is inside is its own outermost call."""
    meter = Meter(clock=StepClock())

    class Gate:
        def run(self, entered: threading.Event, release: threading.Event) -> None:
            entered.set()
            release.wait(5)

    meter.wrap(Gate, "run", "run")
    entered, release = threading.Event(), threading.Event()
    t = threading.Thread(target=Gate().run, args=(entered, release))
    t.start()
    assert entered.wait(5)
    released = threading.Event()
    released.set()
    Gate().run(threading.Event(), released)
    assert meter.calls["run"] == 1              # ours; the thread's is still inside
    release.set()
    t.join(5)
    assert meter.calls["run"] == 2


def test_the_default_entries_name_real_callables_and_a_wrong_one_is_refused():
    labels = [resolve(spec)[2] for spec in DEFAULT_ENTRIES]
    assert len(set(labels)) == len(DEFAULT_ENTRIES)
    assert resolve("replicas.log:Log:append_as_leader")[2] == "log.Log.append_as_leader"
    with pytest.raises(ValueError, match="no such callable"):
        resolve("replicas.log:Log:no_such_method")
