"""The `.timeindex` (replicas/time_index.py) in Kafka's format: what appends, rolls,
truncation and recovery write, and ListOffsets by time against a naive reference."""

import struct
from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st

from replicas import offsets, records
from replicas.log import Log, LogConfig
from tests.test_log import batch

pytestmark = pytest.mark.unit
SMALL = LogConfig(segment_bytes=2000, index_interval_bytes=150)


def file_entries(segment):
    raw = segment.time_index.path.read_bytes()
    assert len(raw) % 12 == 0
    return [(ts, segment.base_offset + rel) for ts, rel in struct.iter_unpack(">qi", raw)]


def all_records(log):
    return records.decode_records(b"".join(log.iter_reads(log.log_start_offset)))


def fill(log, timestamps):
    for ts in timestamps:
        log.append_as_leader(batch([b"r" * 30, b"s" * 30], ts=ts), leader_epoch=0)


def check_index(log):
    """Every entry (t, o): t strictly increases; the batch holding o carries t as its max
    timestamp; every record before that batch is older than t."""
    recs = all_records(log)
    for segment in log.segments:
        entries = file_entries(segment)
        assert entries == segment.time_index.entries()
        assert [t for t, _ in entries] == sorted({t for t, _ in entries})
        for t, o in entries:
            holder = [r for r in recs if r.offset == o][0]
            assert holder.timestamp_ms <= t
            assert all(r.timestamp_ms < t for r in recs if r.offset < o - 1)


def test_entries_follow_the_offset_index_and_a_roll_adds_the_last(tmp_path):
    log = Log(tmp_path / "t-0", SMALL)
    fill(log, [1000 + 10 * i for i in range(60)])
    assert len(log.segments) > 2
    check_index(log)
    for segment in log.segments[:-1]:            # rolled: the last entry is the maximum
        assert file_entries(segment)[-1][0] == segment.max_timestamp
    assert sum(len(file_entries(s)) for s in log.segments) > len(log.segments)


def test_reopen_trusts_a_sane_file_and_rebuilds_a_torn_one(tmp_path):
    log = Log(tmp_path / "t-0", SMALL)
    fill(log, [5000 - 7 * i if i % 3 else 5000 + i for i in range(60)])
    before = [file_entries(s) for s in log.segments]
    end = log.log_end_offset
    log.close()
    opened = Log(tmp_path / "t-0", SMALL, recovery_point=end)
    assert [s.time_index.entries() for s in opened.segments] == before
    opened.close()
    with open(opened.segments[0].time_index.path, "ab") as f:       # a torn entry
        f.write(b"\x00" * 5)
    again = Log(tmp_path / "t-0", SMALL, recovery_point=end)
    assert [s.time_index.entries() for s in again.segments] == before
    assert [file_entries(s) for s in again.segments] == before


def test_truncation_drops_entries_past_the_new_end(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(index_interval_bytes=100))
    fill(log, [1000 + i for i in range(30)])
    log.truncate_to(21)
    assert all(o < 21 for _, o in file_entries(log.segments[0]))
    fill(log, [500])                                      # older than what is kept
    check_index(log)


def naive_first_at_or_after(recs, t, start, hw):
    return next(((r.offset, r.timestamp_ms) for r in recs
                 if start <= r.offset < hw and r.timestamp_ms >= t), (-1, -1))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2000), min_size=1, max_size=60), st.integers(0, 2100),
       st.integers(10, 400), st.floats(0, 1))
def test_list_offsets_by_time_matches_a_naive_search(tmp_path_factory, stamps, t, interval,
                                                     deleted):
    """Also after DeleteRecords moved the log start into a segment: the records below it are
    still on disk, and never an answer."""
    log = Log(tmp_path_factory.mktemp("ti") / "t-0",
              LogConfig(segment_bytes=1500, index_interval_bytes=interval))
    fill(log, stamps)
    recs = all_records(log)
    hw = log.log_end_offset
    log.delete_records_before(int(deleted * hw))
    part = SimpleNamespace(log=log, state=SimpleNamespace(leader_epoch=0, is_leader=True,
                                                          high_watermark=hw))
    got = offsets.list_offset(part, t)
    assert (got.offset, got.timestamp) == \
        naive_first_at_or_after(recs, t, log.log_start_offset, hw)
    log.close()
