"""A (re)started broker serves Kafka clients only once it knows the cluster (actors/broker.py):
its listeners are bound from the start (the ports it registers) but refuse connections until
the controller's first UpdateMetadata; then the first Metadata answer already lists every
topic, where a broker answering from its empty cache said "unknown topic" (kcat gave up on
it right after a broker kill).

Real brokers and a real controller over a real ZooKeeper (tests/broker_world.py), no Ray;
the controller's requests to one broker are held back by a gate to open the window."""

from __future__ import annotations

import socket
import threading

import pytest
from confluent_kafka.admin import AdminClient

from tests.broker_world import InProcessCluster

pytestmark = [pytest.mark.zk, pytest.mark.timeout(120)]


class GatedCluster(InProcessCluster):
    """The controller's requests to the brokers in `held` wait until they are released."""

    def __init__(self, *args, **kwargs):
        self.held: set[int] = set()
        self.released = threading.Condition()
        super().__init__(*args, **kwargs)

    def hold(self, broker_id: int) -> None:
        with self.released:
            self.held.add(broker_id)

    def release(self, broker_id: int) -> None:
        with self.released:
            self.held.discard(broker_id)
            self.released.notify_all()

    def _deliver(self, broker_id: int, request) -> dict:
        with self.released:
            self.released.wait_for(lambda: broker_id not in self.held, timeout=60)
        return super()._deliver(broker_id, request)


def refuses(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def test_a_restarted_broker_is_refused_until_it_knows_the_cluster(zk_server, tmp_path):
    world = GatedCluster(zk_server.connect_string, tmp_path, broker_ids=(1, 2))
    try:
        world.create_topic("known", 2, 2)
        port = world.brokers[2].listeners[0].port
        assert not refuses(port)

        world.hold(2)
        world.brokers[2].shutdown()
        restarted = world.start_broker(2)
        assert restarted.listeners[0].port == port          # clients find it where it was
        assert refuses(port) and not restarted.listeners[0].serving

        world.release(2)
        world.wait_for(lambda: restarted.listeners[0].serving and not refuses(port), 30,
                       "broker 2 serving after the controller's UpdateMetadata")
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        topics = admin.list_topics(timeout=10).topics      # its very first Metadata answer
        assert "known" in topics and topics["known"].error is None
        assert sorted(topics["known"].partitions) == [0, 1]
    finally:
        world.release(2)
        world.close()


def test_an_offline_partition_is_fetched_from_nobody(zk_server, tmp_path):
    """A follower told that its partition has no leader (-1: no eligible leader alive)
    keeps no fetcher for it, as Kafka's makeFollowers, and fetches again once a leader is
    named."""
    world = InProcessCluster(zk_server.connect_string, tmp_path, broker_ids=(1, 2))
    try:
        world.create_topic("offline", 1, 2)
        follower = world.brokers[2] if world.brokers[1].rm.metadata.partitions[
            ("offline", 0)].leader == 1 else world.brokers[1]
        leader = 3 - follower.id
        with follower.lock:
            follower._move_fetchers([], {("offline", 0): -1})
            assert -1 not in follower.fetchers
            assert not any(("offline", 0) in f.partitions for f in follower.fetchers.values())
            follower._move_fetchers([], {("offline", 0): leader})
            assert ("offline", 0) in follower.fetchers[leader].partitions
    finally:
        world.close()
