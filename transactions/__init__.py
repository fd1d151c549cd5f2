"""transactions/: Kafka's transaction coordinator, a pure state machine.

What lives here: the per-transactional-id state machine (Empty, Ongoing, PrepareCommit,
PrepareAbort, CompleteCommit, CompleteAbort, Dead, PrepareEpochFence; valid previous states as
data), InitProducerId with epoch bumps, fencing and producer id rotation (KIP-360),
AddPartitionsToTxn (and its KIP-890 verification), AddOffsetsToTxn, EndTxn with the markers
and the completion that follow it, DescribeTransactions, ListTransactions, the timeout abort
and transactional id expiry, and the `__transaction_state` key/value records (Kafka's
schemas) with load/unload on partition leadership. A room of its own beside the group
coordinator (coordinator/), as Kafka keeps it (transaction-coordinator, and
core/src/main/scala/kafka/coordinator/transaction in 3.8).
- coordinator: `TransactionCoordinator`, the entry (`process(event)`): every request, the
  timeout abort and the expiry ticks (Kafka's TransactionCoordinator);
- storage: `TransactionStateManager`, the cache per `__transaction_state` partition, appends,
  loading and unloading, the timed-out and expired lists (Kafka's TransactionStateManager);
- markers: the transactions waiting for their markers and the Complete* write that ends
  them (the coordinator's half of Kafka's TransactionMarkerChannelManager);
- metadata, states: one transactional id's metadata with its prepare/complete transitions,
  the states and their transitions;
- records, messages: the `__transaction_state` records and the partition hash, the events,
  results and effects;
- config, error_codes: Kafka's transaction configs, how failed appends are answered and
  which error an old client gets.

May import: the stdlib and replicas/ (errors, dispatch, config keys). Never ray, kazoo,
sockets, threads, the clock, nor coordinator/ or protocol/ (the shells call this room, not
the reverse).

Rules: events in, effects out (records to append with acks=all, answers to send, markers to
write); the clock and the producer id generator are injected; the broker's shell performs
the effects and feeds back their outcomes (AppendDone, MarkersWritten).
"""
