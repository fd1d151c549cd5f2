"""A segment's `.txnindex` (replicas/txn_index.py): Kafka's TransactionIndex, byte for byte."""

from __future__ import annotations

import pytest

from replicas.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex

pytestmark = pytest.mark.unit

# AbortedTxn(producer 7, first 100, last 150, LSO 120): version 0 then four int64.
GOLDEN = bytes.fromhex("0000" "0000000000000007" "0000000000000064" "0000000000000096"
                       "0000000000000078")


def index(tmp_path, base=0) -> TransactionIndex:
    return TransactionIndex(tmp_path / f"{base:020d}.txnindex", base)


def test_entries_are_kafkas_34_bytes_and_the_file_appears_with_the_first(tmp_path):
    idx = index(tmp_path)
    assert not idx.path.exists() and idx.load(1000) and len(idx) == 0
    idx.append(AbortedTxn(7, 100, 150, 120))
    assert ENTRY_SIZE == 34 and idx.path.read_bytes() == GOLDEN
    idx.append(AbortedTxn(8, 90, 160, 161))
    assert idx.path.read_bytes()[34:] == AbortedTxn(8, 90, 160, 161).to_bytes()
    again = index(tmp_path)
    assert again.load(1000) and again.entries() == idx.entries()


def test_last_offsets_must_rise(tmp_path):
    idx = index(tmp_path)
    idx.append(AbortedTxn(7, 100, 150, 120))
    for bad in (AbortedTxn(8, 140, 150, 151), AbortedTxn(8, 10, 149, 151)):
        with pytest.raises(ValueError):
            idx.append(bad)
    assert len(idx) == 1


def test_collect_aborted_is_kafkas_search(tmp_path):
    idx = index(tmp_path)
    for txn in [AbortedTxn(1, 0, 10, 11), AbortedTxn(2, 5, 20, 12), AbortedTxn(3, 12, 30, 31),
                AbortedTxn(4, 25, 40, 41)]:
        idx.append(txn)
    found, complete = idx.collect_aborted(11, 26)
    # overlapping [11, 26): last >= 11 and first < 26; the search stops at the first entry
    # whose LSO is at or past 26 (producer 3's: 31), so producer 4's is never looked at
    assert [t.producer_id for t in found] == [2, 3] and complete
    found, complete = idx.collect_aborted(0, 100)
    assert [t.producer_id for t in found] == [1, 2, 3, 4] and not complete
    assert idx.collect_aborted(41, 50) == ([], False)


def test_truncate_reset_replace_rename_delete(tmp_path):
    idx = index(tmp_path)
    for txn in [AbortedTxn(1, 0, 10, 11), AbortedTxn(2, 5, 20, 21), AbortedTxn(3, 12, 30, 31)]:
        idx.append(txn)
    idx.truncate_to(20)                       # the marker at 20 is gone: its entry too
    assert [t.producer_id for t in idx.entries()] == [1]
    assert idx.path.read_bytes() == AbortedTxn(1, 0, 10, 11).to_bytes()
    idx.append(AbortedTxn(5, 15, 25, 26))     # appends continue after the kept entries
    assert index(tmp_path).load(100) and len(idx) == 2
    idx.reset()
    assert idx.path.read_bytes() == b"" and len(idx) == 0
    idx.replace([AbortedTxn(6, 1, 2, 3)])
    moved = tmp_path / "elsewhere.txnindex"
    idx.rename_to(moved)
    assert moved.read_bytes() == AbortedTxn(6, 1, 2, 3).to_bytes() and idx.path == moved
    idx.delete()
    assert not moved.exists() and len(idx) == 0


@pytest.mark.parametrize("content", [
    GOLDEN[:-1],                                          # torn: not a whole entry
    b"\x00\x01" + GOLDEN[2:],                             # an unknown version
    AbortedTxn(7, 1, 5, 6).to_bytes(),                    # last offset below the base (10)
    AbortedTxn(7, 1, 500, 501).to_bytes(),                # at or past the segment's end
    AbortedTxn(7, 30, 20, 31).to_bytes(),                 # first after last
    AbortedTxn(7, 10, 30, 31).to_bytes() + AbortedTxn(8, 10, 30, 31).to_bytes(),   # no rise
])
def test_the_sanity_check_refuses_what_kafka_would_not_trust(tmp_path, content):
    idx = index(tmp_path, base=10)
    idx.path.write_bytes(content)
    assert not idx.load(100) and len(idx) == 0
