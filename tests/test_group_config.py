"""Per-group configs (coordinator/group_config.py): Kafka 4's GroupConfig names, bounds and
messages as a table, the values a described group shows, and a consumer group's own
session timeout and heartbeat interval reaching its members through the coordinator."""

from __future__ import annotations

import pytest

from coordinator import group_config as gc
from coordinator import messages as m
from coordinator.config import GroupCoordinatorConfig
from tests.test_consumer_requests import answered, join, owned_driver

pytestmark = pytest.mark.unit
BOUNDS = GroupCoordinatorConfig().bounds


@pytest.mark.parametrize("overrides, stored", [
    ({}, {}),
    ({"consumer.session.timeout.ms": "50000"}, {"consumer.session.timeout.ms": "50000"}),
    ({"consumer.heartbeat.interval.ms": " 6000 "}, {"consumer.heartbeat.interval.ms": "6000"}),
    ({"share.auto.offset.reset": "EARLIEST"}, {"share.auto.offset.reset": "earliest"}),
    ({"share.auto.offset.reset": "by_duration:PT10M"},
     {"share.auto.offset.reset": "by_duration:PT10M"}),
    ({"share.isolation.level": "READ_COMMITTED"}, {"share.isolation.level": "read_committed"}),
    ({"share.record.lock.duration.ms": "15000", "share.session.timeout.ms": "60000"},
     {"share.record.lock.duration.ms": "15000", "share.session.timeout.ms": "60000"}),
])
def test_valid_overrides_are_stored_normalised(overrides, stored):
    assert gc.validate(overrides, BOUNDS) == stored


@pytest.mark.parametrize("overrides, message", [
    ({"consumer.session.timeout": "1"}, "Unknown group config name: consumer.session.timeout"),
    ({"consumer.session.timeout.ms": "x"},
     "Invalid value x for configuration consumer.session.timeout.ms: Not a number of type INT"),
    ({"consumer.session.timeout.ms": "0"},
     "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1"),
    ({"consumer.session.timeout.ms": "44999"},
     "consumer.session.timeout.ms must be greater than or equal to "
     "group.consumer.min.session.timeout.ms"),
    ({"consumer.session.timeout.ms": "60001"},
     "consumer.session.timeout.ms must be less than or equal to "
     "group.consumer.max.session.timeout.ms"),
    ({"consumer.heartbeat.interval.ms": "15001"},
     "consumer.heartbeat.interval.ms must be less than or equal to "
     "group.consumer.max.heartbeat.interval.ms"),
    ({"share.heartbeat.interval.ms": "4999"},
     "share.heartbeat.interval.ms must be greater than or equal to "
     "group.share.min.heartbeat.interval.ms"),
    ({"share.record.lock.duration.ms": "999"},
     "Invalid value 999 for configuration share.record.lock.duration.ms: "
     "Value must be at least 1000"),
    ({"share.record.lock.duration.ms": "60001"},
     "share.record.lock.duration.ms must be less than or equal to "
     "group.share.max.record.lock.duration.ms"),
    ({"share.auto.offset.reset": "none"},
     "Invalid value none for configuration share.auto.offset.reset: "
     "String must be one of: latest, earliest or by_duration:<ISO-8601 duration>"),
    ({"share.auto.offset.reset": "by_duration:-PT1H"},
     "Invalid value by_duration:-PT1H for configuration share.auto.offset.reset: "
     "String must be one of: latest, earliest or by_duration:<ISO-8601 duration>"),
    ({"share.isolation.level": "serializable"},
     "Invalid value serializable for configuration share.isolation.level: "
     "String must be one of: read_uncommitted, read_committed"),
])
def test_invalid_overrides_get_kafkas_message(overrides, message):
    with pytest.raises(ValueError) as got:
        gc.validate(overrides, BOUNDS)
    assert str(got.value) == message


def test_session_timeout_must_exceed_the_interval_with_wider_broker_bounds():
    bounds = GroupCoordinatorConfig(group_consumer_min_session_timeout_ms=1000,
                                    group_consumer_max_heartbeat_interval_ms=60000).bounds
    with pytest.raises(ValueError, match="consumer.session.timeout.ms must be greater than "
                                         "consumer.heartbeat.interval.ms"):
        gc.validate({"consumer.session.timeout.ms": "6000",
                     "consumer.heartbeat.interval.ms": "6000"}, bounds)


def test_describe_lists_every_key_with_its_source():
    got = gc.describe({"share.auto.offset.reset": "earliest"}, BOUNDS)
    assert [k for k, _v, _s in got] == sorted(gc.GROUP_CONFIG_NAMES)
    assert dict((k, (v, s)) for k, v, s in got)["share.auto.offset.reset"] == \
        ("earliest", gc.SOURCE_GROUP_CONFIG)
    assert dict((k, (v, s)) for k, v, s in got)["consumer.session.timeout.ms"] == \
        ("45000", gc.SOURCE_DEFAULT)
    assert gc.describe({}, BOUNDS, ["share.record.lock.duration.ms", "nope"]) == \
        [("share.record.lock.duration.ms", "30000", gc.SOURCE_DEFAULT)]


@pytest.mark.parametrize("text, ms", [
    ("by_duration:PT1H", 3_600_000), ("by_duration:P1DT1.5S", 86_401_500),
    ("by_duration:pt30m", 1_800_000), ("by_duration:P", None), ("latest", None),
    ("by_duration:1H", None),
])
def test_by_duration_is_an_iso_8601_duration(text, ms):
    assert gc.duration_ms(text) == ms


def test_a_groups_own_heartbeat_interval_reaches_its_members():
    d = owned_driver()
    assert answered(d, join("m1")).heartbeat_interval_ms == 5000
    d.send(m.GroupConfigs((("g", (("consumer.heartbeat.interval.ms", "7000"),)),)))
    assert answered(d, join("m2")).heartbeat_interval_ms == 7000
    d.send(m.GroupConfigs(()))
    assert answered(d, join("m3")).heartbeat_interval_ms == 5000
