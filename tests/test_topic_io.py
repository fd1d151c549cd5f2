"""TopicIO (actors/topic_io.py): Kafka's per-topic bytes in and out on a broker."""

from __future__ import annotations

import threading

import pytest

from actors.topic_io import TopicIO

pytestmark = pytest.mark.unit


def test_bytes_in_and_out_are_counted_per_topic():
    io = TopicIO()
    io.count_in([(("a", 0), b"x" * 10), (("a", 1), b"y" * 5), (("b", 0), b"z")])
    io.count_out([(("a", 0), b"x" * 7), (("b", 3), None), (("c", 0), b"")])
    assert io.stats() == {"a": (15, 7), "b": (1, 0)}


def test_counters_lose_nothing_under_concurrent_bumps():
    io = TopicIO()

    def bump():
        for _ in range(2000):
            io.count_in([(("t", 0), b"ab")])
            io.count_out([(("t", 0), b"c")])
    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert io.stats() == {"t": (4 * 2000 * 2, 4 * 2000)}
