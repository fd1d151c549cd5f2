"""The consumer-group invariants of a chaos run (rayka/chaos/groups.py), from the history.

History lines read (all carry "f", "type", "time_ms"):
  group-assign/ok {member, generation, partitions}   a member's assignment after a rebalance
  group-read/ok {member, generation, partition, offset, value}
  group-committed-sample/ok {offsets: {partition: offset}}   the group's committed offsets
  group-final/ok {committed, ends}                   after the group consumed everything
  send/ok {value, partition, offset}                 acknowledged records (the main workload)

Rules (Violation kinds):
7. "committed-regressed": per partition, the committed offsets sampled over time never
   decrease (nothing in the run resets offsets).
8. "two-owners": in one generation, no partition is assigned to two members (a member's
   later assignment in the SAME generation replaces its earlier one: cooperative rounds).
   With KIP-848 the generation is the member epoch: every member at epoch E owns part of
   the target assignment of E, which gives a partition to one member, so the rule holds.
9. "unconsumed": every acknowledged record was read by some member of the group (at least
   once); "not-caught-up": at the end the committed offsets do not reach a partition's end.
"""

from __future__ import annotations

from collections import defaultdict


def check_groups(index, violation) -> tuple[list, dict]:
    """(violations, stats) over an _Index of rayka/chaos/checker.py."""
    out: list = []
    samples = index.by.get(("group-committed-sample", "ok"), [])
    assigns = index.by.get(("group-assign", "ok"), [])
    reads = index.by.get(("group-read", "ok"), [])
    finals = index.by.get(("group-final", "ok"), [])
    if not (samples or assigns or reads or finals):
        return out, {}
    last: dict[str, int] = {}
    for i, e in samples:
        for p, o in e["offsets"].items():
            if o < last.get(p, -1):
                out.append(violation(7, "committed-regressed",
                                     f"partition {p}: committed {last[p]} then {o} (line {i + 1})"))
            last[p] = max(o, last.get(p, -1))
    owners: dict[int, dict[str, set]] = defaultdict(dict)    # generation → member → partitions
    for _i, e in assigns:
        owners[e["generation"]][e["member"]] = set(e["partitions"])
    for gen, by_member in owners.items():
        seen: dict[int, str] = {}
        for member, parts in sorted(by_member.items()):
            for p in parts:
                if p in seen:
                    out.append(violation(8, "two-owners", f"generation {gen}: partition {p} "
                                         f"owned by {seen[p]} and {member}"))
                seen[p] = member
    read_values = {e["value"] for _, e in reads}
    acked = [e for _, e in index.by.get(("send", "ok"), [])]
    missing = [e for e in acked if e["value"] not in read_values]
    for e in missing[:50]:
        out.append(violation(9, "unconsumed", f"{e['value']} (partition {e['partition']} offset "
                             f"{e['offset']}) was acknowledged but no group member read it"))
    if len(missing) > 50:
        out.append(violation(9, "unconsumed", f"... and {len(missing) - 50} more"))
    if not finals:
        out.append(violation(9, "not-caught-up", "the run has no group-final line"))
    for _i, e in finals:
        for p, end in e["ends"].items():
            if end > 0 and e["committed"].get(p, -1) < end:
                out.append(violation(9, "not-caught-up", f"partition {p}: committed "
                                     f"{e['committed'].get(p)} of {end}"))
    stats = {"group_reads": len(reads), "group_generations": len(owners),
             "group_assignments": len(assigns), "group_committed_samples": len(samples),
             "group_reread": len(reads) - len(read_values)}
    return out, stats
