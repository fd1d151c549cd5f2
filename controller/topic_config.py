"""Per-topic configuration (Kafka's LogConfig keys kept in /config/topics/<topic>).

Rules:
- Only the keys in CONFIG_DEFS are accepted: Kafka 3.9's topic configs. IGNORED ones are
  stored and described but change nothing: message.format.version, which Kafka 3.x
  ignores too; file.delete.delay.ms, as rayka deletes files at once; the replication
  throttles' replica lists that kafka-reassign-partitions --throttle sets (rayka does not
  throttle replication); the index size, roll jitter, preallocation, down-conversion
  switch and codec levels, which rayka's log has no use for; and tiered storage's keys
  (remote.storage.enable may only be false: there is no remote tier). Anything else, or a
  value that does not parse
  or is out of range, raises InvalidConfig (40) naming the key, before anything is written.
- Values are stored as strings (Kafka's JSON keeps strings); `normalize_topic_config`
  returns the canonical string form (booleans lower-case, integers without spaces).
- `TopicConfig.from_mapping` turns a stored (already valid) mapping into typed values with
  Kafka's defaults for missing keys; brokers and the controller read typed values from it.
- Cross-key rule checked at topic creation: min.insync.replicas may exceed the replication
  factor (Kafka allows it; acks=all produces then fail with NotEnoughReplicas), so it is
  not rejected here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from replicas.config_keys import underscored_key
from replicas.errors import InvalidConfig

_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1


def _parse_bool(v: str) -> bool:
    low = v.strip().lower()
    if low not in ("true", "false"):
        raise ValueError("expected true or false")
    return low == "true"


def _int_in(lo: int, hi: int) -> Callable[[str], int]:
    def parse(v: str) -> int:
        n = int(v.strip())
        if not lo <= n <= hi:
            raise ValueError(f"must be in [{lo}, {hi}]")
        return n
    return parse


def _ratio(v: str) -> float:
    value = float(v)
    if not 0.0 <= value <= 1.0:
        raise ValueError("must be in [0, 1]")
    return value


def _one_of(*choices: str) -> Callable[[str], str]:
    def parse(v: str) -> str:
        if v.strip() not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return v.strip()
    return parse


def _throttled_replicas(v: str) -> str:
    """Kafka's ThrottledReplicaListValidator: "", "*", or partition:broker pairs."""
    items = [i.strip() for i in v.split(",") if i.strip()]
    if items != ["*"] and not all(len(p := i.split(":")) == 2 and p[0].strip().isdigit()
                                  and p[1].strip().isdigit() for i in items):
        raise ValueError("must be * or a list of partition:brokerId pairs")
    return ",".join(items)


def _gzip_level(v: str) -> int:
    """Kafka's GzipCompression.LevelValidator: -1 (the default level) or 1 to 9."""
    n = int(v.strip())
    if n != -1 and not 1 <= n <= 9:
        raise ValueError("must be -1 or in [1, 9]")
    return n


def _no_remote_storage(v: str) -> bool:
    if _parse_bool(v):
        # LogConfig.validateRemoteStorageOnlyIfSystemEnabled's words
        raise ValueError("Tiered Storage functionality is disabled in the broker. Topic "
                         "cannot be configured with remote log storage.")
    return False


@dataclass(frozen=True, slots=True)
class ConfigDef:
    parse: Callable[[str], object]
    default: object
    doc: str


CONFIG_DEFS: dict[str, ConfigDef] = {
    "min.insync.replicas": ConfigDef(_int_in(1, _INT_MAX), 1,
                                     "acks=all needs at least this many ISR members"),
    "unclean.leader.election.enable": ConfigDef(_parse_bool, False,
                                                "allow an out-of-sync replica to lead (may lose data)"),
    "retention.ms": ConfigDef(_int_in(-1, _LONG_MAX), 604_800_000, "-1: keep forever"),
    "retention.bytes": ConfigDef(_int_in(-1, _LONG_MAX), -1, "per partition; -1: no limit"),
    "segment.bytes": ConfigDef(_int_in(14, _INT_MAX), 1_073_741_824, "roll a segment at this size"),
    "segment.ms": ConfigDef(_int_in(1, _LONG_MAX), 604_800_000, "roll a segment after this long"),
    "max.message.bytes": ConfigDef(_int_in(0, _INT_MAX), 1_048_588, "largest batch accepted"),
    "flush.messages": ConfigDef(_int_in(1, _LONG_MAX), _LONG_MAX, "fsync after this many records"),
    "flush.ms": ConfigDef(_int_in(0, _LONG_MAX), _LONG_MAX, "fsync after this long"),
    "cleanup.policy": ConfigDef(_one_of("delete", "compact", "compact,delete", "delete,compact"),
                                "delete", "delete and/or compact (the cleaner: issue 17)"),
    "min.cleanable.dirty.ratio": ConfigDef(_ratio, 0.5, "compact once this share is dirty"),
    "min.compaction.lag.ms": ConfigDef(_int_in(0, _LONG_MAX), 0,
                                       "records younger than this stay uncompacted"),
    "max.compaction.lag.ms": ConfigDef(_int_in(1, _LONG_MAX), _LONG_MAX,
                                       "compact records older than this whatever the ratio"),
    "delete.retention.ms": ConfigDef(_int_in(0, _LONG_MAX), 86_400_000,
                                     "how long tombstones stay after compaction"),
    "compression.type": ConfigDef(_one_of("producer", "uncompressed", "gzip", "snappy", "lz4",
                                          "zstd"), "producer",
                                  "the codec batches are stored in; producer: as sent"),
    "message.timestamp.type": ConfigDef(_one_of("CreateTime", "LogAppendTime"), "CreateTime",
                                        "LogAppendTime: the leader stamps each batch with "
                                        "its append time"),
    "message.timestamp.difference.max.ms": ConfigDef(
        _int_in(0, _LONG_MAX), _LONG_MAX, "bound of a record's timestamp around the broker's "
        "clock, where the before/after keys are left at their default"),
    "message.timestamp.before.max.ms": ConfigDef(
        _int_in(0, _LONG_MAX), _LONG_MAX, "how far in the past a record's timestamp may be"),
    "message.timestamp.after.max.ms": ConfigDef(
        _int_in(0, _LONG_MAX), _LONG_MAX, "how far in the future a record's timestamp may be"),
    # accepted as Kafka 3.8 accepts them, with Kafka 3.8's effect or none (IGNORED)
    "message.format.version": ConfigDef(str, "3.0-IV1",
                                        "ignored, as by Kafka 3.x (inter.broker.protocol >= 3.0)"),
    "file.delete.delay.ms": ConfigDef(_int_in(0, _LONG_MAX), 60_000,
                                      "ignored: rayka deletes a removed segment's files at once"),
    "leader.replication.throttled.replicas": ConfigDef(
        _throttled_replicas, "", "stored: rayka does not throttle replication"),
    "follower.replication.throttled.replicas": ConfigDef(
        _throttled_replicas, "", "stored: rayka does not throttle replication"),
    "index.interval.bytes": ConfigDef(_int_in(0, _INT_MAX), 4096,
                                      "bytes between two offset-index entries"),
    "segment.index.bytes": ConfigDef(_int_in(4, _INT_MAX), 10_485_760,
                                     "ignored: rayka's offset index grows as needed"),
    "segment.jitter.ms": ConfigDef(_int_in(0, _LONG_MAX), 0,
                                   "ignored: segments roll at segment.ms exactly"),
    "preallocate": ConfigDef(_parse_bool, False, "ignored: segment files grow as written"),
    "message.downconversion.enable": ConfigDef(
        _parse_bool, True, "ignored: old fetch versions are always answered down-converted"),
    "compression.gzip.level": ConfigDef(_gzip_level, -1,
                                        "ignored: a topic codec compresses at its default level"),
    "compression.lz4.level": ConfigDef(_int_in(1, 17), 9,
                                       "ignored: a topic codec compresses at its default level"),
    "compression.zstd.level": ConfigDef(_int_in(-131072, 22), 3,
                                        "ignored: a topic codec compresses at its default level"),
    # tiered storage (KIP-405): the keys Kafka 3.9 knows, with no remote tier here
    "remote.storage.enable": ConfigDef(_no_remote_storage, False,
                                       "only false: this cluster has no remote log storage"),
    "local.retention.ms": ConfigDef(_int_in(-2, _LONG_MAX), -2, "ignored: no remote tier"),
    "local.retention.bytes": ConfigDef(_int_in(-2, _LONG_MAX), -2, "ignored: no remote tier"),
    "remote.log.copy.disable": ConfigDef(_parse_bool, False, "ignored: no remote tier"),
    "remote.log.delete.on.disable": ConfigDef(_parse_bool, False, "ignored: no remote tier"),
}
IGNORED = frozenset({"message.format.version", "file.delete.delay.ms",
                     "leader.replication.throttled.replicas",
                     "follower.replication.throttled.replicas",
                     "segment.index.bytes", "segment.jitter.ms", "preallocate",
                     "message.downconversion.enable", "compression.gzip.level",
                     "compression.lz4.level", "compression.zstd.level", "remote.storage.enable",
                     "local.retention.ms", "local.retention.bytes", "remote.log.copy.disable",
                     "remote.log.delete.on.disable"})


def _canonical(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip()


def normalize_topic_config(config: Mapping[str, object] | None) -> dict[str, str]:
    """Validate every key/value; return them as canonical strings. InvalidConfig on error."""
    out: dict[str, str] = {}
    for key, value in (config or {}).items():
        d = CONFIG_DEFS.get(key)
        if d is None:
            raise InvalidConfig(f"Unknown topic config name: {key}")
        text = _canonical(value)
        try:
            parsed = d.parse(text)
        except (ValueError, TypeError) as exc:
            raise InvalidConfig(f"Invalid value {value!r} for configuration {key}: {exc}") from None
        out[key] = _canonical(parsed)
    return out


@dataclass(frozen=True, slots=True)
class TopicConfig:
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    retention_ms: int = 604_800_000
    retention_bytes: int = -1
    segment_bytes: int = 1_073_741_824
    segment_ms: int = 604_800_000
    max_message_bytes: int = 1_048_588
    flush_messages: int = _LONG_MAX
    flush_ms: int = _LONG_MAX
    cleanup_policy: str = "delete"
    compression_type: str = "producer"
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = _LONG_MAX
    delete_retention_ms: int = 86_400_000
    message_timestamp_type: str = "CreateTime"
    message_timestamp_difference_max_ms: int = _LONG_MAX
    message_timestamp_before_max_ms: int = _LONG_MAX
    message_timestamp_after_max_ms: int = _LONG_MAX
    index_interval_bytes: int = 4096

    @classmethod
    def from_mapping(cls, config: Mapping[str, object] | None,
                     defaults: Mapping[str, object] | None = None) -> "TopicConfig":
        """Typed values: `config` over `defaults` (e.g. broker-wide settings) over Kafka's."""
        merged = {**normalize_topic_config(defaults), **normalize_topic_config(config)}
        return cls(**{underscored_key(k): CONFIG_DEFS[k].parse(v) for k, v in merged.items()
                      if k not in IGNORED})
