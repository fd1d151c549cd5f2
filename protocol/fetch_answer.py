"""A Fetch v12-18 answer kept as the outcomes it is made of: written straight to Kafka's
bytes, made into kio's entity only when something asks for one.

Rules:
- Same answer, same bytes: `write(buffer, answer)` writes exactly what kio's writer (and
  protocol/hot_writers.py's) writes for `answer.entity()`, the entity protocol.build would
  make from the same outcomes (tests/test_data_handlers_direct.py checks both over
  generated outcomes of every version: the entity against build's, the bytes against
  kio's writer over that entity).
- Why: a broker answers a Fetch per record for each follower at low rates, and making
  the answer's kio entities (a PartitionData with three nested entities per partition,
  a topic, the response) and walking them again to write them was ~10 % of the brokers'
  CPU in a cProfile of tests/broker_world.py's brokers at 100 records/s.
- A partition is (index, error code, outcome) with the outcome's records, marks, diverging
  epoch, current leader, aborted transactions and preferred read replica
  (protocol.api.FetchOutcome); aborted transactions are written only for read_committed
  (`committed`: null otherwise, as Kafka's answer). The snapshot id is never set (no
  KRaft metadata log here); a diverging epoch or a current leader is a tagged field,
  written when it differs from (-1, -1).
- Topics are named below v13 and by id from v13 (a topic id in Kafka's text form, None
  for an unknown one: the zero UUID); node endpoints (v16+) are the top-level tagged
  field 0, written when there are any.
- The answer behaves as its entity for anything else asked of it (attributes are read
  from `entity()`), so code made for kio's answers needs no case for it; the quota
  code asks `record_bytes()` and `throttled(ms)` without making the entity.
- Pure: no sockets, no clock.
"""

from __future__ import annotations

import datetime
import functools
import struct

from kio.schema.response_header.v1.header import ResponseHeader

from protocol.api import topic_uuid
from protocol.build import build, error_code, pair_entity, response_class
from protocol.hot_writers import FETCH, FETCH_VERSIONS, compact_string, top_tags, uvarint

_PARTITION_HEAD = struct.Struct(">ihqqq")          # index, error, HW, LSO, log start
_I32 = struct.Struct(">i")
_ABORTED = struct.Struct(">qqB")                   # producer id, first offset, no tags
_FETCH_TOP = struct.Struct(">ihi")                 # throttle, error, session id
_DIVERGING = struct.Struct(">BBiqB")               # tag 0, size 13, epoch, end, no tags
_LEADER = struct.Struct(">BBiiB")                  # tag 1, size 9, leader, epoch, no tags
_TOPIC_ID_VERSION = 13
_ENDPOINTS_VERSION = 16
_NULL = b"\x00"
_NO_ERROR = error_code(0)
_NO_THROTTLE = datetime.timedelta(0)


@functools.lru_cache(maxsize=4096)
def _topic_id_bytes(topic_id: str | None) -> bytes:
    return topic_uuid(topic_id).bytes


@functools.lru_cache(maxsize=16)
def _classes(v: int):
    """(PartitionData, FetchableTopicResponse, FetchResponse) of Fetch v`v`."""
    return (response_class(FETCH, v, "PartitionData"),
            response_class(FETCH, v, "FetchableTopicResponse"), response_class(FETCH, v))


class FetchAnswer:
    """A FetchResponse v12-18 (module rules): `topics` [(name, topic id text or None,
    [(partition index, error code, outcome)])] in answer order, `endpoints` kio's
    NodeEndpoint entities of v16+, in order."""

    __slots__ = ("version", "session_id", "committed", "topics", "endpoints",
                 "throttle_ms", "_entity")
    __api_key__ = FETCH
    __header_schema__ = ResponseHeader        # v12+ answers have the flexible header (v1)

    def __init__(self, version: int, session_id: int, committed: bool, topics: list,
                 endpoints=(), throttle_ms: int = 0):
        if version not in FETCH_VERSIONS:
            raise ValueError(f"FetchAnswer covers Fetch v{FETCH_VERSIONS[0]}-"
                             f"{FETCH_VERSIONS[-1]}, not v{version}")
        self.version, self.session_id, self.committed = version, session_id, committed
        self.topics, self.endpoints, self.throttle_ms = topics, endpoints, throttle_ms
        self._entity = None

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.entity(), name)

    def __eq__(self, other):
        if isinstance(other, FetchAnswer):
            other = other.entity()
        return self.entity() == other

    __hash__ = None

    def record_bytes(self) -> int:
        """The bytes of records the answer carries (a fetch quota's measure)."""
        return sum(len(o.records) for _, _, parts in self.topics for _, _, o in parts
                   if o.records)

    def throttled(self, ms: int) -> "FetchAnswer":
        """The same answer with a throttle time of at least `ms`."""
        return FetchAnswer(self.version, self.session_id, self.committed, self.topics,
                           self.endpoints, max(self.throttle_ms, ms))

    def entity(self):
        """kio's FetchResponse of this answer, as protocol.build would make it."""
        if self._entity is not None:
            return self._entity
        v, committed = self.version, self.committed
        part_class, topic_class, response = _classes(v)

        def partition(index, error, o):
            div = o.diverging_epoch or (-1, -1)
            aborted = tuple(build(FETCH, v, "AbortedTransaction", producer_id=pid,
                                  first_offset=first)
                            for pid, first in (o.aborted_transactions or ())) \
                if committed else None
            return part_class(
                partition_index=index, error_code=error_code(error),
                high_watermark=o.high_watermark, last_stable_offset=o.last_stable_offset,
                log_start_offset=o.log_start_offset,
                diverging_epoch=pair_entity(FETCH, v, "EpochEndOffset", *div),
                current_leader=pair_entity(FETCH, v, "LeaderIdAndEpoch", *o.leader),
                snapshot_id=pair_entity(FETCH, v, "SnapshotId", -1, -1),
                aborted_transactions=aborted,
                preferred_read_replica=o.preferred_read_replica, records=o.records)
        if v < _TOPIC_ID_VERSION:
            topics = tuple(topic_class(topic=name, partitions=tuple(
                partition(*p) for p in parts)) for name, _, parts in self.topics)
        else:
            topics = tuple(topic_class(topic_id=topic_uuid(topic_id), partitions=tuple(
                partition(*p) for p in parts)) for _, topic_id, parts in self.topics)
        extra = {"node_endpoints": self.endpoints} if v >= _ENDPOINTS_VERSION else {}
        throttle = datetime.timedelta(milliseconds=self.throttle_ms) if self.throttle_ms \
            else _NO_THROTTLE
        self._entity = response(throttle_time=throttle, error_code=_NO_ERROR,
                                session_id=self.session_id, responses=topics, **extra)
        return self._entity


def write(buffer, answer: FetchAnswer) -> None:
    """Kafka's bytes of `answer` (module rules) into `buffer` (its writelines)."""
    committed, by_id = answer.committed, answer.version >= _TOPIC_ID_VERSION
    head, pack_i32 = _PARTITION_HEAD.pack, _I32.pack
    parts = [_FETCH_TOP.pack(answer.throttle_ms, 0, answer.session_id),
             uvarint(len(answer.topics) + 1)]
    append = parts.append
    for name, topic_id, partitions in answer.topics:
        if by_id:
            append(_topic_id_bytes(topic_id))
        else:
            compact_string(parts, name)
        append(uvarint(len(partitions) + 1))
        for index, error, o in partitions:
            append(head(index, error_code(error), o.high_watermark, o.last_stable_offset,
                        o.log_start_offset))
            if committed:
                aborted = o.aborted_transactions or ()
                append(uvarint(len(aborted) + 1))
                for pid, first in aborted:
                    append(_ABORTED.pack(pid, first, 0))
            else:
                append(_NULL)
            append(pack_i32(o.preferred_read_replica))
            records = o.records
            if records is None:
                append(_NULL)
            else:
                append(uvarint(len(records) + 1))
                append(records)
            div, leader = o.diverging_epoch, o.leader
            has_div = div is not None and div != (-1, -1)
            has_leader = leader != (-1, -1)
            if not has_div and not has_leader:
                append(_NULL)
                continue
            append(b"\x02" if has_div and has_leader else b"\x01")
            if has_div:
                append(_DIVERGING.pack(0, 13, div[0], div[1], 0))
            if has_leader:
                append(_LEADER.pack(1, 9, leader[0], leader[1], 0))
        append(_NULL)
    top_tags(parts, answer.endpoints if answer.version >= _ENDPOINTS_VERSION else ())
    buffer.writelines(parts)


FetchAnswer.__writer__ = staticmethod(write)      # protocol/codec.py's writer for it
