"""The chaos checker: the invariants of a run, proved from a recorded history and the disk.

History lines (rayka/chaos/history.py) all carry "type", "f", "time_ms"; the checker reads:
  meta/info {topic, partitions, replication_factor, min_isr, seed}
  send/invoke {process, value}; send/ok {process, value, partition, offset};
  send/fail {process, value, error} (definitely not written);
  send/info {process, value, error} (indeterminate)
  read/ok {process, partition, offset, value}            a consumer saw it during the run
  final-read/ok {partition, offset, value}               after healing, log start .. HW-1
  final-hw/ok {partition, log_start_offset, high_watermark, isr, leader}
  fault/info {id, kind, phase: start|end, target, partition: int|None}
  zk-sample/ok {partition, leader, leader_epoch, isr}; hw-sample/ok {partition, broker,
  leader_epoch, high_watermark}; controller-sample/ok {controller_id, epoch}
Lines of other "f"s are ignored; a line of a known kind that lacks a field raises ValueError.

Rules (one Violation per finding; `kind` names the rule broken):
1. Every send/ok (partition, offset, value) is in the final read at that very offset:
   otherwise "moved" (the value is elsewhere) or "lost".
2. "duplicate": a value at two positions of the final read (or one position read with two
   values). "gap": a partition's final offsets are not exactly log_start..hw-1 (or it has no
   final-hw). "reordered": one process's ok offsets on a partition, in INVOKE order, do not
   strictly increase. "phantom": a final value no send ever named.
3. (needs data_root) Every ISR replica of final-hw holds the batches covering
   [log_start, hw) contiguously ("replica-short"), and every batch there is byte-identical,
   boundaries included, to the same batch on the other ISR replicas ("replica-diverged";
   the leader is the first reference). Batches are compared whole, headers included.
4. One controller id per controller epoch, over controller-samples and every broker's
   controller-epochs.log: "two-controllers".
5. Per partition, zk-sample leader epochs in time order never drop below an earlier one
   ("epoch-regressed"); per (partition, broker, leader_epoch) hw-samples never drop below an
   earlier one ("hw-regressed"); every leader-epoch-checkpoint on disk has strictly rising
   epochs and non-decreasing start offsets ("epoch-cache-regressed").
6. Every read/ok (partition, offset, value) is in the final read with that value at that
   offset ("read-uncommitted").
Compacted runs (meta `compact_keys` > 0: values sent under keys `k<n mod keys>`, the
cleaners removing superseded records): an acknowledged or read record missing from the final
read is fine when the final read holds a LATER record of its key on that partition (not when
the value sits elsewhere: "moved"); offsets may have gaps, but the record at HW-1 must be
there; and rule 3 compares ISR replicas by their last (offset, value) per key below the HW
(each replica compacts on its own schedule: bytes differ, final states must not).
7-9. Consumer groups, when the run had one: rayka/chaos/group_checker.py.
10-15. Transactions, when the run had them: rayka/chaos/txn_checker.py; rule 3 also holds
   for each transactional topic, over its txn-final-hw lines (markers are batches too).
Reads below the final log start cannot be checked and are counted as
stats["reads_unverifiable"].
Unreadable evidence on disk is itself a violation ("controller-log-unreadable" under 4,
"epoch-cache-unreadable" under 5): the checker never guesses. Identical repeated lines of
the final read (a consumer re-fetch) count once. Time ties keep file order.
Failover time of a fault = first send/ok strictly after its start, on its partition (any
partition if it has none); percentiles are nearest-rank over all faults with an ok after.
"""

from __future__ import annotations

import bisect
import io
import math
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field

from rayka.chaos import disk
from rayka.chaos.history import key_of
from rayka.chaos.group_checker import check_groups
from rayka.chaos.share_checker import SHARE_INVARIANTS, check_shares
from rayka.chaos.txn_checker import check_transactions

INVARIANTS: dict[int, tuple[str, tuple[str, ...]]] = {
    1: ("no acknowledged record lost", ("lost", "moved")),
    2: ("no duplicates; dense, ordered offsets", ("duplicate", "gap", "reordered", "phantom")),
    3: ("ISR replicas byte-identical up to the HW", ("replica-diverged", "replica-short")),
    4: ("at most one controller per epoch", ("two-controllers", "controller-log-unreadable")),
    5: ("leader epochs grow; a leader's HW never goes back",
        ("epoch-regressed", "hw-regressed", "epoch-cache-regressed", "epoch-cache-unreadable")),
    6: ("consumers never read above the HW", ("read-uncommitted",)),
    # consumer groups, when the run had a group (rayka/chaos/group_checker.py)
    7: ("a group's committed offsets never go back", ("committed-regressed",)),
    8: ("one owner per partition per generation", ("two-owners",)),
    9: ("the group consumed every acknowledged record", ("unconsumed", "not-caught-up")),
    # transactions, when the run had them (rayka/chaos/txn_checker.py)
    10: ("read_committed never returns an aborted record", ("aborted-read",)),
    11: ("a committed transaction is visible whole", ("lost-commit", "partial-txn")),
    12: ("consume-transform-produce is exactly once",
         ("ctp-missing", "ctp-duplicate", "ctp-moved", "ctp-uncommitted-output", "ctp-phantom",
          "ctp-reordered", "ctp-not-caught-up")),
    13: ("no transaction hangs (LSO reaches the HW)", ("txn-hang",)),
    14: ("zombie producers are fenced", ("zombie-commit", "zombie-visible")),
    15: ("transactional reads: every commit, no duplicate, no gap",
         ("uncommitted-missing", "txn-duplicate", "txn-mismatch", "txn-phantom",
          "txn-reordered", "txn-gap")),
    # share groups, when the run had one (rayka/chaos/share_checker.py)
    16: ("no record's acceptance settled twice", ("accepted-twice",)),
    17: ("every acknowledged record accepted", ("share-unconsumed", "share-not-finished")),
    18: ("delivery counts within the limit, never back by more than one",
         ("delivery-limit",)),
}
TXN_INVARIANTS = (10, 11, 12, 13, 14, 15)
_REQUIRED = {
    ("send", "invoke"): ("process", "value"),
    ("send", "ok"): ("process", "value", "partition", "offset"),
    ("send", "fail"): ("process", "value"),
    ("send", "info"): ("process", "value"),
    ("read", "ok"): ("partition", "offset", "value"),
    ("final-read", "ok"): ("partition", "offset", "value"),
    ("final-hw", "ok"): ("partition", "log_start_offset", "high_watermark", "isr"),
    ("fault", "info"): ("kind", "phase"),
    ("zk-sample", "ok"): ("partition", "leader_epoch"),
    ("hw-sample", "ok"): ("partition", "broker", "leader_epoch", "high_watermark"),
    ("controller-sample", "ok"): ("controller_id", "epoch"),
    ("group-assign", "ok"): ("member", "generation", "partitions"),
    ("group-read", "ok"): ("member", "partition", "offset", "value"),
    ("group-committed-sample", "ok"): ("offsets",),
    ("group-final", "ok"): ("committed", "ends"),
    ("share-acquire", "ok"): ("member", "partition", "offset", "delivery_count"),
    ("share-ack", "ok"): ("member", "partition", "offset", "delivery_count", "error"),
    ("share-ack", "fail"): ("member", "partition", "offset", "delivery_count", "error"),
    ("share-ack", "info"): ("member", "partition", "offset", "delivery_count", "error"),
    ("share-final", "ok"): ("settled",),
    ("txn-meta", "info"): ("txn_topic", "ctp_in", "ctp_out", "partitions",
                           "transaction_timeout_ms", "hang_bound_ms"),
    ("txn-init", "ok"): ("txid", "instance"),
    ("txn-end", "invoke"): ("txid", "instance", "txn", "action", "keys"),
    ("txn-end", "ok"): ("txid", "instance", "txn", "action", "records"),
    ("txn-end", "info"): ("txid", "instance", "txn", "action"),
    ("txn-abandon", "info"): ("txid", "instance", "txn", "keys"),
    ("ctp-feed", "invoke"): ("value",),
    ("ctp-feed", "ok"): ("value", "partition", "offset"),
    ("ctp-feed", "info"): ("value",),
    ("txn-read", "ok"): ("isolation", "topic", "partition", "offset", "key", "value"),
    ("txn-final-read", "ok"): ("isolation", "topic", "partition", "offset", "key", "value"),
    ("ctp-input-final", "ok"): ("partition", "offset", "value"),
    ("txn-final-hw", "ok"): ("topic", "partition", "log_start_offset", "high_watermark", "isr"),
    ("txn-stable", "ok"): ("topic", "partition", "waited_ms"),
    ("txn-stable", "fail"): ("topic", "partition", "waited_ms"),
    ("ctp-final", "ok"): ("committed", "ends"),
}


@dataclass(frozen=True)
class Violation:
    invariant: int
    kind: str
    detail: str


@dataclass
class Verdict:
    violations: list[Violation] = field(default_factory=list)
    stats: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations

    def kinds(self) -> Counter:
        return Counter(v.kind for v in self.violations)

    def to_json(self) -> dict:
        return {"ok": self.ok, "violations": [asdict(v) for v in self.violations],
                "stats": self.stats}

    def table(self, max_violations: int = 20, width: int = 110) -> str:
        return _render(self, max_violations, width)


class _Index:
    """The history sorted into what each rule needs (line index = file order)."""

    def __init__(self, history: list[dict]):
        self.meta: dict = {}
        self.by: dict[tuple[str, str], list[tuple[int, dict]]] = defaultdict(list)
        for i, e in enumerate(history):
            if "f" not in e or "type" not in e or "time_ms" not in e:
                raise ValueError(f"history line {i + 1} lacks f/type/time_ms: {e!r}")
            key = (e["f"], e["type"])
            if e["f"] == "meta":
                self.meta = self.meta or e
                continue
            missing = [k for k in _REQUIRED.get(key, ()) if k not in e]
            if missing:
                raise ValueError(f"history line {i + 1} ({e['f']}/{e['type']}) lacks {missing}")
            if key in _REQUIRED:
                self.by[key].append((i, e))
        self.topic = self.meta.get("topic")
        self.invoke_at = {}
        for i, e in self.by["send", "invoke"]:
            self.invoke_at.setdefault(e["value"], i)
        self.sent = {e["value"] for k in (("send", "invoke"), ("send", "ok"), ("send", "fail"),
                                          ("send", "info")) for _, e in self.by[k]}
        self.final_at: dict[tuple[int, int], str] = {}
        self.final_conflicts: list[tuple[tuple[int, int], str, str]] = []
        for _, e in self.by["final-read", "ok"]:
            pos, value = (e["partition"], e["offset"]), e["value"]
            seen = self.final_at.setdefault(pos, value)
            if seen != value:
                self.final_conflicts.append((pos, seen, value))
        self.final_where: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for pos, value in sorted(self.final_at.items()):
            self.final_where[value].append(pos)
        self.keys = int(self.meta.get("compact_keys") or 0)
        self.last_of_key: dict[tuple[int, str], int] = {}
        if self.keys:
            for (p, off), value in self.final_at.items():
                k = (p, key_of(value, self.keys))
                self.last_of_key[k] = max(off, self.last_of_key.get(k, -1))
        self.hw = {e["partition"]: e for _, e in self.by["final-hw", "ok"]}
        parts = set(self.hw) | {p for p, _ in self.final_at}
        if isinstance(self.meta.get("partitions"), int):
            parts |= set(range(self.meta["partitions"]))
        self.partitions = sorted(parts)

    def superseded(self, p: int, off: int, value: str) -> bool:
        """A compacted run's final read holds a later record of this value's key."""
        return bool(self.keys) and self.last_of_key.get((p, key_of(value, self.keys)), -1) > off

    def timed(self, key: tuple[str, str]) -> list[dict]:
        return [e for _, e in sorted(self.by[key], key=lambda ie: (ie[1]["time_ms"], ie[0]))]


def check(history: list[dict], data_root: str | None = None) -> Verdict:
    """Check every invariant of the module docstring; `data_root` adds the on-disk evidence."""
    ix = _Index(history)
    skipped: dict[int, str] = {}
    found: list[Violation] = []
    found += _acknowledged(ix)
    found += _dense_and_ordered(ix)
    if data_root is None:
        skipped[3] = "no data_root"
    elif ix.topic is None:
        skipped[3] = "no meta line names the topic"
    elif ix.keys:
        found += _replicas_agree_per_key(ix, data_root)
    else:
        found += _replicas_identical(ix.topic, ix.partitions, ix.hw, data_root)
    found += _one_controller_per_epoch(ix, data_root)
    found += _epochs_and_hw_monotone(ix, data_root)
    found += _reads_committed(ix)
    group_found, group_stats = check_groups(ix, Violation)
    found += group_found
    if not group_stats:
        skipped.update({n: "no consumer group in the run" for n in (7, 8, 9)})
    share_found, share_stats = check_shares(ix, Violation)
    found += share_found
    if not share_stats:
        skipped.update({n: "no share group in the run" for n in SHARE_INVARIANTS})
    txn_found, txn_stats = check_transactions(ix, Violation, data_root)
    found += txn_found
    if not txn_stats:
        skipped.update({n: "no transactions in the run" for n in TXN_INVARIANTS})
    elif data_root is not None:           # invariant 3 for the transactional topics
        hws: dict[str, dict[int, dict]] = defaultdict(dict)
        for _, e in ix.by["txn-final-hw", "ok"]:
            hws[e["topic"]][e["partition"]] = e
        for topic, hw in sorted(hws.items()):
            found += _replicas_identical(topic, sorted(hw), hw, data_root)
    found.sort(key=lambda v: v.invariant)
    verdict = Verdict(found, _stats(ix, found, skipped, data_root))
    verdict.stats.update(group_stats)
    verdict.stats.update(share_stats)
    verdict.stats.update(txn_stats)
    return verdict


# -- invariants 1 and 2: the final log against the sends ----------------------------------------
def _hw_text(ix: _Index, p: int) -> str:
    hw = ix.hw.get(p)
    return (f"final log [{hw['log_start_offset']}, {hw['high_watermark']})" if hw
            else "no final-hw")


def _acknowledged(ix: _Index) -> list[Violation]:
    out = []
    for _, e in ix.by["send", "ok"]:
        p, off, value = e["partition"], e["offset"], e["value"]
        if ix.final_at.get((p, off)) == value:
            continue
        where = ix.final_where.get(value)
        what = f"{value!r} acknowledged at partition {p} offset {off} (t={e['time_ms']:.0f})"
        if where:
            out.append(Violation(1, "moved", f"{what} is at {_positions(where)} instead"))
        elif not ix.superseded(p, off, value):
            out.append(Violation(1, "lost", f"{what} is not in the final log "
                                             f"(partition {p}: {_hw_text(ix, p)})"))
    return out


def _dense_and_ordered(ix: _Index) -> list[Violation]:
    out = []
    for (p, off), a, b in ix.final_conflicts:
        out.append(Violation(2, "duplicate", f"partition {p} offset {off} read as both {a!r} "
                                             f"and {b!r} in the final read"))
    for value, where in ix.final_where.items():
        if len(where) > 1:
            out.append(Violation(2, "duplicate", f"{value!r} is at {_positions(where)}"))
    offsets: dict[int, list[int]] = defaultdict(list)
    for p, off in ix.final_at:
        offsets[p].append(off)
    for p in ix.partitions:
        hw = ix.hw.get(p)
        if hw is None:
            out.append(Violation(2, "gap", f"partition {p} has no final-hw line "
                                           f"({len(offsets[p])} final records)"))
            continue
        start, end = hw["log_start_offset"], hw["high_watermark"]
        have = sorted(offsets[p])
        inside = [o for o in have if start <= o < end]
        outside = [o for o in have if not start <= o < end]
        missing = _missing_ranges(inside, start, end)
        if start > end:
            out.append(Violation(2, "gap", f"partition {p}: log start {start} > HW {end}"))
        elif ix.keys and end > start and end - 1 not in inside:
            out.append(Violation(2, "gap", f"partition {p}: final read lacks the record at "
                                           f"HW-1 = {end - 1} (never compacted)"))
        elif missing and not ix.keys:
            out.append(Violation(2, "gap", f"partition {p}: final read lacks offsets "
                                           f"{_ranges_text(missing)} of [{start}, {end})"))
        if outside:
            out.append(Violation(2, "gap", f"partition {p}: final read has offsets outside "
                                           f"[{start}, {end}): {_offsets_text(outside)}"))
    runs: dict[tuple[int, int], list[tuple[int, int, str]]] = defaultdict(list)
    for i, e in ix.by["send", "ok"]:
        runs[e["process"], e["partition"]].append(
            (ix.invoke_at.get(e["value"], i), e["offset"], e["value"]))
    for (process, p), run in sorted(runs.items()):
        run.sort()
        for (_, o1, v1), (_, o2, v2) in zip(run, run[1:]):
            if o2 <= o1:
                out.append(Violation(2, "reordered", f"process {process} partition {p}: {v2!r} "
                                                     f"invoked after {v1!r} got offset {o2} <= {o1}"))
    for value, where in ix.final_where.items():
        if value not in ix.sent:
            out.append(Violation(2, "phantom", f"{value!r} at {_positions(where)} was never sent"))
    return out


# -- invariant 3: replicas on disk --------------------------------------------------------------
def _replicas_identical(topic: str, partitions, hws: dict[int, dict],
                        data_root: str) -> list[Violation]:
    """Rule 3 for one topic: `hws` maps each of its partitions to its final-hw line."""
    out = []
    for p in partitions:
        hw = hws.get(p)
        if hw is None:
            continue
        start, end, isr = hw["log_start_offset"], hw["high_watermark"], list(hw["isr"])
        if end <= start:
            continue
        leader = hw.get("leader")
        order = ([leader] if leader in isr else []) + sorted(b for b in isr if b != leader)
        canon: dict[int, tuple[int, bytes, int]] = {}      # base → (last, bytes, broker)
        bases: list[int] = []
        for broker in order:
            batches = [b for b in disk.read_batches(disk.partition_dir(data_root, broker, topic, p))
                       if start <= b[1] < end]
            where = f"{topic}-{p} broker {broker}"
            short = _coverage_problem(batches, start, end)
            if short:
                out.append(Violation(3, "replica-short", f"{where}: {short}"))
            diverged = None
            for base, last, data in batches:
                if base in canon:
                    c_last, c_data, c_broker = canon[base]
                    if (c_last, c_data) != (last, data):
                        diverged = (f"batch [{base}, {last}] differs from broker {c_broker}'s "
                                    f"[{base}, {c_last}] {_first_difference(data, c_data)}")
                        break
                    continue
                k = bisect.bisect_right(bases, last) - 1
                if k >= 0 and canon[bases[k]][0] >= base:
                    other = bases[k]
                    diverged = (f"batch [{base}, {last}] overlaps broker {canon[other][2]}'s "
                                f"[{other}, {canon[other][0]}]: batch boundaries differ")
                    break
                canon[base] = (last, data, broker)
                bisect.insort(bases, base)
            if diverged:
                out.append(Violation(3, "replica-diverged", f"{where}: {diverged}"))
    return out


def _replicas_agree_per_key(ix: _Index, data_root: str) -> list[Violation]:
    """Rule 3 for a compacted run (see the module rules)."""
    from replicas.records import decode_records
    out = []
    for p in ix.partitions:
        hw = ix.hw.get(p)
        if hw is None or hw["high_watermark"] <= hw["log_start_offset"]:
            continue
        start, end, isr = hw["log_start_offset"], hw["high_watermark"], list(hw["isr"])
        order = ([hw.get("leader")] if hw.get("leader") in isr else []) + \
            sorted(b for b in isr if b != hw.get("leader"))
        reference = None
        for broker in order:
            data = b"".join(d for base, last, d in disk.read_batches(
                disk.partition_dir(data_root, broker, ix.topic, p)) if last >= start and base < end)
            last_of = {}
            for r in decode_records(data):
                if start <= r.offset < end:
                    last_of[r.key] = (r.offset, r.value)
            where = f"partition {p} broker {broker}"
            if max((o for o, _ in last_of.values()), default=None) != end - 1:
                out.append(Violation(3, "replica-short", f"{where}: no record at HW-1 = {end - 1}"))
            if reference is None:
                reference = (broker, last_of)
                continue
            differ = sorted(k for k in set(last_of) | set(reference[1])
                            if last_of.get(k) != reference[1].get(k))
            if differ:
                k = differ[0]
                out.append(Violation(3, "replica-diverged", f"{where}: key {k!r} ends as "
                                     f"{last_of.get(k)} but as {reference[1].get(k)} on broker "
                                     f"{reference[0]} ({len(differ)} keys differ)"))
    return out


def _coverage_problem(batches: list[disk.Batch], start: int, end: int) -> str | None:
    """Why `batches` (all with last offset in [start, end)) do not cover [start, end)."""
    if not batches:
        return f"no batch below the HW in [{start}, {end})"
    if batches[0][0] > start:
        return f"first batch starts at {batches[0][0]}, the log starts at {start}"
    for (_, last, _), (base, _, _) in zip(batches, batches[1:]):
        if base != last + 1:
            return f"batches jump from offset {last} to {base}"
    if batches[-1][1] != end - 1:
        return f"batches below the HW end at offset {batches[-1][1]}, the HW is {end}"
    return None


def _first_difference(a: bytes, b: bytes) -> str:
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"(first at byte {n}; sizes {len(a)} and {len(b)})"


# -- invariants 4 and 5: controller terms, leader epochs, high watermarks -------------------------
def _one_controller_per_epoch(ix: _Index, data_root: str | None) -> list[Violation]:
    out = []
    seen: dict[int, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    for e in ix.timed(("controller-sample", "ok")):
        if e["epoch"] is not None and e["controller_id"] is not None:
            seen[e["epoch"]][e["controller_id"]].append(f"sample t={e['time_ms']:.0f}")
    for broker, path in (disk.broker_dirs(data_root) if data_root else []):
        try:
            terms = disk.controller_epochs(path)
        except ValueError as exc:
            out.append(Violation(4, "controller-log-unreadable", f"broker {broker}: {exc}"))
            continue
        for epoch, controller in terms:
            seen[epoch][controller].append(f"broker {broker}'s {disk.CONTROLLER_EPOCHS}")
    for epoch in sorted(seen):
        ids = seen[epoch]
        if len(ids) > 1:
            text = "; ".join(f"controller {c} ({', '.join(src[:3])})" for c, src in sorted(ids.items()))
            out.append(Violation(4, "two-controllers", f"controller epoch {epoch}: {text}"))
    return out


def _regressions(events, key, value, kind: str, what) -> list[Violation]:
    """Invariant-5 violations where `value(e)` drops below the highest value seen before
    for the same `key(e)`, in time order; `what(k, v)` names the key and value."""
    out, best = [], {}
    for e in events:
        k, v = key(e), value(e)
        if k in best and v < best[k][0]:
            out.append(Violation(5, kind, f"{what(k, v)} at t={e['time_ms']:.0f} after "
                                          f"{best[k][0]} at t={best[k][1]:.0f}"))
        elif k not in best or v > best[k][0]:
            best[k] = (v, e["time_ms"])
    return out


def _epochs_and_hw_monotone(ix: _Index, data_root: str | None) -> list[Violation]:
    out = _regressions(ix.timed(("zk-sample", "ok")), lambda e: e["partition"],
                       lambda e: e["leader_epoch"], "epoch-regressed",
                       lambda p, epoch: f"partition {p}: leader epoch {epoch}")
    out += _regressions(ix.timed(("hw-sample", "ok")),
                        lambda e: (e["partition"], e["broker"], e["leader_epoch"]),
                        lambda e: e["high_watermark"], "hw-regressed",
                        lambda k, hw: f"partition {k[0]} leader {k[1]} epoch {k[2]}: HW {hw}")
    if data_root is None or ix.topic is None:
        return out
    for broker, bdir in disk.broker_dirs(data_root):
        for p, pdir in disk.partition_dirs(bdir, ix.topic):
            where = f"partition {p} broker {broker}"
            try:
                entries = disk.leader_epoch_entries(pdir)
            except ValueError as exc:
                out.append(Violation(5, "epoch-cache-unreadable", f"{where}: {exc}"))
                continue
            for (e1, s1), (e2, s2) in zip(entries, entries[1:]):
                if e2 <= e1 or s2 < s1:
                    out.append(Violation(5, "epoch-cache-regressed",
                                         f"{where}: leader-epoch-checkpoint has ({e1}, {s1}) "
                                         f"then ({e2}, {s2})"))
    return out


# -- invariant 6 --------------------------------------------------------------------------------
def _reads_committed(ix: _Index) -> list[Violation]:
    out = []
    for _, e in ix.by["read", "ok"]:
        p, off, value = e["partition"], e["offset"], e["value"]
        final = ix.final_at.get((p, off))
        hw = ix.hw.get(p)
        if final == value or (final is None and hw and off < hw["log_start_offset"]) or \
                (final is None and ix.superseded(p, off, value)):
            continue
        found = f"the final log has {final!r} there" if final is not None else _hw_text(ix, p)
        out.append(Violation(6, "read-uncommitted", f"process {e.get('process')} read {value!r} "
                                                    f"at partition {p} offset {off}; {found}"))
    return out


# -- stats and rendering -------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of `values`; None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def _failover(ix: _Index) -> dict:
    oks = [(e["time_ms"], e["partition"]) for _, e in ix.by["send", "ok"]]
    any_times = sorted(t for t, _ in oks)
    per_part: dict[int, list[float]] = defaultdict(list)
    for t, p in oks:
        per_part[p].append(t)
    for times in per_part.values():
        times.sort()
    by_kind: dict[str, list[float]] = defaultdict(list)
    no_ack = 0
    for e in ix.timed(("fault", "info")):
        if e["phase"] != "start":
            continue
        p = e.get("partition")
        times = any_times if p is None else per_part.get(p, [])
        k = bisect.bisect_right(times, e["time_ms"])
        if k == len(times):
            no_ack += 1
        else:
            by_kind[e["kind"]].append(round(times[k] - e["time_ms"], 3))
    every = [ms for v in by_kind.values() for ms in v]
    return {"by_kind": dict(by_kind), "p50": percentile(every, 50), "p99": percentile(every, 99),
            "no_ack_after": no_ack}


def _stats(ix: _Index, found: list[Violation], skipped: dict, data_root: str | None) -> dict:
    kinds = Counter(v.kind for v in found)
    failed_present = sum(1 for _, e in ix.by["send", "fail"] if e["value"] in ix.final_where)
    faults = Counter(e["kind"] for _, e in ix.by["fault", "info"] if e["phase"] == "start")
    unverifiable = sum(1 for _, e in ix.by["read", "ok"]
                       if (e["partition"], e["offset"]) not in ix.final_at
                       and e["partition"] in ix.hw
                       and e["offset"] < ix.hw[e["partition"]]["log_start_offset"])
    return {
        "topic": ix.topic, "partitions": len(ix.partitions), "data_root": data_root,
        "invoked": len(ix.by["send", "invoke"]), "acknowledged": len(ix.by["send", "ok"]),
        "failed": len(ix.by["send", "fail"]), "indeterminate": len(ix.by["send", "info"]),
        "reads": len(ix.by["read", "ok"]), "reads_unverifiable": unverifiable,
        "final_records": len(ix.final_at), "lost": kinds["lost"], "moved": kinds["moved"],
        "duplicated": sum(1 for w in ix.final_where.values() if len(w) > 1),
        "failed_but_present": failed_present, "faults_by_kind": dict(faults),
        "failover_ms": _failover(ix), "violations_by_kind": dict(kinds), "skipped": skipped,
        "compacted_away": sum(1 for _, e in ix.by["send", "ok"]
                              if (e["partition"], e["offset"]) not in ix.final_at
                              and ix.superseded(e["partition"], e["offset"], e["value"])),
    }


def _render(verdict: Verdict, max_violations: int, width: int) -> str:
    from rich.console import Console
    from rich.table import Table

    stats, kinds = verdict.stats, verdict.kinds()
    inv = Table(title="rayka chaos invariants")
    for col in ("#", "invariant", "status", "violations", "by kind"):
        inv.add_column(col)
    for n, (name, names) in INVARIANTS.items():
        count = sum(kinds[k] for k in names)
        skip = stats.get("skipped", {}).get(n)
        status = "FAIL" if count else (f"SKIPPED ({skip})" if skip else "PASS")
        inv.add_row(str(n), name, status, str(count),
                    " ".join(f"{k}={kinds[k]}" for k in names if kinds[k]) or "-")
    st = Table(title="stats")
    st.add_column("stat")
    st.add_column("value")
    for key, value in stats.items():
        if key not in ("failover_ms", "skipped", "violations_by_kind"):
            st.add_row(key, str(value))
    fo = stats.get("failover_ms", {})
    ft = Table(title=f"failover ms (first ack after a fault starts; no ack after: "
                     f"{fo.get('no_ack_after', 0)})")
    for col in ("fault kind", "faults acked after", "p50", "p99", "max"):
        ft.add_column(col)
    rows = sorted(fo.get("by_kind", {}).items()) + [
        ("ALL", [ms for v in fo.get("by_kind", {}).values() for ms in v])]
    for kind, samples in rows:
        ft.add_row(kind, str(len(samples)), _ms(percentile(samples, 50)),
                   _ms(percentile(samples, 99)), _ms(max(samples) if samples else None))
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False,
                      highlight=False, soft_wrap=False)
    console.print(f"VERDICT: {'OK' if verdict.ok else 'FAILED'} "
                  f"({len(verdict.violations)} violations)")
    for table in (inv, st, ft):
        console.print(table)
    if verdict.violations:
        vt = Table(title=f"violations (first {min(max_violations, len(verdict.violations))} "
                         f"of {len(verdict.violations)})")
        for col in ("#", "kind", "detail"):
            vt.add_column(col)
        for v in verdict.violations[:max_violations]:
            vt.add_row(str(v.invariant), v.kind, v.detail)
        console.print(vt)
    return buf.getvalue()


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _positions(where: list[tuple[int, int]]) -> str:
    shown = ", ".join(f"p{p}@{o}" for p, o in where[:5])
    return shown + (f" (+{len(where) - 5} more)" if len(where) > 5 else "")


def _missing_ranges(have: list[int], start: int, end: int) -> list[tuple[int, int]]:
    """Inclusive ranges of [start, end) absent from the sorted, distinct `have`."""
    out, expect = [], start
    for o in have:
        if o > expect:
            out.append((expect, o - 1))
        expect = o + 1
    if expect < end:
        out.append((expect, end - 1))
    return out


def _ranges_text(ranges: list[tuple[int, int]]) -> str:
    shown = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in ranges[:5])
    return (shown or "-") + (f" (+{len(ranges) - 5} more ranges)" if len(ranges) > 5 else "")


def _offsets_text(offsets: list[int]) -> str:
    return ", ".join(map(str, offsets[:5])) + (f" (+{len(offsets) - 5} more)" if len(offsets) > 5 else "")
