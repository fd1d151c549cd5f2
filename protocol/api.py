"""What the Kafka request handlers need from a broker: the `BrokerApi` protocol and its results.

Rules:
- The handlers (protocol/handlers/) are pure: they turn a decoded request into calls on a
  `BrokerApi` and its results into a response of the request's version. The broker actor
  implements `BrokerApi` (actors/kafka_api.py) over the SAME replica manager, waiters and
  ZooKeeper store its Ray methods use, so the wire is a second door, not a second copy.
- Batch calls answer per item: one result per partition (or topic, or config resource), each
  carrying its own Kafka error code, in the order asked. A call never raises for a per-item
  problem; a raise means the whole request failed (the handler answers its error code
  everywhere).
- Record batches stay bytes end to end. Partitions are `(topic, partition)` tuples.
- Topic ids travel in Kafka's Uuid text form (url-safe base64 of 16 bytes, unpadded, as
  ZooKeeper stores them); `topic_uuid` / `topic_id_text` convert to and from the wire's
  UUID (None is the zero UUID: "no id").
- A call that has to wait answers a `Deferred` instead of blocking: `produce` (appended
  when the call returns, in the order the requests came; the acknowledgements come later),
  `fetch` (parked until data arrives or max_wait passes), `group_call` (a JoinGroup parks
  until the rebalance completes). `result()` blocks until the value is there;
  `when_ready(callback)` calls back (from whichever thread completes it) once `result()`
  no longer blocks, so the listener's event loop never waits; `then(fn)` maps the value.
  The listener reads and appends a connection's next produce while one waits for its
  acknowledgements, and answers in request order.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from dataclasses import dataclass, field
from typing import Mapping, NamedTuple, Protocol, Sequence

from replicas.replica_types import ClientMetadata

TP = tuple[str, int]
ZERO_UUID = uuid.UUID(int=0)


def topic_uuid(text: str | None) -> uuid.UUID:
    """The wire UUID of a topic id in Kafka's text form (the zero UUID for None or a text
    that is not one)."""
    if not text:
        return ZERO_UUID
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return ZERO_UUID
    return uuid.UUID(bytes=raw) if len(raw) == 16 else ZERO_UUID


def topic_id_text(value: uuid.UUID | None) -> str | None:
    """Kafka's text form of a wire UUID; None for the zero UUID (kafka-python's None too)."""
    if value is None or value == ZERO_UUID:
        return None
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


class Deferred:
    """A result computed later: `result()` blocks until it is there (and may raise).
    `ready(callback)`, when given, arranges callback() for the moment result() stops
    blocking; without it `when_ready` says False and the caller waits in a thread."""

    __slots__ = ("_compute", "_ready")

    def __init__(self, compute, ready=None):
        self._compute = compute
        self._ready = ready

    def result(self):
        return self._compute()

    def when_ready(self, callback) -> bool:
        if self._ready is None:
            return False
        self._ready(callback)
        return True

    @staticmethod
    def done(value) -> "Deferred":
        """A Deferred whose value is already there."""
        return Deferred(lambda: value, _at_once)

    def then(self, fn) -> "Deferred":
        """A Deferred of fn(this one's value), ready when this one is."""
        return Deferred(lambda: fn(self._compute()), self._ready)

    @staticmethod
    def gather(deferreds) -> "Deferred":
        """A Deferred of the list of their values, ready when every one is."""
        deferreds = list(deferreds)

        def ready(callback):
            left = [len(deferreds)]

            def one():
                left[0] -= 1
                if left[0] == 0:
                    callback()
            if not deferreds:
                callback()
            for d in deferreds:
                if not d.when_ready(one):
                    one()
        return Deferred(lambda: [d.result() for d in deferreds], ready)


def _at_once(callback) -> None:
    callback()


@dataclass(frozen=True, slots=True)
class BrokerNode:
    id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    partition: int
    error: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    error: int
    partitions: tuple[PartitionMetadata, ...] = ()
    internal: bool = False
    topic_id: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    cluster_id: str
    controller_id: int
    brokers: tuple[BrokerNode, ...]
    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True, slots=True)
class ProduceOutcome:
    error: int
    base_offset: int = -1
    log_start_offset: int = -1
    message: str | None = None
    record_errors: tuple[tuple[int, str], ...] = ()    # KIP-467: (batch index, message)


class FetchAsk(NamedTuple):
    """One partition of a fetch; a tuple in the order the broker reads asks
    (actors/broker.fetch_begin), so it is handed on as it is. A fetch session keeps one per
    partition and replaces it only when the fetcher asks differently
    (protocol/fetch_session.py): a quiet partition costs no new one per fetch."""
    tp: TP
    offset: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    max_bytes: int = 1 << 20
    log_start_offset: int = -1          # a follower's own (the leader keeps it, KIP-392)


@dataclass(slots=True)      # not frozen: built per partition per fetch, 5x cheaper
class FetchOutcome:
    error: int
    records: bytes = b""
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    diverging_epoch: tuple[int, int] | None = None     # (epoch, end offset)
    leader: tuple[int, int] = (-1, -1)                   # current (leader id, leader epoch)
    # read_committed: (producer id, first offset) of the aborted transactions in `records`
    aborted_transactions: tuple[tuple[int, int], ...] | None = None
    preferred_read_replica: int = -1     # KIP-392: the client should fetch from this broker


class ShareFetchPartition:
    """One partition of a ShareFetch answer: its error, its acknowledgement's error, the
    batches read and the (first, last, delivery count) ranges acquired from them."""
    __slots__ = ("error", "ack_error", "records", "acquired", "leader", "message")

    def __init__(self, error=0, ack_error=0, records=b"", acquired=(), leader=(-1, -1),
                 message=None):
        self.error, self.ack_error, self.records = error, ack_error, records
        self.acquired, self.leader, self.message = acquired, leader, message


class ShareFetchResult:
    """A ShareFetch answer: a request-level error or its partitions ({tp: partition})."""
    __slots__ = ("error", "partitions", "lock_timeout_ms")

    def __init__(self, error=0, partitions=None, lock_timeout_ms=0):
        self.error, self.partitions = error, partitions or {}
        self.lock_timeout_ms = lock_timeout_ms


@dataclass(frozen=True, slots=True)
class OffsetAnswer:
    error: int
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int                                  # -1: the broker default (num.partitions)
    replication_factor: int                          # -1: default.replication.factor
    assignments: Mapping[int, Sequence[int]] = field(default_factory=dict)
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    read_only: bool = False
    is_default: bool = False
    source: int = 5             # DescribeConfigs: 1 TOPIC, 2 DYNAMIC_BROKER, 3 DYNAMIC_DEFAULT_
    sensitive: bool = False     # BROKER, 4 STATIC_BROKER, 5 DEFAULT
    doc: str | None = None
    synonyms: tuple = ()        # (name, value, source), most specific first


@dataclass(frozen=True, slots=True)
class TopicOutcome:
    error: int
    message: str | None = None
    partitions: int = -1
    replication_factor: int = -1
    configs: tuple[ConfigEntry, ...] = ()
    config_error: int = 0       # CreateTopics v5+: TOPIC_AUTHORIZATION_FAILED without DescribeConfigs
    topic_id: str | None = None         # CreateTopics: the new topic's id


@dataclass(frozen=True, slots=True)
class ConfigResource:
    kind: int                   # Kafka's ConfigResource.Type: 2 TOPIC, 4 BROKER
    name: str


@dataclass(frozen=True, slots=True)
class ConfigsOutcome:
    error: int
    message: str | None = None
    entries: tuple[ConfigEntry, ...] = ()


@dataclass(frozen=True, slots=True)
class LogDirPartition:
    tp: TP
    size: int                   # bytes of its segments
    offset_lag: int             # max(HW - LEO, 0), Kafka's getLogEndOffsetLag
    is_future: bool = False


@dataclass(frozen=True, slots=True)
class LogDir:
    path: str
    error: int
    partitions: tuple[LogDirPartition, ...] = ()
    total_bytes: int = -1
    usable_bytes: int = -1


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    tp: TP
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


class BrokerApi(Protocol):
    """One broker, as the Kafka request handlers see it."""

    broker_id: int
    auto_create_topics_enable: bool        # Kafka's broker config: Metadata may create topics

    def metadata(self, topics: Sequence[str] | None, allow_auto_create: bool,
                 listener: str) -> ClusterMetadata:
        """Brokers (their `listener` endpoint), controller, and the topics asked (None: all)."""

    def finalized_features(self) -> tuple[Mapping[str, int], int]:
        """The cluster's finalized feature levels and their epoch (-1: none known yet)."""

    def update_features(self, updates: Sequence[tuple[str, int, int]], validate_only: bool
                        ) -> tuple[int, str | None]:
        """UpdateFeatures: [(name, level, upgrade type)], all or nothing (controller/
        features.py); (error, message)."""

    def produce(self, acks: int, timeout_ms: int, partitions: Sequence[tuple[TP, bytes]],
                transactional_id: str | None = None, add_partitions: bool = False
                ) -> "dict[TP, ProduceOutcome] | Deferred":
        """A transactional producer's buffers are verified with the transaction coordinator
        before they are appended (KIP-890), or their partitions added to the transaction
        (`add_partitions`: Produce v12, transaction.version 2)."""

    def fetch(self, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
              isolation_level: int, asks: Sequence[FetchAsk], reads=None,
              client: ClientMetadata | None = None, session=None) -> dict[TP, FetchOutcome]:
        """Every ask is watched (a parked fetch wakes on any). `reads`, when given, is a
        callable the api calls under the lock that orders its partitions' changes (so none
        falls between the decision and the read); it names the asks to read at once (None:
        all), the others being left out of the answer unless they wake it. An api taking
        `reads` has `fetch_changes`, the ChangeJournal of its partitions
        (protocol/fetch_session.py). `client`: a consumer's Fetch v11+ (its rack, the
        listener it came in on): a follower may serve it, and a leader may answer a
        partition with its preferred read replica instead (KIP-392); None: leader only.
        `session`: the FetchContext (protocol/fetch_session.py) of the session the asks are
        all of, exactly: an api may keep its watch on the session between fetches."""

    def list_offsets(self, isolation_level: int,
                     asks: Sequence[tuple[TP, int, int]]) -> dict[TP, OffsetAnswer]:
        """asks: (tp, timestamp, current_leader_epoch); -1 latest, -2 earliest, -3 max ts."""

    def legacy_offsets(self, replica_id: int, asks: Sequence[tuple[TP, int, int]]
                       ) -> list[tuple[int, tuple[int, ...]]]:
        """ListOffsets v0: asks (tp, timestamp, max_num_offsets) → (error, offsets newest
        first) per ask, in order (v0 may name a partition twice), Kafka's
        legacyFetchOffsetsBefore (replicas/legacy_offsets.py)."""

    def delete_records(self, asks: Sequence[tuple[TP, int]], timeout_ms: int
                       ) -> dict[TP, tuple[int, int]] | Deferred:
        """asks: (tp, offset; -1 the HW) → (error, low watermark); a Deferred while the
        followers' log starts have not passed the offsets (REQUEST_TIMED_OUT for those
        still short after timeout_ms)."""

    def offsets_for_leader_epoch(self, asks: Sequence[tuple[TP, int, int]]
                                 ) -> dict[TP, OffsetAnswer]:
        """asks: (tp, current_leader_epoch, leader_epoch) → (epoch, end offset)."""

    def init_producer_id(self, transactional_id: str | None, producer_id: int,
                         producer_epoch: int) -> tuple[int, int, int]:
        """(error, producer id, epoch) of an idempotent producer (no transactional id)."""

    def txn_call(self, make_event) -> Deferred:
        """`make_event(request_id)` → a transactions.messages request event; a Deferred of
        the transaction coordinator's result (it answers once its state is written)."""

    def write_txn_markers(self, markers: Sequence[tuple[int, int, bool, int, Sequence[TP]]],
                          timeout_ms: int) -> Deferred:
        """WriteTxnMarkers: (producer id, epoch, committed, coordinator epoch, partitions)
        → Deferred of [{tp: error}], one per marker, once each is replicated."""

    def describe_producers(self, tps: Sequence[TP]) -> dict[TP, tuple[int, list]]:
        """DescribeProducers: {tp: (error, [(producer id, epoch, last sequence, last
        timestamp, coordinator epoch, current transaction start offset)])}."""

    def topic_ids(self) -> dict[str, str]:
        """{topic: its id} of every topic this broker's metadata knows (Fetch v13+ and
        DeleteTopics v6 address topics by id)."""
        ...

    def topic_partition_counts(self) -> dict[str, tuple[str, int]]:
        """{topic: (its id, its partition count)} of every topic this broker's metadata
        knows (what a KIP-848 group's assignor works from)."""
        ...

    def create_topics(self, specs: Sequence[TopicSpec], timeout_ms: int,
                      validate_only: bool) -> dict[str, TopicOutcome]: ...

    def delete_topics(self, names: Sequence[str], timeout_ms: int) -> dict[str, TopicOutcome]: ...

    def create_partitions(self, asks: Sequence[tuple[str, int, Sequence[Sequence[int]] | None]],
                          timeout_ms: int, validate_only: bool) -> dict[str, TopicOutcome]: ...

    def describe_configs(self, resources: Sequence[tuple[ConfigResource, Sequence[str] | None]]
                         ) -> dict[ConfigResource, ConfigsOutcome]: ...

    def find_coordinator(self, keys: Sequence[str], listener: str, key_type: int = 0
                         ) -> dict[str, tuple[int, int, str, int]]:
        """key (a group id, or a transactional id for key type 1) → (error, node id, host,
        port) of its coordinator on `listener`."""

    def share_heartbeat(self, request, topics) -> object:
        """ShareGroupHeartbeat (share.group.ShareHeartbeat) → share.group.ShareHeartbeatAnswer;
        `topics` as for ConsumerGroupHeartbeat."""
        ...

    def share_describe(self, group_ids: Sequence[str]) -> list:
        """ShareGroupDescribe → a share.group.DescribedShareGroup per id, in order."""
        ...

    def share_fetch(self, group_id: str, member_id: str, epoch: int, asked: dict,
                    forgotten: Sequence[TP], max_wait_ms: int, min_bytes: int,
                    max_bytes: int, max_records: int, renew_only: bool) -> Deferred:
        """ShareFetch: `asked` is {tp: acknowledgement batches [(first, last, types)]};
        a Deferred of ShareFetchResult."""
        ...

    def share_acknowledge(self, group_id: str, member_id: str, epoch: int, acks: dict
                          ) -> Deferred:
        """ShareAcknowledge → a Deferred of (error, {tp: (error, (leader, leader epoch))},
        the group's acquisition lock duration in ms): answered once the states are written."""
        ...

    def share_offsets(self, request) -> Deferred:
        """DescribeShareGroupOffsets / AlterShareGroupOffsets / DeleteShareGroupOffsets of
        one group (share.offsets.DescribeOffsets / AlterOffsets / DeleteOffsets, topics by
        name) → a Deferred of share.offsets.OffsetsAnswer."""
        ...

    def group_call(self, make_event) -> Deferred:
        """`make_event(request_id)` → a coordinator.messages request event; a Deferred of
        the group coordinator's result (a JoinGroup parks until the rebalance completes)."""

    def zk_commit_offsets(self, group_id: str, asks: Sequence[tuple[TP, int, str | None]]
                          ) -> dict[TP, int]:
        """OffsetCommit v0: (tp, offset, metadata) kept in ZooKeeper, as Kafka 3.8 does;
        an error per partition."""

    def zk_fetch_offsets(self, group_id: str, tps: Sequence[TP]) -> dict[TP, tuple[int, int]]:
        """OffsetFetch v0: (error, offset) per partition from ZooKeeper."""

    def alter_configs(self, resources: Sequence[tuple[ConfigResource,
                                                      Sequence[tuple[str, int, str | None]]]],
                      validate_only: bool) -> dict[ConfigResource, ConfigsOutcome]:
        """IncrementalAlterConfigs: (name, op 0 SET / 1 DELETE / 2 APPEND / 3 SUBTRACT, value)."""

    def replace_configs(self, resources: Sequence[tuple[ConfigResource,
                                                        Sequence[tuple[str, str]]]],
                        validate_only: bool) -> dict[ConfigResource, ConfigsOutcome]:
        """AlterConfigs (legacy): each resource's overrides become exactly (name, value)."""

    def known_partitions(self, tps: Sequence[TP]) -> set[TP]:
        """The partitions this broker's metadata cache knows (Kafka's metadataCache)."""

    def describe_log_dirs(self, tps: Sequence[TP] | None) -> list[LogDir]:
        """DescribeLogDirs: this broker's log dirs with the replicas asked (None: all) they
        hold."""

    def elect_leaders(self, election_type: int, tps: Sequence[TP] | None, timeout_ms: int
                      ) -> dict[TP, tuple[int, str | None]]:
        """ElectLeaders through the controller (0 preferred, 1 unclean; None: every
        partition): (error, message) per partition, once this broker's metadata shows the
        new leaders or the timeout passed (REQUEST_TIMED_OUT)."""

    def alter_partition_reassignments(self, targets: dict[TP, Sequence[int] | None],
                                      timeout_ms: int) -> dict[TP, tuple[int, str | None]]:
        """KIP-455 through the controller: a target, or None to cancel; (error, message) per
        partition. A KafkaError raised is the request's top-level error."""

    def list_partition_reassignments(self, tps: Sequence[TP] | None
                                     ) -> list[OngoingReassignment]:
        """The reassignments in progress (of `tps`, or all)."""

    def create_acls(self, bindings: Sequence[object]) -> list[tuple[int, str | None]]:
        """CreateAcls: store each (valid, checked) protocol.security.acl.AclBinding;
        (error, message) per binding, in order."""

    def delete_acls(self, filters: Sequence[object]
                    ) -> list[tuple[int, str | None, tuple[object, ...]]]:
        """DeleteAcls: per AclBindingFilter, (error, message, the bindings removed)."""
