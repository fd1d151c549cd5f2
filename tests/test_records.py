"""RecordBatch v2 helpers, checked against kafka-python's independent parser."""

import pytest
from hypothesis import given, settings, strategies as st
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatch as KPBatch

from replicas import records
from replicas.errors import CorruptRecord, RecordTooLarge

pytestmark = pytest.mark.unit


def kp_batches(buf):
    parsed = MemoryRecords(bytes(buf))
    out = []
    while parsed.has_next():
        out.append(parsed.next_batch())
    return out


def test_built_batch_parses_with_kafka_python():
    buf = records.build_batch([b"a", b"bb", None], keys=[b"k1", None, b"k3"],
                              timestamps_ms=[1000, 1001, 1005],
                              headers=[[("h", b"1")], [], []],
                              producer_id=7, producer_epoch=1, base_sequence=40)
    (batch,) = kp_batches(buf)
    assert batch.validate_crc()
    assert batch.magic == 2
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 1, 40)
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert got == [(0, 1000, b"k1", b"a", [("h", b"1")]), (1, 1001, None, b"bb", []),
                   (2, 1005, b"k3", None, [])]


@given(first=st.integers(0, 2**40), epoch=st.integers(0, 2**31 - 1), n=st.integers(1, 50))
@settings(max_examples=50, deadline=None)
def test_assign_offsets_keeps_crc_valid_without_reencoding(first, epoch, n):
    buf = records.build_batch([b"v%d" % i for i in range(n)], timestamps_ms=5)
    original_records = bytes(buf[records.HEADER_SIZE:])
    headers = records.validate_batches(buf)
    nxt = records.assign_offsets(buf, headers, first, epoch)
    assert nxt == first + n
    assert bytes(buf[records.HEADER_SIZE:]) == original_records
    (batch,) = kp_batches(buf)
    assert batch.validate_crc()
    assert batch.base_offset == first and batch.leader_epoch == epoch
    assert [r.offset for r in batch] == list(range(first, first + n))
    assert records.validate_batch(buf).crc == batch.crc


def test_several_batches_in_one_buffer_are_all_validated():
    buf = records.build_batch([b"x"] * 3, timestamps_ms=1) + records.build_batch([b"y"] * 2, timestamps_ms=1)
    headers = records.validate_batches(buf)
    assert [h.records_count for h in headers] == [3, 2]
    records.assign_offsets(buf, headers, 10, 4)
    assert [b.base_offset for b in kp_batches(buf)] == [10, 13]


@given(data=st.data())
@settings(max_examples=200, deadline=None)
def test_any_flipped_byte_in_crc_range_is_detected(data):
    buf = records.build_batch([b"payload-%d" % i for i in range(5)], keys=[b"k"] * 5, timestamps_ms=9)
    pos = data.draw(st.integers(records.ATTRIBUTES_OFFSET, len(buf) - 1))
    bit = data.draw(st.integers(0, 7))
    buf[pos] ^= 1 << bit
    with pytest.raises(CorruptRecord):
        records.validate_batches(buf)


@pytest.mark.parametrize("pos, value, words", [
    (records.MAGIC_OFFSET, 1, "magic"),
    (records.CRC_OFFSET, 0, "CRC"),
    (records.LENGTH_OFFSET + 3, 5, "too small"),
    (records.LENGTH_OFFSET + 1, 0x7F, "exceeds"),
])
def test_header_damage_is_named(pos, value, words):
    buf = records.build_batch([b"v"] * 3, timestamps_ms=1)
    buf[pos] = value
    with pytest.raises(CorruptRecord, match=words):
        records.validate_batches(buf)


def test_one_bad_batch_rejects_the_whole_buffer():
    good = records.build_batch([b"ok"], timestamps_ms=1)
    bad = records.build_batch([b"bad"], timestamps_ms=1)
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecord):
        records.validate_batches(good + bad)


def test_truncated_and_empty_buffers():
    buf = records.build_batch([b"v"] * 3, timestamps_ms=1)
    with pytest.raises(CorruptRecord):
        records.validate_batches(buf[:-1])
    with pytest.raises(CorruptRecord):
        records.validate_batches(buf[:30])
    with pytest.raises(CorruptRecord, match="empty"):
        records.validate_batches(b"")


def test_batch_larger_than_max_message_bytes():
    buf = records.build_batch([b"x" * 2000], timestamps_ms=1)
    with pytest.raises(RecordTooLarge) as info:
        records.validate_batches(buf, max_batch_bytes=1000)
    assert info.value.code == 10


def test_decode_records_round_trip_and_min_offset():
    buf = records.build_batch([b"a", b"b", b"c"], timestamps_ms=[1, 2, 3], base_offset=100)
    got = records.decode_records(buf, min_offset=101)
    assert [(r.offset, r.value, r.timestamp_ms) for r in got] == [(101, b"b", 2), (102, b"c", 3)]
    assert KPBatch(bytes(buf)).base_offset == 100
