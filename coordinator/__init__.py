"""coordinator/: Kafka's group coordinator, a pure state machine.

What lives here: the per-group state machine (Empty, PreparingRebalance, CompletingRebalance,
Stable, Dead; valid previous states as data), JoinGroup/SyncGroup/Heartbeat/LeaveGroup,
static membership, generation-checked offset commits, transactional offset commits (KIP-98,
KIP-447: pending until their producer's marker), and the `__consumer_offsets` key/value
records (Kafka's schemas) with load/unload on partition leadership. Kafka keeps its
coordinator in a module of its own too (group-coordinator).
- coordinator: `GroupCoordinator`, the entry (`process(event)`): every request, the
  join/sync phases and the timers (Kafka's GroupCoordinator);
- storage: `GroupMetadataManager`, the cache of groups, the owned offsets partitions,
  offsets and appends (Kafka's GroupMetadataManager);
- group, states: one group's members and offsets, the group states and their transitions;
- txn_offsets: one group's pending transactional offsets per producer, until the marker;
- records, messages: the `__consumer_offsets` records, the events, results and effects;
- config, error_codes: Kafka's coordinator configs, how failed appends are answered;
  group_config: per-group configs (consumer.*, share.*: names, bounds, defaults).
- consumer_requests: KIP-848 consumer groups in `GroupCoordinator` (ConsumerGroupHeartbeat,
  ConsumerGroupDescribe, conversions, offset checks); consumer_group, consumer_assignors,
  consumer_reconciliation: one consumer group and its heartbeat rules, the server-side
  assignors (uniform, range), and a member's reconciliation to its target assignment with
  the group's partition-epoch ledger; consumer_records: its `__consumer_offsets` records
  (key versions 3-8).

May import: the stdlib and replicas/ (record codec, errors). Never ray, kazoo, sockets,
nor protocol/ (the protocol calls the coordinator, not the reverse).

Rules: events in, effects out (records to append with acks=all, answers to send, timers);
the clock is injected; the broker actor performs the effects.
"""
