"""Metadata and DescribeCluster through protocol/handlers/ (over tests/handler_wire.py): which
topics a request means by version, auto-creation as the request asks, the brokers with an
endpoint for the listener asked on, partitions, controller and cluster id, and topics asked
by id (v12). Table-driven over every served version where a rule depends on the version."""

from __future__ import annotations

import uuid

import pytest
from kafka.protocol.admin import DescribeClusterRequest
from kafka.protocol.metadata import MetadataRequest

from tests.handler_wire import ask, cluster, metadata_request, versions
from tests.protocol_samples import TOPIC_IDS

pytestmark = pytest.mark.unit


def test_metadata_v0_empty_topic_list_means_all_topics():
    fake = cluster()
    resp = ask(fake, metadata_request(0, []))
    assert [t.name for t in resp.topics] == ["orders", "audit"]
    assert fake.calls_of("metadata") == [
        {"topics": None, "allow_auto_create": True, "listener": "PLAINTEXT"}]


@pytest.mark.parametrize("version", versions(3, 1))
def test_metadata_v1_up_null_means_all_topics_and_empty_means_none(version):
    fake = cluster()
    every = ask(fake, metadata_request(version, None))
    assert [t.name for t in every.topics] == ["orders", "audit"]
    none = ask(fake, metadata_request(version, []))
    assert none.topics == []
    assert [c["topics"] for c in fake.calls_of("metadata")] == [None, []]


@pytest.mark.parametrize("allow", [True, False])
@pytest.mark.parametrize("version", versions(3))
def test_metadata_unknown_topic_auto_creation_follows_the_request(version, allow):
    # v0-3 have no flag: always allowed. v4+: the flag decides.
    fake = cluster()
    resp = ask(fake, metadata_request(version, ["orders", "fresh"], allow=allow))
    allowed = allow or version < 4
    assert fake.calls_of("metadata")[0]["allow_auto_create"] is allowed
    assert [(t.name, t.error_code) for t in resp.topics] == [
        ("orders", 0), ("fresh", 5 if allowed else 3)]
    assert resp.topics[1].partitions == []
    assert ("fresh" in fake.topics) is allowed


@pytest.mark.parametrize("version", [0, 4, 12])
def test_metadata_topic_error_is_what_the_broker_says(version):
    fake = cluster()
    fake.errors["audit"] = 29                   # TOPIC_AUTHORIZATION_FAILED, say
    resp = ask(fake, metadata_request(version, ["audit", "bad name!"]))
    assert [(t.name, t.error_code) for t in resp.topics] == [("audit", 29), ("bad name!", 17)]


@pytest.mark.parametrize("listener,expected", [
    ("PLAINTEXT", [(1, "10.0.0.1", 9092, "r1"), (2, "10.0.0.2", 9092, None)]),
    ("EXTERNAL", [(1, "ext-1", 19092, "r1"), (3, "ext-3", 19093, "r3")]),
    ("INTERNAL", []),
])
@pytest.mark.parametrize("version", versions(3))
def test_metadata_lists_the_brokers_with_an_endpoint_for_the_listener_asked_on(
        version, listener, expected):
    fake = cluster()
    resp = ask(fake, metadata_request(version, ["orders"]), listener=listener)
    assert fake.calls_of("metadata")[0]["listener"] == listener
    got = [(b.node_id, b.host, b.port, b.rack) for b in resp.brokers]
    # rack exists from v1 (kafka-python reads an absent field as its default, None).
    assert got == [(n, h, p, r if version >= 1 else None) for n, h, p, r in expected]


@pytest.mark.parametrize("version", versions(3))
def test_metadata_partitions_controller_and_cluster_by_version(version):
    fake = cluster()
    fake.partition(("orders", 2)).leader = 9          # leader not live
    fake.partition(("orders", 1)).isr = (1, 9)
    fake.errors[("orders", 1)] = 9                    # REPLICA_NOT_AVAILABLE, injected
    resp = ask(fake, metadata_request(version, ["orders"]))
    (topic,) = resp.topics
    assert (topic.name, topic.error_code, topic.is_internal) == ("orders", 0, False)
    if version >= 10:
        assert topic.topic_id == TOPIC_IDS["orders"]
    rows = [(p.partition_index, p.error_code, p.leader_id, p.leader_epoch, p.replica_nodes,
             p.isr_nodes, p.offline_replicas) for p in topic.partitions]
    epoch = 4 if version >= 7 else -1
    offline = [9] if version >= 5 else []
    assert rows == [(0, 0, 1, epoch, [1, 2, 9], [1, 2], offline),
                    (1, 9, 1, epoch, [1, 2, 9], [1], offline),
                    (2, 5, -1, epoch, [1, 2, 9], [1, 2], offline)]
    assert resp.controller_id == (2 if version >= 1 else -1)
    assert resp.cluster_id == ("rayka-test" if version >= 2 else None)


@pytest.mark.parametrize("listener", ["PLAINTEXT", "EXTERNAL"])
@pytest.mark.parametrize("version", versions(60))
def test_describe_cluster_lists_brokers_controller_and_cluster(version, listener):
    fake = cluster()
    resp = ask(fake, DescribeClusterRequest[version](include_cluster_authorized_operations=False),
               listener=listener)
    assert fake.calls_of("metadata") == [
        {"topics": [], "allow_auto_create": False, "listener": listener}]
    assert (resp.error_code, resp.cluster_id, resp.controller_id) == (0, "rayka-test", 2)
    assert [(b.broker_id, b.host, b.port) for b in resp.brokers] == (
        [(1, "10.0.0.1", 9092), (2, "10.0.0.2", 9092)] if listener == "PLAINTEXT"
        else [(1, "ext-1", 19092), (3, "ext-3", 19093)])
    if version >= 1:
        assert resp.endpoint_type == 1


def test_metadata_v12_by_topic_id():
    fake = cluster()
    t = MetadataRequest.MetadataRequestTopic
    ghost = uuid.UUID(int=5)
    resp = ask(fake, MetadataRequest[12](topics=[t(name=None, topic_id=TOPIC_IDS["audit"]),
                                                 t(name=None, topic_id=ghost)],
                                         allow_auto_topic_creation=True,
                                         include_topic_authorized_operations=False))
    assert [(x.name, x.topic_id, x.error_code, len(x.partitions)) for x in resp.topics] == [
        ("audit", TOPIC_IDS["audit"], 0, 1), (None, ghost, 100, 0)]
    assert set(fake.topics) == {"orders", "audit"}        # an id is never auto-created
