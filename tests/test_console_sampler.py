"""The console's sampler (console/sampler.py): what one Snapshot (console/source.py) records
into History, and the Sampler's sweep over a small fake Source. No Ray, no cluster."""

from __future__ import annotations

import threading
import time

import pytest

from console.history import History
from console.sampler import Sampler, record
from console.source import PartitionView, Snapshot
from rayka.errors import CoordinatorNotAvailable

pytestmark = pytest.mark.unit

LIVE = [{"id": 1, "alive": True}, {"id": 2, "alive": True}, {"id": 3, "alive": True}]


def part(topic: str, p: int, leader: int = 1, replicas=(1, 2, 3), isr=None, end=0, hw=None,
         size=0) -> PartitionView:
    return PartitionView(topic, p, leader, 0, tuple(replicas),
                         tuple(replicas if isr is None else isr), log_start=0, log_end=end,
                         high_watermark=end if hw is None else hw, size_bytes=size)


def snap(t: float, parts=(), committed=None, brokers=LIVE, groups=None, **kw) -> Snapshot:
    committed = committed or {}
    return Snapshot(time_s=t, brokers=list(brokers),
                    partitions={(p.topic, p.partition): p for p in parts},
                    committed=committed,
                    groups=[{"group": g, "type": "classic", "state": "Stable"}
                            for g in committed] if groups is None else groups, **kw)


def last(h: History, name: str):
    s = h.get(name)
    return None if s is None else s.last()


# -- record --------------------------------------------------------------------------------------
def test_a_topics_end_and_bytes_are_the_sums_over_its_leaders():
    h = History()
    record(h, snap(10, [part("a", 0, end=10, size=100), part("a", 1, end=5, size=None),
                        part("b", 0, end=7, size=3)]))
    assert h.get("topic:a:end").samples[-1] == (10, 15)
    assert last(h, "topic:a:bytes") == 100                # an unknown size counts as 0
    assert (last(h, "topic:b:end"), last(h, "topic:b:bytes")) == (7, 3)


def test_a_topic_with_a_partition_between_leaders_leaves_a_gap_not_a_dip():
    h = History()
    record(h, snap(10, [part("a", 0, end=10), part("a", 1, end=5), part("b", 0, end=1)]))
    between = part("a", 1)
    between.log_end = None
    record(h, snap(20, [part("a", 0, end=12), between, part("b", 0, end=2)]))
    assert list(h.get("topic:a:end").samples) == [(10, 15)]
    assert list(h.get("topic:a:bytes").samples) == [(10, 0)]
    assert list(h.get("topic:b:end").samples) == [(10, 1), (20, 2)]   # the others go on
    record(h, snap(30, [part("a", 0, end=14), part("a", 1, end=6), part("b", 0, end=2)]))
    assert list(h.get("topic:a:end").samples) == [(10, 15), (30, 20)]


def test_a_groups_lag_in_total_and_per_topic_and_its_topics_consumed_offsets():
    h = History()
    parts = [part("a", 0, end=10), part("a", 1, end=4), part("b", 0, end=7)]
    committed = {"g": {("a", 0): 3, ("a", 1): 6, ("b", 0): 0},   # a-1 past the end: lag 0
                 "other": {("a", 0): 10}}
    record(h, snap(10, parts, committed))
    assert last(h, "group:g:lag") == 7 + 0 + 7
    assert last(h, "group:g:lag:a") == 7
    assert last(h, "group:g:lag:b") == 7
    assert last(h, "group:other:lag") == 0
    assert last(h, "topic:a:consumed") == 3 + 6 + 10          # every group's commits
    assert last(h, "topic:b:consumed") == 0


@pytest.mark.parametrize("unknown", ["no high watermark", "no such partition"])
def test_a_group_with_an_unknown_high_watermark_leaves_a_gap(unknown):
    h = History()
    committed = {"g": {("a", 0): 3, ("a", 1): 1, ("b", 0): 2}}
    record(h, snap(10, [part("a", 0, end=10), part("a", 1, end=4), part("b", 0, end=7)],
                   committed))
    a1 = part("a", 1, end=5)
    a1.high_watermark = None
    parts = [part("a", 0, end=12), part("b", 0, end=9)] + \
        ([a1] if unknown == "no high watermark" else [])
    record(h, snap(20, parts, committed))
    assert list(h.get("group:g:lag").samples) == [(10, 7 + 3 + 5)]       # no sweep-20 total
    assert list(h.get("group:g:lag:a").samples) == [(10, 10)]            # nor topic a
    assert list(h.get("group:g:lag:b").samples) == [(10, 5), (20, 7)]    # b is known


def test_a_topics_bytes_in_and_out_are_recorded_and_drawn_as_rates():
    h = History()
    record(h, snap(10, [part("a", 0)], topic_io={"a": [1000, 0], "gone": [5, 5]}))
    record(h, snap(12, [part("a", 0)], topic_io={"a": [3000, 500]}))
    assert (last(h, "topic:a:bytes_in"), last(h, "topic:a:bytes_out")) == (3000, 500)
    assert (h.get("topic:a:bytes_in").rate(), h.get("topic:a:bytes_out").rate()) == (1000, 250)
    assert h.get("topic:gone:bytes_in") is None           # counters of a topic that is gone


def test_broker_io_counters_are_recorded_per_broker():
    h = History()
    record(h, snap(10, broker_io={1: {"requests": 5, "bytes_in": 100, "bytes_out": 7},
                                  2: {"requests": 9, "fetch_requests": 4}}))
    assert [last(h, f"broker:1:{k}") for k in ("requests", "bytes_in", "bytes_out")] == \
        [5, 100, 7]
    assert (last(h, "broker:2:requests"), last(h, "broker:2:fetch_requests")) == (9, 4)
    assert h.get("broker:2:bytes_in") is None


@pytest.mark.parametrize("parts, brokers, under, offline", [
    ([part("a", 0), part("a", 1)], LIVE, 0, 0),
    ([part("a", 0, isr=(1, 2)), part("a", 1, isr=(1,)), part("a", 2)], LIVE, 2, 0),
    ([part("a", 0, leader=-1, isr=())], LIVE, 1, 1),                    # no leader
    # the leader broker 2 is registered but dead: offline though its ISR is full
    ([part("a", 0, leader=2), part("a", 1, leader=1)],
     [{"id": 1, "alive": True}, {"id": 2, "alive": False}], 0, 1),
    # a leader no broker registers at all
    ([part("a", 0, leader=9)], LIVE, 0, 1),
])
def test_cluster_under_replicated_and_offline_counts(parts, brokers, under, offline):
    h = History()
    record(h, snap(10, parts, brokers=brokers))
    assert last(h, "cluster:under_replicated") == under
    assert last(h, "cluster:offline") == offline


def two_sweeps(errors: list[str]) -> History:
    h = History()
    record(h, snap(10, [part("kept", 0, end=1), part("gone", 0, end=1)],
                   {"g-kept": {("kept", 0): 1}, "g-gone": {("gone", 0): 1}}))
    assert h.names("topic:gone:") and h.names("group:g-gone:")
    record(h, snap(20, [part("kept", 0, end=2)], {"g-kept": {("kept", 0): 2}}, errors=errors))
    return h


@pytest.mark.parametrize("errors, dropped", [
    ([], True),
    (["log_dirs: KAFKA_STORAGE_ERROR (56): disk"], True),     # another part's error
    (["partitions: no live broker answered its metadata"], False),
    (["groups: COORDINATOR_NOT_AVAILABLE (15): no coordinator"], False),
])
def test_a_deleted_topics_and_groups_series_go_at_the_next_sweep_unless_it_failed(errors, dropped):
    h = two_sweeps(errors)
    assert h.names("topic:kept:") and h.names("group:g-kept:")
    gone = h.names("topic:gone:") + h.names("group:g-gone:")
    if dropped:
        assert gone == []
    else:
        assert set(gone) >= {"topic:gone:end", "topic:gone:bytes", "topic:gone:consumed",
                             "group:g-gone:lag", "group:g-gone:lag:gone"}


def test_a_group_id_with_a_colon_keeps_its_series():
    """Kafka's group ids may hold ':'; the series name must not be split on it."""
    h = History()
    committed = {"app:v2": {("a", 0): 1}}
    record(h, snap(10, [part("a", 0, end=5)], committed))
    record(h, snap(20, [part("a", 0, end=6)], committed))
    assert list(h.get("group:app:v2:lag").samples) == [(10, 4), (20, 5)]
    assert last(h, "group:app:v2:lag:a") == 5
    record(h, snap(30, [part("a", 0, end=6)], {}, groups=[]))          # then deleted
    assert h.names("group:") == []


def test_a_group_whose_offsets_could_not_be_read_this_sweep_keeps_its_series():
    """Still listed (snapshot.groups), only its offset fetch failed: it exists."""
    h = History()
    record(h, snap(10, [part("a", 0, end=5)], {"g": {("a", 0): 1}}))
    record(h, snap(20, [part("a", 0, end=6)], {},
                   groups=[{"group": "g", "type": "classic", "state": "Stable"}],
                   errors=[f"group g: {CoordinatorNotAvailable('moving').name} (15): moving"]))
    assert list(h.get("group:g:lag").samples) == [(10, 4)]


# -- Sampler -------------------------------------------------------------------------------------
class FakeSource:
    """Answers the snapshots given, in order; an exception given is raised instead."""

    admin = None
    cluster = None

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = 0

    def sweep(self) -> Snapshot:
        self.calls += 1
        got = self.answers.pop(0)
        if isinstance(got, BaseException):
            raise got
        return got


def test_sweep_once_stores_the_latest_snapshot_and_records_it():
    first = snap(100, [part("a", 0, end=3)])
    second = snap(101, [part("a", 0, end=8)])
    sampler = Sampler(FakeSource(first, second), interval_s=60)
    assert sampler.sweep_once() is first and sampler.latest is first
    assert sampler.sweep_once() is second and sampler.latest is second
    assert list(sampler.history.get("topic:a:end").samples) == [(100, 3), (101, 8)]
    assert not sampler.thread.is_alive()                       # no background sweep here


def test_a_sweep_that_raises_keeps_the_last_snapshot_and_says_why():
    first = snap(100, [part("a", 0, end=3)])
    source = FakeSource(first, CoordinatorNotAvailable("no controller"), RuntimeError("boom"))
    sampler = Sampler(source, interval_s=60)
    sampler.sweep_once()
    assert sampler.sweep_once() is first and sampler.latest is first
    assert first.errors == ["sweep: COORDINATOR_NOT_AVAILABLE (15): no controller"]
    sampler.sweep_once()
    assert sampler.latest is first and first.errors == ["sweep: RuntimeError: boom"]
    assert list(sampler.history.get("topic:a:end").samples) == [(100, 3)]
    assert source.calls == 3


def test_wait_newer_answers_a_newer_snapshot_or_none_on_timeout():
    newer = snap(200)
    sampler = Sampler(FakeSource(snap(100), newer), interval_s=60)
    sampler.sweep_once()
    assert sampler.wait_newer(99, timeout_s=0.01) is sampler.latest    # already newer
    started = time.monotonic()
    assert sampler.wait_newer(100, timeout_s=0.2) is None
    assert time.monotonic() - started >= 0.15
    sweeper = threading.Timer(0.1, sampler.sweep_once)
    sweeper.start()
    try:
        assert sampler.wait_newer(100, timeout_s=10) is newer
    finally:
        sweeper.join()
