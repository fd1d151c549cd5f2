"""Transactions in the producer state (replicas/producer_state.py) and its log side
(replicas/producer_log.py): Kafka's ProducerAppendInfo / ProducerStateManager checks as a
table, then a hypothesis property against a naive model of transactions, the LSO and the
aborted-transaction index, with a rebuild and a recovery that must land on the same state
and the same `.txnindex` bytes."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replicas import records
from replicas.control import ABORT, COMMIT
from replicas.errors import KafkaError
from replicas.log import Log, LogConfig
from replicas.producer_log import ProducerLog, needs_verification
from replicas.producer_state import (COORDINATOR, REPLICATION, ProducerStateManager)
from replicas.txn_index import AbortedTxn

pytestmark = pytest.mark.unit


def header(n=1, pid=1, epoch=0, seq=0, txn=False, base=0):
    buf = records.build_batch([b"x"] * n, timestamps_ms=0, producer_id=pid, producer_epoch=epoch,
                              base_sequence=seq, base_offset=base, transactional=txn)
    return records.read_header(buf)


class Driver:
    """Steps on one ProducerStateManager: ("verify", pid, epoch, seq) keeps the guard under
    pid ("verify2": for a transaction version 2 client); ("data", pid, epoch, seq, n, txn, guard of pid or None[, origin]); ("marker", pid,
    epoch, ABORT|COMMIT, coordinator epoch); ("clear",) ends the guards (leadership change)."""

    def __init__(self, verification: bool = True):
        self.state = ProducerStateManager(verification)
        self.guards, self.offset = {}, 0

    def run(self, steps):
        result = None
        for step in steps:
            result = self.step(step)
        return result

    def step(self, step):
        state, kind = self.state, step[0]
        if kind in ("verify", "verify2"):
            _, pid, epoch, seq = step
            self.guards[pid] = state.maybe_start_verification(pid, epoch, seq,
                                                              kind == "verify2")
            return self.guards[pid]
        if kind == "data":
            _, pid, epoch, seq, n, txn, use, *origin = step
            prepared = state.prepare([header(n, pid, epoch, seq, txn, self.offset)], self.offset,
                                     *(origin or ["client"]),
                                     guard=self.guards.get(use) if use is not None else None)
            if prepared.duplicate is None:
                state.commit(prepared)
                self.offset += n
            return prepared.duplicate
        if kind == "marker":
            _, pid, epoch, control, coordinator_epoch = step
            state.check_marker(pid, epoch, coordinator_epoch)
            self.offset += 1
            return state.apply_marker(pid, epoch, control, coordinator_epoch, self.offset - 1)
        assert kind == "clear"
        state.clear_verifications()
        return None

    def snapshot(self):
        return {pid: (e.epoch, e.last_seq, e.coordinator_epoch, e.current_txn_first_offset)
                for pid in self.state.producer_ids if (e := self.state.entry(pid))}, \
            self.state.ongoing_transactions


OPEN = [("verify", 1, 0, 0), ("data", 1, 0, 0, 2, True, 1)]          # offsets 0-1, open

CASES = [
    # (name, steps that must succeed, the step checked, Kafka's error code or 0)
    ("a transactional batch without a guard", [], ("data", 1, 0, 0, 1, True, None), 48),
    ("a transactional batch with its guard", [("verify", 1, 0, 0)],
     ("data", 1, 0, 0, 1, True, 1), 0),
    ("another producer's guard", [("verify", 1, 0, 0), ("verify", 2, 0, 0)],
     ("data", 1, 0, 0, 1, True, 2), 48),
    ("a guard ended by a marker", [("verify", 1, 0, 0), ("marker", 1, 0, ABORT, 0)],
     ("data", 1, 0, 0, 1, True, 1), 48),
    ("a guard ended by a leadership change", [("verify", 1, 0, 0), ("clear",)],
     ("data", 1, 0, 0, 1, True, 1), 48),
    ("no verification while the transaction is open", OPEN, ("data", 1, 0, 2, 1, True, None), 0),
    ("a non-transactional batch inside an open transaction", OPEN,
     ("data", 1, 0, 2, 1, False, None), 48),
    ("a non-transactional batch of a new epoch inside it", OPEN,
     ("data", 1, 1, 0, 1, False, None), 48),
    ("a transactional batch of an older epoch",
     [("verify", 1, 3, 0), ("data", 1, 3, 0, 1, True, 1)], ("data", 1, 2, 1, 1, True, None), 47),
    ("a sequence above the lowest one seen while verifying", [("verify", 1, 0, 5)],
     ("data", 1, 0, 6, 1, True, 1), 45),
    ("the lowest sequence seen while verifying", [("verify", 1, 0, 7), ("verify", 1, 0, 5)],
     ("data", 1, 0, 5, 1, True, 1), 0),
    ("a sequence gap inside a transaction", OPEN, ("data", 1, 0, 3, 1, True, None), 45),
    ("a coordinator's write: no sequence check", OPEN,
     ("data", 1, 0, 40, 1, True, None, COORDINATOR), 0),
    ("a coordinator's write: the epoch is checked", OPEN,
     ("data", 1, -1, 40, 1, True, None, COORDINATOR), 47),
    ("a marker of an older epoch", OPEN, ("marker", 1, -1, COMMIT, 0), 47),
    ("a marker of an older coordinator epoch", OPEN + [("marker", 1, 0, COMMIT, 5)],
     ("marker", 1, 0, ABORT, 4), 52),
    ("a marker of the same coordinator epoch", OPEN + [("marker", 1, 0, COMMIT, 5)],
     ("marker", 1, 0, ABORT, 5), 0),
    ("a marker of a newer producer epoch", OPEN, ("marker", 1, 1, ABORT, 0), 0),
    # transaction version 2: every transaction has its own epoch
    ("a verification at an older epoch", OPEN, ("verify", 1, -1, 0), 47),
    ("a new epoch's batch needs a guard while the old transaction is open", OPEN,
     ("data", 1, 1, 0, 1, True, None), 48),
    ("a version 2 guard outlives the marker at its epoch",
     OPEN + [("verify2", 1, 1, 0), ("marker", 1, 1, COMMIT, 0)], ("data", 1, 1, 0, 1, True, 1), 0),
    ("a version 1 guard ends at any marker",
     OPEN + [("verify", 1, 1, 0), ("marker", 1, 1, COMMIT, 0)], ("data", 1, 1, 0, 1, True, 1), 48),
    ("a version 2 producer new here starts at sequence 0", [("verify2", 1, 0, 3)],
     ("data", 1, 0, 3, 1, True, 1), 45),
]


@pytest.mark.parametrize("name,setup,step,code", CASES, ids=[c[0] for c in CASES])
def test_producer_checks(name, setup, step, code):
    driver = Driver()
    driver.run(setup)
    if not code:
        driver.step(step)
        return
    before = driver.snapshot()
    with pytest.raises(KafkaError) as caught:
        driver.step(step)
    assert caught.value.code == code
    assert driver.snapshot() == before                 # a refused append changes nothing


def test_verification_can_be_disabled():
    Driver(verification=False).step(("data", 1, 0, 0, 1, True, None))


def test_a_rejected_buffer_changes_nothing():
    driver = Driver()
    driver.run(OPEN)
    state = driver.state
    buf = [header(1, 1, 0, 2, True, 2), header(1, 1, 0, 3, False, 3)]   # 2nd breaks the txn
    with pytest.raises(KafkaError) as caught:
        state.prepare(buf, 2)
    assert caught.value.code == 48
    assert state.entry(1).last_seq == 1 and state.ongoing_transactions == {0: 1}


def test_transactions_open_complete_and_hold_the_first_unstable_offset():
    driver = Driver()
    driver.run(OPEN + [("verify", 2, 0, 0), ("data", 2, 0, 0, 3, True, 2)])   # 2: 2..4
    state = driver.state
    assert state.ongoing_transactions == {0: 1, 2: 2}
    assert state.first_unstable_offset(5) == 0
    completed = state.apply_marker(1, 0, ABORT, 0, 5)
    # the LSO an ABORT records: the first offset of the earliest OTHER open transaction
    assert (completed.first_offset, completed.last_offset, completed.aborted,
            completed.last_stable_offset) == (0, 5, True, 2)
    assert state.first_unstable_offset(5) == 0        # the marker is not below the HW yet
    assert state.first_unstable_offset(6) == 2        # it is: producer 2's transaction next
    last = state.apply_marker(2, 0, COMMIT, 0, 6)
    assert not last.aborted and last.last_stable_offset == 7
    assert state.first_unstable_offset(6) == 2 and state.first_unstable_offset(7) is None
    assert state.apply_marker(2, 0, COMMIT, 0, 7) is None      # nothing open: nothing completes


def test_a_marker_takes_the_epoch_and_a_duplicate_is_found_before_the_guard_check():
    driver = Driver()
    driver.run(OPEN)
    state = driver.state
    assert state.prepare([header(2, 1, 0, 0, True, 0)], 9).duplicate.first_offset == 0
    state.apply_marker(1, 1, ABORT, 3, 2)             # the coordinator bumped the epoch
    entry = state.entry(1)
    assert (entry.epoch, entry.coordinator_epoch, len(entry.batches),
            entry.current_txn_first_offset) == (1, 3, 0, None)


def test_guards_are_stable_until_used_and_none_inside_a_transaction():
    state = ProducerStateManager()
    first = state.maybe_start_verification(1, 0, 0)
    assert state.maybe_start_verification(1, 0, 0) == first
    assert state.maybe_start_verification(2, 0, 0) != first
    state.commit(state.prepare([header(1, 1, 0, 0, True)], 0, guard=first))
    assert state.maybe_start_verification(1, 0, 1) is None
    assert state.verification_guard(1) is None        # ended by the append


def test_replication_applies_without_checks_and_skips_empty_control_batches():
    state = ProducerStateManager()
    state.update(header(2, 1, 0, 0, True, 0))
    state.update(header(1, 1, 0, 2, False, 2))         # a leader would refuse it; no check here
    assert state.ongoing_transactions == {0: 1}
    empty = records.read_header(bytes(records.HEADER.pack(
        3, records.HEADER_SIZE - records.LOG_OVERHEAD, 0, 2, 0, 0x30, 0, 0, 0, 1, 0, -1, 0)))
    assert state.update(empty, None) is None and state.ongoing_transactions == {0: 1}
    done = state.update(records.read_header(bytes(records.HEADER.pack(
        4, 66, 0, 2, 0, 0x30, 0, 0, 0, 1, 0, -1, 1))), (ABORT, 0))
    assert done.aborted and (done.first_offset, done.last_offset) == (0, 4)
    assert state.prepare([header(1, 1, 0, 0, True)], 5, REPLICATION).txn_starts == ((1, 5),)


def test_needs_verification_names_one_producer():
    assert needs_verification([header(pid=-1, epoch=-1, seq=-1)]) is None
    assert needs_verification([header(1, 4, 0, 0, False)]) is None
    assert needs_verification([header(1, 4, 0, 0, True), header(1, 4, 0, 1, True)]) == (4, 0)
    with pytest.raises(KafkaError) as caught:
        needs_verification([header(1, 4, 0, 0, True), header(1, 5, 0, 0, True)])
    assert caught.value.code == 49


# ---------------------------------------------------------------- the model
PIDS = (1, 2, 3)
KINDS = ["txn"] * 6 + ["end"] * 4 + ["txn_unverified", "idem", "idem", "plain", "zombie",
                                     "hw", "hw"]
pid = st.sampled_from(PIDS)
op = st.sampled_from(KINDS).flatmap(lambda kind: {
    "txn": st.tuples(st.just(kind), pid, st.integers(1, 4)),
    "end": st.tuples(st.just(kind), pid, st.booleans(), st.booleans(), st.booleans()),
    "txn_unverified": st.tuples(st.just(kind), pid, st.integers(1, 2)),
    "idem": st.tuples(st.just(kind), pid, st.integers(1, 3)),
    "plain": st.tuples(st.just(kind), st.integers(1, 3)),
    "zombie": st.tuples(st.just(kind), pid, st.booleans()),
    "hw": st.tuples(st.just(kind), st.sampled_from([0.0, 0.3, 0.6, 0.9, 1.0])),
}[kind])


class Model:
    """Transactions the naive way: a list of what was written, recomputed from scratch."""

    def __init__(self):
        self.leo, self.hw = 0, 0
        self.epoch = {p: 0 for p in PIDS}
        self.coordinator = {p: 0 for p in PIDS}
        self.seq = {p: 0 for p in PIDS}
        self.open: dict[int, int] = {}              # pid -> first offset
        self.completed: list[tuple] = []            # (pid, first, last, aborted, lso)

    def lso_for(self, pid: int, marker: int) -> int:
        others = [f for p, f in self.open.items() if p != pid]
        return min(others) if others else marker + 1

    def first_unstable(self):
        firsts = list(self.open.values()) + [c[1] for c in self.completed if c[2] >= self.hw]
        return min(firsts) if firsts else None

    def lso(self):
        f = self.first_unstable()
        return f if f is not None and f < self.hw else self.hw

    def aborted(self):
        return [AbortedTxn(p, f, last, lso) for p, f, last, ab, lso in self.completed if ab]


def txn_entries(log: Log) -> list[AbortedTxn]:
    return [t for s in log.segments for t in s.txn_index.entries()]


def txn_files(log: Log) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(log.dir.glob("*.txnindex"))}


def apply(plog: ProducerLog, model: Model, step) -> None:
    kind = step[0]
    epoch_of = model.epoch
    if kind == "hw":
        model.hw = max(model.hw, int(step[1] * model.leo))     # the HW only rises
        return
    if kind == "plain":
        buf = records.build_batch([b"p"] * step[1], timestamps_ms=1)
        plog.append_as_leader(buf, 0)
        model.leo += step[1]
        return
    pid = step[1]
    if kind in ("txn", "txn_unverified", "idem"):
        n = step[2]
        txn = kind != "idem"
        guard = plog.maybe_start_verification(pid, epoch_of[pid], model.seq[pid]) \
            if kind == "txn" else None
        buf = records.build_batch([b"t" if txn else b"i"] * n, timestamps_ms=1, producer_id=pid,
                                  producer_epoch=epoch_of[pid], base_sequence=model.seq[pid],
                                  transactional=txn)
        if kind == "txn" or (kind == "txn_unverified" and pid in model.open):
            expected = 0
        elif kind == "txn_unverified":
            expected = 48                          # not verified, no transaction open
        else:
            expected = 48 if pid in model.open else 0
        try:
            plog.append_as_leader(buf, 0, guard=guard)
            code = 0
        except KafkaError as exc:
            code = exc.code
        assert code == expected, step
        if code == 0:
            if txn and pid not in model.open:
                model.open[pid] = model.leo
            model.leo += n
            model.seq[pid] += n
        return
    if kind == "end":
        _, _, commit, bump, new_coordinator = step
        epoch = epoch_of[pid] + bump
        coordinator = model.coordinator[pid] + new_coordinator
        plog.append_marker(pid, epoch, commit, coordinator, 0, 5)
        if pid in model.open:
            first = model.open[pid]
            model.completed.append((pid, first, model.leo, not commit,
                                    model.lso_for(pid, model.leo)))
            del model.open[pid]
        if bump:
            epoch_of[pid], model.seq[pid] = epoch, 0
        model.coordinator[pid] = coordinator
        model.leo += 1
        return
    if kind == "zombie":
        old_epoch = step[2]
        if old_epoch and epoch_of[pid] == 0 or not old_epoch and model.coordinator[pid] == 0:
            return
        epoch = epoch_of[pid] - old_epoch
        coordinator = model.coordinator[pid] - (not old_epoch)
        with pytest.raises(KafkaError) as caught:
            plog.append_marker(pid, epoch, False, coordinator, 0, 5)
        assert caught.value.code == (47 if old_epoch else 52)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=20, max_size=80), st.integers(0, 120), st.integers(0, 120),
       st.sampled_from([300, 3000]))
def test_producer_state_lso_and_aborted_index_follow_the_model(steps, fetch, span, segment_bytes):
    with tempfile.TemporaryDirectory() as tmp:
        config = LogConfig(segment_bytes=segment_bytes)
        log = Log(Path(tmp) / "t-0", config)
        plog = ProducerLog(log)
        model = Model()
        for step in steps:
            apply(plog, model, step)
            assert plog.first_unstable_offset(model.hw) == model.first_unstable()
            assert plog.last_stable_offset(model.hw) == model.lso()
        assert txn_entries(log) == model.aborted()
        upper = fetch + span
        wanted = [t for t in model.aborted() if t.last_offset >= fetch and t.first_offset < upper]
        assert log.collect_aborted(fetch, upper) == wanted
        files = txn_files(log)
        # a rebuild from the log lands on the same state
        again = ProducerLog(log)
        again.ensure_loaded()
        assert again.state.ongoing_transactions == plog.state.ongoing_transactions
        for pid in PIDS:
            a, b = again.state.entry(pid), plog.state.entry(pid)
            assert (a is None) == (b is None)
            if a is not None:
                assert (a.epoch, a.coordinator_epoch, a.current_txn_first_offset,
                        list(a.batches)) == (b.epoch, b.coordinator_epoch,
                                             b.current_txn_first_offset, list(b.batches))
        assert again.last_stable_offset(model.hw) == model.lso()
        # recovery of every segment rebuilds the same `.txnindex` files
        log.close()
        reopened = Log(Path(tmp) / "t-0", config, recovery_point=0)
        has_markers = any(s[0] == "end" for s in steps)
        assert (reopened.txn_index_stale_from is not None) == has_markers
        assert reopened.recovery_point <= (reopened.txn_index_stale_from
                                           if reopened.txn_index_stale_from is not None
                                           else reopened.log_end_offset)
        recovered = ProducerLog(reopened)
        recovered.ensure_loaded()
        assert reopened.txn_index_stale_from is None
        assert txn_files(reopened) == files
        assert recovered.last_stable_offset(model.hw) == model.lso()
        reopened.close()
