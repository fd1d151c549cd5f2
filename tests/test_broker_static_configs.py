"""A broker's own static configs (broker.rack) over the cluster-wide ones, and where
broker.rack and replica.selector.class land in a broker's settings (actors/broker_config.py,
`rayka start --broker-config`), table-driven, no Ray, no ZooKeeper."""

from __future__ import annotations

import argparse

import pytest

from actors.broker_config import broker_config_for, split_broker_config
from rayka.cli import _broker_configs
from replicas.errors import InvalidConfig
from replicas.replica_selector import RACK_AWARE

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("shared, own, merged", [
    ({"num.partitions": 4}, None, {"num.partitions": 4}),
    ({"num.partitions": 4}, {}, {"num.partitions": 4}),
    ({"num.partitions": 4}, {"broker.rack": "r1"}, {"num.partitions": 4, "broker.rack": "r1"}),
    # the broker's own key wins, however either spells it
    ({"broker_rack": "all"}, {"broker.rack": "r1"}, {"broker.rack": "r1"}),
    ({"broker.rack": "all"}, {"broker_rack": "r1"}, {"broker_rack": "r1"}),
])
def test_a_brokers_own_keys_are_laid_over_the_shared_ones(shared, own, merged):
    assert broker_config_for(shared, own) == merged


def test_the_shared_config_is_not_changed():
    shared = {"broker.rack": "all"}
    broker_config_for(shared, {"broker.rack": "r1"})
    assert shared == {"broker.rack": "all"}


@pytest.mark.parametrize("config, rack, selector", [
    ({}, None, None),
    ({"broker.rack": "RACK1"}, "RACK1", None),
    ({"broker_rack": "RACK1", "replica_selector_class": RACK_AWARE}, "RACK1", RACK_AWARE),
    ({"replica.selector.class": RACK_AWARE}, None, RACK_AWARE),
])
def test_rack_and_selector_reach_the_kafka_config_and_the_replica_manager(config, rack,
                                                                          selector):
    settings = split_broker_config(config)
    assert (settings.kafka.broker_rack, settings.kafka.replica_selector_class) == \
        (rack, selector)
    assert settings.replica_manager["replica_selector_class"] == selector
    assert "broker.rack" not in settings.topic_defaults          # not a topic default


def test_a_selector_kafka_does_not_ship_is_refused_at_start():
    with pytest.raises(InvalidConfig, match="replica.selector.class"):
        split_broker_config({"replica.selector.class": "com.example.Nearest"})


@pytest.mark.parametrize("items, parsed", [
    (None, {}),
    (["1:broker.rack=a"], {1: {"broker.rack": "a"}}),
    (["1:broker.rack=a", "2:broker.rack=b", "1:num.partitions=3"],
     {1: {"broker.rack": "a", "num.partitions": 3}, 2: {"broker.rack": "b"}}),
])
def test_broker_config_option(items, parsed):
    assert _broker_configs(items) == parsed


@pytest.mark.parametrize("item", ["broker.rack=a", "x:broker.rack=a", "1:broker.rack", ":a=b"])
def test_broker_config_option_errors(item):
    with pytest.raises(argparse.ArgumentTypeError):
        _broker_configs([item])


@pytest.mark.parametrize("config, log_dirs, flush_before_ack", [
    ({}, None, None),
    ({"log.dirs": "/d1, /d2", "log.flush.before.ack": "true"}, ("/d1", "/d2"), True),
    ({"log_dir": "/d0", "log_flush_before_ack": False}, ("/d0",), False),
    ({"log.dirs": ["/a"], "log.dir": "/ignored"}, ("/a",), None),
])
def test_log_dirs_and_flush_before_ack_make_a_broker_config(config, log_dirs, flush_before_ack):
    from replicas.replica_types import BrokerConfig
    rm = split_broker_config(config).replica_manager
    assert rm.get("log_dirs") == log_dirs
    assert rm.get("log_flush_before_ack") == flush_before_ack
    built = BrokerConfig(data_dir="/home", **rm)        # every key is a BrokerConfig field
    assert built.log_flush_before_ack is bool(flush_before_ack)
    assert "log.dirs" not in split_broker_config(config).topic_defaults


def test_log_dirs_naming_nothing_are_refused():
    with pytest.raises(InvalidConfig, match="log.dirs"):
        split_broker_config({"log.dirs": " , "})
