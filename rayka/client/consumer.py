"""Consumer: reads partitions from their leaders (below the high watermark only).

Rules:
- `subscribe(topics, on_assign=, on_revoke=)` with a group_id makes the consumer a member
  of that Kafka consumer group (rayka/client/group.py: JoinGroup/SyncGroup/Heartbeat through
  the group's coordinator broker, the assignors of rayka/client/assignors.py); `poll` runs
  the rebalances (on_revoke before partitions go, on_assign after they come) and fetches
  only what the group assigned. Without a group_id, `subscribe` takes every partition.
  `assign` takes explicit partitions (a "simple" group: commits carry no generation).
- Offsets are committed to the group's coordinator (`__consumer_offsets`, Kafka's store):
  `commit()` (synchronous, generation-checked: CommitFailed after a rebalance), `committed()`.
- A partition's starting position: `seek`, else the group's committed offset, else the
  log start (auto_offset_reset="earliest") or the high watermark ("latest").
- Fetching (Kafka's Fetcher): each partition has a FETCH position (the next offset to ask
  for) ahead of its consumed `position` by what is buffered. One long-poll fetch is in
  flight per leader broker, for all its partitions whose buffer is not full, carrying the
  leader epoch the client knows (KIP-320); when it answers, its batches are decoded into the
  partitions' buffers and the next fetch to that broker goes out at once. `poll` returns as
  soon as ANY buffered record is there (up to max_records, in offset order per partition),
  or after timeout_ms with nothing; it never waits for the slowest leader.
- Records below the fetch position (a batch starts earlier) are skipped, so every offset is
  returned once, in order. An answer for a partition whose fetch position moved meanwhile
  (seek, assign, reset) is dropped: it only read.
- NOT_LEADER / FENCED / UNKNOWN_LEADER_EPOCH / a dead broker: refresh metadata and fetch
  from the new leader (buffered records stay valid: they are below the HW). A fetch
  unanswered for max_wait + 30 s (a paused broker) is abandoned the same way.
  OFFSET_OUT_OF_RANGE resets by auto_offset_reset.
- Fetch answers are decoded on arrival for poll(); once poll_batch() was called they are
  buffered undecoded and decoded when taken (either way): poll() goes straight from
  aiokafka's C record batch to ConsumerRecord tuples (NamedTuple built by tuple.__new__:
  its Python __new__ cost more than the decoding itself); poll_batch() decodes with the
  compiled decoder (rayka/client/fastdecode.py) into Arrow columns, no object per record.
"""

from __future__ import annotations

import time
from collections import deque

import ray

from rayka.client.group import GroupMember
from rayka.client.metadata import Metadata
from rayka.client.types import ConsumerRecord, OffsetAndTimestamp
from replicas.errors import InvalidRequest, KafkaError, UnknownTopicOrPartition, error_for_code
from aiokafka.record.default_records import DefaultRecordBatch

from replicas.records import iter_headers

REFRESH = {3, 5, 6, 74, 75}
FETCH_MAX_WAIT_MS = 500          # a fetch's long-poll; it outlives a shorter poll() in flight
ABANDON_S = 30                   # past max_wait: the broker is paused or gone
_new = tuple.__new__


class Consumer:
    def __init__(self, cluster, group_id: str | None = None, auto_offset_reset: str = "earliest",
                 max_poll_records: int = 100_000, fetch_max_bytes: int = 4 << 20,
                 partition_assignment_strategy=("range", "cooperative-sticky"),
                 session_timeout_ms: int = 45_000, heartbeat_interval_ms: int = 3_000,
                 group_instance_id: str | None = None):
        if auto_offset_reset not in ("earliest", "latest"):
            raise KafkaError(f"auto_offset_reset must be earliest or latest, not {auto_offset_reset!r}")
        self.cluster = cluster
        self.group_id = group_id
        self._group_kw = dict(assignors=tuple(partition_assignment_strategy),
                              session_timeout_ms=session_timeout_ms,
                              heartbeat_interval_ms=heartbeat_interval_ms,
                              group_instance_id=group_instance_id)
        self._member: GroupMember | None = None     # created by the first group use
        self._subscribed: list[str] | None = None   # group subscription (None: manual assign)
        self._on_assign = self._on_revoke = None
        self.auto_offset_reset = auto_offset_reset
        self.max_poll_records = max_poll_records
        self.fetch_max_bytes = fetch_max_bytes
        self.metadata = Metadata(cluster)
        self.positions: dict[tuple, int | None] = {}    # next offset poll() returns
        self._fetch_pos: dict[tuple, int] = {}            # next offset to fetch (≥ position)
        self._buffers: dict[tuple, deque] = {}            # fetched, not yet returned
        self._columnar = False                            # poll_batch() used: keep bytes
        self._inflight: dict[int, tuple] = {}     # broker → (request list, ObjectRef, sent at)

    # -- assignment and positions -------------------------------------------------------------------
    def assign(self, partitions) -> None:
        self.positions = {tuple(tp): self.positions.get(tuple(tp)) for tp in partitions}
        for tp in list(self._fetch_pos):
            if tp not in self.positions:
                self._reset(tp)

    def subscribe(self, topics, on_assign=None, on_revoke=None) -> None:
        """With a group_id: join the group (the next poll rebalances); else every partition."""
        if self.group_id is None:
            self.assign([(t, p) for t in topics for p in self._partition_counts([t])[t]])
            return
        self._subscribed = sorted(set(topics))
        self._on_assign, self._on_revoke = on_assign, on_revoke
        self.member.needs_join = True

    @property
    def member(self) -> GroupMember:
        if self.group_id is None:
            raise KafkaError("this needs a group_id")
        if self._member is None:
            self._member = GroupMember(self.cluster, self.group_id, **self._group_kw)
        return self._member

    def _partition_counts(self, topics) -> dict[str, range]:
        admin = self.cluster.admin()
        return {t: range(len(admin.describe_topic(t))) for t in topics}

    def _maybe_rebalance(self) -> None:
        """Kafka's poll-driven rebalance: revoke, join + sync, assign (callbacks on the way)."""
        if self._subscribed is None or not self.member.needs_join:
            return
        member = self.member
        revoked, added = member.join(self._subscribed,
                                     lambda ts: {t: len(r) for t, r in self._partition_counts(ts).items()})
        if revoked and self._on_revoke is not None:
            self._on_revoke(sorted(revoked))
        self.positions = {tp: self.positions.get(tp) for tp in member.owned}
        for tp in list(self._fetch_pos):
            if tp not in self.positions:
                self._reset(tp)
        if added:
            committed = member.committed(added)
            for tp in added:
                self.positions[tp] = committed.get(tp)
        if added and self._on_assign is not None:
            self._on_assign(sorted(added))

    def assignment(self) -> list[tuple]:
        return sorted(self.positions)

    def seek(self, tp, offset: int) -> None:
        tp = tuple(tp)
        if tp not in self.positions:
            raise UnknownTopicOrPartition(f"{tp} is not assigned to this consumer")
        self._reset(tp)
        self.positions[tp] = offset

    def seek_to_beginning(self, partitions=None) -> None:
        for tp in partitions or list(self.positions):
            self._reset(tuple(tp))
            self.positions[tuple(tp)] = self._list_offsets(tuple(tp))[0]

    def _reset(self, tp) -> None:
        """Forget what was fetched ahead for tp (an in-flight answer for it gets dropped)."""
        self._fetch_pos.pop(tp, None)
        self._buffers.pop(tp, None)

    def position(self, tp) -> int:
        tp = tuple(tp)
        if self.positions.get(tp) is None:
            self.positions[tp] = self._initial_position(tp)
        return self.positions[tp]

    def _initial_position(self, tp) -> int:
        if self.group_id is not None:
            committed = self.committed(tp)
            if committed is not None:
                return committed
        start, hw = self._list_offsets(tp)
        return start if self.auto_offset_reset == "earliest" else hw

    def _list_offsets(self, tp) -> tuple[int, int]:
        """(log start offset, high watermark) from the partition's leader."""
        for _ in range(100):
            leader = self.metadata.leader(tp)
            if leader is not None:
                try:
                    r = ray.get(self.cluster.broker_actor(leader[0]).fetch_many.remote(
                        -1, [(tp, 0, leader[1], -1)], 0, 0, 1), timeout=30)[tp]
                    if not r["error"] or r["error"] == 1:
                        return r["log_start_offset"], r["high_watermark"]
                except Exception:  # the leader is moving: refresh and retry
                    pass
            self.metadata.refresh()
            time.sleep(0.05)  # poll interval while the leader moves
        raise error_for_code(5, f"no leader for {tp}")

    def beginning_offsets(self, partitions) -> dict[tuple, int]:
        """Each partition's log start offset (moved by retention), from its leader."""
        return {tuple(tp): self._list_offsets(tuple(tp))[0] for tp in partitions}

    def offsets_for_times(self, timestamps) -> dict:
        """Kafka's offsetsForTimes: {tp: timestamp ms} → {tp: OffsetAndTimestamp of the first
        record at or after it, or None when no record is that recent}, from each leader."""
        out = {}
        for tp, ts in timestamps.items():
            tp = tuple(tp)
            if int(ts) < 0:
                raise InvalidRequest(f"timestamp for {tp} must be >= 0, not {ts}")
            for attempt in range(100):
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
                if answer is not None and not error_for_code(answer.error).retriable:
                    raise error_for_code(answer.error, f"offsets for times of {tp}")
                self.metadata.refresh()
                time.sleep(0.05)  # poll interval while the leader moves
            else:
                raise error_for_code(5, f"no leader for {tp}")
        return out

    def end_offsets(self, partitions) -> dict[tuple, int]:
        """Each partition's high watermark (the next offset a consumer can read)."""
        return {tuple(tp): self._list_offsets(tuple(tp))[1] for tp in partitions}

    def offset_bounds(self, partitions) -> dict[tuple, tuple[int, int]]:
        """(log start offset, high watermark) per partition, from each leader: Kafka's
        beginning_offsets and end_offsets in one request."""
        return {tuple(tp): self._list_offsets(tuple(tp)) for tp in partitions}

    # -- committed offsets ----------------------------------------------------------------------------
    def commit(self, offsets: dict | None = None) -> None:
        """Synchronous commit to the group's coordinator: `offsets` {tp: next offset to read},
        default every assigned partition's position. A group member's commit carries its
        generation (CommitFailed after a rebalance: nothing committed); a manual assignment
        commits as a simple group."""
        if self.group_id is None:
            raise KafkaError("commit needs a group_id")
        offsets = {tuple(tp): o for tp, o in (offsets or {
            tp: p for tp, p in self.positions.items() if p is not None}).items()}
        if self._subscribed is not None:
            foreign = sorted(set(offsets) - self.member.owned)
            if foreign:
                raise InvalidRequest(f"group {self.group_id}: {foreign} are not assigned to this "
                                     "member; nothing committed")
        self.member.commit(offsets, simple=self._subscribed is None)

    def committed(self, tp) -> int | None:
        if self.group_id is None:
            return None
        return self.member.committed([tp]).get(tuple(tp))

    # -- poll -------------------------------------------------------------------------------------------
    def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> list[ConsumerRecord]:
        max_records = max_records or self.max_poll_records
        self._maybe_rebalance()
        deadline = time.monotonic() + timeout_ms / 1000
        out = self._take(max_records)
        while True:
            self._fetch_round(deadline, have=bool(out))
            out += self._take(max_records - len(out))
            if out or time.monotonic() >= deadline:
                return out

    def poll_batch(self, timeout_ms: int = 1000, max_records: int | None = None):
        """poll(), columnar: a pyarrow.Table in Spark's Kafka-source schema (key, value,
        topic, partition, offset, timestamp, timestampType; no headers), built by the
        compiled decoder with no Python object per record. Same positions, order and
        waiting as poll(); the two may be mixed (records poll() takes from a chunk that
        poll_batch cut come without headers)."""
        import pyarrow as pa       # here: plain poll() users never load Arrow and numba
        from rayka.client.columns import ARROW_SCHEMA
        self._columnar = True      # buffer answers undecoded from now on
        max_records = max_records or self.max_poll_records
        self._maybe_rebalance()
        deadline = time.monotonic() + timeout_ms / 1000
        out = self._take_columns(max_records)
        got = sum(b.num_rows for b in out)
        while not got:
            self._fetch_round(deadline)
            out = self._take_columns(max_records)
            got = sum(b.num_rows for b in out)
            if time.monotonic() >= deadline:
                break
        return pa.Table.from_batches(out, schema=ARROW_SCHEMA)

    def _fetch_round(self, deadline: float, have: bool = False) -> None:
        """Send what can be fetched, then wait for an answer (not at all when `have`)."""
        self._send_fetches()
        refs = [f[1] for f in self._inflight.values()]
        wait_s = 0 if have else max(0.0, deadline - time.monotonic())
        if refs:
            ready, _ = ray.wait(refs, num_returns=len(refs) if not wait_s else 1, timeout=wait_s)
            self._on_answers(set(ready))
        elif wait_s:
            time.sleep(min(wait_s, 0.05))   # no leader known yet: metadata catches up
        self._abandon_stale()

    def _take(self, limit: int) -> list[ConsumerRecord]:
        """Up to `limit` buffered records, partition by partition; positions move past them."""
        got: list = []
        for tp, buf in self._buffers.items():
            while buf and len(got) < limit:
                chunk = buf[0]
                if type(chunk) is not list:
                    chunk = buf[0] = self._records_of(tp, chunk)
                room = limit - len(got)
                if len(chunk) <= room:
                    got += buf.popleft()
                else:
                    got += chunk[:room]
                    buf[0] = chunk[room:]
            if got and got[-1][0] == tp[0] and got[-1][1] == tp[1]:
                self.positions[tp] = got[-1][2] + 1
            if len(got) >= limit:
                break
        return got

    def _take_columns(self, limit: int) -> list:
        """_take as Arrow record batches (a chunk's rest stays buffered as a slice)."""
        out, n = [], 0
        for tp, buf in self._buffers.items():
            while buf and n < limit:
                batch = self._columns_of(tp, buf.popleft())
                if batch.num_rows > limit - n:
                    buf.appendleft(batch.slice(limit - n))
                    batch = batch.slice(0, limit - n)
                if batch.num_rows:
                    out.append(batch)
                    n += batch.num_rows
                    self.positions[tp] = batch.column(4)[-1].as_py() + 1
            if n >= limit:
                break
        return out

    def _records_of(self, tp, chunk) -> list:
        """A buffered chunk as ConsumerRecords (raw bytes, or Arrow after a poll_batch)."""
        topic, partition = tp
        if type(chunk) is _Raw:
            return self._decode_records(tp, chunk.data, chunk.pos, [
                h for h in iter_headers(chunk.data) if h.last_offset >= chunk.pos])
        import pyarrow as pa          # rare: poll() after a poll_batch cut a chunk
        stamps = chunk.column(5).cast(pa.int64()).to_pylist()      # microseconds
        return [_new(ConsumerRecord, (topic, partition, o, k, v, t // 1000, ()))
                for k, v, o, t in zip(chunk.column(0).to_pylist(), chunk.column(1).to_pylist(),
                                      chunk.column(4).to_pylist(), stamps)]

    def _columns_of(self, tp, chunk):
        from rayka.client.columns import Columns
        if type(chunk) is _Raw:
            cols = Columns(*tp)
            cols.add(chunk.data, chunk.pos, 2**63 - 1)
            batches = cols.take()         # one batch per add(), none when nothing was kept
            return batches[0] if batches else _empty_batch()
        if type(chunk) is list:       # rare: poll_batch after poll() cut a chunk
            return _batch_of_records(tp, chunk)
        return chunk

    def _buffered(self, tp) -> int:
        return sum(len(c) for c in self._buffers.get(tp, ()))

    def _send_fetches(self) -> None:
        by_leader: dict[int, list] = {}
        for tp in self.positions:
            if self._buffered(tp) >= self.max_poll_records:
                continue                  # enough ahead: fetch again once it is consumed
            leader = self.metadata.leader(tp)
            if leader is None:
                self.metadata.refresh()
                leader = self.metadata.leader(tp)
            if leader is not None and leader[0] not in self._inflight:
                pos = self._fetch_pos.get(tp)
                if pos is None:
                    pos = self._fetch_pos[tp] = self.position(tp)
                by_leader.setdefault(leader[0], []).append((tp, pos, leader[1], -1))
        for broker, reqs in by_leader.items():
            actor = self.cluster.broker_actor(broker)
            if actor is None:        # the leader's actor is gone for good: find the new leader
                self.metadata.refresh()
                continue
            ref = actor.fetch_many.remote(-1, reqs, FETCH_MAX_WAIT_MS, 1, self.fetch_max_bytes)
            self._inflight[broker] = (reqs, ref, time.monotonic())

    def _on_answers(self, ready: set) -> None:
        for broker, (reqs, ref, _) in list(self._inflight.items()):
            if ref not in ready:
                continue
            del self._inflight[broker]
            try:
                results = ray.get(ref)
            except Exception:  # broker died mid-fetch: its partitions go to the new leader
                self.metadata.refresh()
                continue
            for tp, offset, _, _ in reqs:
                r = results.get(tp)
                if r is None or tp not in self.positions or self._fetch_pos.get(tp) != offset:
                    continue                       # seek / assign / reset since: drop it
                if r["error"] in REFRESH:
                    self.metadata.refresh()
                elif r["error"] == 1:
                    self._reset(tp)
                    self.positions[tp] = None
                elif r["error"]:
                    raise error_for_code(r["error"], f"fetch {tp}")
                elif r["records"]:
                    self._decode(tp, r["records"], offset)

    def _abandon_stale(self) -> None:
        limit = time.monotonic() - FETCH_MAX_WAIT_MS / 1000 - ABANDON_S
        for broker, (_, _, sent) in list(self._inflight.items()):
            if sent < limit:
                del self._inflight[broker]
                self.metadata.refresh()

    def _decode(self, tp, data: bytes, pos: int) -> None:
        """Buffer the answer's records at or after `pos`: decoded for poll(), still encoded
        once poll_batch() was used; the fetch position moves past them. The batch headers
        are scanned once (this runs for every fetch answer)."""
        headers = [h for h in iter_headers(data) if h.last_offset >= pos]
        if headers:
            if self._columnar:
                chunk = _Raw(data, pos, sum(h.last_offset - max(h.base_offset, pos) + 1
                                            for h in headers))   # at most: compaction
            else:
                chunk = self._decode_records(tp, data, pos, headers)
            if chunk:
                self._buffers.setdefault(tp, deque()).append(chunk)
        self._fetch_pos[tp] = max([pos] + [h.next_offset for h in headers])

    @staticmethod
    def _decode_records(tp, data: bytes, pos: int, headers) -> list:
        """The records at or after `pos` of the batches `headers` (those ending there)."""
        topic, partition = tp
        view = memoryview(data)
        out: list = []
        for h in headers:
            batch = DefaultRecordBatch(view[h.position: h.position + h.size])
            recs = [_new(ConsumerRecord, (topic, partition, r.offset, r.key, r.value, r.timestamp,
                                          tuple(r.headers) if r.headers else ()))
                    for r in batch]
            if h.base_offset < pos:
                recs = [r for r in recs if r[2] >= pos]
            out += recs
        return out

    def close(self) -> None:
        """Leave the group (its partitions go to the others at once, no session timeout)."""
        if self._member is not None:
            self._member.leave()
        self._inflight.clear()
        self._buffers.clear()
        self._fetch_pos.clear()
        self.positions.clear()


class _Raw:
    """A fetch answer's bytes, decoded when taken: `count` (an upper bound) records at or
    after `pos`."""

    __slots__ = ("data", "pos", "count")

    def __init__(self, data: bytes, pos: int, count: int):
        self.data, self.pos, self.count = data, pos, count

    def __len__(self) -> int:
        return self.count


def _empty_batch():
    import pyarrow as pa
    from rayka.client.columns import ARROW_SCHEMA
    return pa.RecordBatch.from_pylist([], schema=ARROW_SCHEMA)


def _batch_of_records(tp, records: list):
    import pyarrow as pa
    from rayka.client.columns import ARROW_SCHEMA
    n = len(records)
    return pa.RecordBatch.from_arrays([
        pa.array([r[3] for r in records], pa.binary()), pa.array([r[4] for r in records], pa.binary()),
        pa.repeat(pa.scalar(tp[0], pa.string()), n), pa.repeat(pa.scalar(tp[1], pa.int32()), n),
        pa.array([r[2] for r in records], pa.int64()),
        pa.array([r[5] * 1000 for r in records], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pa.repeat(pa.scalar(0, pa.int32()), n)], schema=ARROW_SCHEMA)
