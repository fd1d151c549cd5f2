"""controller/zookeeper/: everything that talks to ZooKeeper, and nothing else does.

- client: the kazoo session under the store — connection, reads, watches, the store's errors;
- multi: the multi-op engine (units of ops in checked, re-committed multis, per-item outcomes);
- fenced: the controller election (one multi, Kafka's
  KafkaZkClient.registerControllerAndIncrementControllerEpoch) and the fenced write API;
- store: `ZkStore`, the facade: Kafka's znodes under the chroot `/rayka/<cluster>`, broker
  registration, admin paths, consumer offsets, SCRAM users and ACL znodes with their change
  notifications; `expire_session` (a REAL server-side expiry);
- server: the launcher of the real ZooKeeper server (Debian's) or a loopback ensemble, used
  by the embedded default (actors/cluster_host.py), `rayka zookeeper`, chaos and the tests.

May import: kazoo (only here in the whole project), the stdlib, controller's pure modules
(layout, store_api, topic_config) and replicas/ (errors). Never ray.

Rules: the layout (paths, JSON) is controller/layout.py's, byte for byte Kafka's; batch
calls answer per item; a failed fence raises ControllerMovedError and wrote nothing;
processes are started and stopped by pid, servers bind loopback unless told otherwise.
"""
