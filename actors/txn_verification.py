"""TxnVerifier: a partition leader asks the transaction coordinator whether partitions are in
a producer's ongoing transaction before appending its first transactional batch there
(KIP-890 part 1; Kafka 3.8's AddPartitionsToTxnManager).

Rules:
- `add` (transaction.version 2: a Produce v12 or TxnOffsetCommit v5, Kafka's
  TransactionSupportedOperation ADD_PARTITION): the partition is ADDED to the transaction
  for the client (AddPartitionsToTxn v5, verify_only false), the coordinator's TxnHost
  asking again while it answers CONCURRENT_TRANSACTIONS (the previous transaction's markers
  are being written) for up to 100 ms, as Kafka's ReplicaManager retries; a produce then
  answers CONCURRENT_TRANSACTIONS as it is (`produce_error(code, add=True)`).
- The coordinator is the leader of the transactional id's `__transaction_state` partition
  in this broker's metadata cache. This broker: the local TxnHost answers (no socket);
  another: AddPartitionsToTxn v4 with verify_only on the inter-broker listener
  (actors/peer_links.py). No known leader, or a lost connection: COORDINATOR_NOT_AVAILABLE
  / NETWORK_EXCEPTION for every partition.
- The answer is {tp: error} as Kafka's AddPartitionsToTxnManager gives it: PRODUCER_FENCED
  → INVALID_PRODUCER_EPOCH; TRANSACTION_ABORTABLE (not in the transaction) and
  CLUSTER_AUTHORIZATION_FAILED → INVALID_TXN_STATE. A produce answers it after
  ReplicaManager.appendRecords' translation (`produce_error`): CONCURRENT_TRANSACTIONS,
  NETWORK_EXCEPTION, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
  NOT_COORDINATOR → NOT_ENOUGH_REPLICAS (a retriable error older clients handle without a
  metadata refresh); a TxnOffsetCommit after the group coordinator's
  (coordinator/error_codes.py).
- `verify(...)` returns a Completion settled with that answer; callbacks run on whichever
  thread settles it (the broker's loop, or the coordinator's), never with a lock held.
"""

from __future__ import annotations

import asyncio
import logging

from actors.completion import Completion
from actors.peer_links import PeerLinks
from protocol.build import build_request
from replicas.errors import ErrorCode as E
from transactions import messages as tm

log = logging.getLogger(__name__)

ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, ADD_VERSION = 24, 4, 5
REQUEST_TIMEOUT_S = 30.0
TRANSLATED = {E.PRODUCER_FENCED: E.INVALID_PRODUCER_EPOCH,
              E.TRANSACTION_ABORTABLE: E.INVALID_TXN_STATE,
              E.CLUSTER_AUTHORIZATION_FAILED: E.INVALID_TXN_STATE}
FOR_PRODUCE = dict.fromkeys((E.CONCURRENT_TRANSACTIONS, E.NETWORK_EXCEPTION,
                             E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE,
                             E.NOT_COORDINATOR), E.NOT_ENOUGH_REPLICAS)


def produce_error(code: int, add: bool = False) -> int:
    """A verification's error as a produce answers it."""
    if add and code == E.CONCURRENT_TRANSACTIONS:
        return code
    return FOR_PRODUCE.get(code, code)


class Verification(Completion):
    """{tp: error} once the coordinator answered."""

    __slots__ = ("errors",)

    def __init__(self):
        super().__init__()
        self.errors: dict = {}

    def answer(self, errors: dict) -> None:
        def store():
            self.errors = {tp: TRANSLATED.get(e, e) for tp, e in errors.items()}
        self.settle(store)


class TxnVerifier:
    def __init__(self, broker):
        self.broker = broker
        self._links = PeerLinks(broker, "txn-verify")

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               partitions, add: bool = False) -> Verification:
        out = Verification()
        tps = tuple(sorted(set(map(tuple, partitions))))
        coordinator = self._coordinator(transactional_id)
        if coordinator is None:
            out.answer({tp: E.COORDINATOR_NOT_AVAILABLE for tp in tps})
        elif coordinator == self.broker.id:
            asked = self.broker.txns.call(lambda rid: tm.AddPartitionsToTxn(
                rid, transactional_id, producer_id, producer_epoch, tps, verify_only=not add,
                version=ADD_VERSION if add else VERIFY_VERSION))
            asked.when_ready(lambda: out.answer(_errors(asked.result(), tps)))
        else:
            self.broker.network.call(self._ask_remote, out, coordinator, transactional_id,
                                     producer_id, producer_epoch, tps, add)
        return out

    def _coordinator(self, transactional_id: str) -> int | None:
        txns = self.broker.txns
        tp = (txns.topic, txns.partition_for(transactional_id))
        with self.broker.lock:
            md = self.broker.rm.metadata
            state = md.partitions.get(tp)
            return state.leader if state is not None and state.leader in md.live_brokers \
                else None

    def _ask_remote(self, out: Verification, coordinator: int, transactional_id: str,
                    producer_id: int, producer_epoch: int, tps: tuple, add: bool) -> None:
        asyncio.get_running_loop().create_task(self._remote(
            out, coordinator, transactional_id, producer_id, producer_epoch, tps, add))

    async def _remote(self, out: Verification, coordinator: int, transactional_id: str,
                      producer_id: int, producer_epoch: int, tps: tuple, add: bool) -> None:
        by_topic: dict[str, list[int]] = {}
        for topic, p in tps:
            by_topic.setdefault(topic, []).append(p)
        v = ADD_VERSION if add else VERIFY_VERSION
        body = build_request(ADD_PARTITIONS_TO_TXN, v, None, transactions=(build_request(
            ADD_PARTITIONS_TO_TXN, v, "AddPartitionsToTxnTransaction",
            transactional_id=transactional_id, producer_id=producer_id,
            producer_epoch=producer_epoch, verify_only=not add,
            topics=tuple(build_request(ADD_PARTITIONS_TO_TXN, v, "AddPartitionsToTxnTopic",
                                       name=t, partitions=tuple(ps))
                         for t, ps in by_topic.items())),))
        try:
            answer = await self._links.call(coordinator, body, REQUEST_TIMEOUT_S)
        except ConnectionError as exc:
            log.info("verification of %s with broker %s: %s", transactional_id, coordinator, exc)
            out.answer({tp: E.NETWORK_EXCEPTION for tp in tps})
            return
        if answer.error_code.value:
            out.answer({tp: answer.error_code.value for tp in tps})
            return
        errors = {}
        for result in answer.results_by_transaction:
            for t in result.topic_results:
                for p in t.results_by_partition:
                    errors[(t.name, p.partition_index)] = p.partition_error_code.value
        out.answer({tp: errors.get(tp, E.UNKNOWN_SERVER_ERROR) for tp in tps})

    def stop(self) -> None:
        self.broker.network.call(self._links.close_all)


def _errors(result: tm.AddPartitionsResult, tps: tuple) -> dict:
    if result.partition_errors:
        return {tp: result.partition_errors.get(tp, result.error) for tp in tps}
    return {tp: result.error for tp in tps}
