"""The transaction APIs: InitProducerId (22), AddPartitionsToTxn (24), AddOffsetsToTxn (25),
EndTxn (26), WriteTxnMarkers (27), TxnOffsetCommit (28), DescribeProducers (61),
DescribeTransactions (65), ListTransactions (66).

Rules (Kafka 3.8's KafkaApis; the coordinators decide everything else):
- InitProducerId: no transactional id → a fresh idempotent producer id at epoch 0
  (`BrokerApi.init_producer_id`); with one → the transaction coordinator (transactions/),
  which fences, bumps epochs and answers with the request's version in mind.
- AddPartitionsToTxn v0-3 (a client, one transaction): partitions of topics this broker's
  metadata does not know answer UNKNOWN_TOPIC_OR_PARTITION and the others
  OPERATION_NOT_ATTEMPTED, without asking the coordinator (KafkaApis); else the
  coordinator's per-partition answer. v4 (partition leaders, KIP-890): a batch of
  transactions, each verify_only or not, each answered on its own.
- AddOffsetsToTxn, EndTxn: the coordinator's answer (EndTxn v5: with the producer id and
  epoch of the producer's next transaction). TxnOffsetCommit: the GROUP coordinator
  (coordinator/), after KafkaApis' check that the topics exist (UNKNOWN_TOPIC_OR_PARTITION
  per partition of an unknown topic); from v5 its group's offsets partition is added to the
  transaction for the client (KIP-890 part 2), before v5 only verified.
- WriteTxnMarkers (from a transaction coordinator, on the inter-broker listener): each
  marker appended to each partition this broker leads, answered per partition once
  replicated (acks=-1); `BrokerApi.write_txn_markers`.
- DescribeProducers: the producers of each partition this broker leads (KIP-664).
  DescribeTransactions, ListTransactions: what this broker's coordinator holds (admin
  clients ask the coordinator, or every broker for a list).
"""

from __future__ import annotations

from coordinator import messages as gm
from protocol.api import BrokerApi
from protocol.build import build, millis
from replicas.errors import ErrorCode as E
from transactions import messages as tm


def _by_topic(pairs) -> dict[str, list]:
    out: dict[str, list] = {}
    for (topic, partition), value in pairs:
        out.setdefault(topic, []).append((partition, value))
    return out


# -- InitProducerId ---------------------------------------------------------------------------------
def init_producer_id(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    producer_id = getattr(body, "producer_id", -1)
    producer_epoch = getattr(body, "producer_epoch", -1)
    if body.transactional_id is None:
        error, pid, epoch = api.init_producer_id(None, producer_id, producer_epoch)
        return build(key, v, "InitProducerIdResponse", error_code=error, producer_id=pid,
                     producer_epoch=epoch)
    return api.txn_call(lambda rid: tm.InitProducerId(
        rid, body.transactional_id, millis(body.transaction_timeout), producer_id,
        producer_epoch, v)).then(lambda r: build(
            key, v, "InitProducerIdResponse", error_code=r.error, producer_id=r.producer_id,
            producer_epoch=r.producer_epoch))


# -- AddPartitionsToTxn -----------------------------------------------------------------------------
def add_partitions_to_txn(api: BrokerApi, request, listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    if v >= 4:
        return _verify_batch(api, request)
    tps = tuple((t.name, p) for t in body.v3_and_below_topics for p in t.partitions)
    known = set(api.metadata(sorted({t for t, _ in tps}), False, listener).topics)
    unknown = {t.name for t in known if t.error == E.UNKNOWN_TOPIC_OR_PARTITION}

    def respond(errors: dict):
        return build(key, v, "AddPartitionsToTxnResponse", results_by_topic_v3_and_below=tuple(
            build(key, v, "AddPartitionsToTxnTopicResult", name=t, results_by_partition=tuple(
                build(key, v, "AddPartitionsToTxnPartitionResult", partition_index=p,
                      partition_error_code=code) for p, code in parts))
            for t, parts in _by_topic(errors.items()).items()))
    if unknown:
        return respond({tp: E.UNKNOWN_TOPIC_OR_PARTITION if tp[0] in unknown
                        else E.OPERATION_NOT_ATTEMPTED for tp in tps})
    return api.txn_call(lambda rid: tm.AddPartitionsToTxn(
        rid, body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
        body.v3_and_below_producer_epoch, tps, False, v)).then(
        lambda r: respond({tp: r.partition_errors.get(tp, r.error) for tp in tps}))


def _verify_batch(api: BrokerApi, request):
    body, key, v = request.body, request.api_key, request.api_version
    asked = []
    for txn in body.transactions:
        tps = tuple((t.name, p) for t in txn.topics for p in t.partitions)
        asked.append((txn, tps, api.txn_call(lambda rid, txn=txn, tps=tps: tm.AddPartitionsToTxn(
            rid, txn.transactional_id, txn.producer_id, txn.producer_epoch, tps,
            bool(txn.verify_only), v))))

    def respond(_):
        results = []
        for txn, tps, deferred in asked:
            r = deferred.result()
            errors = {tp: r.partition_errors.get(tp, r.error) for tp in tps}
            results.append(build(key, v, "AddPartitionsToTxnResult",
                                 transactional_id=txn.transactional_id, topic_results=tuple(
                    build(key, v, "AddPartitionsToTxnTopicResult", name=t,
                          results_by_partition=tuple(
                              build(key, v, "AddPartitionsToTxnPartitionResult",
                                    partition_index=p, partition_error_code=code)
                              for p, code in parts))
                    for t, parts in _by_topic(errors.items()).items())))
        return build(key, v, "AddPartitionsToTxnResponse", error_code=E.NONE,
                     results_by_transaction=tuple(results))
    return _all(asked, respond)


def _all(asked, respond):
    """A Deferred ready when every Deferred of `asked` (third items) is."""
    from protocol.api import Deferred
    if not asked:
        return respond(None)
    return Deferred.gather(d for _, _, d in asked).then(respond)


# -- AddOffsetsToTxn, EndTxn ------------------------------------------------------------------------
def add_offsets_to_txn(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    return api.txn_call(lambda rid: tm.AddOffsetsToTxn(
        rid, body.transactional_id, body.producer_id, body.producer_epoch, body.group_id, v)
    ).then(lambda r: build(key, v, "AddOffsetsToTxnResponse", error_code=r.error))


def end_txn(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    return api.txn_call(lambda rid: tm.EndTxn(
        rid, body.transactional_id, body.producer_id, body.producer_epoch,
        bool(body.committed), v)).then(
        lambda r: build(key, v, "EndTxnResponse", error_code=r.error,
                        **({"producer_id": r.producer_id, "producer_epoch": r.producer_epoch}
                           if v >= 5 else {})))


# -- TxnOffsetCommit --------------------------------------------------------------------------------
def txn_offset_commit(api: BrokerApi, request, listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    asked = [(t.name, p) for t in body.topics for p in t.partitions]
    known = api.metadata(sorted({t for t, _ in asked}), False, listener).topics
    unknown = {t.name for t in known if t.error == E.UNKNOWN_TOPIC_OR_PARTITION}
    offsets = tuple(gm.CommitOffset(t, p.partition_index, p.committed_offset,
                                    getattr(p, "committed_leader_epoch", -1),
                                    p.committed_metadata)
                    for t, p in asked if t not in unknown)

    def respond(errors: dict):
        return build(key, v, "TxnOffsetCommitResponse", topics=tuple(
            build(key, v, "TxnOffsetCommitResponseTopic", name=t.name, partitions=tuple(
                build(key, v, "TxnOffsetCommitResponsePartition",
                      partition_index=p.partition_index,
                      error_code=E.UNKNOWN_TOPIC_OR_PARTITION if t.name in unknown
                      else errors.get((t.name, p.partition_index), E.NONE))
                for p in t.partitions)) for t in body.topics))
    if not offsets:
        return respond({})
    return api.group_call(lambda rid: gm.TxnOffsetCommit(
        rid, body.transactional_id, body.group_id, body.producer_id, body.producer_epoch,
        offsets, getattr(body, "generation_id", -1), getattr(body, "member_id", ""),
        getattr(body, "group_instance_id", None), v)).then(
        lambda r: respond({(x.topic, x.partition): x.error for x in r.partitions}))


# -- WriteTxnMarkers --------------------------------------------------------------------------------
def write_txn_markers(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    markers = [(x.producer_id, x.producer_epoch, bool(x.transaction_result),
                x.coordinator_epoch, [(t.name, p) for t in x.topics for p in t.partition_indexes])
               for x in body.markers]

    def respond(answers):
        return build(key, v, "WriteTxnMarkersResponse", markers=tuple(
            build(key, v, "WritableTxnMarkerResult", producer_id=marker[0], topics=tuple(
                build(key, v, "WritableTxnMarkerTopicResult", name=t, partitions=tuple(
                    build(key, v, "WritableTxnMarkerPartitionResult", partition_index=p,
                          error_code=code) for p, code in parts))
                for t, parts in _by_topic(errors.items()).items()))
            for marker, errors in zip(markers, answers)))
    return api.write_txn_markers(markers, 30_000).then(respond)


# -- DescribeProducers, DescribeTransactions, ListTransactions ---------------------------------------
def describe_producers(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    answers = api.describe_producers([(t.name, p) for t in body.topics
                                      for p in t.partition_indexes])
    return build(key, v, "DescribeProducersResponse", topics=tuple(
        build(key, v, "TopicResponse", name=t.name, partitions=tuple(
            build(key, v, "PartitionResponse", partition_index=p,
                  error_code=(a := answers[(t.name, p)])[0], error_message=None,
                  active_producers=tuple(
                      build(key, v, "ProducerState", producer_id=x[0], producer_epoch=x[1],
                            last_sequence=x[2], last_timestamp=x[3], coordinator_epoch=x[4],
                            current_txn_start_offset=x[5]) for x in a[1]))
            for p in t.partition_indexes)) for t in body.topics))


def describe_transactions(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version

    def respond(r: tm.DescribeTransactionsResult):
        return build(key, v, "DescribeTransactionsResponse", transaction_states=tuple(
            build(key, v, "TransactionState", error_code=d.error,
                  transactional_id=d.transactional_id, transaction_state=d.state,
                  transaction_timeout=d.transaction_timeout_ms,
                  transaction_start_time=d.transaction_start_time_ms,
                  producer_id=d.producer_id, producer_epoch=d.producer_epoch,
                  topics=tuple(build(key, v, "TopicData", topic=t,
                                     partitions=tuple(p for p, _ in parts))
                               for t, parts in _by_topic((tp, None)
                                                         for tp in d.partitions).items()))
            for d in r.transactions))
    return api.txn_call(lambda rid: tm.DescribeTransactions(
        rid, tuple(body.transactional_ids))).then(respond)


def list_transactions(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    return api.txn_call(lambda rid: tm.ListTransactions(
        rid, tuple(body.state_filters), tuple(body.producer_id_filters),
        getattr(body, "duration_filter", -1))).then(lambda r: build(
            key, v, "ListTransactionsResponse", error_code=r.error,
            unknown_state_filters=tuple(r.unknown_state_filters), transaction_states=tuple(
                build(key, v, "TransactionState", transactional_id=x.transactional_id,
                      producer_id=x.producer_id, transaction_state=x.state)
                for x in r.transactions)))
