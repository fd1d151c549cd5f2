"""Replication over a secured listener on a real cluster (real Ray, the real ZooKeeper,
unmodified librdkafka), configured as README's recipe: followers fetch over SASL_SSL as the
SCRAM-SHA-512 user `broker`, named by Kafka's per-listener key
`listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config`, with Kafka's AclAuthorizer on.

Until that user exists the leaders refuse the followers, and `rayka status` says so; once it
is added the followers replicate without a restart, and acks=all records go through a
broker kill with nothing lost."""

from __future__ import annotations

import logging
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer

import rayka
from rayka.cli import status_of
from rayka.client.admin import wait_for
from tests.certs import make_certs
from tests.ray_cluster import ray_session  # noqa: F401  (fixture)

pytestmark = pytest.mark.ray
TIMEOUT_S = 60
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="broker" password="broker-secret";')


def recipe(certs) -> dict:
    """README's secured replication, as start_local keyword arguments."""
    return {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": JAAS,
            "super.users": "User:admin;User:broker",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            # the followers' TLS client checks the leaders' certificate against this CA
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca),
            **certs.broker_config()}


def admin_client(cluster, certs) -> dict:
    return {"bootstrap.servers": cluster.bootstrap_servers("SASL_SSL"),
            "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "admin", "sasl.password": "admin-secret",
            "ssl.ca.location": str(certs.ca)}


def refused_followers(cluster) -> list[dict]:
    return status_of(cluster)["refused_followers"]


def test_the_readme_recipe_replicates_over_sasl_ssl_through_a_broker_kill(
        ray_session, tmp_path, caplog):
    certs = make_certs(tmp_path)
    caplog.set_level(logging.WARNING, logger="rayka.cluster")
    cluster = rayka.start_local(name=f"r{uuid.uuid4().hex[:8]}", brokers=3, controllers=1,
                                data_dir=str(tmp_path / "data"), replica_lag_time_max_ms=3000,
                                **recipe(certs))
    try:
        # the broker user is a super user: no warning at start, though it does not exist yet
        assert not [r for r in caplog.records if r.name == "rayka.cluster"]
        admin = cluster.admin()
        admin.add_user("admin", "admin-secret")
        admin.create_topic("secured", 2, 3, config={"min.insync.replicas": "2"})
        refused = wait_for(lambda: refused_followers(cluster), TIMEOUT_S,
                           "followers refused until their SASL user exists")
        assert {r["principal"] for r in refused} == {"User:broker"}
        assert {r["listener"] for r in refused} == {"SASL_SSL"}
        assert {(r["error"], r["code"]) for r in refused} == \
            {("SASL_AUTHENTICATION_FAILED", 58)}, refused

        admin.add_user("broker", "broker-secret", mechanisms=["SCRAM-SHA-512"])
        wait_for(lambda: not refused_followers(cluster) and
                 not status_of(cluster)["under_replicated"], TIMEOUT_S,
                 "every follower replicating over SASL_SSL once the user exists")

        p = Producer({**admin_client(cluster, certs), "acks": "all",
                      "enable.idempotence": True, "message.timeout.ms": 60000})
        acked, failed = [], []

        def report(err, msg):
            (failed if err else acked).append(err or msg.value())
        sent = 0

        def send(n):
            nonlocal sent
            for _ in range(n):
                p.produce("secured", f"v{sent}".encode(), partition=sent % 2,
                          on_delivery=report)
                sent += 1
                p.poll(0)
        send(1000)
        p.flush(TIMEOUT_S)
        leader = next(x for x in admin.describe_topic("secured") if x.partition == 0).leader
        cluster.kill_broker(leader, restart=True)
        for _ in range(40):             # records keep coming while the broker is down
            send(50)
            time.sleep(0.05)            # a paced producer: 1,000 records/s
        p.flush(TIMEOUT_S)
        assert not failed and len(acked) == sent == 3000, failed[:3]
        wait_for(lambda: not status_of(cluster)["under_replicated"], TIMEOUT_S,
                 f"broker {leader} back in every ISR")

        c = Consumer({**admin_client(cluster, certs), "group.id": "secured-readers",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe(["secured"])
        got = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < sent and time.monotonic() < deadline:
            for m in c.consume(sent - len(got), timeout=1):
                assert m.error() is None, m.error()
                got.append(m.value())
        c.close()
        assert sorted(got) == sorted(acked) and len(set(got)) == sent
    finally:
        cluster.shutdown()
