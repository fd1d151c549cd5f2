"""Consumer-group APIs: FindCoordinator (10), JoinGroup (11), Heartbeat (12), LeaveGroup (13),
SyncGroup (14), OffsetCommit (8), OffsetFetch (9), ListGroups (16), DescribeGroups (15),
DeleteGroups (42).

Rules:
- Every group request becomes a coordinator.messages event given to the broker's group
  coordinator (`BrokerApi.group_call`); the answer is a Deferred, because a JoinGroup (and a
  follower's SyncGroup) stays parked until the rebalance completes, and commits wait for
  their `__consumer_offsets` append. The coordinator decides everything Kafka decides (the
  checks, their order, the error codes); these handlers only translate versions.
- FindCoordinator: key type 0 (group) → the leader of the group's `__consumer_offsets`
  partition, by the endpoint of the listener asked on; COORDINATOR_NOT_AVAILABLE while the
  topic is being created or has no leader. Key type 1 (transaction): the leader of the
  transactional id's `__transaction_state` partition, likewise. Any other key type is
  INVALID_REQUEST (Kafka: share keys need v6, other types are unknown).
- JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout. Member client ids
  come from the request header.
- SyncGroup v5+ without protocol type or name is INCONSISTENT_GROUP_PROTOCOL before the
  coordinator sees it (KafkaApis: both are mandatory from v5).
- OffsetFetch v1 has no top-level error code: a group-level error goes on every partition
  asked, with offset -1 (Kafka's OffsetFetchRequest.getErrorResponse); v2+ answer it at the
  top with no topics.
"""

from __future__ import annotations

from coordinator import messages as m
from protocol.api import BrokerApi, Deferred
from protocol.build import build, millis
from replicas.errors import ErrorCode as E


def _later(api: BrokerApi, make_event, respond) -> Deferred:
    return api.group_call(make_event).then(respond)


# -- FindCoordinator -------------------------------------------------------------------------------
def find_coordinator(api: BrokerApi, request, listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    key_type = getattr(body, "key_type", 0)
    keys = list(body.coordinator_keys) if v >= 4 else [body.key]
    if key_type in (0, 1):
        found = api.find_coordinator(keys, listener, key_type)
    else:
        found = {k: (E.INVALID_REQUEST, -1, "", -1) for k in keys}

    def message(code):
        if code == E.NONE:
            return None
        if code == E.GROUP_AUTHORIZATION_FAILED:     # Kafka: Errors.message() before v4 only
            return "Group authorization failed." if v < 4 else None
        if code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            return "Transactional Id authorization failed." if v < 4 else None
        return {0: "the group coordinator is not available yet",
                1: "the transaction coordinator is not available yet"}.get(
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
def join_group(api: BrokerApi, request, _listener: str):
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
        getattr(body, "group_instance_id", None), request.client_id or "", "", v,
        getattr(body, "reason", None)), respond)


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
    offsets = tuple(m.CommitOffset(t.name, p.partition_index, p.committed_offset,
                                   getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
                    for t in body.topics for p in t.partitions)

    def respond(r: m.OffsetCommitResult):
        errors = {(x.topic, x.partition): x.error for x in r.partitions}
        return build(key, v, "OffsetCommitResponse", topics=tuple(
            build(key, v, "OffsetCommitResponseTopic", name=t.name, partitions=tuple(
                build(key, v, "OffsetCommitResponsePartition", partition_index=p.partition_index,
                      error_code=errors.get((t.name, p.partition_index), E.NONE))
                for p in t.partitions)) for t in body.topics))
    return _later(api, lambda rid: m.OffsetCommit(
        rid, body.group_id, offsets, body.generation_id_or_member_epoch, body.member_id,
        getattr(body, "group_instance_id", None)), respond)


def offset_fetch(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    asked = None if body.topics is None else tuple(
        (t.name, p) for t in body.topics for p in t.partition_indexes)

    def respond(r: m.OffsetFetchResult):
        parts = r.partitions
        if r.error and v < 2:       # no top-level error code: on every partition asked
            parts = tuple(m.FetchedOffset(t, p, -1, error=r.error) for t, p in asked or ())
        by_topic: dict[str, list] = {}
        for x in parts:
            by_topic.setdefault(x.topic, []).append(x)
        topics = tuple(build(key, v, "OffsetFetchResponseTopic", name=t, partitions=tuple(
            build(key, v, "OffsetFetchResponsePartition", partition_index=x.partition,
                  committed_offset=x.offset, committed_leader_epoch=x.leader_epoch,
                  metadata=x.metadata, error_code=x.error) for x in xs))
            for t, xs in by_topic.items())
        return build(key, v, "OffsetFetchResponse", topics=topics, error_code=r.error)
    return _later(api, lambda rid: m.OffsetFetch(
        rid, body.group_id, asked, bool(getattr(body, "require_stable", False))), respond)


# -- administration --------------------------------------------------------------------------------
def list_groups(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    states = frozenset(getattr(body, "states_filter", ()) or ())
    return _later(api, lambda rid: m.ListGroups(rid, states), lambda r: build(
        key, v, "ListGroupsResponse", error_code=r.error, groups=tuple(
            build(key, v, "ListedGroup", group_id=g.group_id, protocol_type=g.protocol_type,
                  group_state=g.state) for g in r.groups)))


def describe_groups(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version

    def respond(r: m.DescribeGroupsResult):
        return build(key, v, "DescribeGroupsResponse", groups=tuple(
            build(key, v, "DescribedGroup", error_code=g.error, group_id=g.group_id,
                  group_state=g.state, protocol_type=g.protocol_type, protocol_data=g.protocol,
                  authorized_operations=-2147483648, members=tuple(
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
