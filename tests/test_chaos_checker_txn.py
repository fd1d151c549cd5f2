"""The transactional chaos checker (rayka/chaos/txn_checker.py, invariants 10-15), table-driven:
a clean history of writers, a zombie, an abandoned transaction and a consume-transform-produce
pipeline passes; each mutation breaks exactly the rules it names. The disk cases write real
segments (records and end-transaction markers) so the "txn-gap" rule and rule 3 read them."""

from __future__ import annotations

import copy

import pytest

from rayka.chaos import disk
from rayka.chaos.checker import check
from replicas import records
from replicas.control import ABORT, COMMIT, end_txn_marker_batch

pytestmark = pytest.mark.unit

TX, IN, OUT = "tx", "in", "out"
# the final logs: (topic, partition) → offset → (key, value) of a record, or a marker
# ("M", COMMIT | ABORT)
LOGS = {
    (TX, 0): ["w0.1.1:0", ("M", COMMIT), "w0.1.2:0", ("M", ABORT), "w0.2.4:0", ("M", ABORT),
              "w0.3.5:0", ("M", COMMIT)],
    (TX, 1): ["w0.1.1:1", ("M", COMMIT), "w0.1.3:0", ("M", COMMIT)],
    (OUT, 0): [("ctp.1.1:0", "out-in-0"), ("M", COMMIT), ("ctp.1.2:0", "out-in-2"),
               ("M", ABORT), ("ctp.1.3:0", "out-in-2"), ("M", COMMIT),
               ("ctp.1.4:0", "out-in-4"), ("M", ABORT), ("ctp.2.5:0", "out-in-4"),
               ("M", COMMIT)],
    (OUT, 1): [("ctp.1.1:1", "out-in-1"), ("M", COMMIT), ("ctp.1.3:1", "out-in-3"),
               ("M", COMMIT)],
    (IN, 0): ["in-0", "in-2", "in-4"],
    (IN, 1): ["in-1", "in-3"],
}
VISIBLE = {"w0.1.1:0", "w0.1.1:1", "w0.1.3:0", "w0.3.5:0", "ctp.1.1:0", "ctp.1.1:1",
           "ctp.1.3:0", "ctp.1.3:1", "ctp.2.5:0"}


class Hist:
    def __init__(self):
        self.lines: list[dict] = []
        self.t = 0.0

    def add(self, type_, f, **fields) -> dict:
        self.t += 10.0
        self.lines.append({"type": type_, "f": f, "time_ms": self.t, **fields})
        return self.lines[-1]


def records_of(topic: str):
    """(partition, offset, key, value) of every data record of `topic`'s final logs."""
    for (t, p), log in sorted(LOGS.items()):
        for off, entry in enumerate(log):
            if t != topic or (isinstance(entry, tuple) and entry[0] == "M"):
                continue
            key, value = entry if isinstance(entry, tuple) else (entry, entry)
            yield p, off, key, value


def at(key: str) -> list:
    """[key, partition, offset] where `key` is in the final logs."""
    return next([key, p, off] for t in (TX, OUT) for p, off, k, _ in records_of(t) if k == key)


def clean_history() -> list[dict]:
    h = Hist()
    h.add("info", "txn-meta", writers=["chaos-w0"], pipeline="chaos-ctp", txn_topic=TX,
          ctp_in=IN, ctp_out=OUT, ctp_group="g", partitions=2, transaction_timeout_ms=15000,
          hang_bound_ms=30000)

    def init(txid, k):
        h.add("invoke", "txn-init", txid=txid, instance=k)
        h.add("ok", "txn-init", txid=txid, instance=k, producer_id=7, epoch=k)

    def end(txid, k, label, action, keys, ok=True, **extra):
        h.add("invoke", "txn-end", txid=txid, instance=k, txn=label, action=action, keys=keys,
              **extra)
        if ok:
            h.add("ok", "txn-end", txid=txid, instance=k, txn=label, action=action,
                  records=[at(key) for key in keys if any(key == k2 for t in (TX, OUT)
                                                          for *_, k2, _v in records_of(t))])
        else:
            h.add("info", "txn-end", txid=txid, instance=k, txn=label, action=action,
                  error="RequestTimedOut")
    w = "chaos-w0"
    init(w, 1)
    end(w, 1, "w0.1.1", "commit", ["w0.1.1:0", "w0.1.1:1"])
    end(w, 1, "w0.1.2", "abort", ["w0.1.2:0"])
    end(w, 1, "w0.1.3", "commit", ["w0.1.3:0"], ok=False)      # indeterminate: committed
    end(w, 1, "w0.1.3", "abort", ["w0.1.3:0"], ok=False)
    init(w, 2)
    init(w, 3)                                 # instance 2 is a zombie from here on
    end(w, 2, "w0.2.4", "commit", ["w0.2.4:0", "w0.2.4:1"], ok=False)
    end(w, 2, "w0.2.4", "abort", ["w0.2.4:0", "w0.2.4:1"], ok=False)
    end(w, 3, "w0.3.5", "commit", ["w0.3.5:0"])
    for p, off, _k, value in records_of(IN):
        h.add("invoke", "ctp-feed", value=value)
        h.add("ok", "ctp-feed", value=value, partition=p, offset=off)
    c = "chaos-ctp"
    init(c, 1)

    def ctp(label, action, inputs, ok=True):
        keys = [f"{label}:{j}" for j in range(len(inputs))]
        offsets = {}
        for p, off, _ in inputs:
            offsets[str(p)] = off + 1
        end(c, int(label.split(".")[1]), label, action, keys, ok,
            inputs=[list(i) for i in inputs], offsets=offsets)
    ctp("ctp.1.1", "commit", [(0, 0, "in-0"), (1, 0, "in-1")])
    ctp("ctp.1.2", "abort", [(0, 1, "in-2")])
    ctp("ctp.1.3", "commit", [(0, 1, "in-2"), (1, 1, "in-3")])
    h.add("info", "txn-abandon", txid=c, instance=1, txn="ctp.1.4", keys=["ctp.1.4:0"],
          inputs=[[0, 2, "in-4"]], offsets={"0": 3})
    init(c, 2)
    ctp("ctp.2.5", "commit", [(0, 2, "in-4")])
    h.add("ok", "txn-read", isolation="read_committed", topic=TX, partition=1, offset=2,
          key="w0.1.3:0", value="w0.1.3:0")
    h.add("ok", "txn-read", isolation="read_committed", topic=OUT, partition=0, offset=0,
          key="ctp.1.1:0", value="out-in-0")
    h.add("ok", "ctp-final", committed={"0": 3, "1": 2}, ends={"0": 3, "1": 2})
    h.add("info", "txn-quiesce")
    for t in (TX, OUT):
        for p in (0, 1):
            hw = len(LOGS[(t, p)])
            h.add("ok", "txn-stable", topic=t, partition=p, waited_ms=12.5,
                  last_stable_offset=hw, high_watermark=hw)
    for isolation in ("read_committed", "read_uncommitted"):
        for t in (TX, OUT):
            for p, off, key, value in records_of(t):
                if isolation == "read_uncommitted" or key in VISIBLE:
                    h.add("ok", "txn-final-read", isolation=isolation, topic=t, partition=p,
                          offset=off, key=key, value=value)
    for p, off, _k, value in records_of(IN):
        h.add("ok", "ctp-input-final", partition=p, offset=off, value=value)
    for (t, p), log in sorted(LOGS.items()):
        h.add("ok", "txn-final-hw", topic=t, partition=p, log_start_offset=0,
              high_watermark=len(log), last_stable_offset=len(log), isr=[1], leader=1)
    return h.lines


# -- mutations ----------------------------------------------------------------------------------
def find(lines, f, type_, **match) -> dict:
    return next(e for e in lines if e["f"] == f and e["type"] == type_
                and all(e.get(k) == v for k, v in match.items()))


def drop(lines, f, type_, **match) -> None:
    lines.remove(find(lines, f, type_, **match))


def read(lines, isolation, topic, p, off, key, value=None, f="txn-final-read") -> None:
    lines.append({"type": "ok", "f": f, "time_ms": lines[-1]["time_ms"] + 1,
                  "isolation": isolation, "topic": topic, "partition": p, "offset": off,
                  "key": key, "value": key if value is None else value})


def m_aborted_final(h):
    read(h, "read_committed", TX, 0, 2, "w0.1.2:0")


def m_aborted_live(h):
    read(h, "read_committed", TX, 0, 2, "w0.1.2:0", f="txn-read")


def m_abandoned_read(h):
    read(h, "read_committed", OUT, 0, 6, "ctp.1.4:0", "out-in-4", f="txn-read")


def m_lost_commit(h):
    drop(h, "txn-final-read", "ok", isolation="read_committed", key="w0.1.1:1")


def m_commit_elsewhere(h):
    find(h, "txn-end", "ok", txn="w0.3.5", action="commit")["records"] = [["w0.3.5:0", 1, 3]]


def m_partial(h):
    for e in h:
        if e.get("txn") == "w0.1.3" and e["type"] == "invoke":
            e["keys"] = ["w0.1.3:0", "w0.1.3:1"]


def m_ctp_missing(h):
    find(h, "ctp-final", "ok").update(committed={"0": 3, "1": 3}, ends={"0": 3, "1": 3})
    find(h, "txn-final-hw", "ok", topic=IN, partition=1)["high_watermark"] = 3
    h.append({"type": "ok", "f": "ctp-input-final", "time_ms": 1e9, "partition": 1,
              "offset": 2, "value": "in-5"})
    h.append({"type": "invoke", "f": "ctp-feed", "time_ms": 1e9, "value": "in-5"})


def m_ctp_duplicate(h):
    h.insert(h.index(find(h, "ctp-final", "ok")), {
        "type": "ok", "f": "txn-end", "time_ms": 0, "txid": "chaos-ctp", "instance": 2,
        "txn": "ctp.2.6", "action": "commit", "records": [["ctp.2.6:0", 0, 10]]})
    h.insert(h.index(find(h, "txn-end", "ok", txn="ctp.2.6")), {
        "type": "invoke", "f": "txn-end", "time_ms": 0, "txid": "chaos-ctp", "instance": 2,
        "txn": "ctp.2.6", "action": "commit", "keys": ["ctp.2.6:0"]})
    for isolation in ("read_committed", "read_uncommitted"):
        read(h, isolation, OUT, 0, 10, "ctp.2.6:0", "out-in-0")


def m_ctp_beyond(h):
    find(h, "ctp-final", "ok")["committed"] = {"0": 2, "1": 2}


def m_ctp_phantom(h):
    for e in h:
        if e.get("txn") == "ctp.1.3" and e["f"] == "txn-end":
            if e["type"] == "invoke":
                e["keys"] = e["keys"] + ["ctp.1.3:2"]
            else:
                e["records"] = e["records"] + [["ctp.1.3:2", 1, 4]]
    for isolation in ("read_committed", "read_uncommitted"):
        read(h, isolation, OUT, 1, 4, "ctp.1.3:2", "out-in-99")


def m_ctp_moved(h):
    find(h, "txn-end", "ok", txn="ctp.1.3")["records"][1] = ["ctp.1.3:1", 0, 10]
    for e in h:
        if e["f"] == "txn-final-read" and e["key"] == "ctp.1.3:1":
            e.update(partition=0, offset=10)


def m_ctp_reordered(h):
    for e in h:
        if e["f"] == "txn-final-read" and e["key"] in ("ctp.1.1:0", "ctp.2.5:0"):
            e["value"] = {"ctp.1.1:0": "out-in-4", "ctp.2.5:0": "out-in-0"}[e["key"]]
        if e["f"] == "txn-read" and e["key"] == "ctp.1.1:0":
            e["value"] = "out-in-4"


def m_ctp_no_final(h):
    drop(h, "ctp-final", "ok")


def m_hang_fail(h):
    find(h, "txn-stable", "ok", topic=TX, partition=1).update(type="fail", waited_ms=45000.0,
                                                             last_stable_offset=2)


def m_hang_slow(h):
    find(h, "txn-stable", "ok", topic=OUT, partition=0)["waited_ms"] = 45001.0


def m_hang_unseen(h):
    drop(h, "txn-stable", "ok", topic=OUT, partition=1)


def m_zombie_commit(h):
    find(h, "txn-end", "info", txn="w0.2.4", action="commit").update(
        type="ok", records=[["w0.2.4:0", 0, 4]])
    read(h, "read_committed", TX, 0, 4, "w0.2.4:0")


def m_zombie_visible(h):
    read(h, "read_committed", TX, 0, 4, "w0.2.4:0")


def m_uncommitted_missing(h):
    drop(h, "txn-final-read", "ok", isolation="read_uncommitted", key="w0.3.5:0")


def m_duplicate(h):
    read(h, "read_uncommitted", TX, 1, 4, "w0.1.1:0")


def m_conflict(h):
    read(h, "read_uncommitted", TX, 0, 0, "w0.1.1:1")


def m_mismatch(h):
    find(h, "txn-read", "ok", key="w0.1.3:0")["value"] = "something else"


def m_phantom(h):
    read(h, "read_uncommitted", TX, 1, 4, "w7.1.1:0")


def m_reordered(h):
    for e in h:
        if e["f"] == "txn-final-read" and e["key"] in ("w0.1.1:0", "w0.3.5:0"):
            e["offset"] = 6 if e["key"] == "w0.1.1:0" else 0
    find(h, "txn-end", "ok", txn="w0.1.1")["records"][0] = ["w0.1.1:0", 0, 6]
    find(h, "txn-end", "ok", txn="w0.3.5")["records"] = [["w0.3.5:0", 0, 0]]


def m_input_gap(h):
    find(h, "txn-final-hw", "ok", topic=IN, partition=0)["high_watermark"] = 4


def m_feed_lost(h):
    find(h, "ctp-feed", "ok", value="in-3")["offset"] = 5


CASES = [
    ("clean", lambda h: None, set()),
    ("aborted-read-final", m_aborted_final, {"aborted-read"}),
    ("aborted-read-live", m_aborted_live, {"aborted-read"}),
    ("abandoned-read", m_abandoned_read, {"aborted-read"}),
    ("lost-commit", m_lost_commit, {"lost-commit"}),
    ("commit-at-another-offset", m_commit_elsewhere, {"lost-commit", "uncommitted-missing"}),
    ("partial-indeterminate", m_partial, {"partial-txn"}),
    ("ctp-missing", m_ctp_missing, {"ctp-missing"}),
    ("ctp-duplicate", m_ctp_duplicate, {"ctp-duplicate", "ctp-reordered"}),
    ("ctp-output-past-commit", m_ctp_beyond, {"ctp-uncommitted-output", "ctp-not-caught-up"}),
    ("ctp-phantom", m_ctp_phantom, {"ctp-phantom"}),
    ("ctp-moved", m_ctp_moved, {"ctp-moved", "txn-reordered"}),
    ("ctp-reordered", m_ctp_reordered, {"ctp-reordered"}),
    ("ctp-no-final", m_ctp_no_final, {"ctp-not-caught-up"}),
    ("hang-lso-below-hw", m_hang_fail, {"txn-hang"}),
    ("hang-past-bound", m_hang_slow, {"txn-hang"}),
    ("hang-never-measured", m_hang_unseen, {"txn-hang"}),
    ("zombie-commit", m_zombie_commit, {"zombie-commit", "zombie-visible", "lost-commit"}),
    ("zombie-visible", m_zombie_visible, {"zombie-visible"}),
    ("uncommitted-missing", m_uncommitted_missing, {"uncommitted-missing", "txn-mismatch"}),
    ("duplicate", m_duplicate, {"txn-duplicate"}),
    ("two-records-one-offset", m_conflict, {"txn-duplicate"}),
    ("mismatch", m_mismatch, {"txn-mismatch"}),
    ("phantom", m_phantom, {"txn-phantom"}),
    ("reordered", m_reordered, {"txn-reordered"}),
    ("input-gap", m_input_gap, {"txn-gap"}),
    ("feed-lost", m_feed_lost, {"lost"}),
]


@pytest.mark.parametrize("mutate,kinds", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_rule_catches_its_violation_and_only_it(mutate, kinds):
    history = copy.deepcopy(clean_history())
    mutate(history)
    verdict = check(history)
    assert {v.kind for v in verdict.violations} == kinds, verdict.violations


def test_clean_history_outcomes_and_stats():
    verdict = check(clean_history())
    assert verdict.ok, verdict.violations
    s = verdict.stats
    # committed: w0.1.1 w0.3.5 ctp.1.1 ctp.1.3 ctp.2.5; aborted: w0.1.2 ctp.1.2 and the
    # abandoned ctp.1.4 (no commit ever invoked); indeterminate: w0.1.3 and the zombie w0.2.4
    assert (s["txn_committed"], s["txn_aborted"], s["txn_indeterminate"]) == (5, 3, 2)
    assert s["txn_zombies"] == 1 and s["txn_abandoned"] == 1 and s["txn_instances"] == 5
    assert s["txn_max_stable_ms"] == 12.5 and s["txn_visible"] == len(VISIBLE)
    assert s["ctp_inputs"] == 5 and s["ctp_outputs"] == 5
    assert not set(s["skipped"]) & set(range(10, 16))
    table = verdict.table()
    assert "zombie producers are fenced" in table and "consume-transform-produce" in table


def test_an_indeterminate_commit_may_be_wholly_invisible():
    history = clean_history()
    for e in list(history):
        if e["f"] == "txn-final-read" and e["key"] == "w0.1.3:0" and \
                e["isolation"] == "read_committed":
            history.remove(e)
    drop(history, "txn-read", "ok", key="w0.1.3:0")
    assert check(history).ok


def test_reported_lines_are_capped_per_kind():
    history = clean_history()
    for i in range(40):
        read(history, "read_uncommitted", TX, 1, 10 + i, f"w7.1.{i}:0")
    kinds = [v for v in check(history).violations if v.kind == "txn-phantom"]
    assert len(kinds) == 31 and kinds[-1].detail == "... and 10 more"


# -- the disk: markers fill the offsets no reader returns ---------------------------------------
def write_logs(root, logs=LOGS) -> None:
    for (t, p), log in logs.items():
        pdir = root / "broker-1" / f"{t}-{p}"
        pdir.mkdir(parents=True)
        data = bytearray()
        for off, entry in enumerate(log):
            if isinstance(entry, tuple) and entry[0] == "M":
                data += end_txn_marker_batch(7, 1, entry[1], 0, 0, base_offset=off)
            else:
                key, value = entry if isinstance(entry, tuple) else (entry, entry)
                data += records.build_batch([value.encode()], keys=[key.encode()],
                                            timestamps_ms=0, base_offset=off,
                                            producer_id=7 if t != IN else -1,
                                            producer_epoch=1 if t != IN else -1,
                                            transactional=t != IN)
        (pdir / f"{0:020d}.log").write_bytes(bytes(data))


def test_control_offsets_reads_the_markers(tmp_path):
    write_logs(tmp_path)
    assert disk.control_offsets(tmp_path / "broker-1" / "tx-0") == {1, 3, 5, 7}
    assert disk.control_offsets(tmp_path / "broker-1" / "in-0") == set()
    assert disk.control_offsets(tmp_path / "nowhere") == set()


def test_with_the_disk_markers_explain_every_offset_the_readers_skip(tmp_path):
    write_logs(tmp_path)
    verdict = check(clean_history(), data_root=str(tmp_path))
    assert verdict.ok, verdict.violations


def test_with_the_disk_a_skipped_offset_that_is_no_marker_is_a_gap(tmp_path):
    logs = dict(LOGS)
    logs[(TX, 0)] = LOGS[(TX, 0)][:7] + ["w0.9.9:0"]      # a record where the marker was
    write_logs(tmp_path, logs)
    verdict = check(clean_history(), data_root=str(tmp_path))
    assert {v.kind for v in verdict.violations} == {"txn-gap"}
    assert "tx-0: offsets [7]" in verdict.violations[0].detail


def test_with_the_disk_replicas_of_the_transactional_topics_are_compared(tmp_path):
    write_logs(tmp_path)
    history = clean_history()
    find(history, "txn-final-hw", "ok", topic=OUT, partition=1)["isr"] = [1, 2]
    verdict = check(history, data_root=str(tmp_path))
    assert {v.kind for v in verdict.violations} == {"replica-short"}
    assert "out-1 broker 2" in verdict.violations[0].detail


# -- the run's configuration --------------------------------------------------------------------
def test_the_txn_coordinator_faults_need_transactions(tmp_path):
    from rayka.chaos.runner import TXN_FAULT_KINDS, ChaosConfig, ChaosRun
    from rayka.cli import build_parser
    with pytest.raises(ValueError, match="need transactions"):
        ChaosRun(ChaosConfig(faults=TXN_FAULT_KINDS, out_dir=str(tmp_path / "a")))
    run = ChaosRun(ChaosConfig(faults=TXN_FAULT_KINDS, transactions=2,
                               out_dir=str(tmp_path / "b")), say=lambda _line: None)
    run.history.close()
    args = build_parser().parse_args(["chaos", "--transactions", "3", "--faults",
                                      ",".join(TXN_FAULT_KINDS)])
    assert args.transactions == 3
