"""Client quotas on a real rayka cluster (real Ray, the real ZooKeeper, unmodified
librdkafka): a SCRAM user created over the wire (AlterUserScramCredentials, KIP-554) logs in
on a SASL_PLAINTEXT listener, a user quota set with rayka's Admin reaches the broker actor
through the change notification, and the user's producer over it is throttled
(throttle_time_ms > 0 in its answers) with every record delivered once, in order. The
measured rate against the quota is bench/quota_bench.py's (a loaded 2-core machine makes a
±20 % assertion here flaky)."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

import rayka
from protocol.quotas import QuotaEntity
from tests.ray_cluster import ray_session  # noqa: F401  (fixture)

pytestmark = [pytest.mark.ray, pytest.mark.timeout(180)]
PASSWORD = "dora-secret"


@pytest.fixture(scope="module")
def cluster(ray_session, tmp_path_factory):
    c = rayka.start_local(name=f"q{uuid.uuid4().hex[:8]}", brokers=1, controllers=1,
                          data_dir=str(tmp_path_factory.mktemp("rayka")),
                          listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                          **{"offsets.topic.replication.factor": 1})
    try:
        yield c
    finally:
        c.shutdown()


def test_a_scram_user_over_its_quota_is_throttled_and_loses_nothing(cluster):
    plain = cluster.bootstrap_servers()
    admin = AdminClient({"bootstrap.servers": plain})
    done = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "dora", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), PASSWORD.encode())])
    assert done["dora"].result(30) is None
    described = admin.describe_user_scram_credentials(["dora"])["dora"].result(30)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_256, 4096)]
    cluster.admin().alter_client_quotas(user="dora", set={"producer_byte_rate": 200_000})
    assert cluster.admin().describe_client_quotas(user="dora", strict=True) == \
        [(QuotaEntity("dora", None), {"producer_byte_rate": 200000.0})]
    cluster.admin().create_topic("metered", 1, 1, timeout_s=60)

    stats, acked, failed = [], [], []
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers("SASL_PLAINTEXT"),
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-256",
                         "sasl.username": "dora", "sasl.password": PASSWORD,
                         "linger.ms": 5, "batch.size": 65536, "statistics.interval.ms": 200,
                         "stats_cb": stats.append})

    def report(err, msg):
        (failed if err else acked).append(err or msg.offset())
    n = 3000                                      # 3 MB: over the 10-window allowance of 2 MB
    for i in range(n):
        producer.produce("metered", str(i).encode().ljust(1000, b"."), on_delivery=report)
        producer.poll(0)
    assert producer.flush(120) == 0
    producer.poll(0.5)
    throttle = max(b["throttle"]["max"] for s in stats
                   for b in json.loads(s)["brokers"].values())
    assert throttle > 0
    assert failed == [] and sorted(acked) == list(range(n))

    consumer = Consumer({"bootstrap.servers": plain, "group.id": "unused",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("metered", 0, 0)])
    values = []
    while len(values) < n:
        batch = consumer.consume(1000, 10)
        assert batch, f"read {len(values)} of {n}"
        values += [int(m.value().rstrip(b".")) for m in batch if not m.error()]
    consumer.close()
    assert values == list(range(n))
