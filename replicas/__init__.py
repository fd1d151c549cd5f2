"""replicas/: a broker's storage and replication logic — the pure core of the data plane.

What lives here (one module each):
- records: Kafka RecordBatch v2 on the hot path (validate header/CRC, stamp base offset and
  leader epoch in place; batches stay bytes);
- segment, log: the segmented log (`.log` + sparse `.index`), crash recovery, truncation;
- checkpoints, epoch_cache: Kafka's checkpoint files and the leader-epoch cache (KIP-101/279);
- partition_state, producer_state: one replica's leader/follower state (ISR, HW, fencing) and
  idempotent-producer state;
- replica_manager (+ replica_types, metadata_cache): Kafka's ReplicaManager for one broker —
  LeaderAndIsr/StopReplica, produce (acks 0/1/all), fetch (KIP-320), ISR proposals;
- errors: Kafka's error names and codes, shared by every layer.
The log lifecycle: retention (retention by time and size, the log start offset), time_index
(`.timeindex`), compression (codecs, the leader's recompression), cleaner + cleaner_manager
(compaction: key map, segment rewrite, `.cleaned`/`.swap` crash-safe swap), open_files (the
broker's LRU of open segment files), follower_side (the replica manager's follower half).

May import: the stdlib and the record codec (aiokafka, crc32c, cramjam). Never ray, kazoo,
pyspark, nor any other rayka room: everything else imports replicas, never the reverse.

Rules: plain, synchronous, deterministic Python. Time comes in as an argument (a clock),
never from `time.time()`; file I/O is the only I/O, and persistence happens before anything
that depends on it is answered. Methods return results and effects; the actor shell
(actors/broker_actor.py) carries them out.
"""
