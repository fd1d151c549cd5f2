"""The transactional invariants of a chaos run (rayka/chaos/txns.py), from the history and the
brokers' files; modelled on Jepsen's analyses of Kafka's transactions.

History lines read (all carry "f", "type", "time_ms"):
  txn-meta/info {writers, pipeline, txn_topic, ctp_in, ctp_out, partitions,
                 transaction_timeout_ms, hang_bound_ms}
  txn-init/ok {txid, instance}                    init_transactions of that instance returned
  txn-end/invoke {txid, instance, txn, action: commit|abort, keys[, inputs, offsets]}
  txn-end/ok {txid, instance, txn, action, records: [[key, partition, offset], ...]}
  txn-end/info {txid, instance, txn, action, error}        the call raised
  txn-abandon/info {txid, instance, txn, keys}    left open, no end called (a crash)
  ctp-feed/ok {value, partition, offset}          CTP_IN records acknowledged
  txn-read/ok {isolation, topic, partition, offset, key, value}         the live reader
  txn-final-read/ok {isolation, topic, partition, offset, key, value}   after the run
  ctp-input-final/ok {partition, offset, value}   CTP_IN read whole after the run
  txn-final-hw/ok {topic, partition, log_start_offset, high_watermark, last_stable_offset}
  txn-stable/ok|fail {topic, partition, waited_ms}   LSO = HW after txn-quiesce (or not)
  ctp-final/ok {committed: {partition: offset}, ends: {partition: offset}}

Definitions:
- A record's transaction is named by its key `<label>:<j>`, the label `<name>.<instance>.<n>`.
- A transaction is COMMITTED when a commit of it returned; ABORTED when an abort of it
  returned, or when no commit of it was ever invoked (no EndTxn(commit) was sent: only an
  abort can end it); else INDETERMINATE (a commit was invoked and raised).
- A ZOMBIE transaction: its commit was invoked after a NEWER instance of its transactional
  id had completed init_transactions (a txn-init ok of a higher instance earlier in the
  file: one thread drives a transactional id, so file order is real order).
- "Visible": in the final read_committed read.

Rules (Violation kinds, numbered after rayka/chaos/checker.py's):
10. "aborted-read": a read_committed reader (live or final) returned a record of an ABORTED
    transaction.
11. "lost-commit": a record of a COMMITTED transaction is not visible at the partition and
    offset it was acknowledged with; "partial-txn": an INDETERMINATE (not zombie)
    transaction is partly visible (some of its records, not all).
12. The pipeline is exactly once. C = ctp-final's committed offsets: every CTP_IN record
    below C[p] has exactly one visible `out-<value>` on CTP_OUT, on the same partition
    ("ctp-missing", "ctp-duplicate"; elsewhere: "ctp-moved"), none at or past C[p]
    ("ctp-uncommitted-output"); a visible output of no CTP_IN record: "ctp-phantom"; per
    partition the outputs follow their inputs' offsets ("ctp-reordered"); C below CTP_IN's
    end or no ctp-final: "ctp-not-caught-up".
13. "txn-hang": a partition of the transactional topics whose LSO did not reach its HW
    within transaction_timeout_ms + hang_bound_ms after txn-quiesce (txn-stable fail, a
    wait past the bound, or no txn-stable at all).
14. "zombie-commit": a commit of instance i returned after instance j > i's init returned;
    "zombie-visible": a read_committed reader (live or final) returned a record of a ZOMBIE
    transaction (reported here, not under 10).
15. "uncommitted-missing": a COMMITTED record is not in the final read_uncommitted read at
    its position; "txn-duplicate": a key (CTP_IN: a value) at two positions of one final
    read, or one position read with two records; "txn-mismatch": a read_committed record
    (live or final) that the final read_uncommitted read holds differently (or not) at its
    position; "txn-phantom": a key no transaction named, or a CTP_IN value never fed;
    "txn-reordered": a transactional id's visible records on a partition out of (n, j)
    order; "txn-gap" (needs data_root): an offset of [log start, HW) that is neither a record
    of the final read_uncommitted read nor a control batch (a marker) on the leader's disk.
1.  "lost" for the feed: an acknowledged CTP_IN record missing at its position.
Invariant 3 (ISR replicas byte-identical, markers included) for these topics comes from
rayka/chaos/checker.py over txn-final-hw.
"""

from __future__ import annotations

from collections import defaultdict

from rayka.chaos import disk

COMMITTED, ABORTED, INDETERMINATE = "committed", "aborted", "indeterminate"
MAX_REPORTED = 30       # per kind: the rest is counted in one more line


def label_of(key: str) -> str:
    return key.rsplit(":", 1)[0]


def _order_of(key: str) -> tuple[str, int, int]:
    """(name, n, j) of a key `<name>.<instance>.<n>:<j>`."""
    label, j = key.rsplit(":", 1)
    name, _instance, n = label.rsplit(".", 2)
    return name, int(n), int(j)


class _Txns:
    """The transactions of a history: outcomes, records, zombies."""

    def __init__(self, index):
        by = index.by
        self.keys: dict[str, list[str]] = {}               # label → its keys
        self.acked: dict[str, list] = {}                   # label → [key, partition, offset]
        commit_invoked, commit_ok, abort_ok = set(), set(), set()
        self.zombies: set[str] = set()
        self.zombie_commits: list[tuple[int, dict]] = []
        inits: dict[str, list[tuple[int, int]]] = defaultdict(list)    # txid → (line, inst)
        for i, e in by.get(("txn-init", "ok"), []):
            inits[e["txid"]].append((i, e["instance"]))

        def newer_init_before(txid: str, instance: int, line: int) -> bool:
            return any(j > instance and at < line for at, j in inits.get(txid, ()))
        for i, e in by.get(("txn-end", "invoke"), []) + by.get(("txn-abandon", "info"), []):
            label = e["txn"]
            self.keys.setdefault(label, list(e["keys"]))
            if len(e["keys"]) > len(self.keys[label]):
                self.keys[label] = list(e["keys"])
            if e["f"] == "txn-end" and e["action"] == "commit":
                commit_invoked.add(label)
                if newer_init_before(e["txid"], e["instance"], i):
                    self.zombies.add(label)
        for i, e in by.get(("txn-end", "ok"), []):
            label = e["txn"]
            if e["action"] == "commit":
                commit_ok.add(label)
                self.acked[label] = e["records"]
                if newer_init_before(e["txid"], e["instance"], i):
                    self.zombie_commits.append((i, e))
            else:
                abort_ok.add(label)
        self.outcome: dict[str, str] = {}
        for label in self.keys:
            if label in commit_ok:
                self.outcome[label] = COMMITTED
            elif label in abort_ok or label not in commit_invoked:
                self.outcome[label] = ABORTED
            else:
                self.outcome[label] = INDETERMINATE
        self.key_label = {k: label for label, keys in self.keys.items() for k in keys}


class _Reads:
    """One final read: position → (key, value), key → positions."""

    def __init__(self):
        self.at: dict[tuple[str, int, int], tuple[str, str]] = {}
        self.where: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
        self.conflicts: list[tuple] = []

    def add(self, topic: str, p: int, off: int, key: str, value: str) -> None:
        pos = (topic, p, off)
        seen = self.at.setdefault(pos, (key, value))
        if seen != (key, value):
            self.conflicts.append((pos, seen, (key, value)))
        elif pos not in self.where[key]:        # a re-fetch of the same record counts once
            self.where[key].append(pos)


def check_transactions(index, violation, data_root=None) -> tuple[list, dict]:
    """(violations, stats) over an _Index of rayka/chaos/checker.py; ([], {}) without a
    transactional workload in the history."""
    meta = next((e for _, e in index.by.get(("txn-meta", "info"), [])), None)
    if meta is None:
        return [], {}
    out: list = []
    counts: dict[str, int] = defaultdict(int)

    def flag(n: int, kind: str, detail: str) -> None:
        counts[kind] += 1
        if counts[kind] <= MAX_REPORTED:
            out.append(violation(n, kind, detail))
    txns = _Txns(index)
    rc, ru = _Reads(), _Reads()
    for _, e in index.by.get(("txn-final-read", "ok"), []):
        (rc if e["isolation"] == "read_committed" else ru).add(
            e["topic"], e["partition"], e["offset"], e["key"], e["value"])
    live = [e for _, e in index.by.get(("txn-read", "ok"), [])
            if e["isolation"] == "read_committed"]
    _visibility(txns, rc, live, flag)
    _zombies(txns, rc, live, flag)
    _final_reads(txns, rc, ru, live, flag)
    ctp_stats = _pipeline(index, meta, rc, flag)
    stable_ms = _hangs(index, meta, flag)
    _feed_and_gaps(index, meta, ru, data_root, flag)
    for kind, n in counts.items():
        if n > MAX_REPORTED:
            number = next(v.invariant for v in out if v.kind == kind)
            out.append(violation(number, kind, f"... and {n - MAX_REPORTED} more"))
    outcomes = defaultdict(int)
    for label, o in txns.outcome.items():
        outcomes[o] += 1
    stats = {"txn_committed": outcomes[COMMITTED], "txn_aborted": outcomes[ABORTED],
             "txn_indeterminate": outcomes[INDETERMINATE], "txn_zombies": len(txns.zombies),
             "txn_instances": len(index.by.get(("txn-init", "ok"), [])),
             "txn_abandoned": len(index.by.get(("txn-abandon", "info"), [])),
             "txn_live_reads": len(live), "txn_visible": len(rc.at),
             "txn_uncommitted_records": len(ru.at),
             "txn_max_stable_ms": max(stable_ms) if stable_ms else None,
             "txn_violations": dict(counts), **ctp_stats}
    return out, stats


def _where(pos) -> str:
    return f"{pos[0]}-{pos[1]}@{pos[2]}"


# -- 10, 11: what read_committed shows ------------------------------------------------------------
def _visibility(txns: _Txns, rc: _Reads, live: list, flag) -> None:
    reads = [(e["key"], (e["topic"], e["partition"], e["offset"]), "live") for e in live] + \
            [(k, pos, "final") for pos, (k, _v) in rc.at.items()]
    for key, pos, who in reads:
        label = txns.key_label.get(key)
        if label is not None and txns.outcome[label] == ABORTED and label not in txns.zombies:
            flag(10, "aborted-read", f"the {who} read_committed reader returned {key!r} at "
                                     f"{_where(pos)}: its transaction {label} was aborted")
    for label, outcome in sorted(txns.outcome.items()):
        keys = txns.keys[label]
        visible = [k for k in keys if rc.where.get(k)]
        if outcome == COMMITTED:
            acked = {k: (p, o) for k, p, o in txns.acked.get(label, [])}
            for k in keys:
                where = rc.where.get(k, [])
                if k in acked and any((pos[1], pos[2]) == acked[k] for pos in where):
                    continue
                if k not in acked and where:
                    continue
                at = f"acknowledged at partition {acked[k][0]} offset {acked[k][1]}" \
                    if k in acked else "never acknowledged"
                seen = ", ".join(map(_where, where)) or "nowhere"
                flag(11, "lost-commit", f"{k!r} of committed transaction {label} ({at}) is "
                                        f"visible {seen}")
        elif outcome == INDETERMINATE and label not in txns.zombies and \
                0 < len(visible) < len(keys):
            flag(11, "partial-txn", f"transaction {label} (commit raised): {len(visible)} of "
                                    f"{len(keys)} records visible ({', '.join(visible[:4])})")


# -- 14: zombies -----------------------------------------------------------------------------------
def _zombies(txns: _Txns, rc: _Reads, live: list, flag) -> None:
    for i, e in txns.zombie_commits:
        flag(14, "zombie-commit", f"{e['txid']} instance {e['instance']}: commit of "
                                  f"{e['txn']} returned (line {i + 1}) after a newer instance's "
                                  f"init_transactions returned")
    read_live = {e["key"] for e in live}
    for label in sorted(txns.zombies):
        shown = [k for k in txns.keys[label] if rc.where.get(k) or k in read_live]
        if shown:
            flag(14, "zombie-visible", f"zombie transaction {label}: {len(shown)} records "
                                       f"read by read_committed ({', '.join(shown[:4])})")


# -- 15: the final reads themselves -----------------------------------------------------------------
def _final_reads(txns: _Txns, rc: _Reads, ru: _Reads, live: list, flag) -> None:
    for name, reads in (("read_committed", rc), ("read_uncommitted", ru)):
        for pos, a, b in reads.conflicts:
            flag(15, "txn-duplicate", f"final {name} read: {_where(pos)} read as both {a} "
                                      f"and {b}")
        for key, where in reads.where.items():
            if len(where) > 1:
                flag(15, "txn-duplicate", f"final {name} read: {key!r} at "
                                          f"{', '.join(map(_where, where[:5]))}")
            if key not in txns.key_label:
                flag(15, "txn-phantom", f"final {name} read: {key!r} at {_where(where[0])} "
                                        f"belongs to no recorded transaction")
    for label, outcome in sorted(txns.outcome.items()):
        if outcome != COMMITTED:
            continue
        for k, p, o in txns.acked.get(label, []):
            if not any((pos[1], pos[2]) == (p, o) for pos in ru.where.get(k, [])):
                flag(15, "uncommitted-missing", f"{k!r} of committed transaction {label} "
                                                f"(partition {p} offset {o}) is not in the "
                                                f"final read_uncommitted read there")
    checks = [((e["topic"], e["partition"], e["offset"]), (e["key"], e["value"]), "live")
              for e in live] + [(pos, kv, "final") for pos, kv in rc.at.items()]
    for pos, kv, who in checks:
        if ru.at.get(pos) != kv:
            flag(15, "txn-mismatch", f"the {who} read_committed reader read {kv} at "
                                     f"{_where(pos)}; the final read_uncommitted read has "
                                     f"{ru.at.get(pos)}")
    runs: dict[tuple, list] = defaultdict(list)
    for (topic, p, off), (key, _v) in sorted(rc.at.items()):
        if key in txns.key_label:
            name, n, j = _order_of(key)
            runs[(name, topic, p)].append(((n, j), off, key))
    for (name, topic, p), run in sorted(runs.items()):
        for (o1, off1, k1), (o2, off2, k2) in zip(run, run[1:]):
            if o2 <= o1:
                flag(15, "txn-reordered", f"{name} on {topic}-{p}: {k2!r} at offset {off2} "
                                          f"after {k1!r} at {off1}")


# -- 12: the consume-transform-produce pipeline ------------------------------------------------------
def _pipeline(index, meta: dict, rc: _Reads, flag) -> dict:
    ctp_out = meta["ctp_out"]
    inputs: dict[str, tuple[int, int]] = {}            # value → (partition, offset)
    for _, e in index.by.get(("ctp-input-final", "ok"), []):
        inputs.setdefault(e["value"], (e["partition"], e["offset"]))
    finals = [e for _, e in index.by.get(("ctp-final", "ok"), [])]
    if not finals:
        flag(12, "ctp-not-caught-up", "the run has no ctp-final line")
        return {"ctp_inputs": len(inputs)}
    final = finals[-1]
    committed = {int(p): o for p, o in final["committed"].items()}
    for p, end in final["ends"].items():
        if committed.get(int(p), -1) < end:
            flag(12, "ctp-not-caught-up", f"{meta['ctp_in']}-{p}: committed "
                                          f"{committed.get(int(p))} of {end}")
    outputs: dict[str, list[tuple[int, int]]] = defaultdict(list)   # input value → outputs
    per_partition: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
    for (topic, p, off), (_key, value) in sorted(rc.at.items()):
        if topic != ctp_out:
            continue
        source = value[len("out-"):] if value.startswith("out-") else None
        if source not in inputs:
            flag(12, "ctp-phantom", f"{_where((topic, p, off))}: {value!r} is the output of "
                                    f"no {meta['ctp_in']} record")
            continue
        outputs[source].append((p, off))
        if inputs[source][0] == p:            # a moved output is reported as such
            per_partition[p].append((off, inputs[source][1], value))
    for value, (p, off) in sorted(inputs.items(), key=lambda kv: kv[1]):
        outs = outputs.get(value, [])
        below = off < committed.get(p, -1)
        if below and not outs:
            flag(12, "ctp-missing", f"{meta['ctp_in']}-{p}@{off} {value!r} (committed up to "
                                    f"{committed.get(p)}) has no visible output")
        elif not below and outs:
            flag(12, "ctp-uncommitted-output", f"{meta['ctp_in']}-{p}@{off} {value!r} is at or "
                                               f"past the committed offset {committed.get(p)} "
                                               f"but its output is visible")
        if len(outs) > 1:
            flag(12, "ctp-duplicate", f"{meta['ctp_in']}-{p}@{off} {value!r} has "
                                      f"{len(outs)} visible outputs: "
                                      f"{', '.join(f'{ctp_out}-{q}@{o}' for q, o in outs[:4])}")
        for q, o in outs:
            if q != p:
                flag(12, "ctp-moved", f"{meta['ctp_in']}-{p}@{off} {value!r}: output on "
                                      f"partition {q} (offset {o})")
    for p, run in sorted(per_partition.items()):
        for (off1, in1, v1), (off2, in2, v2) in zip(run, run[1:]):
            if in2 <= in1:
                flag(12, "ctp-reordered", f"{ctp_out}-{p}: {v2!r} at {off2} (input offset "
                                          f"{in2}) after {v1!r} at {off1} (input offset {in1})")
    return {"ctp_inputs": len(inputs), "ctp_outputs": sum(map(len, outputs.values())),
            "ctp_committed": {str(p): o for p, o in sorted(committed.items())}}


# -- 13: no transaction hangs ----------------------------------------------------------------------
def _hangs(index, meta: dict, flag) -> list[float]:
    bound = meta["transaction_timeout_ms"] + meta["hang_bound_ms"]
    seen: dict[tuple[str, int], dict] = {}
    for key in (("txn-stable", "ok"), ("txn-stable", "fail")):
        for _, e in index.by.get(key, []):
            seen[(e["topic"], e["partition"])] = e
    waited = []
    for topic in (meta["txn_topic"], meta["ctp_out"]):
        for p in range(meta["partitions"]):
            e = seen.get((topic, p))
            if e is None:
                flag(13, "txn-hang", f"{topic}-{p}: its last stable offset was never seen to "
                                     f"reach its high watermark (no txn-stable line)")
            elif e["type"] != "ok":
                flag(13, "txn-hang", f"{topic}-{p}: LSO {e.get('last_stable_offset')} still below "
                                     f"HW {e.get('high_watermark')} {e['waited_ms']:.0f} ms "
                                     f"after every transactional client stopped")
            else:
                waited.append(e["waited_ms"])
                if e["waited_ms"] > bound:
                    flag(13, "txn-hang", f"{topic}-{p}: LSO reached the HW only after "
                                         f"{e['waited_ms']:.0f} ms (bound {bound} ms)")
    return waited


# -- 1 and 15 for the input topic and the gaps ---------------------------------------------------
def _feed_and_gaps(index, meta: dict, ru: _Reads, data_root, flag) -> None:
    ctp_in = meta["ctp_in"]
    at: dict[tuple[int, int], str] = {}
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for _, e in index.by.get(("ctp-input-final", "ok"), []):
        pos = (e["partition"], e["offset"])
        seen = at.setdefault(pos, e["value"])
        if seen != e["value"]:
            flag(15, "txn-duplicate", f"{ctp_in}-{pos[0]}@{pos[1]} read as both {seen!r} and "
                                      f"{e['value']!r}")
        elif pos not in where[e["value"]]:
            where[e["value"]].append(pos)
    fed = set()
    for _, e in index.by.get(("ctp-feed", "ok"), []):
        fed.add(e["value"])
        if at.get((e["partition"], e["offset"])) != e["value"]:
            flag(1, "lost", f"{e['value']!r} acknowledged at {ctp_in}-{e['partition']}@"
                            f"{e['offset']} is not in the final read there")
    sent = {e["value"] for key in (("ctp-feed", "invoke"), ("ctp-feed", "ok"), ("ctp-feed", "info"))
            for _, e in index.by.get(key, [])}
    for value, positions in where.items():
        if len(positions) > 1:
            flag(15, "txn-duplicate", f"{ctp_in}: {value!r} at {positions[:5]}")
        if value not in sent:
            flag(15, "txn-phantom", f"{ctp_in}: {value!r} at {positions[0]} was never fed")
    hws = {(e["topic"], e["partition"]): e for _, e in index.by.get(("txn-final-hw", "ok"), [])}
    have = {(t, p, o) for t, p, o in ru.at} | {(ctp_in, p, o) for p, o in at}
    for topic in (meta["txn_topic"], meta["ctp_out"], ctp_in):
        for p in range(meta["partitions"]):
            hw = hws.get((topic, p))
            if hw is None:
                flag(15, "txn-gap", f"{topic}-{p} has no txn-final-hw line")
                continue
            start, end = hw["log_start_offset"], hw["high_watermark"]
            missing = [o for o in range(start, end) if (topic, p, o) not in have]
            if not missing:
                continue
            if data_root is None:
                if topic == ctp_in:      # no markers there: any hole is a gap
                    flag(15, "txn-gap", f"{topic}-{p}: offsets {missing[:5]} missing")
                continue
            leader = hw.get("leader")
            markers = disk.control_offsets(disk.partition_dir(data_root, leader, topic, p)) \
                if leader is not None else set()
            holes = [o for o in missing if o not in markers]
            if holes:
                flag(15, "txn-gap", f"{topic}-{p}: offsets {holes[:5]} of [{start}, {end}) are "
                                    f"neither read nor markers on broker {leader}"
                                    f"{f' (+{len(holes) - 5} more)' if len(holes) > 5 else ''}")
