"""controller/topic_admin.py: one topic-creation rule set for the brokers' CreateTopics and
rayka's Admin (rayka/client/admin.py), which passes no broker defaults."""

from __future__ import annotations

import random

import pytest

from controller.topic_admin import plan_topic
from rayka.client.admin import Admin
from replicas.errors import (InvalidPartitions, InvalidReplicationFactor, InvalidRequest,
                             InvalidTopic)

pytestmark = pytest.mark.unit
LIVE = [1, 2, 3]


@pytest.mark.parametrize("args, error, message", [
    (("bad name!", 1, 1), InvalidTopic, "Topic name is invalid: 'bad name!' contains one or "
     "more characters other than ASCII alphanumerics, '.', '_' and '-'"),
    (("t", -1, 1), InvalidPartitions, "Number of partitions must be at least 1 (got -1)."),
    (("t", 0, 1), InvalidPartitions, "Number of partitions must be at least 1 (got 0)."),
    (("t", "2", 1), InvalidPartitions, "Number of partitions must be at least 1 (got '2')."),
    (("t", 1, -1), InvalidReplicationFactor, "Replication factor must be at least 1 (got -1)."),
    (("t", 1, 4), InvalidReplicationFactor, "Replication factor: 4 larger than available "
     "brokers: 3."),
])
def test_without_broker_defaults_minus_one_is_a_bad_count(args, error, message):
    with pytest.raises(error) as info:
        plan_topic(*args, LIVE)
    assert type(info.value) is error and info.value.message == message


def test_a_kafka_request_takes_the_broker_defaults_for_minus_one():
    plan = plan_topic("t", -1, -1, LIVE, default_partitions=4, default_replication_factor=2,
                      rng=random.Random(1))
    assert (plan.partitions, plan.replication_factor) == (4, 2)
    with pytest.raises(InvalidRequest):
        plan_topic("t", 2, -1, LIVE, assignment={0: [1]}, default_partitions=4)


class _Store:
    created = None

    def get_broker_ids(self):
        return set(LIVE)

    def create_topic(self, name, assignment, config):
        self.created = (name, assignment, config)


class _Cluster:
    def __init__(self):
        self.store = _Store()


@pytest.mark.parametrize("partitions, rf, error", [
    (-1, 1, InvalidPartitions), (1, -1, InvalidReplicationFactor), (1, 4, InvalidReplicationFactor),
])
def test_the_admin_refuses_what_the_rules_refuse_and_writes_nothing(partitions, rf, error):
    cluster = _Cluster()
    with pytest.raises(error):
        Admin(cluster).create_topic("t", partitions, rf, wait=False)
    assert cluster.store.created is None
