"""Which fetched batches a consumer returns: never control batches (transaction markers),
and for read_committed never the batches of aborted transactions (Kafka 3.8's consumer,
clients/.../consumer/internals/CompletedFetch.java nextFetchedRecord).

Rules:
- Batches are judged by header alone, except a control batch's type (one record key).
- read_committed (`aborted` given: the fetch answer's (producer id, first offset) list):
  going through the batches in offset order, every aborted transaction whose first offset
  is at or below the batch's last offset makes its producer "aborted"; that producer's
  ABORT marker ends it; a TRANSACTIONAL batch of an aborted producer is skipped. Batches
  of committed or still-open transactions are below the last stable offset only once
  committed, so what is left is exactly what was committed.
- Pure: bytes in, bytes out (or the kept batches' headers: a share-partition archives the
  others, share/partition.py). Buffers without transactional or control batches are
  returned as they are (no copy: the common case). It lives in replicas/ as the vocabulary
  of every room that reads a log as a consumer would.
"""

from __future__ import annotations

import heapq

from replicas.control import ABORT, CONTROL_FLAG, TRANSACTIONAL_FLAG, control_type
from replicas.records import iter_headers

__all__ = ["visible_batches", "visible_headers"]


def visible_batches(buf, aborted=None):
    """The batches of `buf` a consumer returns (read_committed when `aborted` is given)."""
    headers = list(iter_headers(buf))
    if not any(h.attributes & (CONTROL_FLAG | TRANSACTIONAL_FLAG) for h in headers):
        return buf
    view = memoryview(buf)
    return b"".join(view[h.position:h.position + h.size]
                    for h in visible_headers(buf, aborted, headers))


def visible_headers(buf, aborted=None, headers=None) -> list:
    """The headers of the batches of `buf` a consumer returns, in order."""
    headers = list(iter_headers(buf)) if headers is None else headers
    view = memoryview(buf)
    pending = [(first, pid) for pid, first in (aborted or ())]
    heapq.heapify(pending)
    aborted_pids: set[int] = set()
    kept = []
    for h in headers:
        raw = view[h.position:h.position + h.size]
        if aborted is not None and h.producer_id >= 0:
            while pending and pending[0][0] <= h.last_offset:
                aborted_pids.add(heapq.heappop(pending)[1])
            if h.attributes & CONTROL_FLAG:
                if h.producer_id in aborted_pids and control_type(raw) == ABORT:
                    aborted_pids.discard(h.producer_id)
            elif h.attributes & TRANSACTIONAL_FLAG and h.producer_id in aborted_pids:
                continue
        if h.attributes & CONTROL_FLAG:
            continue
        kept.append(h)
    return kept
