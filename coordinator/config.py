"""The group coordinator's configuration: Kafka's names and defaults (GroupCoordinatorConfig).

Rules:
- Field names are Kafka's property names with dots as underscores; `from_properties` takes a
  mapping keyed by Kafka's own names ("group.min.session.timeout.ms", ...) and rejects
  unknown ones, so a typo in a broker config is loud.
- Defaults (GroupCoordinatorConfig.java at trunk 1eb7644): group.min.session.timeout.ms 6000,
  group.max.session.timeout.ms 1800000, group.initial.rebalance.delay.ms 3000,
  group.max.size Integer.MAX_VALUE (unbounded), offsets.topic.num.partitions 50,
  offset.metadata.max.bytes 4096, offsets.retention.minutes 10080 (7 days),
  offsets.retention.check.interval.ms 600000; KIP-848 consumer groups:
  group.consumer.session.timeout.ms 45000, group.consumer.heartbeat.interval.ms 5000,
  group.consumer.max.size Integer.MAX_VALUE (their assignors are uniform then range), the
  bounds a group's own consumer.* configs must keep (min/max session timeout 45000/60000,
  heartbeat interval 5000/15000); KIP-932 share groups: group.share.session.timeout.ms
  45000 (45000-60000), group.share.heartbeat.interval.ms 5000 (5000-15000),
  group.share.max.size 200, group.share.record.lock.duration.ms 30000 (15000-60000),
  group.share.delivery.count.limit 5, group.share.partition.max.record.locks 2000; the
  share coordinator's share.coordinator.state.topic.num.partitions 50.
- Not a Kafka config but Kafka's constant: a NEW member's JoinGroup is expired after
  CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS (5 minutes) if the join phase has not completed.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Mapping

from coordinator.consumer_group import ConsumerGroupConfig
from coordinator.group_config import (CONSUMER_HEARTBEAT, CONSUMER_SESSION, GroupConfigBounds,
                                      effective)
from replicas.config_keys import dotted_key

INT_MAX = 2**31 - 1
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


@dataclass(frozen=True, slots=True)
class GroupCoordinatorConfig:
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = INT_MAX
    offsets_topic_num_partitions: int = 50
    offset_metadata_max_bytes: int = 4096
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 600_000
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_max_size: int = INT_MAX
    group_consumer_min_session_timeout_ms: int = 45_000
    group_consumer_max_session_timeout_ms: int = 60_000
    group_consumer_min_heartbeat_interval_ms: int = 5_000
    group_consumer_max_heartbeat_interval_ms: int = 15_000
    group_share_session_timeout_ms: int = 45_000
    group_share_min_session_timeout_ms: int = 45_000
    group_share_max_session_timeout_ms: int = 60_000
    group_share_heartbeat_interval_ms: int = 5_000
    group_share_min_heartbeat_interval_ms: int = 5_000
    group_share_max_heartbeat_interval_ms: int = 15_000
    group_share_max_size: int = 200
    group_share_record_lock_duration_ms: int = 30_000
    group_share_min_record_lock_duration_ms: int = 15_000
    group_share_max_record_lock_duration_ms: int = 60_000
    group_share_delivery_count_limit: int = 5
    group_share_partition_max_record_locks: int = 2000
    share_coordinator_state_topic_num_partitions: int = 50

    def __post_init__(self) -> None:
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ValueError("group.min.session.timeout.ms > group.max.session.timeout.ms")
        # Kafka 4's GroupCoordinatorConfig requires each KIP-848 / KIP-932 default within its
        # bounds and below its session timeout, so no group's effective config starts invalid
        for kind in ("consumer", "share"):
            for what in ("heartbeat_interval_ms", "session_timeout_ms"):
                lo = getattr(self, f"group_{kind}_min_{what}")
                hi = getattr(self, f"group_{kind}_max_{what}")
                value = getattr(self, f"group_{kind}_{what}")
                name = dotted_key(f"group_{kind}_{what}")
                if hi < lo:
                    raise ValueError(f"{dotted_key(f'group_{kind}_max_{what}')} must be greater "
                                     f"than or equal to {dotted_key(f'group_{kind}_min_{what}')}")
                if value < lo:
                    raise ValueError(f"{name} must be greater than or equal to "
                                     f"{dotted_key(f'group_{kind}_min_{what}')}")
                if value > hi:
                    raise ValueError(f"{name} must be less than or equal to "
                                     f"{dotted_key(f'group_{kind}_max_{what}')}")
            if getattr(self, f"group_{kind}_heartbeat_interval_ms") >= \
                    getattr(self, f"group_{kind}_session_timeout_ms"):
                raise ValueError(f"group.{kind}.heartbeat.interval.ms must be less than "
                                 f"group.{kind}.session.timeout.ms")
        if (self.group_max_size < 1 or self.offsets_topic_num_partitions < 1
                or self.offsets_retention_minutes < 1 or self.offsets_retention_check_interval_ms < 1
                or self.group_initial_rebalance_delay_ms < 0 or self.offset_metadata_max_bytes < 0
                or self.group_consumer_max_size < 1
                or not 0 < self.group_consumer_heartbeat_interval_ms
                < self.group_consumer_session_timeout_ms):
            raise ValueError(f"bad group coordinator config {self}")

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @property
    def bounds(self) -> GroupConfigBounds:
        """The defaults and bounds of per-group configs (coordinator/group_config.py)."""
        return GroupConfigBounds(**{f.name: getattr(self, f.name)
                                    for f in fields(GroupConfigBounds)})

    def consumer_for(self, overrides: Mapping[str, str]) -> ConsumerGroupConfig:
        """A consumer group's config with its own session timeout and heartbeat interval."""
        values = effective(dict(overrides), self.bounds)
        return ConsumerGroupConfig(int(values[CONSUMER_SESSION]), int(values[CONSUMER_HEARTBEAT]),
                                   self.group_consumer_max_size)

    @property
    def consumer(self) -> ConsumerGroupConfig:
        return ConsumerGroupConfig(self.group_consumer_session_timeout_ms,
                                   self.group_consumer_heartbeat_interval_ms,
                                   self.group_consumer_max_size)

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> "GroupCoordinatorConfig":
        known = {dotted_key(f.name): f.name for f in fields(cls)}
        unknown = sorted(set(props) - set(known))
        if unknown:
            raise ValueError(f"unknown group coordinator configs: {unknown}")
        return cls(**{known[k]: int(v) for k, v in props.items()})
