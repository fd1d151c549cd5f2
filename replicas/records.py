"""Kafka RecordBatch v2 (magic 2) on the broker's hot path.

Rules (Kafka's record and log formats):
- A batch is a 61-byte header followed by its records. The header is
  BaseOffset i64, Length i32 (bytes after this field), PartitionLeaderEpoch i32,
  Magic i8 = 2, CRC u32, Attributes i16, LastOffsetDelta i32, BaseTimestamp i64,
  MaxTimestamp i64, ProducerId i64, ProducerEpoch i16, BaseSequence i32, RecordsCount i32.
- The CRC is CRC-32C over Attributes..end. It EXCLUDES BaseOffset, Length and the
  PartitionLeaderEpoch, so a broker assigns offsets and stamps the leader epoch by
  rewriting those header fields in place, never re-encoding or re-checksumming records.
- Brokers never decode single records: validation is header + CRC only (the one
  exception: the record of an end-transaction marker, replicas/control.py). Attributes
  bit 4 marks a transactional batch, bit 5 a control batch. Building and decoding records
  (producers, consumers, tests) go through aiokafka's C codec.
- Anything malformed raises CorruptRecord (Kafka code 2); a batch bigger than the
  configured maximum raises RecordTooLarge (10). Validation of a buffer is all-or-nothing:
  the caller appends only after every batch in it passed.
"""

from __future__ import annotations

import struct
from typing import Iterator, NamedTuple, Sequence

import crc32c
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from replicas.errors import CorruptRecord, RecordTooLarge

MAGIC = 2
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
assert HEADER_SIZE == 61
LOG_OVERHEAD = 12  # BaseOffset + Length: the bytes not counted by Length
LENGTH_OFFSET = 8
LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
TIMESTAMP_TYPE_FLAG = 0x08         # attributes bit 3: LogAppendTime
NO_PARTITION_LEADER_EPOCH = -1
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
_BASE_OFFSET = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_INT64 = struct.Struct(">q")
_MIN_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # a batch with no records at all


class BatchHeader(NamedTuple):
    """The decoded 61-byte header of one batch, plus where it sits in its buffer."""

    base_offset: int
    length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    position: int = 0

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies (header included)."""
        return self.length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


class Record(NamedTuple):
    """One decoded record (consumer side). A NamedTuple: consumers build millions."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def read_header(buf, position: int = 0) -> BatchHeader:
    """Decode the header at `position` without checking anything but its presence."""
    if len(buf) - position < HEADER_SIZE:
        raise CorruptRecord(f"truncated batch header at byte {position}")
    return BatchHeader(*HEADER.unpack_from(buf, position), position)


def check_header(header: BatchHeader, available: int, max_batch_bytes: int | None = None) -> None:
    """Structural checks on a header; `available` = bytes from its position to buffer end."""
    if header.magic != MAGIC:
        raise CorruptRecord(f"batch at byte {header.position}: magic {header.magic}, expected {MAGIC}")
    if header.length < _MIN_LENGTH:
        raise CorruptRecord(f"batch at byte {header.position}: length {header.length} too small")
    if max_batch_bytes is not None and header.size > max_batch_bytes:
        raise RecordTooLarge(
            f"batch at byte {header.position} is {header.size} bytes, max.message.bytes is {max_batch_bytes}")
    if header.size > available:
        raise CorruptRecord(
            f"batch at byte {header.position}: length {header.size} exceeds the {available} bytes present")
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise CorruptRecord(f"batch at byte {header.position}: negative offset delta or record count")


def crc_of(buf, position: int, size: int) -> int:
    return crc32c.crc32c(memoryview(buf)[position + ATTRIBUTES_OFFSET: position + size])


def reseal(buf: bytearray, position: int = 0) -> None:
    """Store a fresh CRC-32C for the batch at `position` after CRC-covered fields changed
    (the cleaner keeps a batch's last offset delta on a rebuilt batch)."""
    size = read_header(buf, position).size
    _UINT32.pack_into(buf, position + CRC_OFFSET, crc_of(buf, position, size))


def validate_batch(buf, position: int = 0, max_batch_bytes: int | None = None) -> BatchHeader:
    """Header checks plus CRC-32C; returns the header or raises CorruptRecord/RecordTooLarge."""
    header = read_header(buf, position)
    check_header(header, len(buf) - position, max_batch_bytes)
    actual = crc_of(buf, position, header.size)
    if actual != header.crc:
        raise CorruptRecord(
            f"batch at byte {position} (base offset {header.base_offset}): "
            f"CRC-32C {actual:#010x} != stored {header.crc:#010x}")
    return header


def validate_batches(buf, max_batch_bytes: int | None = None,
                     require_records: bool = True) -> list[BatchHeader]:
    """Validate every batch of a produce/replication buffer; all or nothing.

    With `require_records`, also enforce what a producer batch must satisfy for the
    broker to assign offsets from the header alone: RecordsCount ≥ 1 and
    LastOffsetDelta == RecordsCount - 1 (Kafka's LogValidator does the same for v2).
    """
    if len(buf) == 0:
        raise CorruptRecord("empty record set")
    headers = []
    position = 0
    end = len(buf)
    while position < end:
        header = validate_batch(buf, position, max_batch_bytes)
        if require_records and (header.records_count < 1
                                or header.last_offset_delta != header.records_count - 1):
            raise CorruptRecord(
                f"batch at byte {position}: {header.records_count} records but last offset delta "
                f"{header.last_offset_delta}")
        headers.append(header)
        position += header.size
    return headers


def iter_headers(buf, start: int = 0, end: int | None = None) -> Iterator[BatchHeader]:
    """Headers of the whole batches in buf[start:end]; stops at a partial tail, checks no CRC."""
    end = len(buf) if end is None else end
    position = start
    while end - position >= HEADER_SIZE:
        header = BatchHeader(*HEADER.unpack_from(buf, position), position)
        if header.length < _MIN_LENGTH or position + header.size > end:
            return
        yield header
        position += header.size


def set_base_offset(buf: bytearray | memoryview, position: int, base_offset: int) -> None:
    _BASE_OFFSET.pack_into(buf, position, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, position: int, epoch: int) -> None:
    _INT32.pack_into(buf, position + LEADER_EPOCH_OFFSET, epoch)


def assign_offsets(buf: bytearray, headers: Sequence[BatchHeader], first_offset: int,
                   leader_epoch: int) -> int:
    """Rewrite BaseOffset and PartitionLeaderEpoch of each batch in place.

    Returns the next offset after the last batch. CRCs stay valid by construction.
    """
    offset = first_offset
    for header in headers:
        _BASE_OFFSET.pack_into(buf, header.position, offset)
        _INT32.pack_into(buf, header.position + LEADER_EPOCH_OFFSET, leader_epoch)
        offset += header.last_offset_delta + 1
    return offset


def stamp_log_append_time(buf: bytearray, headers: Sequence[BatchHeader], now_ms: int
                          ) -> list[BatchHeader]:
    """Kafka's LogValidator for a LogAppendTime topic (v2): each batch's timestamp type
    becomes LogAppendTime and its MaxTimestamp the append time (readers take every record's
    timestamp from it); the records are left as sent and the CRC is sealed again. The
    headers as they are now."""
    out = []
    for h in headers:
        attributes = h.attributes | TIMESTAMP_TYPE_FLAG
        _INT16.pack_into(buf, h.position + ATTRIBUTES_OFFSET, attributes)
        _INT64.pack_into(buf, h.position + MAX_TIMESTAMP_OFFSET, now_ms)
        crc = crc_of(buf, h.position, h.size)
        _UINT32.pack_into(buf, h.position + CRC_OFFSET, crc)
        out.append(h._replace(attributes=attributes, max_timestamp=now_ms, crc=crc))
    return out


def build_batch(values: Sequence[bytes | None], keys: Sequence[bytes | None] | None = None,
                timestamps_ms: Sequence[int] | int | None = None,
                headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
                producer_id: int = NO_PRODUCER_ID, producer_epoch: int = -1,
                base_sequence: int = NO_SEQUENCE, base_offset: int = 0,
                partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                compression_type: int = 0, transactional: bool = False) -> bytearray:
    """Encode one RecordBatch v2 with aiokafka's codec (client side)."""
    if not values:
        raise ValueError("a batch needs at least one record")
    builder = DefaultRecordBatchBuilder(
        magic=MAGIC, compression_type=compression_type, is_transactional=int(transactional),
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        batch_size=1 << 62)
    if timestamps_ms is None or isinstance(timestamps_ms, int):
        if timestamps_ms is None:
            raise ValueError("timestamps_ms is required (the codec must not read the clock)")
        fixed = timestamps_ms
        for i, value in enumerate(values):
            builder.append(i, timestamp=fixed, key=keys[i] if keys else None, value=value,
                           headers=list(headers[i]) if headers else [])
    else:
        for i, value in enumerate(values):
            builder.append(i, timestamp=timestamps_ms[i], key=keys[i] if keys else None,
                           value=value, headers=list(headers[i]) if headers else [])
    buf = builder.build()
    if base_offset:
        set_base_offset(buf, 0, base_offset)
    if partition_leader_epoch != NO_PARTITION_LEADER_EPOCH:
        set_partition_leader_epoch(buf, 0, partition_leader_epoch)
    return buf


def decode_records(buf, start: int = 0, end: int | None = None,
                   min_offset: int = 0) -> list[Record]:
    """Decode the records of every whole batch in buf[start:end] with offset ≥ min_offset."""
    records: list[Record] = []
    view = memoryview(buf)
    for header in iter_headers(buf, start, end):
        if header.last_offset < min_offset:
            continue
        batch = DefaultRecordBatch(bytes(view[header.position: header.position + header.size]))
        if header.base_offset >= min_offset:
            records.extend([Record(r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
                            for r in batch])
        else:
            records.extend([Record(r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
                            for r in batch if r.offset >= min_offset])
    return records
