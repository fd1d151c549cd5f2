"""Consumer: reads partitions from their leaders (below the high watermark only), alone or as
a member of a Kafka consumer group; Kafka's KafkaConsumer is the model (README has the table
of its methods next to these).

Rules:
- `subscribe(topics, on_assign=, on_revoke=, on_lost=)` with a group_id makes the consumer
  a member of that group (rayka/client/membership.py is the protocol, rayka/client/group.py
  its shell: JoinGroup/SyncGroup/Heartbeat through the group's coordinator broker, the
  assignors of rayka/client/assignors.py); `group_protocol="consumer"` speaks KIP-848
  instead (rayka/client/consumer_membership.py: the coordinator assigns, the member
  revokes before it takes). Without a group_id, `subscribe` takes every
  partition. `assign` takes explicit partitions (commits then carry no generation: a
  "simple" group).
- `poll(timeout_ms)` never blocks past its timeout: a rebalance in progress (a JoinGroup
  parked until the other members join, a SyncGroup, the commit before a revocation) is
  kept in flight and continued by the next poll, so several members can be polled in turn
  from one thread. Callbacks run inside poll, on the caller's thread: on_revoke before
  partitions go, on_assign after they come, on_lost (default: on_revoke) when the member
  lost its membership and its partitions were already taken away.
- A poll returns records only of partitions the member owns in its current generation, as
  confirmed by the coordinator (see membership.py: a member frozen past its session timeout
  returns nothing until it is confirmed or has rejoined), and not paused. This is checked
  again at the instant poll returns: records taken from a partition whose ownership changed
  during the poll are given back (its position goes back to them). Buffered fetches of lost
  partitions are discarded.
- `isolation_level` "read_committed" returns only committed transactional records (the
  leader answers up to the last stable offset; aborted transactions are dropped, Kafka's
  rules in replicas/visible.py); transaction markers are never returned.
- Committed offsets are read stable (KIP-447, as Kafka's consumer does: OffsetFetch with
  require_stable): a partition whose offset a transaction is still committing answers
  UNSTABLE_OFFSET_COMMIT and is asked again after UNSTABLE_RETRY_MS (by `committed`, until
  its timeout; for a new assignment, by a later poll, the partition waiting meanwhile), so
  an exactly-once application that restarts or rewinds never reads the offsets from
  before a transaction it committed.
- Offsets are committed to the group's coordinator (`__consumer_offsets`, Kafka's store).
  enable_auto_commit (default, as Kafka's) commits the positions every
  auto_commit_interval_ms from poll, before partitions are revoked, and on close();
  `commit()` commits explicitly (synchronous, or asynchronous with a callback run by a later
  poll); typed errors: CommitFailed when the member is no longer in the generation,
  RebalanceInProgress while it rebalances.
- A partition's starting position: `seek`, else the group's committed offset, else the log
  start (auto_offset_reset="earliest") or the high watermark ("latest"); found without
  blocking the poll (rayka/client/fetcher.py). max_poll_interval_ms without a poll: the
  heartbeat thread leaves the group (Kafka's rule), the next poll rejoins.
"""

from __future__ import annotations

import logging
import time
from typing import NamedTuple

import ray

from coordinator import messages as m
from rayka.client.fetcher import Fetcher
from rayka.client.group import GroupMember
from rayka.client.membership import MemberConfig, Subscribe, Poll
from rayka.client.metadata import Metadata
from rayka.client.types import ConsumerRecord, OffsetAndTimestamp
from replicas.errors import RETRIABLE, ErrorCode as E
from replicas.errors import (InvalidConfig, InvalidRequest, KafkaError, LeaderNotAvailable,
                             UnknownTopicOrPartition, error_for_code)

log = logging.getLogger(__name__)
UNSTABLE_RETRY_MS = 100          # retry.backoff.ms: a pending transactional offset, asked again
COMMITTED_TIMEOUT_S = 60.0       # default.api.timeout.ms


class GroupMetadata(NamedTuple):
    """Kafka's ConsumerGroupMetadata."""
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


def _ms() -> int:
    return int(time.monotonic() * 1000)


class Consumer:
    def __init__(self, cluster, group_id: str | None = None, auto_offset_reset: str = "earliest",
                 max_poll_records: int = 100_000, fetch_max_bytes: int = 4 << 20,
                 partition_assignment_strategy=("range", "cooperative-sticky"),
                 session_timeout_ms: int = 45_000, heartbeat_interval_ms: int = 3_000,
                 group_instance_id: str | None = None, enable_auto_commit: bool = True,
                 auto_commit_interval_ms: int = 5_000, max_poll_interval_ms: int = 300_000,
                 client_id: str = "rayka", isolation_level: str = "read_uncommitted",
                 group_protocol: str = "classic"):
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise InvalidConfig(f"isolation_level must be read_uncommitted or read_committed, "
                                f"not {isolation_level!r}")
        if group_protocol not in ("classic", "consumer"):
            raise InvalidConfig(f"group_protocol must be classic or consumer, not "
                                f"{group_protocol!r}")
        if auto_offset_reset not in ("earliest", "latest"):
            raise InvalidConfig(f"auto_offset_reset must be earliest or latest, not "
                                f"{auto_offset_reset!r}")
        for name, value in (("session_timeout_ms", session_timeout_ms),
                            ("heartbeat_interval_ms", heartbeat_interval_ms),
                            ("auto_commit_interval_ms", auto_commit_interval_ms),
                            ("max_poll_interval_ms", max_poll_interval_ms)):
            if value <= 0:
                raise InvalidConfig(f"{name} must be > 0, not {value}")
        if heartbeat_interval_ms >= session_timeout_ms:
            raise InvalidConfig("heartbeat_interval_ms must be lower than session_timeout_ms")
        self.cluster = cluster
        self.group_id = group_id
        self._member_config = None if group_id is None else MemberConfig(
            group_id, tuple(partition_assignment_strategy), session_timeout_ms,
            heartbeat_interval_ms, max_poll_interval_ms, enable_auto_commit,
            auto_commit_interval_ms, group_instance_id=group_instance_id, client_id=client_id,
            group_protocol=group_protocol)
        self.enable_auto_commit = enable_auto_commit and group_id is not None
        self._next_auto_commit_ms = _ms() + auto_commit_interval_ms
        self._member: GroupMember | None = None     # created by the first group use
        self._subscribed = False                    # group subscription (else manual assignment)
        self._on_assign = self._on_revoke = self._on_lost = None
        self._unstable: set[tuple] = set()          # committed offsets to ask again (KIP-447)
        self._unstable_retry_ms = 0
        self.auto_offset_reset = auto_offset_reset
        self.max_poll_records = max_poll_records
        self.metadata = Metadata(cluster)
        self.isolation_level = isolation_level
        self.fetcher = Fetcher(cluster, self.metadata, auto_offset_reset=auto_offset_reset,
                               max_poll_records=max_poll_records, fetch_max_bytes=fetch_max_bytes,
                               read_committed=isolation_level == "read_committed")

    # -- the group ------------------------------------------------------------------------------
    @property
    def member(self) -> GroupMember:
        if self.group_id is None:
            raise KafkaError("this needs a group_id")
        if self._member is None:
            metadata = self.metadata            # not self: the member holds the consumer weakly
            self._member = GroupMember(self.cluster, self._member_config, self,
                                       lambda ts: {t: metadata.partition_count(t) for t in ts})
        return self._member

    def group_metadata(self) -> GroupMetadata:
        """Kafka's groupMetadata(): the group, generation and member id of this consumer."""
        if self._member is None:
            return GroupMetadata(self.group_id or "", -1, "", None)
        return GroupMetadata(self.group_id, self._member.generation, self._member.member_id,
                             self._member_config.group_instance_id)

    # the application-thread effects of the member (rayka/client/group.py calls these)
    def _group_revoke(self, partitions) -> None:
        try:
            if self._on_revoke is not None:
                self._on_revoke(sorted(partitions))
        finally:
            self.fetcher.remove(partitions)

    def _group_lose(self, partitions) -> None:
        self.fetcher.remove(partitions)
        callback = self._on_lost if self._on_lost is not None else self._on_revoke
        if callback is not None:
            callback(sorted(partitions))

    def _group_assign(self, partitions) -> None:
        self.fetcher.add(partitions, awaiting_committed=True)
        self._ask_committed(sorted(partitions))
        if self._on_assign is not None:
            self._on_assign(sorted(partitions))

    def _group_positions(self, partitions) -> dict:
        positions = self.fetcher.positions
        return {tp: positions[tp] for tp in partitions if positions.get(tp) is not None}

    def _ask_committed(self, partitions) -> None:
        """The stable committed offsets of newly assigned partitions, without blocking poll;
        unstable ones are asked again by a later poll (see the module rules)."""
        def done(result, _error):
            if result is not None:                     # an error answer: reset by policy
                unstable = set() if result.error else {
                    (p.topic, p.partition) for p in result.partitions
                    if p.error == E.UNSTABLE_OFFSET_COMMIT}
                if unstable:
                    self._unstable |= unstable
                    self._unstable_retry_ms = _ms() + UNSTABLE_RETRY_MS
                self.fetcher.on_committed([tp for tp in partitions if tp not in unstable],
                                          {} if result.error else {
                    (p.topic, p.partition): p.offset for p in result.partitions
                    if p.offset >= 0 and not p.error})
            elif self._member is not None:             # no answer: ask again
                self._ask_committed([tp for tp in partitions
                                     if tp in self.fetcher.awaiting_committed])
        if partitions:
            self.member.call_async(m.OffsetFetch(0, self.group_id, tuple(partitions), True),
                                   done)

    def _ask_unstable_again(self) -> None:
        if self._unstable and _ms() >= self._unstable_retry_ms:
            again = sorted(tp for tp in self._unstable if tp in self.fetcher.awaiting_committed)
            self._unstable.clear()
            self._ask_committed(again)

    # -- assignment and positions -------------------------------------------------------------------
    def assign(self, partitions) -> None:
        """Read exactly these partitions (no group membership; a group_id still commits)."""
        if self._subscribed:
            raise InvalidRequest("this consumer is subscribed: unsubscribe() before assign()")
        new = [tuple(tp) for tp in partitions]
        fresh = [tp for tp in new if tp not in self.fetcher.positions]
        self.fetcher.assign(new)
        if self.group_id is not None and fresh:
            self.fetcher.add(fresh, awaiting_committed=True)
            self._ask_committed(fresh)

    def subscribe(self, topics, on_assign=None, on_revoke=None, on_lost=None) -> None:
        """With a group_id: join the group (the next polls rebalance); else every partition."""
        if self.group_id is None:
            self.assign([(t, p) for t in topics for p in range(self.metadata.partition_count(t))])
            return
        if not self._subscribed:
            self.fetcher.assign([])
        self._subscribed = True
        self._on_assign, self._on_revoke, self._on_lost = on_assign, on_revoke, on_lost
        self.member.process(Subscribe(tuple(topics), _ms()))

    def unsubscribe(self) -> None:
        """Give the partitions back (on_revoke, auto-commit first) and leave the group."""
        if self._subscribed and self._member is not None:
            self._member.process(Subscribe((), _ms()))
            self._member.run_app_effects()
        self._subscribed = False
        self.fetcher.assign([])

    def assignment(self) -> list[tuple]:
        if self._subscribed:
            return sorted(self._member.owned) if self._member is not None else []
        return sorted(self.fetcher.positions)

    def _fetchable(self) -> set:
        if self._subscribed:
            owned = self._member.fetchable()
            return {tp for tp in owned if tp in self.fetcher.positions} - self.fetcher.paused
        return set(self.fetcher.positions) - self.fetcher.paused

    def _assigned(self, tp) -> tuple:
        tp = tuple(tp)
        if tp not in self.fetcher.positions:
            raise UnknownTopicOrPartition(f"{tp} is not assigned to this consumer")
        return tp

    def seek(self, tp, offset: int) -> None:
        """The next poll returns `tp` from `offset` (Kafka's seek)."""
        if offset < 0:
            raise InvalidRequest(f"seek offset must be >= 0, not {offset}")
        self.fetcher.seek(self._assigned(tp), offset)

    def seek_to_beginning(self, partitions=None) -> None:
        tps = [self._assigned(tp) for tp in (partitions or list(self.fetcher.positions))]
        for tp, (start, _end) in self._offset_bounds(tps).items():
            self.fetcher.seek(tp, start)

    def seek_to_end(self, partitions=None) -> None:
        tps = [self._assigned(tp) for tp in (partitions or list(self.fetcher.positions))]
        for tp, (_start, end) in self._offset_bounds(tps).items():
            self.fetcher.seek(tp, end)

    def pause(self, partitions) -> None:
        """Stop fetching and returning these (buffered records are kept for resume)."""
        self.fetcher.paused.update(self._assigned(tp) for tp in partitions)

    def resume(self, partitions) -> None:
        self.fetcher.paused.difference_update(tuple(tp) for tp in partitions)

    def paused(self) -> list[tuple]:
        return sorted(self.fetcher.paused)

    @property
    def positions(self) -> dict[tuple, int]:
        """Every assigned partition's known position (the next offset poll returns)."""
        return {tp: p for tp, p in self.fetcher.positions.items() if p is not None}

    def position(self, tp) -> int:
        """The next offset poll returns for `tp` (found now when not yet known)."""
        tp = self._assigned(tp)
        if self.fetcher.positions.get(tp) is None:
            committed = self.committed(tp) if self.group_id is not None else None
            if committed is None:
                start, hw = self._offset_bounds([tp])[tp]
                committed = start if self.auto_offset_reset == "earliest" else hw
            self.fetcher.seek(tp, committed)
        return self.fetcher.positions[tp]

    def _offset_bounds(self, partitions) -> dict[tuple, tuple[int, int]]:
        """{tp: (log start offset, end offset)} from the partitions' leaders, one call per
        leader (all leaders at once): the end is the high watermark, the last stable
        offset for read_committed (Kafka's endOffsets). Partitions whose leader is moving
        are asked again after a metadata refresh; LeaderNotAvailable after 100 rounds."""
        committed = self.isolation_level == "read_committed"
        left = list(dict.fromkeys(tuple(tp) for tp in partitions))
        out: dict[tuple, tuple[int, int]] = {}
        for _ in range(100):
            asks: dict[int, list] = {}
            for tp in left:
                leader = self.metadata.leader(tp)
                if leader is not None:
                    asks.setdefault(leader[0], []).append((tp, 0, leader[1], -1))
            refs = {}
            for broker, batch in asks.items():
                actor = self.cluster.broker_actor(broker)
                if actor is not None:
                    refs[broker] = actor.fetch_many.remote(-1, batch, 0, 0, 1,
                                                           1 if committed else 0)
            for ref in refs.values():
                try:
                    answers = ray.get(ref, timeout=30)
                except Exception:  # the leader is moving: refresh and ask again
                    continue
                for tp, r in answers.items():
                    if r["error"] in (E.NONE, E.OFFSET_OUT_OF_RANGE):
                        end = r.get("last_stable_offset", -1) if committed else -1
                        out[tuple(tp)] = (r["log_start_offset"],
                                          end if end >= 0 else r["high_watermark"])
            left = [tp for tp in left if tp not in out]
            if not left:
                return out
            self.metadata.refresh()
            time.sleep(0.05)  # poll interval while the leader moves
        raise LeaderNotAvailable(f"no leader for {left[0]}"
                                 + (f" and {len(left) - 1} more" if len(left) > 1 else ""))

    def beginning_offsets(self, partitions) -> dict[tuple, int]:
        """Each partition's log start offset (moved by retention), from its leader."""
        return {tp: bounds[0] for tp, bounds in self._offset_bounds(partitions).items()}

    def offsets_for_times(self, timestamps) -> dict:
        """Kafka's offsetsForTimes: {tp: timestamp ms} → {tp: OffsetAndTimestamp of the first
        record at or after it, or None when no record is that recent}, from each leader."""
        out = {}
        for tp, ts in timestamps.items():
            tp = tuple(tp)
            if int(ts) < 0:
                raise InvalidRequest(f"timestamp for {tp} must be >= 0, not {ts}")
            for _attempt in range(100):
                leader = self.metadata.leader(tp)
                answer = None
                if leader is not None:
                    try:
                        answer = ray.get(self.cluster.broker_actor(leader[0]).list_offsets.remote(
                            [(tp, int(ts), leader[1])]), timeout=30)[tp]
                    except Exception:  # the leader is moving: refresh and retry
                        answer = None
                if answer is not None and not answer.error:
                    out[tp] = None if answer.offset < 0 else \
                        OffsetAndTimestamp(answer.offset, answer.timestamp)
                    break
                if answer is not None and answer.error not in RETRIABLE:
                    raise error_for_code(answer.error, f"offsets for times of {tp}")
                self.metadata.refresh()
                time.sleep(0.05)  # poll interval while the leader moves
            else:
                raise LeaderNotAvailable(f"no leader for {tp}")
        return out

    def end_offsets(self, partitions) -> dict[tuple, int]:
        """Each partition's high watermark (the next offset a consumer can read)."""
        return {tp: bounds[1] for tp, bounds in self._offset_bounds(partitions).items()}

    def offset_bounds(self, partitions) -> dict[tuple, tuple[int, int]]:
        """(log start offset, high watermark) per partition, from each leader: Kafka's
        beginning_offsets and end_offsets in one request."""
        return self._offset_bounds(partitions)

    # -- committed offsets ----------------------------------------------------------------------------
    def commit(self, offsets: dict | None = None, asynchronous: bool = False,
               callback=None) -> None:
        """Commit `offsets` {tp: next offset to read}, default every assigned partition's
        position. Synchronous by default (CommitFailed / RebalanceInProgress when the group
        moved on: nothing committed); `asynchronous=True` returns at once and a later
        poll() runs `callback(offsets, error or None)` (Kafka's commitAsync)."""
        if self.group_id is None:
            raise KafkaError("commit needs a group_id")
        if offsets is None:
            offsets = self.positions
            if self._subscribed:
                owned = self.member.owned
                offsets = {tp: o for tp, o in offsets.items() if tp in owned}
        offsets = {tuple(tp): int(o) for tp, o in offsets.items()}
        bad = sorted(tp for tp, o in offsets.items() if o < 0)
        if bad:
            raise InvalidRequest(f"offsets must be >= 0: {bad}; nothing committed")
        if self._subscribed and self.member.stable:     # else the member refuses it, typed
            foreign = sorted(set(offsets) - self.member.owned)
            if foreign:
                raise InvalidRequest(f"group {self.group_id}: {foreign} are not assigned to this "
                                     "member; nothing committed")
        if not offsets:
            return
        self.member.commit(tuple(sorted(offsets.items())), asynchronous=asynchronous,
                           callback=callback)

    def committed(self, tp, timeout_s: float = COMMITTED_TIMEOUT_S):
        """The committed offset of `tp` (None: none), or {tp: offset} for a list of them;
        stable (see the module rules): UnstableOffsetCommit when a transaction still commits
        one of them after `timeout_s`."""
        if self.group_id is None:
            return None
        single = isinstance(tp, tuple) and len(tp) == 2 and isinstance(tp[0], str)
        asked = [tuple(tp)] if single else [tuple(x) for x in tp]
        deadline = time.monotonic() + timeout_s
        while True:
            result = self.member.call(m.OffsetFetch(0, self.group_id, tuple(asked), True))
            if result.error:
                raise error_for_code(result.error, f"offsets of group {self.group_id}")
            if not any(p.error == E.UNSTABLE_OFFSET_COMMIT for p in result.partitions):
                break
            if time.monotonic() >= deadline:
                raise error_for_code(E.UNSTABLE_OFFSET_COMMIT,
                                     f"group {self.group_id}: a transaction still commits "
                                     f"offsets of {asked} after {timeout_s} s")
            time.sleep(UNSTABLE_RETRY_MS / 1000)    # back-off before asking again
        found = {(p.topic, p.partition): p.offset for p in result.partitions
                 if p.offset >= 0 and not p.error}
        return found.get(asked[0]) if single else {x: found.get(x) for x in asked}

    # -- poll -------------------------------------------------------------------------------------------
    def _group_poll(self) -> None:
        """Kafka's coordinator.poll: the member's rebalance step, auto-commit, callbacks."""
        if self._member is None:
            return
        member = self._member
        self._ask_unstable_again()
        if not self._subscribed and self.enable_auto_commit:
            self._maybe_auto_commit_assigned()
        member.process(Poll(_ms()))
        member.advance(())
        member.run_app_effects()
        fatal = member.machine.take_fatal()
        if fatal is not None:
            raise fatal

    def _maybe_auto_commit_assigned(self) -> None:
        """Manually assigned partitions of a group_id auto-commit too (Kafka's rule), as a
        simple group, every auto_commit_interval_ms."""
        now = _ms()
        if now < self._next_auto_commit_ms:
            return
        self._next_auto_commit_ms = now + self._member_config.auto_commit_interval_ms
        if self.positions:
            self.commit(asynchronous=True)

    def _round(self, deadline: float, have: bool = False) -> None:
        """Send what can be fetched, then wait for an answer (not at all when `have`)."""
        self.fetcher.send(self._fetchable())
        until = time.monotonic() if have else deadline
        if self._member is not None:
            ready = self._member.wait(until, self.fetcher.refs())
            self._member.run_app_effects()
        else:
            refs = self.fetcher.refs()
            ready = set()
            if refs:
                got, rest = ray.wait(refs, num_returns=1, timeout=max(0.0, until - time.monotonic()))
                if got and rest:
                    got += ray.wait(rest, num_returns=len(rest), timeout=0)[0]
                ready = set(got)
            elif not have:
                time.sleep(max(0.0, min(until - time.monotonic(), 0.05)))  # leaders move
        self.fetcher.advance(ready)

    def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> list[ConsumerRecord]:
        max_records = max_records or self.max_poll_records
        deadline = time.monotonic() + timeout_ms / 1000
        self._group_poll()
        self.fetcher.taken.clear()
        out = self.fetcher.take(max_records, self._fetchable())
        while True:
            self._round(deadline, have=bool(out))
            out += self.fetcher.take(max_records - len(out), self._fetchable())
            if out or time.monotonic() >= deadline:
                gone = self._no_longer_owned()
                if gone:                 # the membership changed under this poll
                    out = [r for r in out if (r[0], r[1]) not in gone]
                return out

    def _no_longer_owned(self) -> set:
        """Partitions taken from in this poll that may not be returned now (the group took
        them away, or their ownership is no longer confirmed, meanwhile): given back."""
        if not self._subscribed or not self.fetcher.taken:
            return set()
        gone = set(self.fetcher.taken) - self._fetchable()
        self.fetcher.give_back(gone)
        return gone

    def poll_batch(self, timeout_ms: int = 1000, max_records: int | None = None):
        """poll(), columnar: a pyarrow.Table in Spark's Kafka-source schema (key, value,
        topic, partition, offset, timestamp, timestampType; no headers), built by the
        compiled decoder with no Python object per record. Same positions, order and
        waiting as poll(); the two may be mixed (records poll() takes from a chunk that
        poll_batch cut come without headers)."""
        import pyarrow as pa       # here: plain poll() users never load Arrow and numba
        from rayka.client.columns import ARROW_SCHEMA
        self.fetcher.columnar = True      # buffer answers undecoded from now on
        max_records = max_records or self.max_poll_records
        deadline = time.monotonic() + timeout_ms / 1000
        self._group_poll()
        self.fetcher.taken.clear()
        out = self.fetcher.take_columns(max_records, self._fetchable())
        while not sum(b.num_rows for b in out):
            self._round(deadline)
            out = self.fetcher.take_columns(max_records, self._fetchable())
            if time.monotonic() >= deadline:
                break
        gone = self._no_longer_owned()
        if gone:
            out = [b for b in out if (b.column(2)[0].as_py(), b.column(3)[0].as_py()) not in gone]
        return pa.Table.from_batches(out, schema=ARROW_SCHEMA)

    def close(self, timeout_ms: int = 30_000) -> None:
        """Commit the positions (auto-commit), give the partitions back and leave the group
        (its partitions go to the others at once, no session timeout)."""
        if self._member is not None:
            if not self._subscribed and self.enable_auto_commit and self.positions:
                try:
                    self.commit()
                except KafkaError as exc:        # closing anyway: the next reader re-reads
                    log.warning("group %s: commit on close failed: %s", self.group_id, exc)
            self._member.close(timeout_ms / 1000)
        self.fetcher.clear()
