"""Per-topic config: accepted keys, canonical values, typed view with Kafka's defaults."""

import pytest

from controller.topic_config import CONFIG_DEFS, IGNORED, TopicConfig, normalize_topic_config
from replicas.errors import InvalidConfig

pytestmark = pytest.mark.unit


def test_normalize_canonical_strings():
    got = normalize_topic_config({"min.insync.replicas": 2, "unclean.leader.election.enable": "TRUE",
                                  "retention.ms": " -1 ", "segment.bytes": "1048576"})
    assert got == {"min.insync.replicas": "2", "unclean.leader.election.enable": "true",
                   "retention.ms": "-1", "segment.bytes": "1048576"}
    assert normalize_topic_config(None) == {}


@pytest.mark.parametrize("bad", [
    {"no.such.key": "1"}, {"min.insync.replicas": "0"}, {"min.insync.replicas": "two"},
    {"retention.ms": "-2"}, {"segment.bytes": "13"}, {"unclean.leader.election.enable": "yes"},
    {"cleanup.policy": "shred"}, {"max.message.bytes": 2**31},
    {"retention.bytes": "-5"}, {"segment.ms": "0"}, {"compression.type": "brotli"},
    {"min.cleanable.dirty.ratio": "1.5"}, {"min.compaction.lag.ms": "-1"},
    {"max.compaction.lag.ms": "0"}, {"delete.retention.ms": "-1"},
    {"leader.replication.throttled.replicas": "0-1"},
    {"follower.replication.throttled.replicas": "0:1,x:2"},
])
def test_bad_config_is_invalid_config(bad):
    with pytest.raises(InvalidConfig) as info:
        normalize_topic_config(bad)
    assert info.value.code == 40 and next(iter(bad)) in str(info.value)


def test_typed_view_defaults_and_overrides():
    assert TopicConfig.from_mapping(None) == TopicConfig()
    tc = TopicConfig.from_mapping({"min.insync.replicas": "2"}, defaults={"min.insync.replicas": 3,
                                                                          "segment.bytes": 1024})
    assert (tc.min_insync_replicas, tc.segment_bytes, tc.unclean_leader_election_enable) == (2, 1024, False)
    # every defined key maps to a TopicConfig field with the same default, but the ignored
    for key, d in CONFIG_DEFS.items():
        if key in IGNORED:
            assert not hasattr(TopicConfig(), key.replace(".", "_"))
        else:
            assert getattr(TopicConfig(), key.replace(".", "_")) == d.default
    # accepted and stored as Kafka 3.8 does, changing nothing
    stored = normalize_topic_config({"message.format.version": "0.10.0.0",
                                     "file.delete.delay.ms": 10000})
    assert stored == {"message.format.version": "0.10.0.0", "file.delete.delay.ms": "10000"}
    assert TopicConfig.from_mapping(stored) == TopicConfig()


@pytest.mark.parametrize("value, stored", [("*", "*"), ("", ""), ("0:1, 0:2,1:3", "0:1,0:2,1:3")])
def test_throttled_replica_lists_are_stored_as_kafka_validates_them(value, stored):
    """kafka-reassign-partitions --throttle sets them (and --verify clears them): stored and
    described, changing nothing (rayka does not throttle replication)."""
    for key in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas"):
        assert normalize_topic_config({key: value}) == {key: stored}
        assert TopicConfig.from_mapping({key: value}) == TopicConfig()
