"""Client quotas, SCRAM administration and dynamic broker configs on real brokers
(tests/broker_world.py: real ZooKeeper, real listeners, no Ray) with real clients: Kafka's znodes (a user's quotas and
SCRAM credentials share /config/users/<user>), DescribeClientQuotas / AlterClientQuotas over
the wire (kafka-python's protocol classes), AlterUserScramCredentials /
DescribeUserScramCredentials (confluent-kafka's AdminClient), and a librdkafka producer over
its producer_byte_rate throttled (throttle_time_ms > 0 in its answers, the broker picking the
quota up from the change notification) with nothing refused or lost; `rayka quotas`;
IncrementalAlterConfigs / DescribeConfigs on BROKER resources (/config/brokers/<id> and
<default>, Kafka's sources and synonyms, read-only keys refused)."""

from __future__ import annotations

import json
import socket
import struct
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest

from actors import security_store as security
from actors.config_store import read_entity, rewrite_entity
from protocol.quotas import QuotaEntity
from tests.broker_world import InProcessCluster
from tests.protocol_samples import RESPONSES, frame_of

pytestmark = [pytest.mark.zk, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def world(zk_server, tmp_path_factory):
    cluster = InProcessCluster(zk_server.connect_string, tmp_path_factory.mktemp("quotas"),
                               broker_ids=(1,))
    try:
        yield cluster
    finally:
        cluster.close()


def bootstrap(world) -> str:
    return f"127.0.0.1:{world.brokers[1].listeners[0].port}"


def wait_for(condition, timeout_s=20.0, what="the condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def wire(world, msg, correlation_id: int = 1):
    """One request over a fresh socket (kafka-python encodes and decodes): its answer."""
    port = world.brokers[1].listeners[0].port
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(frame_of(msg, correlation_id, client_id="kafka-configs"))
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        frame = s.recv(size, socket.MSG_WAITALL)
    answer = RESPONSES[msg.API_KEY].decode(frame, version=msg.API_VERSION, header=True)
    assert answer.header.correlation_id == correlation_id
    return answer


def test_quotas_and_scram_share_the_users_znode_and_the_wire(world):
    store = world.brokers[1].store
    security.add_user(store, "alice", "pw1")
    e = AlterClientQuotasRequest.EntryData
    got = wire(world, AlterClientQuotasRequest[1](entries=[
        e(entity=[e.EntityData(entity_type="user", entity_name="alice")],
          ops=[e.OpData(key="producer_byte_rate", value=1048576.0, remove=False)]),
        e(entity=[e.EntityData(entity_type="user", entity_name=None),
                  e.EntityData(entity_type="client-id", entity_name=None)],
          ops=[e.OpData(key="request_percentage", value=25.0, remove=False)])],
        validate_only=False))
    assert [x.error_code for x in got.entries] == [0, 0]
    alice = read_entity(store, "users/alice")
    assert alice["producer_byte_rate"] == "1048576" and "SCRAM-SHA-256" in alice
    assert read_entity(store, "users/<default>/clients/<default>") == \
        {"request_percentage": "25.0"}
    security.add_user(store, "alice", "pw2")                 # keeps the quota
    assert read_entity(store, "users/alice")["producer_byte_rate"] == "1048576"

    c = DescribeClientQuotasRequest.ComponentData
    got = wire(world, DescribeClientQuotasRequest[1](
        components=[c(entity_type="user", match_type=2, match=None)], strict=False))
    assert got.error_code == 0
    assert [([(x.entity_type, x.entity_name) for x in entry.entity],
             [(v.key, v.value) for v in entry.values]) for entry in got.entries] == [
        ([("user", None), ("client-id", None)], [("request_percentage", 25.0)]),
        ([("user", "alice")], [("producer_byte_rate", 1048576.0)])]

    # librdkafka's AdminClient: KIP-554 over the wire, Kafka's codes per user
    admin = AdminClient({"bootstrap.servers": bootstrap(world)})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    done = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("bob", info, b"bob-password"),
        UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_256),
        UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)])
    assert done["bob"].result() is None and done["alice"].result() is None
    with pytest.raises(Exception) as failed:
        done["carol"].result()
    assert "RESOURCE_NOT_FOUND" in str(failed.value)
    described = admin.describe_user_scram_credentials(["alice", "bob"])
    mechs = {u: sorted((i.mechanism, i.iterations) for i in f.result().scram_credential_infos)
             for u, f in described.items()}
    assert mechs == {"alice": [(ScramMechanism.SCRAM_SHA_512, 4096)],
                     "bob": [(ScramMechanism.SCRAM_SHA_512, 8192)]}
    alice = read_entity(store, "users/alice")
    assert "SCRAM-SHA-256" not in alice and alice["producer_byte_rate"] == "1048576"
    assert security.delete_user(store, "alice")               # credentials go, quota stays
    assert read_entity(store, "users/alice") == {"producer_byte_rate": "1048576"}
    assert security.list_users(store) == {"bob": ("SCRAM-SHA-512",)}


def test_a_producer_over_its_quota_is_throttled_and_loses_nothing(world):
    world.create_topic("throttled", 1, 1)
    store, api = world.brokers[1].store, world.api(1)
    rewrite_entity(store, "clients/slow", lambda cfg: {**cfg, "producer_byte_rate": "200000"})
    wait_for(lambda: api.quota_tracker.quota("producer_byte_rate", "ANONYMOUS", "slow")[1]
             == 200000, what="the broker to pick the quota up from the change notification")
    stats, acked, failed = [], [], []
    producer = Producer({"bootstrap.servers": bootstrap(world), "client.id": "slow",
                         "linger.ms": 5, "batch.size": 65536, "statistics.interval.ms": 200,
                         "stats_cb": stats.append})

    def report(err, msg):
        (failed if err else acked).append(msg.offset() if not err else err)
    sent = 0
    for _ in range(3000):                       # 3 MB: over the 10-window allowance of 2 MB
        producer.produce("throttled", b"x" * 1000, on_delivery=report)
        sent += 1
        producer.poll(0)
    assert producer.flush(60) == 0
    producer.poll(0.5)                          # one more statistics report
    throttled = max(b["throttle"]["max"] for s in stats
                    for b in json.loads(s)["brokers"].values())
    assert throttled > 0
    assert failed == [] and sorted(acked) == list(range(sent))
    assert api.quota_tracker.quota("producer_byte_rate", "ANONYMOUS", "other")[1] is None
    assert QuotaEntity(None, "slow") in api.client_quotas()


class _Cluster:
    """What `rayka quotas` needs of a cluster: an Admin over its store."""

    def __init__(self, store):
        self.store = store

    def admin(self):
        from rayka.client.admin import Admin
        return Admin(self)


def test_rayka_quotas_command_speaks_kafka_configs(world, capsys):
    from rayka.cli import build_parser
    from rayka.ops import quotas_cli
    from replicas.errors import InvalidRequest
    cluster = _Cluster(world.brokers[1].store)

    def rayka(*argv):
        args = build_parser().parse_args(["quotas", *argv])
        assert quotas_cli.run(args, cluster) == 0
        return capsys.readouterr().out

    rayka("alter", "--entity-type", "users", "--entity-name", "dora", "--entity-type",
          "clients", "--entity-default", "--add-config",
          "producer_byte_rate=4096,request_percentage=12.5")
    rayka("alter", "--entity-type", "clients", "--entity-name", "web",
          "--add-config", "consumer_byte_rate=100")
    assert read_entity(cluster.store, "users/dora/clients/<default>") == \
        {"producer_byte_rate": "4096", "request_percentage": "12.5"}
    out = rayka("describe", "--entity-type", "users", "--entity-name", "dora")
    assert out.splitlines() == ["user=dora, client-id=<default>\t"
                                "producer_byte_rate=4096,request_percentage=12.5"]
    rayka("alter", "--entity-type", "users", "--entity-name", "dora", "--entity-type",
          "clients", "--entity-default", "--delete-config", "request_percentage")
    got = json.loads(rayka("describe", "--entity-type", "clients", "--json"))
    assert {"entity": {"client-id": "web"}, "quotas": {"consumer_byte_rate": 100.0}} in got
    assert {"entity": {"user": "dora", "client-id": "<default>"},
            "quotas": {"producer_byte_rate": 4096.0}} in got
    for bad in (["--entity-type", "users", "--entity-name", "x", "--add-config",
                 "producer_byte_rate=1.5"],
                ["--entity-type", "users", "--entity-name", "x", "--add-config", "nope=1"],
                ["--entity-type", "users", "--add-config", "producer_byte_rate=1"]):
        with pytest.raises(InvalidRequest):
            rayka("alter", *bad)


def test_dynamic_broker_configs_are_kafkas(world):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ConfigSource, ResourceType)
    from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest
    broker = world.brokers[1]
    admin = AdminClient({"bootstrap.servers": bootstrap(world)})

    def alter(name, *entries):
        """librdkafka for this broker; kafka-python for the default entity (librdkafka
        refuses an empty resource name)."""
        if name:
            res = ConfigResource(ResourceType.BROKER, name, incremental_configs=[
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET
                            if v is not None else AlterConfigOpType.DELETE)
                for k, v in entries])
            return admin.incremental_alter_configs([res])[res].result(30)
        r = IncrementalAlterConfigsRequest.AlterConfigsResource
        got = wire(world, IncrementalAlterConfigsRequest[1](validate_only=False, resources=[
            r(resource_type=4, resource_name="", configs=[
                r.AlterableConfig(name=k, config_operation=0 if v is not None else 1, value=v)
                for k, v in entries])]))
        assert [x.error_code for x in got.responses] == [0]

    alter("1", ("log.retention.ms", "123456"))
    alter("", ("log.retention.ms", "654321"), ("log.segment.bytes", "2097152"))
    assert read_entity(broker.store, "brokers/1") == {"log.retention.ms": "123456"}
    assert read_entity(broker.store, "brokers/<default>") == \
        {"log.retention.ms": "654321", "log.segment.bytes": "2097152"}
    wait_for(lambda: broker.topic_defaults.get("retention.ms") == "123456"
             and broker.topic_defaults.get("segment.bytes") == "2097152",
             what="the broker to apply its dynamic configs")

    res = ConfigResource(ResourceType.BROKER, "1")
    got = admin.describe_configs([res], request_timeout=30)[res].result(30)
    retention, segment = got["log.retention.ms"], got["log.segment.bytes"]
    assert (retention.value, retention.source) == \
        ("123456", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert (segment.value, segment.source) == \
        ("2097152", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert got["num.partitions"].is_read_only and not retention.is_read_only

    d = DescribeConfigsRequest.DescribeConfigsResource
    got = wire(world, DescribeConfigsRequest[4](include_synonyms=True,
                                                include_documentation=False, resources=[
        d(resource_type=4, resource_name="1", configuration_keys=["log.retention.ms"]),
        d(resource_type=4, resource_name="", configuration_keys=None)]))
    mine, default = got.results
    assert [(c.name, c.value, c.config_source,
             [(s.value, s.source) for s in c.synonyms]) for c in mine.configs] == [
        ("log.retention.ms", "123456", 2, [("123456", 2), ("654321", 3), ("604800000", 5)])]
    assert sorted((c.name, c.value, c.config_source) for c in default.configs) == [
        ("log.retention.ms", "654321", 3), ("log.segment.bytes", "2097152", 3)]

    with pytest.raises(KafkaException) as refused:
        alter("1", ("num.partitions", "3"))
    assert "dynamically" in str(refused.value)
    with pytest.raises(KafkaException):
        alter("1", ("log.segment.bytes", "not-a-number"))
    alter("1", ("log.retention.ms", None))
    alter("", ("log.retention.ms", None), ("log.segment.bytes", None))
    wait_for(lambda: "retention.ms" not in broker.topic_defaults
             and "segment.bytes" not in broker.topic_defaults,
             what="the broker to drop its dynamic configs")
