"""TxnMarkerChannel: the transaction coordinator's WriteTxnMarkers to partition leaders (Kafka's
TransactionMarkerChannelManager and TransactionMarkerRequestCompletionHandler, 3.8).

Rules:
- `send(WriteMarkers)` (any thread) starts, on the broker's event loop, the delivery of one
  transaction's markers: each partition's leader from this broker's metadata cache; a
  partition the metadata does not know is skipped (its topic was deleted: Kafka's
  addTxnMarkersToBrokerQueue); one without a live leader waits for one.
- Per destination broker one request at a time, carrying every marker queued for it (Kafka
  batches the markers of many transactions per broker into one WriteTxnMarkers). This
  broker's own partitions are written in place (`Broker.write_txn_markers_begin`), the
  others go out as WriteTxnMarkers v1 on the inter-broker listener (actors/peer_links.py).
  Either way the leader answers once each marker is replicated (acks=-1).
- Per partition answers, as Kafka's completion handler: NONE → done;
  UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
  REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, and a lost connection → retried after
  RETRY_BACKOFF_S with the leader looked up again; INVALID_PRODUCER_EPOCH,
  TRANSACTION_COORDINATOR_FENCED → the transaction is no longer this coordinator's to
  finish: sending stops, nothing is reported; UNSUPPORTED_FOR_MESSAGE_FORMAT,
  UNSUPPORTED_VERSION → done (the producer could not have written there); anything else
  is logged and retried (Kafka throws: a bug, not a state to stop in).
- A transaction whose coordinator epoch is no longer the coordinator's (`is_current`, the
  partition moved or reloaded) stops too: the new coordinator sends its own markers.
- When every partition is done, `on_written(MarkersWritten)` is called (from the loop): the
  coordinator then writes CompleteCommit/CompleteAbort.
"""

from __future__ import annotations

import asyncio
import logging

from actors.peer_links import PeerLinks
from protocol.build import build_request
from replicas.errors import ErrorCode as E
from transactions import messages as m

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS, VERSION = 27, 1
RETRY_BACKOFF_S = 0.1
REQUEST_TIMEOUT_S = 30.0
MARKER_TIMEOUT_MS = 30_000
RETRIABLE = {E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS,
             E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT, E.KAFKA_STORAGE_ERROR,
             E.NETWORK_EXCEPTION}
FENCED = {E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED}
MOOT = {E.UNSUPPORTED_FOR_MESSAGE_FORMAT, E.UNSUPPORTED_VERSION}


class _Entry:
    """One transaction's markers for one destination, waiting for its answer."""

    __slots__ = ("effect", "partitions", "future")

    def __init__(self, effect: m.WriteMarkers, partitions: list, future: asyncio.Future):
        self.effect, self.partitions, self.future = effect, partitions, future


class TxnMarkerChannel:
    def __init__(self, broker, on_written, is_current=None):
        self.broker, self.on_written = broker, on_written
        self.is_current = is_current or (lambda effect: True)
        self._links = PeerLinks(broker, "txn-markers")
        self._queues: dict[int, list[_Entry]] = {}
        self._sending: set[int] = set()
        self._stopped = False

    def send(self, effect: m.WriteMarkers) -> None:
        self.broker.network.call(self._start, effect)

    def _start(self, effect: m.WriteMarkers) -> None:
        if not self._stopped:
            asyncio.get_running_loop().create_task(
                self._deliver(effect), name=f"txn-markers-{effect.transactional_id}")

    async def _deliver(self, effect: m.WriteMarkers) -> None:
        pending = set(map(tuple, effect.partitions))
        while pending and not self._stopped:
            if not self.is_current(effect):
                log.info("markers of %s (coordinator epoch %s): no longer this coordinator's",
                         effect.transactional_id, effect.coordinator_epoch)
                return
            routes, gone = self._route(pending)
            if gone:
                log.info("markers of %s: skipping %s (no longer in the metadata)",
                         effect.transactional_id, sorted(gone))
                pending -= gone
            answers = await asyncio.gather(*(self._enqueue(lid, effect, tps)
                                             for lid, tps in routes.items()))
            for errors in answers:
                for tp, error in errors.items():
                    if error == E.NONE or error in MOOT:
                        pending.discard(tp)
                    elif error in FENCED:
                        log.info("markers of %s on %s: %s: stopped", effect.transactional_id,
                                 tp, E(error).name)
                        return
                    elif error not in RETRIABLE:
                        log.warning("markers of %s on %s: unexpected error %s; retrying",
                                    effect.transactional_id, tp, error)
            if pending:
                await asyncio.sleep(RETRY_BACKOFF_S)
        if not pending and not self._stopped:
            self.on_written(m.MarkersWritten(effect.transactional_id, effect.producer_id,
                                             effect.producer_epoch, effect.committed,
                                             effect.coordinator_epoch))

    def _route(self, partitions) -> tuple[dict[int, list], set]:
        """{live leader: its partitions}, and the partitions the metadata no longer has."""
        routes: dict[int, list] = {}
        gone = set()
        with self.broker.lock:
            md = self.broker.rm.metadata
            for tp in partitions:
                state = md.partitions.get(tp)
                if state is None:
                    gone.add(tp)
                elif state.leader in md.live_brokers:
                    routes.setdefault(state.leader, []).append(tp)
        return routes, gone

    async def _enqueue(self, leader: int, effect: m.WriteMarkers, tps: list) -> dict:
        future = asyncio.get_running_loop().create_future()
        self._queues.setdefault(leader, []).append(_Entry(effect, sorted(tps), future))
        if leader not in self._sending:
            self._sending.add(leader)
            asyncio.get_running_loop().create_task(self._drain(leader))
        return await future

    async def _drain(self, leader: int) -> None:
        """Send what is queued for `leader`, one request at a time, until the queue is empty."""
        try:
            while self._queues.get(leader):
                batch, self._queues[leader] = self._queues[leader], []
                try:
                    if leader == self.broker.id:
                        answers = await self._write_here(batch)
                    else:
                        answers = await self._write_there(leader, batch)
                except Exception as exc:       # connection lost, peer restarting: retried
                    log.info("WriteTxnMarkers to broker %s: %s", leader, exc)
                    answers = [{tp: E.NETWORK_EXCEPTION for tp in e.partitions} for e in batch]
                for entry, errors in zip(batch, answers):
                    if not entry.future.done():
                        entry.future.set_result(errors)
        finally:
            self._sending.discard(leader)

    async def _write_here(self, batch: list[_Entry]) -> list[dict]:
        markers = [_marker(e) for e in batch]
        pending = self.broker.write_txn_markers_begin(markers, MARKER_TIMEOUT_MS)
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        pending.when_ready(lambda: self.broker.network.call(
            lambda: done.done() or done.set_result(None)))
        await done
        pending.result()
        return pending.markers_result()

    async def _write_there(self, leader: int, batch: list[_Entry]) -> list[dict]:
        body = build_request(WRITE_TXN_MARKERS, VERSION, None, markers=tuple(
            build_request(WRITE_TXN_MARKERS, VERSION, "WritableTxnMarker",
                          producer_id=e.effect.producer_id,
                          producer_epoch=e.effect.producer_epoch,
                          transaction_result=e.effect.committed,
                          coordinator_epoch=e.effect.coordinator_epoch,
                          topics=tuple(build_request(WRITE_TXN_MARKERS, VERSION,
                                                     "WritableTxnMarkerTopic", name=topic,
                                                     partition_indexes=tuple(parts))
                                       for topic, parts in _by_topic(e.partitions).items()))
            for e in batch))
        answer = await self._links.call(leader, body, REQUEST_TIMEOUT_S)
        out = []
        for entry, result in zip(batch, answer.markers):
            errors = {(t.name, p.partition_index): p.error_code.value
                      for t in result.topics for p in t.partitions}
            out.append({tp: errors.get(tp, E.UNKNOWN_SERVER_ERROR) for tp in entry.partitions})
        return out

    def stop(self) -> None:
        self._stopped = True
        self.broker.network.call(self._links.close_all)


def _marker(entry: _Entry) -> tuple:
    e = entry.effect
    return (e.producer_id, e.producer_epoch, e.committed, e.coordinator_epoch,
            tuple(entry.partitions))


def _by_topic(partitions) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, p in partitions:
        out.setdefault(topic, []).append(p)
    return out
