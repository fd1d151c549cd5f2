"""Control batches: the end-transaction markers a transaction coordinator writes (Kafka's
EndTransactionMarker, ControlRecordType, MemoryRecords.withEndTransactionMarker).

Rules (Kafka 3.8 clients/.../record/EndTransactionMarker.java, ControlRecordType.java,
MemoryRecords.java, DefaultRecordBatch.java, DefaultRecord.java):
- Attributes bit 4 (0x10) marks a transactional batch, bit 5 (0x20) a control batch. A
  marker batch has both, no compression, CREATE_TIME, the producer's id and epoch, base
  sequence -1, and exactly one record (offset delta 0, timestamp delta 0, no headers) whose
  key is int16 version 0 + int16 type (ABORT 0, COMMIT 1) and whose value is int16 version
  0 + int32 coordinator epoch. Base and max timestamp are the timestamp given. 78 bytes.
- Reading a control batch's type reads its FIRST record's key only (the one record a broker
  ever decodes on the append path). A control batch without records (what a cleaner leaves
  of a transaction it removed) has no type: None. Unknown type ids read as UNKNOWN (-1),
  as Kafka's ControlRecordType.fromTypeId; a key shorter than 4 bytes or of a negative
  version is CorruptRecord (Kafka's InvalidRecordException). Control batches are never
  compressed in practice; a codec in the attributes is honoured by decoding through the
  record codec.
- Building and parsing go through no third-party code: the tests check both against
  kafka-python's and aiokafka's decoders.
"""

from __future__ import annotations

import struct

from aiokafka.record.default_records import DefaultRecordBatch

from replicas import records
from replicas.errors import CorruptRecord

TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
CODEC_MASK = 0x07

ABORT, COMMIT, UNKNOWN = 0, 1, -1
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
CONTROL_KEY = struct.Struct(">hh")
END_TXN_VALUE = struct.Struct(">hi")


def is_control(attributes: int) -> bool:
    return bool(attributes & CONTROL_FLAG)


def is_transactional(attributes: int) -> bool:
    return bool(attributes & TRANSACTIONAL_FLAG)


def _varint(value: int) -> bytes:
    """Zig-zag varint (Kafka's ByteUtils.writeVarint / writeVarlong)."""
    v = (value << 1) ^ (value >> 63)
    out = bytearray()
    while v & ~0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _read_varint(buf, position: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if position >= len(buf) or shift > 63:
            raise CorruptRecord("truncated or overlong varint in a control record")
        b = buf[position]
        position += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    return (result >> 1) ^ -(result & 1), position


def end_txn_marker_batch(producer_id: int, producer_epoch: int, control_type: int,
                         coordinator_epoch: int, timestamp_ms: int, base_offset: int = 0,
                         partition_leader_epoch: int = records.NO_PARTITION_LEADER_EPOCH
                         ) -> bytearray:
    """One end-transaction marker batch, byte for byte as Kafka writes it."""
    if control_type not in (ABORT, COMMIT):
        raise ValueError(f"an end-transaction marker is ABORT or COMMIT, not {control_type}")
    key = CONTROL_KEY.pack(CONTROL_KEY_VERSION, control_type)
    value = END_TXN_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)
    body = (b"\x00" + _varint(0) + _varint(0) + _varint(len(key)) + key
            + _varint(len(value)) + value + _varint(0))
    record = _varint(len(body)) + body
    size = records.HEADER_SIZE + len(record)
    buf = bytearray(records.HEADER.pack(
        base_offset, size - records.LOG_OVERHEAD, partition_leader_epoch, records.MAGIC, 0,
        TRANSACTIONAL_FLAG | CONTROL_FLAG, 0, timestamp_ms, timestamp_ms, producer_id,
        producer_epoch, records.NO_SEQUENCE, 1)) + record
    records.reseal(buf)
    return buf


def _first_record_key_value(batch) -> tuple[bytes | None, bytes | None] | None:
    """Key and value of the first record of one whole batch; None when it has no record."""
    header = records.read_header(batch)
    if header.records_count == 0:
        return None
    if header.attributes & CODEC_MASK:
        for r in DefaultRecordBatch(bytes(batch[:header.size])):
            return r.key, r.value
        return None
    position = records.HEADER_SIZE
    _, position = _read_varint(batch, position)         # record length
    position += 1                                       # record attributes
    _, position = _read_varint(batch, position)         # timestamp delta
    _, position = _read_varint(batch, position)         # offset delta
    key_len, position = _read_varint(batch, position)
    key = bytes(batch[position:position + key_len]) if key_len >= 0 else None
    position += max(key_len, 0)
    value_len, position = _read_varint(batch, position)
    value = bytes(batch[position:position + value_len]) if value_len >= 0 else None
    if (key is not None and len(key) < key_len) or (value is not None and len(value) < value_len):
        raise CorruptRecord("control record runs past its batch")
    return key, value


def parse_control_key(key: bytes | None) -> int:
    """Kafka's ControlRecordType.parse: the type id of a control record key."""
    if key is None or len(key) < CONTROL_KEY.size:
        raise CorruptRecord(f"control record key of {0 if key is None else len(key)} bytes, "
                            f"at least {CONTROL_KEY.size} needed")
    version, type_id = CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecord(f"control record key version {version}: corrupt data")
    return type_id if type_id in (ABORT, COMMIT, 2, 3, 4, 5, 6) else UNKNOWN


def control_type(batch) -> int | None:
    """The control type of the control batch at the start of `batch` (bytes of one whole
    batch); None for a control batch without records."""
    kv = _first_record_key_value(batch)
    return None if kv is None else parse_control_key(kv[0])


def end_txn_marker(batch) -> tuple[int, int] | None:
    """(control type, coordinator epoch) of an end-transaction marker batch; None when the
    batch has no record. CorruptRecord if it is not an ABORT or COMMIT marker."""
    kv = _first_record_key_value(batch)
    if kv is None:
        return None
    kind = parse_control_key(kv[0])
    value = kv[1]
    if kind not in (ABORT, COMMIT):
        raise CorruptRecord(f"control type {kind} is not an end-transaction marker")
    if value is None or len(value) < END_TXN_VALUE.size:
        raise CorruptRecord("end-transaction marker value shorter than 6 bytes")
    version, coordinator_epoch = END_TXN_VALUE.unpack_from(value)
    if version < 0:
        raise CorruptRecord(f"end-transaction marker version {version}: corrupt data")
    return kind, coordinator_epoch
