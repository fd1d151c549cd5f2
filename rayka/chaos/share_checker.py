"""The share-group invariants of a chaos run (rayka/chaos/shares.py), from the history.

History lines read (all carry "f", "type", "time_ms"):
  share-acquire/ok {member, partition, offset, delivery_count}   a record a poll returned
  share-ack/ok|fail|info {member, partition, offset, delivery_count, error}   its acceptance
                                    (info: unanswered, it may have been written)
  share-final/ok {settled}                          after the group settled everything
  send/ok {value, partition, offset}                acknowledged records (the main workload)

Rules (Violation kinds):
16. "accepted-twice": no record's acceptance is settled twice (a share group hands each
    record to one member at a time; a second acceptance means two members held it).
17. "share-unconsumed": every record the producers had acknowledged was accepted by some
    member by the end (settled, or unanswered: a broker that died after writing it): none
    lost; "share-not-finished" when the run has no
    share-final line.
18. "delivery-limit": no record was delivered more than group.share.delivery.count.limit
    (5) times, and a record's delivery counts as members saw them never go down by more
    than one (a closed session gives its last delivery back, Kafka's DECREASE).
"""

from __future__ import annotations

from collections import defaultdict

DELIVERY_LIMIT = 5
SHARE_INVARIANTS = (16, 17, 18)


def check_shares(index, violation) -> tuple[list, dict]:
    """(violations, stats) over an _Index of rayka/chaos/checker.py."""
    out: list = []
    acquired = index.by.get(("share-acquire", "ok"), [])
    settled = index.by.get(("share-ack", "ok"), [])
    refused = index.by.get(("share-ack", "fail"), [])
    unanswered = index.by.get(("share-ack", "info"), [])
    finals = index.by.get(("share-final", "ok"), [])
    if not (acquired or settled or finals):
        return out, {}
    times: dict[tuple, list] = defaultdict(list)
    for _i, e in settled:
        times[(e["partition"], e["offset"])].append(e["member"])
    for (p, o), members in sorted(times.items()):
        if len(members) > 1:
            out.append(violation(16, "accepted-twice",
                                 f"partition {p} offset {o}: accepted by {members}"))
    acked = {(e["partition"], e["offset"]) for _, e in index.by.get(("send", "ok"), [])}
    perhaps = {(e["partition"], e["offset"]) for _, e in unanswered}
    missing = sorted(acked - set(times) - perhaps)
    for p, o in missing[:50]:
        out.append(violation(17, "share-unconsumed",
                             f"partition {p} offset {o} was acknowledged but never accepted"))
    if len(missing) > 50:
        out.append(violation(17, "share-unconsumed", f"... and {len(missing) - 50} more"))
    if not finals:
        out.append(violation(17, "share-not-finished", "the run has no share-final line"))
    counts: dict[tuple, list] = defaultdict(list)
    for _i, e in acquired:
        counts[(e["partition"], e["offset"])].append(e["delivery_count"])
    for (p, o), seen in sorted(counts.items()):
        if max(seen) > DELIVERY_LIMIT:
            out.append(violation(18, "delivery-limit", f"partition {p} offset {o}: "
                                 f"delivered {max(seen)} times"))
        if any(b < a - 1 for a, b in zip(seen, seen[1:])):
            out.append(violation(18, "delivery-limit", f"partition {p} offset {o}: "
                                 f"delivery counts went back: {seen}"))
    stats = {"share_acquired": len(acquired), "share_settled": len(settled),
             "share_refused": len(refused), "share_unanswered": len(unanswered),
             "share_redelivered": sum(1 for s in counts.values() if max(s) > 1)}
    return out, stats
