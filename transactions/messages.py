"""What goes into the transaction coordinator (events) and what comes out (results, effects).

Rules:
- Every event is a frozen dataclass handled by `TransactionCoordinator.process_<snake name>`.
- Every request event carries a `request_id`; its answer is the effect
  `Respond(request_id, result)`, exactly once, maybe in a later `process` call (a request
  that changes a transaction waits for its append).
- `Append(partition, records, token)`: records to append to `__transaction_state`-`partition`
  with acks=-1, in effect order. The shell reports the outcome with `AppendDone(token,
  error)` (error is the append's own code: NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER, ...;
  the coordinator maps it to the client's code). An AppendDone for a token the coordinator
  no longer waits for (its partition was unloaded or reloaded meanwhile) is ignored.
- `WriteMarkers(...)`: once a PrepareCommit/PrepareAbort is durable (or found in the log on
  load), the shell sends WriteTxnMarkers for `partitions` to their leaders, retrying the
  retriable errors, dropping partitions that are gone, and stopping when a partition answers
  INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED (Kafka's
  TransactionMarkerRequestCompletionHandler); when every partition is done it reports
  `MarkersWritten(...)` with the same ids and coordinator epoch, and the coordinator appends
  CompleteCommit/CompleteAbort. A MarkersWritten of an older coordinator epoch is ignored.
- `BeginLoad(p)` (optional) marks partition p as loading (COORDINATOR_LOAD_IN_PROGRESS) while
  the shell reads its log; `LoadPartition(p, coordinator_epoch, records)` hands the log over
  (key/value pairs, oldest first) and makes the coordinator own p at that epoch (the
  partition's leader epoch); `UnloadPartition(p, coordinator_epoch)` gives it up (a negative
  epoch: whatever epoch it was loaded at).
- Result fields are Kafka's response fields in the coordinator's terms: error codes are
  Kafka's ints (replicas/errors.py's table), "no producer id / epoch" is -1, state names are
  Kafka's ("Ongoing", "PrepareCommit", ...). A request's `version` is the API version the
  client sent; it decides whether PRODUCER_FENCED is spelled INVALID_PRODUCER_EPOCH
  (transactions/error_codes.py) and the client's transaction version (KIP-890 part 2:
  AddPartitionsToTxn v4+ and EndTxn v5+ come from clients of transaction.version 2).
- `FinalizedTransactionVersion(level)`: the cluster's finalized transaction.version; the
  coordinator's own aborts follow it, and from level 1 it writes log values as v1.
- `AddPartitionsResult.error` is the transaction's one outcome when every partition got the
  same code (always, except a verification that answered partition by partition: then NONE).
- `Tick()` says the injected clock moved: the coordinator reads it and runs every periodic
  job that is due (timed-out transactions, expired transactional ids, append retries).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from replicas.errors import ErrorCode as E

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

TopicPartition = tuple[str, int]
Record = tuple[bytes, "bytes | None"]


# ---------------------------------------------------------------- request events
@dataclass(frozen=True, slots=True)
class InitProducerId:
    request_id: int
    transactional_id: str | None  # None: an idempotent producer, answered a fresh id
    transaction_timeout_ms: int
    producer_id: int = NO_PRODUCER_ID        # v3+: the producer's current id and epoch
    producer_epoch: int = NO_PRODUCER_EPOCH  # (KIP-360), or -1 and -1
    version: int = 5


@dataclass(frozen=True, slots=True)
class AddPartitionsToTxn:
    request_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]
    verify_only: bool = False  # v4+ from a partition leader (KIP-890 part 1): only check
    version: int = 3


@dataclass(frozen=True, slots=True)
class AddOffsetsToTxn:
    request_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str
    version: int = 4


@dataclass(frozen=True, slots=True)
class EndTxn:
    request_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    version: int = 4


@dataclass(frozen=True, slots=True)
class DescribeTransactions:
    request_id: int
    transactional_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ListTransactions:
    request_id: int
    state_filters: tuple[str, ...] = ()
    producer_id_filters: tuple[int, ...] = ()
    duration_filter_ms: int = -1  # ≥ 0: only transactions running longer than this


# ---------------------------------------------------------------- shell events
@dataclass(frozen=True, slots=True)
class FinalizedTransactionVersion:
    """The cluster's finalized transaction.version changed (ZooKeeper's /feature)."""
    level: int


@dataclass(frozen=True, slots=True)
class Tick:
    pass


@dataclass(frozen=True, slots=True)
class AppendDone:
    token: int
    error: int = E.NONE


@dataclass(frozen=True, slots=True)
class BeginLoad:
    """This broker became leader of `__transaction_state`-`partition` and started reading
    it: its transactional ids answer COORDINATOR_LOAD_IN_PROGRESS until LoadPartition."""
    partition: int


@dataclass(frozen=True, slots=True)
class LoadPartition:
    partition: int
    coordinator_epoch: int
    records: tuple[Record, ...]  # the partition's log, oldest first


@dataclass(frozen=True, slots=True)
class UnloadPartition:
    partition: int
    coordinator_epoch: int = -1


@dataclass(frozen=True, slots=True)
class MarkersWritten:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int


# ---------------------------------------------------------------- results
@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class AddPartitionsResult:
    error: int
    partition_errors: dict[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AddOffsetsResult:
    error: int


@dataclass(frozen=True, slots=True)
class EndTxnResult:
    error: int
    producer_id: int = NO_PRODUCER_ID      # EndTxn v5 (transaction.version 2): the id and
    producer_epoch: int = NO_PRODUCER_EPOCH  # epoch the producer's next transaction uses


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """DescribeTransactionsResponse's TransactionState; an error leaves Kafka's defaults."""
    error: int
    transactional_id: str
    state: str = ""
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = 0
    producer_id: int = 0
    producer_epoch: int = 0
    partitions: tuple[TopicPartition, ...] = ()  # sorted


@dataclass(frozen=True, slots=True)
class DescribeTransactionsResult:
    transactions: tuple[TransactionDescription, ...]


class ListedTransaction(NamedTuple):
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class ListTransactionsResult:
    error: int
    unknown_state_filters: tuple[str, ...] = ()
    transactions: tuple[ListedTransaction, ...] = ()


# ---------------------------------------------------------------- effects
@dataclass(frozen=True, slots=True)
class Respond:
    request_id: int
    result: object


@dataclass(frozen=True, slots=True)
class Append:
    partition: int
    records: tuple[Record, ...]
    token: int


@dataclass(frozen=True, slots=True)
class WriteMarkers:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]  # sorted
