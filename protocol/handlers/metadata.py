"""Metadata (3) and DescribeCluster (60).

Rules (Kafka's KafkaApis.handleTopicMetadataRequest, ZooKeeper mode):
- v0: an empty topic list means every topic; v1+: null means every topic, empty means none.
- Unknown topics are created when the request allows it (always for v0-3,
  allow_auto_topic_creation from v4) and the broker's auto.create.topics.enable is on; the
  answer for such a topic is LEADER_NOT_AVAILABLE until it has leaders (the client retries).
  Otherwise UNKNOWN_TOPIC_OR_PARTITION. Names are validated (INVALID_TOPIC_EXCEPTION).
- Brokers are listed by the endpoint of the listener the request came in on; a partition's
  offline_replicas are its replicas that are not live; leader -1 with LEADER_NOT_AVAILABLE
  when it has no live leader.
- v10+ answer each topic's id (the zero UUID for one not known). v12 may ask topics by id
  (name null): a known id is answered as its topic, an unknown one UNKNOWN_TOPIC_ID with a
  null name (KafkaApis.getTopicMetadata); ids are never auto-created. A topic named by
  neither is INVALID_REQUEST for the whole request, as is an id below v12.
- authorized_operations (v8+ topics, v8-10 cluster; DescribeCluster's) only when asked,
  else Kafka's sentinel; a topic answered 29 keeps the sentinel.
"""

from __future__ import annotations

from protocol.api import BrokerApi, ClusterMetadata, TopicMetadata, topic_id_text, topic_uuid
from protocol.build import build
from protocol.handlers.authorized import authorized_operations
from protocol.security.acl import CLUSTER_NAME, ResourceType as Res
from replicas.errors import ErrorCode as E
from replicas.errors import InvalidRequest
NO_AUTHORIZED_OPERATIONS = -2147483648      # Kafka's "not requested" sentinel


def requested_topics(request) -> list[str] | None:
    body, v = request.body, request.api_version
    topics = body.topics
    if topics is None or (v == 0 and not topics):
        return None
    return [t.name for t in topics if t.name is not None]


def _asked_ids(request) -> list[str]:
    """The topic ids asked (v10+), in Kafka's text form."""
    if request.api_version < 10 or not request.body.topics:
        return []
    ids = []
    for t in request.body.topics:
        text = topic_id_text(getattr(t, "topic_id", None))
        if text is not None and request.api_version < 12:
            raise InvalidRequest(f"Topic IDs are not supported in requests for version "
                                 f"{request.api_version}")
        if t.name is None and text is None:
            raise InvalidRequest("a topic must be named by its name or its id")
        if t.name is None:
            ids.append(text)
    return ids


def metadata(api: BrokerApi, request, listener: str):
    v = request.api_version
    allow = v < 4 or bool(getattr(request.body, "allow_auto_topic_creation", True))
    ids = _asked_ids(request)
    if not ids:
        return encode(request, api.metadata(requested_topics(request), allow, listener), api)
    names = {i: t for t, i in api.topic_ids().items()}
    known = [names[i] for i in dict.fromkeys(ids) if i in names]
    md: ClusterMetadata = api.metadata(known, False, listener)
    unknown = tuple(TopicMetadata(None, E.UNKNOWN_TOPIC_ID, topic_id=i)
                    for i in dict.fromkeys(ids) if i not in names)
    return encode(request, ClusterMetadata(md.cluster_id, md.controller_id, md.brokers,
                                           md.topics + unknown), api)


def encode(request, md: ClusterMetadata, api=None):
    key, v = request.api_key, request.api_version
    body = request.body
    topic_ops = api is not None and bool(getattr(body, "include_topic_authorized_operations",
                                                 False))
    cluster_ops = api is not None and bool(
        getattr(body, "include_cluster_authorized_operations", False))

    def topic_operations(t):
        if not topic_ops or t.error == E.TOPIC_AUTHORIZATION_FAILED:
            return NO_AUTHORIZED_OPERATIONS
        return authorized_operations(api, Res.TOPIC, t.name)

    def partition(p):
        return build(key, v, "MetadataResponsePartition", error_code=p.error,
                     partition_index=p.partition, leader_id=p.leader,
                     leader_epoch=p.leader_epoch, replica_nodes=p.replicas, isr_nodes=p.isr,
                     offline_replicas=p.offline)

    topics = tuple(build(key, v, "MetadataResponseTopic", error_code=t.error, name=t.name,
                         topic_id=topic_uuid(t.topic_id), is_internal=t.internal,
                         partitions=tuple(partition(p) for p in t.partitions),
                         topic_authorized_operations=topic_operations(t))
                   for t in md.topics)
    brokers = tuple(build(key, v, "MetadataResponseBroker", node_id=b.id, host=b.host,
                          port=b.port, rack=b.rack) for b in md.brokers)
    return build(key, v, "MetadataResponse", brokers=brokers, cluster_id=md.cluster_id,
                 controller_id=md.controller_id, topics=topics,
                 cluster_authorized_operations=authorized_operations(api, Res.CLUSTER,
                                                                     CLUSTER_NAME)
                 if cluster_ops else NO_AUTHORIZED_OPERATIONS)


def describe_cluster(api: BrokerApi, request, listener: str):
    """Answered to anyone, as Kafka 3 does; cluster_authorized_operations when asked."""
    key, v = request.api_key, request.api_version
    md = api.metadata([], False, listener)
    brokers = tuple(build(key, v, "DescribeClusterBroker", broker_id=b.id, host=b.host,
                          port=b.port, rack=b.rack) for b in md.brokers)
    return build(key, v, "DescribeClusterResponse", error_code=E.NONE, error_message=None,
                 endpoint_type=1, cluster_id=md.cluster_id, controller_id=md.controller_id,
                 brokers=brokers, cluster_authorized_operations=authorized_operations(
                     api, Res.CLUSTER, CLUSTER_NAME)
                 if request.body.include_cluster_authorized_operations
                 else NO_AUTHORIZED_OPERATIONS)
