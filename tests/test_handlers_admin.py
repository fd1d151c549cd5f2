"""Topic and config administration through protocol/handlers/ (over tests/handler_wire.py):
CreateTopics (with v7's topic id), DeleteTopics (by id from v6), CreatePartitions,
DescribeConfigs and IncrementalAlterConfigs, validate_only where the API has it. The admin
APIs added for Kafka 3.8's surface are test_protocol_admin_apis's."""

from __future__ import annotations

import uuid

import pytest
from kafka.protocol.admin import (
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)

from protocol.api import ConfigResource, topic_uuid
from tests.handler_wire import ask, cluster, delete_topics_request, versions
from tests.protocol_samples import TOPIC_IDS

pytestmark = pytest.mark.unit


# -- CreateTopics, DeleteTopics, CreatePartitions ------------------------------------------
@pytest.mark.parametrize("validate_only", [False, True])
@pytest.mark.parametrize("version", versions(19))
def test_create_topics(version, validate_only):
    fake = cluster()
    fake.num_partitions = 4
    t = CreateTopicsRequest.CreatableTopic
    c = t.CreatableTopicConfig
    resp = ask(fake, CreateTopicsRequest[version](timeout_ms=25000, validate_only=validate_only,
                                                  topics=[
        t(name="twice", num_partitions=3, replication_factor=1, assignments=[], configs=[]),
        t(name="fresh", num_partitions=-1, replication_factor=-1, assignments=[],
          configs=[c(name="retention.ms", value="1000")]),
        t(name="twice", num_partitions=1, replication_factor=1, assignments=[], configs=[]),
        t(name="audit", num_partitions=1, replication_factor=1, assignments=[], configs=[])]))
    (call,) = fake.calls_of("create_topics")
    validate_only = validate_only and version >= 1                # v0 cannot ask
    assert (call["timeout_ms"], call["validate_only"]) == (25000, validate_only)
    assert [(s.name, s.partitions, s.replication_factor, dict(s.configs))
            for s in call["specs"]] == [("fresh", -1, -1, {"retention.ms": "1000"}),
                                        ("audit", 1, 1, {})]
    # every copy of a duplicated name is answered (Kafka's multi-collection of results)
    assert [(r.name, r.error_code) for r in resp.topics] == [
        ("twice", 42), ("fresh", 0), ("twice", 42), ("audit", 36)]
    if version >= 1:                    # error messages from v1
        assert resp.topics[0].error_message == "Found multiple entries for this topic."
        assert resp.topics[1].error_message is None
    assert ("fresh" in fake.topics) is not validate_only and "twice" not in fake.topics
    fresh, audit = resp.topics[1], resp.topics[3]
    if version >= 5:                     # the broker's numbers and configs, from v5
        assert (fresh.num_partitions, fresh.replication_factor) == (4, 1)
        assert {c.name: (c.value, c.config_source) for c in fresh.configs}["retention.ms"] \
            == ("1000", 1)
        assert len(fresh.configs) == 4
        assert audit.configs is None and resp.topics[0].configs is None
    else:
        assert (fresh.num_partitions, fresh.replication_factor) == (-1, -1)
        assert fresh.configs in ([], None)


@pytest.mark.parametrize("version", versions(20))
def test_delete_topics(version):
    fake = cluster()
    fake.add_topic("dup")
    req = delete_topics_request(version, ["orders", "ghost", "dup", "dup"])
    resp = ask(fake, req)
    # Kafka 3.8 has no duplicate rule here: deleted once, every copy answered
    assert fake.calls_of("delete_topics") == [{"names": ["orders", "ghost", "dup"],
                                               "timeout_ms": 20000}]
    assert [(r.name, r.error_code) for r in resp.responses] == [
        ("orders", 0), ("ghost", 3), ("dup", 0), ("dup", 0)]
    if version >= 5:
        assert [r.error_message is None for r in resp.responses] == [True, False, True, True]
    if version >= 6:
        assert [r.topic_id for r in resp.responses] == [None] * 4     # the zero UUID
    assert set(fake.topics) == {"audit"}


def test_delete_topics_v6_by_id_deletes_known_ids_and_answers_unknown_topic_id():
    fake = cluster()
    s = DeleteTopicsRequest.DeleteTopicState
    some_id = uuid.UUID("0123456789abcdef0123456789abcdef")
    resp = ask(fake, DeleteTopicsRequest[6](timeout_ms=1000, topics=[
        s(name="audit", topic_id=uuid.UUID(int=0)), s(name=None, topic_id=some_id),
        s(name=None, topic_id=TOPIC_IDS["orders"])]))
    assert [(r.name, r.topic_id, r.error_code) for r in resp.responses] == [
        ("audit", None, 0), (None, some_id, 100), ("orders", TOPIC_IDS["orders"], 0)]
    assert fake.calls_of("delete_topics") == [{"names": ["audit", "orders"], "timeout_ms": 1000}]
    assert fake.topics == {}


def test_delete_topics_v6_with_a_name_and_an_id_is_invalid_request():
    fake = cluster()
    s = DeleteTopicsRequest.DeleteTopicState
    resp = ask(fake, DeleteTopicsRequest[6](timeout_ms=1000, topics=[
        s(name="audit", topic_id=TOPIC_IDS["audit"])]))
    assert [(r.name, r.error_code) for r in resp.responses] == [("audit", 42)]
    assert fake.calls_of("delete_topics") == [] and "audit" in fake.topics


@pytest.mark.parametrize("version", versions(19, 7))
def test_create_topics_v7_answers_the_new_topic_id(version):
    fake = cluster()
    t = CreateTopicsRequest.CreatableTopic
    resp = ask(fake, CreateTopicsRequest[version](timeout_ms=1000, validate_only=False, topics=[
        t(name="fresh", num_partitions=1, replication_factor=1, assignments=[], configs=[])]))
    (result,) = resp.topics
    assert result.error_code == 0
    assert result.topic_id == topic_uuid(fake.topic_id_of["fresh"]) != uuid.UUID(int=0)


@pytest.mark.parametrize("validate_only", [False, True])
@pytest.mark.parametrize("version", versions(37))
def test_create_partitions(version, validate_only):
    fake = cluster()
    fake.add_topic("pair", 2)
    t = CreatePartitionsRequest.CreatePartitionsTopic
    a = t.CreatePartitionsAssignment
    resp = ask(fake, CreatePartitionsRequest[version](
        timeout_ms=15000, validate_only=validate_only, topics=[
            t(name="orders", count=5, assignments=[a(broker_ids=[1, 2]), a(broker_ids=[2, 1])]),
            t(name="pair", count=1, assignments=None),
            t(name="ghost", count=2, assignments=None),
            t(name="audit", count=2, assignments=None),
            t(name="audit", count=3, assignments=None)]))
    assert fake.calls_of("create_partitions") == [{
        "asks": [("orders", 5, [(1, 2), (2, 1)]), ("pair", 1, None), ("ghost", 2, None)],
        "timeout_ms": 15000, "validate_only": validate_only}]
    assert [(r.name, r.error_code) for r in resp.results] == [
        ("orders", 0), ("pair", 37), ("ghost", 3), ("audit", 42)]
    assert resp.results[0].error_message is None
    assert "higher than the requested 1" in resp.results[1].error_message
    orders = fake.topics["orders"]
    if validate_only:
        assert len(orders) == 3
    else:
        assert [orders[p].replicas for p in (3, 4)] == [(1, 2), (2, 1)]
    assert len(fake.topics["audit"]) == 1


# -- Configs -----------------------------------------------------------------------------------
@pytest.mark.parametrize("version", versions(32))
def test_describe_configs(version):
    fake = cluster()
    fake.topic_configs["orders"] = {"retention.ms": "1000"}
    r = DescribeConfigsRequest.DescribeConfigsResource
    resp = ask(fake, DescribeConfigsRequest[version](
        include_synonyms=False, include_documentation=True, resources=[
            r(resource_type=2, resource_name="orders", configuration_keys=None),
            r(resource_type=2, resource_name="audit", configuration_keys=["retention.ms"]),
            r(resource_type=4, resource_name="1", configuration_keys=["log.dirs"]),
            r(resource_type=2, resource_name="ghost", configuration_keys=None)]))
    assert fake.calls_of("describe_configs") == [{"resources": [
        (ConfigResource(2, "orders"), None), (ConfigResource(2, "audit"), ["retention.ms"]),
        (ConfigResource(4, "1"), ["log.dirs"]), (ConfigResource(2, "ghost"), None)]}]
    assert [(x.resource_type, x.resource_name, x.error_code) for x in resp.results] == [
        (2, "orders", 0), (2, "audit", 0), (4, "1", 0), (2, "ghost", 3)]
    # v0 has no config source: is_default says what source 5 (DEFAULT_CONFIG) says
    source = (lambda n: n) if version >= 1 else (lambda n: -1)
    orders = {c.name: (c.value, c.config_source, c.read_only) for c in resp.results[0].configs}
    assert orders == {"cleanup.policy": ("delete", source(5), False),
                      "retention.ms": ("1000", source(1), False),
                      "segment.bytes": ("1073741824", source(5), False),
                      "min.insync.replicas": ("1", source(5), False)}
    if version == 0:
        assert {c.name for c in resp.results[0].configs if c.is_default} == {
            "cleanup.policy", "segment.bytes", "min.insync.replicas"}
    (audit,) = resp.results[1].configs
    assert (audit.name, audit.value, audit.config_source) == ("retention.ms", "604800000",
                                                              source(5))
    (broker,) = resp.results[2].configs
    assert (broker.name, broker.value, broker.read_only, broker.config_source) == (
        "log.dirs", "/tmp/rayka", True, source(4))
    assert resp.results[3].configs == [] and resp.results[3].error_message
    if version >= 3:                     # documentation asked for, and the field exists
        assert audit.documentation == "the retention.ms default"
        assert broker.documentation is None


@pytest.mark.parametrize("version", [3, 4])
def test_describe_configs_documentation_only_when_asked(version):
    fake = cluster()
    r = DescribeConfigsRequest.DescribeConfigsResource
    resp = ask(fake, DescribeConfigsRequest[version](
        include_synonyms=False, include_documentation=False,
        resources=[r(resource_type=2, resource_name="audit", configuration_keys=None)]))
    assert resp.results[0].configs and all(c.documentation is None
                                           for c in resp.results[0].configs)


@pytest.mark.parametrize("validate_only", [False, True])
@pytest.mark.parametrize("version", versions(44))
def test_incremental_alter_configs(version, validate_only):
    fake = cluster()
    fake.topic_configs["orders"] = {"cleanup.policy": "compact"}
    r = IncrementalAlterConfigsRequest.AlterConfigsResource
    c = r.AlterableConfig
    resp = ask(fake, IncrementalAlterConfigsRequest[version](
        validate_only=validate_only, resources=[
            r(resource_type=2, resource_name="orders", configs=[
                c(name="retention.ms", config_operation=0, value="1000"),
                c(name="cleanup.policy", config_operation=1, value=None)]),
            r(resource_type=2, resource_name="audit", configs=[
                c(name="cleanup.policy", config_operation=2, value="compact")]),
            r(resource_type=2, resource_name="ghost", configs=[]),
            r(resource_type=4, resource_name="1", configs=[
                c(name="log.dirs", config_operation=0, value="/x")])]))
    assert fake.calls_of("alter_configs") == [{"validate_only": validate_only, "resources": [
        (ConfigResource(2, "orders"), [("retention.ms", 0, "1000"),
                                       ("cleanup.policy", 1, None)]),
        (ConfigResource(2, "audit"), [("cleanup.policy", 2, "compact")]),
        (ConfigResource(2, "ghost"), []),
        (ConfigResource(4, "1"), [("log.dirs", 0, "/x")])]}]
    assert [(x.resource_type, x.resource_name, x.error_code) for x in resp.responses] == [
        (2, "orders", 0), (2, "audit", 0), (2, "ghost", 3), (4, "1", 42)]
    assert resp.responses[0].error_message is None and resp.responses[3].error_message
    if validate_only:
        assert fake.topic_configs["orders"] == {"cleanup.policy": "compact"}
    else:
        assert fake.topic_configs["orders"] == {"retention.ms": "1000"}
        assert fake.topic_configs["audit"] == {"cleanup.policy": "delete,compact"}
