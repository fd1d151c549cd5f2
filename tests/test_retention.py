"""Retention and time-based rolling (replicas/retention.py, Log.apply_retention): Kafka's
three passes as a table, a property against a naive reference, and the log on disk."""

from dataclasses import dataclass

import pytest
from hypothesis import given, settings, strategies as st

from replicas import records
from replicas.log import Log, LogConfig
from replicas.retention import RetentionPolicy, plan_retention, time_to_roll
from tests.test_log import batch, kafka_python_view, read_all

pytestmark = pytest.mark.unit
DAY = 86_400_000


@dataclass
class Seg:
    base_offset: int
    size: int
    largest_timestamp: int = 0


def segs(*specs):
    """Segments from (base, size, largest timestamp) triples."""
    return [Seg(*s) for s in specs]


THREE = segs((0, 100, 1000), (10, 100, 2000), (20, 100, 3000))   # LEO 30


@pytest.mark.parametrize("case, segments, log_start, hw, now, policy, count, reasons", [
    ("nothing breached", THREE, 0, 30, 3000, RetentionPolicy(DAY, -1), 0, {}),
    ("time: the two oldest are older than 1.5 s", THREE, 0, 30, 3600,
     RetentionPolicy(1500, -1), 2, {"time": 2}),
    ("time: every segment, the log rolls first", THREE, 0, 30, 9000,
     RetentionPolicy(1000, -1), 3, {"time": 3}),
    ("time: never at or past the HW", THREE, 0, 15, 9000, RetentionPolicy(1000, -1), 1,
     {"time": 1}),
    ("time: HW exactly at a segment's upper bound deletes it", THREE, 0, 20, 9000,
     RetentionPolicy(1000, -1), 2, {"time": 2}),
    ("time: stops at the first young segment", segs((0, 100, 5000), (10, 100, 1000)), 0, 20,
     6000, RetentionPolicy(2000, -1), 0, {}),
    ("size: keep >= 150 bytes", THREE, 0, 30, 0, RetentionPolicy(-1, 150), 1, {"size": 1}),
    ("size: exactly the limit left", THREE, 0, 30, 0, RetentionPolicy(-1, 100), 2, {"size": 2}),
    ("size: limit 0 deletes all, rolling", THREE, 0, 30, 0, RetentionPolicy(-1, 0), 3,
     {"size": 3}),
    ("log start breached: only segments wholly below it", THREE, 15, 30, 0,
     RetentionPolicy(-1, -1), 1, {"log_start": 1}),
    ("log start at a segment base", THREE, 20, 30, 0, RetentionPolicy(-1, -1), 2,
     {"log_start": 2}),
    ("passes add up in order", THREE, 12, 30, 2500, RetentionPolicy(400, 150), 2,
     {"log_start": 1, "time": 1}),
    ("compact only: no size or time pass", THREE, 0, 30, 9 * DAY,
     RetentionPolicy(1000, 0, delete=False), 0, {}),
    ("compact only: log start still applies", THREE, 10, 30, 9 * DAY,
     RetentionPolicy(1000, 0, delete=False), 1, {"log_start": 1}),
    ("an empty last segment is never deleted", segs((0, 100, 1000), (10, 0, -1)), 0, 10,
     9000, RetentionPolicy(1000, -1), 1, {"time": 1}),
])
def test_plan(case, segments, log_start, hw, now, policy, count, reasons):
    leo = 30 if segments is THREE else segments[-1].base_offset + (10 if segments[-1].size else 0)
    plan = plan_retention(segments, log_start, leo, hw, now, policy)
    assert (plan.count, plan.reasons) == (count, reasons), case
    assert plan.roll_first == (count == len(segments))


def naive(sizes, times, hw, now, retention_ms, retention_bytes):
    """Reference: drop oldest by size while it stays at or above the limit, then by age;
    only segments wholly below the HW; an empty last segment stays."""
    bases = [sum(10 for _ in range(i)) for i in range(len(sizes))]
    uppers = bases[1:] + [bases[-1] + (10 if sizes[-1] else 0)]
    n, total = 0, sum(sizes)
    ok = [uppers[i] <= hw and not (i == len(sizes) - 1 and sizes[i] == 0) for i in range(len(sizes))]
    if retention_bytes >= 0:
        while n < len(sizes) and ok[n] and total - sizes[n] >= retention_bytes:
            total -= sizes[n]
            n += 1
    if retention_ms >= 0:
        while n < len(sizes) and ok[n] and now - times[n] > retention_ms:
            n += 1
    return n


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 500), st.integers(0, 10_000)), min_size=1, max_size=8),
       st.integers(0, 90), st.integers(0, 12_000), st.integers(-1, 5000), st.integers(-1, 3000))
def test_plan_matches_a_naive_reference(specs, hw, now, retention_ms, retention_bytes):
    segments = [Seg(10 * i, size, ts) for i, (size, ts) in enumerate(specs)]
    leo = segments[-1].base_offset + (10 if segments[-1].size else 0)
    plan = plan_retention(segments, 0, leo, min(hw, leo), now,
                          RetentionPolicy(retention_ms, retention_bytes))
    assert plan.count == naive([s.size for s in segments], [s.largest_timestamp for s in segments],
                               min(hw, leo), now, retention_ms, retention_bytes)


@pytest.mark.parametrize("size, rolling, created, batch_ts, now, segment_ms, roll", [
    (0, None, 0, 10_000, 10_000, 100, False),          # an empty segment never rolls
    (10, 1000, 0, 1100, 0, 100, False),                # exactly segment.ms: not yet
    (10, 1000, 0, 1101, 0, 100, True),
    (10, None, 500, -1, 601, 100, True),               # no timestamps: age since creation
    (10, None, None, -1, None, 100, False),            # neither: never by time
])
def test_time_to_roll(size, rolling, created, batch_ts, now, segment_ms, roll):
    assert time_to_roll(size, rolling, created, batch_ts, now, segment_ms) is roll


# -- the log on disk --------------------------------------------------------------------------------
def fill(log, n, ts=1000, epoch=0):
    for i in range(n):
        log.append_as_leader(batch([b"x" * 80] * 4, ts=ts + i), leader_epoch=epoch)


def test_size_retention_keeps_the_log_near_the_limit_and_moves_the_start(tmp_path):
    cfg = LogConfig(segment_bytes=2000, retention=RetentionPolicy(-1, 5000))
    log = Log(tmp_path / "t-0", cfg)
    fill(log, 200)
    assert log.size_bytes > 50_000
    result = log.apply_retention(high_watermark=log.log_end_offset, now_ms=0)
    assert result.reasons == {"size": result.deleted_segments} and result.deleted_segments > 20
    assert 5000 <= log.size_bytes <= 5000 + 2000
    assert log.log_start_offset == log.segments[0].base_offset > 0
    got = read_all(log)
    assert [o for o, _ in got] == list(range(log.log_start_offset, log.log_end_offset))
    assert kafka_python_view(tmp_path / "t-0")[0][0] == log.log_start_offset
    start, end = log.log_start_offset, log.log_end_offset
    log.close()
    again = Log(tmp_path / "t-0", cfg, recovery_point=end)   # the start survives a reopen
    assert (again.log_start_offset, again.log_end_offset) == (start, end)


def test_time_retention_uses_the_largest_timestamp_and_the_hw(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=1500, retention=RetentionPolicy(DAY, -1)))
    fill(log, 40, ts=1000)                    # old records
    old_end = log.log_end_offset
    fill(log, 10, ts=10 * DAY)                # young ones, in later segments
    now = 10 * DAY + 100
    held = log.apply_retention(high_watermark=5, now_ms=now)
    assert held.deleted_segments == 0         # the first segment reaches past the HW
    result = log.apply_retention(high_watermark=log.log_end_offset, now_ms=now)
    assert result.reasons == {"time": result.deleted_segments}
    assert log.log_start_offset <= old_end and all(
        s.largest_timestamp >= 10 * DAY for s in log.segments[1:])


def test_everything_expired_rolls_first_and_keeps_one_empty_segment(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(retention=RetentionPolicy(1000, -1)))
    fill(log, 5, ts=0)
    end = log.log_end_offset
    result = log.apply_retention(high_watermark=end, now_ms=10_000)
    assert result.deleted_segments == 1 and result.log_start_offset == end
    assert [s.base_offset for s in log.segments] == [end] and log.size_bytes == 0
    assert read_all(log) == []
    fill(log, 1, ts=20_000)                   # appends continue at the old end
    assert read_all(log)[0][0] == end


def test_retention_truncates_the_epoch_cache_from_the_start(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=1000, retention=RetentionPolicy(-1, 0)))
    for epoch in range(4):
        fill(log, 5, epoch=epoch)
    keep_from = log.segments[-1].base_offset
    log.apply_retention(high_watermark=keep_from, now_ms=0)
    entries = log.epoch_cache.entries
    assert entries[0].start_offset == log.log_start_offset == keep_from
    assert entries[-1].epoch == 3


def test_segment_ms_rolls_on_append_by_record_time(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(segment_ms=1000))
    log.append_as_leader(batch([b"a"], ts=5000), leader_epoch=0)
    log.append_as_leader(batch([b"b"], ts=6000), leader_epoch=0)    # 1000 ms: not more
    assert len(log.segments) == 1
    log.append_as_leader(batch([b"c"], ts=6001), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_timestamps_of_a_reopened_segment_come_from_its_headers(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=500))
    for ts in (100, 300, 200, 900):
        log.append_as_leader(batch([b"y" * 200], ts=ts), leader_epoch=0)
    expected = [(s.rolling_timestamp, s.largest_timestamp) for s in log.segments]
    end = log.log_end_offset
    log.close()
    again = Log(tmp_path / "t-0", LogConfig(segment_bytes=500), recovery_point=end)
    assert [(s.rolling_timestamp, s.largest_timestamp) for s in again.segments] == expected
    assert expected[0] == (100, 100) and records.HEADER_SIZE > 0


@pytest.mark.parametrize("broker, topic", [
    ({"log.retention.ms": 5}, {"retention.ms": 5}),
    ({"log.retention.hours": 2}, {"retention.ms": 7_200_000}),
    ({"log.retention.minutes": 3, "log.retention.hours": 2}, {"retention.ms": 180_000}),
    ({"log.retention.ms": 7, "log.retention.minutes": 3}, {"retention.ms": 7}),
    ({"log.segment.bytes": 100, "log.roll.ms": 9, "log.retention.bytes": 1},
     {"segment.bytes": 100, "segment.ms": 9, "retention.bytes": 1}),
    ({"min.insync.replicas": 2, "message.max.bytes": 10},
     {"min.insync.replicas": 2, "max.message.bytes": 10}),
])
def test_kafkas_broker_names_become_topic_defaults(broker, topic):
    from replicas.replica_types import partition_configs, topic_defaults_from_broker_config
    defaults = topic_defaults_from_broker_config(broker)
    assert defaults == topic
    log_config, _ = partition_configs(None, defaults, 10_000)
    if "retention.ms" in topic:
        assert log_config.retention.retention_ms == topic["retention.ms"]
