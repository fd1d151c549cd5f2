"""replicas/: a broker's storage and replication logic — the pure core of the data plane.

What lives here (one module each):
- records: Kafka RecordBatch v2 on the hot path (validate header/CRC, stamp base offset and
  leader epoch in place; batches stay bytes); legacy_records: message formats v0/v1 and
  their conversion to and from v2 (old producers and consumers);
- segment, log: the segmented log (`.log` + sparse `.index`), crash recovery, truncation;
  record_validation: a leader append's per-record checks with KIP-467 record errors;
  offsets: ListOffsets (by time, earliest, latest) and OffsetForLeaderEpoch answers;
  legacy_offsets: ListOffsets v0 (segment start offsets before a time);
- checkpoints, epoch_cache: Kafka's checkpoint files and the leader-epoch cache (KIP-101/279);
  deferred_writes: the disk writes taken under the broker's lock and done outside it (the
  high-watermark checkpoint, a rolled segment's fsyncs);
- partition_state, producer_state: one replica's leader/follower state (ISR, HW, fencing) and
  producer state (idempotence, transactions, KIP-890 verification guards);
- transactions, the log side: control (end-transaction marker batches), txn_index
  (`.txnindex`, the aborted transactions of a segment), producer_log (the producer state
  kept in step with the log: markers, the last stable offset, read_committed answers);
  visible: which fetched batches a consumer sees (no markers; read_committed drops aborted
  transactions), for the clients and the share-partitions alike;
- replica_manager (+ replica_types, metadata_cache): Kafka's ReplicaManager for one broker —
  LeaderAndIsr/StopReplica, produce (acks 0/1/all), ISR proposals; its reads in
  leader_reads (fetch with KIP-320, ListOffsets, CRC-checked reads) and its follower side
  in follower_side (fetch positions, epoch-based truncation, appends of the leader's
  batches), DeleteRecords and the low watermark in record_deletion; log_dirs: the
  broker's log directories (log.dirs, KIP-112's offline directories, where a new log
  goes);
  replica_selector: the preferred read replica a leader names to a consumer (KIP-392);
- errors: Kafka's error-code table (name, number, retriable) and the typed errors;
  config_keys: Kafka config keys dotted or underscored; dispatch: the state machines'
  `process_<event>` dispatcher. These three are Kafka's vocabulary for every layer.
The log lifecycle: retention (retention by time and size, the log start offset), time_index
(`.timeindex`), compression (codecs, the leader's recompression), cleaner + cleaner_manager
(compaction: key map, segment rewrite, `.cleaned`/`.swap` crash-safe swap), open_files (the
broker's LRU of open segment files).

May import: the stdlib and the record codec (aiokafka, crc32c, cramjam). Never ray, kazoo,
pyspark, nor any other rayka room: everything else imports replicas, never the reverse.

Rules: plain, synchronous, deterministic Python. Time comes in as an argument (a clock),
never from `time.time()`; file I/O is the only I/O, and persistence happens before anything
that depends on it is answered. Methods return results and effects; the actor shell
(actors/broker.py) carries them out.
"""
