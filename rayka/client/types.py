"""Public client record types: small, immutable, picklable NamedTuples (no Ray here)."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class RecordMetadata(NamedTuple):
    """Where an acknowledged record was written."""

    topic: str
    partition: int
    offset: int


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[tuple[str, bytes | None], ...] = ()


class OffsetAndTimestamp(NamedTuple):
    """Kafka's OffsetAndTimestamp: the first offset whose record timestamp is at or after the
    one asked, and that record's timestamp."""
    offset: int
    timestamp: int


class PartitionInfo(NamedTuple):
    partition: int
    leader: int            # broker id, -1 when the partition has no leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class BrokerInfo(NamedTuple):
    id: int                # broker id
    node_id: str | None    # the Ray node it runs on
    alive: bool
    endpoints: tuple[str, ...] = ()    # its Kafka listeners, NAME://host:port


class ControllerInfo(NamedTuple):
    id: int                # broker id of the active controller, -1 if none
    epoch: int
