"""The data APIs: Produce (0), Fetch (1), ListOffsets (2), OffsetForLeaderEpoch (23),
DeleteRecords (21).

Rules (Kafka's KafkaApis, ZooKeeper mode):
- Produce: transactional batches without a transactional_id answer the whole request
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED (KafkaApis: only a named transactional id can be
  authorised to write them); null records are INVALID_RECORD. Where the principal may write
  (a denied topic is TOPIC_AUTHORIZATION_FAILED whatever its records: Kafka authorises
  first), from v3 message formats v0/v1 are INVALID_RECORD (ProduceRequest.validateRecords;
  other bytes are the broker's to refuse) and a zstd batch below v7 is
  UNSUPPORTED_COMPRESSION_TYPE (76); v0-2 carry message formats v0/v1, up-converted to one
  v2 batch before the broker sees them (replicas/legacy_records.py: a corrupt message set
  is CORRUPT_MESSAGE, an invalid one INVALID_RECORD, one with no whole message appends
  nothing and answers no error with base offset -1; a v2 batch passes as it is, as Kafka
  lets it). Everything else is the broker's answer per partition (acks, sizes, CRC,
  idempotent sequences, transactions: a transactional producer's first batch on a
  partition is verified with its coordinator, KIP-890). From v10 a NOT_LEADER_OR_FOLLOWER
  partition carries its current leader and epoch, and the answer those leaders' endpoints
  on the listener asked on (KIP-951). v11 is answered as v10: a failed KIP-890
  verification still reaches it as INVALID_TXN_STATE where Kafka 3.8 would say
  TRANSACTION_ABORTABLE (the broker's translation does not see the request's version).
  v12 (transaction.version 2, KIP-890 part 2): a transactional producer's partitions are
  ADDED to its transaction by the leader (it sends no AddPartitionsToTxn).
  From v8 a batch refused for its records (replicas/record_validation.py) answers each bad
  record's index and message in record_errors, and the batch's message (KIP-467).
  acks=0 gets no answer at all (Kafka sends none), and a failed acks=0 produce closes the
  connection (Kafka's way of telling the client). A Deferred from the broker (appended,
  acknowledgements pending) becomes a Deferred response.
- Fetch: consumers and followers alike; a fetch that has to wait is a Deferred (parked by
  the broker until data arrives or max_wait passes). Fetch v0-3 get their records
  down-converted to magic 0 (v0-1) or magic 1 (v2-3) from the fetch offset on
  (replicas/legacy_records.py; UNSUPPORTED_COMPRESSION_TYPE when a zstd batch comes first);
  up to v5 KAFKA_STORAGE_ERROR is answered NOT_LEADER_OR_FOLLOWER (older clients would not
  retry it). Fetch sessions (KIP-227, v7+) follow
  protocol/fetch_session.py when the broker has a cache (`api.fetch_sessions`): a full
  answer lists every partition asked, an incremental one only those with something new.
  Without a cache (or below v7) sessions are declined: session_id 0 in every answer, and
  an incremental fetch (session_id != 0) is FETCH_SESSION_ID_NOT_FOUND.
  Fetch v13+ names topics by id (FetchRequest.fetchData with the metadata cache's
  topicIdsToNames): an id this broker does not know is answered UNKNOWN_TOPIC_ID for each
  of its partitions (not kept in a session); a partition whose topic now has another id
  than the one the fetcher named (the topic was re-created) is INCONSISTENT_TOPIC_ID
  (ReplicaManager.readFromLog); answers carry the topic id. A session keeps the kind of
  naming it was made with (protocol/fetch_session.py: FETCH_SESSION_TOPIC_ID_ERROR).
  v15+ name the fetching replica in replica_state (KIP-903); v16 answers the endpoints of
  the current leaders of partitions answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH
  (KIP-951, as Produce v10 does).
  isolation_level 1 (read_committed) reads below the last stable offset and carries the
  aborted transactions of the data returned (producer id, first offset); null for
  read_uncommitted. From v11 the fetch carries client metadata (rack_id, the listener it
  came in on; KafkaApis does so for every v11+ fetch): a consumer's may be served by a
  follower, and a leader with a replica selector may answer a partition with a
  preferred_read_replica, no records and no error (KIP-392); below v11 consumers read the
  leader only.
- ListOffsets: -2 earliest, -1 latest (the HW; the LSO for read_committed), -3 the max
  timestamp, -4 the earliest local offset (KIP-405; without tiered storage the log start),
  else the first offset whose timestamp is at or after the one asked. v0 is Kafka's older
  question (UnifiedLog.legacyFetchOffsetsBefore): up to max_num_offsets segment start
  offsets before a time, newest first (`BrokerApi.legacy_offsets`).
"""

from __future__ import annotations

import datetime
import functools

from protocol.api import (BrokerApi, ClientMetadata, Deferred, FetchOutcome,
                          topic_id_text, topic_uuid)
from protocol.build import build, error_code, millis, pair_entity, response_class
from protocol.errors import ProtocolError
from protocol.fetch_answer import FetchAnswer
from protocol.fetch_session import FetchContext, FetchData
from protocol.hot_writers import FETCH_VERSIONS, PRODUCE, PRODUCE_VERSIONS
from replicas.errors import ErrorCode as E
from replicas.errors import KafkaError, TransactionalIdAuthorizationFailed
from replicas.legacy_records import down_convert, magic_of, up_convert
from replicas.records import MAGIC, iter_headers

READ_COMMITTED = 1
ENDPOINTS_PRODUCE_VERSION = 10           # current_leader and node_endpoints (KIP-951)
_NO_THROTTLE = datetime.timedelta(0)
_NO_ERROR = error_code(0)
NEW_LEADER_ERRORS = (E.NOT_LEADER_OR_FOLLOWER, E.FENCED_LEADER_EPOCH)   # KIP-951: v16 endpoints
LEGACY_MAGICS = (0, 1)
EARLIEST_LOCAL, EARLIEST = -4, -2


def _has_transactional(buf) -> bool:
    return magic_of(buf) == MAGIC and any(h.attributes & 0x10 for h in iter_headers(buf))


def _has_zstd(buf) -> bool:
    """Any whole batch header of `buf` naming zstd (attributes bits 0-2 = 4); what is not a
    batch is left to the broker's validation."""
    return any(h.attributes & 0x07 == 4 for h in iter_headers(buf))


# -- Produce ------------------------------------------------------------------------------------
def produce(api: BrokerApi, request, listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    asks, errors = [], {}
    if body.transactional_id is None and any(
            p.records is not None and _has_transactional(p.records)
            for t in body.topic_data for p in t.partition_data):
        raise TransactionalIdAuthorizationFailed(
            "transactional records need a transactional id")
    may_write = getattr(api, "may_write", None)      # an AuthorizedApi's: denied topics get 29
    for topic in body.topic_data:
        for p in topic.partition_data:
            tp = (topic.name, p.index)
            magic = None if p.records is None else magic_of(p.records)
            if may_write is not None and not may_write(topic.name):
                asks.append((tp, bytes(p.records or b"")))   # refused before it is read
            elif p.records is None:
                errors[tp] = (E.INVALID_RECORD, "null records")
            elif v >= 3 and magic in LEGACY_MAGICS:
                errors[tp] = (E.INVALID_RECORD, f"Produce requests with version {v} are only "
                                                f"allowed to contain record batches with "
                                                f"magic version 2")
            elif v < 3 and magic != MAGIC:
                try:
                    converted = up_convert(p.records)
                except KafkaError as exc:
                    errors[tp] = (exc.code, exc.message)
                    continue
                if converted is None:           # no whole message: nothing to append
                    errors[tp] = (E.NONE, None)
                else:
                    asks.append((tp, bytes(converted)))
            elif v < 7 and _has_zstd(p.records):
                errors[tp] = (E.UNSUPPORTED_COMPRESSION_TYPE, "zstd needs Produce v7 or later")
            else:
                asks.append((tp, bytes(p.records)))
    outcomes = api.produce(body.acks, millis(body.timeout), asks,
                           transactional_id=body.transactional_id,
                           **({"add_partitions": True} if v >= 12 and body.transactional_id
                              else {})) if asks else {}
    if body.acks == 0:
        got = outcomes.result() if isinstance(outcomes, Deferred) else outcomes
        failed = sorted(tp for tp, e in errors.items() if e[0]) + \
            sorted(tp for tp, o in got.items() if o.error)
        if failed:     # Kafka answers nothing to acks=0: closing is how the client learns
            raise ProtocolError(f"acks=0 produce failed for {failed[:3]}", api_key=key,
                                api_version=v, correlation_id=request.correlation_id)
        return None
    if isinstance(outcomes, Deferred):
        return outcomes.then(lambda got: _produce_response(api, request, errors, got,
                                                           listener))
    return _produce_response(api, request, errors, outcomes, listener)


def _produce_response(api, request, errors, outcomes, listener):
    body, key, v = request.body, request.api_key, request.api_version
    answers = {tp: (code, -1, -1, message, ()) for tp, (code, message) in errors.items()}
    answers.update((tp, (o.error, o.base_offset, o.log_start_offset,
                         o.message if o.error else None, o.record_errors))
                   for tp, o in outcomes.items())
    moved = {tp for tp, a in answers.items() if a[0] == E.NOT_LEADER_OR_FOLLOWER}
    leaders, nodes = _current_leaders(api, moved, listener) if v >= 10 and moved else ({}, {})

    direct = _direct_produce_classes(v)

    def partition(tp):
        code, base, start, message, record_errors = answers[tp]
        leader = leaders.get(tp) if code == E.NOT_LEADER_OR_FOLLOWER else None
        if direct is not None:
            extra = {} if v < ENDPOINTS_PRODUCE_VERSION else {
                "current_leader": pair_entity(key, v, "LeaderIdAndEpoch", *(leader or (-1, -1)))}
            return direct[0](
                index=tp[1], error_code=error_code(code), base_offset=base,
                log_append_time=None, log_start_offset=start,
                record_errors=tuple(direct[3](batch_index=i, batch_index_error_message=m)
                                    for i, m in record_errors),
                error_message=message, **extra)
        return build(key, v, "PartitionProduceResponse", index=tp[1], error_code=code,
                     base_offset=base, log_append_time=None, log_start_offset=start,
                     record_errors=tuple(build(key, v, "BatchIndexAndErrorMessage",
                                               batch_index=i, batch_index_error_message=m)
                                         for i, m in record_errors) if v >= 8 else (),
                     error_message=message,
                     **({} if leader is None else {"current_leader": build(
                         key, v, "LeaderIdAndEpoch", leader_id=leader[0],
                         leader_epoch=leader[1])}))

    endpoints = _node_endpoints(key, v, nodes)
    if direct is not None:
        topics = tuple(direct[1](name=t.name, partition_responses=tuple(
            partition((t.name, p.index)) for p in t.partition_data)) for t in body.topic_data)
        extra = {"node_endpoints": endpoints} if v >= ENDPOINTS_PRODUCE_VERSION else {}
        return direct[2](responses=topics, throttle_time=_NO_THROTTLE, **extra)
    topics = tuple(build(key, v, "TopicProduceResponse", name=t.name,
                         partition_responses=tuple(partition((t.name, p.index))
                                                   for p in t.partition_data))
                   for t in body.topic_data)
    return build(key, v, "ProduceResponse", responses=topics, node_endpoints=endpoints)


@functools.lru_cache(maxsize=16)
def _direct_produce_classes(v: int):
    """(PartitionProduceResponse, TopicProduceResponse, ProduceResponse,
    BatchIndexAndErrorMessage) of Produce v9-12 (hot_writers' PRODUCE_VERSIONS), called
    directly with every field (protocol.build's per-field work was about half of making an
    answer), or None for the other versions."""
    if v not in PRODUCE_VERSIONS:
        return None
    return tuple(response_class(PRODUCE, v, name) for name in (
        "PartitionProduceResponse", "TopicProduceResponse", None, "BatchIndexAndErrorMessage"))


def _current_leaders(api: BrokerApi, tps, listener: str):
    """KafkaApis.getCurrentLeader for `tps`: ({tp: (leader, epoch)}, {leader id: its
    endpoint}) from this broker's metadata."""
    md = api.metadata(sorted({t for t, _ in tps}), False, listener)
    live = {b.id: b for b in md.brokers}
    leaders = {(t.name, p.partition): (p.leader, p.leader_epoch)
               for t in md.topics for p in t.partitions if (t.name, p.partition) in tps}
    return leaders, {lid: live[lid] for lid, _ in leaders.values() if lid in live}


# -- Fetch --------------------------------------------------------------------------------------
def _fetch_topics(api: BrokerApi, body, v: int):
    """({tp: FetchData} asked, [tp] forgotten, {(topic id, partition): outcome} of unknown
    ids, {topic: id} known) — names as asked below v13, ids resolved from v13."""
    if v < 13:
        requested = {(t.topic, p.partition): FetchData(
            p.fetch_offset, getattr(p, "current_leader_epoch", -1),
            getattr(p, "last_fetched_epoch", -1), getattr(p, "log_start_offset", -1),
            p.partition_max_bytes) for t in body.topics for p in t.partitions}
        forgotten = [(t.topic, p) for t in getattr(body, "forgotten_topics_data", ())
                     for p in t.partitions]
        return requested, forgotten, {}, {}
    ids = api.topic_ids()
    names = {i: t for t, i in ids.items()}
    requested, unknown = {}, {}
    for t in body.topics:
        topic_id = topic_id_text(t.topic_id)
        name = names.get(topic_id)
        for p in t.partitions:
            if name is None:
                unknown[(topic_id, p.partition)] = FetchOutcome(E.UNKNOWN_TOPIC_ID)
            else:
                requested[(name, p.partition)] = FetchData(
                    p.fetch_offset, p.current_leader_epoch, p.last_fetched_epoch,
                    p.log_start_offset, p.partition_max_bytes, topic_id)
    forgotten = [(names[i], p) for t in body.forgotten_topics_data
                 if (i := topic_id_text(t.topic_id)) in names for p in t.partitions]
    return requested, forgotten, unknown, ids


def _replica_id(body) -> int:
    """The fetching replica: v15+ carry it in replica_state (KIP-903)."""
    state = getattr(body, "replica_state", None)
    return state.replica_id if state is not None else body.replica_id


def fetch(api: BrokerApi, request, listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    replica_id = _replica_id(body)
    requested, forgotten, unknown, ids = _fetch_topics(api, body, v)
    session_id, epoch = getattr(body, "session_id", 0), getattr(body, "session_epoch", -1)
    cache = getattr(api, "fetch_sessions", None)
    if cache is None or v < 7:
        if session_id:          # a session we could not have given
            return build(key, v, "FetchResponse", error_code=E.FETCH_SESSION_ID_NOT_FOUND,
                         session_id=0, responses=())
        context = FetchContext(None, None, requested, False)
    else:
        context = cache.new_context(session_id, epoch, requested, forgotten,
                                    privileged=replica_id >= 0, uses_topic_ids=v >= 13)
        if isinstance(context, int):
            return build(key, v, "FetchResponse", error_code=context, session_id=0,
                         responses=())
    # a topic re-created since the fetcher learnt its id (v13+): not read
    inconsistent = {tp: FetchOutcome(E.INCONSISTENT_TOPIC_ID) for tp, d in context.asks()
                    if d.topic_id is not None and ids.get(tp[0]) not in (None, d.topic_id)} \
        if v >= 13 else {}
    asks = context.fetch_asks()
    if inconsistent:
        asks = [a for a in asks if a.tp not in inconsistent]
    journal = getattr(api, "fetch_changes", None)
    max_bytes = getattr(body, "max_bytes", 0x7FFFFFFF)
    args = (replica_id, millis(body.max_wait), body.min_bytes, max_bytes,
            getattr(body, "isolation_level", 0), asks)
    kw = {}
    if v >= 11:     # KafkaApis: client metadata from v11 (KIP-392), followers' fetches too
        kw["client"] = ClientMetadata(body.rack_id or "", listener)
    if journal is not None and context.session is not None:
        # decided where the broker orders its changes: none can fall in between
        kw["reads"] = lambda: context.reads(journal)
        if not inconsistent:
            kw["session"] = context
    outcomes = api.fetch(*args, **kw)
    offsets = {tp: d.fetch_offset for tp, d in requested.items()} if v <= 3 else None

    def respond(got):
        if inconsistent:
            got = {**got, **inconsistent}
        moved = {tp for tp, o in got.items() if o.error in NEW_LEADER_ERRORS} if v >= 16 \
            else ()
        nodes = _current_leaders(api, moved, listener)[1] if moved else {}
        return _fetch_response(request, context, got, max_bytes, offsets, unknown, ids, nodes)
    if isinstance(outcomes, Deferred):     # parked until data arrives or max_wait passes
        return outcomes.then(respond)
    return respond(outcomes)


def _down_converted(o, to_magic: int, fetch_offset: int):
    """KafkaApis' down-conversion for Fetch v0-3 (replicas/legacy_records.py)."""
    if o.error or not o.records:
        return o.error, o.records
    converted = down_convert(o.records, to_magic, fetch_offset)
    if converted.unsupported and not converted.records:
        return E.UNSUPPORTED_COMPRESSION_TYPE, b""
    return o.error, converted.records


def _fetch_response(request, context: FetchContext, outcomes, max_bytes: int, offsets=None,
                    unknown=None, ids=None, nodes=None):
    body, key, v = request.body, request.api_key, request.api_version
    committed = getattr(body, "isolation_level", 0) == READ_COMMITTED
    answered = context.respond(outcomes, max_bytes)
    if v in FETCH_VERSIONS:      # every record's path: kept as outcomes, written directly
        by_topic: dict[tuple, list] = {}       # (name, id): [(index, error, outcome)]
        ids = ids or {}
        for tp, o in answered:
            by_topic.setdefault((tp[0], ids.get(tp[0])), []).append((tp[1], o.error, o))
        for (topic_id, p), o in (unknown or {}).items():
            by_topic.setdefault((None, topic_id), []).append((p, o.error, o))
        return FetchAnswer(v, context.session_id, committed,
                           [(name, topic_id, ps) for (name, topic_id), ps in by_topic.items()],
                           _node_endpoints(key, v, nodes))
    to_magic = 0 if v <= 1 else 1

    def aborted(o):
        if not committed:
            return None
        return tuple(build(key, v, "AbortedTransaction", producer_id=pid, first_offset=first)
                     for pid, first in (o.aborted_transactions or ()))

    def partition(tp, o):       # v0-11: no diverging epoch, current leader or snapshot id
        error, records = (o.error, o.records) if offsets is None else \
            _down_converted(o, to_magic, offsets[tp])
        if error == E.KAFKA_STORAGE_ERROR and v <= 5:
            error = E.NOT_LEADER_OR_FOLLOWER
        return build(key, v, "PartitionData", partition_index=tp[1], error_code=error,
                     high_watermark=o.high_watermark, last_stable_offset=o.last_stable_offset,
                     log_start_offset=o.log_start_offset, aborted_transactions=aborted(o),
                     preferred_read_replica=o.preferred_read_replica, records=records)

    by_topic = {}
    for tp, o in answered:
        by_topic.setdefault((tp[0], (ids or {}).get(tp[0])), []).append(partition(tp, o))
    for (topic_id, p), o in (unknown or {}).items():
        by_topic.setdefault((None, topic_id), []).append(partition((None, p), o))
    topics = tuple(build(key, v, "FetchableTopicResponse", topic=name,
                         topic_id=topic_uuid(topic_id), partitions=tuple(ps))
                   for (name, topic_id), ps in by_topic.items())
    return build(key, v, "FetchResponse", error_code=E.NONE,
                 session_id=context.session_id, responses=topics,
                 node_endpoints=_node_endpoints(key, v, nodes))


def _node_endpoints(key: int, v: int, nodes) -> tuple:
    """The NodeEndpoint entities of {id: node} (KIP-951), by node id."""
    return tuple(build(key, v, "NodeEndpoint", node_id=n.id, host=n.host, port=n.port,
                       rack=n.rack) for _, n in sorted((nodes or {}).items()))


# -- ListOffsets, OffsetForLeaderEpoch -------------------------------------------------------
def list_offsets(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    if v == 0:
        return _legacy_offsets(api, request)
    # without tiered storage the earliest local offset is the log start offset
    asks = [((t.name, p.partition_index), EARLIEST if p.timestamp == EARLIEST_LOCAL
             else p.timestamp, getattr(p, "current_leader_epoch", -1))
            for t in body.topics for p in t.partitions]
    answers = api.list_offsets(getattr(body, "isolation_level", 0), asks)
    topics = tuple(build(key, v, "ListOffsetsTopicResponse", name=t.name, partitions=tuple(
        build(key, v, "ListOffsetsPartitionResponse", partition_index=p.partition_index,
              error_code=(a := answers[(t.name, p.partition_index)]).error,
              timestamp=a.timestamp, offset=a.offset, leader_epoch=a.leader_epoch)
        for p in t.partitions)) for t in body.topics)
    return build(key, v, "ListOffsetsResponse", topics=topics)


def _legacy_offsets(api: BrokerApi, request):
    body, key, v = request.body, request.api_key, request.api_version
    answers = iter(api.legacy_offsets(body.replica_id, [
        ((t.name, p.partition_index), p.timestamp, p.max_num_offsets)
        for t in body.topics for p in t.partitions]))
    topics = tuple(build(key, v, "ListOffsetsTopicResponse", name=t.name, partitions=tuple(
        build(key, v, "ListOffsetsPartitionResponse", partition_index=p.partition_index,
              error_code=(a := next(answers))[0], old_style_offsets=a[1])
        for p in t.partitions)) for t in body.topics)
    return build(key, v, "ListOffsetsResponse", topics=topics)


def delete_records(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    answers = api.delete_records([((t.name, p.partition_index), p.offset)
                                  for t in body.topics for p in t.partitions], millis(body.timeout))

    def respond(answers):
        topics = tuple(build(key, v, "DeleteRecordsTopicResult", name=t.name, partitions=tuple(
            build(key, v, "DeleteRecordsPartitionResult", partition_index=p.partition_index,
                  error_code=(a := answers[(t.name, p.partition_index)])[0], low_watermark=a[1])
            for p in t.partitions)) for t in body.topics)
        return build(key, v, "DeleteRecordsResponse", topics=topics)
    if isinstance(answers, Deferred):    # followers' log starts not there yet
        return answers.then(respond)
    return respond(answers)


def offset_for_leader_epoch(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    asks = [((t.topic, p.partition), p.current_leader_epoch, p.leader_epoch)
            for t in body.topics for p in t.partitions]
    answers = api.offsets_for_leader_epoch(asks)
    topics = tuple(build(key, v, "OffsetForLeaderTopicResult", topic=t.topic, partitions=tuple(
        build(key, v, "EpochEndOffset", partition=p.partition,
              error_code=(a := answers[(t.topic, p.partition)]).error,
              leader_epoch=a.leader_epoch, end_offset=a.offset)
        for p in t.partitions)) for t in body.topics)
    return build(key, v, "OffsetForLeaderEpochResponse", topics=topics)
