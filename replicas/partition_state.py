"""Replication state of ONE partition replica, leader and follower side (pure core).

etcd-raft "Ready" style: `PartitionState.process(event) -> list[effect]`, no I/O, no clock
(time comes as `now_ms` in events), no log (the caller reports log end offsets, LEO, in
events and carries out the effects). Kafka 3.8 (ZK mode) names are cited for each rule.

Leader side (Kafka's `Partition` + `Replica`):
- ISR (KIP-497): committed `isr` plus at most ONE in-flight AlterPartition (`PendingExpandIsr`
  / `PendingShrinkIsr`). Maximal ISR = committed ∪ proposed, used for the HW and for acks=all
  completion: an expand counts at once, a shrink only once committed.
- Effective min ISR = min(min.insync.replicas, replication factor) (`effectiveMinIsr`), used
  by all three min-ISR rules below.
- Follower progress (`Replica.updateFetchState`), fetch at offset f, time t, leader LEO L:
  f ≥ L → last_caught_up = max(old, t); elif f ≥ last_fetch_leader_LEO → last_caught_up =
  max(old, last_fetch_time); then last_fetch_leader_LEO = max(L, old), last_fetch_time = t,
  and its log start is the one the fetch carried (the leader's KIP-392 candidates need it).
  `resetReplicaState` on becoming leader: last_caught_up = now for ISR members else 0; a NEW
  leader forgets follower LEOs (-1 = unknown), a re-elected one keeps them.
- HW (`maybeIncrementLeaderHW`) = min LEO over the leader and the maximal ISR (an unknown
  LEO blocks it); only increases; frozen while the COMMITTED ISR < effective min ISR (≥ 3.7).
- Shrink (`maybeShrinkIsr`, on `Tick`, nothing in flight): ISR followers with
  LEO != leader LEO AND now - last_caught_up > replica.lag.time.max.ms are proposed out.
- Expand (`maybeExpandIsr`/`isFollowerInSync`, only on that follower's own fetch, nothing in
  flight): LEO ≥ HW and ≥ start offset of the leader's epoch. As in Kafka no time rule here.
- AlterPartition answer (`handleAlterPartitionUpdate`): ignored unless a proposal is in
  flight and its leader_epoch is ours; error → proposal dropped, committed state kept;
  success with partition_epoch ≥ ours → its ISR and partition epoch become committed.
- acks=all (`appendRecordsToLeader`): committed ISR < effective min ISR → NOT_ENOUGH_REPLICAS,
  asked by the caller BEFORE appending (`check_append`).
- Delayed produce (`checkEnoughReplicasReachOffset`): once HW ≥ required_offset → NONE if
  |maximal ISR| ≥ effective min ISR else NOT_ENOUGH_REPLICAS_AFTER_APPEND; REQUEST_TIMED_OUT
  when a `Tick` reaches the deadline; NOT_LEADER_OR_FOLLOWER when leadership is lost.
Follower side (`AbstractFetcherThread`):
- After `BecomeFollower`, `truncation_pending` holds until `TruncationCompleted` (the caller
  truncated by leader epoch, KIP-101/279); a `diverging` fetch response sets it again. No HW
  is taken from the leader while it holds (KAFKA-14704: truncate before advancing the HW).
- Follower HW = max(old, min(leader HW, own LEO)); only truncation lowers it (to the new LEO).
- KIP-320 fetch fencing, `check_leader_epoch`: older → FENCED_LEADER_EPOCH, newer →
  UNKNOWN_LEADER_EPOCH, equal or -1 (none sent) → NONE. Become* with an epoch below the local
  one is rejected (epochs only grow); an equal epoch is re-applied.
Misuse (leader event on a non-leader, fetch from a non-replica, follower event on a
non-follower) raises `RejectedEvent(code)`; caller bugs raise ValueError.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from replicas.dispatch import handler_for
from replicas.errors import ErrorCode

# The codes this module answers with, as plain ints: events are processed per request.
NONE = ErrorCode.NONE.value
OFFSET_OUT_OF_RANGE = ErrorCode.OFFSET_OUT_OF_RANGE.value
NOT_LEADER_OR_FOLLOWER = ErrorCode.NOT_LEADER_OR_FOLLOWER.value
REQUEST_TIMED_OUT = ErrorCode.REQUEST_TIMED_OUT.value
NOT_ENOUGH_REPLICAS = ErrorCode.NOT_ENOUGH_REPLICAS.value
NOT_ENOUGH_REPLICAS_AFTER_APPEND = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND.value
INVALID_REQUIRED_ACKS = ErrorCode.INVALID_REQUIRED_ACKS.value
FENCED_LEADER_EPOCH = ErrorCode.FENCED_LEADER_EPOCH.value
UNKNOWN_LEADER_EPOCH = ErrorCode.UNKNOWN_LEADER_EPOCH.value

UNKNOWN_OFFSET = -1
NO_EPOCH = -1
ACKS_ALL = -1


class RejectedEvent(Exception):
    """An event this replica must refuse; `code` is the Kafka error to answer with."""

    def __init__(self, code: int, message: str):
        super().__init__(f"{message} (error {code})")
        self.code = code


class Role(enum.Enum):
    INACTIVE = "inactive"  # never told, or after StopReplica
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(frozen=True, slots=True)
class PartitionConfig:
    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = 30_000

    def __post_init__(self) -> None:
        if self.min_insync_replicas < 1 or self.replica_lag_time_max_ms < 0:
            raise ValueError(f"bad partition config {self}")


# ---------------------------------------------------------------- events
@dataclass(frozen=True, slots=True)
class BecomeLeader:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int
    log_end_offset: int
    high_watermark: int
    now_ms: int

@dataclass(frozen=True, slots=True)
class BecomeFollower:
    leader_id: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    log_end_offset: int
    high_watermark: int
    now_ms: int

@dataclass(frozen=True, slots=True)
class StopReplica:
    pass

@dataclass(frozen=True, slots=True)
class LeaderAppended:
    log_end_offset: int
    now_ms: int

@dataclass(frozen=True, slots=True)
class FollowerFetched:
    replica_id: int
    fetch_offset: int  # = the follower's LEO
    now_ms: int
    log_start_offset: int = UNKNOWN_OFFSET   # the follower's, as its fetch carries it

@dataclass(frozen=True, slots=True)
class Tick:
    now_ms: int

@dataclass(frozen=True, slots=True)
class AlterPartitionResponse:
    isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int
    error: int = NONE

@dataclass(frozen=True, slots=True)
class DelayedProduce:
    request_id: int
    required_offset: int  # last offset of the batch + 1
    deadline_ms: int

@dataclass(frozen=True, slots=True)
class TruncationCompleted:
    log_end_offset: int

@dataclass(frozen=True, slots=True)
class FollowerFetchResponse:
    log_end_offset: int  # the follower's LEO after appending the fetched batches
    leader_high_watermark: int
    diverging: bool = False  # the leader reported a diverging epoch: truncate first


EVENTS = (BecomeLeader, BecomeFollower, StopReplica, LeaderAppended, FollowerFetched, Tick,
          AlterPartitionResponse, DelayedProduce, TruncationCompleted, FollowerFetchResponse)


# ---------------------------------------------------------------- effects
@dataclass(frozen=True, slots=True)
class HighWatermarkChanged:
    """The HW moved: the caller updates the log's HW (and later checkpoints it)."""
    high_watermark: int

@dataclass(frozen=True, slots=True)
class ProposeIsr:
    """Send AlterPartition to the controller; its answer comes back as AlterPartitionResponse."""
    isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int

@dataclass(frozen=True, slots=True)
class ProduceCompleted:
    """Answer the acks=all produce `request_id` with `error`."""
    request_id: int
    error: int


Effect = HighWatermarkChanged | ProposeIsr | ProduceCompleted


# ---------------------------------------------------------------- pure rules
@dataclass(frozen=True, slots=True)
class FollowerProgress:
    """The leader's view of one follower (Kafka's Replica.ReplicaState)."""
    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_time_ms: int = 0
    last_fetch_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET      # as its last fetch said (KIP-392 candidates)


def update_fetch_state(progress: FollowerProgress, fetch_offset: int, fetch_time_ms: int,
                       leader_log_end_offset: int,
                       log_start_offset: int = UNKNOWN_OFFSET) -> FollowerProgress:
    """Kafka's Replica.updateFetchState."""
    caught_up = progress.last_caught_up_time_ms
    if fetch_offset >= leader_log_end_offset:
        caught_up = max(caught_up, fetch_time_ms)
    elif fetch_offset >= progress.last_fetch_leader_log_end_offset:
        caught_up = max(caught_up, progress.last_fetch_time_ms)
    return FollowerProgress(
        log_end_offset=fetch_offset,
        last_caught_up_time_ms=caught_up,
        last_fetch_time_ms=fetch_time_ms,
        last_fetch_leader_log_end_offset=max(leader_log_end_offset,
                                             progress.last_fetch_leader_log_end_offset),
        log_start_offset=log_start_offset)


def is_caught_up(progress: FollowerProgress, leader_log_end_offset: int, now_ms: int,
                 replica_lag_time_max_ms: int) -> bool:
    """Kafka's ReplicaState.isCaughtUp."""
    return (progress.log_end_offset == leader_log_end_offset
            or now_ms - progress.last_caught_up_time_ms <= replica_lag_time_max_ms)


def check_leader_epoch(local_epoch: int, requested_epoch: int) -> int:
    """KIP-320 fencing of a fetch carrying the requester's current leader epoch."""
    if requested_epoch == NO_EPOCH or requested_epoch == local_epoch:
        return NONE
    return FENCED_LEADER_EPOCH if requested_epoch < local_epoch else UNKNOWN_LEADER_EPOCH


# ---------------------------------------------------------------- the state machine
class PartitionState:
    """One replica of topic-partition on broker `broker_id`. Drive it with `process`."""

    def __init__(self, topic: str, partition: int, broker_id: int,
                 config: PartitionConfig = PartitionConfig()):
        self.topic, self.partition, self.broker_id, self.config = topic, partition, broker_id, config
        self.role = Role.INACTIVE
        self.leader_id = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()  # committed
        self.proposed_isr: tuple[int, ...] | None = None  # the in-flight AlterPartition
        self.leader_epoch, self.partition_epoch = NO_EPOCH, -1
        self.leader_epoch_start_offset = UNKNOWN_OFFSET
        self.log_end_offset = self.high_watermark = 0
        self.truncation_pending = False
        self.followers: dict[int, FollowerProgress] = {}
        self.pending_produces: dict[int, tuple[int, int]] = {}  # id -> (required, deadline)
        self.now_ms = 0  # last time seen in an event

    # ---- queries
    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.proposed_isr is None:
            return self.isr
        return self.isr + tuple(r for r in self.proposed_isr if r not in self.isr)

    @property
    def effective_min_isr(self) -> int:
        return min(self.config.min_insync_replicas, len(self.replicas))

    def check_append(self, acks: int) -> int:
        """Error code for a produce with `acks` (0, 1, -1 = all) BEFORE anything is appended."""
        if acks not in (0, 1, ACKS_ALL):
            return INVALID_REQUIRED_ACKS
        if not self.is_leader:
            return NOT_LEADER_OR_FOLLOWER
        if acks == ACKS_ALL and len(self.isr) < self.effective_min_isr:
            return NOT_ENOUGH_REPLICAS
        return NONE

    # ---- dispatch
    def process(self, event) -> list[Effect]:
        if type(event) not in EVENTS:
            raise TypeError(f"not a partition event: {event!r}")
        return handler_for(self, event)(event)

    # ---- role changes
    def process_become_leader(self, e: BecomeLeader) -> list[Effect]:
        replicas, isr = tuple(e.replicas), tuple(e.isr)
        self._check_assignment(e.leader_epoch, replicas, isr)
        if self.broker_id not in isr:
            raise ValueError(f"leader {self.broker_id} not in ISR {isr}")
        is_new_leader = not self.is_leader
        if is_new_leader or e.leader_epoch > self.leader_epoch:
            self.leader_epoch_start_offset = e.log_end_offset
        old_hw = self.high_watermark if not is_new_leader else 0
        self.role, self.leader_id, self.now_ms = Role.LEADER, self.broker_id, e.now_ms
        self.replicas, self.isr, self.proposed_isr = replicas, isr, None
        self.leader_epoch, self.partition_epoch = e.leader_epoch, e.partition_epoch
        self.log_end_offset, self.truncation_pending = e.log_end_offset, False
        self.followers = {r: self._reset_follower(self.followers.get(r), r in isr, e.now_ms,
                                                  is_new_leader)
                          for r in replicas if r != self.broker_id}
        effects = self._set_start_hw(max(old_hw, e.high_watermark), e.high_watermark)
        return effects + self._leader_progress()

    def _reset_follower(self, old: FollowerProgress | None, in_sync: bool, now_ms: int,
                        is_new_leader: bool) -> FollowerProgress:
        caught_up = now_ms if in_sync else 0
        if is_new_leader or old is None:
            return FollowerProgress(last_caught_up_time_ms=caught_up)
        return FollowerProgress(old.log_end_offset, caught_up, caught_up, self.log_end_offset,
                                old.log_start_offset)

    def process_become_follower(self, e: BecomeFollower) -> list[Effect]:
        replicas = tuple(e.replicas)
        self._check_assignment(e.leader_epoch, replicas, tuple(e.isr))
        effects = self._fail_pending_produces()
        self.role, self.leader_id, self.now_ms = Role.FOLLOWER, e.leader_id, e.now_ms
        self.replicas, self.isr, self.proposed_isr = replicas, tuple(e.isr), None
        self.leader_epoch, self.partition_epoch = e.leader_epoch, e.partition_epoch
        self.leader_epoch_start_offset = UNKNOWN_OFFSET
        self.log_end_offset, self.truncation_pending, self.followers = e.log_end_offset, True, {}
        return effects + self._set_start_hw(e.high_watermark, e.high_watermark)

    def process_stop_replica(self, e: StopReplica) -> list[Effect]:
        effects = self._fail_pending_produces()
        self.role, self.leader_id, self.proposed_isr = Role.INACTIVE, -1, None
        self.followers, self.truncation_pending = {}, False
        return effects

    def _check_assignment(self, epoch: int, replicas: tuple[int, ...], isr: tuple[int, ...]):
        if epoch < self.leader_epoch:
            raise RejectedEvent(FENCED_LEADER_EPOCH, f"epoch {epoch} < local {self.leader_epoch}")
        if self.broker_id not in replicas or not set(isr) <= set(replicas):
            raise ValueError(f"bad assignment replicas={replicas} isr={isr} "
                             f"for broker {self.broker_id}")

    def _set_start_hw(self, hw: int, given: int) -> list[Effect]:
        self.high_watermark = max(0, min(hw, self.log_end_offset))
        return [] if self.high_watermark == given else [HighWatermarkChanged(self.high_watermark)]

    # ---- leader side
    def process_leader_appended(self, e: LeaderAppended) -> list[Effect]:
        self._require(Role.LEADER, e)
        if e.log_end_offset < self.log_end_offset:
            raise ValueError(f"leader LEO moved back {self.log_end_offset} -> {e.log_end_offset}")
        self.log_end_offset, self.now_ms = e.log_end_offset, e.now_ms
        return self._leader_progress()

    def process_follower_fetched(self, e: FollowerFetched) -> list[Effect]:
        self._require(Role.LEADER, e)
        if e.replica_id not in self.followers:
            raise RejectedEvent(NOT_LEADER_OR_FOLLOWER,
                                f"replica {e.replica_id} is not a follower of {self.replicas}")
        if not 0 <= e.fetch_offset <= self.log_end_offset:
            raise RejectedEvent(OFFSET_OUT_OF_RANGE,
                                f"fetch offset {e.fetch_offset} outside [0, {self.log_end_offset}]")
        self.now_ms = e.now_ms
        before = self.followers[e.replica_id]
        self.followers[e.replica_id] = update_fetch_state(
            before, e.fetch_offset, e.now_ms, self.log_end_offset, e.log_start_offset)
        if e.fetch_offset == before.log_end_offset and e.replica_id in self.isr:
            return []       # nothing the HW, the ISR or a waiting produce depends on moved
        return self.maybe_expand_isr(e.replica_id) + self._leader_progress()

    def process_tick(self, e: Tick) -> list[Effect]:
        self.now_ms = e.now_ms
        if self.role is not Role.LEADER:
            return []
        effects = self.maybe_shrink_isr(e.now_ms)
        if self.pending_produces or self.high_watermark < self.log_end_offset:
            # Otherwise neither can yield anything: the HW is at the LEO, nothing waits.
            effects += self._leader_progress() + self.maybe_expire_produces(e.now_ms)
        return effects

    def process_alter_partition_response(self, e: AlterPartitionResponse) -> list[Effect]:
        if (not self.is_leader or self.proposed_isr is None
                or e.leader_epoch != self.leader_epoch):
            return []  # stale or duplicate answer
        if e.error != NONE:
            self.proposed_isr = None
            return self._leader_progress()
        if e.partition_epoch < self.partition_epoch:
            return []  # we already hold a newer partition state
        self.isr, self.partition_epoch, self.proposed_isr = tuple(e.isr), e.partition_epoch, None
        return self._leader_progress()

    def process_delayed_produce(self, e: DelayedProduce) -> list[Effect]:
        if not self.is_leader:
            return [ProduceCompleted(e.request_id, NOT_LEADER_OR_FOLLOWER)]
        if e.request_id in self.pending_produces:
            raise ValueError(f"duplicate produce request id {e.request_id}")
        self.pending_produces[e.request_id] = (e.required_offset, e.deadline_ms)
        return self.maybe_complete_produces()

    def maybe_shrink_isr(self, now_ms: int) -> list[Effect]:
        if self.proposed_isr is not None:
            return []
        out = [r for r in self.isr if r != self.broker_id and self._is_out_of_sync(r, now_ms)]
        if not out:
            return []
        return self._propose(tuple(r for r in self.isr if r not in out))

    def _is_out_of_sync(self, replica_id: int, now_ms: int) -> bool:
        progress = self.followers.get(replica_id)
        return progress is None or not is_caught_up(
            progress, self.log_end_offset, now_ms, self.config.replica_lag_time_max_ms)

    def maybe_expand_isr(self, replica_id: int) -> list[Effect]:
        if self.proposed_isr is not None or replica_id in self.isr:
            return []
        leo = self.followers[replica_id].log_end_offset
        if leo >= self.high_watermark and leo >= self.leader_epoch_start_offset:
            return self._propose(self.isr + (replica_id,))
        return []

    def _propose(self, isr: tuple[int, ...]) -> list[Effect]:
        self.proposed_isr = isr
        return [ProposeIsr(isr, self.leader_epoch, self.partition_epoch)]

    def maybe_advance_hw(self) -> list[Effect]:
        if len(self.isr) < self.effective_min_isr:
            return []  # Kafka >= 3.7: no HW progress under min ISR
        new_hw = self.log_end_offset
        for replica_id in self.maximal_isr:
            if replica_id != self.broker_id:
                progress = self.followers.get(replica_id)
                new_hw = min(new_hw, progress.log_end_offset if progress else UNKNOWN_OFFSET)
        return self._raise_hw(new_hw)

    def maybe_complete_produces(self) -> list[Effect]:
        enough = len(self.maximal_isr) >= self.effective_min_isr
        return self._complete(lambda required, _: self.high_watermark >= required,
                              NONE if enough else NOT_ENOUGH_REPLICAS_AFTER_APPEND)

    def maybe_expire_produces(self, now_ms: int) -> list[Effect]:
        return self._complete(lambda _, deadline: now_ms >= deadline, REQUEST_TIMED_OUT)

    def _complete(self, done, error: int) -> list[Effect]:
        if not self.pending_produces:
            return []
        ids = [rid for rid, (required, deadline) in self.pending_produces.items()
               if done(required, deadline)]
        for rid in ids:
            del self.pending_produces[rid]
        return [ProduceCompleted(rid, error) for rid in ids]

    def _raise_hw(self, new_hw: int) -> list[Effect]:
        if new_hw <= self.high_watermark:
            return []  # the HW never moves back (except through follower truncation)
        self.high_watermark = new_hw
        return [HighWatermarkChanged(new_hw)]

    def _leader_progress(self) -> list[Effect]:
        return self.maybe_advance_hw() + self.maybe_complete_produces()

    def _fail_pending_produces(self) -> list[Effect]:
        return self._complete(lambda _, __: True, NOT_LEADER_OR_FOLLOWER)

    def _require(self, role: Role, event) -> None:
        if self.role is not role:
            raise RejectedEvent(NOT_LEADER_OR_FOLLOWER,
                                f"{type(event).__name__} on a {self.role.value} replica of "
                                f"{self.topic}-{self.partition}")

    # ---- follower side
    def process_truncation_completed(self, e: TruncationCompleted) -> list[Effect]:
        self._require(Role.FOLLOWER, e)
        self.log_end_offset, self.truncation_pending = e.log_end_offset, False
        if self.high_watermark <= e.log_end_offset:
            return []
        self.high_watermark = max(0, e.log_end_offset)
        return [HighWatermarkChanged(self.high_watermark)]

    def process_follower_fetch_response(self, e: FollowerFetchResponse) -> list[Effect]:
        self._require(Role.FOLLOWER, e)
        if e.log_end_offset < self.log_end_offset:
            raise ValueError(f"follower LEO moved back {self.log_end_offset} -> "
                             f"{e.log_end_offset} outside truncation")
        self.log_end_offset = e.log_end_offset
        self.truncation_pending |= e.diverging
        if self.truncation_pending:
            return []  # KAFKA-14704: truncate before taking the leader's HW
        return self._raise_hw(min(e.leader_high_watermark, self.log_end_offset))
