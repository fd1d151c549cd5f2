"""The KIP-848 consumer-group records of `__consumer_offsets`, byte for byte Kafka's, and
the group they describe: `group_records(group)` writes one, `restore` rebuilds it.

Rules (Kafka's group-coordinator/src/main/resources/common/message/ConsumerGroup*.json and
GroupCoordinatorRecordHelpers.java, trunk 1eb7644):
- Keys are non-flexible: int16 version, then `group:string` (+ `member:string`):
  3 ConsumerGroupMetadata, 4 ConsumerGroupPartitionMetadata, 5 ConsumerGroupMemberMetadata
  (+ member), 6 ConsumerGroupTargetAssignmentMetadata, 7 ConsumerGroupTargetAssignmentMember
  (+ member), 8 ConsumerGroupCurrentMemberAssignment (+ member).
- Values are version 0, flexible (KIP-482): compact strings and arrays (unsigned varint
  length + 1, 0 for null), uuid as 16 bytes, and every struct ends with its tagged fields
  (written as none; read and skipped, e.g. a classic member's tag 0).
  3: `epoch:int32`; 4: `topics[topicId:uuid, topicName, numPartitions:int32,
  partitionMetadata[partition:int32, racks[]]]` (racks are not kept: empty);
  5: `instanceId?, rackId?, clientId, clientHost, subscribedTopicNames[], subscribedTopicRegex?,
  rebalanceTimeoutMs:int32, serverAssignor?`; 6: `assignmentEpoch:int32`;
  7: `topicPartitions[topicId:uuid, partitions[int32]]`; 8: `memberEpoch:int32,
  previousMemberEpoch:int32, state:int8 (STABLE 0, UNREVOKED_PARTITIONS 1,
  UNRELEASED_PARTITIONS 2, UNKNOWN 127), assignedPartitions[...], partitionsPendingRevocation[...]`.
- Topic ids are Kafka's text form (URL-safe base64 of the 16 bytes, unpadded).
- `group_records(group)` is every record the group's state needs, {key bytes: value bytes};
  the coordinator appends what differs from what it last wrote and a tombstone for every key
  that went away, so replaying the partition gives the state back. `restore` takes the last
  value of each key of one group (tombstoned keys removed) and returns the group with every
  member's session deadline at `now + session timeout`; a member whose metadata or
  assignment record is missing is left out.
- Malformed bytes raise records.RecordFormatError.
- Pure: stdlib and the coordinator's own modules.
"""

from __future__ import annotations

import base64
import binascii
import struct
from dataclasses import dataclass

from coordinator.consumer_group import ConsumerGroup, ConsumerGroupConfig, Member
from coordinator.consumer_reconciliation import MemberAssignment, MemberState
from coordinator.records import OffsetsRecord, RecordFormatError

__all__ = ["ConsumerKey", "is_consumer_key_version", "decode_consumer_key", "encode_consumer_key",
           "group_records", "restore", "CONSUMER_KEY_VERSIONS"]

METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 6, 7, 8
CONSUMER_KEY_VERSIONS = frozenset(range(3, 9))
_WITH_MEMBER = frozenset({MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT})
_STATE_CODES = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1,
                MemberState.UNRELEASED_PARTITIONS: 2, MemberState.UNKNOWN: 127}
_STATES = {v: k for k, v in _STATE_CODES.items()}
_I8, _I16, _I32 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class ConsumerKey:
    version: int
    group: str
    member: str | None = None


def is_consumer_key_version(version: int) -> bool:
    return version in CONSUMER_KEY_VERSIONS


# -- primitives ---------------------------------------------------------------------------
class _Out:
    def __init__(self):
        self.parts: list[bytes] = []

    def i8(self, v: int) -> None:
        self.parts.append(_I8.pack(v))

    def i16(self, v: int) -> None:
        self.parts.append(_I16.pack(v))

    def i32(self, v: int) -> None:
        self.parts.append(_I32.pack(v))

    def uvarint(self, v: int) -> None:
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        self.parts.append(bytes(out))

    def string(self, s: str) -> None:           # non-flexible (keys)
        data = s.encode("utf-8")
        self.i16(len(data))
        self.parts.append(data)

    def compact_string(self, s: str | None) -> None:
        if s is None:
            self.uvarint(0)
            return
        data = s.encode("utf-8")
        self.uvarint(len(data) + 1)
        self.parts.append(data)

    def count(self, n: int) -> None:
        self.uvarint(n + 1)

    def uuid(self, topic_id: str) -> None:
        self.parts.append(_id_bytes(topic_id))

    def no_tags(self) -> None:
        self.uvarint(0)

    def done(self) -> bytes:
        return b"".join(self.parts)


class _In:
    def __init__(self, data: bytes):
        self.data, self.pos = bytes(data), 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError(f"truncated record: need {n} bytes at {self.pos} "
                                    f"of {len(self.data)}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def i8(self) -> int:
        return _I8.unpack(self._take(1))[0]

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise RecordFormatError("varint longer than 5 bytes")

    def _utf8(self, n: int) -> str:
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"string is not UTF-8: {exc}") from None

    def string(self) -> str:
        n = self.i16()
        if n < 0:
            raise RecordFormatError(f"bad string length {n}")
        return self._utf8(n)

    def compact_string(self, nullable: bool = False) -> str | None:
        n = self.uvarint()
        if n == 0:
            if not nullable:
                raise RecordFormatError("null in a non-nullable string field")
            return None
        return self._utf8(n - 1)

    def count(self) -> int:
        n = self.uvarint()
        if n == 0:
            raise RecordFormatError("null array")
        return n - 1

    def uuid(self) -> str:
        return _id_text(self._take(16))

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()                       # the tag
            self._take(self.uvarint())           # its bytes: unknown to us, skipped

    def end(self) -> None:
        if self.pos != len(self.data):
            raise RecordFormatError(f"{len(self.data) - self.pos} trailing bytes")


def _id_bytes(text: str) -> bytes:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 16:
        raise RecordFormatError(f"topic id {text!r} is not a UUID")
    return raw


def _id_text(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


# -- keys ---------------------------------------------------------------------------------
def encode_consumer_key(key: ConsumerKey) -> bytes:
    out = _Out()
    out.i16(key.version)
    out.string(key.group)
    if key.version in _WITH_MEMBER:
        out.string(key.member or "")
    return out.done()


def decode_consumer_key(data: bytes) -> ConsumerKey:
    r = _In(data)
    version = r.i16()
    if version not in CONSUMER_KEY_VERSIONS:
        raise RecordFormatError(f"key version {version} is not a consumer group's")
    group = r.string()
    member = r.string() if version in _WITH_MEMBER else None
    r.end()
    return ConsumerKey(version, group, member)


# -- values -------------------------------------------------------------------------------
def _value() -> _Out:
    out = _Out()
    out.i16(0)
    return out


def _epoch_value(epoch: int) -> bytes:
    out = _value()
    out.i32(epoch)
    out.no_tags()
    return out.done()


def _partitions_value(out: _Out, assignment) -> None:
    out.count(len(assignment))
    for topic_id, parts in sorted(assignment.items()):
        out.uuid(topic_id)
        out.count(len(parts))
        for p in sorted(parts):
            out.i32(p)
        out.no_tags()


def _read_partitions(r: _In) -> dict[str, frozenset[int]]:
    out = {}
    for _ in range(r.count()):
        topic_id = r.uuid()
        out[topic_id] = frozenset(r.i32() for _ in range(r.count()))
        r.tags()
    return {t: ps for t, ps in out.items() if ps}


def _subscription_value(subscription) -> bytes:
    out = _value()
    out.count(len(subscription))
    for name, (topic_id, n) in sorted(subscription.items()):
        out.uuid(topic_id)
        out.compact_string(name)
        out.i32(n)
        out.count(0)                             # partition racks: not kept
        out.no_tags()
    out.no_tags()
    return out.done()


def _member_value(m: Member) -> bytes:
    out = _value()
    out.compact_string(m.instance_id)
    out.compact_string(m.rack_id)
    out.compact_string(m.client_id)
    out.compact_string(m.client_host)
    out.count(len(m.subscribed))
    for t in m.subscribed:
        out.compact_string(t)
    out.compact_string(m.subscribed_regex)
    out.i32(m.rebalance_timeout_ms)
    out.compact_string(m.server_assignor)
    out.no_tags()
    return out.done()


def _target_value(assignment) -> bytes:
    out = _value()
    _partitions_value(out, assignment)
    out.no_tags()
    return out.done()


def _current_value(a: MemberAssignment) -> bytes:
    out = _value()
    out.i32(a.member_epoch)
    out.i32(a.previous_member_epoch)
    out.i8(_STATE_CODES[a.state])
    _partitions_value(out, a.assigned)
    _partitions_value(out, a.pending_revocation)
    out.no_tags()
    return out.done()


def group_records(group: ConsumerGroup) -> dict[bytes, bytes]:
    gid = group.group_id

    def key(version: int, member: str | None = None) -> bytes:
        return encode_consumer_key(ConsumerKey(version, gid, member))

    out = {key(METADATA): _epoch_value(group.group_epoch),
           key(PARTITION_METADATA): _subscription_value(group.subscription),
           key(TARGET_METADATA): _epoch_value(group.target_epoch)}
    for mid, m in group.members.items():
        out[key(MEMBER_METADATA, mid)] = _member_value(m)
        out[key(CURRENT_ASSIGNMENT, mid)] = _current_value(m.assignment)
    for mid, assignment in group.target.items():
        out[key(TARGET_MEMBER, mid)] = _target_value(assignment)
    return out


def _version(r: _In) -> None:
    version = r.i16()
    if version != 0:
        raise RecordFormatError(f"consumer group value version {version} is not 0")


def _decode(version: int, data: bytes):
    r = _In(data)
    _version(r)
    if version in (METADATA, TARGET_METADATA):
        value = r.i32()
    elif version == PARTITION_METADATA:
        value = {}
        for _ in range(r.count()):
            topic_id, name, n = r.uuid(), r.compact_string(), r.i32()
            for _ in range(r.count()):
                r.i32()
                for _ in range(r.count()):
                    r.compact_string()
                r.tags()
            r.tags()
            value[name] = (topic_id, n)
    elif version == MEMBER_METADATA:
        instance, rack = r.compact_string(True), r.compact_string(True)
        client_id, client_host = r.compact_string(), r.compact_string()
        subscribed = tuple(r.compact_string() for _ in range(r.count()))
        regex = r.compact_string(True)
        value = dict(instance_id=instance, rack_id=rack, client_id=client_id,
                     client_host=client_host, subscribed=subscribed, subscribed_regex=regex,
                     rebalance_timeout_ms=r.i32(), server_assignor=r.compact_string(True))
    elif version == TARGET_MEMBER:
        value = _read_partitions(r)
    else:
        epoch, previous, code = r.i32(), r.i32(), r.i8()
        value = (epoch, previous, _STATES.get(code, MemberState.UNKNOWN),
                 _read_partitions(r), _read_partitions(r))
    r.tags()
    r.end()
    return value


def restore(group_id: str, records: list[OffsetsRecord], config: ConsumerGroupConfig,
            now_ms: int) -> ConsumerGroup | None:
    """The group from its records in log order (None when nothing of it is left)."""
    last: dict[tuple[int, str | None], bytes] = {}
    for r in records:
        key = decode_consumer_key(r.key)
        if r.value is None:
            last.pop((key.version, key.member), None)
        else:
            last[(key.version, key.member)] = r.value
    if (METADATA, None) not in last:
        return None
    values = {k: _decode(k[0], v) for k, v in last.items()}
    group = ConsumerGroup(group_id, config)
    group.resolve_now = True         # resolutions are not kept: the first heartbeat's
    group.group_epoch = values[(METADATA, None)]
    group.target_epoch = values.get((TARGET_METADATA, None), 0)
    group.subscription = values.get((PARTITION_METADATA, None), {})
    group.target = {mid: dict(v) for (version, mid), v in values.items()
                    if version == TARGET_MEMBER}
    for (version, mid), fields in sorted(values.items(), key=lambda kv: str(kv[0])):
        current = values.get((CURRENT_ASSIGNMENT, mid))
        if version != MEMBER_METADATA or current is None:
            continue
        epoch, previous, state, assigned, pending = current
        assignment = MemberAssignment(mid, epoch, previous, state, assigned, pending)
        group.restore_member(Member(mid, assignment=assignment, **fields), now_ms)
    return group
