"""ShareConsumer: a member of a KIP-932 share group (Kafka's KafkaShareConsumer), over the
brokers' native door (BrokerActor.share_group / share_fetch / share_acknowledge: the same
share groups, sessions and share-partitions Kafka clients reach over the wire).

Rules:
- Membership: a member id of its own (a UUID, as Kafka 4's clients make), a
  ShareGroupHeartbeat to the group's coordinator on a thread of its own every heartbeat
  interval; the assignment it answers is what the consumer fetches. A fenced or unknown
  member joins again under a NEW member id (the old one's records come back when their
  locks expire); a moved coordinator is found again (rayka/client/group.py's
  CoordinatorLink).
- Fetching: one share session per leader broker (epoch 0 opens it with the partitions that
  broker leads; later epochs add and forget partitions); the fetches to every leader go out
  at once and `poll` returns what came back, records inside the acquired ranges only, each
  with its delivery count.
- Acknowledgement: "implicit" (Kafka's default) accepts every record of a poll at the next
  poll, commit or close; "explicit" wants `acknowledge(record, kind)` (accept, release,
  reject) for each, and a poll with records left unacknowledged is an IllegalStateError.
  Offsets acquired but not returned (a compacted batch's gaps) are acknowledged as GAP.
  Acknowledgements ride on the next fetch to the broker that handed the records out
  (commit_sync/commit_async send them at once with ShareAcknowledge); their per-partition
  errors are what `commit_sync` returns and `on_commit` is called with.
- `close` acknowledges what is due, ends every share session (epoch -1: what the member
  still holds goes back) and leaves the group (epoch -1).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
import base64
from typing import Callable, NamedTuple

import ray
from aiokafka.record.default_records import DefaultRecordBatch

from rayka.client.group import CoordinatorLink
from rayka.client.metadata import Metadata
from replicas.errors import ErrorCode as E
from replicas.errors import KafkaError
from replicas.records import iter_headers
from share.group import ShareHeartbeat
from share.partition import AckType

log = logging.getLogger(__name__)

ACCEPT, RELEASE, REJECT, GAP = (AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.GAP)
KINDS = {"accept": ACCEPT, "release": RELEASE, "reject": REJECT}
REJOIN = {E.UNKNOWN_MEMBER_ID, E.FENCED_MEMBER_EPOCH, E.GROUP_ID_NOT_FOUND}
REDISCOVER = {E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS}
NEW_LEADER = {E.NOT_LEADER_OR_FOLLOWER, E.FENCED_LEADER_EPOCH, E.UNKNOWN_TOPIC_OR_PARTITION,
              E.LEADER_NOT_AVAILABLE}
SESSION_LOST = {E.SHARE_SESSION_NOT_FOUND, E.INVALID_SHARE_SESSION_EPOCH}
REQUEST_TIMEOUT_S = 30.0
ANSWER_SLACK_S = 5.0        # past the fetch's max wait: the broker is paused or gone
RETRY_S = 0.1


class IllegalStateError(KafkaError):
    """Kafka's IllegalStateException: the consumer was used out of order (a poll with
    records left unacknowledged in explicit mode, a closed consumer)."""


class ShareRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple = ()
    delivery_count: int = 1


def ack_batches(acks: dict[int, int]) -> list[tuple[int, int, tuple[int, ...]]]:
    """{offset: type} → Kafka's acknowledgement batches: runs of consecutive offsets, one
    type for the run when they agree, else one per offset."""
    out: list[tuple[int, int, tuple[int, ...]]] = []
    run: list[int] = []
    for offset in sorted(acks):
        if run and offset != run[-1] + 1:
            out.append(_batch(run, acks))
            run = []
        run.append(offset)
    if run:
        out.append(_batch(run, acks))
    return out


def _batch(run: list[int], acks: dict[int, int]) -> tuple[int, int, tuple[int, ...]]:
    types = tuple(int(acks[o]) for o in run)
    return run[0], run[-1], (types[0],) if len(set(types)) == 1 else types


def new_member_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class ShareConsumer:
    def __init__(self, cluster, group_id: str, acknowledgement_mode: str = "implicit",
                 max_records: int = 500, max_wait_ms: int = 500,
                 on_commit: Callable | None = None):
        if acknowledgement_mode not in ("implicit", "explicit"):
            raise ValueError("acknowledgement_mode must be 'implicit' or 'explicit'")
        self.cluster, self.group_id = cluster, group_id
        self.explicit = acknowledgement_mode == "explicit"
        self.max_records, self.max_wait_ms = max_records, max_wait_ms
        self.on_commit = on_commit
        self.metadata = Metadata(cluster)
        self._link = CoordinatorLink(cluster, group_id, method="share_group")
        self._lock = threading.RLock()
        self.member_id = new_member_id()
        self.member_epoch = 0
        self._topics: tuple[str, ...] = ()
        self._assignment: set = set()                 # (topic, partition)
        self._interval_s = 1.0
        self._sessions: dict[int, tuple[int, set]] = {}   # broker → (next epoch, partitions)
        self._acks: dict[int, dict] = {}              # broker → {tp: {offset: type}}
        self._delivered: dict = {}                    # (tp, offset) → broker, not yet acked
        self._held: dict = {}                         # (tp, offset) → broker (explicit mode)
        self._closed = False
        self._errors: dict = {}                       # tp → the last error its fetch got
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._beats = threading.Thread(target=self._heartbeats, daemon=True,
                                       name=f"share-heartbeat-{group_id}")

    # -- membership -------------------------------------------------------------------------------
    def subscribe(self, topics) -> None:
        self._check_open()
        with self._lock:
            self._topics = tuple(sorted(set(topics)))
        if not self._beats.is_alive():
            self._beats.start()
        self._heartbeat_once()

    def assignment(self) -> list[tuple[str, int]]:
        with self._lock:
            return sorted(self._assignment)

    def _heartbeat_once(self, leave: bool = False) -> None:
        with self._lock:
            epoch = -1 if leave else self.member_epoch
            request = ShareHeartbeat(self.group_id, self.member_id, epoch,
                                     subscribed_topic_names=self._topics
                                     if epoch == 0 or not leave else None)
        try:
            answer = self._link.call(request, time.monotonic() + REQUEST_TIMEOUT_S)
        except KafkaError as exc:
            log.info("share group %s: heartbeat failed: %s", self.group_id, exc)
            return
        if leave:
            return
        with self._lock:
            if answer.error in REJOIN:
                self.member_id, self.member_epoch = new_member_id(), 0
                self._assignment = set()
                return
            if answer.error:
                log.info("share group %s: heartbeat answered %s", self.group_id,
                         E(answer.error).name)
                return
            self.member_epoch = answer.member_epoch
            self._interval_s = max(answer.heartbeat_interval_ms / 1000, 0.05)
            if answer.assignment is not None:
                self._assignment = {(t, p) for t, ps in answer.assignment.items() for p in ps}

    def _heartbeats(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._interval_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self._heartbeat_once()
            except Exception:                          # keep beating: the next one may do
                log.exception("share group %s: heartbeat", self.group_id)

    # -- poll -------------------------------------------------------------------------------------
    def poll(self, timeout_ms: int = 1000) -> list[ShareRecord]:
        self._check_open()
        deadline = time.monotonic() + timeout_ms / 1000
        with self._lock:
            if self.explicit and self._held:
                raise IllegalStateError("All records must be acknowledged in explicit "
                                        "acknowledgement mode.")
            self._accept_delivered()
        while True:
            records = self._fetch_round(max(0, int((deadline - time.monotonic()) * 1000)))
            if records or time.monotonic() >= deadline:
                return records

    def acknowledge(self, record: ShareRecord, kind: str = "accept") -> None:
        """Explicit mode: this record is done (accept), to be delivered again (release) or
        unprocessable (reject)."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {sorted(KINDS)}")
        tp = (record.topic, record.partition)
        with self._lock:
            broker = self._held.pop((tp, record.offset), None)
            if broker is None:
                raise IllegalStateError(f"{record.topic}-{record.partition}@{record.offset} "
                                        f"is not held by this consumer")
            self._acks.setdefault(broker, {}).setdefault(tp, {})[record.offset] = KINDS[kind]

    def _accept_delivered(self) -> None:
        for (tp, offset), broker in self._delivered.items():
            self._acks.setdefault(broker, {}).setdefault(tp, {})[offset] = ACCEPT
        self._delivered = {}

    def _leaders(self) -> dict[int, set]:
        by_broker: dict[int, set] = {}
        for tp in self._assignment:
            leader = self.metadata.leader(tp)
            if leader is not None and leader[0] >= 0:
                by_broker.setdefault(leader[0], set()).add(tp)
        return by_broker

    def _maybe_refresh(self) -> None:
        """A partition assigned whose leader the metadata does not know: ask again."""
        with self._lock:
            assigned = list(self._assignment)
        if any(self.metadata.leader(tp) is None for tp in assigned):
            self.metadata.refresh()

    def _requests(self, wait_ms: int, fetch: bool = True) -> dict:
        """broker → (epoch, asked, forgotten) for this round, acknowledgements folded in."""
        with self._lock:
            leaders = self._leaders() if fetch else {}
            out = {}
            for broker in set(leaders) | set(self._acks) | set(self._sessions):
                want = leaders.get(broker, set())
                acks = self._acks.pop(broker, {})
                epoch, have = self._sessions.get(broker, (0, set()))
                if epoch == 0 and acks:               # a new session carries none: ack first
                    self._acks[broker] = acks
                    acks = {}
                if not want and not acks and not have:
                    continue
                asked = {tp: ack_batches(a) for tp, a in acks.items()}
                for tp in want - have if epoch else want:
                    asked.setdefault(tp, [])
                forgotten = sorted(have - want) if epoch else []
                out[broker] = (epoch, asked, forgotten, want)
            return out

    def _fetch_round(self, wait_ms: int) -> list[ShareRecord]:
        self._maybe_refresh()
        requests = self._requests(wait_ms)
        if not requests:
            time.sleep(min(wait_ms / 1000, RETRY_S))
            return []
        calls = {}
        for broker, (epoch, asked, forgotten, _want) in requests.items():
            actor = self.cluster.broker_actor(broker)
            if actor is None:
                continue
            calls[broker] = actor.share_fetch.remote(self.group_id, self.member_id, epoch,
                                                     asked, forgotten,
                                                     min(wait_ms, self.max_wait_ms),
                                                     self.max_records)
        out: list[ShareRecord] = []
        by_ref = {ref: broker for broker, ref in calls.items()}
        ready, late = ray.wait(list(by_ref), num_returns=len(by_ref),
                               timeout=min(wait_ms, self.max_wait_ms) / 1000 + ANSWER_SLACK_S)
        for ref in late:                       # a paused or dead broker: its session is lost
            log.info("share fetch from broker %s unanswered", by_ref[ref])
            ray.cancel(ref)
            self._lost_session(by_ref[ref])
        for ref in ready:
            broker = by_ref[ref]
            epoch, asked, forgotten, want = requests[broker]
            try:
                result = ray.get(ref)
            except ray.exceptions.RayError as exc:
                log.info("share fetch from broker %s failed: %s", broker, exc)
                self._lost_session(broker)
                continue
            out += self._take(broker, epoch, asked, want, result)
        return out

    def _lost_session(self, broker: int) -> None:
        with self._lock:
            self._sessions.pop(broker, None)
        self.metadata.refresh()

    def _take(self, broker, epoch, asked, want, result) -> list[ShareRecord]:
        if result.error:
            if result.error in SESSION_LOST:
                self._lost_session(broker)
            else:
                log.info("share fetch from broker %s: %s", broker, E(result.error).name)
            return []
        acked = {tp: a.ack_error for tp, a in result.partitions.items()
                 if tp in asked and asked[tp]}
        if acked and self.on_commit is not None:
            self.on_commit(acked)
        out: list[ShareRecord] = []
        refresh = False
        with self._lock:
            self._sessions[broker] = (epoch + 1 if epoch < 2**31 - 1 else 1, set(want))
            for tp, a in result.partitions.items():
                if a.error and self._errors.get(tp) != a.error:
                    log.warning("share group %s: %s-%s from broker %s: %s", self.group_id,
                                tp[0], tp[1], broker, E(a.error).name)
                self._errors[tp] = a.error
                if a.error in NEW_LEADER:
                    refresh = True
                    continue
                if not a.acquired:
                    continue
                out += self._records(broker, tp, a)
        if refresh:
            self.metadata.refresh()
        return out

    def _records(self, broker, tp, a) -> list[ShareRecord]:
        """The acquired records of one partition's batches (the lock is held)."""
        ranges = [(f, last, n) for f, last, n in a.acquired]
        counts = {}
        for f, last, n in ranges:
            for o in range(f, last + 1):
                counts[o] = n
        out = []
        view = memoryview(a.records)
        target = self._held if self.explicit else self._delivered
        for h in iter_headers(a.records):
            for r in DefaultRecordBatch(view[h.position:h.position + h.size]):
                n = counts.pop(r.offset, None)
                if n is None or (tp, r.offset) in target:
                    continue       # not acquired, or held already (an old leader's answer)
                out.append(ShareRecord(tp[0], tp[1], r.offset, r.key, r.value, r.timestamp,
                                       tuple(r.headers) if r.headers else (), n))
        acks = self._acks.setdefault(broker, {}).setdefault(tp, {})
        for o in counts:                       # acquired, but no record there: a gap
            acks[o] = GAP
        for r in out:
            target[(tp, r.offset)] = broker
        return out

    # -- commits and close ------------------------------------------------------------------------
    def commit_sync(self, timeout_ms: int = 30_000) -> dict:
        """Send every acknowledgement due now (ShareAcknowledge); {tp: error code}."""
        self._check_open()
        with self._lock:
            if not self.explicit:
                self._accept_delivered()
            due = {b: a for b, a in self._acks.items() if a}
            self._acks = {}
        return self._acknowledge(due, closing=False)

    def commit_async(self) -> None:
        threading.Thread(target=self.commit_sync, daemon=True).start()

    def _acknowledge(self, due: dict, closing: bool) -> dict:
        out = {}
        for broker, acks in due.items():
            with self._lock:
                epoch, tps = self._sessions.get(broker, (0, set()))
            if epoch == 0:                      # no session there: nothing can be acked
                out.update({tp: E.SHARE_SESSION_NOT_FOUND for tp in acks})
                continue
            actor = self.cluster.broker_actor(broker)
            try:
                error, answers, _lock_ms = ray.get(actor.share_acknowledge.remote(
                    self.group_id, self.member_id, -1 if closing else epoch,
                    {tp: ack_batches(a) for tp, a in acks.items()}), timeout=REQUEST_TIMEOUT_S)
            except (ray.exceptions.RayError, AttributeError) as exc:
                log.info("share acknowledge to broker %s failed: %s", broker, exc)
                out.update({tp: E.REQUEST_TIMED_OUT for tp in acks})
                continue
            with self._lock:
                if closing:
                    self._sessions.pop(broker, None)
                elif error in SESSION_LOST:
                    self._sessions.pop(broker, None)
                else:
                    self._sessions[broker] = (epoch + 1, tps)
            if error:
                out.update({tp: error for tp in acks})
            else:
                out.update({tp: code for tp, (code, _leader) in answers.items()})
        if out and self.on_commit is not None:
            self.on_commit(out)
        return out

    def close(self, timeout_ms: int = 30_000) -> None:
        if self._closed:
            return
        with self._lock:
            if not self.explicit:
                self._accept_delivered()
            due = {b: a for b, a in self._acks.items() if a}
            for b in self._sessions:
                due.setdefault(b, {})
            self._acks = {}
        try:
            for broker in list(due):
                if not due[broker]:
                    due[broker] = {}
            self._acknowledge({b: a for b, a in due.items() if a}, closing=True)
            for broker in [b for b, a in due.items() if not a]:
                self._end_session(broker)
        finally:
            self._closed = True
            self._stop.set()
            self._wake.set()
            self._heartbeat_once(leave=True)

    def abandon(self) -> None:
        """Stop heartbeating and fetching without leaving or acknowledging anything, as a
        killed process would (chaos, tests): the coordinator expires the member after its
        session timeout, its records come back when their locks expire."""
        self._closed = True
        self._stop.set()
        self._wake.set()

    def _end_session(self, broker: int) -> None:
        with self._lock:
            epoch, _tps = self._sessions.pop(broker, (0, set()))
        actor = self.cluster.broker_actor(broker)
        if epoch == 0 or actor is None:
            return
        try:
            ray.get(actor.share_acknowledge.remote(self.group_id, self.member_id, -1, {}),
                    timeout=REQUEST_TIMEOUT_S)
        except ray.exceptions.RayError:
            pass

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("This share consumer has already been closed.")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


__all__ = ["ShareConsumer", "ShareRecord", "IllegalStateError", "ack_batches"]
