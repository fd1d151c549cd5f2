"""actors/: the Ray actor shells around the pure core.

- broker_actor: BrokerActor — one broker: wraps a replicas.ReplicaManager, registers in
  ZooKeeper, serves produce/fetch/control calls in separate concurrency groups;
- fetcher: follower fetchers, one thread per (this broker, leader broker) pair;
- controller_actor, channel: ControllerActor — one controller candidate and its per-broker
  request senders (Kafka's ControllerChannelManager over Ray calls);
- cluster_host: the detached actor that holds a named cluster's facts and owns the embedded
  ZooKeeper server;
- metrics: rayka's Ray metrics (gauges; names listed in docs/grafana/).
Reserved (issue 15): `listener.py`, the Kafka socket listener inside the BrokerActor's
process (accept loop, per-connection ordering, long-poll without blocking other
connections); it hands frames to protocol/ and results back to the socket, nothing more.

May import: ray, replicas/, controller/ (kazoo only through controller.zookeeper), protocol/,
coordinator/. Never rayka/ or pipeline/ (they sit above).

Rules: shells perform the effects the core returns, persist before send; leadership is
fenced by ZooKeeper epochs, never inferred from Ray liveness; a restarted actor recovers
from disk and ZooKeeper (Ray re-runs `__init__`, nothing else survives).
"""
