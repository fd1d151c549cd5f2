"""A topic config's synonyms in DescribeConfigs (actors/dynamic_config.py topic_synonyms):
Kafka 3.9's ConfigHelper.configSynonyms over the broker keys behind each topic key."""

from __future__ import annotations

import threading

import pytest

from actors.dynamic_config import (DEFAULT, DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER,
                                   STATIC_BROKER, TOPIC_SYNONYMS, BrokerDynamicConfig)
from controller.topic_config import CONFIG_DEFS

pytestmark = pytest.mark.unit


def config(static=None, per_broker=None, cluster_default=None) -> BrokerDynamicConfig:
    c = BrokerDynamicConfig(1, dict(static or {}), threading.Lock())
    c.per_broker, c.cluster_default = dict(per_broker or {}), dict(cluster_default or {})
    return c


@pytest.mark.parametrize("topic_key, kw, want", [
    # Kafka's default alone
    ("cleanup.policy", {}, [("log.cleanup.policy", "delete", DEFAULT)]),
    # only log.retention.hours has a default: no synonym of retention.ms (Kafka's dropWhile)
    ("retention.ms", {}, []),
    ("segment.ms", {}, []),
    ("retention.ms", {"static": {"retention.ms": 3_600_000}},
     [("log.retention.ms", "3600000", STATIC_BROKER), ("log.retention.hours", "168", DEFAULT)]),
    ("retention.ms", {"per_broker": {"log.retention.ms": "5"},
                      "cluster_default": {"log.retention.hours": "2"}},
     [("log.retention.ms", "5", DYNAMIC_BROKER), ("log.retention.hours", "2", DYNAMIC_DEFAULT_BROKER),
      ("log.retention.hours", "168", DEFAULT)]),
    ("max.message.bytes", {"cluster_default": {"message.max.bytes": "2000"}},
     [("message.max.bytes", "2000", DYNAMIC_DEFAULT_BROKER),
      ("message.max.bytes", "1048588", DEFAULT)]),
    # no broker key behind these
    ("leader.replication.throttled.replicas", {}, []),
    ("remote.storage.enable", {}, []),
])
def test_synonyms_most_specific_first(topic_key, kw, want):
    assert list(config(**kw).topic_synonyms(topic_key)) == want


def test_every_broker_key_named_is_kafkas_and_every_topic_key_is_known():
    assert set(TOPIC_SYNONYMS) <= set(CONFIG_DEFS)
    missing = set(CONFIG_DEFS) - set(TOPIC_SYNONYMS)
    assert missing == {"leader.replication.throttled.replicas",
                       "follower.replication.throttled.replicas", "remote.storage.enable",
                       "remote.log.copy.disable", "remote.log.delete.on.disable"}
