"""Kafka's ReplicaManager for ONE broker: synchronous, pure core (no Ray, no ZK, no clock).

The Ray actor shell calls it from one thread and carries out the effects it returns.
Kafka 3.8 (ZK mode) names are cited; Kafka's Partition.scala, ReplicaManager.scala and
LogSegment.scala are the reference.

Files: `<log dir>/<topic>-<partition>/` (a `Log` with its `leader-epoch-checkpoint`),
`<log dir>/replication-offset-checkpoint` (HWs), `recovery-point-offset-checkpoint`, for
each of the broker's log directories (`log_dirs`, Kafka's log.dirs; default the data dir).
Log directories (replicas/log_dirs.py; Kafka's KIP-112, ReplicaManager.handleLogDirFailure):
- A new replica's log goes to the online directory with the fewest logs.
- An OSError met while reading or writing a directory's files (ENOSPC, EIO, ...), or a
  corrupt batch read from it, takes that directory offline at once: its partitions stop
  being hosted (their descriptors closed, nothing more written), their pending acks=-1
  produces are answered KAFKA_STORAGE_ERROR (56), and the call that met the error answers
  56 for its partition (a follower-side call raises KafkaStorageError). Every later request
  naming such a partition is answered 56 (Kafka's HostedPartition.Offline): produce, fetch,
  ListOffsets, LeaderAndIsr, StopReplica, DeleteRecords. The shell hears of each failure
  once, through `on_log_dir_failure(LogDirFailure)`, called before the failing call returns
  (while the shell holds its lock).
- LeaderAndIsr for a replica with no log here, while some directory is offline, creates
  none unless the controller says the replica is new (is_new): its log may be on the
  failed directory (Kafka's LogManager.getOrCreateLog). Every directory offline → 56.
- A directory that cannot be opened at startup starts offline (its partitions unknown
  here; the controller learns of them from LeaderAndIsr answers).

Controller requests (`becomeLeaderOrFollower`, `stopReplicas`, `maybeUpdateMetadataCache`):
- Duck-typed (controller.requests' attributes): replicas/ may not import controller/.
- Whole request: broker_epoch >= 0 and OLDER than ours → STALE_BROKER_EPOCH (77) (Kafka's
  `isBrokerEpochStale`: a NEWER one is accepted, the controller may learn our new
  registration before the shell sets `broker_epoch`); then controller_epoch < the highest
  seen → STALE_CONTROLLER_EPOCH (11). Either way nothing is applied; otherwise the highest
  controller epoch is remembered.
- LeaderAndIsr, per partition, as Kafka 3.8: applied only if leader_epoch > the local
  leader epoch (-1 for a partition never told); EQUAL or lower → STALE_CONTROLLER_EPOCH
  (11), nothing changed. This broker not in replicas → UNKNOWN_TOPIC_OR_PARTITION (3);
  ISR not within replicas, or a leader outside its ISR → INVALID_REQUEST (42); a bad topic
  config → INVALID_CONFIG (40). The log is created only for an applied partition, with
  the topic config (`topic_configs[topic]` over `BrokerConfig.default_topic_config`):
  segment.bytes, max.message.bytes, flush.messages, flush.ms (2^63-1 = never), and
  min.insync.replicas for the partition state.
  `makeLeader`: producer state rebuilt if stale, epoch cache assign(leader_epoch, LEO),
  PartitionState BecomeLeader. `makeFollower`: PartitionState BecomeFollower (pending
  acks=all produces fail NOT_LEADER_OR_FOLLOWER; the replica must truncate before it
  takes a HW). `became_follower` maps tp → leader id (-1: no leader, start no fetcher).
- StopReplica, per partition (Kafka 3.8): leader epoch -2 (deleting), -1 (none) or >= local
  → stopped (PartitionState StopReplica: pending produces fail NOT_LEADER_OR_FOLLOWER);
  older → FENCED_LEADER_EPOCH (74). delete=True closes and removes the partition dir (also
  for a partition not hosted) and forgets it; both checkpoints are rewritten.
- UpdateMetadata fills `metadata` (replicas/metadata_cache.py).
Produce (`appendRecordsToLeader`), every rejection appends NOTHING:
  acks not in {0, 1, -1} → INVALID_REQUIRED_ACKS (21); no replica here →
  UNKNOWN_TOPIC_OR_PARTITION (3), or NOT_LEADER_OR_FOLLOWER (6) when the metadata cache
  has the partition (Kafka's getPartitionOrError, for every partition call); not leader → NOT_LEADER_OR_FOLLOWER (6); acks=-1 with committed ISR < min ISR →
  NOT_ENOUGH_REPLICAS (19); bad magic/length/CRC → CORRUPT_MESSAGE (2); a batch over
  max.message.bytes → MESSAGE_TOO_LARGE (10); then idempotence (replicas/producer_state.py):
  INVALID_PRODUCER_EPOCH (47), OUT_OF_ORDER_SEQUENCE_NUMBER (45), or a duplicate answered with
  the ORIGINAL offsets (duplicate=True); transactions (replicas/producer_log.py): a control
  batch from a client → INVALID_RECORD (87), a transactional batch without a valid KIP-890
  guard or an idempotent one inside an open transaction → INVALID_TXN_STATE (48).
  Corruption is reported before producer errors.
  acks=0/1 are answered at once. acks=-1 waits until HW >= last offset + 1 (a duplicate
  too): `pending_id` is returned and the answer comes later as ProduceDone, unless it is
  already satisfied (then answered at once, pending_id None).
Fetch: replicas/leader_reads.py (the leader's reads, and a follower's for consumers).
Transactions, the log side (Kafka's UnifiedLog / ReplicaManager / Partition; the rules in
  replicas/producer_log.py and producer_state.py): `needs_verification` and
  `maybe_start_verification` (KIP-890, the shell's sequence in the latter's docstring), the
  guard carried by `append`; `append_markers`, WriteTxnMarkers' leader side (acks=-1
  semantics); `last_stable_offset` = min(first unstable offset, HW), in every leader fetch
  answer; READ_COMMITTED (isolation level 1) fetches read below the LSO and carry the
  aborted transactions of what they return, `fetch_ready`, `leader_marks` and `list_offset`
  (LATEST = the LSO) bound read_committed consumers by the LSO. Verification guards end on
  leadership changes, StopReplica and truncation. `partition_info`'s last_stable_offset is
  None on a follower whose producer state was not needed since its log was opened.
Follower side: replicas/follower_side.py.
Producer state is derived from the log: marked stale on open (unless the log is empty) and
  after any truncation that removed data; rebuilt from batch headers (and the record of
  each marker) when the partition becomes leader, at its first producer append or marker,
  a follower's first marker, an LSO question, or the cleaner's look at a compacted log, so
  startup scans nothing; the rebuild repairs the `.txnindex` files recovery left stale.
Retention never passes the HW (not the LSO: Kafka 3.8's deleteOldSegments); the cleaner
  never passes the LSO (`cleaner_grab`).
Retention: `apply_retention(now_ms, topic_configs)`, called by the shell every
  log.retention.check.interval.ms, runs replicas/retention.py on every replica (leader or
  follower, each below its own HW).
Time: `tick()` = PartitionState Tick per leader (ISR shrink proposals, produce timeouts)
  plus flush.ms, for the partitions that had an event since the last tick or still have
  produces waiting or a HW below their LEO (the only ones where a Tick can do anything:
  with the HW at the LEO every ISR follower is at the LEO, so none can fall out), and for
  every partition at least every replica.lag.time.max.ms / 4 (a safety net, and flush.ms
  of quiet logs): 10,000 quiet partitions cost no 10,000 Ticks every tick_ms.
  AlterPartition answers go to `handle_alter_partition_response`; the shell resends a
  proposal only while `alter_partition_in_flight` says it is still pending.
log.flush.before.ack (rayka's; Kafka has only flush.messages / flush.ms): no acks=-1
  produce is answered before every ISR replica has its records on disk. A leader counts
  for its HW only what it synced (`Log.flushed_end`) and syncs, group-commit style, when
  a follower fetch arrives (so the fetch after the one that carried the data moves the
  HW), at each tick, at once when it is alone in its ISR; a follower syncs each fetch
  answer it appends before its next fetch reports the new offset. A sync is
  `Log.sync_data` (the records' fdatasync only; the recovery point stays, so recovery
  revalidates past it and rebuilds the indexes); a leader's new leadership flushes whole.
Persist before send: HW changes are written to replication-offset-checkpoint inside the
  call that changed them, before it returns (`hw_checkpoint_interval_ms` = 0, default);
  with an interval > 0 (Kafka's replica.high.watermark.checkpoint.interval.ms, 5000)
  `due_high_watermarks` takes one at most that often and the caller writes it with
  `write_high_watermarks` outside its lock (replicas/deferred_writes.py) — safe because
  truncation is by epoch, never by HW. Epoch-cache changes persist with the log's flush
  (replicas/epoch_cache.py). The recovery-point checkpoint is written on startup, flush(),
  close(), after a flush.ms flush in tick(), and after every truncation (as Kafka's
  LogManager.truncateTo) so a stale, higher recovery point never makes recovery trust
  rewritten bytes.

Effects, results, BrokerConfig: replicas/replica_types.py. Disk errors (OSError) propagate.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import re
import shutil
from pathlib import Path
from typing import Callable, Mapping

from replicas import partition_state as ps
from replicas import records
from replicas.cleaner import discard_cleaned
from replicas.cleaner_manager import CleanJob
from replicas.errors import (CorruptRecord, InvalidConfig, InvalidRequest, KafkaError,
                             KafkaStorageError, NotLeaderOrFollower, StaleBrokerEpoch,
                             StaleControllerEpoch, UnknownTopicOrPartition)
from replicas.log import Log, LogConfig, RecoveryReport, partition_dir_name
from replicas.follower_side import FollowerSide
from replicas.deferred_writes import DeferredWrites, HighWatermarkCheckpoints, RecoveryCheckpoints
from replicas.leader_reads import LeaderReads
from replicas.log_dirs import LogDir, LogDirs, describe_os_error
from replicas.metadata_cache import MetadataCache, TopicPartition
from replicas.partition_state import (ACKS_ALL, FENCED_LEADER_EPOCH, INVALID_REQUIRED_ACKS,
                                     NO_EPOCH, NONE, NOT_LEADER_OR_FOLLOWER)
from replicas.open_files import OpenFiles
from replicas.producer_log import ProducerLog, TxnProducer, needs_verification
from replicas.producer_state import CLIENT, COORDINATOR, BatchMetadata, VerificationGuard
from replicas.record_deletion import RecordDeletion
from replicas.replica_selector import selector_for
from replicas.replica_types import (READ_COMMITTED, READ_UNCOMMITTED, AppendResult,
                                    BrokerConfig, ClientMetadata, Effect, FetchPosition,
                                    FetchResult,
                                    HighWatermarkChanged, LeaderAndIsrOutcome, LeaderMarks,
                                    LogDirFailure, ProduceDone, ProposeIsr, StopReplicaOutcome,
                                    TruncationResult, partition_configs)

__all__ = ["BrokerConfig", "ReplicaManager", "TopicPartition", "HighWatermarkChanged",
           "ProposeIsr", "ProduceDone", "Effect", "AppendResult", "FetchResult",
           "FetchPosition", "TruncationResult", "LeaderAndIsrOutcome", "StopReplicaOutcome",
           "LeaderMarks", "VerificationGuard", "TxnProducer", "READ_UNCOMMITTED",
           "READ_COMMITTED", "CLIENT", "COORDINATOR", "partition_configs", "ClientMetadata",
           "LogDirFailure", "KAFKA_STORAGE_ERROR"]

# Kafka error codes: partition_state's int constants, the others from the typed errors.
UNKNOWN_TOPIC_OR_PARTITION = UnknownTopicOrPartition.code
STALE_CONTROLLER_EPOCH = StaleControllerEpoch.code
STALE_BROKER_EPOCH = StaleBrokerEpoch.code
INVALID_CONFIG = InvalidConfig.code
INVALID_REQUEST = InvalidRequest.code
KAFKA_STORAGE_ERROR = KafkaStorageError.code
EPOCH_DURING_DELETE = -2
_RECOVERY_MAX_MESSAGE_BYTES = 2**31 - 1   # recovery before the topic config is known
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


class _Partition:
    __slots__ = ("tp", "log", "state", "producers", "configured", "dir")

    def __init__(self, tp: TopicPartition, log: Log, state: ps.PartitionState,
                 log_dir: LogDir, verification: bool = True):
        self.tp, self.log, self.state, self.dir = tp, log, state, log_dir
        self.producers = ProducerLog(log, verification)
        self.configured = False

    def last_stable_offset(self) -> int:
        return self.producers.last_stable_offset(self.state.high_watermark)


# ---------------------------------------------------------------- the replica manager
class ReplicaManager(LeaderReads, FollowerSide, RecordDeletion, DeferredWrites):
    def __init__(self, broker_id: int, config: BrokerConfig, clock_ms: Callable[[], int],
                 wall_clock_ms: Callable[[], int] | None = None,
                 on_log_dir_failure: Callable[[LogDirFailure], None] | None = None):
        self.broker_id = broker_id
        self.config = config
        self._selector = selector_for(config.replica_selector_class)
        self._clock = clock_ms
        self._wall_clock = wall_clock_ms      # record timestamps are checked against it
        self.data_dir = Path(config.data_dir)
        self.dirs = LogDirs(config.log_dirs or (config.data_dir,))
        self._on_log_dir_failure = on_log_dir_failure
        self._offline: dict[TopicPartition, LogDir] = {}  # partitions on offline dirs
        self.controller_epoch = 0
        self.broker_epoch = -1
        self.metadata = MetadataCache()
        self._partitions: dict[TopicPartition, _Partition] = {}
        self._pending: dict[int, tuple[TopicPartition, int, int]] = {}
        self._ids = itertools.count(1)
        self.open_files = OpenFiles(config.log_max_open_files)
        self._hw = HighWatermarkCheckpoints(config.hw_checkpoint_interval_ms, clock_ms)
        self._recovery = RecoveryCheckpoints()
        self._rolled: list = []     # segment rolls taken by ticks (replicas/deferred_writes.py)
        self._busy: set[TopicPartition] = set()      # partitions the next tick looks at
        self._next_full_tick_ms = 0
        self._closed = False

    # ---- lifecycle ------------------------------------------------------------------
    def startup(self) -> dict[TopicPartition, RecoveryReport]:
        """Open every partition dir of every log directory (recovery from the recovery
        point), load HWs; a directory that fails meanwhile goes offline."""
        for d, reason in self.dirs.open().items():
            self._report(d, reason, ())
        log_config, partition_config = partition_configs(
            None, self.config.default_topic_config, self.config.replica_lag_time_max_ms)
        log_config = dataclasses.replace(log_config,
                                         max_message_bytes=_RECOVERY_MAX_MESSAGE_BYTES)
        reports = {}
        for d in self.dirs.online:
            try:
                reports.update(self._load_dir(d, log_config, partition_config))
            except (OSError, CorruptRecord, KafkaStorageError) as exc:
                self._fail_dir(d, exc)
        self._write_recovery_points()
        self.checkpoint_high_watermarks()
        return reports

    def _load_dir(self, d: LogDir, log_config: LogConfig, partition_config: ps.PartitionConfig
                  ) -> dict[TopicPartition, RecoveryReport]:
        recovery_points = d.recovery_file.read()
        hws = d.hw_file.read()
        log_starts = d.log_start_file.read()
        reports = {}
        for path in sorted(d.path.iterdir()):
            match = _PARTITION_DIR.match(path.name)
            if not path.is_dir() or match is None:
                continue
            tp = TopicPartition(match["topic"], int(match["partition"]))
            if tp in self._partitions:
                continue          # Kafka refuses a log found in two directories; keep one
            part = self._open(tp, d, log_config, partition_config, recovery_points.get(tp, 0))
            log = part.log
            if log.log_start_offset < log_starts.get(tp, -1) <= log.log_end_offset:
                log.delete_records_before(log_starts[tp])
            part.state.high_watermark = min(max(hws.get(tp, 0), log.log_start_offset),
                                            log.log_end_offset)
            reports[tp] = log.recovery
        return reports

    def _open(self, tp: TopicPartition, d: LogDir, log_config: LogConfig,
              partition_config: ps.PartitionConfig, recovery_point: int = 0) -> _Partition:
        log = Log(d.path / partition_dir_name(tp.topic, tp.partition), log_config,
                  recovery_point=recovery_point, clock_ms=self._clock, files=self.open_files,
                  wall_clock_ms=self._wall_clock)
        state = ps.PartitionState(tp.topic, tp.partition, self.broker_id, partition_config)
        state.log_end_offset = log.log_end_offset
        state.high_watermark = min(state.high_watermark, log.log_end_offset)
        part = self._partitions[tp] = _Partition(
            tp, log, state, d, self.config.transaction_partition_verification_enable)
        return part

    def _next_dir(self, logs_per_dir: dict) -> LogDir:
        """The online directory for a new log. `logs_per_dir` is the caller's running count
        (filled here at its first use, kept by the caller as it opens logs): counting every
        hosted log for each new one would make a 10,000-partition LeaderAndIsr quadratic."""
        online = self.dirs.online
        if len(online) == 1:
            return online[0]
        if not logs_per_dir:
            logs_per_dir.update((d, len(parts)) for d, parts in self._by_dir().items())
        return self.dirs.next_dir(logs_per_dir)

    def _by_dir(self) -> dict[LogDir, list[_Partition]]:
        out: dict[LogDir, list[_Partition]] = {d: [] for d in self.dirs.online}
        for part in self._partitions.values():
            out.setdefault(part.dir, []).append(part)
        return out

    def flush(self) -> None:
        if self._closed:
            return
        for part in list(self._partitions.values()):
            try:
                part.log.flush()
            except OSError as exc:
                self._fail_dir(part.dir, exc)
        self._write_recovery_points()
        self.checkpoint_high_watermarks()

    def close(self) -> None:
        """Flush and checkpoint everything; pending acks=-1 produces are NOT answered.
        Idempotent; the manager is unusable afterwards."""
        if self._closed:
            return
        self.flush()
        self._closed = True
        for part in self._partitions.values():
            try:
                part.log.close()
            except OSError as exc:
                self._fail_dir(part.dir, exc)
        self._partitions.clear()
        self._pending.clear()

    # ---- log directories ---------------------------------------------------------------
    def _fail_dir(self, d: LogDir, exc: BaseException | str) -> None:
        """Take `d` offline (module docstring, "Log directories"); once per directory."""
        reason = exc if isinstance(exc, str) else describe_os_error(exc)
        if not d.fail(reason):
            return
        gone = sorted(tp for tp, p in self._partitions.items() if p.dir is d)
        for tp in gone:
            part = self._partitions.pop(tp)
            self._offline[tp] = d
            self._busy.discard(tp)
            part.log.close_handlers()
        effects = [ProduceDone(pid, KAFKA_STORAGE_ERROR, base, last)
                   for pid, (tp, base, last) in list(self._pending.items()) if tp in self._offline]
        for e in effects:
            del self._pending[e.pending_id]
        self._report(d, reason, gone, effects)

    def _report(self, d: LogDir, reason: str, partitions, effects=()) -> None:
        if self._on_log_dir_failure is not None:
            self._on_log_dir_failure(LogDirFailure(str(d.path), reason, tuple(partitions),
                                                   tuple(effects), not self.dirs.online))

    def _storage_error(self, part: _Partition, exc: BaseException) -> int:
        """An I/O error (or a corrupt read) on `part`'s directory: offline; 56 to answer.
        A corrupt batch also drops the partition's recovery point (best effort), so that
        the next start validates the whole log and cuts it at the corruption."""
        if isinstance(exc, CorruptRecord) and part.dir.online:
            # numbered like every recovery write: a late background one cannot undo it
            self._recovery.write(self._recovery.take(
                {part.dir: [p for p in self._partitions.values()
                            if p.dir is part.dir and p is not part]}), best_effort=True)
        self._fail_dir(part.dir, exc)
        return KAFKA_STORAGE_ERROR

    def _storage_answer(self, part: _Partition, exc: BaseException) -> AppendResult:
        """An append that met an I/O error: its directory offline, 56 answered."""
        return AppendResult(self._storage_error(part, exc),
                            message=self._offline_message(part.tp))

    @contextlib.contextmanager
    def _raising_storage_error(self, part: _Partition):
        """For calls that answer by raising (a follower's, the LSO's): an I/O error takes
        the directory offline and raises KafkaStorageError."""
        try:
            yield
        except OSError as exc:
            self._raise_storage_error(part, exc)

    def _raise_storage_error(self, part: _Partition, exc: OSError):
        """`_raising_storage_error`'s answer, for a hot path's own `except OSError`."""
        self._storage_error(part, exc)
        raise KafkaStorageError(self._offline_message(part.tp)) from exc

    def io_failed(self, tp, exc: BaseException) -> None:
        """An I/O error the shell met on a hosted partition's files outside this manager
        (the cleaner's reads and writes): that partition's directory goes offline."""
        part = self._partitions.get(TopicPartition(*tp))
        if part is not None:
            self._fail_dir(part.dir, exc)

    def log_dirs(self) -> list[dict]:
        """Every log directory: path, online, why offline, the partitions it holds (for
        DescribeLogDirs: an offline one answers KAFKA_STORAGE_ERROR and no partitions)."""
        by_dir = self._by_dir()
        return [{"path": str(d.path), "online": d.online, "error": d.error,
                 "partitions": sorted(p.tp for p in by_dir.get(d, ())) if d.online else [],
                 "offline_partitions": sorted(tp for tp, od in self._offline.items() if od is d)}
                for d in self.dirs.all]

    def partition_dir(self, tp) -> str | None:
        """The log directory holding a hosted partition."""
        part = self._partitions.get(TopicPartition(*tp))
        return None if part is None else str(part.dir.path)

    def cleaner_grab(self, now_ms: int) -> CleanJob | None:
        """The dirtiest compacted log's cleaning job, over every online directory (each
        keeps its own cleaner-offset-checkpoint). A compacted log is cleaned up to its last
        stable offset (Kafka never cleans past it)."""
        best = None
        for d, parts in self._by_dir().items():
            logs = [(p.tp, p.log, p.last_stable_offset()) for p in parts
                    if p.log.config.cleaner.compact]       # the others are never cleaned
            try:
                job = d.cleaner.grab(logs, now_ms)
            except OSError as exc:
                self._fail_dir(d, exc)
                continue
            if job is not None and (best is None or job.plan.dirty_ratio > best.plan.dirty_ratio):
                best = job
        return best

    def cleaner_finish(self, job: CleanJob, stats) -> bool:
        """Swap a finished job in (replicas/cleaner_manager.py); False if its log changed or
        went offline meanwhile."""
        part = self._partitions.get(TopicPartition(*job.tp))
        if part is None:
            discard_cleaned(stats)
            return False
        try:
            return part.dir.cleaner.finish(job, stats, [(p.tp, p.log, 0) for p in
                                                        self._by_dir()[part.dir]])
        except OSError as exc:
            self._fail_dir(part.dir, exc)
            return False

    # ---- queries --------------------------------------------------------------------
    def partitions(self) -> list[TopicPartition]:
        return sorted(self._partitions)

    def log(self, tp) -> Log:
        return self._get(tp).log

    def partition_stats(self) -> dict:
        """Every hosted partition → (role, log start, log end, high watermark, size in bytes):
        the few figures a monitor samples for all partitions at once (partition_info has
        more, for one)."""
        return {tp: (p.state.role.value, p.log.log_start_offset, p.log.log_end_offset,
                     p.state.high_watermark, p.log.size_bytes)
                for tp, p in self._partitions.items()}

    def role_views(self) -> list[dict]:
        """Every hosted partition's role, replicas and ISR, as partition_info names them: what
        the broker's gauges count, without reading its log or producer state."""
        return [{"role": p.state.role.value, "replicas": p.state.replicas, "isr": p.state.isr}
                for p in self._partitions.values()]

    def partition_info(self, tp) -> dict:
        part = self._get(tp)
        s, log = part.state, part.log
        return {"role": s.role.value, "leader": s.leader_id, "leader_epoch": s.leader_epoch,
                "partition_epoch": s.partition_epoch, "replicas": s.replicas, "isr": s.isr,
                "proposed_isr": s.proposed_isr, "high_watermark": s.high_watermark,
                "last_stable_offset": part.last_stable_offset()
                if part.producers.loaded else None,
                "log_end_offset": log.log_end_offset, "log_start_offset": log.log_start_offset,
                "size_bytes": log.size_bytes, "latest_epoch": log.latest_epoch,
                "truncation_pending": s.truncation_pending,
                "pending_produces": len(s.pending_produces),
                "min_insync_replicas": s.config.min_insync_replicas}

    def _get(self, tp) -> _Partition:
        try:
            part = self._partitions.get(tp)      # a TopicPartition or a plain tuple
        except TypeError:                         # a list, as deserialised messages carry
            part = self._partitions.get(tuple(tp))
        if part is None:
            code = self._not_hosted(tp)
            if code == KAFKA_STORAGE_ERROR:
                raise KafkaStorageError(self._offline_message(tp))
            cls = NotLeaderOrFollower if code == NOT_LEADER_OR_FOLLOWER \
                else UnknownTopicOrPartition
            raise cls(f"{tp[0]}-{tp[1]} is not hosted on broker {self.broker_id}")
        return part

    def _not_hosted(self, tp) -> int:
        """Kafka's answer for a partition without a replica here (getPartitionOrError): the
        topic exists (the metadata cache has the partition, e.g. a reassignment moved the
        replica away) → NOT_LEADER_OR_FOLLOWER, so clients refresh their metadata; else
        UNKNOWN_TOPIC_OR_PARTITION. A partition on an offline log directory →
        KAFKA_STORAGE_ERROR (Kafka's HostedPartition.Offline)."""
        if TopicPartition(*tp) in self._offline:
            return KAFKA_STORAGE_ERROR
        known = TopicPartition(*tp) in self.metadata.partitions
        return NOT_LEADER_OR_FOLLOWER if known else UNKNOWN_TOPIC_OR_PARTITION

    def _offline_message(self, tp) -> str:
        d = self._offline[TopicPartition(*tp)]
        return f"{tp[0]}-{tp[1]} is on broker {self.broker_id}'s offline log directory " \
               f"{d.path} ({d.error})"

    def _not_hosted_message(self, tp) -> str:
        if TopicPartition(*tp) in self._offline:
            return self._offline_message(tp)
        return f"{tp[0]}-{tp[1]} is not hosted on broker {self.broker_id}"

    # ---- effects --------------------------------------------------------------------
    def _process(self, part: _Partition, event) -> list:
        if type(event) is not ps.Tick:
            self._busy.add(part.tp)
        out = []
        for e in part.state.process(event):
            if isinstance(e, ps.HighWatermarkChanged):
                self._hw.dirty = True
                out.append(HighWatermarkChanged(part.tp, e.high_watermark))
            elif isinstance(e, ps.ProposeIsr):
                out.append(ProposeIsr(part.tp, tuple(e.isr), e.leader_epoch, e.partition_epoch))
            elif isinstance(e, ps.ProduceCompleted):
                pending = self._pending.pop(e.request_id, None)
                if pending is not None:
                    out.append(ProduceDone(e.request_id, e.error, pending[1], pending[2]))
        return out

    def _persist(self) -> None:
        """Persist before send: the HW checkpoint is written before the call returns."""
        if self._hw.dirty and self._hw.interval_ms <= 0:
            self.checkpoint_high_watermarks()

    # ---- controller requests ------------------------------------------------------------
    def _check_request(self, req) -> int:
        if 0 <= req.broker_epoch < self.broker_epoch:
            return STALE_BROKER_EPOCH
        if req.controller_epoch < self.controller_epoch:
            return STALE_CONTROLLER_EPOCH
        self.controller_epoch = req.controller_epoch
        return NONE

    def handle_leader_and_isr(self, req, topic_configs: Mapping[str, Mapping] | None = None
                              ) -> LeaderAndIsrOutcome:
        states = list(req.partition_states)
        error = self._check_request(req)
        if error:
            return LeaderAndIsrOutcome(error, {TopicPartition(s.topic, s.partition): error
                                               for s in states})
        topic_configs = topic_configs or {}
        now = self._clock()
        out = LeaderAndIsrOutcome(NONE)
        logs_per_dir: dict[LogDir, int] = {}      # counted once, at the first new log
        for st in states:
            tp = TopicPartition(st.topic, st.partition)
            code = self._apply_partition_state(tp, st, topic_configs, now, out, logs_per_dir)
            out.partition_errors[tp] = code
        self._persist()
        return out

    def _apply_partition_state(self, tp, st, topic_configs, now, out: LeaderAndIsrOutcome,
                               logs_per_dir: dict) -> int:
        if tp in self._offline:
            return KAFKA_STORAGE_ERROR
        part = self._partitions.get(tp)
        local_epoch = part.state.leader_epoch if part is not None else NO_EPOCH
        if st.leader_epoch <= local_epoch:
            return STALE_CONTROLLER_EPOCH
        replicas, isr = tuple(st.replicas), tuple(st.isr)
        if self.broker_id not in replicas:
            return UNKNOWN_TOPIC_OR_PARTITION
        if not set(isr) <= set(replicas) or (st.leader == self.broker_id
                                             and self.broker_id not in isr):
            return INVALID_REQUEST
        given = topic_configs.get(tp.topic)
        if part is None and (self.dirs.offline and not getattr(st, "is_new", False)
                             or not self.dirs.online):
            return KAFKA_STORAGE_ERROR      # its log may lie on the offline directory
        try:
            if part is None or given is not None or not part.configured:
                log_config, partition_config = partition_configs(
                    given, self.config.default_topic_config, self.config.replica_lag_time_max_ms)
                if part is None:
                    d = self._next_dir(logs_per_dir)
                    try:
                        part = self._open(tp, d, log_config, partition_config)
                    except OSError as exc:
                        self._fail_dir(d, exc)
                        return KAFKA_STORAGE_ERROR
                    logs_per_dir[d] = logs_per_dir.get(d, 0) + 1
                else:
                    part.log.config, part.state.config = log_config, partition_config
                part.configured = True
        except InvalidConfig:
            return INVALID_CONFIG
        try:
            if st.leader == self.broker_id:
                out.effects.extend(self._make_leader(part, st, replicas, isr, now))
                out.became_leader.append(tp)
            else:
                out.effects.extend(self._make_follower(part, st, replicas, isr, now))
                out.became_follower[tp] = st.leader
        except (OSError, CorruptRecord) as exc:
            return self._storage_error(part, exc)
        return NONE

    def _make_leader(self, part: _Partition, st, replicas, isr, now: int) -> list:
        log = part.log
        if self.config.log_flush_before_ack:
            log.flush()             # the HW it starts from counts its whole log
        part.producers.ensure_loaded()
        if not part.state.is_leader:
            # a new leadership ends the verifications; a leader re-asserted at a new epoch
            # (the controller shrank the ISR) keeps those in flight, as Kafka keeps them
            part.producers.clear_verifications()
        log.epoch_cache.assign(st.leader_epoch, log.log_end_offset)
        return self._process(part, ps.BecomeLeader(
            replicas, isr, st.leader_epoch, st.zk_version, log.log_end_offset,
            part.state.high_watermark, now))

    def _make_follower(self, part: _Partition, st, replicas, isr, now: int) -> list:
        part.producers.clear_verifications()
        return self._process(part, ps.BecomeFollower(
            st.leader, st.leader_epoch, st.zk_version, replicas, isr, part.log.log_end_offset,
            part.state.high_watermark, now))

    def handle_update_metadata(self, req) -> int:
        error = self._check_request(req)
        if error == NONE:
            self.metadata.update(req)
        return error

    def handle_stop_replica(self, req) -> StopReplicaOutcome:
        parts = list(req.partitions)
        error = self._check_request(req)
        if error:
            return StopReplicaOutcome(error, {TopicPartition(p.topic, p.partition): error
                                              for p in parts})
        out = StopReplicaOutcome(NONE)
        for p in parts:
            tp = TopicPartition(p.topic, p.partition)
            if tp in self._offline:
                out.partition_errors[tp] = KAFKA_STORAGE_ERROR
                continue
            part = self._partitions.get(tp)
            if part is not None and not (p.leader_epoch in (EPOCH_DURING_DELETE, NO_EPOCH)
                                         or p.leader_epoch >= part.state.leader_epoch):
                out.partition_errors[tp] = FENCED_LEADER_EPOCH
                continue
            if part is not None:
                part.producers.clear_verifications()
                out.effects.extend(self._process(part, ps.StopReplica()))
            if p.delete:
                self._delete(tp)
                out.deleted.append(tp)
            out.partition_errors[tp] = NONE
            out.stopped.append(tp)
        if out.deleted:
            self._write_recovery_points()
            self.checkpoint_high_watermarks()
        self._persist()
        return out

    def _delete(self, tp: TopicPartition) -> None:
        part = self._partitions.pop(tp, None)
        if part is not None:
            part.log.delete()
            for pid in [i for i, (t, _, _) in self._pending.items() if t == tp]:
                del self._pending[pid]
        for d in self.dirs.online:
            shutil.rmtree(d.path / partition_dir_name(tp.topic, tp.partition),
                          ignore_errors=True)

    # ---- produce -----------------------------------------------------------------------
    def append(self, tp, batches, acks: int, timeout_ms: int,
               verification_guard: VerificationGuard | None = None,
               origin: str = CLIENT) -> AppendResult:
        """Kafka's appendRecordsToLeader for one partition (module docstring, "Produce");
        `verification_guard`: what `maybe_start_verification` returned for this producer
        (KIP-890); `origin` COORDINATOR for a coordinator's own transactional writes (no
        duplicate or sequence checks)."""
        if acks not in (0, 1, ACKS_ALL):
            return AppendResult(INVALID_REQUIRED_ACKS,
                                message=f"acks must be 0, 1 or -1, not {acks}")
        part = self._partitions.get(TopicPartition(*tp))
        if part is None:
            return AppendResult(self._not_hosted(tp),
                                message=self._not_hosted_message(tp))
        code = part.state.check_append(acks)
        if code:
            return AppendResult(code, message=f"{tp[0]}-{tp[1]}: cannot append with acks={acks} "
                                f"(role {part.state.role.value}, ISR {list(part.state.isr)})")
        try:
            info = part.producers.append_as_leader(batches, part.state.leader_epoch, origin,
                                                   verification_guard)
        except KafkaError as exc:
            record_errors = getattr(exc, "record_errors", ())
            return AppendResult(exc.code, message=exc.message if record_errors else str(exc),
                                record_errors=record_errors)
        except OSError as exc:
            return self._storage_answer(part, exc)
        if isinstance(info, BatchMetadata):
            return self._answer(part, info.first_offset, info.last_offset, acks, timeout_ms,
                                [], duplicate=True)
        try:
            effects = self._leader_appended(part)
        except OSError as exc:
            return self._storage_answer(part, exc)
        return self._answer(part, info.first_offset, info.last_offset, acks, timeout_ms, effects)

    # ---- log.flush.before.ack ------------------------------------------------------------
    def _leader_end(self, part) -> int:
        """The log end the leader counts for its HW: with log.flush.before.ack only what is
        on disk, so no acks=-1 produce is answered before the leader fsynced it."""
        log = part.log
        return log.flushed_end if self.config.log_flush_before_ack else log.log_end_offset

    def _leader_appended(self, part) -> list:
        """A leader's log grew. With log.flush.before.ack and no follower in the ISR the
        leader fsyncs at once (nobody else's fetch would make it); otherwise the next
        follower fetch does (group commit: one fsync for every append since)."""
        if self.config.log_flush_before_ack and len(part.state.isr) <= 1:
            part.log.sync_data()
        return self._process(part, ps.LeaderAppended(self._leader_end(part), self._clock()))

    def _flush_for_ack(self, part) -> list:
        """log.flush.before.ack: fsync what a leader appended since its last flush and let
        the HW count it (a follower fetch, a tick); [] when nothing is waiting."""
        log = part.log
        if not self.config.log_flush_before_ack or log.flushed_end >= log.log_end_offset:
            return []
        log.sync_data()
        return self._process(part, ps.LeaderAppended(log.log_end_offset, self._clock()))

    def sequence_ahead(self, tp, batches) -> bool:
        """ProducerStateManager.ahead for a hosted partition with loaded state."""
        part = self._partitions.get(TopicPartition(*tp))
        return bool(part and part.producers.loaded
                    and part.producers.state.ahead(records.iter_headers(batches)))

    # ---- transactions (the log side; replicas/producer_log.py) ------------------------------
    def needs_verification(self, tp, batches) -> TxnProducer | None:
        """(producer id, epoch) of the transactional batches of a produce buffer for `tp`,
        None when it has none (the shell then appends without verifying); raises
        InvalidProducerIdMapping (49) when they name more than one. Header-only."""
        return needs_verification(records.iter_headers(batches))

    def maybe_start_verification(self, tp, producer_id: int, producer_epoch: int | None = None,
                                 base_sequence: int | None = None,
                                 supports_epoch_bump: bool = False) -> VerificationGuard | None:
        """KIP-890 part 1, Kafka's Partition/UnifiedLog.maybeStartTransactionVerification. The
        shell's sequence for a transactional produce (ReplicaManager.handleProduceAppend):
        1. `needs_verification(tp, batches)` → (producer id, epoch), or None: append at once;
        2. this call, under the broker lock, BEFORE asking the coordinator (pass the epoch
           and the first batch's base sequence): None means the producer already has a
           transaction open here, no verification needed: append with no guard; a guard
           means the transaction coordinator must confirm the partition is in the
           transaction (AddPartitionsToTxn, verify only);
        3. the coordinator's error answers the produce (Kafka maps CONCURRENT_TRANSACTIONS,
           NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS and
           NETWORK_EXCEPTION to NOT_ENOUGH_REPLICAS for the client), else
        4. `append(..., verification_guard=guard)`. The guard is the same for every call
           until a transactional batch or a marker of that producer is appended, a
           truncation, or a leadership change here; an append with a stale or no guard fails
           INVALID_TXN_STATE (48), as Kafka's analyzeAndValidateProducerState.
        `supports_epoch_bump`: the client is of transaction.version 2 (the coordinator adds
        the partition rather than verifying it; producer_state.py's rules).
        Raises NotLeaderOrFollower / UnknownTopicOrPartition when this broker does not lead."""
        part = self._get(tp)
        if not part.state.is_leader:
            raise NotLeaderOrFollower(f"{tp[0]}-{tp[1]} is {part.state.role.value} on broker "
                                      f"{self.broker_id}")
        return part.producers.maybe_start_verification(producer_id, producer_epoch, base_sequence,
                                                       supports_epoch_bump)

    def verification_guard_for(self, tp, batches) -> VerificationGuard | None:
        """The verification guard in force for the transactional producer of `batches` on
        `tp` (a coordinator's own transactional append, verified by its host), or None."""
        part = self._partitions.get(TopicPartition(*tp))
        if part is None:
            return None
        who = needs_verification(records.iter_headers(batches))
        return None if who is None else \
            part.producers.state.verification_guard(who.producer_id)

    def append_markers(self, tp, producer_id: int, producer_epoch: int, committed: bool,
                       coordinator_epoch: int, timeout_ms: int,
                       timestamp_ms: int = records.NO_TIMESTAMP) -> AppendResult:
        """The leader side of WriteTxnMarkers for one partition (origin COORDINATOR): append
        a COMMIT or ABORT marker, answered like an acks=-1 produce (a `pending_id` and a
        later ProduceDone, or at once when the HW already passed it). No replica here →
        UNKNOWN_TOPIC_OR_PARTITION (3) whatever the metadata says (KafkaApis.
        handleWriteTxnMarkersRequest asks getMagic; the coordinator treats 3 as done); not
        leader → NOT_LEADER_OR_FOLLOWER (6); min ISR → 19; INVALID_PRODUCER_EPOCH (47);
        TRANSACTION_COORDINATOR_FENCED (52). `timestamp_ms`: the marker's timestamp,
        wall-clock ms (Kafka stamps its time.milliseconds(); replicas/ never reads the clock)."""
        part = self._partitions.get(TopicPartition(*tp))
        if part is None:
            code = KAFKA_STORAGE_ERROR if TopicPartition(*tp) in self._offline \
                else UNKNOWN_TOPIC_OR_PARTITION
            return AppendResult(code, message=self._not_hosted_message(tp))
        code = part.state.check_append(ACKS_ALL)
        if code:
            return AppendResult(code, message=f"{tp[0]}-{tp[1]}: cannot write a marker (role "
                                f"{part.state.role.value}, ISR {list(part.state.isr)})")
        try:
            info = part.producers.append_marker(producer_id, producer_epoch, committed,
                                                coordinator_epoch, part.state.leader_epoch,
                                                timestamp_ms)
        except KafkaError as exc:
            return AppendResult(exc.code, message=str(exc))
        except OSError as exc:
            return self._storage_answer(part, exc)
        try:
            effects = self._leader_appended(part)
        except OSError as exc:
            return self._storage_answer(part, exc)
        return self._answer(part, info.first_offset, info.last_offset, ACKS_ALL, timeout_ms,
                            effects)

    def describe_producers(self, tp) -> tuple[int, list[tuple]]:
        """DescribeProducers (KIP-664) of a partition this broker hosts, leader or follower
        (Kafka's Partition.activeProducerState reads any local log): (error, [(producer id,
        epoch, last sequence, last timestamp, coordinator epoch, current
        transaction's first offset or -1)]), by producer id."""
        part = self._partitions.get(TopicPartition(*tp))
        if part is None:
            return self._not_hosted(tp), []
        try:
            part.producers.ensure_loaded()
        except OSError as exc:
            return self._storage_error(part, exc), []
        state = part.producers.state
        out = []
        for pid in state.producer_ids:
            e = state.entry(pid)
            first = e.current_txn_first_offset
            out.append((pid, e.epoch, e.last_seq, e.last_timestamp, e.coordinator_epoch,
                        -1 if first is None else first))
        return NONE, out

    def last_stable_offset(self, tp) -> int:
        """Kafka's UnifiedLog.lastStableOffset: min(first unstable offset, HW)."""
        part = self._get(tp)
        with self._raising_storage_error(part):
            return part.last_stable_offset()

    def _answer(self, part: _Partition, base: int, last: int, acks: int, timeout_ms: int,
                effects: list, duplicate: bool = False) -> AppendResult:
        if acks != ACKS_ALL:
            self._persist()
            return AppendResult(NONE, base, last, None, duplicate, effects)
        pending_id = next(self._ids)
        self._pending[pending_id] = (part.tp, base, last)
        effects = effects + self._process(part, ps.DelayedProduce(
            pending_id, last + 1, self._clock() + timeout_ms))
        self._persist()
        if part.tp in self._offline:   # the checkpoint failed: the wait was answered 56
            return AppendResult(KAFKA_STORAGE_ERROR, base, last, None, duplicate, effects,
                                message=self._offline_message(part.tp))
        for e in effects:
            if isinstance(e, ProduceDone) and e.pending_id == pending_id:
                effects.remove(e)
                return AppendResult(e.error, base, last, None, duplicate, effects)
        return AppendResult(NONE, base, last, pending_id, duplicate, effects)

    # ---- retention ---------------------------------------------------------------------------
    def topics(self) -> set[str]:
        return {tp.topic for tp in self._partitions}

    def apply_topic_config(self, topic: str, config: Mapping) -> None:
        """The topic's config as ZooKeeper has it now, to every hosted replica of it (Kafka's
        TopicConfigHandler): appends, retention and the cleaner follow it from now on."""
        parts = [p for tp, p in self._partitions.items() if tp.topic == topic]
        if not parts:
            return
        try:
            log_config, partition_config = partition_configs(
                config, self.config.default_topic_config, self.config.replica_lag_time_max_ms)
        except InvalidConfig:
            return               # validated at create/alter time; keep what works
        for part in parts:
            part.log.config, part.state.config = log_config, partition_config

    def apply_retention(self, now_ms: int, topic_configs: Mapping[str, Mapping] | None = None
                        ) -> dict:
        """One retention check of every replica (replicas/retention.py) at wall-clock `now_ms`
        (record timestamps' scale). `topic_configs` (fresh from the store) replace the
        partitions' configs first, so an altered topic config applies from this check on.
        Answers {tp: RetentionResult} for the logs that deleted segments."""
        out = {}
        for topic, given in (topic_configs or {}).items():
            self.apply_topic_config(topic, given)
        for tp, part in list(self._partitions.items()):
            if part.tp not in self._partitions:
                continue                     # its directory failed during this check
            try:
                result = part.log.apply_retention(part.state.high_watermark, now_ms)
            except OSError as exc:
                self._storage_error(part, exc)
                continue
            if result.deleted_segments:
                out[tp] = result
        if out:
            self._write_recovery_points()
        return out

    # ---- time and controller answers ------------------------------------------------------
    def tick(self) -> list:
        now = self._clock()
        effects = []
        flushed = False
        if now >= self._next_full_tick_ms:
            self._next_full_tick_ms = now + max(1, self.config.replica_lag_time_max_ms // 4)
            parts = list(self._partitions.values())
        else:
            parts = [p for tp in self._busy if (p := self._partitions.get(tp)) is not None]
        self._busy = set()
        tick = ps.Tick(now)
        for part in parts:
            st = part.state
            if st.role is ps.Role.LEADER:
                try:
                    effects += self._flush_for_ack(part)
                except OSError as exc:
                    self._storage_error(part, exc)
                    continue
                effects += self._process(part, tick)
                if st.pending_produces or st.high_watermark < st.log_end_offset:
                    self._busy.add(part.tp)
            try:
                flushed |= part.log.maybe_flush()
            except OSError as exc:
                self._storage_error(part, exc)
                continue
            rolled = part.log.take_rolled_flush()
            if rolled is not None:
                self._rolled.append((part.tp, part.log, rolled))
        if flushed:
            self._write_recovery_points()
        self._fail_written_dirs()
        self._persist()
        return effects

    def alter_partition_in_flight(self, proposal: ProposeIsr) -> bool:
        """Is `proposal` still the partition's pending ISR change (worth sending again)?"""
        part = self._partitions.get(TopicPartition(*proposal.tp))
        return part is not None and (part.state.proposed_isr, part.state.leader_epoch,
                                     part.state.partition_epoch) == (
            tuple(proposal.isr), proposal.leader_epoch, proposal.partition_epoch)

    def handle_alter_partition_response(self, tp, result, proposal: ProposeIsr | None = None
                                        ) -> list:
        """`result`: the committed LeaderIsrAndControllerEpoch, or a KafkaError."""
        part = self._partitions.get(TopicPartition(*tp))
        if part is None:
            return []
        state = part.state
        if proposal is not None and not self.alter_partition_in_flight(proposal):
            return []   # answers a proposal that is no longer in flight
        if isinstance(result, BaseException):
            code = getattr(result, "code", -1) or -1
            event = ps.AlterPartitionResponse((), state.leader_epoch, state.partition_epoch, code)
        else:
            event = ps.AlterPartitionResponse(tuple(result.isr), result.leader_epoch,
                                              result.zk_version)
        effects = self._process(part, event)
        self._persist()
        return effects
