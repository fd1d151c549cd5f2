"""KIP-932 share-group APIs: ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch
(78), ShareAcknowledge (79) and the share-group offsets' DescribeShareGroupOffsets (90),
AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92), at the versions Kafka 4.2 serves.

Rules:
- Topics travel by id (Kafka's UUIDs, text inside rayka; the zero UUID is no topic). A
  ShareFetch or ShareAcknowledge naming a topic id this broker does not know answers each
  of its partitions UNKNOWN_TOPIC_ID and never reaches the share-partitions.
- ShareGroupHeartbeat gets the cluster's topics from this broker's metadata ({name: (id,
  partition count)}) and the client id from the header; its assignment lists topics and
  partitions sorted, or is null when unchanged.
- ShareFetch v2's is_renew_ack (KIP-1222) only renews locks: nothing new is acquired; its
  share_acquire_mode is answered as record_limit (rayka never acquires past max_records).
- A partition answered NOT_LEADER_OR_FOLLOWER carries its current leader and epoch, and the
  answer those leaders' endpoints on the listener asked on (as Fetch v16).
- ShareGroupDescribe names each assigned topic from this broker's metadata ("" for a topic
  it no longer knows); authorized operations when asked.
- The offsets APIs ask the group's coordinator (share/offsets.py, actors/share_offsets.py):
  DescribeShareGroupOffsets answers each group on its own (an empty topic list: no topics),
  AlterShareGroupOffsets echoes every partition asked (a group-level error is each
  partition's, as Kafka's getErrorResponse), DeleteShareGroupOffsets answers a topic each,
  or only the group's error.
"""

from __future__ import annotations

from protocol.api import BrokerApi, Deferred, ShareFetchPartition, topic_id_text, topic_uuid
from protocol.build import build, millis
from protocol.handlers.authorized import authorized_operations
from protocol.handlers.groups import client_host, described_assignment
from protocol.security.acl import ResourceType as Res
from replicas.errors import ErrorCode as E
from share.group import ShareHeartbeat
from share.offsets import (AlterOffsets, DeleteOffsets, DescribeOffsets, OffsetsAnswer,
                           PartitionOffset)

NO_AUTHORIZED_OPERATIONS = -2147483648
NEW_LEADER_ERRORS = (E.NOT_LEADER_OR_FOLLOWER, E.FENCED_LEADER_EPOCH)


def share_group_heartbeat(api: BrokerApi, request, session):
    body, key, v = request.body, request.api_key, request.api_version
    names = body.subscribed_topic_names
    asked = ShareHeartbeat(body.group_id, body.member_id or "", body.member_epoch,
                           body.rack_id, None if names is None else tuple(names),
                           request.client_id or "", client_host(session))
    a = api.share_heartbeat(asked, api.topic_partition_counts())
    assignment = None if a.assignment is None else build(
        key, v, "Assignment", topic_partitions=tuple(
            build(key, v, "TopicPartitions", topic_id=topic_uuid(t),
                  partitions=tuple(sorted(ps))) for t, ps in sorted(a.assignment.items())))
    return build(key, v, "ShareGroupHeartbeatResponse", error_code=a.error,
                 error_message=a.message, member_id=a.member_id, member_epoch=a.member_epoch,
                 heartbeat_interval=a.heartbeat_interval_ms, assignment=assignment)


def share_group_describe(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    with_ops = bool(body.include_authorized_operations)
    names = {i: t for t, i in api.topic_ids().items()}

    def assignment(a):
        return described_assignment(key, v, names, a)
    groups = api.share_describe(list(body.group_ids))
    return build(key, v, "ShareGroupDescribeResponse", groups=tuple(
        build(key, v, "DescribedGroup", error_code=g.error, error_message=g.message,
              group_id=g.group_id, group_state=g.state, group_epoch=g.group_epoch,
              assignment_epoch=g.assignment_epoch, assignor_name=g.assignor,
              authorized_operations=authorized_operations(api, Res.GROUP, g.group_id)
              if with_ops and g.error == E.NONE else NO_AUTHORIZED_OPERATIONS,
              members=tuple(build(
                  key, v, "Member", member_id=x.member_id, rack_id=x.rack_id,
                  member_epoch=x.member_epoch, client_id=x.client_id,
                  client_host=x.client_host, subscribed_topic_names=x.subscribed_topic_names,
                  assignment=assignment(x.assignment)) for x in g.members))
        for g in groups))


def _topics(api: BrokerApi, topics, batches_of):
    """({(name, partition): acknowledgement batches}, {tp-by-id: UNKNOWN_TOPIC_ID}) of the
    request's topics; tp-by-id is (topic id text, partition)."""
    names = {i: t for t, i in api.topic_ids().items()}
    asked, unknown = {}, {}
    for t in topics:
        text = topic_id_text(t.topic_id)
        for p in t.partitions:
            index = p if isinstance(p, int) else p.partition_index
            if text not in names:
                unknown[(text, index)] = E.UNKNOWN_TOPIC_ID
                continue
            asked[(names[text], index)] = batches_of(p)
    return asked, unknown


def _ack_batches(partition):
    return [(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
            for b in partition.acknowledgement_batches]


def _endpoints(api: BrokerApi, leaders, listener: str, key, v):
    nodes = {leader for leader in leaders if leader >= 0}
    if not nodes:
        return ()
    md = api.metadata([], False, listener)
    return tuple(build(key, v, "NodeEndpoint", node_id=b.id, host=b.host, port=b.port,
                       rack=b.rack) for b in sorted(md.brokers, key=lambda b: b.id)
                 if b.id in nodes)


def share_fetch(api: BrokerApi, request, listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    asked, unknown = _topics(api, body.topics, _ack_batches)
    forgotten, _ = _topics(api, body.forgotten_topics_data, lambda _p: None)
    ids = api.topic_ids()
    renew = bool(getattr(body, "is_renew_ack", False))
    deferred = api.share_fetch(body.group_id or "", body.member_id or "",
                               body.share_session_epoch, asked, list(forgotten),
                               millis(body.max_wait), body.min_bytes, body.max_bytes,
                               body.max_records, renew)

    def respond(r):
        if r.error:
            return build(key, v, "ShareFetchResponse", error_code=r.error,
                         acquisition_lock_timeout=0, responses=(), node_endpoints=())
        per_topic: dict[str, list] = {}
        leaders = []
        for (topic, index), a in sorted(r.partitions.items()):
            per_topic.setdefault(ids.get(topic), []).append((index, a))
            if a.error in NEW_LEADER_ERRORS:
                leaders.append(a.leader[0])
        for (text, index), code in sorted(unknown.items(), key=lambda x: (str(x[0][0]), x[0][1])):
            per_topic.setdefault(text, []).append((index, ShareFetchPartition(error=code)))
        return build(key, v, "ShareFetchResponse", error_code=E.NONE,
                     acquisition_lock_timeout=r.lock_timeout_ms, responses=tuple(
                         build(key, v, "ShareFetchableTopicResponse", topic_id=topic_uuid(t),
                               partitions=tuple(build(
                                   key, v, "PartitionData", partition_index=i,
                                   error_code=a.error, error_message=a.message,
                                   acknowledge_error_code=a.ack_error,
                                   current_leader=build(key, v, "LeaderIdAndEpoch",
                                                        leader_id=a.leader[0],
                                                        leader_epoch=a.leader[1]),
                                   records=a.records or b"",
                                   acquired_records=tuple(build(
                                       key, v, "AcquiredRecords", first_offset=f,
                                       last_offset=last, delivery_count=n)
                                       for f, last, n in a.acquired))
                                   for i, a in parts))
                         for t, parts in per_topic.items()),
                     node_endpoints=_endpoints(api, leaders, listener, key, v))
    return deferred.then(respond)


def share_acknowledge(api: BrokerApi, request, listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    asked, unknown = _topics(api, body.topics, _ack_batches)
    ids = api.topic_ids()

    def respond(answer):
        error, answers, lock_ms = answer
        if error:
            return build(key, v, "ShareAcknowledgeResponse", error_code=error, responses=(),
                         acquisition_lock_timeout=0, node_endpoints=())
        per_topic: dict[str, list] = {}
        leaders = []
        for (topic, index), (code, leader) in sorted(answers.items()):
            per_topic.setdefault(ids.get(topic), []).append((index, code, leader))
            if code in NEW_LEADER_ERRORS:
                leaders.append(leader[0])
        for (text, index), code in unknown.items():
            per_topic.setdefault(text, []).append((index, code, (-1, -1)))
        return build(key, v, "ShareAcknowledgeResponse", error_code=E.NONE,
                     acquisition_lock_timeout=lock_ms, responses=tuple(
                         build(key, v, "ShareAcknowledgeTopicResponse", topic_id=topic_uuid(t),
                               partitions=tuple(build(
                                   key, v, "PartitionData", partition_index=i, error_code=code,
                                   current_leader=build(key, v, "LeaderIdAndEpoch",
                                                        leader_id=leader[0],
                                                        leader_epoch=leader[1]))
                                   for i, code, leader in parts))
                         for t, parts in per_topic.items()),
                     node_endpoints=_endpoints(api, leaders, listener, key, v))
    return api.share_acknowledge(body.group_id or "", body.member_id or "",
                                 body.share_session_epoch, asked).then(respond)


# -- share-group offsets (DescribeShareGroupOffsets 90, Alter 91, Delete 92) --------------------
def describe_share_group_offsets(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version

    def group(asked, answer):
        topics = tuple(
            build(key, v, "DescribeShareGroupOffsetsResponseTopic", topic_name=t.topic,
                  topic_id=topic_uuid(t.topic_id), partitions=tuple(
                      build(key, v, "DescribeShareGroupOffsetsResponsePartition",
                            partition_index=p.partition, start_offset=p.start_offset,
                            leader_epoch=p.leader_epoch, lag=p.lag, error_code=p.error,
                            error_message=p.message) for p in t.partitions))
            for t in answer.topics)
        return build(key, v, "DescribeShareGroupOffsetsResponseGroup", group_id=asked.group_id,
                     topics=topics, error_code=answer.error, error_message=answer.message)

    def one(g):
        if g.topics is not None and not g.topics:          # nothing asked: nothing to read
            return Deferred.done(group(g, OffsetsAnswer()))
        topics = None if g.topics is None else {t.topic_name: list(t.partitions)
                                                 for t in g.topics}
        return api.share_offsets(DescribeOffsets(g.group_id, topics)).then(
            lambda answer: group(g, answer))
    return Deferred.gather([one(g) for g in body.groups]).then(
        lambda groups: build(key, v, "DescribeShareGroupOffsetsResponse", groups=tuple(groups)))


def alter_share_group_offsets(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    asked = {t.topic_name: {p.partition_index: p.start_offset for p in t.partitions}
             for t in body.topics}

    def respond(answer):
        by_topic = {t.topic: t for t in answer.topics}

        def partition(got: PartitionOffset):
            if answer.error:     # a group-level error is every partition's (getErrorResponse)
                got = PartitionOffset(got.partition, error=answer.error,
                                      message=answer.message)
            return build(key, v, "AlterShareGroupOffsetsResponsePartition",
                         partition_index=got.partition, error_code=got.error,
                         error_message=got.message)
        rows = []
        for topic, parts in asked.items():
            got = by_topic.get(topic)
            mine = {p.partition: p for p in got.partitions} if got else {}
            rows.append(build(key, v, "AlterShareGroupOffsetsResponseTopic", topic_name=topic,
                              topic_id=topic_uuid(got.topic_id if got else None),
                              partitions=tuple(partition(mine.get(p, PartitionOffset(p)))
                                               for p in parts)))
        return build(key, v, "AlterShareGroupOffsetsResponse", error_code=answer.error,
                     error_message=answer.message, responses=tuple(rows))
    return api.share_offsets(AlterOffsets(body.group_id, asked)).then(respond)


def delete_share_group_offsets(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version

    def respond(answer):
        if answer.error:
            return build(key, v, "DeleteShareGroupOffsetsResponse", error_code=answer.error,
                         error_message=answer.message, responses=())
        return build(key, v, "DeleteShareGroupOffsetsResponse", error_code=E.NONE,
                     responses=tuple(build(
                         key, v, "DeleteShareGroupOffsetsResponseTopic", topic_name=o.topic,
                         topic_id=topic_uuid(o.topic_id), error_code=o.error,
                         error_message=o.message) for o in answer.outcomes))
    topics = tuple(dict.fromkeys(t.topic_name for t in body.topics))
    return api.share_offsets(DeleteOffsets(body.group_id, topics)).then(respond)
