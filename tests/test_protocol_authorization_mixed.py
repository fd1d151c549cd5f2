"""Authorisation of requests that mix allowed and denied items, through
protocol.handlers.answer against FakeBrokerApi with a REAL Authorizer (no Ray, ZooKeeper or
sockets): per-item codes in Kafka's places, only allowed items reaching the broker, deny over
allow, super users, allow.everyone.if.no.acl.found. The one-API-at-a-time table is in
tests/test_protocol_security.py, whose request builders and sessions this module uses.
"""

from __future__ import annotations

import pytest
from kafka.protocol.admin import (
    CreateTopicsRequest, DeleteGroupsRequest, DescribeConfigsRequest, DescribeGroupsRequest,
    ListGroupsRequest,
)

from coordinator import messages as gm
from protocol.connection import Connection
from protocol.errors import ProtocolError
from protocol.security.acl import (
    AclOperation as Op, AclPermissionType as Perm, PatternType as Pat, ResourceType as Res,
)
from tests.handler_wire import metadata_request, produce_request, send, versions
from tests.protocol_samples import walk
from tests.test_protocol_group_handlers import not_owned_group
from tests.test_protocol_security import (
    ALICE, BOB, BOTH, LEADER_NOT_AVAILABLE, NOT_COORDINATOR, UNKNOWN_TOPIC_OR_PARTITION,
    _alter_configs, _commit, _create_acls, _create_topics, _find_coordinator, _offset_fetch,
    acl, ask, cluster_acl, fetched_group, fresh_fake, groups_seen, per_partition, produce_codes,
    session_for, topic_codes,
)

pytestmark = pytest.mark.unit

# -- mixed requests ------------------------------------------------------------------------
def test_a_produce_to_an_allowed_and_a_denied_topic_appends_only_the_allowed_one():
    fake = fresh_fake()
    session = session_for([acl(Res.TOPIC, "orders", Op.WRITE)])
    resp = ask(fake, produce_request(9, {"orders": [(0, b"yes"), (1, b"yes-1")],
                                         "audit": [(0, b"no")]}), session)
    assert produce_codes(resp) == {("orders", 0): 0, ("orders", 1): 0, ("audit", 0): 29}
    assert [b.data for b in fake.partition(("orders", 0)).batches] == [b"one", b"yes"]
    assert [b.data for b in fake.partition(("audit", 0)).batches] == [b"two"]
    assert fake.calls_of("produce")[0]["partitions"] == [(("orders", 0), b"yes"),
                                                         (("orders", 1), b"yes-1")]
    audit = resp.to_dict()["responses"][1]["partition_responses"][0]
    assert (audit["base_offset"], audit["error_message"]) == (-1, None)   # Kafka: no message


@pytest.mark.parametrize("version", versions(0))
def test_an_acks_0_produce_to_a_denied_topic_closes_the_connection(version):
    fake = fresh_fake()
    conn = Connection()
    msg = produce_request(version, {"audit": [(0, b"no")]}, acks=0)
    with pytest.raises(ProtocolError, match="acks=0"):
        send(fake, msg, listener=session_for([acl(Res.TOPIC, "orders", Op.WRITE)]), conn=conn)
    assert conn.responses_sent == 0 and fake.calls_of("produce") == []
    assert [b.data for b in fake.partition(("audit", 0)).batches] == [b"two"]


def test_an_acks_0_produce_to_allowed_topics_is_still_unanswered():
    fake = fresh_fake()
    request, out = send(fake, produce_request(9, {"audit": [(0, b"ok")]}, acks=0),
                        listener=session_for([acl(Res.TOPIC, "audit", Op.WRITE)]))
    assert out is None and fake.partition(("audit", 0)).batches[-1].data == b"ok"


def test_offset_commit_with_the_group_allowed_but_one_topic_denied():
    fake = fresh_fake()
    session = session_for([acl(Res.GROUP, "g1", Op.READ), acl(Res.TOPIC, "orders", Op.READ)])
    resp = ask(fake, _commit(8), session)
    assert per_partition(resp, "topics") == {("orders", 0): 0, ("audit", 0): 29}
    [event] = groups_seen(fake, gm.OffsetCommit)
    assert [(o.topic, o.partition) for o in event.offsets] == [("orders", 0)]
    group = fake.coordinator.group("g1")
    assert (group.offset(("orders", 0)).offset, group.offset(("audit", 0)).offset) == (9, 7)


def test_offset_commit_with_every_topic_denied_never_reaches_the_coordinator():
    fake = fresh_fake()
    resp = ask(fake, _commit(8), session_for([acl(Res.GROUP, "g1", Op.READ)]))
    assert per_partition(resp, "topics") == dict.fromkeys(BOTH, 29)
    assert groups_seen(fake, gm.OffsetCommit) == []


@pytest.mark.parametrize("version", versions(9, 2))
def test_offset_fetch_of_all_partitions_leaves_denied_topics_out(version):
    fake = fresh_fake()
    session = session_for([acl(Res.GROUP, "g1", Op.DESCRIBE),
                           acl(Res.TOPIC, "audit", Op.DESCRIBE)])
    resp = ask(fake, _offset_fetch(version, topics=None), session)
    assert fetched_group(resp).error_code == 0
    assert per_partition(resp, "topics", code="committed_offset") == {("audit", 0): 7}


@pytest.mark.parametrize("version", versions(9))
def test_offset_fetch_of_named_partitions_answers_denied_ones_29(version):
    fake = fresh_fake()
    fake.zk_offsets[("g1", ("orders", 0))] = 5         # v0 reads ZooKeeper's offsets
    session = session_for([acl(Res.GROUP, "g1", Op.DESCRIBE),
                           acl(Res.TOPIC, "orders", Op.READ)])     # Read implies Describe
    resp = ask(fake, _offset_fetch(version), session)
    committed = per_partition(resp, "topics", code="committed_offset")
    assert {tp: (committed[tp], code) for tp, code in per_partition(resp, "topics").items()} \
        == {("orders", 0): (5, 0), ("audit", 0): (-1, 29)}
    if version == 0:
        assert fake.calls_of("zk_fetch_offsets")[0]["tps"] == [("orders", 0)]
        return
    [event] = groups_seen(fake, gm.OffsetFetch)
    assert event.partitions == (("orders", 0),)


@pytest.mark.parametrize("version", versions(9, 2))
def test_offset_fetch_a_coordinator_error_is_the_whole_answer_even_with_denied_topics(version):
    # KafkaApis.fetchOffsetsForGroup: the coordinator is asked with the authorised topics
    # (none here) and its group error is the answer, without the refused topics.
    fake = fresh_fake()
    far = not_owned_group(fake)
    session = session_for([acl(Res.GROUP, far, Op.DESCRIBE)])
    resp = fetched_group(ask(fake, _offset_fetch(version, group=far), session))
    assert (resp.error_code, resp.topics) == (NOT_COORDINATOR, [])
    [event] = groups_seen(fake, gm.OffsetFetch)
    assert event.partitions == ()


def test_metadata_of_all_topics_lists_only_the_describable_ones():
    fake = fresh_fake()
    fake.add_topic("ordinal", 1)
    session = session_for([acl(Res.TOPIC, "ord", Op.WRITE, pattern=Pat.PREFIXED)])
    resp = ask(fake, metadata_request(12, None), session)
    assert sorted(t.name for t in resp.topics) == ["orders", "ordinal"]


def test_metadata_auto_creation_with_create_on_the_cluster():
    fake = fresh_fake()
    session = session_for([acl(Res.TOPIC, "*", Op.DESCRIBE), cluster_acl(Op.CREATE)])
    resp = ask(fake, metadata_request(12, ["fresh", "orders"], allow=True), session)
    assert topic_codes(resp, "topics") == {"fresh": LEADER_NOT_AVAILABLE, "orders": 0}
    assert "fresh" in fake.topics


def test_metadata_a_missing_topic_one_may_not_create_is_29_an_existing_one_is_answered():
    fake = fresh_fake()
    session = session_for([acl(Res.TOPIC, "*", Op.DESCRIBE)])
    resp = ask(fake, metadata_request(12, ["fresh", "orders"], allow=True), session)
    assert topic_codes(resp, "topics") == {"fresh": 29, "orders": 0}
    assert "fresh" not in fake.topics
    resp = ask(fake, metadata_request(12, ["fresh"], allow=False), session)
    assert topic_codes(resp, "topics") == {"fresh": UNKNOWN_TOPIC_OR_PARTITION}


def test_metadata_without_broker_auto_creation_a_missing_topic_is_unknown():
    fake = fresh_fake()
    fake.auto_create_topics_enable = False
    session = session_for([acl(Res.TOPIC, "*", Op.DESCRIBE)])
    resp = ask(fake, metadata_request(12, ["fresh"], allow=True), session)
    assert topic_codes(resp, "topics") == {"fresh": UNKNOWN_TOPIC_OR_PARTITION}


def test_deny_beats_allow():
    fake = fresh_fake()
    fake.add_topic("ordinal", 1)
    session = session_for([acl(Res.TOPIC, "ord", Op.WRITE, pattern=Pat.PREFIXED),
                           acl(Res.TOPIC, "orders", Op.WRITE, perm=Perm.DENY)])
    resp = ask(fake, produce_request(9, {"orders": [(0, b"x")], "ordinal": [(0, b"y")]}),
               session)
    assert produce_codes(resp) == {("orders", 0): 29, ("ordinal", 0): 0}
    assert [b.data for b in fake.partition(("ordinal", 0)).batches] == [b"y"]


def test_a_deny_of_another_principal_or_host_does_not_apply():
    fake = fresh_fake()
    session = session_for([acl(Res.TOPIC, "orders", Op.WRITE),
                           acl(Res.TOPIC, "orders", Op.WRITE, perm=Perm.DENY, principal=BOB),
                           acl(Res.TOPIC, "orders", Op.WRITE, perm=Perm.DENY, host="10.9.9.9")])
    resp = ask(fake, produce_request(9, {"orders": [(0, b"x")]}), session)
    assert produce_codes(resp) == {("orders", 0): 0}


def test_a_super_user_needs_no_acl():
    fake = fresh_fake()
    session = session_for([acl(Res.TOPIC, "orders", Op.WRITE, perm=Perm.DENY)],
                          super_users=[ALICE])
    resp = ask(fake, produce_request(9, {"orders": [(0, b"x")], "audit": [(0, b"y")]}),
               session)
    assert produce_codes(resp) == dict.fromkeys(BOTH, 0)
    assert ask(fake, _create_acls(3), session).results[0].error_code == 0
    # ...and nobody else is one
    other = session_for(super_users=[ALICE], principal=BOB)
    assert produce_codes(ask(fake, produce_request(9, {"orders": [(0, b"z")]}), other)) == {
        ("orders", 0): 29}


def test_allow_everyone_if_no_acl_found_applies_only_where_no_acl_exists():
    fake = fresh_fake()
    session = session_for([acl(Res.TOPIC, "audit", Op.WRITE, principal=BOB)],
                          allow_everyone=True)
    resp = ask(fake, produce_request(9, {"orders": [(0, b"x")], "audit": [(0, b"y")]}),
               session)
    assert produce_codes(resp) == {("orders", 0): 0, ("audit", 0): 29}
    assert ask(fake, _find_coordinator(4), session).coordinators[0].error_code == 0


def test_list_groups_with_describe_on_one_group_lists_only_it():
    fake = fresh_fake()
    fake.group_call(lambda rid: gm.OffsetCommit(rid, "g2", (gm.CommitOffset("orders", 1, 1),)))
    everything = ask(fake, ListGroupsRequest[4](states_filter=[], types_filter=[]),
                     session_for([cluster_acl(Op.DESCRIBE)]))
    assert sorted(g.group_id for g in everything.groups) == ["g1", "g2"]
    resp = ask(fake, ListGroupsRequest[4](states_filter=[], types_filter=[]),
               session_for([acl(Res.GROUP, "g2", Op.READ)]))
    assert [g.group_id for g in resp.groups] == ["g2"]


def test_delete_groups_asks_about_each_group_once():
    fake = fresh_fake()
    resp = ask(fake, DeleteGroupsRequest[2](groups_names=["g1", "g3", "g1"]),
               session_for([acl(Res.GROUP, "g1", Op.DELETE)]))
    assert [(g.group_id, g.error_code) for g in resp.results] == [("g1", 0), ("g3", 30)]
    assert [e.group_ids for e in groups_seen(fake, gm.DeleteGroups)] == [("g1",)]


def test_describe_groups_answers_each_group_in_the_order_asked():
    fake = fresh_fake()
    resp = ask(fake, DescribeGroupsRequest[5](groups=["g2", "g1"],
                                             include_authorized_operations=False),
               session_for([acl(Res.GROUP, "g1", Op.DESCRIBE)]))
    assert [(g.group_id, g.error_code) for g in resp.groups] == [("g2", 30), ("g1", 0)]
    assert [e.group_ids for e in groups_seen(fake, gm.DescribeGroups)] == [("g1",)]


def test_find_coordinator_mixed_keys():
    fake = fresh_fake()
    resp = ask(fake, _find_coordinator(4), session_for([acl(Res.GROUP, "g", Op.DESCRIBE,
                                                             pattern=Pat.PREFIXED),
                                                         acl(Res.GROUP, "g2", Op.DESCRIBE,
                                                             perm=Perm.DENY)]))
    assert [(c.key, c.error_code, c.node_id) for c in resp.coordinators] == [
        ("g1", 0, 1), ("g2", 30, -1)]
    assert fake.calls_of("find_coordinator")[0]["group_ids"] == ["g1"]


@pytest.mark.parametrize("version", versions(10, 1))
def test_find_coordinator_denied_carries_kafkas_message(version):
    fake = fresh_fake()
    resp = ask(fake, _find_coordinator(version), session_for())
    messages = set(walk(resp.to_dict(), "error_message"))
    assert messages == ({"Group authorization failed."} if version < 4 else {None})


def test_create_topics_without_describe_configs_answers_no_configs():
    # KafkaApis.handleCreateTopicsRequest + ZkAdminManager.maybePopulateMetadataAndConfigs:
    # configs, partitions and replication factor only with DescribeConfigs on the topic.
    fake = fresh_fake()
    resp = ask(fake, _create_topics(7), session_for([cluster_acl(Op.CREATE)]))
    assert [(t.name, t.error_code, t.num_partitions, t.replication_factor, t.configs)
            for t in resp.topics] == [("new-a", 0, -1, -1, []), ("new-b", 0, -1, -1, [])]
    assert len(fake.topics["new-a"]) == 2
    resp = ask(fake, CreateTopicsRequest[7](timeout_ms=1000, validate_only=True, topics=[
        CreateTopicsRequest.CreatableTopic(name="new-c", num_partitions=2, replication_factor=1,
                                           assignments=[], configs=[])]),
        session_for([cluster_acl(Op.CREATE), acl(Res.TOPIC, "new-c", Op.ALTER_CONFIGS)]))
    [t] = resp.topics
    assert (t.error_code, t.num_partitions, t.replication_factor) == (0, 2, 1) and t.configs


def test_configs_of_mixed_resources():
    fake = fresh_fake()
    session = session_for([acl(Res.TOPIC, "audit", Op.ALTER_CONFIGS)])
    r = DescribeConfigsRequest.DescribeConfigsResource
    resp = ask(fake, DescribeConfigsRequest[4](
        include_synonyms=False, include_documentation=False, resources=[
            r(resource_type=2, resource_name="orders", configuration_keys=None),
            r(resource_type=2, resource_name="audit", configuration_keys=["retention.ms"]),
            r(resource_type=4, resource_name="1", configuration_keys=None)]), session)
    assert [(x.resource_name, x.error_code) for x in resp.results] == [
        ("orders", 29), ("audit", 0), ("1", 31)]
    assert [c.name for c in resp.results[1].configs] == ["retention.ms"]
    resp = ask(fake, _alter_configs(1, resources=((2, "orders"), (2, "audit"), (4, "1"),
                                                  (8, "1"), (32, "g1"))), session)
    assert [(x.resource_name, x.error_code, x.error_message) for x in resp.responses] == [
        ("orders", 29, None), ("audit", 0, None), ("1", 31, None),
        ("1", 31, "Cluster authorization failed."),
        ("g1", 30, None)]                     # a group's configs: AlterConfigs on the group
    assert [r[0].name for c in fake.calls_of("alter_configs") for r in c["resources"]] == [
        "audit"]


def test_a_denied_unknown_topic_is_29_not_unknown_topic():
    fake = fresh_fake()
    session = session_for([acl(Res.TOPIC, "orders", Op.WRITE)])
    resp = ask(fake, produce_request(9, {"ghost": [(0, b"x")]}), session)
    assert produce_codes(resp) == {("ghost", 0): 29}
    allowed = session_for([acl(Res.TOPIC, "ghost", Op.WRITE)])
    assert produce_codes(ask(fake, produce_request(9, {"ghost": [(0, b"x")]}), allowed)) == {
        ("ghost", 0): UNKNOWN_TOPIC_OR_PARTITION}
