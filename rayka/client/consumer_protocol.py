"""Kafka's ConsumerProtocol: the bytes a consumer group's members exchange through the broker.

JoinGroup ("consumer" protocol type) carries a ConsumerProtocolSubscription per assignor name;
the leader runs the assignor the broker chose (rayka/client/assignors.py) and answers each
member a ConsumerProtocolAssignment in SyncGroup. The broker never reads either. Pure: the
stdlib and rayka.client.types only.

Rules (Kafka's ConsumerProtocol.java and its message schemas, trunk 1eb7644):
- Byte for byte Kafka's: an int16 version, then the non-flexible body of
  ConsumerProtocolSubscription v0-3 (Topics, UserData, OwnedPartitions v1+, GenerationId v2+,
  RackId v3+) or ConsumerProtocolAssignment v0-3 (AssignedPartitions, UserData).
- Encoding sorts topics and owned partitions as ConsumerProtocol does (Java's
  String.compareTo: UTF-16 code units, `java_order`), drops the fields the version lacks
  (they are "ignorable") and writes a version above 3 as 3. Assigned partitions keep the
  assignor's order, one entry per topic in order of first appearance.
- Decoding reads a higher version as v3 and ignores the rest (Kafka's forward compatibility
  rule); a negative version, a short buffer, a null where the schema has none, or a count
  larger than the bytes left raises SchemaError.
- "No generation" is None in `Subscription` and -1 on the wire (DEFAULT_GENERATION); an empty
  rack decodes as None; `group_instance_id` is not in these bytes (JoinGroup's member entry
  carries it).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable

from rayka.client.types import TopicPartition

__all__ = ["SchemaError", "Subscription", "Assignment", "HIGHEST_VERSION", "DEFAULT_GENERATION",
           "java_order", "partition_order", "read_version", "encode_subscription",
           "decode_subscription", "encode_assignment", "decode_assignment"]

HIGHEST_VERSION = 3      # validVersions 0-3 of ConsumerProtocolSubscription and ...Assignment
DEFAULT_GENERATION = -1  # AbstractStickyAssignor.DEFAULT_GENERATION: "no generation"


class SchemaError(ValueError):
    """Kafka's SchemaException: bytes that are not a consumer-protocol message."""


def java_order(s: str) -> bytes:
    """Sort key of Java's String.compareTo (UTF-16 code units): big-endian UTF-16 bytes sort
    the same."""
    return s.encode("utf-16-be", "surrogatepass")


def partition_order(tp: TopicPartition):
    """Sort key of a partition: its topic in Java's order, then its number."""
    return (java_order(tp.topic), tp.partition)


@dataclass(frozen=True)
class Subscription:
    """ConsumerPartitionAssignor.Subscription. `generation` None means "none" (a negative id on
    the wire); `group_instance_id` is not in these bytes: JoinGroup's member entry carries it."""
    topics: tuple[str, ...]
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation: int | None = None
    group_instance_id: str | None = None
    rack: str | None = None
    user_data: bytes | None = None

    def __post_init__(self):
        object.__setattr__(self, "topics", tuple(self.topics))
        object.__setattr__(self, "owned_partitions",
                           tuple(TopicPartition(t, p) for t, p in self.owned_partitions))
        if self.generation is not None and self.generation < 0:
            object.__setattr__(self, "generation", None)  # Java: generationId < 0 -> empty


@dataclass(frozen=True)
class Assignment:
    """ConsumerPartitionAssignor.Assignment: partitions in the assignor's order."""
    partitions: tuple[TopicPartition, ...] = ()
    user_data: bytes | None = None

    def __post_init__(self):
        object.__setattr__(self, "partitions",
                           tuple(TopicPartition(t, p) for t, p in self.partitions))


# -- the wire format ---------------------------------------------------------------------------
def _check_version(version: int, what: str) -> int:
    # ConsumerProtocol.check*Version: below 0 is an error, above 3 is read (or written) as 3.
    if version < 0:
        raise SchemaError(f"Unsupported {what} version: {version}")
    return min(version, HIGHEST_VERSION)


def _string(s: str | None, what: str) -> bytes:
    if s is None:
        return b"\xff\xff"  # nullable string: length -1
    data = s.encode("utf-8", "replace")  # Java writes a lone surrogate as '?', so does "replace"
    if len(data) > 0x7FFF:
        raise SchemaError(f"'{what}' field is too long to be serialized")
    return struct.pack(">h", len(data)) + data


def _nbytes(b: bytes | None) -> bytes:
    return b"\xff\xff\xff\xff" if b is None else struct.pack(">i", len(b)) + bytes(b)


def _topic_partitions(groups: list[tuple[str, list[int]]]) -> bytes:
    out = [struct.pack(">i", len(groups))]
    for topic, partitions in groups:
        out.append(_string(topic, "topic"))
        out.append(struct.pack(f">i{len(partitions)}i", len(partitions), *partitions))
    return b"".join(out)


def encode_subscription(sub: Subscription, version: int = HIGHEST_VERSION) -> bytes:
    """ConsumerProtocol.serializeSubscription(sub, version), version prefix included."""
    version = _check_version(version, "subscription")
    topics = sorted(sub.topics, key=java_order)
    out = [struct.pack(">hi", version, len(topics)), *(_string(t, "topics") for t in topics),
           _nbytes(sub.user_data)]
    if version >= 1:  # OwnedPartitions, sorted by topic then partition, one entry per topic
        groups: list[tuple[str, list[int]]] = []
        for tp in sorted(sub.owned_partitions, key=partition_order):
            if not groups or groups[-1][0] != tp.topic:
                groups.append((tp.topic, []))
            groups[-1][1].append(tp.partition)
        out.append(_topic_partitions(groups))
    if version >= 2:
        generation = DEFAULT_GENERATION if sub.generation is None else sub.generation
        out.append(struct.pack(">i", generation))
    if version >= 3:
        out.append(_string(sub.rack, "rackId"))
    return b"".join(out)


def encode_assignment(assignment: Assignment, version: int = HIGHEST_VERSION) -> bytes:
    """ConsumerProtocol.serializeAssignment: one entry per topic in order of first appearance
    (AssignedPartitions is keyed by topic), partitions in the given order."""
    version = _check_version(version, "assignment")
    groups: dict[str, list[int]] = {}
    for tp in assignment.partitions:
        groups.setdefault(tp.topic, []).append(tp.partition)
    return (struct.pack(">h", version) + _topic_partitions(list(groups.items()))
            + _nbytes(assignment.user_data))


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = bytes(data), 0

    def take(self, n: int) -> bytes:
        if n > len(self.data) - self.pos:
            raise SchemaError("Buffer underflow while parsing consumer protocol's message")
        self.pos += n
        return self.data[self.pos - n:self.pos]

    def i16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def i32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def string(self, nullable: bool = False) -> str | None:
        if (n := self.i16()) >= 0:
            return self.take(n).decode("utf-8", "replace")  # Java's new String(bytes, UTF_8)
        if nullable:
            return None
        raise SchemaError("non-nullable string field was serialized as null")

    def nbytes(self) -> bytes | None:
        return None if (n := self.i32()) < 0 else self.take(n)

    def array(self, item: Callable[[], object]) -> list:
        if (n := self.i32()) < 0:
            raise SchemaError("non-nullable array field was serialized as null")
        if n > len(self.data) - self.pos:  # the generated code's guard against huge counts
            raise SchemaError(f"Tried to allocate a collection of size {n}, but there are only "
                              f"{len(self.data) - self.pos} bytes remaining.")
        return [item() for _ in range(n)]

    def topic_partitions(self) -> list[TopicPartition]:
        groups = self.array(lambda: (self.string(), self.array(self.i32)))
        return [TopicPartition(t, p) for t, ps in groups for p in ps]


def read_version(data: bytes) -> int:
    """ConsumerProtocol.deserializeVersion: the leading int16."""
    return _Reader(data).i16()


def decode_subscription(data: bytes, group_instance_id: str | None = None) -> Subscription:
    """ConsumerProtocol.deserializeSubscription: topics in wire order, owned partitions flattened,
    generation -1 -> None, an empty rack -> None."""
    r = _Reader(data)
    version = _check_version(r.i16(), "subscription")
    topics, user_data = r.array(r.string), r.nbytes()
    owned = r.topic_partitions() if version >= 1 else []
    generation = r.i32() if version >= 2 else DEFAULT_GENERATION
    rack = r.string(nullable=True) if version >= 3 else None
    return Subscription(topics=tuple(topics), owned_partitions=tuple(owned),
                        generation=generation, group_instance_id=group_instance_id,
                        rack=rack or None, user_data=user_data)


def decode_assignment(data: bytes) -> Assignment:
    """ConsumerProtocol.deserializeAssignment: partitions flattened in wire order."""
    r = _Reader(data)
    _check_version(r.i16(), "assignment")  # every version 0-3 has the same body
    return Assignment(tuple(r.topic_partitions()), r.nbytes())
