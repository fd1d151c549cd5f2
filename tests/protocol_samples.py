"""Kafka requests encoded by kafka-python 3.0.12: an encoder independent of kio, so protocol
tests check rayka's codec against bytes it did not produce itself. The two KIP-848 APIs
kafka-python does not ship (68, 69) and KIP-932's (76-79) are kafka-python message classes
over schemas of tests/kafka_schemas/.

`sample_request(api_key, version)` is one request per API with two topics (or resources),
one with two partitions, so error answers have something to echo; `frame_of(...)` adds the
request header and size prefix.
"""

from __future__ import annotations

import uuid

from kafka.protocol.api_message import ApiMessage
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.protocol.admin import (
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteGroupsRequest, DeleteGroupsResponse, DeleteRecordsRequest, DeleteRecordsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse,
    DescribeClusterRequest, DescribeClusterResponse, DescribeConfigsRequest,
    DescribeConfigsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, ListGroupsRequest,
    ListGroupsResponse, UpdateFeaturesRequest, UpdateFeaturesResponse,
)
from kafka.protocol.admin.acl import (
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kafka.protocol.consumer import (
    FetchRequest, FetchResponse, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest,
    JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, ListOffsetsRequest,
    ListOffsetsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
    SyncGroupRequest, SyncGroupResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest, ApiVersionsResponse, FindCoordinatorRequest, FindCoordinatorResponse,
    MetadataRequest, MetadataResponse,
)
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, EndTxnRequest, EndTxnResponse, InitProducerIdRequest,
    InitProducerIdResponse, ProduceRequest, ProduceResponse, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
)
from kafka.protocol.admin import (
    AlterClientQuotasRequest, AlterClientQuotasResponse, AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse, DescribeClientQuotasRequest, DescribeClientQuotasResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
)
from kafka.protocol.admin import (
    AlterConfigsRequest, AlterConfigsResponse, AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse, DescribeLogDirsRequest, DescribeLogDirsResponse,
    ElectLeadersRequest, ElectLeadersResponse, ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.consumer import OffsetDeleteRequest, OffsetDeleteResponse
from kafka.protocol.admin import (
    DescribeProducersRequest, DescribeProducersResponse, DescribeTransactionsRequest,
    DescribeTransactionsResponse, ListTransactionsRequest, ListTransactionsResponse,
)

import tests.kafka_schemas as _kip848


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=_kip848):
    pass


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=_kip848):
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json=_kip848):
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=_kip848):
    pass


class ShareGroupHeartbeatRequest(ApiMessage, load_json=_kip848):
    pass


class ShareGroupHeartbeatResponse(ApiMessage, load_json=_kip848):
    pass


class ShareGroupDescribeRequest(ApiMessage, load_json=_kip848):
    pass


class ShareGroupDescribeResponse(ApiMessage, load_json=_kip848):
    pass


class ShareFetchRequest(ApiMessage, load_json=_kip848):
    pass


class ShareFetchResponse(ApiMessage, load_json=_kip848):
    pass


class ShareAcknowledgeRequest(ApiMessage, load_json=_kip848):
    pass


class ShareAcknowledgeResponse(ApiMessage, load_json=_kip848):
    pass


class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=_kip848):
    pass


class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=_kip848):
    pass


class AlterShareGroupOffsetsRequest(ApiMessage, load_json=_kip848):
    pass


class AlterShareGroupOffsetsResponse(ApiMessage, load_json=_kip848):
    pass


class DeleteShareGroupOffsetsRequest(ApiMessage, load_json=_kip848):
    pass


class DeleteShareGroupOffsetsResponse(ApiMessage, load_json=_kip848):
    pass


TOPIC_ID = uuid.UUID("0123456789abcdef0123456789abcdef")
# The ids FakeBrokerApi gives the topics a test adds first and second ("orders", "audit").
TOPIC_IDS = {"orders": uuid.UUID(int=0x7001), "audit": uuid.UUID(int=0x7002)}
# kafka-python's response class per API key: decodes what rayka answers
RESPONSES = {0: ProduceResponse, 1: FetchResponse, 2: ListOffsetsResponse,
             3: MetadataResponse, 18: ApiVersionsResponse, 19: CreateTopicsResponse,
             20: DeleteTopicsResponse, 21: DeleteRecordsResponse, 22: InitProducerIdResponse,
             23: OffsetForLeaderEpochResponse, 32: DescribeConfigsResponse,
             37: CreatePartitionsResponse, 44: IncrementalAlterConfigsResponse,
             60: DescribeClusterResponse, 8: OffsetCommitResponse, 9: OffsetFetchResponse,
             10: FindCoordinatorResponse, 11: JoinGroupResponse, 12: HeartbeatResponse,
             13: LeaveGroupResponse, 14: SyncGroupResponse, 15: DescribeGroupsResponse,
             16: ListGroupsResponse, 42: DeleteGroupsResponse, 17: SaslHandshakeResponse,
             36: SaslAuthenticateResponse, 29: DescribeAclsResponse, 30: CreateAclsResponse,
             31: DeleteAclsResponse, 24: AddPartitionsToTxnResponse,
             25: AddOffsetsToTxnResponse, 26: EndTxnResponse, 27: WriteTxnMarkersResponse,
             28: TxnOffsetCommitResponse, 61: DescribeProducersResponse,
             65: DescribeTransactionsResponse, 66: ListTransactionsResponse,
             48: DescribeClientQuotasResponse, 49: AlterClientQuotasResponse,
             50: DescribeUserScramCredentialsResponse, 51: AlterUserScramCredentialsResponse,
             33: AlterConfigsResponse, 35: DescribeLogDirsResponse, 43: ElectLeadersResponse,
             45: AlterPartitionReassignmentsResponse, 46: ListPartitionReassignmentsResponse,
             47: OffsetDeleteResponse, 68: ConsumerGroupHeartbeatResponse,
             69: ConsumerGroupDescribeResponse, 76: ShareGroupHeartbeatResponse,
             77: ShareGroupDescribeResponse, 78: ShareFetchResponse,
             79: ShareAcknowledgeResponse, 90: DescribeShareGroupOffsetsResponse,
             91: AlterShareGroupOffsetsResponse, 92: DeleteShareGroupOffsetsResponse,
             57: UpdateFeaturesResponse}

# an ACL filter matching everything (resource type ANY 1, pattern ANY 1, operation ANY 1,
# permission ANY 1), and one literal Read allow for User:alice on topic orders
ACL_ANY = dict(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
               principal_filter=None, host_filter=None, operation=1, permission_type=1)
ACL_READ = dict(resource_type=2, resource_name="orders", resource_pattern_type=3,
                principal="User:alice", host="*", operation=3, permission_type=3)


def legacy_message_set(magic: int, values, codec: int = 0, timestamp: int = 1_700_000_000_000,
                       keys=None) -> bytes:
    """A message format v0/v1 message set by kafka-python's legacy builder (Produce v0-2)."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 30)
    for i, value in enumerate(values):
        builder.append(i, timestamp=timestamp + i, key=keys[i] if keys else None, value=value)
    return bytes(builder.build())


def _produce(v):
    tpd = ProduceRequest.TopicProduceData
    ppd = tpd.PartitionProduceData

    def records(name):        # v0-2 carry message formats v0 (v0-1) and v1 (v2)
        return name.encode() if v >= 3 else legacy_message_set(int(v == 2), [name.encode()])
    return ProduceRequest[v](transactional_id=None, acks=-1, timeout_ms=1500, topic_data=[
        tpd(name="orders", partition_data=[ppd(index=0, records=records("batch-0")),
                                           ppd(index=2, records=records("batch-2"))]),
        tpd(name="audit", partition_data=[ppd(index=1, records=None)])])


def _fetch(v):
    ft = FetchRequest.FetchTopic
    fp = ft.FetchPartition

    def topic(name):            # v13+ name topics by id
        return dict(topic_id=TOPIC_IDS[name]) if v >= 13 else dict(topic=name)
    state = FetchRequest[15].ReplicaState(replica_id=-1, replica_epoch=-1) if v >= 15 else None
    return FetchRequest[v](
        replica_id=-1, replica_state=state, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20,
        isolation_level=1,
        session_id=0, session_epoch=-1, rack_id="",
        topics=[ft(**topic("orders"), partitions=[
            fp(partition=0, fetch_offset=10, partition_max_bytes=1 << 20,
               current_leader_epoch=3, log_start_offset=-1, last_fetched_epoch=-1),
            fp(partition=2, fetch_offset=0, partition_max_bytes=1 << 20)]),
            ft(**topic("audit"), partitions=[fp(partition=1, fetch_offset=5,
                                                partition_max_bytes=4096)])],
        forgotten_topics_data=[])


def _list_offsets(v):
    t = ListOffsetsRequest.ListOffsetsTopic
    p = t.ListOffsetsPartition
    return ListOffsetsRequest[v](replica_id=-1, isolation_level=0, topics=[
        t(name="orders", partitions=[p(partition_index=0, timestamp=-1),
                                     p(partition_index=2, timestamp=-2)]),
        t(name="audit", partitions=[p(partition_index=1, timestamp=-1)])])


def _delete_records(v):
    t = DeleteRecordsRequest.DeleteRecordsTopic
    p = t.DeleteRecordsPartition
    return DeleteRecordsRequest[v](timeout_ms=1500, topics=[
        t(name="orders", partitions=[p(partition_index=0, offset=5),
                                     p(partition_index=2, offset=-1)]),
        t(name="audit", partitions=[p(partition_index=1, offset=0)])])


def _leader_epoch(v):
    t = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    p = t.OffsetForLeaderPartition
    return OffsetForLeaderEpochRequest[v](replica_id=-1, topics=[
        t(topic="orders", partitions=[p(partition=0, current_leader_epoch=3, leader_epoch=2),
                                      p(partition=2, current_leader_epoch=3, leader_epoch=1)]),
        t(topic="audit", partitions=[p(partition=1, current_leader_epoch=-1, leader_epoch=0)])])


def _metadata(v):
    t = MetadataRequest.MetadataRequestTopic
    return MetadataRequest[v](topics=[t(name="orders"), t(name="audit")],
                              allow_auto_topic_creation=True,
                              include_cluster_authorized_operations=False,
                              include_topic_authorized_operations=False)


def _create_topics(v):
    t = CreateTopicsRequest.CreatableTopic
    return CreateTopicsRequest[v](timeout_ms=30000, validate_only=False, topics=[
        t(name="orders", num_partitions=3, replication_factor=1, assignments=[], configs=[]),
        t(name="audit", num_partitions=1, replication_factor=1, assignments=[], configs=[])])


def _delete_topics(v):
    s = DeleteTopicsRequest.DeleteTopicState      # v6: by name or by id, never both
    return DeleteTopicsRequest[v](timeout_ms=30000, topic_names=["orders", "audit"],
                                  topics=[s(name="orders", topic_id=uuid.UUID(int=0)),
                                          s(name=None, topic_id=TOPIC_IDS["audit"])])


def _create_partitions(v):
    t = CreatePartitionsRequest.CreatePartitionsTopic
    return CreatePartitionsRequest[v](timeout_ms=30000, validate_only=False, topics=[
        t(name="orders", count=6, assignments=None), t(name="audit", count=2, assignments=None)])


def _describe_configs(v):
    r = DescribeConfigsRequest.DescribeConfigsResource
    return DescribeConfigsRequest[v](include_synonyms=False, include_documentation=False,
                                     resources=[r(resource_type=2, resource_name="orders",
                                                  configuration_keys=None),
                                                r(resource_type=4, resource_name="1",
                                                  configuration_keys=["log.dirs"])])


def _alter_configs(v):
    r = IncrementalAlterConfigsRequest.AlterConfigsResource
    c = r.AlterableConfig
    return IncrementalAlterConfigsRequest[v](validate_only=False, resources=[
        r(resource_type=2, resource_name="orders",
          configs=[c(name="retention.ms", config_operation=0, value="1000")]),
        r(resource_type=2, resource_name="audit", configs=[])])


def _legacy_alter_configs(v):
    r = AlterConfigsRequest.AlterConfigsResource
    c = r.AlterableConfig
    return AlterConfigsRequest[v](validate_only=False, resources=[
        r(resource_type=2, resource_name="orders",
          configs=[c(name="retention.ms", value="1000")]),
        r(resource_type=2, resource_name="audit", configs=[])])


def _describe_log_dirs(v):
    t = DescribeLogDirsRequest.DescribableLogDirTopic
    return DescribeLogDirsRequest[v](topics=[t(topic="orders", partitions=[0, 1]),
                                             t(topic="audit", partitions=[0])])


def _elect_leaders(v):
    t = ElectLeadersRequest.TopicPartitions
    return ElectLeadersRequest[v](election_type=0, timeout_ms=1000, topic_partitions=[
        t(topic="orders", partitions=[0, 1]), t(topic="audit", partitions=[0])])


def _alter_reassignments(v):
    t = AlterPartitionReassignmentsRequest.ReassignableTopic
    p = t.ReassignablePartition
    return AlterPartitionReassignmentsRequest[v](timeout_ms=1000, topics=[
        t(name="orders", partitions=[p(partition_index=0, replicas=[1, 2]),
                                     p(partition_index=1, replicas=None)]),
        t(name="audit", partitions=[p(partition_index=0, replicas=[1])])])


def _list_reassignments(v):
    t = ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics
    return ListPartitionReassignmentsRequest[v](timeout_ms=1000, topics=[
        t(name="orders", partition_indexes=[0, 1]), t(name="audit", partition_indexes=[0])])


def _offset_delete(v):
    t = OffsetDeleteRequest.OffsetDeleteRequestTopic
    p = t.OffsetDeleteRequestPartition
    return OffsetDeleteRequest[v](group_id="g1", topics=[
        t(name="orders", partitions=[p(partition_index=0), p(partition_index=1)]),
        t(name="audit", partitions=[p(partition_index=0)])])


def _join_group(v):
    p = JoinGroupRequest.JoinGroupRequestProtocol
    return JoinGroupRequest[v](group_id="g1", session_timeout_ms=10000,
                               rebalance_timeout_ms=30000, member_id="", group_instance_id=None,
                               protocol_type="consumer", reason=None,
                               protocols=[p(name="range", metadata=b"\x00\x00sub")])


def _sync_group(v):
    a = SyncGroupRequest.SyncGroupRequestAssignment
    return SyncGroupRequest[v](group_id="g1", generation_id=1, member_id="m1",
                               group_instance_id=None, protocol_type="consumer",
                               protocol_name="range",
                               assignments=[a(member_id="m1", assignment=b"\x00\x00as")])


def _leave_group(v):
    i = LeaveGroupRequest.MemberIdentity
    return LeaveGroupRequest[v](group_id="g1", member_id="m1",
                                members=[i(member_id="m1", group_instance_id=None, reason=None)])


def _offset_commit(v):
    t = OffsetCommitRequest.OffsetCommitRequestTopic
    p = t.OffsetCommitRequestPartition
    return OffsetCommitRequest[v](
        group_id="g1", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        retention_time_ms=-1, topics=[
            t(name="orders", partitions=[p(partition_index=0, committed_offset=5,
                                           committed_leader_epoch=-1, committed_metadata=""),
                                         p(partition_index=2, committed_offset=7,
                                           committed_leader_epoch=-1, committed_metadata=None)]),
            t(name="audit", partitions=[p(partition_index=1, committed_offset=0,
                                          committed_leader_epoch=-1, committed_metadata="")])])


def _offset_fetch(v):
    if v >= 8:                # batched groups: g1 asks for the usual topics, g2 for all
        g = OffsetFetchRequest.OffsetFetchRequestGroup
        gt = g.OffsetFetchRequestTopics
        return OffsetFetchRequest[v](require_stable=False, groups=[
            g(group_id="g1", member_id=None, member_epoch=-1,
              topics=[gt(name=t, partition_indexes=ps) for t, ps in ASKED.items()]),
            g(group_id="g2", member_id="m2", member_epoch=3, topics=None)])
    t = OffsetFetchRequest.OffsetFetchRequestTopic
    return OffsetFetchRequest[v](group_id="g1", require_stable=False, topics=[
        t(name="orders", partition_indexes=[0, 2]), t(name="audit", partition_indexes=[1])])


def _add_partitions_to_txn(v):
    topics = [AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=ps)
              for t, ps in ASKED.items()]
    if v >= 4:
        return AddPartitionsToTxnRequest[v](transactions=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
                transactional_id="t1", producer_id=5, producer_epoch=0, verify_only=True,
                topics=topics)])
    return AddPartitionsToTxnRequest[v](
        v3_and_below_transactional_id="t1", v3_and_below_producer_id=5,
        v3_and_below_producer_epoch=0, v3_and_below_topics=topics)


def _write_txn_markers(v):
    marker = WriteTxnMarkersRequest.WritableTxnMarker
    return WriteTxnMarkersRequest[v](markers=[marker(
        producer_id=5, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
        topics=[marker.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                for t, ps in ASKED.items()])])


def _txn_offset_commit(v):
    topic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    return TxnOffsetCommitRequest[v](
        transactional_id="t1", group_id="g1", producer_id=5, producer_epoch=0,
        generation_id=-1, member_id="", group_instance_id=None,
        topics=[topic(name=t, partitions=[topic.TxnOffsetCommitRequestPartition(
            partition_index=p, committed_offset=10, committed_leader_epoch=-1,
            committed_metadata="") for p in ps]) for t, ps in ASKED.items()])


def _describe_client_quotas(v):
    c = DescribeClientQuotasRequest.ComponentData
    return DescribeClientQuotasRequest[v](components=[
        c(entity_type="user", match_type=0, match="alice"),
        c(entity_type="client-id", match_type=2, match=None)], strict=False)


def _alter_client_quotas(v):
    e = AlterClientQuotasRequest.EntryData
    return AlterClientQuotasRequest[v](entries=[
        e(entity=[e.EntityData(entity_type="user", entity_name="alice"),
                  e.EntityData(entity_type="client-id", entity_name=None)],
          ops=[e.OpData(key="producer_byte_rate", value=1048576.0, remove=False),
               e.OpData(key="request_percentage", value=0.0, remove=True)]),
        e(entity=[e.EntityData(entity_type="client-id", entity_name="app")],
          ops=[e.OpData(key="consumer_byte_rate", value=2e6, remove=False)])],
        validate_only=True)


def _alter_user_scram(v):
    r = AlterUserScramCredentialsRequest
    return r[v](deletions=[r.ScramCredentialDeletion(name="bob", mechanism=2)],
                upsertions=[r.ScramCredentialUpsertion(name="alice", mechanism=1,
                                                       iterations=8192, salt=b"s" * 16,
                                                       salted_password=b"p" * 32)])


SAMPLES = {
    48: _describe_client_quotas,
    49: _alter_client_quotas,
    50: lambda v: DescribeUserScramCredentialsRequest[v](users=[
        DescribeUserScramCredentialsRequest.UserName(name="alice"),
        DescribeUserScramCredentialsRequest.UserName(name="bob")]),
    51: _alter_user_scram,
    8: _offset_commit,
    9: _offset_fetch,
    10: lambda v: FindCoordinatorRequest[v](key="g1", key_type=0, coordinator_keys=["g1"]),
    11: _join_group,
    12: lambda v: HeartbeatRequest[v](group_id="g1", generation_id=1, member_id="m1",
                                      group_instance_id=None),
    13: _leave_group,
    14: _sync_group,
    15: lambda v: DescribeGroupsRequest[v](groups=["g1", "g2"],
                                           include_authorized_operations=False),
    16: lambda v: ListGroupsRequest[v](states_filter=[], types_filter=[]),
    42: lambda v: DeleteGroupsRequest[v](groups_names=["g1", "g2"]),
    0: _produce,
    1: _fetch,
    2: _list_offsets,
    3: _metadata,
    18: lambda v: ApiVersionsRequest[v](client_software_name="kafka-python",
                                        client_software_version="3.0.12"),
    19: _create_topics,
    20: _delete_topics,
    21: _delete_records,
    22: lambda v: InitProducerIdRequest[v](transactional_id=None, transaction_timeout_ms=60000,
                                           producer_id=-1, producer_epoch=-1),
    23: _leader_epoch,
    32: _describe_configs,
    37: _create_partitions,
    44: _alter_configs,
    33: _legacy_alter_configs,
    35: _describe_log_dirs,
    43: _elect_leaders,
    45: _alter_reassignments,
    46: _list_reassignments,
    47: _offset_delete,
    60: lambda v: DescribeClusterRequest[v](include_cluster_authorized_operations=False),
    17: lambda v: SaslHandshakeRequest[v](mechanism="SCRAM-SHA-256"),
    36: lambda v: SaslAuthenticateRequest[v](auth_bytes=b"n,,n=alice,r=abc"),
    29: lambda v: DescribeAclsRequest[v](**ACL_ANY),
    30: lambda v: CreateAclsRequest[v](creations=[CreateAclsRequest.AclCreation(**ACL_READ)]),
    31: lambda v: DeleteAclsRequest[v](filters=[DeleteAclsRequest.DeleteAclsFilter(**ACL_ANY)]),
    24: _add_partitions_to_txn,
    25: lambda v: AddOffsetsToTxnRequest[v](transactional_id="t1", producer_id=5,
                                            producer_epoch=0, group_id="g1"),
    26: lambda v: EndTxnRequest[v](transactional_id="t1", producer_id=5, producer_epoch=0,
                                   committed=True),
    27: _write_txn_markers,
    28: _txn_offset_commit,
    61: lambda v: DescribeProducersRequest[v](topics=[
        DescribeProducersRequest.TopicRequest(name=t, partition_indexes=ps)
        for t, ps in ASKED.items()]),
    65: lambda v: DescribeTransactionsRequest[v](transactional_ids=["t1", "t2"]),
    66: lambda v: ListTransactionsRequest[v](state_filters=[], producer_id_filters=[],
                                             duration_filter=-1),
    68: lambda v: ConsumerGroupHeartbeatRequest[v](
        group_id="g1", member_id="m1", member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout_ms=5000, subscribed_topic_names=list(ASKED),
        subscribed_topic_regex=None, server_assignor=None, topic_partitions=[]),
    69: lambda v: ConsumerGroupDescribeRequest[v](group_ids=["g1", "g2"],
                                                  include_authorized_operations=False),
    76: lambda v: ShareGroupHeartbeatRequest[v](
        group_id="g1", member_id="m1", member_epoch=0, rack_id=None,
        subscribed_topic_names=list(ASKED)),
    77: lambda v: ShareGroupDescribeRequest[v](group_ids=["g1", "g2"],
                                               include_authorized_operations=False),
    78: lambda v: ShareFetchRequest[v](
        group_id="g1", member_id="m1", share_session_epoch=0, max_wait_ms=0, min_bytes=1,
        max_bytes=1 << 20, max_records=500, batch_size=500, share_acquire_mode=0,
        is_renew_ack=False, topics=[
            ShareFetchRequest.FetchTopic(topic_id=TOPIC_IDS[t], partitions=[
                ShareFetchRequest.FetchTopic.FetchPartition(
                    partition_index=p, acknowledgement_batches=[]) for p in ps])
            for t, ps in ASKED.items()], forgotten_topics_data=[]),
    79: lambda v: ShareAcknowledgeRequest[v](
        group_id="g1", member_id="m1", share_session_epoch=1, is_renew_ack=False, topics=[
            _ACK.AcknowledgeTopic(topic_id=TOPIC_IDS[t], partitions=[
                _ACK.AcknowledgeTopic.AcknowledgePartition(
                    partition_index=p, acknowledgement_batches=[
                        _ACK.AcknowledgeTopic.AcknowledgePartition.AcknowledgementBatch(
                            first_offset=0, last_offset=1, acknowledge_types=[1])])
                for p in ps])
            for t, ps in ASKED.items()]),
    90: lambda v: DescribeShareGroupOffsetsRequest[v](groups=[
        DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(
            group_id="g1", topics=[
                DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
                .DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
                for t, ps in ASKED.items()])]),
    91: lambda v: AlterShareGroupOffsetsRequest[v](group_id="g1", topics=[
        AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic(
            topic_name=t, partitions=[
                AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
                .AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=0)
                for p in ps]) for t, ps in ASKED.items()]),
    92: lambda v: DeleteShareGroupOffsetsRequest[v](group_id="g1", topics=[
        DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic(topic_name=t)
        for t in ASKED]),
    57: lambda v: UpdateFeaturesRequest[v](timeout_ms=5000, feature_updates=[
        UpdateFeaturesRequest.FeatureUpdateKey(feature="transaction.version",
                                               max_version_level=2)]),
}

_ACK = ShareAcknowledgeRequest
# (topic, partitions) every sample with topics asks about, in order.
ASKED = {"orders": [0, 2], "audit": [1]}


def sample_request(api_key: int, version: int):
    return SAMPLES[api_key](version)


def frame_of(message, correlation_id: int = 7, client_id: str | None = "rayka-test") -> bytes:
    """Size prefix + request header + body, all by kafka-python."""
    message.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(message.encode(header=True, framed=True))


def sample_frame(api_key: int, version: int, correlation_id: int = 7,
                 client_id: str | None = "rayka-test") -> bytes:
    return frame_of(sample_request(api_key, version), correlation_id, client_id)


def walk(tree, key):
    """Every value stored under `key` anywhere in a kafka-python to_dict() tree."""
    if isinstance(tree, dict):
        for k, v in tree.items():
            if k == key:
                yield v
            yield from walk(v, key)
    elif isinstance(tree, list):
        for item in tree:
            yield from walk(item, key)


def asked_names(tree) -> set:
    """The topics an answer's to_dict() tree names: by name, or by the id TOPIC_IDS gives."""
    ids = {str(i) for i in walk(tree, "topic_id") if i is not None}
    return ({n for n in walk(tree, "name") if n} | {n for n in walk(tree, "topic") if n} |
            {n for n, i in TOPIC_IDS.items() if str(i) in ids})
