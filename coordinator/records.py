"""The `__consumer_offsets` records, byte for byte Kafka's, and the group → partition hash.

Rules (Kafka's group-coordinator/src/main/resources/common/message/*.json, read at trunk
1eb7644; GroupMetadataManager.scala writes the versions below):
- Every key and value is an int16 version followed by the struct of that version, in Kafka's
  non-flexible encoding: int16/int32/int64 big-endian; string = int16 length + UTF-8 (a
  nullable string is length -1 for null); bytes = int32 length + raw; array = int32 count.
- Keys: version 0 or 1 = OffsetCommitKey `group, topic, partition:int32` (written as v1);
  version 2 = GroupMetadataKey `group`. Any other version is an UnknownKey, which a loader
  skips (Kafka warns and goes on).
- OffsetCommitValue, written as v3: `offset:int64, leaderEpoch:int32, metadata:string,
  commitTimestamp:int64`. Read: v0/v2 `offset, metadata, commitTimestamp`; v1 adds
  `expireTimestamp:int64` at the end; v3 inserts leaderEpoch after offset (-1 = none).
- GroupMetadataValue, written as v3: `protocolType:string, generation:int32, protocol:string?,
  leader:string?, currentStateTimestamp:int64, members[memberId, groupInstanceId?, clientId,
  clientHost, rebalanceTimeout:int32, sessionTimeout:int32, subscription:bytes,
  assignment:bytes]`. Read: v0 lacks rebalanceTimeout (it then equals the session timeout),
  currentStateTimestamp (-1) and groupInstanceId (null); v1 adds rebalanceTimeout; v2 adds
  currentStateTimestamp; v3 adds groupInstanceId.
- v4 (flexible, KIP-915) is not written by Kafka until a tagged field exists; reading it
  raises RecordFormatError, as does any malformed or trailing byte.
- A null value is a tombstone: the key is deleted when the partition is replayed.
- A TxnOffsetCommit's records are one transactional batch of its producer id and epoch; a
  control batch (`TxnMarkerRecord`) later in the log commits or aborts that producer's
  records before it (GroupMetadataManager.scala doLoadGroupsAndOffsets).
- `partition_for(group_id, n)` = Utils.abs(String.hashCode(group_id)) % n, where hashCode runs
  over UTF-16 code units (s[0]*31^(k-1) + ... in 32-bit two's complement) and
  Utils.abs(Integer.MIN_VALUE) = 0.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple

OFFSETS_TOPIC = "__consumer_offsets"
OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3
NO_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


class RecordFormatError(ValueError):
    """Bytes that are not a record of a version this module reads."""


class OffsetsRecord(NamedTuple):
    """One key/value of `__consumer_offsets`; value None is a tombstone. Read from the log it
    also says its batch's producer id, whether that batch is transactional (a TxnOffsetCommit's:
    pending until its producer's marker) and its own log offset (-1: not given)."""
    key: bytes
    value: bytes | None
    producer_id: int = -1
    transactional: bool = False
    offset: int = -1


class TxnMarkerRecord(NamedTuple):
    """A control batch of `__consumer_offsets`: producer `producer_id`'s COMMIT (committed)
    or ABORT marker, at log offset `offset`."""
    producer_id: int
    committed: bool
    offset: int = -1


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class UnknownKey:
    version: int


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    commit_timestamp: int = 0
    expire_timestamp: int = NO_TIMESTAMP  # only ever read (v1); never written


@dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = NO_TIMESTAMP
    members: tuple[MemberRecord, ...] = ()


# -- primitives ---------------------------------------------------------------------------
class _Writer:
    def __init__(self, version: int):
        self.parts = [_I16.pack(version)]

    def i16(self, v: int) -> None:
        self.parts.append(_I16.pack(v))

    def i32(self, v: int) -> None:
        self.parts.append(_I32.pack(v))

    def i64(self, v: int) -> None:
        self.parts.append(_I64.pack(v))

    def string(self, s: str | None, nullable: bool = False) -> None:
        if s is None:
            if not nullable:
                raise RecordFormatError("null in a non-nullable string field")
            self.i16(-1)
            return
        data = s.encode("utf-8")
        if len(data) > 0x7FFF:
            raise RecordFormatError(f"string of {len(data)} bytes does not fit an int16 length")
        self.i16(len(data))
        self.parts.append(data)

    def bytes_(self, b: bytes) -> None:
        self.i32(len(b))
        self.parts.append(bytes(b))

    def done(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = bytes(data), 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError(f"truncated record: need {n} bytes at {self.pos} of {len(self.data)}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def string(self, nullable: bool = False) -> str | None:
        n = self.i16()
        if n == -1 and nullable:
            return None
        if n < 0:
            raise RecordFormatError(f"bad string length {n}")
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"string is not UTF-8: {exc}") from None

    def bytes_(self) -> bytes:
        n = self.i32()
        if n < 0:
            raise RecordFormatError(f"bad bytes length {n}")
        return self._take(n)

    def end(self) -> None:
        if self.pos != len(self.data):
            raise RecordFormatError(f"{len(self.data) - self.pos} trailing bytes")


# -- keys ---------------------------------------------------------------------------------
def encode_key(key: OffsetCommitKey | GroupMetadataKey) -> bytes:
    if isinstance(key, OffsetCommitKey):
        w = _Writer(OFFSET_COMMIT_KEY_VERSION)
        w.string(key.group)
        w.string(key.topic)
        w.i32(key.partition)
        return w.done()
    w = _Writer(GROUP_METADATA_KEY_VERSION)
    w.string(key.group)
    return w.done()


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | UnknownKey:
    r = _Reader(data)
    version = r.i16()
    if version in (0, 1):
        key = OffsetCommitKey(r.string(), r.string(), r.i32())
    elif version == 2:
        key = GroupMetadataKey(r.string())
    else:
        return UnknownKey(version)
    r.end()
    return key


# -- values -------------------------------------------------------------------------------
def encode_offset_commit_value(v: OffsetCommitValue) -> bytes:
    w = _Writer(OFFSET_COMMIT_VALUE_VERSION)
    w.i64(v.offset)
    w.i32(v.leader_epoch)
    w.string(v.metadata)
    w.i64(v.commit_timestamp)
    return w.done()


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    r = _Reader(data)
    version = r.i16()
    if not 0 <= version <= 3:
        raise RecordFormatError(f"unknown offset commit value version {version}")
    offset = r.i64()
    epoch = r.i32() if version >= 3 else NO_LEADER_EPOCH
    metadata = r.string()
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else NO_TIMESTAMP
    r.end()
    return OffsetCommitValue(offset, epoch, metadata, commit_ts, expire_ts)


def encode_group_metadata_value(v: GroupMetadataValue) -> bytes:
    w = _Writer(GROUP_METADATA_VALUE_VERSION)
    w.string(v.protocol_type)
    w.i32(v.generation)
    w.string(v.protocol, nullable=True)
    w.string(v.leader, nullable=True)
    w.i64(v.current_state_timestamp)
    w.i32(len(v.members))
    for m in v.members:
        w.string(m.member_id)
        w.string(m.group_instance_id, nullable=True)
        w.string(m.client_id)
        w.string(m.client_host)
        w.i32(m.rebalance_timeout)
        w.i32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return w.done()


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    r = _Reader(data)
    version = r.i16()
    if not 0 <= version <= 3:
        raise RecordFormatError(f"unknown group metadata value version {version}")
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.string(nullable=True)
    leader = r.string(nullable=True)
    state_ts = r.i64() if version >= 2 else NO_TIMESTAMP
    count = r.i32()
    if count < 0:
        raise RecordFormatError(f"bad member count {count}")
    members = []
    for _ in range(count):
        member_id = r.string()
        instance_id = r.string(nullable=True) if version >= 3 else None
        client_id, client_host = r.string(), r.string()
        rebalance = r.i32() if version >= 1 else None
        session = r.i32()
        members.append(MemberRecord(member_id, instance_id, client_id, client_host,
                                    session if rebalance is None else rebalance, session,
                                    r.bytes_(), r.bytes_()))
    r.end()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


# -- whole records ------------------------------------------------------------------------
def offset_commit_record(group: str, topic: str, partition: int,
                         value: OffsetCommitValue | None) -> OffsetsRecord:
    key = encode_key(OffsetCommitKey(group, topic, partition))
    return OffsetsRecord(key, None if value is None else encode_offset_commit_value(value))


def group_metadata_record(group: str, value: GroupMetadataValue | None) -> OffsetsRecord:
    key = encode_key(GroupMetadataKey(group))
    return OffsetsRecord(key, None if value is None else encode_group_metadata_value(value))


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


def partition_for(group_id: str, partitions: int = 50) -> int:
    return java_abs(java_string_hash(group_id)) % partitions


def java_length(s: str) -> int:
    """Java's String.length(): UTF-16 code units (what offset.metadata.max.bytes compares)."""
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def subscribed_topics(subscription: bytes) -> frozenset[str] | None:
    """The topics of a ConsumerProtocolSubscription (any version: all start with an int16
    version and the v0 `Topics` array), or None when the bytes do not parse (Kafka then
    treats the group's subscription as unknown)."""
    try:
        r = _Reader(subscription)
        r.i16()
        count = r.i32()
        if count < 0:
            return None
        return frozenset(r.string() for _ in range(count))
    except RecordFormatError:
        return None
