"""Security end to end through protocol.handlers.answer, without Ray, ZooKeeper or sockets:
ACL authorisation (protocol/handlers/authorized.py, a REAL protocol.security.authorizer.Authorizer)
against FakeBrokerApi (tests/fake_broker_api.py). Requests are encoded by kafka-python and answers
decoded by it (and read whole by kio). Requests mixing allowed and denied items are in
tests/test_protocol_authorization_mixed.py, the SASL gate and the ACL APIs in
tests/test_protocol_security_apis.py.

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
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import InitProducerIdRequest
from transactions import messages as tm
from kio.index import load_response_schema

from coordinator import messages as gm
from protocol.api import Deferred
from protocol.codec import has_request_schema
from protocol.connection import Connection
from protocol.handlers import HANDLERS, SESSION_HANDLERS, answer
from protocol.security.acl import (
    CLUSTER_NAME, AccessControlEntry, AclBinding, AclOperation as Op, AclPermissionType as Perm,
    PatternType as Pat, ResourcePattern, ResourceType as Res,
)
from protocol.security.authorizer import Authorizer
from protocol.security.session import Session
from tests.fake_broker_api import FakeBrokerApi, NotAnsweredYet
from replicas.records import decode_records
from tests.handler_wire import (
    delete_topics_request, fetch_request, kio_read, metadata_request, produce_request,
    versions,
)
from tests.protocol_samples import (ACL_ANY, ACL_READ, RESPONSES, TOPIC_IDS,
                                    AlterShareGroupOffsetsRequest,
                                    DeleteShareGroupOffsetsRequest,
                                    DescribeShareGroupOffsetsRequest,
                                    ConsumerGroupDescribeRequest,
                                    ConsumerGroupHeartbeatRequest, ShareAcknowledgeRequest,
                                    ShareFetchRequest, ShareGroupDescribeRequest,
                                    ShareGroupHeartbeatRequest, frame_of,
                                    legacy_message_set, sample_request, walk)
from tests.test_protocol_group_handlers import groups_cluster

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
    if has_request_schema(api_key, version):               # not protocol/legacy.py's
        header, _ = kio_read(out, load_response_schema(api_key, version))
        assert header.correlation_id == correlation_id
    return RESPONSES[api_key].decode(out[4:], version=version, header=True)


def codes_of(resp) -> set:
    return set(walk(resp.to_dict(), "error_code"))


def fresh_fake() -> FakeBrokerApi:
    """tests.handler_wire.cluster() (orders: 3 partitions led here at epoch 4,
    audit: 1) whose coordinator owns g1, g2, g3; group g1 has committed offsets."""
    fake = groups_cluster()
    done = fake.group_call(lambda rid: gm.OffsetCommit(
        rid, "g1", (gm.CommitOffset("orders", 0, 5), gm.CommitOffset("audit", 0, 7))))
    assert done.result().partitions[0].error == 0
    fake.append(("orders", 0), b"one")
    fake.append(("audit", 0), b"two")
    fake.own_txns()
    fake.calls.clear()
    fake.group_events.clear()
    return fake


def txn_seen(kind):
    return lambda fake: [c["event"] for c in fake.calls_of("txn_call")
                         if isinstance(c["event"], kind)]


TXN_DENIED = 53

def groups_seen(fake, kind) -> list:
    return [e for e in fake.group_events if isinstance(e, kind)]


# -- request builders: (version) -> kafka-python request ---------------------------------------
def _produce(v):
    def records(value):       # v0-2: a message set (v0, v1 for Produce v2), up-converted
        return value if v >= 3 else legacy_message_set(int(v == 2), [value])
    return produce_request(v, {"orders": [(0, records(b"to-orders"))],
                               "audit": [(0, records(b"to-audit"))]})


def _written(fake, tp) -> bytes:
    """The value of the last record the fake appended to `tp` (raw bytes from Produce v3+,
    a RecordBatch v2 up-converted from v0-2)."""
    data = fake.partition(tp).batches[-1].data
    return decode_records(data)[-1].value if data[16:17] == b"\x02" else data


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


def _cg_heartbeat(v):
    return ConsumerGroupHeartbeatRequest[v](
        group_id="g2", member_id="m1", member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout_ms=5000, subscribed_topic_names=["orders"],
        subscribed_topic_regex=None, server_assignor=None, topic_partitions=[])


def _sg_heartbeat(v):
    return ShareGroupHeartbeatRequest[v](group_id="g2", member_id="m1", member_epoch=0,
                                         rack_id=None, subscribed_topic_names=["orders"])


def _share_fetch(v):
    t = ShareFetchRequest.FetchTopic
    return ShareFetchRequest[v](
        group_id="g1", member_id="m1", share_session_epoch=0, max_wait_ms=0, min_bytes=1,
        max_bytes=1 << 20, max_records=100, batch_size=100, share_acquire_mode=0,
        is_renew_ack=False, topics=[t(topic_id=TOPIC_IDS[n], partitions=[
            t.FetchPartition(partition_index=0, acknowledgement_batches=[])])
            for n in ("orders", "audit")], forgotten_topics_data=[])


def _share_ack(v):
    t = ShareAcknowledgeRequest.AcknowledgeTopic
    return ShareAcknowledgeRequest[v](
        group_id="g1", member_id="m1", share_session_epoch=1, is_renew_ack=False, topics=[
            t(topic_id=TOPIC_IDS[n], partitions=[t.AcknowledgePartition(
                partition_index=0, acknowledgement_batches=[
                    t.AcknowledgePartition.AcknowledgementBatch(
                        first_offset=0, last_offset=0, acknowledge_types=[1])])])
            for n in ("orders", "audit")])


def _share_asked(method):
    return lambda fake: [tp for c in fake.calls_of(method)
                         for tp in c.get("asked", c.get("acks", {}))]


def _sg_offsets(v):
    g = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
    return DescribeShareGroupOffsetsRequest[v](groups=[g(group_id="g1", topics=[
        g.DescribeShareGroupOffsetsRequestTopic(topic_name=n, partitions=[0])
        for n in ("orders", "audit")])])


def _sg_alter(v):
    t = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
    return AlterShareGroupOffsetsRequest[v](group_id="g1", topics=[t(topic_name=n, partitions=[
        t.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])
        for n in ("orders", "audit")])


def _sg_delete(v):
    t = DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic
    return DeleteShareGroupOffsetsRequest[v](group_id="g1", topics=[
        t(topic_name=n) for n in ("orders", "audit")])


def _offsets_asked(fake):
    """The topics of the share-group offsets requests that reached the broker."""
    out = []
    for c in fake.calls_of("share_offsets"):
        r = c["request"]
        out.extend(getattr(r, "offsets", None) or getattr(r, "topics", None) or ())
    return out


def _sg_partitions(r):
    """{(topic, partition): error} of a Describe/Alter ShareGroupOffsets answer."""
    topics = r.groups[0].topics if hasattr(r, "groups") else r.responses
    return {(t.topic_name, p.partition_index): p.error_code
            for t in topics for p in t.partitions}


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
    if v >= 8:
        g = OffsetFetchRequest.OffsetFetchRequestGroup
        asked = None if topics is None else [g.OffsetFetchRequestTopics(
            name=n, partition_indexes=[0]) for n in topics]
        return OffsetFetchRequest[v](require_stable=False, groups=[
            g(group_id=group, member_id=None, member_epoch=-1, topics=asked)])
    t = OffsetFetchRequest.OffsetFetchRequestTopic
    asked = None if topics is None else [t(name=n, partition_indexes=[0]) for n in topics]
    return OffsetFetchRequest[v](group_id=group, require_stable=False, topics=asked)


def fetched_group(resp):
    """An OffsetFetch answer's one group (v8+ batch groups; before, the answer itself)."""
    return resp.groups[0] if resp.API_VERSION >= 8 else resp


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
    tree = resp.to_dict()
    if "groups" in tree and topics == "topics":          # OffsetFetch v8+: one group asked
        tree = tree["groups"][0]
    by_id = {str(i): n for n, i in TOPIC_IDS.items()}         # Fetch v13+: topics by id
    return {((t.get("name") or t.get("topic") or by_id.get(str(t.get("topic_id")))),
             p.get("index", p.get("partition_index", p.get("partition")))): p[code]
            for t in tree[topics] for p in t[parts]}


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
         and _written(f, ("audit", 0)) == b"to-audit"),
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
         lambda r, f, v: per_partition(r, "topics") == dict.fromkeys(BOTH, 0),
         versions=(1, None)),
    Case("ListOffsets v0 (offsets before a time)", 2, _list_offsets,
         [acl(Res.TOPIC, "orders", Op.DESCRIBE), acl(Res.TOPIC, "audit", Op.DESCRIBE)],
         seen_tps("legacy_offsets", lambda c: [a[0] for a in c["asks"]]),
         lambda r, f, v: per_partition(r, "topics") == dict.fromkeys(BOTH, 29)
         and not list(walk(r.to_dict(), "old_style_offsets"))[0],
         lambda r, f, v: per_partition(r, "topics") == dict.fromkeys(BOTH, 0)
         and per_partition(r, "topics", code="old_style_offsets") == {
             ("orders", 0): [1], ("audit", 0): [1]},
         versions=(0, 0)),
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
         and set(walk(r.to_dict(), "error_message")) == ({"Authorization failed."} if v else set())
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
         and f.coordinator.group("g1").offset(("audit", 0)).offset == 9,
         versions=(1, None)),
    Case("OffsetCommit v0 (ZooKeeper)", 8, _commit,
         [acl(Res.GROUP, "g1", Op.READ), acl(Res.TOPIC, "orders", Op.READ),
          acl(Res.TOPIC, "audit", Op.READ)],
         seen_tps("zk_commit_offsets", lambda c: [a[0] for a in c["asks"]]),
         lambda r, f, v: per_partition(r, "topics") == dict.fromkeys(BOTH, 30),
         lambda r, f, v: per_partition(r, "topics") == dict.fromkeys(BOTH, 0)
         and f.zk_offsets[("g1", ("audit", 0))] == 9
         and f.coordinator.group("g1").offset(("audit", 0)).offset == 7,   # untouched
         versions=(0, 0)),
    Case("OffsetFetch", 9, _offset_fetch,
         [acl(Res.GROUP, "g1", Op.DESCRIBE), acl(Res.TOPIC, "orders", Op.DESCRIBE),
          acl(Res.TOPIC, "audit", Op.DESCRIBE)],
         lambda fake: groups_seen(fake, gm.OffsetFetch),
         # v2+: at the top, no topics (v8+: the group's); v1 has no top-level code: on every
         # partition asked
         lambda r, f, v: (fetched_group(r).error_code, fetched_group(r).topics) == (30, [])
         if v >= 2 else per_partition(r, "topics") == dict.fromkeys(BOTH, 30),
         lambda r, f, v: per_partition(r, "topics", code="committed_offset")
         == {("orders", 0): 5, ("audit", 0): 7},
         versions=(1, None)),
    Case("OffsetFetch v0 (ZooKeeper)", 9, _offset_fetch,
         [acl(Res.GROUP, "g1", Op.DESCRIBE), acl(Res.TOPIC, "orders", Op.DESCRIBE),
          acl(Res.TOPIC, "audit", Op.DESCRIBE)],
         seen_tps("zk_fetch_offsets", lambda c: c["tps"]),
         lambda r, f, v: per_partition(r, "topics") == dict.fromkeys(BOTH, 30),
         lambda r, f, v: per_partition(r, "topics", code="committed_offset")
         == {("orders", 0): 50, ("audit", 0): 70},
         versions=(0, 0)),
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
    Case("ConsumerGroupHeartbeat", 68, _cg_heartbeat,
         [acl(Res.GROUP, "g2", Op.READ), acl(Res.TOPIC, "orders", Op.DESCRIBE)],
         lambda fake: groups_seen(fake, gm.ConsumerGroupHeartbeat),
         lambda r, f, v: (r.error_code, r.assignment) == (30, None),
         lambda r, f, v: r.error_code not in (29, 30)),
    Case("ConsumerGroupHeartbeat (a subscribed topic)", 68, _cg_heartbeat,
         [acl(Res.GROUP, "g2", Op.READ), acl(Res.TOPIC, "orders", Op.DESCRIBE)],
         lambda fake: groups_seen(fake, gm.ConsumerGroupHeartbeat),
         lambda r, f, v: (r.error_code, r.assignment) == (29, None),
         lambda r, f, v: r.error_code not in (29, 30),
         held=[acl(Res.GROUP, "g2", Op.READ)]),
    Case("ConsumerGroupDescribe", 69, lambda v: ConsumerGroupDescribeRequest[v](
        group_ids=["g1", "g2"], include_authorized_operations=False),
         [acl(Res.GROUP, "g1", Op.DESCRIBE), acl(Res.GROUP, "g2", Op.DESCRIBE)],
         lambda fake: [g for e in groups_seen(fake, gm.ConsumerGroupDescribe)
                       for g in e.group_ids],
         lambda r, f, v: [(g.group_id, g.error_code) for g in r.groups]
         == [("g1", 30), ("g2", 30)],
         lambda r, f, v: [g.error_code for g in r.groups] == [69, 69]),  # classic / unknown
    Case("ShareGroupHeartbeat", 76, _sg_heartbeat,
         [acl(Res.GROUP, "g2", Op.READ), acl(Res.TOPIC, "orders", Op.DESCRIBE)],
         lambda fake: fake.calls_of("share_heartbeat"),
         lambda r, f, v: (r.error_code, r.assignment) == (30, None),
         lambda r, f, v: r.error_code == 0 and r.member_epoch > 0),
    Case("ShareGroupHeartbeat (a subscribed topic)", 76, _sg_heartbeat,
         [acl(Res.GROUP, "g2", Op.READ), acl(Res.TOPIC, "orders", Op.DESCRIBE)],
         lambda fake: fake.calls_of("share_heartbeat"),
         lambda r, f, v: (r.error_code, r.assignment) == (29, None),
         lambda r, f, v: r.error_code == 0, held=[acl(Res.GROUP, "g2", Op.READ)]),
    Case("ShareGroupDescribe", 77, lambda v: ShareGroupDescribeRequest[v](
        group_ids=["g1", "g2"], include_authorized_operations=False),
         [acl(Res.GROUP, "g1", Op.DESCRIBE), acl(Res.GROUP, "g2", Op.DESCRIBE)],
         lambda fake: [g for c in fake.calls_of("share_describe") for g in c["group_ids"]],
         lambda r, f, v: [(g.group_id, g.error_code) for g in r.groups]
         == [("g1", 30), ("g2", 30)],
         lambda r, f, v: [g.error_code for g in r.groups] == [69, 69]),      # unknown
    Case("ShareFetch", 78, _share_fetch,
         [acl(Res.GROUP, "g1", Op.READ), acl(Res.TOPIC, "orders", Op.READ),
          acl(Res.TOPIC, "audit", Op.READ)],
         _share_asked("share_fetch"),
         lambda r, f, v: (r.error_code, r.responses) == (30, []),
         lambda r, f, v: r.error_code == 0 and set(per_partition(r).values()) == {0}),
    Case("ShareFetch (its topics)", 78, _share_fetch,
         [acl(Res.GROUP, "g1", Op.READ), acl(Res.TOPIC, "orders", Op.READ),
          acl(Res.TOPIC, "audit", Op.READ)],
         _share_asked("share_fetch"),
         lambda r, f, v: r.error_code == 0 and per_partition(r) == dict.fromkeys(BOTH, 29),
         lambda r, f, v: r.error_code == 0, held=[acl(Res.GROUP, "g1", Op.READ)]),
    Case("ShareAcknowledge", 79, _share_ack,
         [acl(Res.GROUP, "g1", Op.READ), acl(Res.TOPIC, "orders", Op.READ),
          acl(Res.TOPIC, "audit", Op.READ)],
         _share_asked("share_acknowledge"),
         lambda r, f, v: (r.error_code, r.responses) == (30, []),
         lambda r, f, v: r.error_code == 122),       # SHARE_SESSION_NOT_FOUND: none opened
    Case("DescribeShareGroupOffsets", 90, _sg_offsets,
         [acl(Res.GROUP, "g1", Op.DESCRIBE), acl(Res.TOPIC, "orders", Op.DESCRIBE),
          acl(Res.TOPIC, "audit", Op.DESCRIBE)],
         _offsets_asked,
         lambda r, f, v: (r.groups[0].error_code, r.groups[0].topics) == (30, []),
         lambda r, f, v: r.groups[0].error_code == 0
         and _sg_partitions(r) == dict.fromkeys(BOTH, 0)),
    Case("DescribeShareGroupOffsets (its topics)", 90, _sg_offsets,
         [acl(Res.GROUP, "g1", Op.DESCRIBE), acl(Res.TOPIC, "orders", Op.DESCRIBE),
          acl(Res.TOPIC, "audit", Op.DESCRIBE)],
         _offsets_asked,
         lambda r, f, v: r.groups[0].error_code == 0
         and _sg_partitions(r) == dict.fromkeys(BOTH, 29),
         lambda r, f, v: r.groups[0].error_code == 0,
         held=[acl(Res.GROUP, "g1", Op.DESCRIBE)]),
    Case("AlterShareGroupOffsets", 91, _sg_alter,
         [acl(Res.GROUP, "g1", Op.READ), acl(Res.TOPIC, "orders", Op.READ),
          acl(Res.TOPIC, "audit", Op.READ)],
         _offsets_asked,
         lambda r, f, v: r.error_code == 30 and set(_sg_partitions(r).values()) == {30},
         lambda r, f, v: r.error_code == 0 and _sg_partitions(r) == dict.fromkeys(BOTH, 0)),
    Case("AlterShareGroupOffsets (its topics)", 91, _sg_alter,
         [acl(Res.GROUP, "g1", Op.READ), acl(Res.TOPIC, "orders", Op.READ),
          acl(Res.TOPIC, "audit", Op.READ)],
         _offsets_asked,
         lambda r, f, v: r.error_code == 0 and _sg_partitions(r) == dict.fromkeys(BOTH, 29),
         lambda r, f, v: r.error_code == 0, held=[acl(Res.GROUP, "g1", Op.READ)]),
    Case("DeleteShareGroupOffsets", 92, _sg_delete,
         [acl(Res.GROUP, "g1", Op.DELETE), acl(Res.TOPIC, "orders", Op.READ),
          acl(Res.TOPIC, "audit", Op.READ)],
         _offsets_asked,
         lambda r, f, v: (r.error_code, r.responses) == (30, []),
         lambda r, f, v: r.error_code == 0
         and [t.error_code for t in r.responses] == [3, 3]),     # no state to delete
    Case("DeleteShareGroupOffsets (its topics)", 92, _sg_delete,
         [acl(Res.GROUP, "g1", Op.DELETE), acl(Res.TOPIC, "orders", Op.READ),
          acl(Res.TOPIC, "audit", Op.READ)],
         _offsets_asked,
         lambda r, f, v: r.error_code == 0 and [t.error_code for t in r.responses] == [29, 29],
         lambda r, f, v: r.error_code == 0, held=[acl(Res.GROUP, "g1", Op.DELETE)]),
    Case("DeleteGroups", 42, lambda v: DeleteGroupsRequest[v](groups_names=["g1", "g2"]),
         [acl(Res.GROUP, "g1", Op.DELETE), acl(Res.GROUP, "g2", Op.DELETE)],
         lambda fake: [g for e in groups_seen(fake, gm.DeleteGroups) for g in e.group_ids],
         lambda r, f, v: [(g.group_id, g.error_code) for g in r.results]
         == [("g1", 30), ("g2", 30)] and f.coordinator.group("g1") is not None,
         lambda r, f, v: [(g.group_id, g.error_code) for g in r.results]
         == [("g1", 0), ("g2", 69)]),
    Case("InitProducerId (transactional)", 22, lambda v: InitProducerIdRequest[v](
        transactional_id="t1", transaction_timeout_ms=60000, producer_id=-1,
        producer_epoch=-1),
         [acl(Res.TRANSACTIONAL_ID, "t1", Op.WRITE)],
         txn_seen(tm.InitProducerId),
         lambda r, f, v: (r.error_code, r.producer_id) == (TXN_DENIED, -1),
         lambda r, f, v: r.error_code == 0 and r.producer_id >= 0,
         held=[acl(Res.TRANSACTIONAL_ID, "t1", Op.DESCRIBE)]),
    Case("FindCoordinator (transactional id)", 10, lambda v: FindCoordinatorRequest[v](
        key="t1", key_type=1, coordinator_keys=["t1"]),
         [acl(Res.TRANSACTIONAL_ID, "t1", Op.DESCRIBE)],
         lambda fake: [g for c in fake.calls_of("find_coordinator") for g in c["group_ids"]],
         lambda r, f, v: codes_of(r) == {TXN_DENIED},
         lambda r, f, v: codes_of(r) == {0} and set(walk(r.to_dict(), "node_id")) == {1},
         versions=(1, 4)),
    Case("FindCoordinator (share key)", 10, lambda v: FindCoordinatorRequest[v](
        key_type=2, coordinator_keys=["g1:AAAAAAAAAAAAAAAAAAAAAQ:0"]),
         [cluster_acl(Op.CLUSTER_ACTION)],
         lambda fake: [g for c in fake.calls_of("find_coordinator") for g in c["group_ids"]],
         lambda r, f, v: codes_of(r) == {31},
         lambda r, f, v: codes_of(r) == {0} and set(walk(r.to_dict(), "node_id")) == {1},
         versions=(6, 6)),
    Case("AddPartitionsToTxn", 24, lambda v: sample_request(24, v),
         [acl(Res.TRANSACTIONAL_ID, "t1", Op.WRITE), acl(Res.TOPIC, "orders", Op.WRITE),
          acl(Res.TOPIC, "audit", Op.WRITE)],
         txn_seen(tm.AddPartitionsToTxn),
         lambda r, f, v: set(walk(r.to_dict(), "partition_error_code")) == {TXN_DENIED},
         lambda r, f, v: set(walk(r.to_dict(), "partition_error_code")) == {49},
         held=[acl(Res.TOPIC, "orders", Op.WRITE), acl(Res.TOPIC, "audit", Op.WRITE)],
         versions=(0, 3)),
    Case("AddPartitionsToTxn (a leader's verification)", 24, lambda v: sample_request(24, v),
         [cluster_acl(Op.CLUSTER_ACTION), acl(Res.TRANSACTIONAL_ID, "t1", Op.WRITE)],
         txn_seen(tm.AddPartitionsToTxn),
         lambda r, f, v: set(walk(r.to_dict(), "partition_error_code")) == {31},
         lambda r, f, v: set(walk(r.to_dict(), "partition_error_code")) == {49},
         held=[acl(Res.TRANSACTIONAL_ID, "t1", Op.WRITE)], versions=(4, 4)),
    Case("AddOffsetsToTxn", 25, lambda v: sample_request(25, v),
         [acl(Res.TRANSACTIONAL_ID, "t1", Op.WRITE), acl(Res.GROUP, "g1", Op.READ)],
         txn_seen(tm.AddOffsetsToTxn),
         lambda r, f, v: r.error_code == 30,
         lambda r, f, v: r.error_code == 49,
         held=[acl(Res.TRANSACTIONAL_ID, "t1", Op.WRITE)]),
    Case("EndTxn", 26, lambda v: sample_request(26, v),
         [acl(Res.TRANSACTIONAL_ID, "t1", Op.WRITE)],
         txn_seen(tm.EndTxn),
         lambda r, f, v: r.error_code == TXN_DENIED,
         lambda r, f, v: r.error_code == 49),
    Case("WriteTxnMarkers", 27, lambda v: sample_request(27, v),
         [cluster_acl(Op.CLUSTER_ACTION)],
         lambda fake: fake.calls_of("write_txn_markers"),
         _all_codes(31),
         lambda r, f, v: codes_of(r) <= {0, 3, 6}),
    Case("TxnOffsetCommit", 28, lambda v: sample_request(28, v),
         [acl(Res.TRANSACTIONAL_ID, "t1", Op.WRITE), acl(Res.GROUP, "g1", Op.READ),
          acl(Res.TOPIC, "orders", Op.READ), acl(Res.TOPIC, "audit", Op.READ)],
         lambda fake: groups_seen(fake, gm.TxnOffsetCommit),
         lambda r, f, v: codes_of(r) == {TXN_DENIED},
         lambda r, f, v: TXN_DENIED not in codes_of(r) and 30 not in codes_of(r)),
    Case("DescribeProducers", 61, lambda v: sample_request(61, v),
         [acl(Res.TOPIC, "orders", Op.READ), acl(Res.TOPIC, "audit", Op.READ)],
         lambda fake: [tp for c in fake.calls_of("describe_producers") for tp in c["tps"]],
         lambda r, f, v: codes_of(r) == {29},
         lambda r, f, v: 29 not in codes_of(r)),
    Case("DescribeTransactions", 65, lambda v: sample_request(65, v),
         [acl(Res.TRANSACTIONAL_ID, "t1", Op.DESCRIBE),
          acl(Res.TRANSACTIONAL_ID, "t2", Op.DESCRIBE)],
         lambda fake: [t for e in txn_seen(tm.DescribeTransactions)(fake)
                       for t in e.transactional_ids],
         lambda r, f, v: codes_of(r) == {TXN_DENIED},
         lambda r, f, v: codes_of(r) == {105}),
    Case("ListTransactions", 66, lambda v: sample_request(66, v),
         [cluster_acl(Op.DESCRIBE)],
         lambda fake: [],              # the coordinator lists; the answer is filtered
         lambda r, f, v: r.error_code == 0 and r.transaction_states == [],
         lambda r, f, v: r.error_code == 0),
    Case("CreateAcls", 30, _create_acls, [cluster_acl(Op.ALTER)],
         lambda fake: fake.calls_of("create_acls") + fake.acls,
         lambda r, f, v: [(x.error_code, x.error_message) for x in r.results]
         == [(31, "Cluster authorization failed.")],
         lambda r, f, v: [x.error_code for x in r.results] == [0]
         and f.acls == [acl(Res.TOPIC, "orders", Op.READ, pattern=Pat.LITERAL)]),
    Case("AlterConfigs", 33, lambda v: sample_request(33, v),
         [acl(Res.TOPIC, "orders", Op.ALTER_CONFIGS), acl(Res.TOPIC, "audit", Op.ALTER_CONFIGS)],
         lambda fake: [r for c in fake.calls_of("replace_configs") for r in c["resources"]],
         lambda r, f, v: [(x.error_code, x.error_message) for x in r.responses]
         == [(29, None), (29, None)] and f.topic_configs["orders"] == {},
         lambda r, f, v: [x.error_code for x in r.responses] == [0, 0]
         and f.topic_configs["orders"] == {"retention.ms": "1000"}),
    Case("DescribeLogDirs", 35, lambda v: sample_request(35, v), [cluster_acl(Op.DESCRIBE)],
         lambda fake: fake.calls_of("describe_log_dirs"),
         lambda r, f, v: r.results == [] and codes_of(r) <= {31},
         lambda r, f, v: [x.log_dir for x in r.results] == ["/data/broker-1"]),
    Case("ElectLeaders", 43, lambda v: sample_request(43, v), [cluster_acl(Op.ALTER)],
         lambda fake: fake.calls_of("elect_leaders"),
         _all_codes(31),
         lambda r, f, v: 84 in codes_of(r) and 31 not in codes_of(r)),   # preferred leads
    Case("UpdateFeatures", 57, lambda v: sample_request(57, v), [cluster_acl(Op.ALTER)],
         lambda fake: fake.calls_of("update_features"),
         lambda r, f, v: (r.error_code, r.results) == (31, []),
         lambda r, f, v: r.error_code == 0
         and [x.feature for x in r.results] == ["transaction.version"]),
    Case("AlterPartitionReassignments", 45, lambda v: sample_request(45, v),
         [cluster_acl(Op.ALTER)],
         lambda fake: fake.calls_of("alter_partition_reassignments"),
         lambda r, f, v: codes_of(r) == {31} and f.reassignments == {},
         lambda r, f, v: {(t.name, p.partition_index): p.error_code for t in r.responses
                          for p in t.partitions}
         == {("orders", 0): 0, ("orders", 1): 85, ("audit", 0): 0}),
    Case("ListPartitionReassignments", 46, lambda v: sample_request(46, v),
         [cluster_acl(Op.DESCRIBE)],
         lambda fake: fake.calls_of("list_partition_reassignments"),
         lambda r, f, v: (r.error_code, r.topics) == (31, []),
         lambda r, f, v: (r.error_code, r.topics) == (0, [])),
    Case("OffsetDelete", 47, lambda v: sample_request(47, v),
         [acl(Res.GROUP, "g1", Op.DELETE), acl(Res.TOPIC, "orders", Op.READ),
          acl(Res.TOPIC, "audit", Op.READ)],
         lambda fake: [tp for e in groups_seen(fake, gm.OffsetDelete) for tp in e.partitions],
         lambda r, f, v: (r.error_code, r.topics) == (30, []),
         lambda r, f, v: r.error_code == 0 and {(t.name, p.partition_index): p.error_code
                                                for t in r.topics for p in t.partitions}
         == {("orders", 0): 0, ("orders", 1): 0, ("audit", 0): 0}),
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
    # quotas and SCRAM administration (KafkaApis: cluster DescribeConfigs / AlterConfigs for
    # quotas, Describe / Alter for SCRAM)
    Case("DescribeClientQuotas", 48, lambda v: sample_request(48, v),
         [cluster_acl(Op.DESCRIBE_CONFIGS)],
         lambda fake: fake.calls_of("client_quotas"),
         lambda r, f, v: (r.error_code, r.entries) == (31, None),
         lambda r, f, v: r.error_code == 0 and r.entries == []),
    Case("AlterClientQuotas", 49, lambda v: sample_request(49, v),
         [cluster_acl(Op.ALTER_CONFIGS)],
         lambda fake: fake.calls_of("alter_client_quotas"),
         lambda r, f, v: [e.error_code for e in r.entries] == [31, 31],
         lambda r, f, v: [e.error_code for e in r.entries] == [0, 0]),
    Case("DescribeUserScramCredentials", 50, lambda v: sample_request(50, v),
         [cluster_acl(Op.DESCRIBE)],
         lambda fake: fake.calls_of("describe_scram"),
         lambda r, f, v: r.error_code == 31 and r.results == [],
         lambda r, f, v: r.error_code == 0 and [x.error_code for x in r.results] == [91, 91]),
    Case("AlterUserScramCredentials", 51, lambda v: sample_request(51, v),
         [cluster_acl(Op.ALTER)],
         lambda fake: fake.calls_of("alter_scram"),
         lambda r, f, v: sorted((x.user, x.error_code) for x in r.results)
         == [("alice", 31), ("bob", 31)],
         lambda r, f, v: [x.error_code for x in r.results] == [0, 0]
         and f.scram == {"alice": {1: 8192}}),
]


def _prepare(case: Case, fake: FakeBrokerApi) -> None:
    if case.api_key == 31:            # something for DeleteAcls to remove
        fake.acls.append(acl(Res.TOPIC, "orders", Op.READ, principal=BOB))
    if case.name == "OffsetFetch v0 (ZooKeeper)":     # what OffsetCommit v0 left there
        fake.zk_offsets.update({("g1", ("orders", 0)): 50, ("g1", ("audit", 0)): 70})


def _table(denied: bool):
    out = []
    for case in CASES:
        served = versions(case.api_key)
        lo, hi = case.versions or (None, None)
        lo, hi = served[0] if lo is None else lo, served[-1] if hi is None else hi
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
                         "DescribeCluster", "ListTransactions"):
        assert case.seen(fake), "the request never reached the broker"


def test_the_table_covers_every_served_api_that_touches_a_resource():
    covered = {c.api_key for c in CASES}
    assert covered == (set(HANDLERS) | set(SESSION_HANDLERS)) - {17, 36}


def test_the_authorizer_adds_its_refusals_to_a_deferred_delete_records_answer():
    """A DeleteRecords the broker answers later (followers' log starts not there yet): the
    partitions refused are added to its answer when it comes."""
    from protocol.handlers.authorized import AuthorizedApi
    from tests.handler_wire import cluster
    from tests.test_handlers_offsets import FollowersBehind
    fake = FollowersBehind(cluster())
    fake.append(("orders", 0), b"batch", count=6)
    guarded = AuthorizedApi(fake, session_for([acl(Res.TOPIC, "orders", Op.DELETE)]))
    got = guarded.delete_records([(("orders", 0), 2), (("audit", 0), 0)], 1500)
    assert isinstance(got, Deferred)
    fake.release()
    assert got.result() == {("orders", 0): (0, 2),
                            ("audit", 0): (TOPIC_AUTHORIZATION_FAILED, -1)}


def test_a_fetch_with_refused_partitions_is_no_longer_its_whole_session():
    """The broker may keep its watch on a fetch session only when the asks are all of the
    session's partitions: partitions the authorizer refuses leave the session out."""
    from protocol.api import FetchAsk
    from protocol.handlers.authorized import AuthorizedApi
    from tests.handler_wire import cluster
    fake = cluster()
    asks = [FetchAsk(("orders", 0), 0, -1, -1, 1 << 20, -1),
            FetchAsk(("audit", 0), 0, -1, -1, 1 << 20, -1)]
    session = object()
    for grant, passed in (([acl(Res.TOPIC, "orders", Op.READ),
                            acl(Res.TOPIC, "audit", Op.READ)], session),
                          ([acl(Res.TOPIC, "orders", Op.READ)], None)):
        AuthorizedApi(fake, session_for(grant)).fetch(-1, 0, 1, 1 << 20, 0, asks,
                                                      session=session)
        assert fake.calls_of("fetch")[-1]["session"] is passed
