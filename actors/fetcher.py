"""Follower fetchers: one per (this broker, leader broker) pair (Kafka's
ReplicaFetcherThread), pulling every partition this broker follows on that leader over ONE
connection to the leader's inter-broker listener, in Kafka's own protocol.

Rules:
- A fetcher is a coroutine on the broker's event loop (the listener's, actors/listener.py),
  not a thread: the leader's answer is appended where the broker's own requests are
  handled, so a follower append that completes a consumer's parked fetch hands nothing to
  another thread. `add`/`remove` (the controller's LeaderAndIsr, from Ray's threads) change
  its partitions under the broker's lock and wake it; `stop` cancels it.
- The connection (actors/broker_link.py) goes to the leader's endpoint on
  inter.broker.listener.name, as the controller's LeaderAndIsr or UpdateMetadata named it
  (else the leader's ZooKeeper registration). Requests carry replica_id = this broker's id:
  the leader treats them as a follower's (its LEO moves the HW; ClusterAction is needed
  when an authorizer is on).
- A partition first truncates by leader epoch (KIP-101/279): OffsetForLeaderEpoch (v4) for
  its latest local epoch, for every such partition in one request, truncating as the
  replica manager decides and asking again with an older epoch when told to; only then
  does it fetch.
- Fetch (v12: current leader epoch, last fetched epoch, the follower's log start offset,
  diverging epochs) is a long-poll of replica.fetch.wait.max.ms in a fetch session (KIP-227,
  protocol/fetch_session.py): the first request carries every partition, the next ones only
  the partitions whose fetch position moved, and the leader answers only the partitions with
  something new; any session error or a lost connection starts over with a full fetch; what comes back is appended as follower with the leader's HW (the replica
  manager enforces truncate-before-HW, KAFKA-14704). The leader answers a parked follower
  fetch the moment a batch is appended, and the follower's next fetch (sent at once) carries
  its new end offset, which is what moves the HW and releases acks=all produces.
- Rounds go in callbacks (BrokerLink.send): an answer is applied inside the link's data
  callback, which sends the next Fetch before the loop turns to anything else, as Kafka's
  fetcher thread goes round without waiting on the request handlers. An awaited answer
  resumes a coroutine only after every request that arrived in the same loop pass, which
  under load (10,000 records/s, linger.ms 0) stretched the follower's turn, answer in to
  next Fetch out, to 1.1-3.4 ms at p50 against Kafka's 0.2 (bench/wire_hops.py). The
  coroutine takes over for whatever is not a plain round: connecting, truncation, errors
  and backoff, re-authentication, nothing to fetch.
- A diverging-epoch answer sends the partition back to truncation. Every answer carries the
  leader's log start, which the follower adopts (below its own HW); OFFSET_OUT_OF_RANGE below
  that start restarts the replica empty at it (retention reached the leader first).
- Errors (the connection lost, NOT_LEADER, FENCED_LEADER_EPOCH) back off replica.fetch.
  backoff.ms and retry, reconnecting as needed; the controller's next LeaderAndIsr moves a
  partition to another fetcher or stops it. Fencing is by leader epoch, never by Ray.
- A REFUSAL is an error no retry can mend until someone changes something: this broker's
  config (a jaas config it lacks, a certificate the leader does not trust), its SASL user
  (SASL_AUTHENTICATION_FAILED) or its rights (TOPIC_ / CLUSTER_AUTHORIZATION_FAILED: the
  principal lacks ClusterAction). It is logged at ERROR once per cause (other errors at
  INFO, once per cause too), the fetcher keeps retrying with a backoff doubling up to
  REFUSED_BACKOFF_MAX_S, and `problem()` reports it (the cause, the partitions, since
  when) for `rayka status`; the first clean round logs the recovery and clears it.
- Failpoint (chaos): `cut_link(until)` drops the connection and refuses to reconnect
  until then (a network partition between two live brokers: the leader shrinks the ISR,
  the follower catches up and rejoins once it heals).
- Every replica-manager call is made under the broker's lock; effects go back to the
  broker (`broker.apply_effects`).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time

from actors.broker_link import BrokerLink, SaslFailed
from protocol.build import build_request
from protocol.client import EncodedRequest
from protocol.errors import ProtocolError
from protocol.fetch_session import FetchData, FetchSessionHandler
from protocol.hot_writers import fetch_plan_bytes
from replicas.errors import ErrorCode, InvalidConfig, KafkaError

OFFSET_OUT_OF_RANGE = ErrorCode.OFFSET_OUT_OF_RANGE.value
FETCH, OFFSET_FOR_LEADER_EPOCH = 1, 23
FETCH_VERSION, EPOCH_VERSION = 12, 4
TRUNCATION_ROUNDS = 64
REBUILD_S = 60.0               # every position read again this often, whoever moved it
ANSWER_GRACE_S = 30            # past max_wait: the leader is paused or gone
REFUSED_BACKOFF_MAX_S = 1.0
REFUSED_CODES = {ErrorCode.TOPIC_AUTHORIZATION_FAILED.value,
                 ErrorCode.CLUSTER_AUTHORIZATION_FAILED.value,
                 ErrorCode.SASL_AUTHENTICATION_FAILED.value}
log = logging.getLogger(__name__)


class PartitionErrors(KafkaError):
    """The leader answered these partitions with error `code` (the commonest of a round)."""

    def __init__(self, code: int, what: str, partitions):
        self.code, self.partitions = code, sorted(partitions)
        super().__init__(f"{what}: the leader answered {self.name} ({code}) for "
                         f"{len(self.partitions)} partition(s)")

    @property
    def name(self) -> str:
        return ErrorCode(self.code).name

    def __str__(self) -> str:
        return self.message


def is_refusal(exc: BaseException) -> bool:
    return isinstance(exc, (SaslFailed, InvalidConfig, ssl.SSLError)) or \
        getattr(exc, "code", None) in REFUSED_CODES


class Fetcher:
    def __init__(self, broker, leader_id: int):
        self.broker = broker
        self.leader_id = leader_id
        cfg = broker.kafka_config
        self.max_wait_ms, self.min_bytes = cfg.replica_fetch_wait_max_ms, cfg.replica_fetch_min_bytes
        self.partition_max_bytes = cfg.replica_fetch_max_bytes
        self.response_max_bytes = cfg.replica_fetch_response_max_bytes
        self.backoff_s = cfg.replica_fetch_backoff_ms / 1000
        self.partitions: dict[tuple, bool] = {}     # tp → needs truncation
        self._truncating: set = set()               # those needing it: no scan of them all
        # What the next fetch asks per partition, read again from the replica manager only
        # for the partitions whose position may have moved (`_stale`: those answered, added,
        # removed, or named by `positions_moved`), and all of them every REBUILD_S and
        # after an error: 3,000 partitions cost no 3,000 reads per round.
        self._wanted: dict[tuple, FetchData] = {}
        self._positions: dict[tuple, object] = {}
        self._stale: set = set()
        # what changed in `_wanted` since the session's last plan was built (None: anything
        # may have: the plan compares everything)
        self._unplanned: set | None = None
        self._rebuild_at = 0.0
        self.link = BrokerLink(f"broker-{broker.id}-fetcher", broker.security,
                               cfg.socket_request_max_bytes)
        self.session = FetchSessionHandler()
        self._stopped = False
        self._problem: dict | None = None          # the current cause, for problem()
        self._refusals = 0                          # refusals in a row: the backoff doubles
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._rounds: asyncio.Future | None = None   # the callback rounds' end, awaited
        broker.network.call(self._start)
        cut = broker.replication_cut_until(leader_id)
        if cut > time.monotonic():          # a link-cut failpoint is on for that leader
            broker.network.call(self.link.cut_until, cut)

    def add(self, tps) -> None:
        with self.broker.lock:
            for tp in tps:
                self.partitions[tuple(tp)] = True
                self._truncating.add(tuple(tp))
                self._stale.add(tuple(tp))
        self.broker.network.call(self._poke)

    def remove(self, tps) -> None:
        with self.broker.lock:
            for tp in tps:
                self.partitions.pop(tuple(tp), None)
                self._truncating.discard(tuple(tp))
                self._stale.add(tuple(tp))

    def positions_moved(self, tps) -> None:
        """Positions moved outside this fetcher (local retention moved a log start): read
        again before the next fetch. The caller holds the broker's lock."""
        self._stale.update(tp for tp in tps if tp in self.partitions)

    def stop(self) -> None:
        self._stopped = True
        self.broker.network.call(self._cancel)

    def cut_link(self, until_monotonic_s: float) -> None:
        """Failpoint: drop the connection to the leader, none until then (a time in the
        past lifts it)."""
        self.broker.network.call(self.link.cut_until, until_monotonic_s)

    @property
    def empty(self) -> bool:
        return not self.partitions

    def problem(self) -> dict | None:
        """What keeps this fetcher from replicating, while it lasts: {"leader", "error",
        "code", "refusal", "message", "partitions", "since_s"}."""
        p = self._problem
        if p is None:
            return None
        return {**p, "partitions": [list(tp) for tp in p["partitions"]],
                "since_s": round(time.monotonic() - p["since"], 1)}

    def _on_error(self, exc: BaseException) -> float:
        """Report an error (once per cause) and return how long to back off."""
        refusal = is_refusal(exc)
        name = getattr(exc, "name", None) or type(exc).__name__
        code = getattr(exc, "code", None)
        partitions = getattr(exc, "partitions", None) or sorted(self.partitions)
        cause = (name, code, refusal and str(exc))
        if self._problem is None or self._problem["cause"] != cause:
            log.log(logging.ERROR if refusal else logging.INFO,
                    "fetcher %s←%s: %s%s: %s", self.broker.id, self.leader_id, name,
                    " (refused: retrying with backoff)" if refusal else "", exc)
            self._problem = {"cause": cause, "leader": self.leader_id, "error": name,
                             "code": code, "refusal": refusal, "message": str(exc),
                             "since": time.monotonic()}
        self._problem["partitions"] = partitions
        self._refusals = self._refusals + 1 if refusal else 0
        if not refusal:
            return self.backoff_s
        return min(max(REFUSED_BACKOFF_MAX_S, self.backoff_s),
                   self.backoff_s * 2 ** min(self._refusals - 1, 16))

    def _on_clean_round(self) -> None:
        if self._problem is not None:
            log.info("fetcher %s←%s: replicating again (after %s)", self.broker.id,
                     self.leader_id, self._problem["error"])
        self._problem, self._refusals = None, 0

    # -- on the loop -----------------------------------------------------------------------------
    def _start(self) -> None:
        if not self._stopped:
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"fetcher-{self.broker.id}-from-{self.leader_id}")

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self.link.close()

    async def _run(self) -> None:
        while not self._stopped:
            if not self.partitions:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), 1.0)
                except asyncio.TimeoutError:
                    pass
                continue
            try:
                if not self.link.connected:
                    endpoint = self.broker.peer_endpoint(self.leader_id)
                    if endpoint is None:
                        raise ConnectionError(f"no {self.broker.inter_broker_listener} "
                                              f"endpoint known for broker {self.leader_id}")
                    await self.link.connect(endpoint)
                await self._truncate()
                await self._fetch()
            except (OSError, ProtocolError, KafkaError, RuntimeError, SaslFailed,
                    asyncio.TimeoutError) as exc:
                if self._stopped:
                    return
                pause = self._on_error(exc)  # leader restarting, moved, refused, cut: retry
                self.link.close()
                self.session.reset()
                self._rebuild_at = 0.0
                await asyncio.sleep(pause)

    async def _truncate(self) -> None:
        """OffsetsForLeaderEpoch for every partition still truncating (KIP-101/279)."""
        rm, lock = self.broker.rm, self.broker.lock
        with lock:
            todo = {tp: rm.follower_fetch_request(tp) for tp in self._truncating}
        asking = {}
        for tp, pos in todo.items():
            if pos.last_fetched_epoch < 0:            # an empty log: nothing to truncate
                with lock:
                    if tp in self.partitions:
                        self._truncated(tp)
            else:
                asking[tp] = (pos.current_leader_epoch, pos.last_fetched_epoch)
        for _ in range(TRUNCATION_ROUNDS):
            if not asking:
                return
            answers = await self._offsets_for_leader_epoch(asking)
            again, errors = {}, {}
            with lock:
                for tp, (current, _) in asking.items():
                    if tp not in self.partitions:
                        continue
                    error, leader_epoch, end_offset = answers.get(
                        tp, (ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1))
                    if error:
                        errors.setdefault(error, []).append(tp)
                        continue
                    r = rm.follower_truncate(tp, leader_epoch, end_offset, leader_epoch=current)
                    self.broker.apply_effects(r.effects)
                    if r.completed or r.stale:
                        self._truncated(tp)
                    else:
                        again[tp] = (current, r.next_epoch)
            if errors:      # the partitions without one go on; these wait for the next round
                raise round_error(errors, "OffsetForLeaderEpoch")
            asking = again

    def _truncated(self, tp) -> None:
        """`tp` fetches from now on (under the broker's lock)."""
        self.partitions[tp] = False
        self._truncating.discard(tp)
        self._stale.add(tp)

    async def _offsets_for_leader_epoch(self, asking: dict) -> dict:
        by_topic: dict[str, list] = {}
        for (topic, partition), (current, epoch) in asking.items():
            by_topic.setdefault(topic, []).append(build_request(
                OFFSET_FOR_LEADER_EPOCH, EPOCH_VERSION, "OffsetForLeaderPartition",
                partition=partition, current_leader_epoch=current, leader_epoch=epoch))
        body = build_request(OFFSET_FOR_LEADER_EPOCH, EPOCH_VERSION, None,
                             replica_id=self.broker.id, topics=tuple(
                                 build_request(OFFSET_FOR_LEADER_EPOCH, EPOCH_VERSION,
                                               "OffsetForLeaderTopic", topic=t, partitions=tuple(ps))
                                 for t, ps in by_topic.items()))
        answer = await self.link.call(body, ANSWER_GRACE_S)
        return {(t.topic, p.partition): (p.error_code.value, p.leader_epoch, p.end_offset)
                for t in answer.topics for p in t.partitions}

    def _refresh_positions(self) -> None:
        """Bring `_wanted` up to date (under the broker's lock)."""
        rm, wanted, positions = self.broker.rm, self._wanted, self._positions
        now = time.monotonic()
        if now >= self._rebuild_at:
            wanted.clear()
            positions.clear()
            todo = [tp for tp, pending in self.partitions.items() if not pending]
            self._rebuild_at = now + REBUILD_S
            self._unplanned = None
        else:
            todo = []
            for tp in self._stale:
                if self.partitions.get(tp) is False:
                    todo.append(tp)
                else:
                    wanted.pop(tp, None)
                    positions.pop(tp, None)
            if self._unplanned is not None:
                self._unplanned.update(self._stale)
        self._stale.clear()
        for tp in todo:
            pos = positions[tp] = rm.follower_fetch_request(tp)
            wanted[tp] = FetchData(pos.fetch_offset, pos.current_leader_epoch,
                                   pos.last_fetched_epoch, rm.log(tp).log_start_offset,
                                   self.partition_max_bytes)

    async def _fetch(self) -> None:
        """Fetch rounds until one needs the coroutine (rules); a round whose partitions
        answered errors backs off here."""
        await self.link.ready(ANSWER_GRACE_S)
        rounds = self._rounds = asyncio.get_running_loop().create_future()
        try:
            if not self._send_round():
                return
            backoff_s = await rounds
        finally:
            self._rounds = None
        if backoff_s is not None:
            await asyncio.sleep(backoff_s)

    def _send_round(self) -> bool:
        """Send the next Fetch (False: nothing to fetch)."""
        with self.broker.lock:
            self._refresh_positions()
        positions = self._positions    # changed only by the next round's refresh: no copy
        if not positions:
            return False
        plan = self.session.build(self._wanted, self._unplanned)
        self._unplanned = set()
        body = EncodedRequest(FETCH, FETCH_VERSION, fetch_plan_bytes(
            plan, self.broker.id, self.max_wait_ms, self.min_bytes, self.response_max_bytes))
        self.link.send(body, self.max_wait_ms / 1000 + ANSWER_GRACE_S,
                       lambda answer, exc: self._on_answer(plan, positions, answer, exc))
        return True

    def _on_answer(self, plan, positions, answer, exc) -> None:
        """A round's end, inside the link's data callback: apply it and go round again, or
        hand over to the coroutine through `_rounds` (a backoff, None, or the error)."""
        rounds = self._rounds
        if rounds is None or rounds.done():        # the coroutine is gone (cancelled)
            return
        if exc is not None:
            rounds.set_exception(exc)
            return
        try:
            backoff_s = self._apply(plan, positions, answer)
            if backoff_s is not None:
                rounds.set_result(backoff_s)
            elif (self._stopped or self._truncating or self.link.reauthentication_due
                  or not self._send_round()):
                rounds.set_result(None)
        except Exception as err:            # the coroutine's handling, as an awaited round's
            rounds.set_exception(err)

    def _apply(self, plan, positions, answer) -> float | None:
        """Apply a Fetch answer; the backoff its partitions' errors ask for, else None."""
        self.session.on_response(plan, answer.error_code.value, answer.session_id)
        if answer.error_code.value:
            raise RuntimeError(f"Fetch: error {answer.error_code.value}")
        errors: dict[int, list] = {}
        with self.broker.lock:
            for t in answer.responses:
                for p in t.partitions:
                    tp = (t.topic, p.partition_index)
                    if tp not in positions or self.partitions.get(tp) is not False:
                        continue                  # removed, or back to truncation meanwhile
                    self._stale.add(tp)           # its position may move now
                    error = self._on_partition(tp, positions[tp], p)
                    if error:
                        errors.setdefault(error, []).append(tp)
        if errors:      # the link and the session stay: the leader answered
            return self._on_error(round_error(errors, "Fetch"))
        self._on_clean_round()
        return None

    def _on_partition(self, tp, pos, p) -> int:
        """Apply one partition's answer (under the lock); the error code that asks for a
        backoff, else 0."""
        rm, error = self.broker.rm, p.error_code.value
        diverging = p.diverging_epoch
        try:
            if diverging is not None and diverging.epoch >= 0:
                t = rm.follower_truncate(tp, diverging.epoch, diverging.end_offset,
                                         leader_epoch=pos.current_leader_epoch)
                self.broker.apply_effects(t.effects)
            elif error == OFFSET_OUT_OF_RANGE and p.log_start_offset > pos.fetch_offset:
                # retention or DeleteRecords on the leader removed what we lack
                self.broker.apply_effects(rm.follower_start_at_leader_log_start(
                    tp, p.log_start_offset, p.high_watermark,
                    leader_epoch=pos.current_leader_epoch))
            elif error:
                return error
            else:
                self.broker.apply_effects(rm.append_as_follower(
                    tp, p.records or b"", p.high_watermark, fetch_offset=pos.fetch_offset,
                    leader_epoch=pos.current_leader_epoch,
                    leader_log_start_offset=p.log_start_offset))
        except KafkaError as exc:         # leadership changed under us: the next
            log.info("fetcher %s: %s", tp, exc)   # LeaderAndIsr moves the partition
        return 0


def round_error(errors: dict[int, list], what: str) -> PartitionErrors:
    """One error for a round's partition errors: a refusal first (it is what someone must
    mend), else the commonest."""
    code = max(errors, key=lambda c: (c in REFUSED_CODES, len(errors[c])))
    return PartitionErrors(code, what, errors[code])
