"""coordinator/: Kafka's group coordinator, a pure state machine.

What lives here (coordinator.py is the entry, `process(event)`; states.py, group.py,
rebalance.py, storage.py, records.py, messages.py, config.py, error_codes.py): the per-group state machine (Empty, PreparingRebalance, CompletingRebalance,
Stable, Dead; valid previous states as data), JoinGroup/SyncGroup/Heartbeat/LeaveGroup,
static membership, generation-checked offset commits, and the `__consumer_offsets` key/value
records (Kafka's schemas) with load/unload on partition leadership. Kafka keeps its
coordinator in a module of its own too (group-coordinator).

May import: the stdlib and replicas/ (record codec, errors). Never ray, kazoo, sockets,
nor protocol/ (the protocol calls the coordinator, not the reverse).

Rules: events in, effects out (records to append with acks=all, answers to send, timers);
the clock is injected; the broker actor performs the effects.
"""
