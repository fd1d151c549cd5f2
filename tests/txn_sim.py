"""Test harness for the pure transaction coordinator (transactions/): a driver playing the
broker's shell, and a seeded simulation of transactional producers against it.

- `Driver` feeds events to one TransactionCoordinator with a fake clock, records every
  Respond (asserting each request is answered at most once) and plays the shell: an Append
  is either acknowledged at once (`auto_ack`) or held until `ack(token, error)`; what was
  written is kept per `__transaction_state` partition (and in one global order) so
  `load(partition)` can replay it at the next coordinator epoch; WriteMarkers are held until
  `write_markers()` reports them written (or written at once with `auto_markers`).
- `World` is the simulation: several producers per transactional id (a new one fences the
  old, which goes on as a zombie), transactions begun, extended, verified, committed and
  aborted at random, appends failing at random (written or not), partitions unloaded and
  reloaded from what was written, the clock jumping past transaction timeouts and
  transactional id expiry. The clock moves like the shell's ticker: a Tick at every
  `next_deadline_ms()` on the way. `check()` states the invariants. The cluster finalizes
  transaction.version 2 (Kafka 4's default) and half the producers speak it (KIP-890 part
  2): their partitions are added by leaders (AddPartitionsToTxn v5, offsets included), they
  end with EndTxn v5 and go on at the epoch its answer gives, and they abort with nothing
  added.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import random
from collections import defaultdict
from dataclasses import dataclass

from replicas.errors import ErrorCode as E
from transactions import messages as m
from transactions import records as rec
from transactions.config import TransactionCoordinatorConfig
from transactions.coordinator import TransactionCoordinator
from transactions.states import TransactionState

T = TransactionState
TIMEOUT_MS = 60_000


class FakeClock:
    def __init__(self, now: int = 0):
        self.now = now

    def __call__(self) -> int:
        return self.now


def durable(md) -> rec.TransactionLogValue:
    """What the log holds for a metadata; Kafka keeps an Empty's old start time in memory
    only (its log value says -1)."""
    v = md.to_log_value()
    if md.state is T.EMPTY:
        v = dataclasses.replace(v, transaction_start_timestamp_ms=-1)
    return v


class Driver:
    def __init__(self, config: TransactionCoordinatorConfig | None = None, auto_ack: bool = True,
                 auto_markers: bool = False, now: int = 0, first_producer_id: int = 1000):
        self.clock = FakeClock(now)
        self.config = config or TransactionCoordinatorConfig()
        self.producer_ids = itertools.count(first_producer_id)
        self.coord = TransactionCoordinator(1, self.clock, self.new_producer_id, self.config)
        self.auto_ack, self.auto_markers = auto_ack, auto_markers
        self.answers: dict[int, object] = {}
        self.issued: dict[int, object] = {}
        self.inflight: dict[int, m.Append] = {}
        self.appends: list[m.Append] = []
        self.logs: dict[int, list] = defaultdict(list)
        self.written: list[tuple[int, bytes, bytes | None]] = []  # (partition, key, value)
        self.markers: list[m.WriteMarkers] = []           # every WriteMarkers, in order
        self.pending_markers: list[m.WriteMarkers] = []
        self.epochs: dict[int, int] = defaultdict(lambda: -1)  # partition → leader epoch
        self.effects: list = []                            # every effect, in order
        self.rids = itertools.count(1)

    def new_producer_id(self) -> int:
        return next(self.producer_ids)

    # -- events ---------------------------------------------------------------------------
    def send(self, event) -> list:
        effects = self.coord.process(event)
        acks, marks = [], []
        for eff in effects:
            self.effects.append(eff)
            if isinstance(eff, m.Respond):
                assert eff.request_id in self.issued, f"answer to unknown request {eff}"
                assert eff.request_id not in self.answers, \
                    f"second answer {eff} to {eff.request_id}"
                self.answers[eff.request_id] = eff.result
            elif isinstance(eff, m.Append):
                self.appends.append(eff)
                self.inflight[eff.token] = eff
                acks.append(eff.token)
            else:
                assert isinstance(eff, m.WriteMarkers), eff
                self.markers.append(eff)
                self.pending_markers.append(eff)
                marks.append(eff)
        if self.auto_ack:
            for token in acks:
                self.ack(token)
        if self.auto_markers:
            for wm in marks:
                self.write_markers(wm)
        return effects

    def write(self, append: m.Append) -> None:
        self.logs[append.partition].extend(append.records)
        self.written += [(append.partition, k, v) for k, v in append.records]

    def ack(self, token: int, error: int = E.NONE, written: bool | None = None) -> list:
        append = self.inflight.pop(token)
        if written is None:
            written = error == E.NONE
        if written:
            self.write(append)
        return self.send(m.AppendDone(token, error))

    def write_markers(self, wm: m.WriteMarkers | None = None) -> list:
        wm = wm or self.pending_markers[0]
        self.pending_markers.remove(wm)
        return self.send(m.MarkersWritten(wm.transactional_id, wm.producer_id,
                                          wm.producer_epoch, wm.committed,
                                          wm.coordinator_epoch))

    def request(self, cls, **fields) -> int:
        rid = next(self.rids)
        event = cls(request_id=rid, **fields)
        self.issued[rid] = event
        self.send(event)
        return rid

    def call(self, cls, **fields):
        """A request answered at once (appends acknowledged): its result."""
        rid = self.request(cls, **fields)
        assert rid in self.answers, f"{cls.__name__} was parked"
        return self.answers[rid]

    def answer(self, rid: int):
        return self.answers.get(rid)

    def unanswered(self) -> set[int]:
        return set(self.issued) - set(self.answers)

    def advance(self, ms: int) -> list:
        self.clock.now += ms
        return self.send(m.Tick())

    # -- partitions -----------------------------------------------------------------------
    def partition(self, tid: str) -> int:
        return self.coord.partition_for(tid)

    def own(self, *tids: str) -> None:
        for p in sorted({self.partition(t) for t in tids}):
            self.load(p)

    def load(self, partition: int, epoch: int | None = None) -> list:
        if epoch is None:
            epoch = self.epochs[partition] + 1
        self.epochs[partition] = max(self.epochs[partition], epoch)
        return self.send(m.LoadPartition(partition, epoch, tuple(self.logs[partition])))

    def unload(self, partition: int) -> list:
        self.epochs[partition] += 1  # the new leader's epoch
        return self.send(m.UnloadPartition(partition, self.epochs[partition]))

    def last_logged(self, tid: str):
        """The last value written for `tid` (None: a tombstone; KeyError: nothing)."""
        key = rec.encode_key(tid)
        for k, v in reversed(self.logs[self.partition(tid)]):
            if k == key:
                return None if v is None else rec.decode_value(v)
        raise KeyError(tid)

    # -- requests -------------------------------------------------------------------------
    def init(self, tid: str | None, timeout: int = TIMEOUT_MS, pid: int = -1, epoch: int = -1,
             version: int = 5):
        return self.call(m.InitProducerId, transactional_id=tid, transaction_timeout_ms=timeout,
                         producer_id=pid, producer_epoch=epoch, version=version)

    def add(self, tid: str, pid: int, epoch: int, *partitions, verify: bool = False,
            version: int = 3):
        return self.call(m.AddPartitionsToTxn, transactional_id=tid, producer_id=pid,
                         producer_epoch=epoch, partitions=tuple(partitions or (("t", 0),)),
                         verify_only=verify, version=version)

    def add_offsets(self, tid: str, pid: int, epoch: int, group: str = "g", version: int = 4):
        return self.call(m.AddOffsetsToTxn, transactional_id=tid, producer_id=pid,
                         producer_epoch=epoch, group_id=group, version=version)

    def end(self, tid: str, pid: int, epoch: int, committed: bool = True, version: int = 4):
        return self.call(m.EndTxn, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                         committed=committed, version=version)

    def describe(self, *tids: str) -> tuple[m.TransactionDescription, ...]:
        return self.call(m.DescribeTransactions, transactional_ids=tids).transactions

    def ready(self, tid: str, **kw) -> tuple[int, int]:
        """A transactional id owned and initialized: (producer id, epoch)."""
        if self.partition(tid) not in self.coord.owned_partitions:
            self.own(tid)
        res = self.init(tid, **kw)
        assert res.error == E.NONE, res
        return res.producer_id, res.producer_epoch

    def ongoing(self, tid: str, *partitions, **kw) -> tuple[int, int]:
        pid, epoch = self.ready(tid, **kw)
        assert self.add(tid, pid, epoch, *partitions).error == E.NONE
        return pid, epoch


# ---------------------------------------------------------------------------------------------
# the simulation
TOPICS = (("a", 0), ("a", 1), ("b", 0))
GROUPS = ("g0", "g1")
WRITE_OUTCOMES = [(E.NOT_ENOUGH_REPLICAS, False), (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, True),
                  (E.REQUEST_TIMED_OUT, True), (E.NOT_LEADER_OR_FOLLOWER, False)]
SIM_CONFIG = TransactionCoordinatorConfig(
    transaction_state_log_num_partitions=3, transaction_max_timeout_ms=30_000,
    transactional_id_expiration_ms=30_000,
    transaction_abort_timed_out_transaction_cleanup_interval_ms=1_000,
    transaction_remove_expired_transaction_cleanup_interval_ms=5_000)


@dataclass
class SimProducer:
    name: str
    tid: str
    pid: int = -1
    epoch: int = -1
    state: str = "init"  # init | ready | in_txn | ending | dead
    committing: bool = False
    bump_after: bool = False  # after this abort, bump the epoch (KIP-360's recovery)
    inflight: int | None = None
    tv2: bool = False         # a transaction version 2 client


class World:
    def __init__(self, seed: int, tids=("tx0", "tx1", "tx2", "tx3"), producers_per_tid: int = 1):
        self.rng = random.Random(seed)
        self.d = Driver(SIM_CONFIG, auto_ack=False)
        self.tids, self.producers_per_tid = tids, producers_per_tid
        self.producers: list[SimProducer] = []
        self.names = itertools.count()
        self.outcome: dict[int, tuple[int, bool]] = {}  # token → (error, written), decided
        self.failures = True                       # appends may fail
        self.unloaded: set[int] = set()
        self.snapshots: dict[int, dict] = {}       # partition → its in-sync tids at unload
        self.owner: dict[str, tuple[int, int]] = {}   # tid → last (pid, epoch) handed out
        self.init_epochs: dict[int, int] = {}      # pid → last epoch handed out for it
        self.diverged: set[str] = set()            # a failed append was written anyway
        self.settled: dict[str, int] = {}          # tid → when its last append settled
        self.ended: list[tuple[int, str, int, int, bool, bool]] = []  # EndTxn NONE answers
        self.markers_done: dict[str, m.WriteMarkers] = {}  # tid → last markers written
        self.prepared: dict[str, rec.TransactionLogValue] = {}  # tid → last Prepare* appended
        self.violations: list[str] = []
        self.stats: collections.Counter = collections.Counter()
        self.d.send(m.FinalizedTransactionVersion(2))
        for p in sorted({self.d.partition(t) for t in tids}):
            self.d.load(p)
        for tid in tids:
            for _ in range(producers_per_tid):
                self.spawn(tid)

    # -- plumbing -------------------------------------------------------------------------
    def send(self, event) -> None:
        start = len(self.d.effects)
        self.d.send(event)
        for i in range(start, len(self.d.effects)):
            eff = self.d.effects[i]
            if isinstance(eff, m.Append):
                self._decide(eff)
            elif isinstance(eff, m.Respond):
                self._on_respond(eff, i)

    def _decide(self, append: m.Append) -> None:
        self._check_completion(append)
        # decided when emitted, so the log keeps the order the coordinator appended in
        if self.failures and self.rng.random() < 0.12:
            error, written = self.rng.choice(WRITE_OUTCOMES)
            self.stats["failed append, written" if written else "failed append"] += 1
        else:
            error, written = E.NONE, True
        self.outcome[append.token] = (error, written)
        if written:
            self.d.write(append)

    def deliver(self, token: int) -> None:
        append = self.d.inflight.pop(token)
        error, written = self.outcome.pop(token)
        owned = append.partition not in self.unloaded
        for key, _ in append.records:
            tid = rec.decode_key(key).transactional_id
            self.settled[tid] = self.d.clock.now
            if error == E.NONE:
                self.diverged.discard(tid)
            elif written and owned:
                self.diverged.add(tid)
        self.send(m.AppendDone(token, error))
        if error == E.NOT_LEADER_OR_FOLLOWER and owned:
            self.unload(append.partition)  # leadership moved: the shell resigns

    def write_markers(self, wm: m.WriteMarkers) -> None:
        self.d.pending_markers.remove(wm)
        self.markers_done[wm.transactional_id] = wm
        self.stats["markers written"] += 1
        self.send(m.MarkersWritten(wm.transactional_id, wm.producer_id, wm.producer_epoch,
                                   wm.committed, wm.coordinator_epoch))

    def unload(self, p: int) -> None:
        if p in self.unloaded:
            return
        self.snapshots[p] = self.in_sync(p)
        self.unloaded.add(p)
        self.stats["unload"] += 1
        self.d.epochs[p] += 1
        self.send(m.UnloadPartition(p, self.d.epochs[p]))
        left = [rid for rid in self.d.unanswered()
                if self.d.partition(self.d.issued[rid].transactional_id or "") == p]
        if left:
            self.violations.append(f"unload of {p} left requests {left} unanswered")

    def reload(self, p: int) -> None:
        self.unloaded.discard(p)
        self.stats["reload"] += 1
        self.d.epochs[p] += 1
        self.send(m.BeginLoad(p))
        self.send(m.LoadPartition(p, self.d.epochs[p], tuple(self.d.logs[p])))
        now = self.d.clock.now
        for tid in self.tids:
            if self.d.partition(tid) == p:
                self.settled[tid] = now
                self.diverged.discard(tid)
        for tid, value in self.snapshots.pop(p, {}).items():
            md = self.d.coord.transaction(tid)
            if (None if md is None else durable(md)) != value:
                self.violations.append(f"{tid} reloaded as {md}, was {value}")

    def advance_to(self, target: int) -> None:
        """The shell's ticker: a Tick at every deadline on the way, then at `target`."""
        while (deadline := self.d.coord.next_deadline_ms()) <= target:
            self.d.clock.now = max(self.d.clock.now, deadline)
            self.tick()
            self.check()
        self.d.clock.now = target
        self.tick()

    def tick(self) -> None:
        """A Tick; a transaction the coordinator starts aborting is fenced first: its epoch
        grows (unless a failed fence already grew it)."""
        before = {}
        for tid in self.tids:
            md = self.d.coord.transaction(tid)
            if md is not None and md.state is T.ONGOING and md.pending_state is None:
                before[tid] = (md.producer_epoch, md.has_failed_epoch_fence)
        start = len(self.d.effects)
        self.send(m.Tick())
        written = {}                   # tid → the value this Tick appended for it
        for eff in self.d.effects[start:]:
            if isinstance(eff, m.Append):
                for key, value in eff.records:
                    if value is not None:
                        written[rec.decode_key(key).transactional_id] = rec.decode_value(value)
        for tid, (epoch, failed_fence) in before.items():
            md = self.d.coord.transaction(tid)
            if md is not None and md.pending_state is not None:
                self.stats["timeout abort"] += 1
                # the PrepareAbort carries the fence's bump (at transaction version 2 the
                # metadata takes it once that record is written)
                v = written.get(tid)
                bumped = v.producer_epoch if v is not None else md.producer_epoch
                if not (bumped > epoch or (failed_fence and bumped == epoch)):
                    self.violations.append(f"{tid} aborted on timeout without a fence: {md}")

    def request(self, pr: SimProducer | None, cls, **fields) -> int:
        rid = next(self.d.rids)
        event = cls(request_id=rid, **fields)
        self.d.issued[rid] = event
        if pr is not None:
            pr.inflight = rid
        self.send(event)
        return rid

    # -- invariants checked as each answer is given ---------------------------------------
    def _on_respond(self, eff: m.Respond, index: int) -> None:
        req, res = self.d.issued[eff.request_id], eff.result
        self.stats[(type(req).__name__, getattr(res, "error", None))] += 1
        if isinstance(req, m.InitProducerId):
            if res.error == E.NONE:
                tid, pid, epoch = req.transactional_id, res.producer_id, res.producer_epoch
                given = (req.producer_id, req.producer_epoch)
                if req.producer_id >= 0 and given != self.owner.get(tid) \
                        and pid in self.init_epochs:
                    self.violations.append(f"{req} by a fenced producer got {res}, the owner "
                                           f"is {self.owner.get(tid)}")
                if self.init_epochs.get(pid, -1) >= epoch:
                    self.violations.append(f"{pid} handed out epoch {epoch} after "
                                           f"{self.init_epochs[pid]}")
                self.init_epochs[pid] = epoch
                self.owner[tid] = (pid, epoch)
                md = self.d.coord.transaction(tid)
                if md is None or (md.producer_id, md.producer_epoch, md.state) != \
                        (pid, epoch, T.EMPTY):
                    self.violations.append(f"{req} answered {res} before it was in the cache")
            return
        if isinstance(req, (m.DescribeTransactions, m.ListTransactions)) or res.error != E.NONE:
            return
        # a success goes only to the last producer InitProducerId answered, at the epoch
        # the coordinator holds: a fenced producer never succeeds again
        ids = (req.producer_id, req.producer_epoch)
        md = self.d.coord.transaction(req.transactional_id)
        if isinstance(req, m.EndTxn) and req.version >= 5:
            # version 2: the answer is the next transaction's epoch, the one the coordinator
            # holds, one above the request's (a retry gets the same answer again)
            bumped = (req.producer_id, req.producer_epoch + 1)
            if self.owner.get(req.transactional_id) not in (ids, bumped) or md is None \
                    or (md.producer_id, md.producer_epoch) != bumped \
                    or (res.producer_id, res.producer_epoch) != bumped:
                self.violations.append(f"{req} answered {res} but the owner is "
                                       f"{self.owner.get(req.transactional_id)}, metadata {md}")
                return
            self.stats["EndTxn v5 bumped" if md.partitions or md.state is not T.PREPARE_ABORT
                       else "EndTxn v5 empty abort"] += 1
            self.owner[req.transactional_id] = bumped
            self.init_epochs[req.producer_id] = max(self.init_epochs.get(req.producer_id, -1),
                                                    bumped[1])
            # an abort with nothing added is completed without markers
            first = md.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT) and bool(md.partitions)
            self.ended.append((index, req.transactional_id, *bumped, req.committed, first))
            return
        if self.owner.get(req.transactional_id) != ids or md is None \
                or (md.producer_id, md.producer_epoch) != ids:
            self.violations.append(f"{req} succeeded but the owner is "
                                   f"{self.owner.get(req.transactional_id)}, metadata {md}")
        elif isinstance(req, m.EndTxn):
            first = md.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT)
            self.ended.append((index, req.transactional_id, *ids, req.committed, first))
        elif isinstance(req, m.AddPartitionsToTxn) and not req.verify_only or \
                isinstance(req, m.AddOffsetsToTxn):
            wanted = set(req.partitions) if isinstance(req, m.AddPartitionsToTxn) else \
                {("__consumer_offsets", rec.partition_for(req.group_id, 50))}
            if md.state is not T.ONGOING or not wanted <= md.partitions:
                self.violations.append(f"{req} answered before its partitions were added: {md}")

    def _check_completion(self, append: m.Append) -> None:
        """A Complete* is written only after the markers of that very transaction were
        written at the coordinator epoch the partition is owned at."""
        epoch_now = self.d.coord.coordinator_epoch(append.partition)
        for key, value in append.records:
            if value is None:
                continue
            v = rec.decode_value(value)
            tid = rec.decode_key(key).transactional_id
            if v.transaction_status in (T.PREPARE_COMMIT.id, T.PREPARE_ABORT.id):
                self.prepared[tid] = v
            if v.transaction_status not in (T.COMPLETE_COMMIT.id, T.COMPLETE_ABORT.id):
                continue
            prepared = self.prepared.get(tid)
            if prepared is not None and not prepared.transaction_partitions \
                    and v.transaction_status == T.COMPLETE_ABORT.id \
                    and (prepared.producer_id, prepared.producer_epoch) == \
                    (v.producer_id, v.producer_epoch):
                continue                # an abort with nothing added has no markers
            wm = self.markers_done.get(tid)
            committed = v.transaction_status == T.COMPLETE_COMMIT.id
            if wm is None or (wm.producer_id, wm.producer_epoch, wm.committed,
                              wm.coordinator_epoch) != (v.producer_id, v.producer_epoch,
                                                        committed, epoch_now):
                self.violations.append(f"{tid} completed as {v} at epoch {epoch_now} after "
                                       f"markers {wm}")

    def in_sync(self, p: int) -> dict:
        """tid → durable value (None: not in the cache) of the tids of `p` whose memory must
        equal the log: no transition pending, no failed write that was written anyway, no
        failed fence (its bump lives in memory only), no creation that was never written."""
        out = {}
        for tid in self.tids:
            if self.d.partition(tid) != p or tid in self.diverged:
                continue
            md = self.d.coord.transaction(tid)
            if md is None:
                out[tid] = None
            elif md.pending_state is None and not md.has_failed_epoch_fence \
                    and md.producer_epoch >= 0:
                out[tid] = durable(md)
        return out

    def logged(self, tid: str):
        try:
            return self.d.last_logged(tid)
        except KeyError:
            return None

    def check(self) -> None:
        coord, now = self.d.coord, self.d.clock.now
        interval = SIM_CONFIG.transaction_abort_timed_out_transaction_cleanup_interval_ms
        for p in coord.owned_partitions - coord.loading_partitions:
            for tid, value in self.in_sync(p).items():
                if value != self.logged(tid):
                    self.violations.append(f"{tid} in memory {value} but logged "
                                           f"{self.logged(tid)}")
        # no transaction stays Ongoing past its timeout and one abort interval, counted from
        # when its last append settled (a failed abort is retried at the next interval)
        for tid in self.tids:
            md = coord.transaction(tid)
            if md is None or md.state is not T.ONGOING or md.pending_state is not None:
                continue
            since = max(md.txn_start_timestamp_ms + md.txn_timeout_ms, self.settled.get(tid, 0))
            if now > since + interval:
                self.violations.append(f"{tid} still Ongoing at {now}: {md}")

    # -- the producers --------------------------------------------------------------------
    def spawn(self, tid: str) -> SimProducer:
        pr = SimProducer(f"p{next(self.names)}", tid, tv2=self.rng.random() < 0.5)
        self.producers.append(pr)
        return pr

    def act(self, pr: SimProducer) -> None:
        if pr.inflight is not None or pr.state == "dead":
            return
        rng, ids = self.rng, dict(transactional_id=pr.tid, producer_id=pr.pid,
                                  producer_epoch=pr.epoch)
        end_version = 5 if pr.tv2 else 4
        if pr.state == "init":
            kip360 = pr.pid >= 0 and rng.random() < 0.8
            self.request(pr, m.InitProducerId, transactional_id=pr.tid,
                         transaction_timeout_ms=rng.choice((5_000, 10_000, 20_000)),
                         producer_id=pr.pid if kip360 else -1,
                         producer_epoch=pr.epoch if kip360 else -1)
        elif pr.state == "ending":
            self.request(pr, m.EndTxn, committed=pr.committing, version=end_version, **ids)
        elif pr.tv2 and pr.state == "ready" and rng.random() < 0.05:
            pr.state, pr.committing = "ending", False   # an abort with nothing added
            self.request(pr, m.EndTxn, committed=False, version=5, **ids)
        elif pr.state == "ready" and rng.random() < 0.05:
            pr.state = "init"  # recovering from an abortable error: bump with its ids
            self.act(pr)
        elif pr.state == "in_txn" and rng.random() < 0.35:
            pr.state, pr.committing = "ending", rng.random() < 0.6
            pr.bump_after = not pr.committing and rng.random() < 0.2
            self.request(pr, m.EndTxn, committed=pr.committing, version=end_version, **ids)
        elif pr.tv2 and rng.random() < 0.8:
            # a leader adds the partitions of a Produce v12 (or the group coordinator the
            # offsets partition of a TxnOffsetCommit v5) for the client
            offsets = ("__consumer_offsets", rec.partition_for(rng.choice(GROUPS), 50))
            self.request(pr, m.AddPartitionsToTxn, partitions=tuple(
                rng.sample(TOPICS + (offsets,), rng.randint(1, 2))), version=5, **ids)
        elif pr.tv2:
            pass                               # version 2 clients send no verify-only
        elif pr.state == "in_txn" and rng.random() < 0.3:
            self.request(pr, m.AddPartitionsToTxn, partitions=tuple(
                rng.sample(TOPICS, rng.randint(1, 2))), verify_only=True, **ids)
        elif rng.random() < 0.8:
            self.request(pr, m.AddPartitionsToTxn, partitions=tuple(
                rng.sample(TOPICS, rng.randint(1, 2))), **ids)
        else:
            self.request(pr, m.AddOffsetsToTxn, group_id=rng.choice(GROUPS), **ids)

    def on_answer(self, pr: SimProducer, rid: int, res) -> None:
        pr.inflight = None
        req, error = self.d.issued[rid], res.error
        if pr.state == "dead":
            return
        if isinstance(req, m.InitProducerId):
            if error == E.NONE:
                pr.pid, pr.epoch, pr.state = res.producer_id, res.producer_epoch, "ready"
            elif error == E.PRODUCER_FENCED:
                self._fenced(pr)
            return
        if error in (E.PRODUCER_FENCED, E.INVALID_PRODUCER_ID_MAPPING):
            self._fenced(pr)
        elif isinstance(req, m.EndTxn):
            if error == E.NONE:
                if req.version >= 5:
                    pr.pid, pr.epoch = res.producer_id, res.producer_epoch
                pr.state = "init" if pr.bump_after else "ready"
                pr.bump_after = False
            elif error == E.INVALID_TXN_STATE:
                pr.state = "init"
        elif isinstance(req, m.AddPartitionsToTxn) and req.verify_only:
            pass
        elif error == E.NONE:
            pr.state = "in_txn"

    def _fenced(self, pr: SimProducer) -> None:
        """A zombie learns it is fenced: it dies, or restarts as a new incarnation."""
        self.stats["fenced"] += 1
        if self.rng.random() < 0.8:
            pr.state = "dead"
        else:
            pr.pid = pr.epoch = -1
            pr.state = "init"

    def collect_answers(self) -> None:
        for pr in self.producers:
            if pr.inflight is not None and pr.inflight in self.d.answers:
                self.on_answer(pr, pr.inflight, self.d.answers[pr.inflight])

    # -- one step -------------------------------------------------------------------------
    def step(self) -> None:
        rng, roll, d = self.rng, self.rng.random(), self.d
        if roll < 0.12:
            scale = rng.choices((300, 3_000, 40_000), weights=(70, 25, 5))[0]
            jump = rng.randint(0, scale)
            self.advance_to(d.clock.now + jump)
        elif roll < 0.55:
            self.act(rng.choice(self.producers))
        elif roll < 0.75 and d.inflight:
            self.deliver(rng.choice(sorted(d.inflight)))  # in any order
        elif roll < 0.85 and d.pending_markers:
            self.write_markers(rng.choice(d.pending_markers))
        elif roll < 0.865:
            tid = rng.choice(self.tids)
            alive = [pr for pr in self.producers if pr.tid == tid and pr.state != "dead"]
            if len(alive) < self.producers_per_tid + 1:
                self.spawn(tid)  # the old producers of tid go on as zombies
                self.stats["spawn"] += 1
        elif roll < 0.92:
            self.request(None, m.DescribeTransactions, transactional_ids=tuple(self.tids))
        elif roll < 0.94:
            self.request(None, m.ListTransactions,
                         state_filters=rng.choice(((), ("Ongoing",), ("Nope", "Empty"))))
        elif roll < 0.96:
            self.unload(d.partition(rng.choice(self.tids)))
        if self.unloaded and rng.random() < 0.1:
            self.reload(rng.choice(sorted(self.unloaded)))
        self.collect_answers()
        self.check()

    def _drain(self) -> None:
        """Every partition loaded, every append and marker completed."""
        for p in sorted(self.unloaded):
            self.reload(p)
        while self.d.inflight or self.d.pending_markers:
            if self.d.inflight:
                self.deliver(min(self.d.inflight))
            else:
                self.write_markers(self.d.pending_markers[0])
            for p in sorted(self.unloaded):
                self.reload(p)

    def finish(self) -> None:
        """Producers stop; appends stop failing; every append and marker completes, every
        partition is loaded again, and time runs past every timeout: every transaction
        settles in Empty, CompleteCommit or CompleteAbort without a pending transition."""
        for pr in self.producers:
            pr.state = "dead"
        self.failures = False
        for _ in range(25):
            self._drain()
            self.advance_to(self.d.clock.now + 2_000)
            self.check()
        self._drain()           # what the last jump of the clock started (an expiry, say)
        self.collect_answers()
        self.check()
        self.check_endings()
        for tid in self.tids:
            md = self.d.coord.transaction(tid)
            if md is not None and (md.pending_state is not None or md.state not in (
                    T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT)):
                self.violations.append(f"{tid} did not settle: {md}")

    def check_endings(self) -> None:
        """Every EndTxn answered NONE: the first WriteMarkers of its transactional id after
        the answer (if it was the answer that ended the transaction) carries its producer,
        epoch and result, and the log holds the matching Complete* after it."""
        written_at = {}
        for i, eff in enumerate(self.d.effects):
            if isinstance(eff, m.WriteMarkers):
                written_at.setdefault(eff.transactional_id, []).append((i, eff))
        for at, tid, pid, epoch, committed, first in self.ended:
            if first:
                wm = next((e for i, e in written_at.get(tid, ()) if i > at), None)
                if wm is None or (wm.producer_id, wm.producer_epoch, wm.committed) != \
                        (pid, epoch, committed):
                    self.violations.append(f"EndTxn {tid} {pid}/{epoch} {committed}: "
                                           f"markers {wm}")
            status = (T.COMPLETE_COMMIT if committed else T.COMPLETE_ABORT).id
            key = rec.encode_key(tid)
            if not any(k == key and v is not None and (lambda x: (
                    x.transaction_status, x.producer_id, x.producer_epoch))(
                    rec.decode_value(v)) == (status, pid, epoch) for _, k, v in self.d.written):
                self.violations.append(f"EndTxn {tid} {pid}/{epoch} {committed} never completed")
