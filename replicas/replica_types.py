"""What the replica manager returns (replicas/replica_manager.py re-exports all of it):
its effects, its per-call results, the broker config and the topic-config → LogConfig /
PartitionConfig translation.

Effects (plain frozen dataclasses; the shell carries them out in list order):
- HighWatermarkChanged(tp, high_watermark): wake long-poll fetches of tp (already persisted).
- ProposeIsr(tp, isr, leader_epoch, partition_epoch): send AlterPartition (KIP-497) for tp;
  feed the answer to handle_alter_partition_response(tp, answer, proposal=effect).
- ProduceDone(pending_id, error, base_offset, last_offset): answer the acks=-1 produce
  `pending_id` (error 0, 7 timed out, 6 leadership lost, 20 ISR shrank below min).
Results are frozen dataclasses answered per call (error codes are Kafka's); a result's
`effects` list is carried out like any other effect list. A FetchResult carries the last
stable offset (every leader answer; the HW when no transaction is open) and, for a
read_committed consumer (isolation level 1, READ_COMMITTED), the aborted transactions
overlapping the records returned as (producer id, first offset) pairs (None for
read_uncommitted); `LeaderMarks` is the same answer without records, for a quiet partition
(Kafka's LogReadResult calls these marks the leader's even when a follower answers). A
consumer fetch the leader sends elsewhere (KIP-392) has `preferred_read_replica` set to
that broker and no records; -1 otherwise. `ClientMetadata` is what a consumer's Fetch v11+
tells about itself (Kafka's ClientMetadata: its rack, and the listener it came in on);
without it (older fetches, the native door) only the leader serves.
Topic config (`partition_configs`): the topic's keys over the broker defaults; missing keys
take LogConfig's / PartitionConfig's defaults; a value that is not an integer, or a
min.insync.replicas below 1, raises InvalidConfig (40). Broker-level defaults may use
Kafka's broker names (`log.retention.ms`, `log.segment.bytes`, `log.roll.ms` ...,
`topic_defaults_from_broker_config`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, NamedTuple

from replicas import partition_state as ps
from replicas.errors import InvalidConfig
from replicas.log import LogConfig
from replicas.record_validation import TimestampBounds
from replicas.metadata_cache import TopicPartition
from replicas.cleaner import CleanerPolicy
from replicas.compression import topic_codec
from replicas.retention import RetentionPolicy

_LONG_MAX = 2**63 - 1


# ---------------------------------------------------------------- effects
@dataclass(frozen=True, slots=True)
class HighWatermarkChanged:
    tp: TopicPartition
    high_watermark: int


@dataclass(frozen=True, slots=True)
class ProposeIsr:
    tp: TopicPartition
    isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class ProduceDone:
    pending_id: int
    error: int
    base_offset: int
    last_offset: int


Effect = HighWatermarkChanged | ProposeIsr | ProduceDone


# ---------------------------------------------------------------- results
@dataclass(frozen=True, slots=True)
class AppendResult:
    error: int
    base_offset: int = -1
    last_offset: int = -1
    pending_id: int | None = None
    duplicate: bool = False
    effects: list = field(default_factory=list)
    message: str = ""
    record_errors: tuple = ()        # KIP-467: (index in the batch, message) per bad record


READ_UNCOMMITTED, READ_COMMITTED = 0, 1      # Kafka's IsolationLevel ids


class ClientMetadata(NamedTuple):
    """A consumer's Fetch v11+ (Kafka's ClientMetadata, the parts a selector reads)."""
    rack_id: str
    listener: str | None = None      # None: every live broker counts as reachable


@dataclass(slots=True)      # not frozen: built per partition per fetch, 5x cheaper
class FetchResult:
    error: int
    records: bytes = b""
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    last_stable_offset: int = -1
    aborted_transactions: tuple[tuple[int, int], ...] | None = None
    diverging_epoch: tuple[int, int] | None = None
    effects: list = field(default_factory=list)
    message: str = ""
    record_errors: tuple = ()        # KIP-467: (index in the batch, message) per bad record
    preferred_read_replica: int = -1     # KIP-392: fetch from this broker instead


class LeaderMarks(NamedTuple):
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int
    aborted_transactions: tuple[tuple[int, int], ...] | None


class FetchPosition(NamedTuple):
    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int


@dataclass(frozen=True, slots=True)
class TruncationResult:
    log_end_offset: int            # after truncation
    removed_bytes: int
    completed: bool                # False: ask the leader again about `next_epoch`
    next_epoch: int = ps.NO_EPOCH
    effects: list = field(default_factory=list)
    stale: bool = False            # the answer was for an older leader epoch: nothing done


@dataclass(frozen=True, slots=True)
class LeaderAndIsrOutcome:
    error: int
    partition_errors: dict = field(default_factory=dict)      # tp -> code
    became_leader: list = field(default_factory=list)         # [tp]
    became_follower: dict = field(default_factory=dict)       # tp -> leader id
    effects: list = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class StopReplicaOutcome:
    error: int
    partition_errors: dict = field(default_factory=dict)
    stopped: list = field(default_factory=list)               # stop fetchers for these
    deleted: list = field(default_factory=list)
    effects: list = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class LogDirFailure:
    """A log directory went offline (replicas/log_dirs.py): the shell stops what served
    `partitions` (fetchers, coordinators), carries out `effects` (pending acks=-1 produces
    answered KAFKA_STORAGE_ERROR) and tells the controller (Kafka's
    /log_dir_event_notification). `all_offline`: no directory is left online."""
    path: str
    reason: str
    partitions: tuple = ()
    effects: tuple = ()
    all_offline: bool = False


@dataclass(frozen=True)
class BrokerConfig:
    data_dir: str
    log_dirs: tuple[str, ...] = ()          # Kafka's log.dirs; () → (data_dir,)
    replica_lag_time_max_ms: int = 10_000
    default_topic_config: Mapping[str, object] = field(default_factory=dict)
    max_fetch_bytes: int = 4 << 20
    hw_checkpoint_interval_ms: int = 0      # 0: persist in the call that moved the HW
    log_retention_check_interval_ms: int = 300_000   # Kafka's log.retention.check.interval.ms
    log_cleaner_enable: bool = True                  # log.cleaner.enable
    log_cleaner_backoff_ms: int = 15_000             # log.cleaner.backoff.ms
    log_max_open_files: int | None = None            # open .log files (LRU); None: no cap
    transaction_partition_verification_enable: bool = True   # KIP-890 part 1 (Kafka's)
    replica_selector_class: str | None = None        # replica.selector.class (KIP-392)
    log_flush_before_ack: bool = False               # log.flush.before.ack (rayka's)


# Kafka's broker-level names of topic-config defaults (KafkaConfig / LogConfig synonyms).
BROKER_TOPIC_SYNONYMS = {
    "log.retention.ms": "retention.ms", "log.retention.bytes": "retention.bytes",
    "log.segment.bytes": "segment.bytes", "log.roll.ms": "segment.ms",
    "log.cleanup.policy": "cleanup.policy", "log.index.interval.bytes": "index.interval.bytes",
    "log.flush.interval.messages": "flush.messages", "log.flush.interval.ms": "flush.ms",
    "message.max.bytes": "max.message.bytes",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.message.timestamp.difference.max.ms": "message.timestamp.difference.max.ms",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
}
_HOURS_MINUTES = {"log.retention.hours": ("retention.ms", 3_600_000),
                  "log.retention.minutes": ("retention.ms", 60_000),
                  "log.roll.hours": ("segment.ms", 3_600_000)}


def topic_defaults_from_broker_config(config: Mapping[str, object]) -> dict[str, object]:
    """Topic-config defaults from broker keys: Kafka's broker names map to topic names
    (the finer unit wins: log.retention.ms over .minutes over .hours); topic names pass."""
    out: dict[str, object] = {}
    coarse_first = {"log.retention.hours": 0, "log.roll.hours": 0, "log.retention.minutes": 1}
    for key in sorted(config, key=lambda k: coarse_first.get(k, 2)):
        value = config[key]
        if key in _HOURS_MINUTES:
            name, scale = _HOURS_MINUTES[key]
            out[name] = _setting(config, key, 0) * scale
        elif key in BROKER_TOPIC_SYNONYMS:
            out[BROKER_TOPIC_SYNONYMS[key]] = value
        else:
            out[key] = value
    return out


# ---------------------------------------------------------------- topic config
def _setting(config: Mapping[str, object], key: str, default, kind=int):
    value = config.get(key)
    if value is None:
        return default
    try:
        return kind(str(value).strip())
    except ValueError:
        raise InvalidConfig(f"Invalid value {value!r} for configuration {key}") from None


def partition_configs(topic_config: Mapping[str, object] | None,
                      defaults: Mapping[str, object] | None,
                      replica_lag_time_max_ms: int) -> tuple[LogConfig, ps.PartitionConfig]:
    """LogConfig + PartitionConfig from Kafka topic config keys (topic over broker defaults)."""
    merged = {**(defaults or {}), **(topic_config or {})}
    base = LogConfig()
    flush_messages = _setting(merged, "flush.messages", _LONG_MAX)
    flush_ms = _setting(merged, "flush.ms", _LONG_MAX)
    policies = str(merged.get("cleanup.policy", "delete")).replace(" ", "").split(",")
    log_config = LogConfig(
        segment_bytes=_setting(merged, "segment.bytes", base.segment_bytes),
        index_interval_bytes=_setting(merged, "index.interval.bytes", base.index_interval_bytes),
        max_message_bytes=_setting(merged, "max.message.bytes", base.max_message_bytes),
        flush_messages=None if flush_messages >= _LONG_MAX else flush_messages,
        flush_ms=None if flush_ms >= _LONG_MAX else flush_ms,
        segment_ms=_setting(merged, "segment.ms", base.segment_ms),
        compression=topic_codec(str(merged.get("compression.type", "producer"))),
        cleaner=CleanerPolicy(
            "compact" in policies,
            _setting(merged, "min.cleanable.dirty.ratio", 0.5, float),
            _setting(merged, "min.compaction.lag.ms", base.cleaner.min_compaction_lag_ms),
            _setting(merged, "max.compaction.lag.ms", base.cleaner.max_compaction_lag_ms),
            _setting(merged, "delete.retention.ms", base.cleaner.delete_retention_ms)),
        log_append_time=str(merged.get("message.timestamp.type", "CreateTime"))
        == "LogAppendTime",
        timestamps=TimestampBounds.from_configs(
            _setting(merged, "message.timestamp.difference.max.ms", _LONG_MAX),
            _setting(merged, "message.timestamp.before.max.ms", _LONG_MAX),
            _setting(merged, "message.timestamp.after.max.ms", _LONG_MAX)),
        retention=RetentionPolicy(
            _setting(merged, "retention.ms", base.retention.retention_ms),
            _setting(merged, "retention.bytes", base.retention.retention_bytes),
            "delete" in policies))
    try:
        partition_config = ps.PartitionConfig(_setting(merged, "min.insync.replicas", 1),
                                              replica_lag_time_max_ms)
    except ValueError as exc:
        raise InvalidConfig(str(exc)) from None
    return log_config, partition_config
