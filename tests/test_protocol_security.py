"""Security end to end through protocol.handlers.answer, without Ray, ZooKeeper or sockets:
ACL authorisation (protocol/handlers/authorized.py, a REAL protocol.security.acl.Authorizer),
the SASL gate and exchange, and the ACL APIs (protocol/handlers/security.py), against
FakeBrokerApi (tests/fake_broker_api.py). Requests are encoded by kafka-python and answers
decoded by it (and read whole by kio).

The table follows Kafka's KafkaApis (ZooKeeper mode, Kafka 3.x): a principal with no ACLs gets
Kafka's code in Kafka's place and the broker never sees the denied items; the same request
with exactly the ACL Kafka requires reaches the broker and gets its normal answer. Each API
is driven at its lowest and highest served version.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass, field
from typing import Callable

import pytest
import scramp
from kafka.protocol.admin import (
    CreatePartitionsRequest, CreateTopicsRequest, DeleteGroupsRequest, DeleteRecordsRequest,
    DescribeClusterRequest, DescribeConfigsRequest, DescribeGroupsRequest,
    IncrementalAlterConfigsRequest, ListGroupsRequest,
)
from kafka.protocol.admin.acl import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from kafka.protocol.consumer import (
    HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, ListOffsetsRequest,
    OffsetCommitRequest, OffsetFetchRequest, OffsetForLeaderEpochRequest, SyncGroupRequest,
)
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest
from kafka.protocol.producer import InitProducerIdRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from kio.index import load_response_schema

from coordinator import messages as gm
from protocol.api import Deferred
from protocol.connection import Connection
from protocol.errors import ProtocolError
from protocol.handlers import HANDLERS, SESSION_HANDLERS, answer
from protocol.security.acl import (
    CLUSTER_NAME, AccessControlEntry, AclBinding, AclOperation as Op, AclPermissionType as Perm,
    Authorizer, PatternType as Pat, ResourcePattern, ResourceType as Res,
)
from protocol.security.credentials import make_credential
from protocol.security.sasl import SaslServer
from protocol.security.session import Session
from tests.fake_broker_api import FakeBrokerApi, NotAnsweredYet
from tests.protocol_samples import ACL_ANY, ACL_READ, RESPONSES, frame_of, walk
from tests.test_protocol_group_handlers import groups_cluster, not_owned_group
from tests.test_protocol_handlers import (
    delete_topics_request, fetch_request, kio_read, metadata_request, produce_request,
    send, versions,
)
from tests.test_protocol_handlers import ask as wire_ask

pytestmark = pytest.mark.unit

TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
SECURITY_DISABLED = 54
SASL_AUTHENTICATION_FAILED = 58
NOT_COORDINATOR = 16
LEADER_NOT_AVAILABLE = 5
UNKNOWN_TOPIC_OR_PARTITION = 3
MEMBER_ID_REQUIRED = 79

ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.7"
PARKED = object()


# -- plumbing ----------------------------------------------------------------------------------
def acl(rt: Res, name: str, op: Op, perm: Perm = Perm.ALLOW, pattern: Pat = Pat.LITERAL,
        principal: str = ALICE, host: str = "*") -> AclBinding:
    return AclBinding(ResourcePattern(rt, name, pattern),
                      AccessControlEntry(principal, host, op, perm))


def cluster_acl(op: Op, **kw) -> AclBinding:
    return acl(Res.CLUSTER, CLUSTER_NAME, op, **kw)


def session_for(bindings=(), principal: str = ALICE, super_users=(),
                allow_everyone: bool = False) -> Session:
    """A TLS-authenticated connection of `principal` on a broker whose authorizer holds
    exactly `bindings`."""
    authorizer = Authorizer(super_users, allow_everyone_if_no_acl_found=allow_everyone)
    authorizer.replace_all(bindings)
    return Session(listener="PLAINTEXT", host=HOST, security_protocol="SSL",
                   authorizer=authorizer, tls_principal=principal)


_ids = itertools.count(100)


def ask(fake, msg, session):
    """`msg` through a Connection and answer(): kafka-python's decoding of the answer (checked:
    size, correlation id, kio reads every byte), or PARKED while the coordinator holds it."""
    correlation_id = next(_ids)
    conn = Connection()
    conn.receive_data(frame_of(msg, correlation_id))
    request = conn.next_request()
    assert request is not None and request.served and conn.next_request() is None
    out = answer(conn, fake, request, session)
    if isinstance(out, Deferred):
        try:
            out = out.result()
        except NotAnsweredYet:
            return PARKED
    assert out is not None
    assert struct.unpack_from(">ii", out) == (len(out) - 4, correlation_id)
    api_key, version = msg.API_KEY, msg.API_VERSION
    if not (api_key == 0 and version < 3):                  # kio has no Produce v0-2
        header, _ = kio_read(out, load_response_schema(api_key, version))
        assert header.correlation_id == correlation_id
    return RESPONSES[api_key].decode(out[4:], version=version, header=True)


def codes_of(resp) -> set:
    return set(walk(resp.to_dict(), "error_code"))


def fresh_fake() -> FakeBrokerApi:
    """tests.test_protocol_handlers.cluster() (orders: 3 partitions led here at epoch 4,
    audit: 1) whose coordinator owns g1, g2, g3; group g1 has committed offsets."""
    fake = groups_cluster()
    done = fake.group_call(lambda rid: gm.OffsetCommit(
        rid, "g1", (gm.CommitOffset("orders", 0, 5), gm.CommitOffset("audit", 0, 7))))
    assert done.result().partitions[0].error == 0
    fake.append(("orders", 0), b"one")
    fake.append(("audit", 0), b"two")
    fake.calls.clear()
    fake.group_events.clear()
    return fake


def groups_seen(fake, kind) -> list:
    return [e for e in fake.group_events if isinstance(e, kind)]


# -- request builders: (version) -> kafka-python request ---------------------------------------
def _produce(v):
    return produce_request(v, {"orders": [(0, b"to-orders")], "audit": [(0, b"to-audit")]})


def _fetch(v, replica_id=-1):
    return fetch_request(v, {"orders": [(0, 0, -1, -1, 1 << 20)],
                             "audit": [(0, 0, -1, -1, 1 << 20)]}, replica_id=replica_id)


def _list_offsets(v):
    t = ListOffsetsRequest.ListOffsetsTopic
    p = t.ListOffsetsPartition
    return ListOffsetsRequest[v](replica_id=-1, isolation_level=0, topics=[
        t(name=n, partitions=[p(partition_index=0, timestamp=-1, current_leader_epoch=-1)])
        for n in ("orders", "audit")])


def _leader_epoch(v, replica_id=-1):
    t = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    p = t.OffsetForLeaderPartition
    return OffsetForLeaderEpochRequest[v](replica_id=replica_id, topics=[
        t(topic="orders", partitions=[p(partition=0, current_leader_epoch=4, leader_epoch=4)]),
        t(topic="audit", partitions=[p(partition=0, current_leader_epoch=-1, leader_epoch=0)])])


def _delete_records(v):
    t = DeleteRecordsRequest.DeleteRecordsTopic
    p = t.DeleteRecordsPartition
    return DeleteRecordsRequest[v](timeout_ms=1500, topics=[
        t(name=n, partitions=[p(partition_index=0, offset=1)]) for n in ("orders", "audit")])


def _create_topics(v):
    t = CreateTopicsRequest.CreatableTopic
    return CreateTopicsRequest[v](timeout_ms=30000, validate_only=False, topics=[
        t(name=n, num_partitions=2, replication_factor=1, assignments=[], configs=[])
        for n in ("new-a", "new-b")])


def _create_partitions(v):
    t = CreatePartitionsRequest.CreatePartitionsTopic
    return CreatePartitionsRequest[v](timeout_ms=30000, validate_only=False, topics=[
        t(name="orders", count=5, assignments=None), t(name="audit", count=2, assignments=None)])


def _describe_configs(v, kind=2, name="orders"):
    r = DescribeConfigsRequest.DescribeConfigsResource
    return DescribeConfigsRequest[v](include_synonyms=False, include_documentation=False,
                                     resources=[r(resource_type=kind, resource_name=name,
                                                  configuration_keys=None)])


def _alter_configs(v, resources=((2, "orders"),)):
    r = IncrementalAlterConfigsRequest.AlterConfigsResource
    c = r.AlterableConfig
    return IncrementalAlterConfigsRequest[v](validate_only=False, resources=[
        r(resource_type=kind, resource_name=name,
          configs=[c(name="retention.ms", config_operation=0, value="1000")])
        for kind, name in resources])


def _find_coordinator(v):
    return FindCoordinatorRequest[v](key="g1", key_type=0, coordinator_keys=["g1", "g2"])


def _join(v):
    p = JoinGroupRequest.JoinGroupRequestProtocol
    return JoinGroupRequest[v](group_id="g2", session_timeout_ms=10000,
                               rebalance_timeout_ms=30000, member_id="m-old",
                               group_instance_id=None, protocol_type="consumer", reason=None,
                               protocols=[p(name="range", metadata=b"meta")])


def _sync(v):
    return SyncGroupRequest[v](group_id="g2", generation_id=1, member_id="m1",
                               group_instance_id=None, protocol_type="consumer",
                               protocol_name="range", assignments=[])


def _heartbeat(v):
    return HeartbeatRequest[v](group_id="g2", generation_id=1, member_id="m1",
                               group_instance_id=None)


def _leave(v):
    i = LeaveGroupRequest.MemberIdentity
    return LeaveGroupRequest[v](group_id="g2", member_id="m1",
                                members=[i(member_id="m1", group_instance_id=None, reason=None)])


def _commit(v, group="g1", topics=("orders", "audit")):
    t = OffsetCommitRequest.OffsetCommitRequestTopic
    p = t.OffsetCommitRequestPartition
    return OffsetCommitRequest[v](
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        retention_time_ms=-1, topics=[t(name=n, partitions=[p(
            partition_index=0, committed_offset=9, committed_leader_epoch=-1,
            committed_metadata="m")]) for n in topics])


def _offset_fetch(v, group="g1", topics=("orders", "audit")):
    t = OffsetFetchRequest.OffsetFetchRequestTopic
    asked = None if topics is None else [t(name=n, partition_indexes=[0]) for n in topics]
    return OffsetFetchRequest[v](group_id=group, require_stable=False, topics=asked)


def _describe_acls(v, **over):
    return DescribeAclsRequest[v](**{**ACL_ANY, **over})


def _create_acls(v, *creations):
    return CreateAclsRequest[v](creations=[CreateAclsRequest.AclCreation(**c)
                                           for c in creations or (ACL_READ,)])


def _delete_acls(v, *filters):
    return DeleteAclsRequest[v](filters=[DeleteAclsRequest.DeleteAclsFilter(**f)
                                         for f in filters or (ACL_ANY,)])


# -- where Kafka puts each answer's codes ------------------------------------------------------
def per_partition(resp, topics="responses", parts="partitions", code="error_code"):
    return {((t.get("name") or t.get("topic")), p.get("index", p.get("partition_index",
                                                                    p.get("partition")))):
            p[code] for t in resp.to_dict()[topics] for p in t[parts]}


def produce_codes(resp):
    return per_partition(resp, parts="partition_responses")


def topic_codes(resp, topics):
    return {t["name"]: t["error_code"] for t in resp.to_dict()[topics]}


def seen_tps(method, key):
    return lambda fake: [tp for c in fake.calls_of(method) for tp in key(c)]


BOTH = {("orders", 0), ("audit", 0)}


@dataclass
class Case:
    """One API: `build(version)`; `grant` is exactly the ACL Kafka requires (`held` is what the
    principal holds in the denied run: nothing, unless the case is about a second check);
    `denied(resp, fake, v)` and `allowed(resp, fake, v)` check the answers; `seen(fake)` lists
    what reached the broker."""
    name: str
    api_key: int
    build: Callable
    grant: list
    seen: Callable
    denied: Callable
    allowed: Callable
    held: list = field(default_factory=list)
    versions: tuple | None = None


def _all_codes(expected):
    return lambda resp, fake, v: codes_of(resp) == {expected}


CASES = [
    Case("Produce", 0, _produce,
         [acl(Res.TOPIC, "orders", Op.WRITE), acl(Res.TOPIC, "audit", Op.WRITE)],
         seen_tps("produce", lambda c: [tp for tp, _ in c["partitions"]]),
         lambda r, f, v: produce_codes(r) == dict.fromkeys(BOTH, 29)
         and not f.partition(("orders", 0)).batches[1:],
         lambda r, f, v: produce_codes(r) == dict.fromkeys(BOTH, 0)
         and f.partition(("audit", 0)).batches[-1].data == b"to-audit"),
    Case("Fetch (consumer)", 1, _fetch,
         [acl(Res.TOPIC, "orders", Op.READ), acl(Res.TOPIC, "audit", Op.READ)],
         seen_tps("fetch", lambda c: [a.tp for a in c["asks"]]),
         lambda r, f, v: per_partition(r) == dict.fromkeys(BOTH, 29)
         and all(not p["records"] for t in r.to_dict()["responses"]
                 for p in t["partitions"]),
         lambda r, f, v: per_partition(r) == dict.fromkeys(BOTH, 0)),
    Case("Fetch (follower)", 1, lambda v: _fetch(v, replica_id=2),
         [cluster_acl(Op.CLUSTER_ACTION)],
         seen_tps("fetch", lambda c: [a.tp for a in c["asks"]]),
         lambda r, f, v: per_partition(r) == dict.fromkeys(BOTH, 29),
         lambda r, f, v: per_partition(r) == dict.fromkeys(BOTH, 0)
         and f.calls_of("fetch")[0]["replica_id"] == 2,
         # Read on every topic is not what a follower needs
         held=[acl(Res.TOPIC, "*", Op.READ)]),
    Case("ListOffsets", 2, _list_offsets,
         [acl(Res.TOPIC, "orders", Op.DESCRIBE), acl(Res.TOPIC, "audit", Op.DESCRIBE)],
         seen_tps("list_offsets", lambda c: [a[0] for a in c["asks"]]),
         lambda r, f, v: per_partition(r, "topics") == dict.fromkeys(BOTH, 29)
         and set(walk(r.to_dict(), "offset")) <= {-1},
         lambda r, f, v: per_partition(r, "topics") == dict.fromkeys(BOTH, 0)),
    Case("OffsetForLeaderEpoch", 23, _leader_epoch,
         [acl(Res.TOPIC, "orders", Op.DESCRIBE), acl(Res.TOPIC, "audit", Op.DESCRIBE)],
         seen_tps("offsets_for_leader_epoch", lambda c: [a[0] for a in c["asks"]]),
         lambda r, f, v: per_partition(r, "topics") == dict.fromkeys(BOTH, 29)
         and set(walk(r.to_dict(), "end_offset")) == {-1},
         lambda r, f, v: per_partition(r, "topics") == dict.fromkeys(BOTH, 0)),
    Case("OffsetForLeaderEpoch (follower)", 23, lambda v: _leader_epoch(v, replica_id=2),
         [cluster_acl(Op.CLUSTER_ACTION)],
         seen_tps("offsets_for_leader_epoch", lambda c: [a[0] for a in c["asks"]]),
         lambda r, f, v: per_partition(r, "topics") == dict.fromkeys(BOTH, 29),
         lambda r, f, v: per_partition(r, "topics") == dict.fromkeys(BOTH, 0)),
    Case("DeleteRecords", 21, _delete_records,
         [acl(Res.TOPIC, "orders", Op.DELETE), acl(Res.TOPIC, "audit", Op.DELETE)],
         seen_tps("delete_records", lambda c: [a[0] for a in c["asks"]]),
         lambda r, f, v: per_partition(r, "topics") == dict.fromkeys(BOTH, 29)
         and set(walk(r.to_dict(), "low_watermark")) == {-1},
         lambda r, f, v: per_partition(r, "topics") == dict.fromkeys(BOTH, 0)
         and f.partition(("orders", 0)).log_start == 1),
    Case("Metadata (named topics)", 3, lambda v: metadata_request(v, ["orders", "audit"]),
         [acl(Res.TOPIC, "orders", Op.DESCRIBE), acl(Res.TOPIC, "audit", Op.DESCRIBE)],
         seen_tps("metadata", lambda c: c["topics"] or []),
         lambda r, f, v: topic_codes(r, "topics") == {"orders": 29, "audit": 29}
         and all(not t["partitions"] for t in r.to_dict()["topics"]),
         lambda r, f, v: topic_codes(r, "topics") == {"orders": 0, "audit": 0}
         and len(r.to_dict()["topics"][0]["partitions"]) == 3,
         versions=(1, 12)),           # v0's empty list means all topics
    Case("Metadata (all topics)", 3, lambda v: metadata_request(v, None if v else []),
         [acl(Res.TOPIC, "orders", Op.DESCRIBE), acl(Res.TOPIC, "audit", Op.DESCRIBE)],
         lambda fake: [],             # the broker lists everything; the answer is filtered
         lambda r, f, v: r.to_dict()["topics"] == [],
         lambda r, f, v: topic_codes(r, "topics") == {"orders": 0, "audit": 0}),
    Case("Metadata (auto-create without Create)", 3,
         lambda v: metadata_request(v, ["fresh"], allow=True),
         [acl(Res.TOPIC, "fresh", Op.DESCRIBE), acl(Res.TOPIC, "fresh", Op.CREATE)],
         lambda fake: [] if "fresh" not in fake.topics else ["fresh"],
         lambda r, f, v: topic_codes(r, "topics") == {"fresh": 29},
         lambda r, f, v: topic_codes(r, "topics") == {"fresh": LEADER_NOT_AVAILABLE},
         held=[acl(Res.TOPIC, "fresh", Op.DESCRIBE)], versions=(1, 12)),
    Case("InitProducerId", 22, lambda v: InitProducerIdRequest[v](
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
        producer_epoch=-1),
         [cluster_acl(Op.IDEMPOTENT_WRITE)],
         lambda fake: fake.calls_of("init_producer_id"),
         lambda r, f, v: (r.error_code, r.producer_id, r.producer_epoch) == (31, -1, -1),
         lambda r, f, v: (r.error_code, r.producer_id, r.producer_epoch) == (0, 1000, 0)),
    Case("InitProducerId (Write on a topic)", 22, lambda v: InitProducerIdRequest[v](
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
        producer_epoch=-1),
         [acl(Res.TOPIC, "orders", Op.WRITE)],
         lambda fake: fake.calls_of("init_producer_id"),
         lambda r, f, v: r.error_code == 31,
         lambda r, f, v: (r.error_code, r.producer_id) == (0, 1000),
         held=[acl(Res.TOPIC, "orders", Op.READ)]),
    Case("CreateTopics", 19, _create_topics, [cluster_acl(Op.CREATE)],
         lambda fake: [s.name for c in fake.calls_of("create_topics") for s in c["specs"]],
         lambda r, f, v: topic_codes(r, "topics") == {"new-a": 29, "new-b": 29}
         and set(walk(r.to_dict(), "error_message")) == {"Authorization failed."}
         and "new-a" not in f.topics,
         lambda r, f, v: topic_codes(r, "topics") == {"new-a": 0, "new-b": 0}
         and len(f.topics["new-b"]) == 2),
    Case("CreateTopics (Create on the topic)", 19, _create_topics,
         [acl(Res.TOPIC, "new-", Op.CREATE, pattern=Pat.PREFIXED)],
         lambda fake: [s.name for c in fake.calls_of("create_topics") for s in c["specs"]],
         lambda r, f, v: topic_codes(r, "topics") == {"new-a": 29, "new-b": 29},
         lambda r, f, v: topic_codes(r, "topics") == {"new-a": 0, "new-b": 0}),
    Case("DeleteTopics", 20, lambda v: delete_topics_request(v, ["orders", "audit"]),
         [acl(Res.TOPIC, "orders", Op.DELETE), acl(Res.TOPIC, "audit", Op.DELETE)],
         lambda fake: [n for c in fake.calls_of("delete_topics") for n in c["names"]],
         lambda r, f, v: topic_codes(r, "responses") == {"orders": 29, "audit": 29}
         and "orders" in f.topics,
         lambda r, f, v: topic_codes(r, "responses") == {"orders": 0, "audit": 0}
         and "orders" not in f.topics),
    Case("CreatePartitions", 37, _create_partitions,
         [acl(Res.TOPIC, "orders", Op.ALTER), acl(Res.TOPIC, "audit", Op.ALTER)],
         lambda fake: [a[0] for c in fake.calls_of("create_partitions") for a in c["asks"]],
         lambda r, f, v: topic_codes(r, "results") == {"orders": 29, "audit": 29}
         and len(f.topics["orders"]) == 3,
         lambda r, f, v: topic_codes(r, "results") == {"orders": 0, "audit": 0}
         and len(f.topics["orders"]) == 5),
    Case("DescribeConfigs (topic)", 32, _describe_configs,
         [acl(Res.TOPIC, "orders", Op.DESCRIBE_CONFIGS)],
         lambda fake: [r for c in fake.calls_of("describe_configs") for r in c["resources"]],
         lambda r, f, v: [(x.error_code, x.error_message, x.configs) for x in r.results]
         == [(29, "Topic authorization failed.", [])],
         lambda r, f, v: r.results[0].error_code == 0 and r.results[0].configs),
    Case("DescribeConfigs (broker)", 32, lambda v: _describe_configs(v, 4, "1"),
         [cluster_acl(Op.DESCRIBE_CONFIGS)],
         lambda fake: [r for c in fake.calls_of("describe_configs") for r in c["resources"]],
         lambda r, f, v: [(x.error_code, x.error_message, x.configs) for x in r.results]
         == [(31, "Cluster authorization failed.", [])],
         lambda r, f, v: r.results[0].error_code == 0 and r.results[0].configs,
         # DescribeConfigs on every topic says nothing about the broker
         held=[acl(Res.TOPIC, "*", Op.DESCRIBE_CONFIGS)]),
    Case("IncrementalAlterConfigs", 44, _alter_configs,
         [acl(Res.TOPIC, "orders", Op.ALTER_CONFIGS)],
         lambda fake: [r for c in fake.calls_of("alter_configs") for r in c["resources"]],
         lambda r, f, v: [(x.error_code, x.error_message) for x in r.responses]
         == [(29, None)] and f.topic_configs["orders"] == {},
         lambda r, f, v: [x.error_code for x in r.responses] == [0]
         and f.topic_configs["orders"] == {"retention.ms": "1000"}),
    Case("DescribeCluster", 60, lambda v: DescribeClusterRequest[v](
        include_cluster_authorized_operations=False, endpoint_type=1),
         [cluster_acl(Op.DESCRIBE)],
         lambda fake: [],
         # Kafka 3 answers DescribeCluster to anyone (AuthHelper.computeDescribeClusterResponse
         # checks Describe only for include_cluster_authorized_operations)
         lambda r, f, v: r.error_code == 0 and [b.broker_id for b in r.brokers] == [1, 2],
         lambda r, f, v: r.error_code == 0 and [b.broker_id for b in r.brokers] == [1, 2]),
    Case("FindCoordinator", 10, _find_coordinator,
         [acl(Res.GROUP, "g1", Op.DESCRIBE), acl(Res.GROUP, "g2", Op.DESCRIBE)],
         lambda fake: [g for c in fake.calls_of("find_coordinator") for g in c["group_ids"]],
         lambda r, f, v: codes_of(r) == {30} and set(walk(r.to_dict(), "node_id")) == {-1}
         and (v < 4 or [c.key for c in r.coordinators] == ["g1", "g2"]),
         lambda r, f, v: codes_of(r) == {0} and set(walk(r.to_dict(), "node_id")) == {1}),
    Case("JoinGroup", 11, _join, [acl(Res.GROUP, "g2", Op.READ)],
         lambda fake: groups_seen(fake, gm.JoinGroup),
         # JoinGroupRequest.getErrorResponse: UNKNOWN_MEMBER_ID, not the id asked with
         lambda r, f, v: (r.error_code, r.member_id, r.generation_id, r.leader, r.members)
         == (30, "", -1, "", []),
         lambda r, f, v: r is PARKED or r.error_code not in (0, 30)),
    Case("SyncGroup", 14, _sync, [acl(Res.GROUP, "g2", Op.READ)],
         lambda fake: groups_seen(fake, gm.SyncGroup),
         lambda r, f, v: (r.error_code, r.assignment) == (30, b""),
         lambda r, f, v: r.error_code not in (0, 30)),
    Case("Heartbeat", 12, _heartbeat, [acl(Res.GROUP, "g2", Op.READ)],
         lambda fake: groups_seen(fake, gm.Heartbeat),
         _all_codes(30),
         lambda r, f, v: r.error_code not in (0, 30)),
    Case("LeaveGroup", 13, _leave, [acl(Res.GROUP, "g2", Op.READ)],
         lambda fake: groups_seen(fake, gm.LeaveGroup),
         lambda r, f, v: r.error_code == 30 and not r.to_dict().get("members"),
         lambda r, f, v: codes_of(r) != {30}),
    Case("OffsetCommit", 8, _commit,
         [acl(Res.GROUP, "g1", Op.READ), acl(Res.TOPIC, "orders", Op.READ),
          acl(Res.TOPIC, "audit", Op.READ)],
         lambda fake: groups_seen(fake, gm.OffsetCommit),
         lambda r, f, v: per_partition(r, "topics") == dict.fromkeys(BOTH, 30),
         lambda r, f, v: per_partition(r, "topics") == dict.fromkeys(BOTH, 0)
         and f.coordinator.group("g1").offset(("audit", 0)).offset == 9),
    Case("OffsetFetch", 9, _offset_fetch,
         [acl(Res.GROUP, "g1", Op.DESCRIBE), acl(Res.TOPIC, "orders", Op.DESCRIBE),
          acl(Res.TOPIC, "audit", Op.DESCRIBE)],
         lambda fake: groups_seen(fake, gm.OffsetFetch),
         # v2+: at the top, no topics; v1 has no top-level code: on every partition asked
         lambda r, f, v: (r.error_code, r.topics) == (30, []) if v >= 2
         else per_partition(r, "topics") == dict.fromkeys(BOTH, 30),
         lambda r, f, v: per_partition(r, "topics", code="committed_offset")
         == {("orders", 0): 5, ("audit", 0): 7}),
    Case("ListGroups", 16, lambda v: ListGroupsRequest[v](states_filter=[], types_filter=[]),
         [cluster_acl(Op.DESCRIBE)],
         lambda fake: [],              # the coordinator lists; the answer is filtered
         lambda r, f, v: (r.error_code, r.groups) == (0, []),
         lambda r, f, v: [g.group_id for g in r.groups] == ["g1"]),
    Case("DescribeGroups", 15, lambda v: DescribeGroupsRequest[v](
        groups=["g1", "g2"], include_authorized_operations=False),
         [acl(Res.GROUP, "g1", Op.DESCRIBE), acl(Res.GROUP, "g2", Op.DESCRIBE)],
         lambda fake: [g for e in groups_seen(fake, gm.DescribeGroups) for g in e.group_ids],
         lambda r, f, v: [(g.group_id, g.error_code, g.group_state, g.members)
                          for g in r.groups] == [("g1", 30, "", []), ("g2", 30, "", [])],
         lambda r, f, v: [(g.group_id, g.error_code, g.group_state) for g in r.groups]
         == [("g1", 0, "Empty"), ("g2", 0, "Dead")]),
    Case("DeleteGroups", 42, lambda v: DeleteGroupsRequest[v](groups_names=["g1", "g2"]),
         [acl(Res.GROUP, "g1", Op.DELETE), acl(Res.GROUP, "g2", Op.DELETE)],
         lambda fake: [g for e in groups_seen(fake, gm.DeleteGroups) for g in e.group_ids],
         lambda r, f, v: [(g.group_id, g.error_code) for g in r.results]
         == [("g1", 30), ("g2", 30)] and f.coordinator.group("g1") is not None,
         lambda r, f, v: [(g.group_id, g.error_code) for g in r.results]
         == [("g1", 0), ("g2", 69)]),
    Case("CreateAcls", 30, _create_acls, [cluster_acl(Op.ALTER)],
         lambda fake: fake.calls_of("create_acls") + fake.acls,
         lambda r, f, v: [(x.error_code, x.error_message) for x in r.results]
         == [(31, "Cluster authorization failed.")],
         lambda r, f, v: [x.error_code for x in r.results] == [0]
         and f.acls == [acl(Res.TOPIC, "orders", Op.READ, pattern=Pat.LITERAL)]),
    Case("DescribeAcls", 29, _describe_acls, [cluster_acl(Op.DESCRIBE)],
         lambda fake: [],             # read from this broker's authorizer, not the broker
         lambda r, f, v: (r.error_code, r.resources) == (31, []),
         lambda r, f, v: r.error_code == 0 and [(x.resource_type, x.resource_name)
                                                for x in r.resources] == [(4, CLUSTER_NAME)]),
    Case("DeleteAcls", 31, _delete_acls, [cluster_acl(Op.ALTER)],
         lambda fake: fake.calls_of("delete_acls"),
         lambda r, f, v: [(x.error_code, x.matching_acls) for x in r.filter_results]
         == [(31, [])] and len(f.acls) == 1,
         lambda r, f, v: [x.error_code for x in r.filter_results] == [0]
         and [m.resource_name for m in r.filter_results[0].matching_acls] == ["orders"]
         and f.acls == []),
]


def _prepare(case: Case, fake: FakeBrokerApi) -> None:
    if case.api_key == 31:            # something for DeleteAcls to remove
        fake.acls.append(acl(Res.TOPIC, "orders", Op.READ, principal=BOB))


def _table(denied: bool):
    out = []
    for case in CASES:
        served = versions(case.api_key)
        lo, hi = case.versions or (served[0], served[-1])
        for v in sorted({lo, hi}):
            out.append(pytest.param(case, v, id=f"{case.name}-v{v}"))
    return out


@pytest.mark.parametrize("case,version", _table(denied=True))
def test_a_principal_without_the_acl_gets_kafkas_code_and_the_broker_sees_nothing(case,
                                                                                  version):
    fake = fresh_fake()
    _prepare(case, fake)
    resp = ask(fake, case.build(version), session_for(case.held))
    assert resp is not PARKED
    assert case.denied(resp, fake, version), resp.to_dict()
    assert case.seen(fake) == []


@pytest.mark.parametrize("case,version", _table(denied=False))
def test_the_acl_kafka_requires_is_enough(case, version):
    fake = fresh_fake()
    _prepare(case, fake)
    resp = ask(fake, case.build(version), session_for(case.grant))
    assert resp is PARKED or case.allowed(resp, fake, version), resp.to_dict()
    if case.name not in ("Metadata (all topics)", "ListGroups", "DescribeAcls",
                         "DescribeCluster"):
        assert case.seen(fake), "the request never reached the broker"


def test_the_table_covers_every_served_api_that_touches_a_resource():
    covered = {c.api_key for c in CASES}
    assert covered == (set(HANDLERS) | set(SESSION_HANDLERS)) - {17, 36}


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
    assert resp.error_code == 0
    assert per_partition(resp, "topics", code="committed_offset") == {("audit", 0): 7}


@pytest.mark.parametrize("version", versions(9))
def test_offset_fetch_of_named_partitions_answers_denied_ones_29(version):
    fake = fresh_fake()
    session = session_for([acl(Res.GROUP, "g1", Op.DESCRIBE),
                           acl(Res.TOPIC, "orders", Op.READ)])     # Read implies Describe
    resp = ask(fake, _offset_fetch(version), session)
    got = {tp: (x["committed_offset"], x["error_code"])
           for t in resp.to_dict()["topics"] for x in t["partitions"]
           for tp in [(t["name"], x["partition_index"])]}
    assert got == {("orders", 0): (5, 0), ("audit", 0): (-1, 29)}
    [event] = groups_seen(fake, gm.OffsetFetch)
    assert event.partitions == (("orders", 0),)


@pytest.mark.parametrize("version", versions(9, 2))
def test_offset_fetch_a_coordinator_error_is_the_whole_answer_even_with_denied_topics(version):
    # KafkaApis.fetchOffsetsForGroup: the coordinator is asked with the authorised topics
    # (none here) and its group error is the answer, without the refused topics.
    fake = fresh_fake()
    far = not_owned_group(fake)
    session = session_for([acl(Res.GROUP, far, Op.DESCRIBE)])
    resp = ask(fake, _offset_fetch(version, group=far), session)
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
        ("1", 31, "Cluster authorization failed."), ("g1", 30, None)]
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


# -- SASL gating through answer() ----------------------------------------------------------
PASSWORD = "alice-secret"
MECHANISM = "SCRAM-SHA-256"


def sasl_session(authorizer=None) -> Session:
    creds = {(MECHANISM, "alice"): make_credential(MECHANISM, PASSWORD)}
    server = SaslServer([MECHANISM], lambda mechanism, user: creds.get((mechanism, user)))
    return Session(listener="SASL_PLAINTEXT", host=HOST, security_protocol="SASL_PLAINTEXT",
                   sasl=server, authorizer=authorizer)


def sasl_fake() -> FakeBrokerApi:
    fake = FakeBrokerApi()
    fake.add_broker(1, SASL_PLAINTEXT=("127.0.0.1", 9094))
    fake.add_topic("orders", 1)
    return fake


def authenticate(fake, session, conn, password=PASSWORD, handshake_version=1,
                 authenticate_version=2):
    """ApiVersions, SaslHandshake and SCRAM's two SaslAuthenticate rounds: the last answer."""
    versions_answer = wire_ask(fake, ApiVersionsRequest[3](
        client_software_name="t", client_software_version="1"), session, conn)
    assert versions_answer.error_code == 0
    hs = wire_ask(fake, SaslHandshakeRequest[handshake_version](mechanism=MECHANISM),
                  session, conn)
    assert (hs.error_code, hs.mechanisms) == (0, [MECHANISM])
    client = scramp.ScramClient([MECHANISM], "alice", password)
    first = wire_ask(fake, SaslAuthenticateRequest[authenticate_version](
        auth_bytes=client.get_client_first().encode()), session, conn)
    assert first.error_code == 0 and not session.closing
    client.set_server_first(bytes(first.auth_bytes).decode())
    final = wire_ask(fake, SaslAuthenticateRequest[authenticate_version](
        auth_bytes=client.get_client_final().encode()), session, conn)
    return client, final


def test_metadata_before_authenticating_closes_the_connection():
    fake, session = sasl_fake(), sasl_session()
    with pytest.raises(ProtocolError, match="ILLEGAL_SASL_STATE"):
        send(fake, metadata_request(12, ["orders"]), session)
    assert fake.calls == []


def test_metadata_after_the_handshake_but_before_authenticating_closes_the_connection():
    fake, session, conn = sasl_fake(), sasl_session(), Connection()
    wire_ask(fake, SaslHandshakeRequest[1](mechanism=MECHANISM), session, conn)
    with pytest.raises(ProtocolError):
        send(fake, metadata_request(12, ["orders"]), session, conn=conn)
    assert fake.calls == []


@pytest.mark.parametrize("authenticate_version", versions(36))
def test_a_full_scram_exchange_then_metadata_is_answered(authenticate_version):
    fake, session, conn = sasl_fake(), sasl_session(), Connection()
    assert session.principal == "User:ANONYMOUS"
    client, final = authenticate(fake, session, conn,
                                 authenticate_version=authenticate_version)
    assert final.error_code == 0 and final.error_message is None
    client.set_server_final(bytes(final.auth_bytes).decode())   # the server proved itself
    assert session.principal == ALICE and not session.closing
    md = wire_ask(fake, metadata_request(12, ["orders"]), session, conn)
    assert [(t.name, t.error_code) for t in md.topics] == [("orders", 0)]
    assert [(b.node_id, b.port) for b in md.brokers] == [(1, 9094)]
    # no second exchange on the same connection
    with pytest.raises(ProtocolError):
        send(fake, SaslHandshakeRequest[1](mechanism=MECHANISM), session, conn=conn)


def test_the_authenticated_principal_is_what_the_acls_see():
    fake = sasl_fake()
    authorizer = Authorizer()
    authorizer.replace_all([acl(Res.TOPIC, "orders", Op.DESCRIBE)])
    session, conn = sasl_session(authorizer), Connection()
    authenticate(fake, session, conn)
    md = wire_ask(fake, metadata_request(12, ["orders", "secret"]), session, conn)
    assert [(t.name, t.error_code) for t in md.topics] == [("orders", 0), ("secret", 29)]


def test_a_wrong_password_is_58_and_the_connection_closes():
    fake, session, conn = sasl_fake(), sasl_session(), Connection()
    _, final = authenticate(fake, session, conn, password="not-it")
    assert final.error_code == SASL_AUTHENTICATION_FAILED
    assert "invalid credentials" in final.error_message
    assert session.closing and session.principal == "User:ANONYMOUS"
    with pytest.raises(ProtocolError):
        send(fake, metadata_request(12, ["orders"]), session, conn=conn)


def test_an_unsupported_mechanism_is_33_and_the_connection_closes():
    fake, session, conn = sasl_fake(), sasl_session(), Connection()
    resp = wire_ask(fake, SaslHandshakeRequest[1](mechanism="GSSAPI"), session, conn)
    assert (resp.error_code, resp.mechanisms) == (UNSUPPORTED_SASL_MECHANISM, [MECHANISM])
    assert session.closing


def test_apiversions_above_our_max_is_answered_then_an_older_retry_is_still_allowed():
    fake, session, conn = sasl_fake(), sasl_session(), Connection()
    request, out = send(fake, ApiVersionsRequest[4](client_software_name="t",
                                                    client_software_version="1"),
                        session, correlation_id=1, conn=conn)
    assert not request.served and out[8:10] == struct.pack(">h", UNSUPPORTED_VERSION)
    client, final = authenticate(fake, session, conn)       # ApiVersions v3, then SASL
    assert final.error_code == 0 and session.principal == ALICE
    assert not session.closing


def test_apiversions_twice_closes_the_connection():
    fake, session, conn = sasl_fake(), sasl_session(), Connection()
    wire_ask(fake, ApiVersionsRequest[3](client_software_name="t",
                                         client_software_version="1"), session, conn)
    with pytest.raises(ProtocolError):
        send(fake, ApiVersionsRequest[3](client_software_name="t",
                                         client_software_version="1"), session, conn=conn)


@pytest.mark.parametrize("version", versions(17))
def test_sasl_handshake_without_sasl_is_34_and_the_connection_stays(version):
    # KafkaApis.handleSaslHandshakeRequest: ILLEGAL_SASL_STATE, answered like any request.
    fake, conn = sasl_fake(), Connection()
    session = Session(listener="PLAINTEXT")
    resp = wire_ask(fake, SaslHandshakeRequest[version](mechanism=MECHANISM), session, conn)
    assert (resp.error_code, resp.mechanisms) == (ILLEGAL_SASL_STATE, [])
    assert not session.closing
    md = wire_ask(fake, metadata_request(12, ["orders"]), session, conn)
    assert md.topics[0].error_code == 0


def test_sasl_authenticate_without_sasl_is_34():
    fake, session = sasl_fake(), Session(listener="PLAINTEXT")
    resp = wire_ask(fake, SaslAuthenticateRequest[2](auth_bytes=b"n,,n=alice,r=abc"), session)
    assert (resp.error_code, bytes(resp.auth_bytes)) == (ILLEGAL_SASL_STATE, b"")
    assert not session.closing


# -- the ACL APIs ------------------------------------------------------------------------------
@pytest.mark.parametrize("version", versions(29))
def test_acl_apis_without_an_authorizer_are_security_disabled(version):
    fake = fresh_fake()
    fake.acls.append(acl(Res.TOPIC, "orders", Op.READ))
    for context in ("PLAINTEXT", Session(listener="PLAINTEXT", tls_principal=ALICE)):
        described = ask(fake, _describe_acls(version), context)
        assert (described.error_code, described.error_message, described.resources) == (
            SECURITY_DISABLED, "No Authorizer is configured on the broker", [])
        created = ask(fake, _create_acls(version, ACL_READ, ACL_READ), context)
        assert [(r.error_code, r.error_message) for r in created.results] == [
            (SECURITY_DISABLED, "No Authorizer is configured.")] * 2
        deleted = ask(fake, _delete_acls(version), context)
        assert [(r.error_code, r.error_message, r.matching_acls)
                for r in deleted.filter_results] == [
            (SECURITY_DISABLED, "No Authorizer is configured.", [])]
    assert fake.calls == [] and len(fake.acls) == 1


def admin_session(bindings=()) -> Session:
    return session_for(bindings, principal="User:admin", super_users=["User:admin"])


@pytest.mark.parametrize("version", versions(30))
def test_create_acls_refuses_invalid_bindings_per_item_and_writes_the_valid_ones(version):
    fake = fresh_fake()
    prefixed = {**ACL_READ, "resource_name": "ord", "resource_pattern_type": 4,
                "permission_type": 2}
    creations = [
        ACL_READ,
        {**ACL_READ, "resource_type": 4, "resource_name": "not-the-cluster"},
        {**ACL_READ, "resource_type": 1},                            # ANY
        {**ACL_READ, "resource_name": ""},
        {**ACL_READ, "operation": 0},                                # UNKNOWN
        {**ACL_READ, "resource_type": 99},                           # not a type at all
        prefixed,
    ]
    resp = ask(fake, _create_acls(version, *creations), admin_session())
    assert [r.error_code for r in resp.results] == [0, 42, 42, 42, 42, 42, 0]
    assert resp.results[1].error_message == \
        "The only valid name for the CLUSTER resource is kafka-cluster"
    assert resp.results[0].error_message is None
    assert fake.acls == [
        acl(Res.TOPIC, "orders", Op.READ),
        acl(Res.TOPIC, "ord", Op.READ, perm=Perm.DENY, pattern=Pat.PREFIXED)]
    assert [len(c["bindings"]) for c in fake.calls_of("create_acls")] == [2]


def test_create_acls_with_nothing_valid_writes_nothing():
    fake = fresh_fake()
    resp = ask(fake, _create_acls(3, {**ACL_READ, "resource_name": ""}), admin_session())
    assert [r.error_code for r in resp.results] == [42]
    assert fake.calls_of("create_acls") == [] and fake.acls == []


BINDINGS = [
    acl(Res.TOPIC, "orders", Op.READ),
    acl(Res.TOPIC, "orders", Op.WRITE, principal=BOB, host="10.1.1.1"),
    acl(Res.TOPIC, "ord", Op.DESCRIBE, pattern=Pat.PREFIXED),
    acl(Res.GROUP, "g1", Op.READ, perm=Perm.DENY),
]


def described(resp) -> dict:
    return {(r.resource_type, r.resource_name, r.pattern_type): sorted(
        (a.principal, a.host, a.operation, a.permission_type) for a in r.acls)
        for r in resp.resources}


@pytest.mark.parametrize("version", versions(29))
def test_describe_acls_answers_the_authorizers_bindings_grouped_per_resource(version):
    fake = fresh_fake()
    session = admin_session(BINDINGS)
    resp = ask(fake, _describe_acls(version), session)
    assert resp.error_code == 0 and resp.error_message is None
    assert len(resp.resources) == 3
    assert described(resp) == {
        (2, "orders", 3): [(ALICE, "*", 3, 3), (BOB, "10.1.1.1", 4, 3)],
        (2, "ord", 4): [(ALICE, "*", 8, 3)],
        (3, "g1", 3): [(ALICE, "*", 3, 2)]}
    only_topics = ask(fake, _describe_acls(version, resource_type_filter=2,
                                           principal_filter=ALICE), session)
    assert described(only_topics) == {(2, "orders", 3): [(ALICE, "*", 3, 3)],
                                      (2, "ord", 4): [(ALICE, "*", 8, 3)]}
    # MATCH: every pattern that applies to the topic "orders"
    matching = ask(fake, _describe_acls(version, resource_type_filter=2,
                                        resource_name_filter="orders",
                                        pattern_type_filter=2), session)
    assert set(described(matching)) == {(2, "orders", 3), (2, "ord", 4)}
    assert fake.calls == []


@pytest.mark.parametrize("version", versions(31))
def test_delete_acls_answers_the_removed_bindings_per_filter(version):
    fake = fresh_fake()
    fake.acls.extend(BINDINGS)
    flt = dict(ACL_ANY)
    resp = ask(fake, _delete_acls(version, {**flt, "resource_type_filter": 3},
                                  {**flt, "resource_type_filter": 2, "principal_filter": BOB},
                                  {**flt, "resource_type_filter": 5}),
               admin_session(BINDINGS))
    got = [(r.error_code, sorted((m.resource_type, m.resource_name, m.principal,
                                  m.operation, m.permission_type, m.error_code)
                                 for m in r.matching_acls)) for r in resp.filter_results]
    assert got == [(0, [(3, "g1", ALICE, 3, 2, 0)]),
                   (0, [(2, "orders", BOB, 4, 3, 0)]),
                   (0, [])]
    assert fake.acls == [BINDINGS[0], BINDINGS[2]]
    assert [m.host for m in resp.filter_results[1].matching_acls] == ["10.1.1.1"]


@pytest.mark.parametrize("field_name", ["resource_type_filter", "pattern_type_filter",
                                        "operation", "permission_type"])
def test_an_unknown_enum_value_in_a_filter_is_an_invalid_request(field_name):
    fake = fresh_fake()
    fake.acls.extend(BINDINGS)
    session = admin_session(BINDINGS)
    resp = ask(fake, _describe_acls(3, **{field_name: 0}), session)
    assert (resp.error_code, resp.resources) == (INVALID_REQUEST, [])
    resp = ask(fake, _delete_acls(3, {**ACL_ANY, field_name: 0},
                                  {**ACL_ANY, "resource_type_filter": 3}), session)
    assert [(r.error_code, len(r.matching_acls)) for r in resp.filter_results] == [
        (INVALID_REQUEST, 0), (0, 1)]
    assert fake.calls_of("delete_acls")[0]["filters"][0].resource_type == Res.GROUP
    assert len(fake.acls) == 3


def test_acl_apis_need_cluster_describe_and_alter():
    fake = fresh_fake()
    describe_only = session_for([cluster_acl(Op.DESCRIBE)])
    assert ask(fake, _describe_acls(3), describe_only).error_code == 0
    assert ask(fake, _create_acls(3), describe_only).results[0].error_code == 31
    assert ask(fake, _delete_acls(3), describe_only).filter_results[0].error_code == 31
    alter = session_for([cluster_acl(Op.ALTER)])          # Alter implies Describe
    assert ask(fake, _describe_acls(3), alter).error_code == 0
    assert fake.calls == []
