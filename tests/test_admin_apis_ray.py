"""Kafka 3.8's admin APIs from unmodified clients on a real rayka cluster (real Ray, the real
ZooKeeper, one cluster for the module): AlterConfigs (confluent-kafka), DescribeLogDirs,
ElectLeaders, Alter/ListPartitionReassignments and OffsetDelete (kafka-python's
KafkaAdminClient), elections and offset deletion from confluent-kafka too, and rayka's own
Admin. Waits are polls with deadlines."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTP
from kafka.admin import ConfigResource as KConfigResource, ConfigResourceType

from rayka.client.admin import wait_for
from replicas.errors import ErrorCode as E, NoReassignmentInProgress
from tests.ray_cluster import cluster, ray_session  # noqa: F401  (fixtures)

pytestmark = pytest.mark.ray


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def kp_admin(cluster):
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers(),
                             request_timeout_ms=30000)
    yield admin
    admin.close()


def test_confluent_alter_configs_replaces_the_topics_overrides(cluster):
    topic = topic_name("cfg")
    cluster.admin().create_topic(topic, 1, 1, {"retention.ms": "5000",
                                                "cleanup.policy": "compact"})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers()})
    res = ConfigResource("topic", topic, set_config={"retention.ms": "7000"})
    admin.alter_configs([res])[res].result(timeout=60)
    assert cluster.admin().topic_config(topic) == {"retention.ms": "7000"}
    described = admin.describe_configs([ConfigResource("topic", topic)])
    configs = list(described.values())[0].result(timeout=60)
    assert configs["retention.ms"].value == "7000" and configs["cleanup.policy"].value == "delete"
    bad = ConfigResource("topic", topic, set_config={"no.such.config": "1"})
    with pytest.raises(KafkaException) as refused:
        admin.alter_configs([bad])[bad].result(timeout=60)
    assert refused.value.args[0].code() == E.INVALID_CONFIG
    assert cluster.admin().topic_config(topic) == {"retention.ms": "7000"}


def test_kafka_python_describe_log_dirs(cluster, kp_admin):
    topic = topic_name("dirs")
    cluster.admin().create_topic(topic, 2, 3)
    producer = cluster.producer(acks="all")
    producer.send_batch(topic, [b"x" * 100] * 50, partition=0).result(60)
    producer.close()
    leader = {p.partition: p.leader for p in cluster.admin().describe_topic(topic)}[0]
    answers = kp_admin.describe_log_dirs(topic_partitions={topic: [0, 1]}, brokers=[leader])
    (answer,) = answers                   # one dict per broker asked
    assert answer["broker"] == leader and len(answer["log_dirs"]) == 1, answer
    sizes = _partition_sizes(answer, topic)
    assert sizes[0] > 5000 and sizes[1] == 0, answer


def _partition_sizes(answer, topic: str) -> dict:
    """{partition: size} out of kafka-python's DescribeLogDirs answer (a response object or
    its dict)."""
    tree = answer.to_dict() if hasattr(answer, "to_dict") else answer
    out = {}

    def walk(x):
        if isinstance(x, dict):
            name = x.get("name") or x.get("topic")
            if name == topic and "partitions" in x:
                for p in x["partitions"]:
                    out[p["partition_index"]] = p["partition_size"]
            for v in x.values():
                walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
    walk(tree)
    return out


def test_reassign_reorder_then_elect_the_new_preferred_leader(cluster, kp_admin):
    topic = topic_name("elect")
    infos = cluster.admin().create_topic(topic, 1, 3)
    replicas, leader = list(infos[0].replicas), infos[0].leader
    assert leader == replicas[0]
    reordered = replicas[1:] + replicas[:1]          # same brokers: completes at once
    answer = kp_admin.alter_partition_reassignments({KTP(topic, 0): reordered})
    assert all(not getattr(v, "errno", 0) for v in answer.values()), answer
    wait_for(lambda: tuple(cluster.store.get_topic_assignment(topic).partitions[0])
             == tuple(reordered), 60, "the reordered assignment")
    assert not kp_admin.list_partition_reassignments({topic: [0]})
    # still led by the old leader, no longer the preferred one: elect it (confluent)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers()})
    tp = TopicPartition(topic, 0)
    result = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(timeout=60)
    assert result[tp] is None, result
    wait_for(lambda: cluster.admin().describe_topic(topic)[0].leader == reordered[0], 60,
             "the preferred leader")
    again = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(timeout=60)
    assert again[tp].code() == E.ELECTION_NOT_NEEDED
    unclean = kp_admin.elect_leaders(1, {topic: [0]}, raise_errors=False)
    assert E.ELECTION_NOT_NEEDED in _codes(unclean), unclean


def _codes(tree) -> set:
    out = set()
    if hasattr(tree, "to_dict"):
        tree = tree.to_dict()

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "error_code":
                    out.add(v)
                walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
        elif hasattr(x, "errno"):
            out.add(x.errno)
    walk(tree)
    return out


def test_reassignment_cancel_of_a_partition_not_moving(cluster, kp_admin):
    topic = topic_name("cancel")
    cluster.admin().create_topic(topic, 1, 1)
    answer = kp_admin.alter_partition_reassignments({KTP(topic, 0): None})
    assert E.NO_REASSIGNMENT_IN_PROGRESS in _codes(answer), answer
    with pytest.raises(NoReassignmentInProgress):
        err = cluster.admin().alter_reassignments({(topic, 0): None})[(topic, 0)]
        raise err
    assert cluster.admin().list_reassignments() == {}


def test_delete_group_offsets_kafka_python_and_confluent(cluster, kp_admin):
    topic, group = topic_name("offdel"), f"g-{uuid.uuid4().hex[:6]}"
    cluster.admin().create_topic(topic, 2, 3)
    cluster.admin().commit_offsets(group, {(topic, 0): 5, (topic, 1): 7})
    answer = kp_admin.delete_group_offsets(group, [KTP(topic, 0)])
    assert E.NONE in _codes(answer) or all(not getattr(v, "errno", 0) for v in answer.values())
    assert cluster.admin().committed_offsets(group) == {(topic, 1): 7}
    # a subscribed member: its topic's offsets stay (GROUP_SUBSCRIBED_TO_TOPIC)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers(), "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment()
        refused = cluster.admin().delete_offsets(group, [(topic, 1)])
        assert refused == {(topic, 1): E.GROUP_SUBSCRIBED_TO_TOPIC}
        assert cluster.admin().committed_offsets(group) == {(topic, 1): 7}
    finally:
        consumer.close()
    wait_for(lambda: cluster.admin().describe_group(group)["state"] == "Empty", 60,
             "the group empty")
    assert cluster.admin().delete_offsets(group, [(topic, 1)]) == {(topic, 1): 0}
    assert cluster.admin().committed_offsets(group) == {}
