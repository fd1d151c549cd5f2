"""The admin APIs added for Kafka 3.8's surface, through the real handlers and codec against
the fake broker: AlterConfigs (33), DescribeLogDirs (35), ElectLeaders (43),
Alter/ListPartitionReassignments (45/46), OffsetDelete (47), and the edge codes
(duplicates, OffsetCommit to an unknown topic, CreateTopics' topic_config_error_code)."""

from __future__ import annotations

import struct

import pytest
from kafka.protocol.admin import (AlterConfigsRequest, AlterPartitionReassignmentsRequest,
                                  CreateTopicsRequest, DescribeConfigsRequest,
                                  DescribeLogDirsRequest, ElectLeadersRequest,
                                  IncrementalAlterConfigsRequest,
                                  ListPartitionReassignmentsRequest)
from kafka.protocol.consumer import OffsetDeleteRequest

from protocol.security.acl import AclOperation as Op, ResourceType as Res
from replicas.errors import ErrorCode as E
from tests.handler_wire import ask, cluster, versions
from tests.test_protocol_group_handlers import (commit, commit_codes, groups_cluster, join,
                                                stable_group)
from tests.test_protocol_security import acl, session_for
from tests.test_protocol_security import ask as ask_as


# -- AlterConfigs (legacy): replace-all ---------------------------------------------------------
def alter_configs(version, resources, validate_only=False):
    r = AlterConfigsRequest.AlterConfigsResource
    c = r.AlterableConfig
    return AlterConfigsRequest[version](validate_only=validate_only, resources=[
        r(resource_type=kind, resource_name=name, configs=[c(name=k, value=v) for k, v in cfg])
        for kind, name, cfg in resources])


@pytest.mark.parametrize("version", versions(33))
def test_alter_configs_replaces_every_override(version):
    fake = cluster()
    fake.topic_configs["orders"] = {"cleanup.policy": "compact", "retention.ms": "5"}
    resp = ask(fake, alter_configs(version, [(2, "orders", [("retention.ms", "1000")]),
                                             (2, "ghost", []), (4, "1", [("log.dirs", "/x")])]))
    assert [(x.resource_type, x.resource_name, x.error_code) for x in resp.responses] == [
        (2, "orders", 0), (2, "ghost", 3), (4, "1", 40)]
    assert fake.topic_configs["orders"] == {"retention.ms": "1000"}     # compact is gone


def test_alter_configs_validate_only_writes_nothing():
    fake = cluster()
    resp = ask(fake, alter_configs(2, [(2, "orders", [("retention.ms", "1")])], True))
    assert [x.error_code for x in resp.responses] == [0] and fake.topic_configs["orders"] == {}


@pytest.mark.parametrize("api", ["legacy", "incremental"])
def test_config_preprocessing_comes_first_and_answers_every_copy(api):
    """ConfigAdminManager.preprocess: a resource named twice is INVALID_REQUEST for both
    copies, so is a duplicated key or a null value; none reaches the broker."""
    fake = cluster()
    if api == "legacy":
        msg = alter_configs(1, [(2, "orders", [("retention.ms", "1")]),
                                (2, "audit", [("retention.ms", "1"), ("retention.ms", "2")]),
                                (2, "orders", []), (2, "fresh", [("retention.ms", None)]),
                                (8, "1", [])])
        method = "replace_configs"
    else:
        r = IncrementalAlterConfigsRequest.AlterConfigsResource
        c = r.AlterableConfig
        msg = IncrementalAlterConfigsRequest[1](validate_only=False, resources=[
            r(resource_type=2, resource_name="orders", configs=[]),
            r(resource_type=2, resource_name="audit", configs=[
                c(name="retention.ms", config_operation=0, value="1"),
                c(name="retention.ms", config_operation=1, value=None)]),
            r(resource_type=2, resource_name="orders", configs=[]),
            r(resource_type=2, resource_name="fresh", configs=[
                c(name="retention.ms", config_operation=0, value=None)]),
            r(resource_type=9, resource_name="x", configs=[])])
        method = "alter_configs"
    resp = ask(fake, msg)
    got = [(x.resource_name, x.error_code, x.error_message) for x in resp.responses]
    assert got == [("orders", 42, "Each resource must appear at most once."),
                   ("audit", 42, "Error due to duplicate config keys"),
                   ("orders", 42, "Each resource must appear at most once."),
                   ("fresh", 42, "Null value not supported for : retention.ms"),
                   ("1" if api == "legacy" else "x", 42,
                    f"Unknown resource type {8 if api == 'legacy' else 9}")]
    assert fake.calls_of(method) == []


def test_preprocessing_comes_before_authorisation():
    fake = cluster()
    resp = ask_as(fake, alter_configs(1, [(2, "orders", []), (2, "orders", []),
                                          (2, "audit", [])]), session_for([]))
    assert [x.error_code for x in resp.responses] == [42, 42, 29]


def test_describe_configs_of_a_resource_named_twice_answers_each_with_its_keys():
    fake = cluster()
    r = DescribeConfigsRequest.DescribeConfigsResource
    resp = ask(fake, DescribeConfigsRequest[1](include_synonyms=False, resources=[
        r(resource_type=2, resource_name="orders", configuration_keys=["retention.ms"]),
        r(resource_type=2, resource_name="orders", configuration_keys=["cleanup.policy"])]))
    assert [[c.name for c in x.configs] for x in resp.results] == [["retention.ms"],
                                                                   ["cleanup.policy"]]


# -- CreateTopics: topic_config_error_code ------------------------------------------------------
def test_create_topics_without_describe_configs_says_so_in_topic_config_error_code():
    fake = cluster()
    t = CreateTopicsRequest.CreatableTopic
    msg = CreateTopicsRequest[5](timeout_ms=1000, validate_only=False, topics=[
        t(name="fresh", num_partitions=1, replication_factor=1, assignments=[], configs=[])])
    denied = ask_as(fake, msg, session_for([acl(Res.TOPIC, "fresh", Op.CREATE)]))
    (topic,) = denied.topics
    assert (topic.error_code, topic.topic_config_error_code, topic.num_partitions) == (0, 29, -1)
    allowed = ask_as(cluster(), msg, session_for([acl(Res.TOPIC, "fresh", Op.CREATE),
                                                  acl(Res.TOPIC, "fresh", Op.DESCRIBE_CONFIGS)]))
    (topic,) = allowed.topics
    assert (topic.error_code, topic.topic_config_error_code, topic.num_partitions) == (0, 0, 1)


# -- DescribeLogDirs ------------------------------------------------------------------------------
@pytest.mark.parametrize("version", versions(35))
def test_describe_log_dirs_lists_the_replicas_asked_that_the_broker_holds(version):
    fake = cluster()
    fake.append(("audit", 0), b"x" * 70, count=1, timestamp=0)
    t = DescribeLogDirsRequest.DescribableLogDirTopic
    resp = ask(fake, DescribeLogDirsRequest[version](topics=[
        t(topic="audit", partitions=[0, 5]), t(topic="ghost", partitions=[0])]))
    (d,) = resp.results
    assert (d.error_code, d.log_dir) == (0, "/data/broker-1")
    assert [(x.name, [(p.partition_index, p.partition_size, p.offset_lag, p.is_future_key)
                      for p in x.partitions]) for x in d.topics] == [
        ("audit", [(0, 70, 0, False)])]
    if version >= 4:
        assert (d.total_bytes, d.usable_bytes) == (1000, 500)
    everything = ask(fake, DescribeLogDirsRequest[version](topics=None))
    assert {x.name for x in everything.results[0].topics} == {"orders", "audit"}


# -- ElectLeaders ---------------------------------------------------------------------------------
def elect(version, partitions, election_type=0):
    t = ElectLeadersRequest.TopicPartitions
    return ElectLeadersRequest[version](
        election_type=election_type, timeout_ms=1000,
        topic_partitions=None if partitions is None else [
            t(topic=n, partitions=ps) for n, ps in partitions.items()])


def election_codes(resp) -> dict:
    return {(r.topic, p.partition_id): p.error_code for r in resp.replica_election_results
            for p in r.partition_result}


@pytest.mark.parametrize("version", versions(43))
def test_preferred_election_answers_per_partition(version):
    fake = cluster()
    fake.partition(("orders", 1)).leader = 2                   # preferred (1) does not lead
    fake.partition(("orders", 2)).leader = 2
    fake.partition(("orders", 2)).isr = (2, 9)                 # preferred out of the ISR
    resp = ask(fake, elect(version, {"orders": [0, 1, 2, 1], "ghost": [0]}))
    assert election_codes(resp) == {("orders", 0): E.ELECTION_NOT_NEEDED, ("orders", 1): 0,
                                    ("orders", 2): E.PREFERRED_LEADER_NOT_AVAILABLE,
                                    ("ghost", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert fake.calls_of("elect_leaders")[0]["tps"] == [("orders", 0), ("orders", 1),
                                                        ("orders", 2), ("ghost", 0)]
    if version >= 1:
        assert resp.error_code == 0


def test_an_election_of_all_partitions_leaves_out_those_that_needed_none():
    fake = cluster()
    fake.partition(("orders", 1)).leader = 2
    resp = ask(fake, elect(2, None))
    assert election_codes(resp) == {("orders", 1): 0}
    assert fake.calls_of("elect_leaders")[0]["tps"] is None


def test_unclean_election_needs_a_dead_leader():
    fake = cluster()
    fake.partition(("orders", 0)).leader = 9                   # broker 9 is not live
    resp = ask(fake, elect(1, {"orders": [0, 1]}, election_type=1))
    assert election_codes(resp) == {("orders", 0): 0, ("orders", 1): E.ELECTION_NOT_NEEDED}
    assert fake.partition(("orders", 0)).leader == 1


def test_an_unknown_election_type_is_invalid_request():
    resp = ask(cluster(), elect(1, {"orders": [0]}, election_type=7))
    assert set(election_codes(resp).values()) == {E.INVALID_REQUEST}


# -- reassignments --------------------------------------------------------------------------------
def test_alter_then_list_then_cancel_reassignments():
    fake = cluster()
    t = AlterPartitionReassignmentsRequest.ReassignableTopic
    p = t.ReassignablePartition
    resp = ask(fake, AlterPartitionReassignmentsRequest[0](timeout_ms=1000, topics=[
        t(name="orders", partitions=[p(partition_index=0, replicas=[2, 1]),
                                     p(partition_index=1, replicas=None),
                                     p(partition_index=2, replicas=[2, 2])])]))
    assert (resp.error_code, [(x.partition_index, x.error_code) for x in resp.responses[0].partitions]) \
        == (0, [(0, 0), (1, E.NO_REASSIGNMENT_IN_PROGRESS), (2, E.INVALID_REPLICA_ASSIGNMENT)])
    lt = ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics
    listed = ask(fake, ListPartitionReassignmentsRequest[0](timeout_ms=1000, topics=None))
    assert [(x.name, [(q.partition_index, q.replicas, q.adding_replicas, q.removing_replicas)
                      for q in x.partitions]) for x in listed.topics] == [
        ("orders", [(0, [2, 1, 9], [], [9])])]
    none = ask(fake, ListPartitionReassignmentsRequest[0](timeout_ms=1000, topics=[
        lt(name="orders", partition_indexes=[1])]))
    assert none.topics == []
    cancel = ask(fake, AlterPartitionReassignmentsRequest[0](timeout_ms=1000, topics=[
        t(name="orders", partitions=[p(partition_index=0, replicas=None)])]))
    assert cancel.responses[0].partitions[0].error_code == 0 and fake.reassignments == {}


# -- OffsetDelete and OffsetCommit's unknown topics -----------------------------------------------
def offset_delete(group, partitions):
    t = OffsetDeleteRequest.OffsetDeleteRequestTopic
    p = t.OffsetDeleteRequestPartition
    return OffsetDeleteRequest[0](group_id=group, topics=[
        t(name=n, partitions=[p(partition_index=i) for i in ps]) for n, ps in partitions.items()])


def delete_codes(resp) -> dict:
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def test_offset_delete_of_an_empty_group_writes_tombstones():
    fake = groups_cluster()
    assert set(commit_codes(commit(fake, 8, {("orders", 0): (5, -1, ""), ("audit", 0): (6, -1, "")},
                                   group="g2").answer()).values()) == {0}
    before = len(fake.offsets_log)
    resp = ask(fake, offset_delete("g2", {"orders": [0, 7], "ghost": [0]}))
    assert resp.error_code == 0
    assert delete_codes(resp) == {("orders", 0): 0, ("orders", 7): 3, ("ghost", 0): 3}
    (tombstones,) = fake.offsets_log[before:]
    assert [r.value for r in tombstones.records] == [None]
    assert set(fake.coordinator.group("g2").offsets) == {("audit", 0)}


def subscription(*topics: str) -> bytes:
    """ConsumerProtocol's Subscription v0: topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def test_offset_delete_of_a_stable_group_spares_subscribed_topics():
    fake = groups_cluster()
    calls = [join(fake, 5, client=c, protocols=[("range", subscription("orders"))])
             for c in ("ca",)]
    first = calls[0].answer()
    member = join(fake, 5, member_id=first.member_id, client="ca",
                  protocols=[("range", subscription("orders"))])
    fake.advance(3000)
    fake.advance(3000)
    assert member.answer().error_code == 0
    resp = ask(fake, offset_delete("g1", {"orders": [0], "audit": [0]}))
    assert (resp.error_code, delete_codes(resp)) == (
        0, {("orders", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("audit", 0): 0})


def test_offset_delete_group_errors_are_the_whole_answer():
    fake = groups_cluster()
    assert ask(fake, offset_delete("g3", {"orders": [0]})).error_code == E.GROUP_ID_NOT_FOUND
    assert ask(fake, offset_delete("", {"orders": [0]})).error_code == E.INVALID_GROUP_ID
    stable_group(fake, group="g2")        # members whose subscriptions cannot be read
    resp = ask(fake, offset_delete("g2", {"orders": [0]}))
    assert delete_codes(resp) == {("orders", 0): E.GROUP_SUBSCRIBED_TO_TOPIC}


@pytest.mark.parametrize("version", versions(8, 1))
def test_offset_commit_to_a_topic_that_does_not_exist(version):
    fake = groups_cluster()
    resp = commit(fake, version, {("orders", 0): (5, -1, ""), ("ghost", 0): (1, -1, "")},
                  group="g2").answer()
    assert commit_codes(resp) == {("orders", 0): 0, ("ghost", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    only_ghost = commit(fake, version, {("ghost", 3): (1, -1, "")}, group="g3").answer()
    assert commit_codes(only_ghost) == {("ghost", 3): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert fake.coordinator.group("g3") is None      # the coordinator was never asked


# -- authorized_operations ------------------------------------------------------------------------
# kafka-python reads the bitfield as the set of operation codes: Kafka 3.8's supported ones
TOPIC_OPS = {3, 4, 5, 6, 7, 8, 10, 11}
CLUSTER_OPS = {5, 9, 10, 11, 12, 7, 8}
GROUP_OPS = {3, 8, 6}


def test_authorized_operations_only_when_asked_and_all_without_an_authorizer():
    from kafka.protocol.metadata import MetadataRequest
    from kafka.protocol.admin import DescribeClusterRequest, DescribeGroupsRequest
    t = MetadataRequest.MetadataRequestTopic
    fake = groups_cluster()
    asked = ask(fake, MetadataRequest[10](topics=[t(name="orders", topic_id=None)],
                                          allow_auto_topic_creation=False,
                                          include_cluster_authorized_operations=True,
                                          include_topic_authorized_operations=True))
    assert (asked.topics[0].authorized_operations,
            asked.authorized_operations) == (TOPIC_OPS, CLUSTER_OPS)
    plain = ask(fake, MetadataRequest[10](topics=[t(name="orders", topic_id=None)],
                                          allow_auto_topic_creation=False,
                                          include_cluster_authorized_operations=False,
                                          include_topic_authorized_operations=False))
    assert plain.topics[0].authorized_operations in (-2147483648, None)      # the sentinel
    cluster_ops = ask(fake, DescribeClusterRequest[0](include_cluster_authorized_operations=True))
    assert cluster_ops.authorized_operations == CLUSTER_OPS
    groups = ask(fake, DescribeGroupsRequest[5](groups=["g1"], include_authorized_operations=True))
    assert groups.groups[0].authorized_operations == GROUP_OPS


def test_authorized_operations_with_an_authorizer_are_the_principals():
    from kafka.protocol.metadata import MetadataRequest
    t = MetadataRequest.MetadataRequestTopic
    session = session_for([acl(Res.TOPIC, "orders", Op.DESCRIBE), acl(Res.TOPIC, "orders", Op.READ)])
    resp = ask_as(cluster(), MetadataRequest[10](topics=[t(name="orders", topic_id=None)],
                                                  allow_auto_topic_creation=False,
                                                  include_cluster_authorized_operations=True,
                                                  include_topic_authorized_operations=True),
                  session)
    assert resp.topics[0].authorized_operations == {3, 8}
    assert resp.authorized_operations == set()
