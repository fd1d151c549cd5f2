"""rayka/client/: what a Ray driver uses to talk to a rayka cluster.

- admin: Admin — topics, configs, reassignment, preferred elections, controller facts
  (Kafka's AdminClient over rayka's ZooKeeper layout);
- producer, accumulator, partitioner: Kafka's producer (batches per partition, murmur2 keys,
  sticky keyless, idempotence, retries) — the accumulator and partitioner are pure;
- consumer: assign/subscribe, fetch from leaders below the HW, commit offsets; fetcher
  (positions, buffers, long-polls per leader), group and membership (the group member's
  shell and its pure state machine), consumer_membership (the pure member of KIP-848's
  consumer protocol); columns and fastdecode (record batches straight to
  Arrow columns);
- sender, futures: the producer's pure in-flight bookkeeping (Kafka's retry rules) and
  its per-record futures; transaction_manager: a transactional producer's pure state
  (Kafka's TransactionManager);
- share_consumer: ShareConsumer, a member of a KIP-932 share group (records acquired,
  acknowledged accept / release / reject, delivery counts);
- assignors, consumer_protocol: Kafka's partition assignors and the ConsumerProtocol bytes
  (subscriptions, assignments) group members exchange — both pure;
- metadata: which broker leads which partition, at which leader epoch;
- types: the public record types (RecordMetadata, ConsumerRecord, TopicDescription...).

May import: ray, actors/ (names only), controller/ (pure rules and the store's errors),
coordinator/ (its messages: the native door's requests), share/ (the share-group requests),
replicas/ (records codec, errors, visible: which fetched batches a consumer returns). Never rayka.cluster, ops, chaos or cli (they sit above):
client objects take the cluster they talk to as an argument.

Rules: errors are Kafka's typed errors; batch calls answer per item; nothing blocks on a
Ray call while holding a lock that `send()` callers need (see NOTES for where it still does).
"""
