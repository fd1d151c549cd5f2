"""FakeBrokerApi: a tiny, real, in-memory broker implementing protocol.api.BrokerApi, for
handler tests (no Ray, no ZooKeeper, no sockets, no threads, no real clock).

What it is:
- Live brokers, each with endpoints per listener name (`add_broker(2, EXTERNAL=("h", 1))`);
  a broker without an endpoint for a listener is not listed on that listener (Kafka's rule).
- Topics → partitions → a log: a list of appended record batches kept as the bytes given
  (never re-stamped), each with its base offset, record count and max timestamp (read from
  the header when the bytes look like a magic-2 batch, else 1 record and timestamp -1, or
  what `append` is told). The high watermark is the log end unless pinned with `hw`.
  Each partition has a leader, a leader epoch, an epoch cache [(epoch, start offset)],
  replicas, ISR, and a log start offset.
- Kafka's rules, per item, in Kafka's order: injected error, unknown topic/partition (3),
  not the leader (6), fenced / unknown leader epoch (74 / 75), then the operation (offset
  out of range 1, topic exists 36, invalid partitions 37, ...).
- Injection: `errors[key] = code` answers that code for the key in every call that touches
  it (key: a (topic, partition) tuple for partition-level calls and Metadata partitions, a
  topic name for Metadata topics and topic admin, a ConfigResource for configs);
  `raises[method] = exc` makes that method raise (after recording the call).
- `calls`: every call received, in order, as (method name, {argument: value}); `calls_of`
  returns the argument dicts of one method.
- Consumer groups: `find_coordinator` answers, per group id, `coordinator_errors[group]` if
  set, else the node `coordinator_nodes.get(group, broker_id)` by its endpoint on the
  listener asked on (COORDINATOR_NOT_AVAILABLE when it has none or is not live).
  `group_call` drives a REAL pure `coordinator.coordinator.GroupCoordinator` (`coordinator`)
  on a fake clock (`clock_ms`, moved by `advance(ms)`, which sends a Tick). It owns only the
  `__consumer_offsets` partitions it is told to (`own_offsets(...)`, `own_groups(...)`:
  LoadPartition; `begin_load`, `unload`). Append effects are "written" to `offsets_log`
  (the Append effects, in order) and acknowledged at once with `append_error` (0) unless
  `hold_appends` is set; then they wait in `held_appends` until `release_appends(error)`.
  `group_call` returns a Deferred whose result() is the coordinator's result for that
  request id, or raises `NotAnsweredYet` while it is parked. Member ids are deterministic
  (client id + "-" + UUID(int=1), UUID(int=2), ...). `group_events` lists every event given.
- Topic ids: every topic created or added gets a new id (UUID(int=0x7000 + n) in Kafka's
  text form: a re-created name gets another), kept in `topic_id_of`; `topic_ids()`.
- Produce checks records as the real log does (replicas/record_validation.py: a compacted
  topic's keyless records, message.timestamp.* bounds on the fake clock).
- Fetch sessions: a real protocol.fetch_session.FetchSessionCache (`fetch_sessions`, seeded
  ids, `fetch_session_slots` of them).
- Fetch from follower (KIP-392): a consumer fetch with client metadata (`client`, Fetch
  v11+) reads a partition this broker is a replica of but does not lead, from the one log
  and below its `hw`, as the follower's copy; `preferred_read_replicas[tp] = broker` makes
  the leader answer such a fetch of tp with that preferred read replica and no records
  (the selector itself is replicas/replica_selector.py's, tested on its own).
- Share groups: tests/fake_shares.py (a part of this fake of its own).
- Transactions: `txn_call` drives a REAL pure `transactions.coordinator.
  TransactionCoordinator` (`txn_coordinator`, same fake clock) owning the
  `__transaction_state` partitions `own_txns()` loads; its appends are acknowledged at
  once with `append_error`, its WriteMarkers recorded in `markers` and reported written at
  once. `write_txn_markers` and `describe_producers` answer each partition's error.
"""

from __future__ import annotations

import random
import re
import struct
import uuid
from dataclasses import dataclass, field

from coordinator import messages as gm
from coordinator.config import GroupCoordinatorConfig
from coordinator.coordinator import GroupCoordinator
from protocol.fetch_session import ChangeJournal, FetchSessionCache
from replicas.errors import RecordValidationError
from replicas.legacy_offsets import offsets_before
from replicas.record_validation import LONG_MAX, TimestampBounds, validate_records
from replicas.records import iter_headers
from transactions import messages as tm
from transactions.coordinator import TransactionCoordinator
from protocol.api import topic_id_text
from replicas.errors import ErrorCode as E
from protocol.api import (
    LogDir, LogDirPartition, OngoingReassignment, BrokerNode, Deferred, ClusterMetadata, ConfigEntry, ConfigResource, ConfigsOutcome, FetchAsk,
    FetchOutcome, OffsetAnswer, PartitionMetadata, ProduceOutcome, TopicMetadata,
    TopicOutcome, TopicSpec,
)
from tests.fake_shares import FakeShares

TP = tuple[str, int]

NONE = 0
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
INVALID_TOPIC = 17
INVALID_REQUIRED_ACKS = 21
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
INVALID_REQUEST = 42
INVALID_PRODUCER_ID_MAPPING = 49
COORDINATOR_NOT_AVAILABLE = 15
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75

TOPIC, BROKER = 2, 4
SOURCE_TOPIC, SOURCE_STATIC_BROKER, SOURCE_DEFAULT = 1, 4, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

TOPIC_DEFAULTS = {"cleanup.policy": "delete", "retention.ms": "604800000",
                  "segment.bytes": "1073741824", "min.insync.replicas": "1"}
BROKER_CONFIGS = {"log.dirs": "/tmp/rayka", "num.partitions": "1",
                  "auto.create.topics.enable": "true"}
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


@dataclass
class Batch:
    base_offset: int
    count: int
    max_timestamp: int
    data: bytes

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.count


def batch_shape(data: bytes) -> tuple[int, int]:
    """(record count, max timestamp) of a magic-2 batch; (1, -1) for other bytes."""
    if len(data) >= 61 and data[16] == 2:
        (last_delta,) = struct.unpack_from(">i", data, 23)
        (max_ts,) = struct.unpack_from(">q", data, 35)
        return last_delta + 1, max_ts
    return 1, -1


@dataclass
class Partition:
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader_epoch: int = 0
    log_start: int = 0
    batches: list[Batch] = field(default_factory=list)
    epochs: list[tuple[int, int]] = field(default_factory=lambda: [(0, 0)])
    hw: int | None = None                      # None: the log end

    @property
    def log_end(self) -> int:
        return self.batches[-1].next_offset if self.batches else self.log_start

    @property
    def high_watermark(self) -> int:
        return self.log_end if self.hw is None else self.hw

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        """Kafka's LeaderEpochFileCache.endOffsetFor: (epoch, end offset), or (-1, -1)."""
        if not self.epochs or epoch < self.epochs[0][0] or epoch > self.epochs[-1][0]:
            return -1, -1
        if epoch == self.epochs[-1][0]:
            return epoch, self.log_end
        found = max(i for i, (e, _) in enumerate(self.epochs) if e <= epoch)
        return self.epochs[found][0], self.epochs[found + 1][1]

    def epoch_at(self, offset: int) -> int:
        return max((e for e, start in self.epochs if start <= offset), default=-1)


class NotAnsweredYet(AssertionError):
    """result() of a group call the coordinator has not answered (it is parked)."""


class FakeBrokerApi(FakeShares):
    """One in-memory broker (see the module docstring). Deterministic: a fake clock, no threads."""

    def __init__(self, broker_id: int = 1, cluster_id: str = "fake-cluster",
                 controller_id: int = 1, auto_create_topics_enable: bool = True,
                 num_partitions: int = 1, default_replication_factor: int = 1,
                 group_config: GroupCoordinatorConfig | None = None,
                 fetch_session_slots: int = 1000, clock_ms=None,
                 full_read_interval_ms: int = 1000):
        self.broker_id = broker_id
        # With a clock the sessions read only what the journal names (append() notes it;
        # a test changing a partition otherwise calls fetch_changes.note itself).
        self.fetch_sessions = FetchSessionCache(fetch_session_slots, random.Random(7),
                                                clock_ms, full_read_interval_ms)
        if clock_ms is not None:
            self.fetch_changes = ChangeJournal()
        self.cluster_id = cluster_id
        self.controller_id = controller_id
        self.auto_create_topics_enable = auto_create_topics_enable
        self.num_partitions = num_partitions
        self.default_replication_factor = default_replication_factor
        self.brokers: dict[int, tuple[dict[str, tuple[str, int]], str | None]] = {}
        self.topics: dict[str, dict[int, Partition]] = {}
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.topic_id_of: dict[str, str] = {}
        self._topic_seq = 0
        self.errors: dict[object, int] = {}
        self.preferred_read_replicas: dict[TP, int] = {}
        self.raises: dict[str, Exception] = {}
        self.calls: list[tuple[str, dict]] = []
        self.acls: list = []                       # ACL bindings created, in order
        self.quotas: dict = {}                     # protocol.quotas.QuotaEntity → {key: value}
        self.scram: dict = {}                      # user → {mechanism type: iterations}
        self.producers: dict[int, int] = {}        # producer id -> epoch
        self.next_producer_id = 1000
        self.add_broker(broker_id, PLAINTEXT=("127.0.0.1", 9092))
        # consumer groups
        self.coordinator_nodes: dict[str, int] = {}
        self.coordinator_errors: dict[str, int] = {}
        self.clock_ms = 0
        self._uuids = 0
        self.coordinator = GroupCoordinator(broker_id, lambda: self.clock_ms, group_config,
                                            new_uuid=self._next_uuid)
        self.group_events: list = []
        self.answers: dict[int, object] = {}
        self.offsets_log: list[gm.Append] = []
        self.held_appends: list[gm.Append] = []
        self.hold_appends = False
        self.append_error = NONE
        self._next_request_id = 1
        self.txn_coordinator = TransactionCoordinator(broker_id, lambda: self.clock_ms,
                                                      self._new_producer_id)
        self.markers: list = []                    # WriteMarkers the coordinator asked for
        self.zk_offsets: dict = {}                 # OffsetCommit v0: (group, tp) -> offset
        self.reassignments: dict = {}              # tp -> target replicas (KIP-455)
        FakeShares.__init__(self)

    # -- setup ----------------------------------------------------------------------------------
    def add_broker(self, broker_id: int, rack: str | None = None, **endpoints):
        """A live broker; endpoints by listener name: PLAINTEXT=("host", port)."""
        self.brokers[broker_id] = (dict(endpoints), rack)
        return self

    def add_topic(self, name: str, partitions: int = 1, replicas=None, leader=None,
                  leader_epoch: int = 0, configs=None):
        """`replicas`: one tuple of broker ids for every partition (default: this broker)."""
        reps = tuple(replicas) if replicas is not None else (self.broker_id,)
        self.topics[name] = {
            p: Partition(leader=reps[0] if leader is None else leader, replicas=reps,
                         isr=reps, leader_epoch=leader_epoch,
                         epochs=[(leader_epoch, 0)])
            for p in range(partitions)}
        self.topic_configs[name] = dict(configs or {})
        self._new_topic_id(name)
        return self

    def _new_topic_id(self, name: str) -> str:
        self._topic_seq += 1
        tid = self.topic_id_of[name] = topic_id_text(uuid.UUID(int=0x7000 + self._topic_seq))
        return tid

    def topic_ids(self) -> dict[str, str]:
        return {t: self.topic_id_of[t] for t in self.topics}

    def topic_partition_counts(self) -> dict[str, tuple[str, int]]:
        return {t: (self.topic_id_of[t], len(ps)) for t, ps in self.topics.items()}

    def partition(self, tp: TP) -> Partition:
        return self.topics[tp[0]][tp[1]]

    def append(self, tp: TP, data: bytes, count: int | None = None,
               timestamp: int | None = None) -> int:
        """Append a batch as the leader would; its base offset."""
        part = self.partition(tp)
        shape = batch_shape(data)
        base = part.log_end
        part.batches.append(Batch(base, shape[0] if count is None else count,
                                  shape[1] if timestamp is None else timestamp, bytes(data)))
        if hasattr(self, "fetch_changes"):
            self.fetch_changes.note([tuple(tp)])
        return base

    def new_leader_epoch(self, tp: TP, leader: int | None = None) -> int:
        part = self.partition(tp)
        part.leader_epoch += 1
        part.epochs.append((part.leader_epoch, part.log_end))
        if leader is not None:
            part.leader = leader
        return part.leader_epoch

    def calls_of(self, method: str) -> list[dict]:
        return [args for name, args in self.calls if name == method]

    # -- helpers --------------------------------------------------------------------------------
    def _record(self, method: str, **args) -> None:
        self.calls.append((method, args))
        exc = self.raises.get(method)
        if exc is not None:
            raise exc

    def _partition_error(self, tp: TP, current_leader_epoch: int = -1,
                         leader_only: bool = True) -> int:
        if tp in self.errors:
            return self.errors[tp]
        part = self.topics.get(tp[0], {}).get(tp[1])
        if part is None:
            return UNKNOWN_TOPIC_OR_PARTITION
        if leader_only and part.leader != self.broker_id:
            return NOT_LEADER_OR_FOLLOWER
        if current_leader_epoch >= 0 and current_leader_epoch != part.leader_epoch:
            return FENCED_LEADER_EPOCH if current_leader_epoch < part.leader_epoch \
                else UNKNOWN_LEADER_EPOCH
        return NONE

    # -- BrokerApi: metadata -------------------------------------------------------------------
    def metadata(self, topics, allow_auto_create: bool, listener: str) -> ClusterMetadata:
        self._record("metadata", topics=None if topics is None else list(topics),
                     allow_auto_create=allow_auto_create, listener=listener)
        brokers = tuple(BrokerNode(b, eps[listener][0], eps[listener][1], rack)
                        for b, (eps, rack) in sorted(self.brokers.items()) if listener in eps)
        names = list(self.topics) if topics is None else list(dict.fromkeys(topics))
        out = []
        for name in names:
            if name in self.errors:
                out.append(TopicMetadata(name, self.errors[name]))
            elif name in self.topics:
                out.append(TopicMetadata(name, NONE, tuple(
                    self._partition_metadata((name, p), part)
                    for p, part in sorted(self.topics[name].items())),
                    topic_id=self.topic_id_of[name]))
            elif not (allow_auto_create and self.auto_create_topics_enable):
                out.append(TopicMetadata(name, UNKNOWN_TOPIC_OR_PARTITION))
            elif not _LEGAL_NAME.fullmatch(name) or name in (".", ".."):
                out.append(TopicMetadata(name, INVALID_TOPIC))
            else:
                self.add_topic(name, self.num_partitions)
                out.append(TopicMetadata(name, LEADER_NOT_AVAILABLE))   # no leaders yet
        return ClusterMetadata(self.cluster_id, self.controller_id, brokers, tuple(out))

    def _partition_metadata(self, tp: TP, part: Partition) -> PartitionMetadata:
        live = part.leader in self.brokers
        error = self.errors.get(tp, NONE if live else LEADER_NOT_AVAILABLE)
        return PartitionMetadata(tp[1], error, part.leader if live else -1, part.leader_epoch,
                                 part.replicas, tuple(r for r in part.isr if r in self.brokers),
                                 tuple(r for r in part.replicas if r not in self.brokers))

    # -- BrokerApi: data -----------------------------------------------------------------------
    def produce(self, acks: int, timeout_ms: int, partitions,
                transactional_id: str | None = None,
                add_partitions: bool = False) -> dict[TP, ProduceOutcome]:
        partitions = [(tp, bytes(data)) for tp, data in partitions]
        self._record("produce", acks=acks, timeout_ms=timeout_ms, partitions=partitions,
                     **({"transactional_id": transactional_id} if transactional_id else {}),
                     **({"add_partitions": True} if add_partitions else {}))
        out = {}
        for tp, data in partitions:
            error = INVALID_REQUIRED_ACKS if acks not in (-1, 0, 1) else self._partition_error(tp)
            if error:
                out[tp] = ProduceOutcome(error, message=f"error {error} for {tp}")
                continue
            try:
                self._validate(tp, data)
            except RecordValidationError as exc:
                out[tp] = ProduceOutcome(exc.code, message=exc.message,
                                         record_errors=exc.record_errors)
                continue
            out[tp] = ProduceOutcome(NONE, self.append(tp, data),
                                     self.partition(tp).log_start)
        return out

    def _validate(self, tp: TP, data: bytes) -> None:
        """The real per-record checks (replicas/record_validation.py), by the topic's configs
        and the fake clock."""
        if not data or data[16:17] != b"\x02":
            return
        cfg = self.topic_configs.get(tp[0], {})
        bounds = TimestampBounds.from_configs(*(
            int(cfg.get(f"message.timestamp.{k}.max.ms", LONG_MAX))
            for k in ("difference", "before", "after")))
        validate_records(data, list(iter_headers(data)), f"{tp[0]}-{tp[1]}",
                         "compact" in str(cfg.get("cleanup.policy", "")), bounds,
                         lambda: self.clock_ms)

    def fetch(self, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
              isolation_level: int, asks, reads=None, client=None,
              session=None) -> dict[TP, FetchOutcome]:
        asks = list(asks)
        reads = reads() if reads is not None else None
        self._record("fetch", replica_id=replica_id, max_wait_ms=max_wait_ms,
                     min_bytes=min_bytes, max_bytes=max_bytes,
                     isolation_level=isolation_level, asks=asks, reads=reads, client=client,
                     session=session)
        out = {}
        for ask in asks:
            if reads is None or ask.tp in reads:
                out[ask.tp] = self._fetch_one(ask, replica_id, client)
        return out

    def _fetch_one(self, ask: FetchAsk, replica_id: int, client=None) -> FetchOutcome:
        part = self.topics.get(ask.tp[0], {}).get(ask.tp[1])
        follower_ok = client is not None and replica_id < 0 and part is not None and \
            self.broker_id in part.replicas
        error = self._partition_error(ask.tp, ask.current_leader_epoch,
                                      leader_only=not follower_ok)
        if error:       # the current leader, as the real broker answers it (KIP-951)
            return FetchOutcome(error, leader=(part.leader, part.leader_epoch)
                                if part is not None else (-1, -1))
        hw = part.high_watermark
        leader = (part.leader, part.leader_epoch)
        preferred = self.preferred_read_replicas.get(ask.tp, -1) \
            if follower_ok and part.leader == self.broker_id else -1
        if preferred >= 0:
            return FetchOutcome(NONE, b"", hw, hw, part.log_start, None, leader,
                                preferred_read_replica=preferred)
        if ask.last_fetched_epoch >= 0:
            epoch, end = part.end_offset_for(ask.last_fetched_epoch)
            if epoch != ask.last_fetched_epoch or end < ask.offset:
                return FetchOutcome(NONE, b"", hw, hw, part.log_start, (epoch, end), leader)
        if not part.log_start <= ask.offset <= part.log_end:
            return FetchOutcome(OFFSET_OUT_OF_RANGE, b"", hw, hw, part.log_start,
                                leader=leader)
        limit = part.log_end if replica_id >= 0 else hw      # consumers read up to the HW
        chunks, size = [], 0
        for b in part.batches:
            if b.next_offset <= ask.offset or b.base_offset >= limit:
                continue
            if chunks and size + len(b.data) > ask.max_bytes:
                break                       # the first batch goes even when too big (KIP-74)
            chunks.append(b.data)
            size += len(b.data)
        return FetchOutcome(NONE, b"".join(chunks), hw, hw, part.log_start, None, leader)

    def delete_records(self, asks, timeout_ms: int) -> dict[TP, tuple[int, int]]:
        asks = list(asks)
        self._record("delete_records", asks=asks, timeout_ms=timeout_ms)
        out = {}
        for tp, offset in asks:
            error = self._partition_error(tp, -1)
            part = None if error else self.partition(tp)
            target = -2 if part is None else part.high_watermark if offset == -1 else offset
            if not error and not 0 <= target <= part.high_watermark:
                error = OFFSET_OUT_OF_RANGE
            if not error:
                part.log_start = max(part.log_start, target)
            out[tp] = (error, -1) if error else (NONE, part.log_start)
        return out

    def list_offsets(self, isolation_level: int, asks) -> dict[TP, OffsetAnswer]:
        asks = list(asks)
        self._record("list_offsets", isolation_level=isolation_level, asks=asks)
        out = {}
        for tp, timestamp, current_epoch in asks:
            error = self._partition_error(tp, current_epoch)
            if error:
                out[tp] = OffsetAnswer(error)
                continue
            part = self.partition(tp)
            if timestamp == -2:
                offset, ts = part.log_start, -1
            elif timestamp == -1:
                offset, ts = part.high_watermark, -1
            elif timestamp == -3:
                best = max(part.batches, key=lambda b: b.max_timestamp, default=None)
                offset, ts = (-1, -1) if best is None else (best.next_offset - 1,
                                                            best.max_timestamp)
            else:
                found = next((b for b in part.batches if b.max_timestamp >= timestamp), None)
                offset, ts = (-1, -1) if found is None else (found.base_offset,
                                                             found.max_timestamp)
            out[tp] = OffsetAnswer(NONE, ts, offset, part.epoch_at(offset) if offset >= 0 else -1)
        return out

    def legacy_offsets(self, replica_id: int, asks) -> list[tuple[int, tuple[int, ...]]]:
        """ListOffsets v0 over one segment per batch (its max timestamp as its time), the last
        one active."""
        asks = list(asks)
        self._record("legacy_offsets", replica_id=replica_id, asks=asks)
        out = []
        for tp, timestamp, max_num in asks:
            error = self._partition_error(tp)
            if error:
                out.append((error, ()))
                continue
            part = self.partition(tp)
            segments = [(b.base_offset, b.max_timestamp) for b in part.batches] or \
                [(part.log_start, 0)]
            out.append((NONE, offsets_before(
                segments, len(part.batches), part.log_start, part.log_end, part.high_watermark,
                self.clock_ms, timestamp, max_num, from_consumer=replica_id == -1)))
        return out

    def offsets_for_leader_epoch(self, asks) -> dict[TP, OffsetAnswer]:
        asks = list(asks)
        self._record("offsets_for_leader_epoch", asks=asks)
        out = {}
        for tp, current_epoch, epoch in asks:
            error = self._partition_error(tp, current_epoch)
            if error:
                out[tp] = OffsetAnswer(error)
            else:
                found, end = self.partition(tp).end_offset_for(epoch)
                out[tp] = OffsetAnswer(NONE, offset=end, leader_epoch=found)
        return out

    finalized = ({"transaction.version": 2}, 0)

    def finalized_features(self):
        return self.finalized

    def update_features(self, updates, validate_only: bool):
        from controller.features import plan_update
        self._record("update_features", updates=list(updates), validate_only=validate_only)
        error, message, levels = plan_update(self.finalized[0], updates)
        if not error and not validate_only:
            self.finalized = (levels, self.finalized[1] + 1)
        return error, message

    def init_producer_id(self, transactional_id, producer_id: int, producer_epoch: int):
        self._record("init_producer_id", transactional_id=transactional_id,
                     producer_id=producer_id, producer_epoch=producer_epoch)
        if producer_id < 0:
            pid, self.next_producer_id = self.next_producer_id, self.next_producer_id + 1
            self.producers[pid] = 0
            return NONE, pid, 0
        if self.producers.get(producer_id) != producer_epoch:
            return INVALID_PRODUCER_ID_MAPPING, -1, -1
        self.producers[producer_id] = producer_epoch + 1
        return NONE, producer_id, producer_epoch + 1

    # -- BrokerApi: topic admin ----------------------------------------------------------------
    def create_topics(self, specs, timeout_ms: int, validate_only: bool):
        specs = list(specs)
        self._record("create_topics", specs=specs, timeout_ms=timeout_ms,
                     validate_only=validate_only)
        return {s.name: self._create_one(s, validate_only) for s in specs}

    def _create_one(self, spec: TopicSpec, validate_only: bool) -> TopicOutcome:
        if spec.name in self.errors:
            return TopicOutcome(self.errors[spec.name], f"injected for {spec.name}")
        if not _LEGAL_NAME.fullmatch(spec.name) or spec.name in (".", ".."):
            return TopicOutcome(INVALID_TOPIC, f"illegal name {spec.name!r}")
        if spec.name in self.topics:
            return TopicOutcome(TOPIC_ALREADY_EXISTS, f"Topic '{spec.name}' already exists.")
        unknown = sorted(set(spec.configs) - set(TOPIC_DEFAULTS))
        if unknown:
            return TopicOutcome(INVALID_CONFIG, f"unknown configs {unknown}")
        if spec.assignments:
            count = len(spec.assignments)
            rf = len(next(iter(spec.assignments.values())))
        else:
            count = self.num_partitions if spec.partitions == -1 else spec.partitions
            rf = self.default_replication_factor if spec.replication_factor == -1 \
                else spec.replication_factor
        if count <= 0:
            return TopicOutcome(INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        live = sorted(self.brokers)
        if not 0 < rf <= len(live):
            return TopicOutcome(INVALID_REPLICATION_FACTOR,
                                f"Replication factor: {rf} larger than available brokers: "
                                f"{len(live)}.")
        configs = {k: v for k, v in spec.configs.items() if v is not None}
        if not validate_only:
            self.topics[spec.name] = {
                p: Partition(leader=reps[0], replicas=reps, isr=reps)
                for p in range(count)
                for reps in [tuple(spec.assignments.get(p, ())) or
                             tuple(live[(p + i) % len(live)] for i in range(rf))]}
            self.topic_configs[spec.name] = configs
        topic_id = None if validate_only else self._new_topic_id(spec.name)
        entries = tuple(self._topic_entries(configs, None))
        return TopicOutcome(NONE, None, count, rf, entries, topic_id=topic_id)

    def delete_topics(self, names, timeout_ms: int):
        names = list(names)
        self._record("delete_topics", names=names, timeout_ms=timeout_ms)
        out = {}
        for name in names:
            if name in self.errors:
                out[name] = TopicOutcome(self.errors[name], f"injected for {name}")
            elif name not in self.topics:
                out[name] = TopicOutcome(UNKNOWN_TOPIC_OR_PARTITION,
                                         "This server does not host this topic-partition.")
            else:
                del self.topics[name]
                self.topic_configs.pop(name, None)
                out[name] = TopicOutcome(NONE)
        return out

    def create_partitions(self, asks, timeout_ms: int, validate_only: bool):
        asks = [(name, count, None if a is None else [tuple(r) for r in a])
                for name, count, a in asks]
        self._record("create_partitions", asks=asks, timeout_ms=timeout_ms,
                     validate_only=validate_only)
        out = {}
        for name, count, assignments in asks:
            parts = self.topics.get(name)
            if name in self.errors:
                out[name] = TopicOutcome(self.errors[name], f"injected for {name}")
            elif parts is None:
                out[name] = TopicOutcome(UNKNOWN_TOPIC_OR_PARTITION,
                                         f"The topic '{name}' does not exist.")
            elif count <= len(parts):
                out[name] = TopicOutcome(INVALID_PARTITIONS,
                                         f"Topic currently has {len(parts)} partitions, "
                                         f"which is higher than the requested {count}.")
            elif assignments is not None and len(assignments) != count - len(parts):
                out[name] = TopicOutcome(E.INVALID_REPLICA_ASSIGNMENT,
                                         "Increasing the number of partitions by "
                                         f"{count - len(parts)} but {len(assignments)} "
                                         "assignments provided.")
            else:
                if not validate_only:
                    template = parts[0].replicas
                    for i, p in enumerate(range(len(parts), count)):
                        reps = tuple(assignments[i]) if assignments else template
                        parts[p] = Partition(leader=reps[0], replicas=reps, isr=reps)
                out[name] = TopicOutcome(NONE, partitions=count)
        return out

    # -- BrokerApi: configs --------------------------------------------------------------------
    def _topic_entries(self, configs: dict, keys):
        for name, default in TOPIC_DEFAULTS.items():
            if keys is None or name in keys:
                if name in configs:
                    yield ConfigEntry(name, configs[name], source=SOURCE_TOPIC)
                else:
                    yield ConfigEntry(name, default, is_default=True, source=SOURCE_DEFAULT,
                                      doc=f"the {name} default")

    def describe_configs(self, resources):
        resources = [(r, None if keys is None else list(keys)) for r, keys in resources]
        self._record("describe_configs", resources=resources)
        out = {}
        for res, keys in resources:
            if res in self.errors:
                out[res] = ConfigsOutcome(self.errors[res], f"injected for {res.name}")
            elif res.kind == TOPIC:
                if res.name not in self.topics:
                    out[res] = ConfigsOutcome(UNKNOWN_TOPIC_OR_PARTITION,
                                              f"Topic {res.name} does not exist")
                else:
                    out[res] = ConfigsOutcome(NONE, None, tuple(
                        self._topic_entries(self.topic_configs[res.name], keys)))
            elif res.kind == BROKER and res.name in ("", str(self.broker_id)):
                out[res] = ConfigsOutcome(NONE, None, tuple(
                    ConfigEntry(k, v, read_only=True, source=SOURCE_STATIC_BROKER)
                    for k, v in BROKER_CONFIGS.items() if keys is None or k in keys))
            else:
                out[res] = ConfigsOutcome(INVALID_REQUEST, f"Unexpected resource {res}")
        return out

    def alter_configs(self, resources, validate_only: bool):
        resources = [(r, [tuple(op) for op in ops]) for r, ops in resources]
        self._record("alter_configs", resources=resources, validate_only=validate_only)
        out = {}
        for res, ops in resources:
            if res in self.errors:
                out[res] = ConfigsOutcome(self.errors[res], f"injected for {res.name}")
            elif res.kind != TOPIC:
                out[res] = ConfigsOutcome(INVALID_REQUEST, "only topic configs are alterable")
            elif res.name not in self.topics:
                out[res] = ConfigsOutcome(UNKNOWN_TOPIC_OR_PARTITION,
                                          f"Topic {res.name} does not exist")
            else:
                out[res] = self._alter_topic(res.name, ops, validate_only)
        return out

    def replace_configs(self, resources, validate_only: bool):
        resources = [(r, [tuple(e) for e in entries]) for r, entries in resources]
        self._record("replace_configs", resources=resources, validate_only=validate_only)
        out = {}
        for res, entries in resources:
            if res.kind != TOPIC:
                out[res] = ConfigsOutcome(INVALID_CONFIG, "broker configs are static")
            elif res.name not in self.topics:
                out[res] = ConfigsOutcome(UNKNOWN_TOPIC_OR_PARTITION,
                                          f"Topic {res.name} does not exist")
            elif any(name not in TOPIC_DEFAULTS for name, _ in entries):
                out[res] = ConfigsOutcome(INVALID_CONFIG, "unknown config")
            else:
                if not validate_only:
                    self.topic_configs[res.name] = dict(entries)
                out[res] = ConfigsOutcome(NONE)
        return out

    # -- replicas: log dirs, elections, reassignments ---------------------------------------
    def known_partitions(self, tps):
        return {tuple(tp) for tp in tps if tp[0] in self.topics and tp[1] in self.topics[tp[0]]}

    def describe_log_dirs(self, tps):
        self._record("describe_log_dirs", tps=tps)
        wanted = None if tps is None else {tuple(tp) for tp in tps}
        parts = tuple(LogDirPartition((t, p), sum(len(b.data) for b in part.batches), 0)
                      for t, ps in sorted(self.topics.items()) for p, part in sorted(ps.items())
                      if self.broker_id in part.replicas and (wanted is None or (t, p) in wanted))
        return [LogDir("/data/broker-1", NONE, parts, 1000, 500)]

    def elect_leaders(self, election_type, tps, timeout_ms):
        """Kafka's controller rules on the fake's partitions: preferred = first replica,
        which must be live (a known broker or this one) and in the ISR."""
        self._record("elect_leaders", election_type=election_type, tps=tps,
                     timeout_ms=timeout_ms)
        if tps is None:
            tps = [(t, p) for t, ps in sorted(self.topics.items()) for p in sorted(ps)]
        live = set(self.brokers) | {self.broker_id}
        out = {}
        for tp in tps:
            part = self.topics.get(tp[0], {}).get(tp[1])
            if part is None:
                out[tp] = (UNKNOWN_TOPIC_OR_PARTITION, f"{tp} does not exist")
            elif election_type == 0:
                preferred = part.replicas[0]
                if part.leader == preferred:
                    out[tp] = (E.ELECTION_NOT_NEEDED, None)
                elif preferred not in live or preferred not in part.isr:
                    out[tp] = (E.PREFERRED_LEADER_NOT_AVAILABLE, None)
                else:
                    part.leader = preferred
                    out[tp] = (NONE, None)
            elif part.leader in live:
                out[tp] = (E.ELECTION_NOT_NEEDED, None)
            else:
                alive = [r for r in part.replicas if r in live]
                if not alive:
                    out[tp] = (E.ELIGIBLE_LEADERS_NOT_AVAILABLE, None)
                else:
                    part.leader = alive[0]
                    out[tp] = (NONE, None)
        return out

    def alter_partition_reassignments(self, targets, timeout_ms):
        self._record("alter_partition_reassignments", targets=dict(targets))
        out = {}
        for tp, target in targets.items():
            part = self.topics.get(tp[0], {}).get(tp[1])
            moving = self.reassignments.get(tp)
            if part is None:
                out[tp] = (UNKNOWN_TOPIC_OR_PARTITION, None)
            elif target is None:
                if moving is None:
                    out[tp] = (E.NO_REASSIGNMENT_IN_PROGRESS, None)
                else:
                    del self.reassignments[tp]
                    out[tp] = (NONE, None)
            elif not target or len(set(target)) != len(target):
                out[tp] = (E.INVALID_REPLICA_ASSIGNMENT, "bad target")
            else:
                self.reassignments[tp] = tuple(target)
                out[tp] = (NONE, None)
        return out

    def list_partition_reassignments(self, tps):
        self._record("list_partition_reassignments", tps=tps)
        out = []
        for tp, target in sorted(self.reassignments.items()):
            if tps is not None and tp not in tps:
                continue
            origin = self.topics[tp[0]][tp[1]].replicas
            full = tuple(dict.fromkeys(target + origin))
            out.append(OngoingReassignment(tp, full, tuple(r for r in full if r not in origin),
                                           tuple(r for r in full if r not in target)))
        return out

    def _alter_topic(self, topic: str, ops, validate_only: bool) -> ConfigsOutcome:
        configs = dict(self.topic_configs[topic])
        for name, op, value in ops:
            if name not in TOPIC_DEFAULTS or op not in (SET, DELETE, APPEND, SUBTRACT):
                return ConfigsOutcome(INVALID_CONFIG, f"cannot apply op {op} to {name}")
            items = [x for x in configs.get(name, TOPIC_DEFAULTS[name]).split(",") if x]
            if op == SET:
                configs[name] = value
            elif op == DELETE:
                configs.pop(name, None)
            elif op == APPEND:
                configs[name] = ",".join(items + [value])
            else:
                configs[name] = ",".join(x for x in items if x != value)
        if not validate_only:
            self.topic_configs[topic] = configs
        return ConfigsOutcome(NONE)

    # -- consumer groups: setup -----------------------------------------------------------------
    def _next_uuid(self) -> uuid.UUID:
        self._uuids += 1
        return uuid.UUID(int=self._uuids)

    def group_partition(self, group_id: str) -> int:
        return self.coordinator.partition_for(group_id)

    def own_offsets(self, partitions=None, records=()):
        """Load `__consumer_offsets` partitions (None: all of them) with `records`."""
        if partitions is None:
            partitions = range(self.coordinator.config.offsets_topic_num_partitions)
        for p in partitions:
            self._group_process(gm.LoadPartition(p, tuple(records)))
        return self

    def own_groups(self, *group_ids: str):
        return self.own_offsets(sorted({self.group_partition(g) for g in group_ids}))

    def begin_load(self, partition: int) -> None:
        self._group_process(gm.BeginLoad(partition))

    def unload(self, partition: int) -> None:
        self._group_process(gm.UnloadPartition(partition))

    def advance(self, ms: int) -> None:
        """Move the fake clock and let the coordinator fire what is due."""
        self.clock_ms += ms
        self._group_process(gm.Tick())

    def release_appends(self, error: int = NONE) -> None:
        """Acknowledge every held append with `error`, in append order."""
        held, self.held_appends = self.held_appends, []
        for append in held:
            self._group_process(gm.AppendDone(append.token, error))

    def _group_process(self, event) -> None:
        acks = []
        for effect in self.coordinator.process(event):
            if isinstance(effect, gm.Respond):
                assert effect.request_id not in self.answers, "answered twice"
                self.answers[effect.request_id] = effect.result
            elif isinstance(effect, gm.Append):
                self.offsets_log.append(effect)
                (self.held_appends if self.hold_appends else acks).append(effect)
        for append in acks:         # acknowledged after this event's effects, in order
            self._group_process(gm.AppendDone(append.token, self.append_error))

    # -- BrokerApi: consumer groups ---------------------------------------------------------------
    def find_coordinator(self, keys, listener: str, key_type: int = 0):
        group_ids = list(keys)
        self._record("find_coordinator", group_ids=group_ids, listener=listener,
                     **({"key_type": key_type} if key_type else {}))
        out = {}
        for g in group_ids:
            if g in self.coordinator_errors:
                out[g] = (self.coordinator_errors[g], -1, "", -1)
                continue
            node = self.coordinator_nodes.get(g, self.broker_id)
            endpoint = self.brokers.get(node, ({}, None))[0].get(listener)
            out[g] = (COORDINATOR_NOT_AVAILABLE, -1, "", -1) if endpoint is None \
                else (NONE, node, endpoint[0], endpoint[1])
        return out

    def zk_commit_offsets(self, group_id: str, asks) -> dict[TP, int]:
        """OffsetCommit v0: a dict stands in for ZooKeeper's /consumers."""
        asks = list(asks)
        self._record("zk_commit_offsets", group_id=group_id, asks=asks)
        out = {}
        for tp, offset, _metadata in asks:
            error = self._partition_error(tp, leader_only=False)
            if not error:
                self.zk_offsets[(group_id, tp)] = offset
            out[tp] = error
        return out

    def zk_fetch_offsets(self, group_id: str, tps) -> dict[TP, tuple[int, int]]:
        tps = list(tps)
        self._record("zk_fetch_offsets", group_id=group_id, tps=tps)
        return {tp: (NONE, self.zk_offsets[(group_id, tp)]) if (group_id, tp) in self.zk_offsets
                else (UNKNOWN_TOPIC_OR_PARTITION, -1) for tp in tps}

    def group_call(self, make_event) -> Deferred:
        rid, self._next_request_id = self._next_request_id, self._next_request_id + 1
        event = make_event(rid)
        self._record("group_call", event=event)
        self.group_events.append(event)
        self._group_process(event)

        def result():
            if rid not in self.answers:
                raise NotAnsweredYet(f"request {rid} ({type(event).__name__}) is parked")
            return self.answers[rid]
        return Deferred(result)

    # -- transactions: a real transaction coordinator owning every partition ------------------
    def own_txns(self):
        """Load every `__transaction_state` partition (empty) at coordinator epoch 0."""
        for p in range(self.txn_coordinator.config.transaction_state_log_num_partitions):
            self._txn_process(tm.LoadPartition(p, 0, ()))
        return self

    def _txn_process(self, event) -> None:
        follow = []
        for effect in self.txn_coordinator.process(event):
            if isinstance(effect, tm.Respond):
                assert effect.request_id not in self.answers, "answered twice"
                self.answers[effect.request_id] = effect.result
            elif isinstance(effect, tm.Append):
                follow.append(tm.AppendDone(effect.token, self.append_error))
            elif isinstance(effect, tm.WriteMarkers):
                self.markers.append(effect)
                follow.append(tm.MarkersWritten(effect.transactional_id, effect.producer_id,
                                                effect.producer_epoch, effect.committed,
                                                effect.coordinator_epoch))
        for event in follow:        # acknowledged after this event's effects, in order
            self._txn_process(event)

    def _new_producer_id(self) -> int:
        pid, self.next_producer_id = self.next_producer_id, self.next_producer_id + 1
        return pid

    def txn_call(self, make_event) -> Deferred:
        rid, self._next_request_id = self._next_request_id, self._next_request_id + 1
        event = make_event(rid)
        self._record("txn_call", event=event)
        self._txn_process(event)

        def result():
            if rid not in self.answers:
                raise NotAnsweredYet(f"request {rid} ({type(event).__name__}) is parked")
            return self.answers[rid]
        return Deferred(result)

    def write_txn_markers(self, markers, timeout_ms: int) -> Deferred:
        self._record("write_txn_markers", markers=list(markers), timeout_ms=timeout_ms)
        return Deferred.done([{tuple(tp): self._partition_error(tuple(tp)) for tp in mk[4]}
                              for mk in markers])

    def describe_producers(self, tps):
        self._record("describe_producers", tps=list(tps))
        return {tuple(tp): (self._partition_error(tuple(tp)), []) for tp in tps}

    # -- ACLs: `acls` holds the bindings (an authorizer loads them, as a broker's does) ---------
    def create_acls(self, bindings):
        self._record("create_acls", bindings=list(bindings))
        self.acls += [b for b in bindings if b not in self.acls]
        return [(0, None)] * len(bindings)

    # -- client quotas and SCRAM: `quotas` holds the entities, `scram` user → {mechanism type:
    # iterations} ------------------------------------------------------------------------------
    def client_quotas(self):
        self._record("client_quotas")
        return {e: dict(v) for e, v in self.quotas.items()}

    def alter_client_quotas(self, asks, validate_only):
        self._record("alter_client_quotas", asks=list(asks), validate_only=validate_only)
        for entity, ops in ([] if validate_only else asks):
            values = self.quotas.setdefault(entity, {})
            for key, value in ops:
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = float(value)
        return [(0, None)] * len(asks)

    def describe_scram(self, users):
        self._record("describe_scram", users=users)
        names = sorted(self.scram) if not users else list(dict.fromkeys(users))
        return [(u, 0, None, tuple(sorted(self.scram[u].items()))) if u in self.scram
                else (u, 91, f"Attempt to describe a user credential that does not exist: {u}",
                      ()) for u in names]

    def alter_scram(self, upsertions, deletions):
        self._record("alter_scram", upsertions=list(upsertions), deletions=list(deletions))
        for user, mech, iterations, _salt, _salted in upsertions:
            self.scram.setdefault(user, {})[mech] = iterations
        for user, mech in deletions:
            self.scram.get(user, {}).pop(mech, None)
        return [(u, 0, None) for u in dict.fromkeys(
            [u for u, *_ in upsertions] + [u for u, _ in deletions])]

    def delete_acls(self, filters):
        self._record("delete_acls", filters=list(filters))
        out = []
        for f in filters:
            gone = tuple(b for b in self.acls if f.matches(b))
            self.acls = [b for b in self.acls if b not in gone]
            out.append((0, None, gone))
        return out
