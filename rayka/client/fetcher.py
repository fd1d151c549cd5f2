"""Fetcher: a consumer's partitions, positions and fetched-ahead records (Kafka's Fetcher and
SubscriptionState), reading from the partitions' leaders below the high watermark.

Rules:
- Each assigned partition has a consumed `position` (the next offset poll returns; None
  while unknown) and a FETCH position (the next offset to ask for) ahead of it by what is
  buffered. Only partitions the consumer says are fetchable (owned in the group's current
  generation and not paused) are fetched or returned; the others keep their buffers (a
  paused partition resumes where it stood) until they are removed.
- An unknown position is found without blocking: a group consumer first waits for its
  committed offset (`awaiting_committed`, answered by the group member), then, or at once
  without a group, a reset request (a zero-wait fetch of one byte) to the leader gives the
  log start ("earliest") or the high watermark ("latest").
- One long-poll fetch is in flight per leader broker, for all its fetchable partitions whose
  buffer is not full, carrying the leader epoch the client knows (KIP-320); its answer is
  buffered and the next fetch to that broker goes out at once.
- Records below the fetch position (a batch starts earlier) are skipped, so every offset is
  returned once, in order. An answer for a partition whose fetch position moved meanwhile
  (seek, reassignment, reset) is dropped: it only read.
- A retriable answer (`REFETCH`: NOT_LEADER / FENCED / UNKNOWN_LEADER_EPOCH ...) or a dead
  broker: refresh metadata and fetch from the new leader (buffered records stay valid: they
  are below the HW). A fetch unanswered for max_wait + ABANDON_S (a paused broker) is
  abandoned the same way.
  OFFSET_OUT_OF_RANGE resets by auto_offset_reset.
- Control batches (transaction markers) are never returned; with read_committed the
  broker answers up to the last stable offset and the batches of aborted transactions are
  dropped too (replicas/visible.py). A partition whose buffer is empty stands at its
  fetch position, past what was skipped (Kafka's consumer does the same), and a reset to
  "latest" is the last stable offset.
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
from aiokafka.record.default_records import DefaultRecordBatch

from rayka.client.types import ConsumerRecord
from replicas.visible import visible_batches
from replicas.errors import RETRIABLE, ErrorCode, error_for_code
from replicas.records import iter_headers

NONE = ErrorCode.NONE.value
OFFSET_OUT_OF_RANGE = ErrorCode.OFFSET_OUT_OF_RANGE.value
# A fetch answer a metadata refresh and a new fetch can cure: Kafka's retriable codes but
# CORRUPT_MESSAGE, which every read of that batch meets again (Kafka's consumer raises it).
REFETCH = RETRIABLE - {ErrorCode.CORRUPT_MESSAGE.value}
FETCH_MAX_WAIT_MS = 500          # a fetch's long-poll; it outlives a shorter poll() in flight
ABANDON_S = 30                   # past max_wait: the broker is paused or gone
_new = tuple.__new__


class Fetcher:
    def __init__(self, cluster, metadata, *, auto_offset_reset: str, max_poll_records: int,
                 fetch_max_bytes: int, read_committed: bool = False):
        self.cluster, self.metadata = cluster, metadata
        self.read_committed = read_committed
        self.auto_offset_reset = auto_offset_reset
        self.max_poll_records, self.fetch_max_bytes = max_poll_records, fetch_max_bytes
        self.positions: dict[tuple, int | None] = {}    # next offset poll() returns
        self.awaiting_committed: set[tuple] = set()       # a group's committed offset is asked
        self.paused: set[tuple] = set()
        self.columnar = False                             # poll_batch() used: keep bytes
        self._fetch_pos: dict[tuple, int] = {}            # next offset to fetch (≥ position)
        self._buffers: dict[tuple, deque] = {}            # fetched, not yet returned
        self._inflight: dict[int, tuple] = {}     # broker → (request list, ObjectRef, sent at)
        self._resets: dict[int, tuple] = {}       # broker → (partitions, ObjectRef, sent at)
        self.taken: dict[tuple, int] = {}         # tp → first offset taken since the last clear

    # -- the assignment -------------------------------------------------------------------------
    def assign(self, partitions) -> None:
        """Exactly these partitions (known positions of kept ones stay)."""
        keep = {tuple(tp) for tp in partitions}
        self.remove(set(self.positions) - keep)
        self.add(keep)

    def add(self, partitions, awaiting_committed: bool = False) -> None:
        for tp in partitions:
            tp = tuple(tp)
            self.positions.setdefault(tp, None)
            if awaiting_committed and self.positions[tp] is None:
                self.awaiting_committed.add(tp)

    def remove(self, partitions) -> None:
        for tp in partitions:
            tp = tuple(tp)
            self.positions.pop(tp, None)
            self.awaiting_committed.discard(tp)
            self.paused.discard(tp)
            self.forget_fetched(tp)

    def forget_fetched(self, tp) -> None:
        """Forget what was fetched ahead for tp (an in-flight answer for it gets dropped)."""
        self._fetch_pos.pop(tp, None)
        self._buffers.pop(tp, None)

    def seek(self, tp, offset: int | None) -> None:
        self.forget_fetched(tp)
        self.awaiting_committed.discard(tp)
        self.positions[tp] = offset

    def on_committed(self, asked, committed: dict) -> None:
        """The group's committed offsets for `asked` ({} when none could be read): a
        partition still waiting takes its offset, or is reset by auto_offset_reset."""
        for tp in asked:
            if tp in self.awaiting_committed:
                self.awaiting_committed.discard(tp)
                if self.positions.get(tp, 0) is None and tp in committed:
                    self.positions[tp] = committed[tp]

    # -- requests -------------------------------------------------------------------------------
    def refs(self) -> list:
        return [f[1] for f in self._inflight.values()] + [r[1] for r in self._resets.values()]

    def send(self, fetchable) -> None:
        """A fetch to every leader with none in flight, for its fetchable partitions with a
        position whose buffer is not full; a reset for those without a position."""
        fetches: dict[int, list] = {}
        resets: dict[int, list] = {}
        for tp in fetchable:
            if tp not in self.positions or tp in self.awaiting_committed:
                continue
            position = self.positions[tp]
            if position is not None and self._buffered(tp) >= self.max_poll_records:
                continue                  # enough ahead: fetch again once it is consumed
            leader = self.metadata.leader(tp)
            if leader is None:
                self.metadata.refresh()
                leader = self.metadata.leader(tp)
            if leader is None:
                continue
            if position is None:
                if leader[0] not in self._resets:
                    resets.setdefault(leader[0], []).append((tp, 0, leader[1], -1))
            elif leader[0] not in self._inflight:
                pos = self._fetch_pos.setdefault(tp, position)
                fetches.setdefault(leader[0], []).append((tp, pos, leader[1], -1))
        for table, batch, wait_ms, max_bytes in ((self._inflight, fetches, FETCH_MAX_WAIT_MS,
                                                  self.fetch_max_bytes),
                                                 (self._resets, resets, 0, 1)):
            for broker, reqs in batch.items():
                actor = self.cluster.broker_actor(broker)
                if actor is None:     # the leader's actor is gone for good: find the new leader
                    self.metadata.refresh()
                    continue
                ref = actor.fetch_many.remote(-1, reqs, wait_ms, 1 if wait_ms else 0, max_bytes,
                                              1 if self.read_committed else 0)
                table[broker] = (reqs, ref, time.monotonic())

    def advance(self, ready: set) -> None:
        """Take the answers among `ready`; abandon fetches of a silent broker."""
        for table, on_answer in ((self._inflight, self._on_fetched), (self._resets, self._on_reset)):
            for broker, (reqs, ref, _) in list(table.items()):
                if ref not in ready:
                    continue
                del table[broker]
                try:
                    results = ray.get(ref)
                except Exception:  # broker died mid-fetch: its partitions go to the new leader
                    self.metadata.refresh()
                    continue
                for req in reqs:
                    r = results.get(req[0])
                    if r is not None:
                        on_answer(req[0], req[1], r)
        limit = time.monotonic() - FETCH_MAX_WAIT_MS / 1000 - ABANDON_S
        for table in (self._inflight, self._resets):
            for broker, (_, _, sent) in list(table.items()):
                if sent < limit:
                    del table[broker]
                    self.metadata.refresh()

    def _on_fetched(self, tp, offset: int, r: dict) -> None:
        if tp not in self.positions or self._fetch_pos.get(tp) != offset:
            return                                 # seek / reassignment / reset since: drop it
        if r["error"] in REFETCH:
            self.metadata.refresh()
        elif r["error"] == OFFSET_OUT_OF_RANGE:
            self.forget_fetched(tp)
            self.positions[tp] = None
        elif r["error"]:
            raise error_for_code(r["error"], f"fetch {tp}")
        elif r["records"]:
            data = r["records"]
            end = max([offset] + [h.next_offset for h in iter_headers(data)])
            self._decode(tp, visible_batches(
                data, (r.get("aborted_transactions") or ()) if self.read_committed else None),
                offset)
            self._fetch_pos[tp] = max(self._fetch_pos.get(tp, offset), end)
            self._caught_up(tp)

    def _on_reset(self, tp, _offset: int, r: dict) -> None:
        if r["error"] in REFETCH:
            self.metadata.refresh()
        elif r["error"] in (NONE, OFFSET_OUT_OF_RANGE):
            if tp in self.positions and self.positions[tp] is None and tp not in self.awaiting_committed:
                latest = r.get("last_stable_offset", -1) if self.read_committed else -1
                self.positions[tp] = (r["log_start_offset"] if self.auto_offset_reset == "earliest"
                                      else latest if latest >= 0 else r["high_watermark"])
        else:
            raise error_for_code(r["error"], f"offsets of {tp}")

    # -- records ---------------------------------------------------------------------------------
    def take(self, limit: int, fetchable) -> list[ConsumerRecord]:
        """Up to `limit` buffered records of fetchable partitions, partition by partition;
        their positions move past them."""
        got: list = []
        for tp, buf in self._buffers.items():
            if tp not in fetchable:
                continue
            if buf and len(got) < limit and tp not in self.taken:
                self.taken[tp] = self.positions[tp]
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
            self._caught_up(tp)
            if len(got) >= limit:
                break
        return got

    def _caught_up(self, tp) -> None:
        """Nothing buffered: the position is the fetch position (past skipped batches)."""
        if not self._buffers.get(tp) and tp in self._fetch_pos and \
                self.positions.get(tp) is not None:
            self.positions[tp] = max(self.positions[tp], self._fetch_pos[tp])

    def take_columns(self, limit: int, fetchable) -> list:
        """take() as Arrow record batches (a chunk's rest stays buffered as a slice)."""
        out, n = [], 0
        for tp, buf in self._buffers.items():
            if tp not in fetchable:
                continue
            while buf and n < limit:
                batch = self._columns_of(tp, buf.popleft())
                if batch.num_rows > limit - n:
                    buf.appendleft(batch.slice(limit - n))
                    batch = batch.slice(0, limit - n)
                if batch.num_rows:
                    self.taken.setdefault(tp, batch.column(4)[0].as_py())
                    out.append(batch)
                    n += batch.num_rows
                    self.positions[tp] = batch.column(4)[-1].as_py() + 1
            if not buf and tp in self._fetch_pos and self.positions.get(tp) is not None:
                self.positions[tp] = max(self.positions[tp], self._fetch_pos[tp])
            if n >= limit:
                break
        return out

    def give_back(self, partitions) -> None:
        """Records taken from these partitions are not returned after all: the next take
        starts again at the first of them."""
        for tp in partitions:
            if tp in self.taken and tp in self.positions:
                self.seek(tp, self.taken[tp])

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

    def _decode(self, tp, data: bytes, pos: int) -> None:
        """Buffer the answer's records at or after `pos`: decoded for poll(), still encoded
        once poll_batch() was used; the fetch position moves past them. The batch headers
        are scanned once (this runs for every fetch answer)."""
        headers = [h for h in iter_headers(data) if h.last_offset >= pos]
        if headers:
            if self.columnar:
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

    def clear(self) -> None:
        self._inflight.clear()
        self._resets.clear()
        self._buffers.clear()
        self._fetch_pos.clear()
        self.positions.clear()
        self.awaiting_committed.clear()
        self.paused.clear()


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
