"""Consumer: reads partitions from their leaders (below the high watermark only).

Rules:
- `assign` takes explicit partitions; `subscribe` takes every partition of the topics (no
  group rebalancing: a group id only names where offsets are committed, ZooKeeper's
  /consumers/<group>/offsets, Kafka 0.8's store).
- A partition's starting position: `seek`, else the group's committed offset, else the
  log start (auto_offset_reset="earliest") or the high watermark ("latest").
- `poll` sends one long-poll fetch per leader for all its partitions (carrying the leader
  epoch the client knows, KIP-320) and decodes the batches; records below the position
  (a batch starts earlier) are skipped, so every offset is returned once, in order.
- NOT_LEADER / FENCED / UNKNOWN_LEADER_EPOCH / a dead broker: refresh metadata and retry
  on the next poll (the consumer follows leader moves). OFFSET_OUT_OF_RANGE resets by
  auto_offset_reset.
- Decoding goes straight from aiokafka's C record batch to ConsumerRecord tuples (no
  intermediate record type, NamedTuple built by tuple.__new__: its Python __new__ cost more
  than the decoding itself).
- Prefetch (Kafka's fetcher does the same): as soon as a broker answers, the next fetch to
  it is sent for the offsets that follow the answer, and decoding runs meanwhile. The next
  poll uses it only if it asks exactly the same (partition, position, leader epoch) list;
  seek/assign/an error drop it (a discarded prefetch only reads, it changes nothing).
"""

from __future__ import annotations

import time

import ray

from rayka.metadata import Metadata
from rayka.types import ConsumerRecord
from replicas.errors import KafkaError, UnknownTopicOrPartition, error_for_code
from aiokafka.record.default_records import DefaultRecordBatch

from replicas.records import iter_headers

REFRESH = {3, 5, 6, 74, 75}
_new = tuple.__new__


class Consumer:
    def __init__(self, cluster, group_id: str | None = None, auto_offset_reset: str = "earliest",
                 max_poll_records: int = 100_000, fetch_max_bytes: int = 4 << 20):
        if auto_offset_reset not in ("earliest", "latest"):
            raise KafkaError(f"auto_offset_reset must be earliest or latest, not {auto_offset_reset!r}")
        self.cluster = cluster
        self.group_id = group_id
        self.auto_offset_reset = auto_offset_reset
        self.max_poll_records = max_poll_records
        self.fetch_max_bytes = fetch_max_bytes
        self.metadata = Metadata(cluster)
        self.positions: dict[tuple, int | None] = {}
        self._prefetch: dict[int, tuple] = {}     # broker → (its request list, ObjectRef)

    # -- assignment and positions -------------------------------------------------------------------
    def assign(self, partitions) -> None:
        self._prefetch.clear()
        self.positions = {tuple(tp): self.positions.get(tuple(tp)) for tp in partitions}

    def subscribe(self, topics) -> None:
        tps = []
        for topic in topics:
            infos = self.cluster.admin().describe_topic(topic)
            tps += [(topic, p.partition) for p in infos]
        self.assign(tps)

    def assignment(self) -> list[tuple]:
        return sorted(self.positions)

    def seek(self, tp, offset: int) -> None:
        tp = tuple(tp)
        if tp not in self.positions:
            raise UnknownTopicOrPartition(f"{tp} is not assigned to this consumer")
        self._prefetch.clear()
        self.positions[tp] = offset

    def seek_to_beginning(self, partitions=None) -> None:
        self._prefetch.clear()
        for tp in partitions or list(self.positions):
            self.positions[tuple(tp)] = self._list_offsets(tuple(tp))[0]

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

    def end_offsets(self, partitions) -> dict[tuple, int]:
        return {tuple(tp): self._list_offsets(tuple(tp))[1] for tp in partitions}

    def offset_bounds(self, partitions) -> dict[tuple, tuple[int, int]]:
        """(log start offset, high watermark) per partition, from each leader: Kafka's
        beginning_offsets and end_offsets in one request."""
        return {tuple(tp): self._list_offsets(tuple(tp)) for tp in partitions}

    # -- committed offsets ----------------------------------------------------------------------------
    def commit(self, offsets: dict | None = None) -> None:
        if self.group_id is None:
            raise KafkaError("commit needs a group_id")
        offsets = offsets or {tp: p for tp, p in self.positions.items() if p is not None}
        self.cluster.store.commit_offsets(self.group_id, {tuple(tp): o for tp, o in offsets.items()})

    def committed(self, tp) -> int | None:
        if self.group_id is None:
            return None
        return self.cluster.store.get_committed_offsets(self.group_id, tp[0]).get(tuple(tp))

    # -- poll -------------------------------------------------------------------------------------------
    def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> list[ConsumerRecord]:
        max_records = max_records or self.max_poll_records
        by_leader: dict[int, list] = {}
        for tp in self.positions:
            leader = self.metadata.leader(tp)
            if leader is None:
                self.metadata.refresh()
                leader = self.metadata.leader(tp)
            if leader is not None:
                by_leader.setdefault(leader[0], []).append((tp, self.position(tp), leader[1], -1))
        if not by_leader:
            return []
        prefetched, self._prefetch = self._prefetch, {}
        refs = {}
        for b, reqs in by_leader.items():
            early = prefetched.get(b)
            if early is not None and early[0] == reqs:
                refs[b] = (reqs, early[1])
                continue
            actor = self.cluster.broker_actor(b)
            if actor is None:        # the leader's actor is gone for good: find the new leader
                self.metadata.refresh()
                continue
            refs[b] = (reqs, actor.fetch_many.remote(-1, reqs, timeout_ms, 1, self.fetch_max_bytes))
        out: list[ConsumerRecord] = []
        for broker, (reqs, ref) in refs.items():
            try:
                results = ray.get(ref, timeout=timeout_ms / 1000 + 30)
            except Exception:  # broker died mid-poll: its partitions are retried next poll
                self.metadata.refresh()
                continue
            self._send_prefetch(broker, reqs, results, timeout_ms)
            for tp, r in results.items():
                tp = tuple(tp)
                if r["error"] in REFRESH:
                    self.metadata.refresh()
                elif r["error"] == 1:
                    self.positions[tp] = None
                elif r["error"]:
                    raise error_for_code(r["error"], f"fetch {tp}")
                elif r["records"] and len(out) < max_records:
                    out += self._decode(tp, r["records"], max_records - len(out))
        return out

    def _send_prefetch(self, broker: int, reqs: list, results: dict, timeout_ms: int) -> None:
        """Ask `broker` now for what follows `results` (used by the next poll if it matches)."""
        nxt = []
        for tp, offset, epoch, last in reqs:
            r = results.get(tp)
            if r is None or r["error"]:
                return                    # metadata or positions will change: no guess
            end = offset
            for h in iter_headers(r["records"]):
                end = max(end, h.next_offset)
            nxt.append((tp, end, epoch, last))
        actor = self.cluster.broker_actor(broker)
        if actor is not None:
            self._prefetch[broker] = (nxt, actor.fetch_many.remote(-1, nxt, timeout_ms, 1,
                                                                   self.fetch_max_bytes))

    def _decode(self, tp, data: bytes, limit: int) -> list[ConsumerRecord]:
        """The records at or after the position, at most `limit`; the position moves past
        them (past the whole answer when it all fits, as the prefetch assumed)."""
        topic, partition = tp
        pos = self.positions[tp]
        got: list = []
        view = memoryview(data)
        end = pos
        for h in iter_headers(data):
            if h.last_offset < pos:
                continue
            if len(got) >= limit:
                break
            batch = DefaultRecordBatch(view[h.position: h.position + h.size])
            recs = [_new(ConsumerRecord, (topic, partition, r.offset, r.key, r.value, r.timestamp,
                                          tuple(r.headers) if r.headers else ()))
                    for r in batch]
            if h.base_offset < pos:
                recs = [r for r in recs if r[2] >= pos]
            room = limit - len(got)
            if len(recs) > room:
                got += recs[:room]
                end = got[-1][2] + 1
                break
            got += recs
            end = max(end, h.next_offset)
        if got:
            self.positions[tp] = end
        return got

    def close(self) -> None:
        self._prefetch.clear()
        self.positions.clear()
