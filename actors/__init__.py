"""actors/: the shells around the pure core (the broker, the controller candidate) and the
Ray actors that carry them.

- broker: Broker — one broker as a plain object (no Ray): wraps a replicas.ReplicaManager,
  registers in ZooKeeper, takes the controller's requests and the native clients'
  produce/fetch; broker_config splits its settings;
- broker_actor: BrokerActor — the Broker in a Ray actor (thread pools per kind of call)
  and its Ray host (node, controller calls, metrics);
- listener: the broker's one asyncio event loop (EventLoop) and its Kafka listeners: every
  client connection, answered in request order with pipelining, long-polls parked without
  blocking anything; the loop also runs the follower fetchers and the timers;
- fetcher, broker_link: replication over Kafka's Fetch — one coroutine per leader broker
  on one connection (authenticated like a client on a secured inter-broker listener) with
  a KIP-227 fetch session; OffsetForLeaderEpoch for truncation on the same connection;
- purgatory, produce: Kafka's DelayedFetch and DelayedProduce — parked fetches completed
  by appends and high-watermark moves, acks=all produces completed by the HW; fetch: the
  broker's reads for a fetch and for a parked one woken; delete_records: Kafka's
  DelayedDeleteRecords, DeleteRecords answered once the followers' log starts passed it;
- completion: the settle-once answer both of them and the group calls wait on;
- timers: deadlines on the event loop (fetch max wait, produce timeouts);
- kafka_api: the broker side of protocol/'s BrokerApi, on the broker's own methods;
- security: the broker's security configs, its users and ACLs kept current from ZooKeeper,
  the sessions of its listeners; security_store: reading and writing users and ACLs in
  ZooKeeper in Kafka's formats (the broker, the wire's ACL APIs, rayka's Admin); tls_context: Kafka's ssl.* configs to an SSLContext; tls: TLS over memory
  BIOs for the listener;
- config_store: Kafka's dynamic entity configs in ZooKeeper (client quotas under
  /config/users and /config/clients), rewritten keeping other writers' keys;
  dynamic_config: the broker's quotas kept current from /config/changes;
  broker_loggers: the broker's Python loggers as Kafka's BROKER_LOGGER config resource;
- coordinator_host: the shell around a pure coordinator (lock, waiters, appends, ticker,
  load/unload); group_host runs coordinator/ for the __consumer_offsets partitions this
  broker leads, txn_host runs transactions/ for its __transaction_state partitions;
- share_host: share groups (share/): their membership on the group's coordinator, share
  sessions and share-partitions on partition leaders, lock and session timers;
  share_state_host runs share/coordinator.py for the __share_group_state partitions this
  broker leads (share-partitions' persisted state); share_offsets answers the share-group
  offsets admin APIs on the group's coordinator, asking the leaders and the state's hosts;
- txn_markers: the transaction coordinator's WriteTxnMarkers to partition leaders;
  txn_verification: a leader's KIP-890 check with the coordinator before a transactional
  producer's first append; peer_links: connections to other brokers for both;
- log_cleaner: the compaction thread (replicas/cleaner_manager.py decides);
- controller_actor, channel: ControllerActor — one controller candidate and its per-broker
  request senders (Kafka's ControllerChannelManager over Ray calls);
- cluster_host: the detached actor that holds a named cluster's facts and owns the embedded
  ZooKeeper server; it also keeps the last Spark reads' task reports past their drivers;
- metrics: rayka's Ray metrics (gauges; names listed in docs/grafana/).
- gc_pauses: the cyclic collector's pauses of a broker actor's process, kept for the
  benchmark to put beside a JVM's GC log.
- topic_io: Kafka's per-topic bytes in from producers and out to consumers, per broker.

May import: ray, replicas/, controller/ (kazoo only through controller.zookeeper), protocol/,
coordinator/, transactions/. Never rayka/ or pipeline/ (they sit above).

Rules: shells perform the effects the core returns, persist before send; leadership is
fenced by ZooKeeper epochs, never inferred from Ray liveness; a restarted actor recovers
from disk and ZooKeeper (Ray re-runs `__init__`, nothing else survives).
"""
