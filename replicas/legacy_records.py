"""Kafka message formats v0 and v1 (magic 0/1, "message sets"), and their conversion to and
from RecordBatch v2, as a Kafka 3.8 broker does for old producers and consumers.

Rules (Kafka's LegacyRecord.java, AbstractLegacyRecordBatch.java, LogValidator.java,
RecordsUtil.java, LazyDownConversionRecords.java, MemoryRecordsBuilder.java):
- A message is Offset i64, Size i32, then Size bytes: CRC u32 (CRC-32, not CRC-32C, over
  everything after it), Magic i8, Attributes i8 (bits 0-2 the codec: 1 gzip, 2 snappy, 3 lz4;
  bit 3, magic 1 only, LogAppendTime), Timestamp i64 (magic 1 only), Key and Value (i32
  length, -1 null). Uncompressed messages stand alone, one record each; a compressed
  message (a "wrapper") carries a whole inner message set, compressed, as its value: inner
  offsets are relative (0..n-1, the wrapper holding the last absolute offset) in magic 1,
  absolute in magic 0. gzip as Java writes it, snappy in xerial framing, lz4 as a frame
  (magic 0: with Kafka's wrong header checksum, KAFKA-3160, written and tolerated here);
  zstd exists only in v2.
- Reading a message set (`read_messages`) stops at a partial last message (Kafka trims it);
  a size below the minimum overhead (14 bytes v0, 22 v1), lengths running past the message,
  an unknown magic or a wrong CRC are CorruptRecord (CORRUPT_MESSAGE).
- Up-conversion (`up_convert`, LogValidator with log.message.format.version 3.0: every
  produce is stored as v2): a legacy message set becomes ONE RecordBatch v2 in the set's
  codec (the topic's compression.type applies after, as for any batch), records in order,
  offset deltas 0..n-1, no producer id, epoch or sequence, not transactional, no headers.
  Timestamps: magic 0 has none (-1, NO_TIMESTAMP); magic 1 keeps each record's, and an inner
  record of a LogAppendTime wrapper takes the wrapper's. Every message must have the first
  one's magic; a compressed set must be exactly one wrapper, with a non-null value, at least
  one inner message, inner messages uncompressed and of the wrapper's magic; zstd or an
  unknown codec in a wrapper is invalid: all InvalidRecord (INVALID_RECORD).
- Down-conversion (`down_convert`, for Fetch v0-1 to magic 0 and v2-3 to magic 1):
  control batches are dropped (v0/v1 have no transaction markers) and aborted transactional
  records are not (Fetch below v4 is read_uncommitted); an uncompressed v2 batch becomes one
  message per record at or after the fetch offset (librdkafka needs the records before it
  dropped); a compressed one becomes one wrapper of all its records in the same codec, inner
  offsets relative for magic 1 and absolute for magic 0, the wrapper's offset its last and
  its timestamp the batch's LogAppendTime or its largest record timestamp. LogAppendTime
  batches give every record the batch's max timestamp and keep the type bit (magic 1);
  headers are dropped. Conversion stops at the first zstd batch (Kafka cannot
  down-convert it): `unsupported` says so, and with nothing converted before it the fetch
  answers UNSUPPORTED_COMPRESSION_TYPE. The converted bytes are cut at Kafka's size
  (LazyDownConversionRecords: the larger of the v2 bytes fetched and the first converted
  batch), which may leave a partial last message, as Kafka's does; old clients skip it.
  Where Kafka would pad an empty result with an overflow message (only control batches
  fetched), nothing is returned: the consumer asks again.
- Pure: bytes in, bytes out; the v2 side goes through aiokafka's codec (replicas/records.py).
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

from aiokafka.codec import (gzip_decode, gzip_encode, lz4_decode, lz4_encode, snappy_decode,
                            snappy_encode)
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from replicas.errors import CorruptRecord, InvalidRecord
from replicas.records import NO_TIMESTAMP, iter_headers

__all__ = ["LegacyMessage", "DownConverted", "MAGIC_OFFSET", "magic_of", "read_messages",
           "encode_message", "build_message_set", "up_convert", "down_convert",
           "compress", "decompress"]

MAGIC_OFFSET = 16               # the magic byte, in a legacy message and in a v2 batch alike
LOG_OVERHEAD = 12               # Offset + Size
RECORD_OVERHEAD = {0: 14, 1: 22}
CODEC_MASK, TIMESTAMP_TYPE_BIT = 0x07, 0x08
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
CONTROL_FLAG = 0x20
_OFFSET_SIZE = struct.Struct(">qi")
_CRC_MAGIC_ATTRS = struct.Struct(">Ibb")
_I32, _I64 = struct.Struct(">i"), struct.Struct(">q")


class LegacyMessage(NamedTuple):
    offset: int
    magic: int
    attributes: int
    timestamp: int              # -1 for magic 0
    key: bytes | None
    value: bytes | None

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def log_append_time(self) -> bool:
        return self.magic > 0 and bool(self.attributes & TIMESTAMP_TYPE_BIT)


class DownConverted(NamedTuple):
    records: bytes
    unsupported: bool           # stopped at a zstd batch


def magic_of(buf) -> int | None:
    """The magic of the first entry of a record set (a legacy message or a v2 batch)."""
    return buf[MAGIC_OFFSET] if len(buf) > MAGIC_OFFSET else None


# -- reading ------------------------------------------------------------------------------------
def _bytes_at(buf, pos: int, end: int) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise CorruptRecord("message key or value length runs past the message")
    (length,) = _I32.unpack_from(buf, pos)
    pos += 4
    if length < 0:
        return None, pos
    if pos + length > end:
        raise CorruptRecord("message key or value runs past the message")
    return bytes(buf[pos:pos + length]), pos + length


def read_messages(buf) -> list[LegacyMessage]:
    """The whole messages of a v0/v1 message set, CRCs checked (see module rules)."""
    out, pos, total = [], 0, len(buf)
    while total - pos >= LOG_OVERHEAD:
        offset, size = _OFFSET_SIZE.unpack_from(buf, pos)
        if size < RECORD_OVERHEAD[0]:
            raise CorruptRecord(f"Record size is less than the minimum record overhead "
                                f"({RECORD_OVERHEAD[0]})")
        end = pos + LOG_OVERHEAD + size
        if end > total:
            break                                   # a partial last message: trimmed
        crc, magic, attributes = _CRC_MAGIC_ATTRS.unpack_from(buf, pos + LOG_OVERHEAD)
        if magic not in RECORD_OVERHEAD:
            raise CorruptRecord(f"message at offset {offset}: magic {magic}, expected 0 or 1")
        if size < RECORD_OVERHEAD[magic]:
            raise CorruptRecord(f"message at offset {offset}: {size} bytes is less than the "
                                f"minimum record overhead ({RECORD_OVERHEAD[magic]})")
        actual = zlib.crc32(memoryview(buf)[pos + MAGIC_OFFSET:end])
        if actual != crc:
            raise CorruptRecord(f"Record is corrupt (stored crc = {crc}, computed crc = {actual})")
        body = pos + MAGIC_OFFSET + 2
        timestamp = NO_TIMESTAMP
        if magic == 1:
            (timestamp,) = _I64.unpack_from(buf, body)
            body += 8
        key, body = _bytes_at(buf, body, end)
        value, body = _bytes_at(buf, body, end)
        out.append(LegacyMessage(offset, magic, attributes, timestamp, key, value))
        pos = end
    return out


# -- writing ------------------------------------------------------------------------------------
def encode_message(offset: int, magic: int, attributes: int, timestamp: int,
                   key: bytes | None, value: bytes | None) -> bytes:
    body = [struct.pack(">bb", magic, attributes)]
    if magic == 1:
        body.append(_I64.pack(timestamp))
    for field in (key, value):
        body += [_I32.pack(-1)] if field is None else [_I32.pack(len(field)), field]
    payload = b"".join(body)
    crc = zlib.crc32(payload)
    return _OFFSET_SIZE.pack(offset, len(payload) + 4) + struct.pack(">I", crc) + payload


def build_message_set(records, magic: int, codec: int = 0, log_append_time: int | None = None
                      ) -> bytes:
    """A message set of `records` ((offset, timestamp, key, value), offsets absolute): one
    message each, or one `codec` wrapper (Kafka's MemoryRecordsBuilder for magic 0/1).
    `log_append_time`: the LogAppendTime every record takes (None: CreateTime)."""
    lat = log_append_time is not None and magic == 1
    type_bit = TIMESTAMP_TYPE_BIT if lat else 0

    def stamp(ts: int) -> int:
        return log_append_time if log_append_time is not None else ts

    if codec == 0:
        return b"".join(encode_message(o, magic, type_bit, stamp(ts), k, v)
                        for o, ts, k, v in records)
    base = records[0][0]
    inner = b"".join(encode_message(o - base if magic == 1 else o, magic, type_bit, stamp(ts),
                                    k, v) for o, ts, k, v in records)
    wrapper_ts = log_append_time if lat else max((ts for _, ts, _, _ in records),
                                                 default=NO_TIMESTAMP)
    return encode_message(records[-1][0], magic, codec | type_bit,
                          wrapper_ts if magic == 1 else NO_TIMESTAMP, None,
                          compress(codec, inner, magic))


# -- codecs -------------------------------------------------------------------------------------
def compress(codec: int, data: bytes, magic: int) -> bytes:
    if codec == GZIP:
        return gzip_encode(data)
    if codec == SNAPPY:
        return snappy_encode(data)
    if codec == LZ4:
        framed = lz4_encode(data)
        return _kafka_lz4_frame(framed) if magic == 0 else framed
    raise InvalidRecord(f"codec {codec} cannot be used with magic {magic}")


def decompress(codec: int, data: bytes, magic: int) -> bytes:
    try:
        if codec == GZIP:
            return gzip_decode(data)
        if codec == SNAPPY:
            return snappy_decode(data)
        if codec == LZ4:
            return lz4_decode(_lz4_frame_fixed(data) if magic == 0 else data)
    except CorruptRecord:
        raise
    except Exception as exc:     # gzip's OSError, cramjam's DecompressionError, ...
        raise CorruptRecord(f"cannot decompress a codec {codec} message: {exc}") from exc
    raise InvalidRecord(f"Invalid wrapper compressionType found in legacy deep record "
                        f"iterator {magic}")


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _xxh32_short(data: bytes) -> int:
    """XXH32 (seed 0) of fewer than 16 bytes: all an LZ4 frame descriptor needs."""
    assert len(data) < 16
    h = (_P5 + len(data)) & _M32
    pos = 0
    while len(data) - pos >= 4:
        (word,) = struct.unpack_from("<I", data, pos)
        h = (h + word * _P3) & _M32
        h = (((h << 17) | (h >> 15)) & _M32) * _P4 & _M32
        pos += 4
    for byte in data[pos:]:
        h = (h + byte * _P5) & _M32
        h = (((h << 11) | (h >> 21)) & _M32) * _P1 & _M32
    h ^= h >> 15
    h = h * _P2 & _M32
    h ^= h >> 13
    h = h * _P3 & _M32
    return h ^ (h >> 16)


def _descriptor_end(frame: bytes) -> int:
    """Index of the header checksum byte of an LZ4 frame."""
    if len(frame) < 7:
        raise CorruptRecord("lz4 frame shorter than its header")
    flg = frame[4]
    return 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)


def _kafka_lz4_frame(frame: bytes) -> bytes:
    # magic 0 readers (Kafka 0.8/0.9) want no content size and the checksum Kafka wrote:
    # over the magic number too (KafkaLZ4BlockOutputStream, KAFKA-3160)
    frame = bytearray(frame)
    if frame[4] & 0x08:
        frame[4] &= ~0x08 & 0xFF
        del frame[6:14]
    hc = _descriptor_end(frame)
    frame[hc] = (_xxh32_short(bytes(frame[0:hc])) >> 8) & 0xFF
    return bytes(frame)


def _lz4_frame_fixed(frame: bytes) -> bytes:
    # Kafka ignores a magic 0 frame's header checksum (it may be the wrong one): make it right
    frame = bytearray(frame)
    hc = _descriptor_end(frame)
    frame[hc] = (_xxh32_short(bytes(frame[4:hc])) >> 8) & 0xFF
    return bytes(frame)


# -- up-conversion ------------------------------------------------------------------------------
def up_convert(buf) -> bytearray | None:
    """One RecordBatch v2 holding the records of a v0/v1 message set; None when it holds no
    whole message (Kafka appends nothing and answers no error)."""
    messages = read_messages(buf)
    if not messages:
        return None
    magic = messages[0].magic
    for m in messages:
        if m.magic != magic:
            raise InvalidRecord(f"Batch magic {m.magic} is not the same as the first batch's "
                                f"magic byte {magic}")
    codec = next((m.codec for m in messages if m.codec), 0)
    if codec:
        if len(messages) > 1:
            raise InvalidRecord("Compressed outer record has more than one batch")
        records = _inner_records(messages[0])
    else:
        records = [(m.timestamp, m.key, m.value) for m in messages]
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=0, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 62)
    for delta, (timestamp, key, value) in enumerate(records):
        builder.append(delta, timestamp=timestamp, key=key, value=value, headers=[])
    return builder.build()


def _inner_records(wrapper: LegacyMessage) -> list[tuple[int, bytes | None, bytes | None]]:
    magic = wrapper.magic
    if wrapper.codec not in (GZIP, SNAPPY, LZ4):
        raise InvalidRecord(f"Invalid wrapper compressionType found in legacy deep record "
                            f"iterator {magic}")
    if wrapper.value is None:
        raise InvalidRecord(f"Found invalid compressed record set with null value "
                            f"(magic = {magic})")
    inner = read_messages(decompress(wrapper.codec, wrapper.value, magic))
    if not inner:
        raise InvalidRecord("Found invalid compressed record set with no inner records")
    out = []
    for m in inner:
        if m.magic != magic:
            raise InvalidRecord(f"Compressed message magic {m.magic} does not equal wrapper "
                                f"magic {magic}")
        if m.codec:
            raise InvalidRecord("Compressed outer record should not have an inner record "
                                "with a compression attribute set")
        out.append((wrapper.timestamp if wrapper.log_append_time else m.timestamp,
                    m.key, m.value))
    return out


# -- down-conversion ----------------------------------------------------------------------------
def down_convert(buf, to_magic: int, first_offset: int) -> DownConverted:
    """The v2 batches of a fetch answer as a magic `to_magic` message set (module rules)."""
    out: list[bytes] = []
    first_size = 0
    unsupported = False
    view = memoryview(buf)
    for h in iter_headers(buf):
        if h.attributes & CONTROL_FLAG:
            continue
        codec = h.attributes & CODEC_MASK
        if codec == ZSTD:
            unsupported = True
            break
        batch = DefaultRecordBatch(bytes(view[h.position:h.position + h.size]))
        kept = [(r.offset, r.timestamp, r.key, r.value) for r in batch
                if codec or r.offset >= first_offset]
        if not kept:
            continue
        lat = h.max_timestamp if h.attributes & TIMESTAMP_TYPE_BIT else None
        converted = build_message_set(kept, to_magic, codec, lat)
        if not out:
            first_size = len(converted)
        out.append(converted)
    data = b"".join(out)
    return DownConverted(data[:max(len(buf), first_size)], unsupported)
