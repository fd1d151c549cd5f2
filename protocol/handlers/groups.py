"""Consumer-group APIs: FindCoordinator (10), JoinGroup (11), Heartbeat (12), LeaveGroup (13),
SyncGroup (14), OffsetCommit (8), OffsetFetch (9), ListGroups (16), DescribeGroups (15),
DeleteGroups (42), OffsetDelete (47), and KIP-848's ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69).

Rules:
- Every group request becomes a coordinator.messages event given to the broker's group
  coordinator (`BrokerApi.group_call`); the answer is a Deferred, because a JoinGroup (and a
  follower's SyncGroup) stays parked until the rebalance completes, and commits wait for
  their `__consumer_offsets` append. The coordinator decides everything Kafka decides (the
  checks, their order, the error codes); these handlers only translate versions.
- FindCoordinator: key type 0 (group) → the leader of the group's `__consumer_offsets`
  partition, by the endpoint of the listener asked on; COORDINATOR_NOT_AVAILABLE while the
  topic is being created or has no leader. Key type 1 (transaction): the leader of the
  transactional id's `__transaction_state` partition, likewise. Key type 2 (v6+, a
  share-partition's state: "<group>:<topic id>:<partition>", else INVALID_REQUEST): the
  leader of its `__share_group_state` partition; ClusterAction on the cluster (a broker's
  call). Any other key type, or type 2 before v6, is INVALID_REQUEST.
- JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout. Member client ids
  come from the request header.
- SyncGroup v5+ without protocol type or name is INCONSISTENT_GROUP_PROTOCOL before the
  coordinator sees it (KafkaApis: both are mandatory from v5).
- OffsetCommit v0 and OffsetFetch v0 keep offsets in ZooKeeper, apart from the group
  coordinator, as Kafka 3.8 still does (KafkaApis.commitOffsetsToZookeeper,
  handleOffsetFetchRequestFromZookeeper; `BrokerApi.zk_commit_offsets` / `zk_fetch_offsets`):
  no generation, no member; an offset never committed reads as -1 with
  UNKNOWN_TOPIC_OR_PARTITION. OffsetCommit v1's commit timestamp is not kept (the
  coordinator stamps its own time).
- OffsetCommit v1+ to a topic this broker's metadata does not know is
  UNKNOWN_TOPIC_OR_PARTITION and never reaches the coordinator (KafkaApis checks
  metadataCache.contains(topic) after authorisation). rayka's own pipeline keeps its
  pseudo-topic keys through the native door (TxnOffsetCommit as Ray calls), not here.
- OffsetFetch v1 has no top-level error code: a group-level error goes on every partition
  asked, with offset -1 (Kafka's OffsetFetchRequest.getErrorResponse); v2-7 answer it at the
  top with no topics; v8+ ask for several groups at once and answer each group with its
  own error (v9's member id and epoch are for KIP-848 groups: a classic coordinator ignores
  them, as Kafka 3.8's does).
- OffsetCommit v9 carries a consumer group member's epoch in generation_id_or_member_epoch;
  OffsetFetch v9 its member id and epoch (checked on consumer groups only, as Kafka's
  ClassicGroup ignores them).
- ListGroups v5 filters by group type ("classic", "consumer"), in the coordinator.
- ConsumerGroupHeartbeat: topic ids travel as UUIDs and are Kafka's text form inside
  (the zero UUID is no topic: dropped); the coordinator gets the cluster's topics as this
  broker's metadata knows them ({name: (id, partition count)}) with the request; the
  client id from the header. The answer's assignment lists topics and partitions sorted.
- ConsumerGroupDescribe names each assigned topic from this broker's metadata ("" for a
  topic it no longer knows); authorized operations when asked (v0+), as DescribeGroups.
"""

from __future__ import annotations

from coordinator import messages as m
from coordinator.consumer_group import HeartbeatAnswer, HeartbeatRequest
from protocol.api import BrokerApi, Deferred, topic_id_text, topic_uuid
from protocol.build import build, millis
from protocol.handlers.authorized import authorized_operations
from protocol.security.acl import ResourceType as Res
from replicas.errors import ErrorCode as E
from share.records import ShareKey

NO_AUTHORIZED_OPERATIONS = -2147483648      # Kafka's "not requested" sentinel


def _later(api: BrokerApi, make_event, respond) -> Deferred:
    return api.group_call(make_event).then(respond)


# -- FindCoordinator -------------------------------------------------------------------------------
SHARE_KEY = 2        # FindCoordinator v6's key type of a share-partition's state coordinator


def _share_key(text: str) -> bool:
    try:
        ShareKey.parse(text)
        return True
    except ValueError:
        return False


def find_coordinator(api: BrokerApi, request, listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    key_type = getattr(body, "key_type", 0)
    keys = list(body.coordinator_keys) if v >= 4 else [body.key]
    if key_type in (0, 1):
        found = api.find_coordinator(keys, listener, key_type)
    elif key_type == SHARE_KEY and v >= 6:       # "<group>:<topic id>:<partition>" each
        valid = [k for k in keys if _share_key(k)]
        found = {k: (E.INVALID_REQUEST, -1, "", -1) for k in keys}
        found.update(api.find_coordinator(valid, listener, key_type) if valid else {})
    else:
        found = {k: (E.INVALID_REQUEST, -1, "", -1) for k in keys}

    def message(code):
        if code == E.NONE:
            return None
        if code == E.GROUP_AUTHORIZATION_FAILED:     # Kafka: Errors.message() before v4 only
            return "Group authorization failed." if v < 4 else None
        if code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            return "Transactional Id authorization failed." if v < 4 else None
        if code == E.CLUSTER_AUTHORIZATION_FAILED:
            return "Cluster authorization failed."
        if code == E.INVALID_REQUEST:
            return "invalid coordinator key" if key_type == SHARE_KEY and v >= 6 \
                else "unknown coordinator type"
        return {0: "the group coordinator is not available yet",
                1: "the transaction coordinator is not available yet",
                2: "the share coordinator is not available yet"}.get(
            key_type, "unknown coordinator type")
    if v >= 4:
        return build(key, v, "FindCoordinatorResponse", coordinators=tuple(
            build(key, v, "Coordinator", key=k, node_id=found[k][1], host=found[k][2],
                  port=found[k][3], error_code=found[k][0], error_message=message(found[k][0]))
            for k in keys))
    code, node, host, port = found[keys[0]]
    return build(key, v, "FindCoordinatorResponse", error_code=code, error_message=message(code),
                 node_id=node, host=host, port=port)


# -- membership ------------------------------------------------------------------------------------
def client_host(session) -> str:
    """Kafka's clientHost of a member: "/" and the connection's address ("" when unknown)."""
    return f"/{session.host}" if session.host else ""


def join_group(api: BrokerApi, request, session):
    body, key, v = request.body, request.api_key, request.api_version
    session_ms = millis(body.session_timeout)
    rebalance_ms = millis(body.rebalance_timeout) if v >= 1 else session_ms

    def respond(r: m.JoinGroupResult):
        members = tuple(build(key, v, "JoinGroupResponseMember", member_id=x.member_id,
                              group_instance_id=x.group_instance_id, metadata=x.metadata)
                        for x in r.members)
        return build(key, v, "JoinGroupResponse", error_code=r.error,
                     generation_id=r.generation_id, protocol_type=r.protocol_type,
                     protocol_name=r.protocol_name if v >= 7 else (r.protocol_name or ""),
                     leader=r.leader, skip_assignment=r.skip_assignment,
                     member_id=r.member_id, members=members)
    return _later(api, lambda rid: m.JoinGroup(
        rid, body.group_id, body.member_id, session_ms, rebalance_ms, body.protocol_type,
        tuple((p.name, bytes(p.metadata)) for p in body.protocols),
        getattr(body, "group_instance_id", None), request.client_id or "",
        client_host(session), v, getattr(body, "reason", None)), respond)


def sync_group(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    if v >= 5 and (body.protocol_type is None or body.protocol_name is None):
        return build(key, v, "SyncGroupResponse", error_code=E.INCONSISTENT_GROUP_PROTOCOL)

    def respond(r: m.SyncGroupResult):
        return build(key, v, "SyncGroupResponse", error_code=r.error,
                     protocol_type=r.protocol_type, protocol_name=r.protocol_name,
                     assignment=r.assignment)
    return _later(api, lambda rid: m.SyncGroup(
        rid, body.group_id, body.generation_id, body.member_id,
        getattr(body, "group_instance_id", None), getattr(body, "protocol_type", None),
        getattr(body, "protocol_name", None),
        tuple((a.member_id, bytes(a.assignment)) for a in body.assignments)), respond)


def heartbeat(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    return _later(api, lambda rid: m.Heartbeat(
        rid, body.group_id, body.generation_id, body.member_id,
        getattr(body, "group_instance_id", None)),
        lambda r: build(key, v, "HeartbeatResponse", error_code=r.error))


def leave_group(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    members = tuple(m.LeaveMember(x.member_id, x.group_instance_id, getattr(x, "reason", None))
                    for x in body.members) if v >= 3 else (m.LeaveMember(body.member_id),)

    def respond(r: m.LeaveGroupResult):
        if v < 3:       # one member: its own error is the answer
            code = r.error or (r.members[0].error if r.members else E.NONE)
            return build(key, v, "LeaveGroupResponse", error_code=code)
        return build(key, v, "LeaveGroupResponse", error_code=r.error, members=tuple(
            build(key, v, "MemberResponse", member_id=x.member_id,
                  group_instance_id=x.group_instance_id, error_code=x.error) for x in r.members))
    return _later(api, lambda rid: m.LeaveGroup(rid, body.group_id, members), respond)


# -- offsets ---------------------------------------------------------------------------------------
def offset_commit(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    if v == 0:
        errors = api.zk_commit_offsets(body.group_id, [
            ((t.name, p.partition_index), p.committed_offset, p.committed_metadata)
            for t in body.topics for p in t.partitions])
        return build(key, v, "OffsetCommitResponse", topics=tuple(
            build(key, v, "OffsetCommitResponseTopic", name=t.name, partitions=tuple(
                build(key, v, "OffsetCommitResponsePartition", partition_index=p.partition_index,
                      error_code=errors[(t.name, p.partition_index)]) for p in t.partitions))
            for t in body.topics))
    # Kafka asks whether the TOPIC exists: every topic has a partition 0
    known = {t for t, _ in api.known_partitions([(t.name, 0) for t in body.topics])}
    unknown = {(t.name, p.partition_index) for t in body.topics for p in t.partitions
               if t.name not in known}
    offsets = tuple(m.CommitOffset(t.name, p.partition_index, p.committed_offset,
                                   getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
                    for t in body.topics for p in t.partitions
                    if (t.name, p.partition_index) not in unknown)

    def respond(r: m.OffsetCommitResult):
        errors = {tp: E.UNKNOWN_TOPIC_OR_PARTITION for tp in unknown}
        errors.update({(x.topic, x.partition): x.error for x in r.partitions})
        return build(key, v, "OffsetCommitResponse", topics=tuple(
            build(key, v, "OffsetCommitResponseTopic", name=t.name, partitions=tuple(
                build(key, v, "OffsetCommitResponsePartition", partition_index=p.partition_index,
                      error_code=errors.get((t.name, p.partition_index), E.NONE))
                for p in t.partitions)) for t in body.topics))
    if unknown and not offsets:          # nothing left for the coordinator (KafkaApis)
        return respond(m.OffsetCommitResult(()))
    return _later(api, lambda rid: m.OffsetCommit(
        rid, body.group_id, offsets, body.generation_id_or_member_epoch, body.member_id,
        getattr(body, "group_instance_id", None), v), respond)


def offset_delete(api: BrokerApi, request, _listener: str):
    """KafkaApis.handleOffsetDeleteRequest: a partition the metadata cache does not know is
    UNKNOWN_TOPIC_OR_PARTITION (after authorisation); a group-level error is the whole
    answer (no partitions)."""
    body, key, v = request.body, request.api_key, request.api_version
    asked = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
    known = api.known_partitions(asked)
    unknown = [tp for tp in asked if tp not in known]
    ask = tuple(dict.fromkeys(tp for tp in asked if tp in known))

    def respond(r: m.OffsetDeleteResult):
        if r.error:
            return build(key, v, "OffsetDeleteResponse", error_code=r.error, topics=())
        errors = {tp: E.UNKNOWN_TOPIC_OR_PARTITION for tp in unknown}
        errors.update({(t, p): code for t, p, code in r.partitions})
        by_topic: dict = {}
        for t, p in asked:
            by_topic.setdefault(t, dict())[p] = errors.get((t, p), E.NONE)
        return build(key, v, "OffsetDeleteResponse", error_code=E.NONE, topics=tuple(
            build(key, v, "OffsetDeleteResponseTopic", name=t, partitions=tuple(
                build(key, v, "OffsetDeleteResponsePartition", partition_index=p,
                      error_code=code) for p, code in parts.items()))
            for t, parts in by_topic.items()))
    return _later(api, lambda rid: m.OffsetDelete(rid, body.group_id, ask), respond)


def offset_fetch(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    if v == 0:
        return _zk_offset_fetch(api, request)
    if v >= 8:
        return _offset_fetch_groups(api, request)
    asked = None if body.topics is None else tuple(
        (t.name, p) for t in body.topics for p in t.partition_indexes)

    def respond(r: m.OffsetFetchResult):
        parts = r.partitions
        if r.error and v < 2:       # no top-level error code: on every partition asked
            parts = tuple(m.FetchedOffset(t, p, -1, error=r.error) for t, p in asked or ())
        return build(key, v, "OffsetFetchResponse", topics=_fetched_topics(key, v, parts),
                     error_code=r.error)
    return _later(api, lambda rid: m.OffsetFetch(
        rid, body.group_id, asked, bool(getattr(body, "require_stable", False))), respond)


def _fetched_topics(key: int, v: int, parts) -> tuple:
    by_topic: dict[str, list] = {}
    for x in parts:
        by_topic.setdefault(x.topic, []).append(x)
    return tuple(build(key, v, "OffsetFetchResponseTopic" if v < 8 else "OffsetFetchResponseTopics",
                       name=t, partitions=tuple(build(
                           key, v, "OffsetFetchResponsePartition" if v < 8
                           else "OffsetFetchResponsePartitions", partition_index=x.partition,
                           committed_offset=x.offset, committed_leader_epoch=x.leader_epoch,
                           metadata=x.metadata, error_code=x.error) for x in xs))
                 for t, xs in by_topic.items())


def _offset_fetch_groups(api: BrokerApi, request):
    body, key, v = request.body, request.api_key, request.api_version
    stable = bool(body.require_stable)
    asked = [(g.group_id, None if g.topics is None else tuple(
        (t.name, p) for t in g.topics for p in t.partition_indexes)) for g in body.groups]
    members = [(getattr(g, "member_id", None), getattr(g, "member_epoch", -1))
               for g in body.groups]                     # v9: per group
    pending = [api.group_call(lambda rid, g=g, tps=tps, who=who: m.OffsetFetch(
        rid, g, tps, stable, *who)) for (g, tps), who in zip(asked, members)]

    def respond(results):
        return build(key, v, "OffsetFetchResponse", groups=tuple(
            build(key, v, "OffsetFetchResponseGroup", group_id=g, error_code=r.error,
                  topics=() if r.error else _fetched_topics(key, v, r.partitions))
            for (g, _), r in zip(asked, results)))
    return Deferred.gather(pending).then(respond)


def _zk_offset_fetch(api: BrokerApi, request):
    body, key, v = request.body, request.api_key, request.api_version
    tps = [(t.name, p) for t in body.topics for p in t.partition_indexes]
    got = api.zk_fetch_offsets(body.group_id, tps)
    return build(key, v, "OffsetFetchResponse", topics=tuple(
        build(key, v, "OffsetFetchResponseTopic", name=t.name, partitions=tuple(
            build(key, v, "OffsetFetchResponsePartition", partition_index=p,
                  committed_offset=got[(t.name, p)][1], metadata="",
                  error_code=got[(t.name, p)][0]) for p in t.partition_indexes))
        for t in body.topics))


# -- administration --------------------------------------------------------------------------------
def list_groups(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    states = frozenset(getattr(body, "states_filter", ()) or ())
    types = frozenset(getattr(body, "types_filter", ()) or ())
    return _later(api, lambda rid: m.ListGroups(rid, states, types), lambda r: build(
        key, v, "ListGroupsResponse", error_code=r.error, groups=tuple(
            build(key, v, "ListedGroup", group_id=g.group_id, protocol_type=g.protocol_type,
                  group_state=g.state, group_type=g.group_type) for g in r.groups)))


def describe_groups(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    with_ops = v >= 3 and bool(getattr(body, "include_authorized_operations", False))

    def operations(g):
        if not with_ops or g.error != E.NONE:        # KafkaApis: only groups described
            return NO_AUTHORIZED_OPERATIONS
        return authorized_operations(api, Res.GROUP, g.group_id)

    def respond(r: m.DescribeGroupsResult):
        return build(key, v, "DescribeGroupsResponse", groups=tuple(
            build(key, v, "DescribedGroup", error_code=g.error, group_id=g.group_id,
                  group_state=g.state, protocol_type=g.protocol_type, protocol_data=g.protocol,
                  authorized_operations=operations(g), members=tuple(
                      build(key, v, "DescribedGroupMember", member_id=x.member_id,
                            group_instance_id=x.group_instance_id, client_id=x.client_id,
                            client_host=x.client_host, member_metadata=x.metadata,
                            member_assignment=x.assignment) for x in g.members))
            for g in r.groups))
    return _later(api, lambda rid: m.DescribeGroups(rid, tuple(body.groups)), respond)


def delete_groups(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    return _later(api, lambda rid: m.DeleteGroups(rid, tuple(body.groups_names)), lambda r: build(
        key, v, "DeleteGroupsResponse", results=tuple(
            build(key, v, "DeletableGroupResult", group_id=g.group_id, error_code=g.error)
            for g in r.groups)))


def described_assignment(key: int, v: int, names: dict, a: dict):
    """A described member's assignment ({topic id: partitions}), each topic named from this
    broker's metadata ("" for a topic it no longer knows), sorted: ConsumerGroupDescribe's
    and ShareGroupDescribe's alike."""
    return build(key, v, "Assignment", topic_partitions=tuple(
        build(key, v, "TopicPartitions", topic_id=topic_uuid(t), topic_name=names.get(t, ""),
              partitions=tuple(sorted(ps))) for t, ps in sorted(a.items())))


# -- KIP-848 ---------------------------------------------------------------------------------------
def consumer_group_heartbeat(api: BrokerApi, request, session):
    body, key, v = request.body, request.api_key, request.api_version
    owned = None
    if body.topic_partitions is not None:
        owned = {}
        for t in body.topic_partitions:
            text = topic_id_text(t.topic_id)
            if text is not None:
                owned[text] = tuple(owned.get(text, ())) + tuple(t.partitions)
    names = body.subscribed_topic_names
    asked = HeartbeatRequest(
        body.group_id, body.member_id, body.member_epoch, body.instance_id, body.rack_id,
        millis(body.rebalance_timeout), None if names is None else tuple(names),
        getattr(body, "subscribed_topic_regex", None), body.server_assignor, owned,
        request.client_id or "", client_host(session))
    topics = api.topic_partition_counts()

    def respond(a: HeartbeatAnswer):
        assignment = None if a.assignment is None else build(
            key, v, "Assignment", topic_partitions=tuple(
                build(key, v, "TopicPartitions", topic_id=topic_uuid(t),
                      partitions=tuple(sorted(ps))) for t, ps in sorted(a.assignment.items())))
        return build(key, v, "ConsumerGroupHeartbeatResponse", error_code=a.error,
                     error_message=a.message, member_id=a.member_id,
                     member_epoch=a.member_epoch, heartbeat_interval=a.heartbeat_interval_ms,
                     assignment=assignment)
    return _later(api, lambda rid: m.ConsumerGroupHeartbeat(rid, asked, topics, v), respond)


def consumer_group_describe(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    with_ops = bool(body.include_authorized_operations)
    names = {i: t for t, i in api.topic_ids().items()}

    def assignment(a):
        return described_assignment(key, v, names, a)

    def respond(r: m.ConsumerGroupDescribeResult):
        return build(key, v, "ConsumerGroupDescribeResponse", groups=tuple(
            build(key, v, "DescribedGroup", error_code=g.error, error_message=g.message,
                  group_id=g.group_id, group_state=g.state, group_epoch=g.group_epoch,
                  assignment_epoch=g.assignment_epoch, assignor_name=g.assignor,
                  authorized_operations=authorized_operations(api, Res.GROUP, g.group_id)
                  if with_ops and g.error == E.NONE else NO_AUTHORIZED_OPERATIONS,
                  members=tuple(build(
                      key, v, "Member", member_id=x.member_id, instance_id=x.instance_id,
                      rack_id=x.rack_id, member_epoch=x.member_epoch, client_id=x.client_id,
                      client_host=x.client_host, subscribed_topic_names=x.subscribed_topic_names,
                      subscribed_topic_regex=x.subscribed_topic_regex,
                      assignment=assignment(x.assignment),
                      target_assignment=assignment(x.target_assignment), member_type=1)
                      for x in g.members))
            for g in r.groups))
    return _later(api, lambda rid: m.ConsumerGroupDescribe(rid, tuple(body.group_ids)), respond)
