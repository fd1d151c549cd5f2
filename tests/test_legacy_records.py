"""replicas/legacy_records.py against independent codecs: message sets written by aiokafka's and
kafka-python's legacy builders are up-converted to RecordBatch v2 (read back by aiokafka's v2
reader), and v2 batches are down-converted to message sets read back by both libraries'
legacy readers. Also replicas/legacy_offsets.py (ListOffsets v0)."""

from __future__ import annotations

import struct
import zlib

import pytest
from aiokafka.record.legacy_records import LegacyRecordBatch as AioLegacyBatch
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder as AioLegacyBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder
from kafka.record.memory_records import MemoryRecords

from replicas import records
from replicas.control import COMMIT, end_txn_marker_batch
from replicas.errors import CorruptRecord, InvalidRecord
from replicas.legacy_offsets import offsets_before
from replicas.legacy_records import (build_message_set, decompress, down_convert,
                                     encode_message, magic_of, read_messages, up_convert)

pytestmark = pytest.mark.unit

TS = 1_700_000_000_000
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}


def aio_set(magic, codec, values, keys=None, ts=TS) -> bytes:
    builder = AioLegacyBuilder(magic=magic, compression_type=codec, batch_size=1 << 30)
    for i, value in enumerate(values):
        builder.append(i, timestamp=ts + i, key=keys[i] if keys else None, value=value)
    return bytes(builder.build())


def kp_set(magic, codec, values, keys=None, ts=TS) -> bytes:
    builder = KpLegacyBuilder(magic=magic, compression_type=codec, batch_size=1 << 30)
    for i, value in enumerate(values):
        builder.append(i, timestamp=ts + i, key=keys[i] if keys else None, value=value)
    return bytes(builder.build())


def kp_read(buf: bytes) -> list[tuple]:
    """(offset, timestamp, key, value) of every record of a message set, by kafka-python."""
    out, stream = [], MemoryRecords(buf)
    while stream.has_next():
        out += [(r.offset, r.timestamp, r.key, r.value) for r in stream.next_batch()]
    return out


def aio_read(buf: bytes, magic: int) -> list[tuple]:
    """The same by aiokafka, one shallow message at a time."""
    out, pos = [], 0
    while len(buf) - pos >= 12:
        (size,) = struct.unpack_from(">i", buf, pos + 8)
        if pos + 12 + size > len(buf):
            break
        out += [(r.offset, r.timestamp, r.key, r.value)
                for r in AioLegacyBatch(buf[pos:pos + 12 + size], magic)]
        pos += 12 + size
    return out


def v2_records(buf) -> list[tuple]:
    return [(r.offset, r.timestamp_ms, r.key, r.value) for r in records.decode_records(buf)]


VALUES = [b"v%d-" % i + b"payload" * (i + 1) for i in range(6)]
KEYS = [None if i % 2 else b"k%d" % i for i in range(6)]


# -- up-conversion ------------------------------------------------------------------------------
def own_set(magic, codec, values, keys=None, ts=TS) -> bytes:
    return build_message_set([(i, ts + i, keys[i] if keys else None, v)
                              for i, v in enumerate(values)], magic, codec)


# neither library writes lz4 at magic 0 without xxhash (KAFKA-3160's framing): rayka's own
# writer covers that one, and its frame is read back by decompress below
WRITERS = [(w, c, m) for w in (aio_set, kp_set) for c in CODECS for m in (0, 1)
           if (c, m) != ("lz4", 0)] + [(own_set, c, m) for c in CODECS for m in (0, 1)]


@pytest.mark.parametrize("writer,codec,magic", WRITERS)
def test_a_legacy_message_set_becomes_one_v2_batch(writer, codec, magic):
    legacy = writer(magic, CODECS[codec], VALUES, KEYS)
    assert magic_of(legacy) == magic
    batch = up_convert(legacy)
    (header,) = records.validate_batches(batch)
    assert (header.records_count, header.last_offset_delta) == (6, 5)
    assert header.attributes & 0x07 == CODECS[codec]             # the set's own codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (-1, -1, -1)
    assert not header.attributes & 0x30                          # not transactional, no control
    stamps = [TS + i for i in range(6)] if magic else [-1] * 6   # v0 has no timestamps
    assert v2_records(batch) == [(i, stamps[i], KEYS[i], VALUES[i]) for i in range(6)]
    assert header.max_timestamp == max(stamps)


def test_inner_records_of_a_log_append_time_wrapper_take_its_timestamp():
    legacy = build_message_set([(0, 5, b"a", b"1"), (1, 9, None, b"2")], 1, 1,
                               log_append_time=777)
    assert [(r[1], r[3]) for r in aio_read(legacy, 1)] == [(777, b"1"), (777, b"2")]
    assert [ts for _, ts, _, _ in v2_records(up_convert(legacy))] == [777, 777]


def test_a_partial_last_message_is_trimmed_and_nothing_whole_is_none():
    legacy = kp_set(1, 0, VALUES[:3])
    assert v2_records(up_convert(legacy[:-3])) == [(i, TS + i, None, VALUES[i]) for i in range(2)]
    assert up_convert(legacy[:11]) is None and up_convert(b"") is None
    assert read_messages(legacy[:-3]) == read_messages(legacy)[:2]


@pytest.mark.parametrize("case,error", [
    ("crc", CorruptRecord), ("short", CorruptRecord), ("magic", CorruptRecord),
    ("mixed magic", InvalidRecord), ("two wrappers", InvalidRecord),
    ("null wrapper", InvalidRecord), ("compressed inner", InvalidRecord),
    ("zstd wrapper", InvalidRecord), ("inner magic", InvalidRecord),
    ("empty wrapper", InvalidRecord), ("bad gzip", CorruptRecord)])
def test_what_kafka_refuses_is_refused(case, error):
    one = kp_set(1, 0, [b"x"])
    gz = kp_set(1, 1, [b"a", b"b"])
    if case == "crc":
        buf = one[:-1] + bytes([one[-1] ^ 1])
    elif case == "short":
        buf = struct.pack(">qi", 0, 13) + b"\x00" * 13
    elif case == "magic":
        buf = encode_message(0, 1, 0, 0, None, b"x")
        buf = buf[:16] + b"\x05" + buf[17:]
        buf = buf[:12] + struct.pack(">I", zlib.crc32(buf[16:])) + buf[16:]
    elif case == "mixed magic":
        buf = kp_set(0, 0, [b"x"]) + one
    elif case == "two wrappers":
        buf = gz + gz
    elif case == "null wrapper":
        buf = encode_message(0, 1, 1, TS, None, None)
    elif case == "compressed inner":
        buf = encode_message(1, 1, 1, TS, None, _gzip(gz))
    elif case == "zstd wrapper":
        buf = encode_message(1, 1, 4, TS, None, b"whatever")
    elif case == "inner magic":
        buf = encode_message(0, 1, 1, TS, None, _gzip(kp_set(0, 0, [b"x"])))
    elif case == "empty wrapper":
        buf = encode_message(0, 1, 1, TS, None, _gzip(b""))
    else:
        buf = encode_message(0, 1, 1, TS, None, b"not gzip at all")
    with pytest.raises(error):
        up_convert(buf)


def _gzip(data: bytes) -> bytes:
    from aiokafka.codec import gzip_encode
    return gzip_encode(data)


# -- down-conversion ----------------------------------------------------------------------------
def v2_log(*batches) -> bytes:
    """Batches placed one after the other from offset 10, as a leader's log would hold them."""
    out, offset = bytearray(), 10
    for b in batches:
        b = bytearray(b)
        records.set_base_offset(b, 0, offset)
        offset = records.read_header(b).next_offset
        out += b
    return bytes(out)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_v2_batches_down_convert_for_both_libraries(codec, magic):
    a = records.build_batch(VALUES[:3], keys=KEYS[:3], timestamps_ms=[TS, TS + 5, TS + 2],
                            compression_type=CODECS[codec])
    b = records.build_batch(VALUES[3:], timestamps_ms=TS + 9, compression_type=CODECS[codec])
    log = v2_log(a, b)
    got = down_convert(log, magic, 10)
    assert not got.unsupported and magic_of(got.records) == magic
    stamps = [TS, TS + 5, TS + 2, TS + 9, TS + 9, TS + 9]
    want = [(10 + i, stamps[i] if magic else None, (KEYS[:3] + [None] * 3)[i], VALUES[i])
            for i in range(6)]
    wrappers = read_messages(got.records)
    if codec == "lz4" and magic == 0:
        # Kafka's wrong lz4 header checksum (KAFKA-3160): kafka-python reads it only with
        # xxhash, aiokafka not at all; up-converting each wrapper back reads it
        back = [r for w in wrappers
                for r in v2_records(up_convert(encode_message(*w[:4], w.key, w.value)))]
        assert [(k, v) for _, _, k, v in back] == [(k, v) for _, _, k, v in want]
    else:
        # the cut at Kafka's size may leave out the later batch's records: a prefix, at least
        # the first batch whole
        kp, aio = kp_read(got.records), aio_read(got.records, magic)
        assert len(kp) >= 3 and kp == [(o, ts, k, v) for o, ts, k, v in want][:len(kp)]
        assert aio == want[:len(aio)] and len(aio) >= 3
    if CODECS[codec]:                              # one wrapper per batch, at its last offset
        assert [w.offset for w in wrappers] == [12, 15][:len(wrappers)]
        assert [w.timestamp for w in wrappers] == ([TS + 5, TS + 9] if magic else
                                                   [-1, -1])[:len(wrappers)]
    else:
        assert [w.offset for w in wrappers] == list(range(10, 10 + len(wrappers)))


def test_uncompressed_batches_start_at_the_fetch_offset_compressed_ones_keep_their_records():
    plain = v2_log(records.build_batch(VALUES[:4], timestamps_ms=TS))
    assert [r[0] for r in kp_read(down_convert(plain, 1, 12).records)] == [12, 13]
    zipped = v2_log(records.build_batch(VALUES[:4], timestamps_ms=TS, compression_type=1))
    assert [r[0] for r in kp_read(down_convert(zipped, 1, 12).records)] == [10, 11, 12, 13]


def test_control_batches_are_dropped_transactional_records_kept():
    data = records.build_batch([b"in-txn"], timestamps_ms=TS, producer_id=7, producer_epoch=0,
                               base_sequence=0, transactional=True)
    marker = end_txn_marker_batch(7, 0, COMMIT, 1, TS)
    after = records.build_batch([b"after"], timestamps_ms=TS)
    got = down_convert(v2_log(data, marker, after), 1, 10)
    assert [(o, v) for o, _, _, v in kp_read(got.records)] == [(10, b"in-txn"), (12, b"after")]
    assert down_convert(v2_log(marker), 1, 10).records == b""      # nothing an old client reads


def test_log_append_time_batches_stamp_every_record_and_keep_the_type():
    batch = records.build_batch([b"a", b"b"], timestamps_ms=[TS, TS + 1])
    batch[records.ATTRIBUTES_OFFSET + 1] |= 0x08          # LogAppendTime
    struct.pack_into(">q", batch, 35, TS + 500)           # max timestamp: the append time
    records.reseal(batch)
    got = down_convert(v2_log(batch), 1, 10)
    messages = read_messages(got.records)
    assert [(m.timestamp, m.log_append_time) for m in messages] == [(TS + 500, True)] * 2
    assert [r[1] for r in kp_read(got.records)] == [TS + 500] * 2


def test_zstd_stops_the_conversion():
    plain = records.build_batch([b"a"], timestamps_ms=TS)
    zstd = records.build_batch([b"b"], timestamps_ms=TS, compression_type=4)
    first = down_convert(v2_log(zstd, plain), 1, 10)
    assert first == (b"", True)                           # UNSUPPORTED_COMPRESSION_TYPE
    later = down_convert(v2_log(plain, zstd), 1, 10)
    assert later.unsupported and [r[3] for r in kp_read(later.records)] == [b"a"]


def test_the_answer_is_cut_at_kafkas_size_leaving_a_partial_message():
    # Uncompressed v1 messages cost more than v2 records: the answer holds the larger of the
    # v2 bytes fetched and the first converted batch (LazyDownConversionRecords)
    small = [records.build_batch([b"x"] * 50, timestamps_ms=TS) for _ in range(3)]
    log = v2_log(*small)
    got = down_convert(log, 1, 10)
    first = len(build_message_set([(10 + i, TS, None, b"x") for i in range(50)], 1))
    assert len(got.records) == max(len(log), first) < 3 * first
    whole = kp_read(got.records)
    assert [o for o, *_ in whole] == list(range(10, 10 + len(whole))) and len(whole) >= 50


# -- ListOffsets v0 -------------------------------------------------------------------------------
SEGMENTS = [(0, 1000), (100, 2000), (200, 3000)]          # (base offset, last modified)


@pytest.mark.parametrize("timestamp,max_num,want", [
    (-1, 1, (250,)), (-1, 10, (250, 200, 100, 0)), (-2, 1, (0,)), (-2, 5, (0,)),
    (2500, 10, (100, 0)), (2000, 1, (100,)), (999, 3, ()), (9999, 2, (250, 200))])
def test_legacy_offsets_are_segment_starts_before_a_time_newest_first(timestamp, max_num,
                                                                      want):
    assert offsets_before(SEGMENTS, 1, 0, 250, 250, 5000, timestamp, max_num, True) == want


def test_legacy_offsets_respect_the_log_start_and_the_high_watermark_for_consumers():
    # the log start is inside the first segment; the HW lags the log end
    assert offsets_before(SEGMENTS, 1, 40, 250, 220, 5000, -2, 1, True) == (40,)
    assert offsets_before(SEGMENTS, 1, 40, 250, 220, 5000, -1, 3, True) == (220, 200, 100)
    assert offsets_before(SEGMENTS, 1, 40, 250, 220, 5000, -1, 3, False) == (250, 200, 100)
    assert offsets_before(SEGMENTS, 0, 0, 200, 200, 5000, -1, 1, True) == (200,)   # empty active
