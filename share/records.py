"""`__share_group_state` records, as Kafka 4's share coordinator writes them
(share-coordinator/src/main/resources/common/message/Share{Snapshot,Update}{Key,Value}.json,
CoordinatorRecordSerde), and the partition a share-partition's state lives in.

Rules:
- Key: int16 record type (0 ShareSnapshot, 1 ShareUpdate), then the key struct, version 0,
  not flexible: GroupId (int16-length string), TopicId (16 bytes), Partition (int32).
- Value: int16 version (0), then the flexible struct: ShareSnapshotValue SnapshotEpoch,
  StateEpoch, LeaderEpoch (int32), StartOffset, CreateTimestamp, WriteTimestamp (int64),
  StateBatches; ShareUpdateValue SnapshotEpoch, LeaderEpoch (int32), StartOffset (int64,
  -1: unchanged), StateBatches. A StateBatch is FirstOffset, LastOffset (int64),
  DeliveryState (int8), DeliveryCount (int16). Compact arrays (unsigned varint length + 1)
  and an empty tagged-field section after every struct. A null value is a tombstone (the
  share-partition's state deleted).
- The state's partition: Utils.abs(String.hashCode("<group>:<topic id>:<partition>")) %
  share.coordinator.state.topic.num.partitions (Kafka's SharePartitionKey and
  ShareCoordinatorService.partitionFor; topic ids in Kafka's base64 text).
- rayka writes snapshots only (each one the whole state); it reads updates too, applying an
  update's batches over the snapshot's (Kafka's ShareCoordinatorShard replay: the update's
  start offset, when not -1, drops the batches below it).
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass

from share.partition import StateBatch

SNAPSHOT, UPDATE = 0, 1
_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_BATCH = struct.Struct(">qqbh")


@dataclass(frozen=True, slots=True)
class ShareKey:
    group_id: str
    topic_id: str          # Kafka's base64 text of the topic's UUID
    partition: int

    def coordinator_key(self) -> str:
        return f"{self.group_id}:{self.topic_id}:{self.partition}"

    @classmethod
    def parse(cls, text: str) -> "ShareKey":
        """Kafka's SharePartitionKey.validate/getInstance: "<group>:<topic id>:<partition>",
        three non-empty parts, a 22-character topic id, an integer partition (ValueError
        otherwise)."""
        parts = text.split(":")
        if len(parts) != 3 or not all(parts) or len(parts[1]) != 22:
            raise ValueError(f"invalid share coordinator key {text!r}")
        try:
            base64.urlsafe_b64decode(parts[1] + "==")
            partition = int(parts[2])
        except (ValueError, TypeError) as exc:
            raise ValueError(f"invalid share coordinator key {text!r}") from exc
        return cls(parts[0], parts[1], partition)


@dataclass(frozen=True, slots=True)
class ShareState:
    """A share-partition's persisted state: its SPSO and the window's batches."""
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...] = ()
    snapshot_epoch: int = 0


def java_hash(text: str) -> int:
    """Java's String.hashCode: 31*h + each UTF-16 code unit, in 32-bit two's complement."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: ShareKey, partitions: int) -> int:
    h = java_hash(key.coordinator_key())
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def _uuid_bytes(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _uuid_text(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def encode_key(key: ShareKey, kind: int = SNAPSHOT) -> bytes:
    group = key.group_id.encode()
    return (_I16.pack(kind) + _I16.pack(len(group)) + group + _uuid_bytes(key.topic_id)
            + _I32.pack(key.partition))


def decode_key(raw: bytes) -> tuple[int, ShareKey]:
    kind = _I16.unpack_from(raw, 0)[0]
    n = _I16.unpack_from(raw, 2)[0]
    group = raw[4:4 + n].decode()
    topic = _uuid_text(raw[4 + n:20 + n])
    partition = _I32.unpack_from(raw, 20 + n)[0]
    return kind, ShareKey(group, topic, partition)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(raw: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = raw[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _batches(batches) -> bytes:
    return _varint(len(batches) + 1) + b"".join(
        _BATCH.pack(b.first, b.last, b.state, b.delivery_count) + b"\x00" for b in batches)


def encode_snapshot(state: ShareState, now_ms: int) -> bytes:
    return (_I16.pack(0) + _I32.pack(state.snapshot_epoch) + _I32.pack(state.state_epoch)
            + _I32.pack(state.leader_epoch) + _I64.pack(state.start_offset)
            + _I64.pack(now_ms) + _I64.pack(now_ms) + _batches(state.batches) + b"\x00")


def _read_batches(raw: bytes, pos: int) -> tuple[tuple[StateBatch, ...], int]:
    n, pos = _read_varint(raw, pos)
    out = []
    for _ in range(max(n - 1, 0)):
        first, last, st, count = _BATCH.unpack_from(raw, pos)
        pos += _BATCH.size
        tags, pos = _read_varint(raw, pos)
        for _t in range(tags):                         # unknown tagged fields: skipped
            _tag, pos = _read_varint(raw, pos)
            size, pos = _read_varint(raw, pos)
            pos += size
        out.append(StateBatch(first, last, st, count))
    return tuple(out), pos


def decode_value(kind: int, raw: bytes) -> ShareState:
    """A snapshot's state, or an update as a ShareState (state epoch -1: unchanged)."""
    pos = 2
    if kind == SNAPSHOT:
        snapshot_epoch, state_epoch, leader_epoch = struct.unpack_from(">iii", raw, pos)
        start = _I64.unpack_from(raw, pos + 12)[0]
        batches, _ = _read_batches(raw, pos + 12 + 8 + 16)
        return ShareState(state_epoch, leader_epoch, start, batches, snapshot_epoch)
    snapshot_epoch, leader_epoch = struct.unpack_from(">ii", raw, pos)
    start = _I64.unpack_from(raw, pos + 8)[0]
    batches, _ = _read_batches(raw, pos + 16)
    return ShareState(-1, leader_epoch, start, batches, snapshot_epoch)


def apply_update(state: ShareState, update: ShareState) -> ShareState:
    """A ShareUpdate over the state it follows: its batches replace the offsets they cover,
    a start offset (not -1) drops what lies below it."""
    start = state.start_offset if update.start_offset < 0 else update.start_offset
    offsets: dict[int, tuple[int, int]] = {}
    for b in (*state.batches, *update.batches):
        for o in range(b.first, b.last + 1):
            offsets[o] = (b.state, b.delivery_count)
    merged: list[StateBatch] = []
    for o in sorted(x for x in offsets if x >= start):
        st, count = offsets[o]
        if merged and merged[-1].last == o - 1 and (merged[-1].state, merged[-1].delivery_count) \
                == (st, count):
            merged[-1] = StateBatch(merged[-1].first, o, st, count)
        else:
            merged.append(StateBatch(o, o, st, count))
    return ShareState(state.state_epoch, max(state.leader_epoch, update.leader_epoch), start,
                      tuple(merged), state.snapshot_epoch)


__all__ = ["ShareKey", "ShareState", "partition_for", "encode_key", "decode_key",
           "encode_snapshot", "decode_value", "apply_update", "java_hash", "SNAPSHOT", "UPDATE"]
