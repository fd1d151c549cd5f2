"""RecordBatch v2 → column arrays, compiled with numba (the Spark read's hot loop).

Rules:
- Decodes every uncompressed, non-control batch of a fetch answer (a run of whole batches,
  possibly ending in a partial one, which is ignored) into numpy arrays: offsets,
  timestamps, timestamp types, key/value validity, Arrow-style int32 offsets and one data
  buffer each for keys and values. Only records with start <= offset < end are kept.
- Record layout (Kafka's DefaultRecord): length, attributes, timestampDelta, offsetDelta,
  keyLength, key, valueLength, value, headers — varints are zigzag; a length of -1 is
  null. Headers are skipped (the record length says where the next record starts).
- LogAppendTime batches (attribute bit 3) give every record the batch's max timestamp.
- A compressed batch makes `decode` return n = -1: the caller falls back to the codec
  (aiokafka), which handles compression (rayka's producer compresses when asked to).
- Header fields are read big-endian byte by byte: the buffer is a plain uint8 array.
- `cache=True`: the compiled code is kept in __pycache__, so only the first process on a
  machine pays the compile (`warm()` does it at install time).
"""

from __future__ import annotations

import numpy as np
from numba import njit

HEADER = 61


@njit(cache=True, inline="always")
def _be(buf, pos, nbytes):
    v = np.int64(0)
    for i in range(nbytes):
        v = (v << 8) | np.int64(buf[pos + i])
    return v


@njit(cache=True, inline="always")
def _varint(buf, pos):
    result = np.int64(0)
    shift = 0
    while True:
        b = np.int64(buf[pos])
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    return (result >> 1) ^ -(result & 1), pos


@njit(cache=True)
def _count(buf, start, end):
    """Upper bound of records to keep, and whether a batch is compressed."""
    pos, total, size = 0, 0, len(buf)
    while pos + HEADER <= size:
        bend = pos + 12 + _be(buf, pos + 8, 4)
        if bend > size:
            break
        if _be(buf, pos + 21, 2) & 0x07:
            return total, True
        base = _be(buf, pos, 8)
        if base + _be(buf, pos + 23, 4) >= start and base < end:
            total += _be(buf, pos + 57, 4)
        pos = bend
    return total, False


@njit(cache=True)
def _decode(buf, start, end, n_max, offsets, stamps, types, kvalid, vvalid, koffs, voffs,
            kdata, vdata):
    n, kpos, vpos, pos, nxt, size = 0, 0, 0, 0, start, len(buf)
    while pos + HEADER <= size:
        bend = pos + 12 + _be(buf, pos + 8, 4)
        if bend > size:
            break
        base = _be(buf, pos, 8)
        last = base + _be(buf, pos + 23, 4)
        attrs = _be(buf, pos + 21, 2)
        log_append = (attrs & 0x08) != 0
        if last >= start and base < end and (attrs & 0x20) == 0:
            base_ts = _be(buf, pos + 27, 8)
            max_ts = _be(buf, pos + 35, 8)
            p = pos + HEADER
            for _ in range(_be(buf, pos + 57, 4)):
                rlen, p = _varint(buf, p)
                rend = p + rlen
                p += 1
                ts_delta, p = _varint(buf, p)
                off_delta, p = _varint(buf, p)
                klen, p = _varint(buf, p)
                kstart = p
                if klen > 0:
                    p += klen
                vlen, p = _varint(buf, p)
                vstart = p
                off = base + off_delta
                if start <= off < end and n < n_max:
                    offsets[n] = off
                    stamps[n] = max_ts if log_append else base_ts + ts_delta
                    types[n] = 1 if log_append else 0
                    kvalid[n] = klen >= 0
                    for i in range(max(klen, 0)):
                        kdata[kpos + i] = buf[kstart + i]
                    kpos += max(klen, 0)
                    koffs[n + 1] = kpos
                    vvalid[n] = vlen >= 0
                    for i in range(max(vlen, 0)):
                        vdata[vpos + i] = buf[vstart + i]
                    vpos += max(vlen, 0)
                    voffs[n + 1] = vpos
                    n += 1
                p = rend
        if last + 1 > nxt:
            nxt = last + 1
        pos = bend
    return n, kpos, vpos, nxt


def decode(data, start: int, end: int):
    """→ (n, next offset, arrays dict) or (-1, start, None) when a batch is compressed."""
    buf = np.frombuffer(data, np.uint8)
    n_max, compressed = _count(buf, start, end)
    if compressed:
        return -1, start, None
    a = {"offset": np.empty(n_max, np.int64), "timestamp": np.empty(n_max, np.int64),
         "type": np.empty(n_max, np.int8), "kvalid": np.empty(n_max, np.bool_),
         "vvalid": np.empty(n_max, np.bool_), "koffs": np.zeros(n_max + 1, np.int32),
         "voffs": np.zeros(n_max + 1, np.int32), "kdata": np.empty(len(buf), np.uint8),
         "vdata": np.empty(len(buf), np.uint8)}
    n, kpos, vpos, nxt = _decode(buf, start, end, n_max, a["offset"], a["timestamp"], a["type"],
                                 a["kvalid"], a["vvalid"], a["koffs"], a["voffs"], a["kdata"],
                                 a["vdata"])
    for k in ("offset", "timestamp", "type", "kvalid", "vvalid"):
        a[k] = a[k][:n]
    a["koffs"], a["voffs"] = a["koffs"][:n + 1], a["voffs"][:n + 1]
    a["kdata"], a["vdata"] = a["kdata"][:kpos], a["vdata"][:vpos]
    return n, int(nxt), a


def warm() -> None:
    """Compile (or load from the cache) once, e.g. at install time."""
    from replicas.records import build_batch
    decode(bytes(build_batch([b"v", None], keys=[None, b"k"], timestamps_ms=0)), 0, 2)
