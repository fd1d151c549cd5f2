"""Multi-node deployment on one machine, as `ray up` would give it: a Ray cluster of a head
(`rayka_control`) and three worker nodes (`rayka_broker: 1` each), a 3-server ZooKeeper
ensemble on loopback, and the `rayka` command run as a user runs it (`--address`). One
broker lands on each worker node; a whole node is killed (its raylet and workers) while
acks=all records flow; the other brokers take over and nothing acknowledged is lost; a
fourth node and `rayka start --brokers 4` scale the cluster out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from rayka.client.admin import wait_for
from controller.zookeeper.server import ZooKeeperEnsemble

pytestmark = pytest.mark.ray
RAYKA = os.path.join(os.path.dirname(sys.executable), "rayka")
BROKER_NODE = {"num_cpus": 1, "resources": {"rayka_broker": 1}}


def run(env, *args, stdin=None, timeout=240):
    proc = subprocess.run([RAYKA, *args], env=env, input=stdin, capture_output=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return proc


@pytest.fixture
def deployment(tmp_path):
    from ray.cluster_utils import Cluster
    ensemble = ZooKeeperEnsemble(3).start()
    ray_cluster = Cluster(initialize_head=True,
                          head_node_args={"num_cpus": 1, "resources": {"rayka_control": 100}})
    try:
        workers = [ray_cluster.add_node(**BROKER_NODE) for _ in range(3)]
        ray_cluster.wait_for_nodes()
        env = dict(os.environ, RAYKA_HOME=str(tmp_path / "home"))
        env.pop("RAY_ADDRESS", None)
        yield env, ray_cluster, workers, ensemble
    finally:
        ray_cluster.shutdown()
        ensemble.stop()


def status(env, n):
    return json.loads(run(env, "status", "--json", *n).stdout)


def test_one_broker_per_node_and_a_node_killed_loses_nothing(deployment, tmp_path):
    env, ray_cluster, workers, ensemble = deployment
    n = ["--name", f"mn{uuid.uuid4().hex[:6]}", "--address", ray_cluster.address]
    run(env, "start", "--brokers", "3", "--zookeeper", ensemble.connect_string,
        "--data-dir", str(tmp_path / "data"), "--config", "replica.lag.time.max.ms=3000", *n)
    s = status(env, n)
    worker_ids = {w.node_id for w in workers}
    nodes = {b["id"]: b["node_id"] for b in s["brokers"]}
    assert set(nodes.values()) == worker_ids                  # one broker on each worker node
    assert s["controller"]["node_id"] == ray_cluster.head_node.node_id

    run(env, "topics", "create", "events", "--partitions", "6", "--replication-factor", "3",
        "--config", "min.insync.replicas=2", *n)
    first = b"".join(b"a-%d\n" % i for i in range(3000))
    assert b"3000 records acknowledged" in run(env, "produce", "events", "--no-progress", *n,
                                               stdin=first).stderr

    victim_broker = 1
    victim = next(w for w in workers if w.node_id == nodes[victim_broker])
    ray_cluster.remove_node(victim)                           # raylet, workers, broker: gone
    second = b"".join(b"b-%d\n" % i for i in range(3000))
    assert b"3000 records acknowledged" in run(env, "produce", "events", "--no-progress", *n,
                                               stdin=second).stderr
    led_by_victim = [p for p in run(env, "topics", "describe", "events", *n).stdout.splitlines()
                     if b"Leader: 1\t" in p]
    assert led_by_victim == []                                # the others took over

    ray_cluster.add_node(**BROKER_NODE)                       # a replacement node: broker 1 back
    wait_for(lambda: not status(env, n)["under_replicated"]
             and all(b["alive"] for b in status(env, n)["brokers"]), 180,
             "broker 1 on the new node, every ISR full")
    out = run(env, "consume", "events", "--max-records", "6000", "--timeout-ms", "30000", *n).stdout
    values = out.split()
    assert sorted(values) == sorted(first.split() + second.split())   # all, once
    new_nodes = {b["id"]: b["node_id"] for b in status(env, n)["brokers"]}
    assert new_nodes[victim_broker] not in worker_ids         # it runs on the replacement node

    # scale out: a fourth node, `rayka start --brokers 4` adds broker 4 there; partitions move
    extra = ray_cluster.add_node(**BROKER_NODE)
    run(env, "start", "--brokers", "4", *n)
    s = status(env, n)
    assert [b["id"] for b in s["brokers"] if b["alive"]] == [1, 2, 3, 4]
    assert {b["id"]: b["node_id"] for b in s["brokers"]}[4] == extra.node_id
    moved = run(env, "topics", "reassign", "events", "--assignment", "0=4,2,3", *n).stdout
    assert b"events-0\treplicas 4,2,3\t" in moved
    wait_for(lambda: b"events-0\tleader 4" in run(env, "topics", "elect-leaders", "events",
                                                    *n).stdout
             or b"Leader: 4\t" in run(env, "topics", "describe", "events", *n).stdout.split(
                 b"\n")[1], 60, "broker 4 leading events-0")
    # everything still there, once, with events-0 served by its new replicas (un-keyed lines
    # go to sticky partitions: events-0 may hold none, so read the whole topic)
    out = run(env, "consume", "events", "--max-records", "6000", "--timeout-ms", "30000", *n).stdout
    assert sorted(out.split()) == sorted(first.split() + second.split())
    run(env, "stop", *n)
