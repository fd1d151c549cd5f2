"""replicas/record_validation.py, pure, and through a leader append (replicas/log.py): Kafka's
LogValidator record checks with KIP-467 record errors."""

from __future__ import annotations

import pytest

from aiokafka.record.default_records import DefaultRecordBatch

from replicas import records
from replicas.cleaner import CleanerPolicy
from replicas.errors import ErrorCode, RecordValidationError
from replicas.log import Log, LogConfig
from replicas.record_validation import LONG_MAX, TimestampBounds, validate_records

pytestmark = pytest.mark.unit
NOW = 1_700_000_000_000


def check(buf, compacted=False, bounds=TimestampBounds(), now=NOW):
    validate_records(buf, list(records.iter_headers(buf)), "t-0", compacted, bounds,
                     lambda: now)


def test_nothing_to_check_passes_without_decoding():
    check(records.build_batch([b"a", b"b"], timestamps_ms=0))     # any timestamp, no key


def test_every_keyless_record_of_a_compacted_batch_is_named():
    buf = records.build_batch([b"a", b"b", b"c", b"d", b"e"],
                              keys=[None, b"k", None, None, None], timestamps_ms=NOW)
    with pytest.raises(RecordValidationError) as caught:
        check(buf, compacted=True)
    err = caught.value
    assert err.code == ErrorCode.INVALID_RECORD and err.name == "INVALID_RECORD"
    assert [i for i, _ in err.record_errors] == [0, 2, 3, 4]
    assert err.record_errors[0][1] == ("Compacted topic cannot accept message without key in "
                                       "topic partition t-0.")
    assert err.message.startswith("One or more records have been rejected due to 4 record "
                                  "errors in total, and only showing the first three errors "
                                  "at most: [RecordError(batchIndex=0, message='Compacted")
    assert err.message.count("RecordError(") == 3


@pytest.mark.parametrize("configs, ts, ok", [
    ({"difference_ms": 1000}, NOW - 1000, True),
    ({"difference_ms": 1000}, NOW - 1001, False),
    ({"difference_ms": 1000}, NOW + 1001, False),
    ({"difference_ms": 1000, "after_ms": 5000}, NOW + 4000, True),    # after overrides
    ({"before_ms": 10}, NOW - 11, False),
    ({"before_ms": 10}, NOW + 10**9, True),                           # no after bound
    ({"difference_ms": 0}, -1, True),                                 # no timestamp
])
def test_timestamp_bounds(configs, ts, ok):
    bounds = TimestampBounds.from_configs(**configs)
    buf = records.build_batch([b"a", b"b"], timestamps_ms=[NOW, ts])
    if ok:
        check(buf, bounds=bounds)
        return
    with pytest.raises(RecordValidationError) as caught:
        check(buf, bounds=bounds)
    err = caught.value
    assert err.code == ErrorCode.INVALID_TIMESTAMP
    assert err.message == "One or more records have been rejected due to invalid timestamp"
    ((index, message),) = err.record_errors
    assert index == 1 and message.startswith(f"Timestamp {ts} of message with offset 1 is "
                                             f"out of range. The timestamp should be within [")


def test_an_invalid_timestamp_makes_the_batch_invalid_timestamp_even_beside_a_missing_key():
    bounds = TimestampBounds(before_ms=10, after_ms=LONG_MAX)
    buf = records.build_batch([b"a", b"b"], keys=[None, b"k"], timestamps_ms=[NOW, 5])
    with pytest.raises(RecordValidationError) as caught:
        check(buf, compacted=True, bounds=bounds)
    assert caught.value.code == ErrorCode.INVALID_TIMESTAMP
    assert [i for i, _ in caught.value.record_errors] == [0, 1]


def test_the_first_bad_batch_fails_the_append_and_nothing_is_written(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(cleaner=CleanerPolicy(True),
                                          timestamps=TimestampBounds(60_000, 60_000)),
              wall_clock_ms=lambda: NOW)
    good = records.build_batch([b"a"], keys=[b"k"], timestamps_ms=NOW)
    bad = records.build_batch([b"b", b"c"], keys=[b"k", None], timestamps_ms=NOW)
    with pytest.raises(RecordValidationError) as caught:
        log.append_as_leader(bytes(good) + bytes(bad), leader_epoch=0)
    assert [i for i, _ in caught.value.record_errors] == [1]
    assert log.log_end_offset == 0
    log.append_as_leader(good, leader_epoch=0)
    assert log.log_end_offset == 1


def test_without_a_wall_clock_timestamps_are_not_checked(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(timestamps=TimestampBounds(1, 1)))
    log.append_as_leader(records.build_batch([b"a"], timestamps_ms=5), leader_epoch=0)
    assert log.log_end_offset == 1


# -- LogAppendTime topics (message.timestamp.type) ----------------------------------------------
def test_a_log_append_time_topic_stamps_each_batch_and_seals_its_crc(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(log_append_time=True), wall_clock_ms=lambda: 777_000)
    sent = records.build_batch([b"a", b"b"], timestamps_ms=[5, 6])
    info = log.append_as_leader(sent, 0)
    assert info.max_timestamp_ms == 777_000
    stored = bytes(log.read(0))
    (h,) = records.validate_batches(stored)                  # the CRC holds
    assert h.attributes & records.TIMESTAMP_TYPE_FLAG and h.max_timestamp == 777_000
    batch = DefaultRecordBatch(bytes(stored))
    assert batch.timestamp_type == 1
    assert [r.timestamp for r in batch] == [777_000, 777_000]   # readers take the append time


def test_create_time_bounds_do_not_apply_to_a_log_append_time_topic():
    late = records.build_batch([b"x"], timestamps_ms=[1])
    validate_records(late, records.validate_batches(late), "t-0", False,
                     TimestampBounds.from_configs(1000, LONG_MAX, LONG_MAX), lambda: 10**12,
                     topic_log_append_time=True)
    with pytest.raises(RecordValidationError):
        validate_records(late, records.validate_batches(late), "t-0", False,
                         TimestampBounds.from_configs(1000, LONG_MAX, LONG_MAX), lambda: 10**12)
