"""Per-group configs (Kafka 4's GroupConfig, KIP-848 and KIP-932): their names, types,
defaults, bounds and the values a group runs with, pure.

Rules (GroupConfig.java, GroupCoordinatorConfig.java, ShareGroupConfig.java of Kafka 4.x):
- The keys: consumer.session.timeout.ms, consumer.heartbeat.interval.ms (KIP-848 groups),
  share.session.timeout.ms, share.heartbeat.interval.ms, share.record.lock.duration.ms,
  share.auto.offset.reset, share.isolation.level (KIP-932 groups, Kafka 4.2). Any other name is INVALID_CONFIG "Unknown group
  config name: N"; a value that does not parse is INVALID_CONFIG as Kafka's ConfigDef says
  it.
- A key not set on the group takes the broker's value (group.consumer.session.timeout.ms,
  group.share.record.lock.duration.ms, ...); share.auto.offset.reset defaults to latest
  and takes latest, earliest (any case) or by_duration:<ISO-8601 duration> (PnDTnHnMn.nS:
  the first offset at or after now minus that); share.isolation.level read_uncommitted
  (the default) or read_committed.
- Bounds are the broker's: each timeout and interval within its group.<kind>.min/max.* pair
  (Kafka's messages: "consumer.session.timeout.ms must be greater than or equal to
  group.consumer.min.session.timeout.ms"), the record lock within
  group.share.min/max.record.lock.duration.ms and at least 1000, every int at least 1, and
  a session timeout greater than its heartbeat interval. A group's whole config (its
  overrides over the defaults) is checked, as Kafka's validate does.
- Describing a group's config lists every key: an override's source is GROUP_CONFIG (8),
  the rest DEFAULT_CONFIG (5), for a group that exists or not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CONSUMER_SESSION = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT = "consumer.heartbeat.interval.ms"
SHARE_SESSION = "share.session.timeout.ms"
SHARE_HEARTBEAT = "share.heartbeat.interval.ms"
SHARE_LOCK = "share.record.lock.duration.ms"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION = "share.isolation.level"
GROUP_CONFIG_NAMES = (CONSUMER_SESSION, CONSUMER_HEARTBEAT, SHARE_SESSION, SHARE_HEARTBEAT,
                      SHARE_LOCK, SHARE_AUTO_OFFSET_RESET, SHARE_ISOLATION)
STRINGS = (SHARE_AUTO_OFFSET_RESET, SHARE_ISOLATION)
RESET_POLICIES = ("latest", "earliest")
BY_DURATION = "by_duration:"
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
# ISO-8601 durations as Java's Duration.parse reads them: PnDTnHnMn.nS, no negative parts
_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?",
                       re.IGNORECASE)
SOURCE_GROUP_CONFIG, SOURCE_DEFAULT = 8, 5
INT_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class GroupConfigBounds:
    """The broker's defaults and min/max for each group config (Kafka's names, dotted),
    taken from the broker's config (coordinator/config.py: GroupCoordinatorConfig.bounds),
    which holds Kafka's defaults."""
    group_consumer_session_timeout_ms: int
    group_consumer_min_session_timeout_ms: int
    group_consumer_max_session_timeout_ms: int
    group_consumer_heartbeat_interval_ms: int
    group_consumer_min_heartbeat_interval_ms: int
    group_consumer_max_heartbeat_interval_ms: int
    group_share_session_timeout_ms: int
    group_share_min_session_timeout_ms: int
    group_share_max_session_timeout_ms: int
    group_share_heartbeat_interval_ms: int
    group_share_min_heartbeat_interval_ms: int
    group_share_max_heartbeat_interval_ms: int
    group_share_record_lock_duration_ms: int
    group_share_min_record_lock_duration_ms: int
    group_share_max_record_lock_duration_ms: int

    def defaults(self) -> dict[str, str]:
        return {CONSUMER_SESSION: str(self.group_consumer_session_timeout_ms),
                CONSUMER_HEARTBEAT: str(self.group_consumer_heartbeat_interval_ms),
                SHARE_SESSION: str(self.group_share_session_timeout_ms),
                SHARE_HEARTBEAT: str(self.group_share_heartbeat_interval_ms),
                SHARE_LOCK: str(self.group_share_record_lock_duration_ms),
                SHARE_AUTO_OFFSET_RESET: "latest", SHARE_ISOLATION: "read_uncommitted"}

    def ranges(self) -> dict[str, tuple[int, str, int, str]]:
        """key → (min, the broker key naming it, max, the broker key naming it)."""
        def pair(kind: str, what: str) -> tuple[int, str, int, str]:
            lo, hi = f"group_{kind}_min_{what}", f"group_{kind}_max_{what}"
            return (getattr(self, lo), lo.replace("_", "."), getattr(self, hi),
                    hi.replace("_", "."))
        return {CONSUMER_SESSION: pair("consumer", "session_timeout_ms"),
                CONSUMER_HEARTBEAT: pair("consumer", "heartbeat_interval_ms"),
                SHARE_SESSION: pair("share", "session_timeout_ms"),
                SHARE_HEARTBEAT: pair("share", "heartbeat_interval_ms"),
                SHARE_LOCK: pair("share", "record_lock_duration_ms")}


def _parse_int(name: str, value: str, at_least: int) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError(f"Invalid value {value} for configuration {name}: "
                         f"Not a number of type INT") from None
    if not -2**31 <= number <= INT_MAX:
        raise ValueError(f"Invalid value {value} for configuration {name}: "
                         f"Not a number of type INT")
    if number < at_least:
        raise ValueError(f"Invalid value {number} for configuration {name}: "
                         f"Value must be at least {at_least}")
    return number


def effective(overrides: dict[str, str], bounds: GroupConfigBounds) -> dict[str, str]:
    """The group's values: its overrides over the broker's defaults (unknown keys dropped)."""
    out = bounds.defaults()
    out.update({k: v for k, v in overrides.items() if k in out})
    return out


def validate(overrides: dict[str, str], bounds: GroupConfigBounds) -> dict[str, str]:
    """The overrides as stored; ValueError (INVALID_CONFIG) with Kafka's message."""
    for name in overrides:
        if name not in GROUP_CONFIG_NAMES:
            raise ValueError(f"Unknown group config name: {name}")
    values = effective(overrides, bounds)
    ints = {name: _parse_int(name, values[name], 1000 if name == SHARE_LOCK else 1)
            for name in GROUP_CONFIG_NAMES if name not in STRINGS}
    reset = str(values[SHARE_AUTO_OFFSET_RESET]).strip()
    if reset.lower() not in RESET_POLICIES and duration_ms(reset) is None:
        raise ValueError(f"Invalid value {reset} for configuration {SHARE_AUTO_OFFSET_RESET}: "
                         f"String must be one of: {', '.join(RESET_POLICIES)} or "
                         f"{BY_DURATION}<ISO-8601 duration>")
    isolation = str(values[SHARE_ISOLATION]).strip().lower()
    if isolation not in ISOLATION_LEVELS:
        raise ValueError(f"Invalid value {values[SHARE_ISOLATION]} for configuration "
                         f"{SHARE_ISOLATION}: String must be one of: "
                         f"{', '.join(ISOLATION_LEVELS)}")
    for name, (lo, lo_key, hi, hi_key) in bounds.ranges().items():
        if ints[name] < lo:
            raise ValueError(f"{name} must be greater than or equal to {lo_key}")
        if ints[name] > hi:
            raise ValueError(f"{name} must be less than or equal to {hi_key}")
    for session, interval in ((CONSUMER_SESSION, CONSUMER_HEARTBEAT),
                              (SHARE_SESSION, SHARE_HEARTBEAT)):
        if ints[session] <= ints[interval]:
            raise ValueError(f"{session} must be greater than {interval}")
    out = {}
    for name, value in overrides.items():
        text = str(value).strip()
        out[name] = (text if duration_ms(text) is not None else text.lower()) \
            if name in STRINGS else str(ints[name])
    return out


def duration_ms(reset: str) -> int | None:
    """share.auto.offset.reset's `by_duration:<ISO-8601 duration>` in ms; None if it is not
    one."""
    if not reset.lower().startswith(BY_DURATION):
        return None
    m = _DURATION.fullmatch(reset[len(BY_DURATION):].strip())
    if m is None or not any(m.groups()):
        return None
    days, hours, minutes, seconds = (float(x) if x else 0.0 for x in m.groups())
    return int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)


def describe(overrides: dict[str, str], bounds: GroupConfigBounds,
             keys=None) -> list[tuple[str, str, int]]:
    """(name, value, source) for every key asked (all when `keys` is None), in name order."""
    values = effective(overrides, bounds)
    wanted = sorted(values) if keys is None else [k for k in sorted(values) if k in keys]
    return [(k, values[k], SOURCE_GROUP_CONFIG if k in overrides else SOURCE_DEFAULT)
            for k in wanted]
