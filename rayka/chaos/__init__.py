"""rayka/chaos/: attack a live cluster, record what clients saw, let a checker judge.

- faults: FaultInjector — broker/controller kills with and without restart, SIGSTOP zombies,
  real ZooKeeper session expiry, ensemble server stop/leader kill, segment-tail corruption,
  controlled shutdown, node kill, and disk faults on a broker's faultfs mount (full disk,
  EIO, power loss of one broker or all); public APIs only (never ray._private);
- workload: concurrent producers, consumers and samplers writing the history;
- history: the append-only JSONL history;
- checker, disk: the chaos invariants proved from the history and the brokers' files;
- runner: `rayka chaos` (seeded schedule, the isr-of-one scenario);
- groups, group_checker: consumer-group members under faults and the group invariants
  (no partition owned twice in a generation, commits only by owners, nothing skipped);
- shares, share_checker: share-group (KIP-932) members under faults and their invariants
  (every acknowledged record accepted exactly once, delivery counts within the limit);
- txns, txn_checker: transactional writers, a consume-transform-produce pipeline and
  read_committed readers under faults, and Jepsen's transactional invariants (nothing
  aborted read, commits atomic, exactly-once pipeline, no hanging transaction, zombies
  fenced);
- faultfs, faultfs_server: a FUSE passthrough for the brokers' log directories that fails
  operations with EIO or ENOSPC, freezes them, or loses power (every write not yet fsynced
  dropped); faultfs is the harness's side, faultfs_server the file system in its process.

May import: rayka (cluster, client, ops.procs, errors), actors/, controller/, replicas/,
coordinator/ and transactions/ (their partition hashing).
Never rayka.cli (above) nor pipeline/.

Rules: every verdict comes from recorded histories and on-disk logs, never by eye; runs are
seeded and replayable; teardown always stops the ZooKeeper servers and Ray it started, by pid.
"""
