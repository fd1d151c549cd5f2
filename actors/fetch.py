"""The broker's fetch path (Kafka's ReplicaManager.fetchMessages and DelayedFetch's reads),
for followers, Kafka clients and the native consumers alike (Broker.fetch_begin).

Rules:
- `fetch_begin(broker, replica_id, asks, max_wait_ms, min_bytes, max_bytes, reads,
  isolation_level, client)` reads the asks (tuples of tp, offset, current epoch, last
  fetched epoch, partition max bytes, the follower's log start or -1) under the broker's
  lock and answers {tp: FetchResult} at once when at least `min_bytes` (an error counts)
  are there, a partition is sent to a preferred read replica, or max_wait_ms <= 0; else it
  parks a DelayedFetch (actors/purgatory.py) that appends, HW moves, leadership changes
  or its deadline (the broker's Timers) complete.
- The answer holds at most `max_bytes` (None: no cap) but at least one batch of the first
  partition with data (KIP-74); later partitions then answer their HW with no records.
- `reads` (a fetch session's): called under the lock, it names the asks to read at once;
  the others are only watched, and a watched partition never read is not answered.
- A follower's fetch carries its log start: the partitions it read are checked for a
  DeleteRecords waiting on their low watermark (actors/delete_records.py).
- Reading again (a parked fetch woken or at its deadline): the partitions it is woken for
  are read; the others it answered quiet keep that answer with their marks (HW, log start,
  last stable offset) brought up to date, and only where the purgatory's journal names them
  as changed since its last read (every one when it cannot tell, and for a consumer with
  client metadata where a replica selector is set: a follower's progress, which no journal
  notes, may redirect it). An answer with records, an error or a diverging epoch is read
  again.
"""

from __future__ import annotations

import dataclasses

from actors.purgatory import DelayedFetch
from replicas.replica_types import ClientMetadata, FetchResult


def fetch_begin(broker, replica_id: int, asks, max_wait_ms: int, min_bytes: int,
                max_bytes: int | None, reads=None, isolation_level: int = 0,
                client: ClientMetadata | None = None):
    """{tp: FetchResult} now, or a parked DelayedFetch (module rules)."""
    rm = broker.rm
    by_tp = {a[0]: a for a in asks}
    redirectable = client is not None and rm.selects_read_replicas

    def read(only=None, previous=None, changed=None):
        out, total, redirected = {}, 0, False
        if redirectable:
            changed = None
        for tp, offset, current_epoch, last_epoch, part_max, log_start in asks:
            if only is not None and tp not in only:
                r = previous.get(tp)
                if r is None:                  # watched, never read: not answered
                    continue
                if not (r.error or r.records or r.diverging_epoch):
                    if changed is not None and tp not in changed:
                        out[tp] = r            # its marks cannot have moved
                        continue
                    marks = rm.leader_marks(tp, current_epoch, isolation_level, client, offset)
                    if marks is not None:      # still quiet: refresh HW and log start
                        out[tp] = FetchResult(0, b"", *marks)
                        continue
            budget = part_max if max_bytes is None else min(part_max, max_bytes - total)
            r = rm.fetch(tp, offset, max(budget, 1), replica_id=replica_id,
                         current_leader_epoch=current_epoch, last_fetched_epoch=last_epoch,
                         isolation_level=isolation_level, client=client,
                         log_start_offset=log_start)
            if r.effects:
                broker.apply_effects(r.effects)
            if budget <= 0 and r.records:     # the answer is full: HW only
                r = dataclasses.replace(r, records=b"", aborted_transactions=(
                    () if r.aborted_transactions is not None else None))
            out[tp] = r
            total += len(r.records) + (1 if r.error or r.diverging_epoch else 0)
            redirected |= r.preferred_read_replica >= 0
        return out, total >= min_bytes or redirected

    def ready(tp) -> bool:
        offset, current_epoch = by_tp[tp][1:3]
        return rm.fetch_ready(tp, offset, replica_id, current_epoch, isolation_level, client)

    with broker.lock:
        out, enough = read(reads() if reads is not None else None, {})
        if replica_id >= 0 and broker.deletions.watched:   # log starts a DeleteRecords awaits
            broker.deletions.followers_fetched(rm, out)
        if enough or max_wait_ms <= 0:
            return out
        delayed = DelayedFetch(by_tp, read, ready, out)
        broker.parked.park(delayed)
        delayed.timer = broker.timers.add(max_wait_ms / 1000, lambda: _expire(broker, delayed))
    return delayed


def _expire(broker, delayed: DelayedFetch) -> None:
    with broker.lock:
        broker.parked.expire(delayed)
