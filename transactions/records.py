"""The `__transaction_state` records, byte for byte Kafka's, and the transactional id →
partition hash.

Rules (Kafka 3.8's core/src/main/resources/common/message/TransactionLog{Key,Value}.json,
written and read by TransactionLog.scala):
- Every key and value is an int16 version followed by the struct of that version.
- TransactionLogKey v0 (the only version; not flexible): `transactionalId:string`
  (int16 length + UTF-8). A key of any other version is an `UnknownKey`, which a loader
  skips (Kafka warns and goes on).
- TransactionLogValue, WRITTEN as v0 unless transaction.version >= 1 is finalized, then as
  v1 (TransactionVersion.transactionLogValueVersion; TransactionLog.valueToBytes):
  `producerId:int64, producerEpoch:int16,
  transactionTimeoutMs:int32, transactionStatus:int8, transactionPartitions:
  []{topic:string, partitionIds:[]int32} (nullable: int32 count, -1 = null),
  transactionLastUpdateTimestampMs:int64, transactionStartTimestampMs:int64`.
- READ as v0 or v1. v1 is the first flexible version (KIP-915): the same fields, but the
  array and string lengths are unsigned varints of length + 1 (0 = null), and the partitions
  struct and the value end with tagged fields (an unsigned varint count, then tag, size and
  bytes each). The value's tags are KIP-890's: 0 PreviousProducerId:int64, 1
  NextProducerId:int64, 2 ClientTransactionVersion:int16, 3 NextProducerEpoch:int16 (-1, -1,
  0, -1 when absent); other tags are skipped. Kafka writes only ClientTransactionVersion
  (a tag is written only when it is not its default). Any other version, a malformed or
  trailing byte raises RecordFormatError.
- Kafka writes a null partitions array for Empty and ignores the array when reading an Empty
  value; for the other states null reads as no partitions.
- A null value is a tombstone: the transactional id is deleted when the partition is
  replayed (Kafka writes them when a transactional id expires).
- `partition_for(transactional_id, n)` = Utils.abs(String.hashCode(transactional_id)) % n
  (TransactionStateManager.partitionFor): hashCode over UTF-16 code units, 32-bit two's
  complement, and Utils.abs(Integer.MIN_VALUE) = 0. It is the same function as
  coordinator/records.py's `partition_for` (tests/test_txn_records.py holds them equal): this
  room may import only replicas/, and the hash is not there.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_WRITE_VERSION = 0
VALUE_READ_VERSIONS = (0, 1)
FIRST_FLEXIBLE_VALUE_VERSION = 1

_I8, _I16, _I32, _I64 = (struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"),
                         struct.Struct(">q"))

Partitions = tuple[tuple[str, tuple[int, ...]], ...]


class RecordFormatError(ValueError):
    """Bytes that are not a record of a version this module reads."""


class TxnRecord(NamedTuple):
    """One key/value of `__transaction_state`; value None is a tombstone."""
    key: bytes
    value: bytes | None


@dataclass(frozen=True, slots=True)
class TransactionLogKey:
    transactional_id: str


@dataclass(frozen=True, slots=True)
class UnknownKey:
    version: int


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """TransactionLogValue's fields, as the schema names them."""
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int  # a TransactionState id (transactions/states.py)
    transaction_partitions: Partitions | None  # (topic, partition ids); None = null
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    client_transaction_version: int = 0      # v1 tag 2
    previous_producer_id: int = -1           # v1 tag 0
    next_producer_id: int = -1               # v1 tag 1
    next_producer_epoch: int = -1            # v1 tag 3


# -- primitives ---------------------------------------------------------------------------
class _Writer:
    def __init__(self, version: int, flexible: bool = False):
        self.parts = [_I16.pack(version)]
        self.flexible = flexible

    def fixed(self, fmt: struct.Struct, v: int) -> None:
        self.parts.append(fmt.pack(v))

    def uvarint(self, n: int) -> None:
        out = bytearray()
        while n >= 0x80:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        out.append(n)
        self.parts.append(bytes(out))

    def length(self, n: int | None) -> None:
        """An array's count: int32 (-1 null), or flexible uvarint count + 1 (0 null)."""
        if self.flexible:
            self.uvarint(0 if n is None else n + 1)
        else:
            self.fixed(_I32, -1 if n is None else n)

    def string(self, s: str) -> None:
        data = s.encode("utf-8")
        if self.flexible:
            self.uvarint(len(data) + 1)
        else:
            if len(data) > 0x7FFF:
                raise RecordFormatError(f"string of {len(data)} bytes does not fit an int16 length")
            self.fixed(_I16, len(data))
        self.parts.append(data)

    def no_tagged_fields(self) -> None:
        if self.flexible:
            self.uvarint(0)

    def tagged_fields(self, fields: list[tuple[int, bytes]]) -> None:
        """(tag, bytes) in tag order."""
        self.uvarint(len(fields))
        for tag, data in fields:
            self.uvarint(tag)
            self.uvarint(len(data))
            self.parts.append(data)

    def done(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = bytes(data), 0
        self.flexible = False

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError(f"truncated record: need {n} bytes at {self.pos} "
                                    f"of {len(self.data)}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def fixed(self, fmt: struct.Struct) -> int:
        return fmt.unpack(self._take(fmt.size))[0]

    def uvarint(self) -> int:
        n = shift = 0
        while True:
            byte = self._take(1)[0]
            n |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return n
            shift += 7
            if shift > 28:
                raise RecordFormatError("unsigned varint longer than 5 bytes")

    def length(self) -> int | None:
        n = self.uvarint() - 1 if self.flexible else self.fixed(_I32)
        if n == -1:
            return None
        if n < 0:
            raise RecordFormatError(f"bad array length {n}")
        return n

    def string(self) -> str:
        n = self.uvarint() - 1 if self.flexible else self.fixed(_I16)
        if n < 0:
            raise RecordFormatError(f"bad or null length {n} of a non-nullable string")
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"string is not UTF-8: {exc}") from None

    def skip_tagged_fields(self) -> None:
        self.tagged_fields()

    def tagged_fields(self) -> dict[int, bytes]:
        """tag → bytes (nothing when not flexible)."""
        out: dict[int, bytes] = {}
        if self.flexible:
            for _ in range(self.uvarint()):
                tag = self.uvarint()
                out[tag] = self._take(self.uvarint())
        return out

    def end(self) -> None:
        if self.pos != len(self.data):
            raise RecordFormatError(f"{len(self.data) - self.pos} trailing bytes")


# -- keys ---------------------------------------------------------------------------------
def encode_key(transactional_id: str) -> bytes:
    w = _Writer(KEY_VERSION)
    w.string(transactional_id)
    return w.done()


def decode_key(data: bytes) -> TransactionLogKey | UnknownKey:
    r = _Reader(data)
    version = r.fixed(_I16)
    if version != KEY_VERSION:
        return UnknownKey(version)
    key = TransactionLogKey(r.string())
    r.end()
    return key


# -- values -------------------------------------------------------------------------------
def encode_value(v: TransactionLogValue, version: int = VALUE_WRITE_VERSION) -> bytes:
    """The value's bytes at `version` (0, or 1 with its tagged fields)."""
    if version not in VALUE_READ_VERSIONS:
        raise RecordFormatError(f"unknown transaction log value version {version}")
    w = _Writer(version, flexible=version >= FIRST_FLEXIBLE_VALUE_VERSION)
    w.fixed(_I64, v.producer_id)
    w.fixed(_I16, v.producer_epoch)
    w.fixed(_I32, v.transaction_timeout_ms)
    w.fixed(_I8, v.transaction_status)
    parts = v.transaction_partitions
    w.length(None if parts is None else len(parts))
    for topic, ids in parts or ():
        w.string(topic)
        w.length(len(ids))
        for i in ids:
            w.fixed(_I32, i)
        w.no_tagged_fields()
    w.fixed(_I64, v.transaction_last_update_timestamp_ms)
    w.fixed(_I64, v.transaction_start_timestamp_ms)
    if w.flexible:
        w.tagged_fields([(tag, fmt.pack(value)) for tag, fmt, value, default in (
            (0, _I64, v.previous_producer_id, -1), (1, _I64, v.next_producer_id, -1),
            (2, _I16, v.client_transaction_version, 0), (3, _I16, v.next_producer_epoch, -1))
            if value != default])
    return w.done()


def decode_value(data: bytes) -> TransactionLogValue:
    r = _Reader(data)
    version = r.fixed(_I16)
    if version not in VALUE_READ_VERSIONS:
        raise RecordFormatError(f"unknown transaction log value version {version}")
    r.flexible = version >= FIRST_FLEXIBLE_VALUE_VERSION
    producer_id = r.fixed(_I64)
    epoch = r.fixed(_I16)
    timeout = r.fixed(_I32)
    status = r.fixed(_I8)
    count = r.length()
    parts = None
    if count is not None:
        out = []
        for _ in range(count):
            topic = r.string()
            n = r.length()
            if n is None:
                raise RecordFormatError("null partition ids")
            out.append((topic, tuple(r.fixed(_I32) for _ in range(n))))
            r.skip_tagged_fields()
        parts = tuple(out)
    last_update = r.fixed(_I64)
    start = r.fixed(_I64)
    tags = r.tagged_fields()
    r.end()

    def tag(n: int, fmt: struct.Struct, default: int) -> int:
        if n not in tags:
            return default
        if len(tags[n]) != fmt.size:
            raise RecordFormatError(f"tagged field {n} of {len(tags[n])} bytes")
        return fmt.unpack(tags[n])[0]

    return TransactionLogValue(producer_id, epoch, timeout, status, parts, last_update, start,
                               tag(2, _I16, 0), tag(0, _I64, -1), tag(1, _I64, -1),
                               tag(3, _I16, -1))


def transaction_record(transactional_id: str, value: TransactionLogValue | None,
                       version: int = VALUE_WRITE_VERSION) -> TxnRecord:
    return TxnRecord(encode_key(transactional_id),
                     None if value is None else encode_value(value, version))


# -- partitioning -------------------------------------------------------------------------
def java_string_hash(s: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, wrapped to a signed 32-bit int."""
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def java_abs(n: int) -> int:
    """Kafka's Utils.abs: abs(Integer.MIN_VALUE) is 0, not MIN_VALUE."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(key: str, partitions: int = 50) -> int:
    """The partition of a transactional id (of `__transaction_state`) or of a group id (of
    `__consumer_offsets`): Kafka computes both the same way."""
    return java_abs(java_string_hash(key)) % partitions
