"""The compiled RecordBatch decoder (rayka.client.fastdecode via rayka.client.columns) against the
codec (aiokafka's batch reader): same rows for any batches and any [start, end), null keys
and values, headers, LogAppendTime, a torn trailing batch; compressed batches fall back to
the codec. Pure: no Ray, no ZooKeeper, no Spark."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rayka.client.columns import ARROW_SCHEMA, Columns, _decode_with_codec
from replicas.records import build_batch, set_base_offset

pytestmark = pytest.mark.unit

record = st.tuples(st.one_of(st.none(), st.binary(max_size=40)),
                   st.one_of(st.none(), st.binary(max_size=300)),
                   st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))),
                            max_size=2))


def log_of(batches, log_append=()):
    buf, offset = bytearray(), 5
    for i, recs in enumerate(batches):
        b = build_batch([r[1] for r in recs], keys=[r[0] for r in recs],
                        timestamps_ms=[1_700_000_000_000 + j * 7 for j in range(len(recs))],
                        headers=[r[2] for r in recs])
        set_base_offset(b, 0, offset)
        if i in log_append:
            b[22] |= 0x08           # attributes: LogAppendTime (CRC is not checked here)
        offset += len(recs)
        buf += b
    return bytes(buf), offset


def rows(batches):
    out = []
    for b in batches:
        out += b.to_pylist()
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(record, min_size=1, max_size=20), min_size=1, max_size=6),
       st.integers(0, 130), st.integers(0, 130), st.sets(st.integers(0, 5)))
def test_fast_decoder_equals_the_codec(batches, a, b, log_append):
    data, end_offset = log_of(batches, log_append)
    start, end = min(a, b), max(a, b)
    cols = Columns("t", 3)
    nxt = cols.add(data, start, end)
    ref, ref_next = _decode_with_codec(data, start, end, "t", 3)
    got = cols.take()
    assert all(g.schema == ARROW_SCHEMA for g in got)
    assert rows(got) == rows([ref])
    assert nxt == ref_next
    assert all(start <= r["offset"] < end for r in rows(got))


def test_log_append_time_uses_the_batch_max_timestamp_and_a_torn_tail_is_ignored():
    data, _ = log_of([[(b"k", b"v", [])] * 3, [(None, b"w", [])] * 2], log_append={0})
    cols = Columns("t", 0)
    nxt = cols.add(data + data[:30], 0, 100)     # a partial batch header at the end
    got = rows(cols.take())
    assert [r["offset"] for r in got] == [5, 6, 7, 8, 9] and nxt == 10
    assert [r["timestampType"] for r in got] == [1, 1, 1, 0, 0]
    assert len({r["timestamp"] for r in got[:3]}) == 1            # the batch max timestamp
    assert got[3]["key"] is None and got[3]["value"] == b"w"


@pytest.mark.parametrize("codec", [1, 2, 3, 4])            # gzip, snappy, lz4, zstd
def test_a_compressed_batch_goes_through_the_codec(codec):
    b = build_batch([b"x" * 50] * 10, timestamps_ms=1_700_000_000_000, compression_type=codec)
    cols = Columns("t", 0)
    assert cols.add(bytes(b), 2, 8) == 10
    assert [r["offset"] for r in rows(cols.take())] == list(range(2, 8))
