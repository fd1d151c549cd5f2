"""Hand-written writers for the messages on every record's path: the answers FetchResponse
v12-18 and ProduceResponse v9-12 (the flexible versions librdkafka, Kafka's Java client and
rayka's own followers use; Produce v13 names topics by id and stays kio's), and the request
a follower sends its leader, FetchRequest v12 with its request header v2
(actors/fetcher.py); byte for byte what kio's generic writer produces for the same entity.

Rules:
- Same input, same bytes: a writer here takes the kio entity `protocol.build` made and
  writes exactly kio's `entity_writer(cls)` output (tests/test_hot_writers.py compares both
  over generated entities of every version covered); kio stays the reference and the
  writer for everything else, and for these classes below their flexible versions.
- Why: at 1,000 records/s with linger.ms 0 a broker answers ~1 Produce and ~1.5 Fetch
  requests per record, and a profile of the GIL-holding samples (py-spy --gil) put ~10 % of
  the broker's CPU in kio's writer for these two answers (a BytesIO per entity for its
  tagged fields, a phantom-type check per varint, a dataclass comparison per tagged field).
  These writers gather the parts in one list and hand it to the buffer's writelines (no
  join: the records are copied once, into the response buffer, as kio does). A follower
  sends ~2 Fetch requests per record it copies; kio's writer took ~7 % of a 3-broker
  cluster's CPU at one record at a time (cProfile of tests/broker_world.py brokers), and
  `fetch_plan_bytes` writes that request from the follower's session plan without making
  the entity at all (the same bytes as the entity's writer; tests/test_fetcher_request.py).
- Kafka's encoding (KIP-482 flexible versions): arrays and strings are compact (unsigned
  varint length + 1, 0 = null), each entity ends with its tagged fields (a count, then
  tag, size, value per field), a tagged field is written only when it differs from its
  default, in tag order.
- `writer_for(cls)` gives a class's writer(buffer, entity), or None for a class not covered
  (protocol/codec.py asks once per class, the first time it answers with it).
- Pure: no sockets, no clock.
"""

from __future__ import annotations

import struct
import sys
from dataclasses import fields

_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_PARTITION_HEAD = struct.Struct(">ihqqq")          # index, error, HW, LSO, log start
_PRODUCE_PARTITION = struct.Struct(">ihq")         # index, error, base offset
_EPOCH_END = struct.Struct(">iqB")                 # epoch, end offset, no tags
_LEADER = struct.Struct(">iiB")                    # leader id, epoch, no tags
_SNAPSHOT = struct.Struct(">qiB")                  # end offset, epoch, no tags
_ABORTED = struct.Struct(">qqB")                   # producer id, first offset, no tags
_FETCH_TOP = struct.Struct(">ihi")                 # throttle, error, session id
_FETCH_ASK = struct.Struct(">iiiibii")             # replica, max wait, min/max bytes,
#                                                    isolation, session id and epoch
_FETCH_ASK_PARTITION = struct.Struct(">iiqiqiB")   # partition, leader epoch, offset, last
#                                                    fetched epoch, log start, max bytes, no tags
_HEADER = struct.Struct(">hhi")                    # api key, version, correlation id
_ZERO_UUID = bytes(16)
_NO_TAGS = b"\x00"
_SMALL = [bytes((i,)) for i in range(128)]
PRODUCE, FETCH = 0, 1                              # api keys
FETCH_VERSIONS = range(12, 19)
FETCH_REQUEST_VERSIONS = (12,)       # what rayka's followers send
PRODUCE_VERSIONS = range(9, 13)      # v13 names topics by id: kio writes it


def uvarint(n: int) -> bytes:
    if n < 128:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def compact_string(parts: list, value) -> None:
    """A compact nullable string (or bytes, records)."""
    if value is None:
        parts.append(b"\x00")
        return
    if isinstance(value, str):
        value = value.encode()
    parts.append(uvarint(len(value) + 1))
    parts.append(value)


def _millis(delta) -> int:
    return round(delta.total_seconds() * 1000)


def _node_endpoints(parts: list, endpoints) -> None:
    parts.append(uvarint(len(endpoints) + 1))
    for n in endpoints:
        parts.append(_I32.pack(n.node_id))
        compact_string(parts, n.host)
        parts.append(_I32.pack(n.port))
        compact_string(parts, n.rack)
        parts.append(_NO_TAGS)


def top_tags(parts: list, endpoints) -> None:
    """The top-level tagged fields: node_endpoints (tag 0) when there are any."""
    if not endpoints:
        parts.append(_NO_TAGS)
        return
    inner: list = []
    _node_endpoints(inner, endpoints)
    value = b"".join(inner)
    parts.append(b"\x01\x00")
    parts.append(uvarint(len(value)))
    parts.append(value)


# -- Fetch ---------------------------------------------------------------------------------------
def _fetch_partition(parts: list, p) -> None:
    parts.append(_PARTITION_HEAD.pack(p.partition_index, p.error_code.value, p.high_watermark,
                                      p.last_stable_offset, p.log_start_offset))
    aborted = p.aborted_transactions
    if aborted is None:
        parts.append(b"\x00")
    else:
        parts.append(uvarint(len(aborted) + 1))
        for a in aborted:
            parts.append(_ABORTED.pack(a.producer_id, a.first_offset, 0))
    parts.append(_I32.pack(p.preferred_read_replica))
    compact_string(parts, p.records)
    tags = []
    d = p.diverging_epoch
    if d.epoch != -1 or d.end_offset != -1:
        tags.append(b"\x00\x0d" + _EPOCH_END.pack(d.epoch, d.end_offset, 0))
    c = p.current_leader
    if c.leader_id != -1 or c.leader_epoch != -1:
        tags.append(b"\x01\x09" + _LEADER.pack(c.leader_id, c.leader_epoch, 0))
    s = p.snapshot_id
    if s.end_offset != -1 or s.epoch != -1:
        tags.append(b"\x02\x0d" + _SNAPSHOT.pack(s.end_offset, s.epoch, 0))
    parts.append(_SMALL[len(tags)])
    parts.extend(tags)


def _fetch_writer(by_id: bool, has_endpoints: bool):
    def write(buffer, r) -> None:
        parts = [_FETCH_TOP.pack(_millis(r.throttle_time), r.error_code.value, r.session_id),
                 uvarint(len(r.responses) + 1)]
        for t in r.responses:
            if by_id:
                parts.append(_ZERO_UUID if t.topic_id is None else t.topic_id.bytes)
            else:
                compact_string(parts, t.topic)
            parts.append(uvarint(len(t.partitions) + 1))
            for p in t.partitions:
                _fetch_partition(parts, p)
            parts.append(_NO_TAGS)
        top_tags(parts, r.node_endpoints if has_endpoints else ())
        buffer.writelines(parts)
    return write


# -- Produce -------------------------------------------------------------------------------------
def _produce_writer(has_leader: bool, has_endpoints: bool):
    def write(buffer, r) -> None:
        parts = [uvarint(len(r.responses) + 1)]
        for t in r.responses:
            compact_string(parts, t.name)
            parts.append(uvarint(len(t.partition_responses) + 1))
            for p in t.partition_responses:
                parts.append(_PRODUCE_PARTITION.pack(p.index, p.error_code.value,
                                                     p.base_offset))
                at = p.log_append_time
                parts.append(_I64.pack(-1 if at is None else round(at.timestamp() * 1000)))
                parts.append(_I64.pack(p.log_start_offset))
                parts.append(uvarint(len(p.record_errors) + 1))
                for e in p.record_errors:
                    parts.append(_I32.pack(e.batch_index))
                    compact_string(parts, e.batch_index_error_message)
                    parts.append(_NO_TAGS)
                compact_string(parts, p.error_message)
                c = p.current_leader if has_leader else None
                if c is not None and (c.leader_id != -1 or c.leader_epoch != -1):
                    parts.append(b"\x01\x00\x09" + _LEADER.pack(c.leader_id, c.leader_epoch, 0))
                else:
                    parts.append(_NO_TAGS)
            parts.append(_NO_TAGS)
        parts.append(_I32.pack(_millis(r.throttle_time)))
        top_tags(parts, r.node_endpoints if has_endpoints else ())
        buffer.writelines(parts)
    return write


# -- the follower's Fetch request -------------------------------------------------------------
def _write_fetch_request(buffer, r) -> None:
    parts = [_FETCH_ASK.pack(r.replica_id, _millis(r.max_wait), r.min_bytes, r.max_bytes,
                             r.isolation_level, r.session_id, r.session_epoch),
             uvarint(len(r.topics) + 1)]
    for t in r.topics:
        compact_string(parts, t.topic)
        parts.append(uvarint(len(t.partitions) + 1))
        for p in t.partitions:
            parts.append(_FETCH_ASK_PARTITION.pack(
                p.partition, p.current_leader_epoch, p.fetch_offset, p.last_fetched_epoch,
                p.log_start_offset, p.partition_max_bytes, 0))
        parts.append(_NO_TAGS)
    parts.append(uvarint(len(r.forgotten_topics_data) + 1))
    for t in r.forgotten_topics_data:
        compact_string(parts, t.topic)
        parts.append(uvarint(len(t.partitions) + 1))
        parts.extend(_I32.pack(p) for p in t.partitions)
        parts.append(_NO_TAGS)
    compact_string(parts, r.rack_id)
    if r.cluster_id is None:
        parts.append(_NO_TAGS)
    else:                          # tagged field 0
        inner: list = []
        compact_string(inner, r.cluster_id)
        value = b"".join(inner)
        parts.append(b"\x01\x00")
        parts.append(uvarint(len(value)))
        parts.append(value)
    buffer.writelines(parts)


def fetch_plan_bytes(plan, replica_id: int, max_wait_ms: int, min_bytes: int,
                     max_bytes: int) -> bytes:
    """The body of a follower's FetchRequest v12 straight from its session plan
    (protocol/fetch_session.py FetchPlan: session id and epoch, {tp: FetchData} to ask,
    tps to forget), no entity made: the bytes `_write_fetch_request` writes for the entity
    of the same plan (isolation level 0, no rack, no cluster id; topics in the plan's
    order). A follower sends one per round; the entity's making took as long as its
    writing."""
    by_topic: dict[str, list] = {}
    pack = _FETCH_ASK_PARTITION.pack
    for (topic, partition), d in plan.partitions.items():
        packed = pack(partition, d.current_leader_epoch, d.fetch_offset, d.last_fetched_epoch,
                      d.log_start_offset, d.max_bytes, 0)
        asked = by_topic.get(topic)
        if asked is None:
            by_topic[topic] = [packed]
        else:
            asked.append(packed)
    parts = [_FETCH_ASK.pack(replica_id, max_wait_ms, min_bytes, max_bytes, 0,
                             plan.session_id, plan.epoch), uvarint(len(by_topic) + 1)]
    for topic, packed in by_topic.items():
        compact_string(parts, topic)
        parts.append(uvarint(len(packed) + 1))
        parts.extend(packed)
        parts.append(_NO_TAGS)
    forgotten: dict[str, list] = {}
    for topic, partition in plan.forgotten:
        forgotten.setdefault(topic, []).append(partition)
    parts.append(uvarint(len(forgotten) + 1))
    for topic, partitions in forgotten.items():
        compact_string(parts, topic)
        parts.append(uvarint(len(partitions) + 1))
        parts.extend(_I32.pack(p) for p in partitions)
        parts.append(_NO_TAGS)
    parts.append(b"\x01")               # rack id "" (compact)
    parts.append(_NO_TAGS)              # no cluster id
    return b"".join(parts)


def write_request_header(buffer, api_key: int, version: int, correlation_id: int,
                         client_id: str | None, flexible: bool) -> None:
    """Request header v1 (v2 when `flexible`: an empty tagged-field section after it); the
    client id is a classic nullable string in both (Kafka's header schema)."""
    buffer.write(_HEADER.pack(api_key, version, correlation_id))
    if client_id is None:
        buffer.write(b"\xff\xff")
    else:
        raw = client_id.encode()
        buffer.write(_I16.pack(len(raw)))
        buffer.write(raw)
    if flexible:
        buffer.write(_NO_TAGS)


def _names(cls) -> set[str]:
    return {f.name for f in fields(cls)}


def writer_for(cls):
    """The hand-written writer of a kio request or response class, or None when this module
    does not cover it. Decided from the class and its own (already imported) schema module:
    nothing is imported here, so a process pays only for the versions it uses."""
    module = sys.modules[cls.__module__]
    version = cls.__version__
    if cls.__name__ == "FetchResponse" and cls.__api_key__ == FETCH and \
            version in FETCH_VERSIONS:
        return _fetch_writer("topic_id" in _names(module.FetchableTopicResponse),
                             "node_endpoints" in _names(cls))
    if cls.__name__ == "FetchRequest" and cls.__api_key__ == FETCH and \
            version in FETCH_REQUEST_VERSIONS:
        return _write_fetch_request
    if cls.__name__ == "ProduceResponse" and cls.__api_key__ == PRODUCE and \
            version in PRODUCE_VERSIONS:
        return _produce_writer("current_leader" in _names(module.PartitionProduceResponse),
                               "node_endpoints" in _names(cls))
    return None
