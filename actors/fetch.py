"""The broker's fetch path (Kafka's ReplicaManager.fetchMessages and DelayedFetch's reads),
for followers, Kafka clients and the native consumers alike (Broker.fetch_begin).

Rules:
- `fetch_begin(broker, replica_id, asks, max_wait_ms, min_bytes, max_bytes, reads,
  isolation_level, client, session)` reads the asks (tuples of tp, offset, current epoch,
  last fetched epoch, partition max bytes, the follower's log start or -1) under the broker's
  lock and answers {tp: FetchResult} at once when at least `min_bytes` (an error counts)
  are there, a partition is sent to a preferred read replica, or max_wait_ms <= 0; else it
  parks a DelayedFetch (actors/purgatory.py) that appends, HW moves, leadership changes
  or its deadline (the broker's Timers) complete.
- The answer holds at most `max_bytes` (None: no cap) but at least one batch of the first
  partition with data (KIP-74); later partitions then answer their HW with no records.
- `reads` (a fetch session's): called under the lock, it names the asks to read at once;
  the others are only watched, and a watched partition never read is not answered.
- `session` (the FetchContext of a fetch session the asks are all of): its asks by
  partition are the session's copy and a parked fetch waits on the session's watch
  (actors/purgatory.py), so a fetch that reads a few partitions of a large session costs
  what it reads, not what the session holds.
- A follower's fetch carries its log start: the partitions it read are checked for a
  DeleteRecords waiting on their low watermark (actors/delete_records.py).
- Reading again (a parked fetch woken or at its deadline): the partitions it is woken for
  are read, and those whose last answer had records, an error or a diverging epoch; the
  others it answered quiet keep that answer with their marks (HW, log start,
  last stable offset) brought up to date, and only where the purgatory's journal names them
  as changed since its last read (every one when it cannot tell, and for a consumer with
  client metadata where a replica selector is set: a follower's progress, which no journal
  notes, may redirect it).
"""

from __future__ import annotations

import dataclasses

from actors.purgatory import DelayedFetch
from replicas.replica_types import ClientMetadata, FetchResult


def fetch_begin(broker, replica_id: int, asks, max_wait_ms: int, min_bytes: int,
                max_bytes: int | None, reads=None, isolation_level: int = 0,
                client: ClientMetadata | None = None, session=None):
    """{tp: FetchResult} now, or a parked DelayedFetch (module rules)."""
    rm = broker.rm
    by_tp = session.asks_by_tp() if session is not None else {a[0]: a for a in asks}
    redirectable = client is not None and rm.selects_read_replicas
    unfinished: list = []           # of the last read: to be read again, whatever woke it

    def read(only=None, previous=None, changed=None):
        nonlocal unfinished
        out, total, redirected = {}, 0, False
        if redirectable:
            changed = None
        if only is None:
            targets = list(by_tp.values())      # one call: a session's dict, copied whole
        else:
            targets = [a for tp in only if (a := by_tp.get(tp)) is not None]
            if previous:
                out = dict(previous)
                again = set(unfinished)
                if changed is None:
                    stale = previous.keys()
                elif len(changed) < len(previous):
                    stale = [tp for tp in changed if tp in previous]
                else:
                    stale = [tp for tp in previous if tp in changed]
                for tp in stale:
                    ask = by_tp.get(tp)
                    if ask is None or tp in only or tp in again:
                        continue
                    offset, current_epoch = ask[1:3]
                    marks = rm.leader_marks(tp, current_epoch, isolation_level, client, offset)
                    if marks is not None:      # still quiet: refresh HW and log start
                        out[tp] = FetchResult(0, b"", *marks)
                    else:
                        again.add(tp)
                targets.extend(a for tp in again
                               if tp not in only and (a := by_tp.get(tp)) is not None)
        unfinished = []
        for tp, offset, current_epoch, last_epoch, part_max, log_start in targets:
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
            if r.error or r.records or r.diverging_epoch:
                unfinished.append(tp)
            total += len(r.records) + (1 if r.error or r.diverging_epoch else 0)
            redirected |= r.preferred_read_replica >= 0
        return out, total >= min_bytes or redirected

    def ready(tp) -> bool:
        ask = by_tp.get(tp)
        return ask is not None and rm.fetch_ready(tp, ask[1], replica_id, ask[2],
                                                  isolation_level, client)

    with broker.lock:
        out, enough = read(reads() if reads is not None else None, {})
        if replica_id >= 0 and broker.deletions.watched:   # log starts a DeleteRecords awaits
            broker.deletions.followers_fetched(rm, out)
        if enough or max_wait_ms <= 0:
            return out
        delayed = DelayedFetch(by_tp, read, ready, out)
        if session is not None:
            broker.parked.park(delayed, session.session, session.members)
        else:
            broker.parked.park(delayed)
        delayed.timer = broker.timers.add(max_wait_ms / 1000, lambda: _expire(broker, delayed))
    return delayed


def _expire(broker, delayed: DelayedFetch) -> None:
    with broker.lock:
        broker.parked.expire(delayed)
