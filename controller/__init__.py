"""controller/: Kafka's ZooKeeper-mode controller (KafkaController.scala,
ControllerChannelManager.scala).

The pure core (this package's top-level modules):
- controller: the `Controller` — election, failover, resignation and the handler of every
  event (brokers, topics, configs, ISR changes, broker requests, admin operations);
- events, event_loop: every event as a frozen dataclass, one queue, one thread;
- context: the controller's picture of the cluster, loaded from ZooKeeper on failover;
- states, partition_state_machine, replica_state_machine: the state machines, with their
  valid-previous-states tables as data;
- leader_election, leader_isr: Kafka's election strategies and conditional leader/ISR writes;
- requests, broker_requests: LeaderAndIsr/UpdateMetadata/StopReplica batches, and what brokers
  ask of the controller (AlterPartition, controlled shutdown);
- topic_deletion, reassignment, rebalance, scheduler, topic_config, assignment: topic
  deletion, configs, reassignment, preferred elections;
- topic_admin: admin changes to topics planned before any write (create, add partitions);
- layout: Kafka's ZooKeeper data layout (paths, records, JSON codecs; pure);
- features: the features rayka supports and Kafka's rules for changing the cluster's
  finalized levels (UpdateFeatures; pure);
- store_api: what the core needs from a store (a Protocol) and the store's outcome types;
- journal: the active controller's bounded journal of what it did (terms, brokers, leader
  and ISR changes) for a timeline, read incrementally by sequence number.

The I/O subpackage: `controller.zookeeper` (the kazoo store, the election and fenced writes,
and the launcher of the real ZooKeeper server).

May import: the stdlib, replicas/ (errors), and kazoo ONLY inside controller/zookeeper/.
Never ray, pyspark, raydp, actors/, rayka/, pipeline/.

Rules: handlers are `process_<event>`, lifecycle hooks `on_<thing>`, conditional steps
`maybe_<thing>`; every ZooKeeper write of an active controller is fenced by the controller
epoch; the core takes a clock (tests run it without sleeping).
"""
