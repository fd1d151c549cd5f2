"""replicas/visible.py: what a consumer returns of a fetched log, against a naive model.

A log is generated from random schedules of producers (plain, idempotent, transactional
with COMMIT or ABORT markers, transactions interleaved across producers); the aborted list is
what the broker sends (producer id, first offset of each aborted transaction, from the log
itself); the model says a record is visible when it is not a marker and, for read_committed,
its transaction did not abort. Also: a read starting mid-log, and the no-copy fast path."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from replicas.visible import visible_batches
from replicas.control import ABORT, COMMIT, end_txn_marker_batch
from replicas.records import build_batch, decode_records, iter_headers

pytestmark = pytest.mark.unit


def _log(steps):
    """steps: (producer, action) with action "plain", "data" (in its transaction), "commit",
    "abort". → (log bytes, {value: visible to read_committed}, aborted list, first offset
    of every batch)."""
    out, offset = bytearray(), 0
    visible, aborted, starts = {}, [], []
    open_txn: dict[int, tuple[int, list]] = {}     # producer → (first offset, values)
    for i, (pid, action) in enumerate(steps):
        starts.append(offset)
        if action == "plain":
            value = b"p%d" % i
            out += build_batch([value], timestamps_ms=1, base_offset=offset)
            visible[value] = True
        elif action == "data":
            value = b"t%d" % i
            first, values = open_txn.setdefault(pid, (offset, []))
            values.append(value)
            out += build_batch([value], timestamps_ms=1, producer_id=pid, producer_epoch=0,
                               base_sequence=i, base_offset=offset, transactional=True)
        else:
            if pid not in open_txn:
                starts.pop()
                continue                           # a marker ends an open transaction only
            first, values = open_txn.pop(pid)
            out += end_txn_marker_batch(pid, 0, COMMIT if action == "commit" else ABORT, 0, 1,
                                        base_offset=offset)
            for v in values:
                visible[v] = action == "commit"
            if action == "abort":
                aborted.append((pid, first))
        offset += 1
    for first, values in open_txn.values():       # still open: not below the LSO yet
        for v in values:
            visible[v] = None
    return bytes(out), visible, aborted, starts


steps = st.lists(st.tuples(st.integers(1, 3), st.sampled_from(["plain", "data", "data", "commit",
                                                                "abort"])), max_size=40)


def _values(buf) -> list[bytes]:
    return [r.value for r in decode_records(buf)]


@settings(max_examples=300, deadline=None)
@given(steps)
def test_read_uncommitted_returns_every_record_and_no_marker(schedule):
    log, visible, _, _ = _log(schedule)
    assert _values(visible_batches(log)) == [v for v in _values(log)
                                             if v is not None and v[:1] in (b"p", b"t")]
    assert not any(h.attributes & 0x20 for h in iter_headers(visible_batches(log)))


@settings(max_examples=300, deadline=None)
@given(steps)
def test_read_committed_returns_exactly_the_committed_records(schedule):
    log, visible, aborted, _ = _log(schedule)
    # a read_committed fetch ends at the LSO: the first batch of a still-open transaction
    open_firsts = [h.base_offset for h in iter_headers(log)
                   if h.attributes & 0x10 and not h.attributes & 0x20
                   and visible.get(decode_records(log)[h.base_offset].value) is None]
    lso = min(open_firsts, default=None)
    below = b"".join(bytes(memoryview(log)[h.position:h.position + h.size])
                     for h in iter_headers(log) if lso is None or h.base_offset < lso)
    got = _values(visible_batches(below, aborted))
    assert got == [v for v in _values(below) if visible.get(v)]


@settings(max_examples=200, deadline=None)
@given(steps, st.integers(0, 40))
def test_a_read_from_the_middle_uses_only_the_aborted_transactions_it_overlaps(schedule, at):
    log, visible, aborted, _ = _log(schedule)
    headers = list(iter_headers(log))
    tail = [h for h in headers if h.base_offset >= min(at, len(headers))]
    if not tail:
        return
    buf = b"".join(bytes(memoryview(log)[h.position:h.position + h.size]) for h in tail)
    last = tail[-1].last_offset
    markers = {h.producer_id: h.base_offset for h in tail if h.attributes & 0x20}
    # the broker's collectAbortedTxns: transactions whose abort marker is at or past the
    # read's start and whose first offset is before its end
    asked = [(pid, first) for pid, first in aborted
             if first <= last and markers.get(pid, -1) >= tail[0].base_offset]
    if any(visible.get(v) is None for v in _values(buf)):
        return                                     # an open transaction: past the LSO
    assert _values(visible_batches(buf, asked)) == [v for v in _values(buf) if visible.get(v)]


def test_buffers_without_transactions_are_returned_as_they_are():
    plain = bytes(build_batch([b"a", b"b"], timestamps_ms=1))
    assert visible_batches(plain) is plain and visible_batches(plain, []) is plain
    assert visible_batches(b"") == b""
