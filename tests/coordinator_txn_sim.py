"""A seeded simulation of transactional offset commits (KIP-98) against the pure group
coordinator, on tests/coordinator_sim.py's Driver.

- Transactional producers commit offsets of a few groups (two of them share an offsets
  partition) in transactions that commit or abort at random; plain committers (simple
  consumers) commit offsets of the same partitions in between. Every committed value is
  unique, so the simulation knows who wrote each one and where it is in the log.
- Appends are written to the log when emitted (the order the coordinator appended in) and
  acknowledged in any order; some fail, written or not.
- A transaction ends with its markers appended to the logs of its groups' partitions
  (sometimes with a TxnOffsetCommit still in flight, as a timed-out transaction); the
  CompleteTxn that follows is delivered later, in any order; the producer starts its next
  transaction only once it was (the transaction coordinator completes the transaction after
  the markers' answers). Some markers are written while their partition is unloaded or
  loading, so the coordinator learns them from a reload, or after the load.
- Offsets partitions are unloaded and reloaded; a reload reads the log at BeginLoad and
  hands it over later (markers may be appended in between, their CompleteTxn deferred).
`check()` states the invariants: every committed offset the coordinator holds (and every
one an OffsetFetch answers) was written by a plain commit or by a transaction that had
COMMITTED, never by an aborted or open one, and never moves to an older log position; a
transactional offset acknowledged in an open transaction makes its partition unstable.
And an oracle: what the coordinator has LEARNT of each partition since its load (the log it
was handed, the appends acknowledged since, the markers it was told, in that order) says
exactly which offset is committed and which partitions are unstable; `expected_view` computes
it from the simulation's own bookkeeping (who wrote what, which transaction a marker ends),
not from the coordinator's rules.
"""

from __future__ import annotations

import collections
import itertools
import random
from dataclasses import dataclass, field

from coordinator import messages as m
from coordinator import records as R
from coordinator.config import GroupCoordinatorConfig
from replicas.errors import ErrorCode as E
from tests.coordinator_sim import WRITE_OUTCOMES, Driver

TOPIC, TOPIC_PARTITIONS = "t", 3
GROUPS = ("g0", "g1", "g4")   # with 4 offsets partitions, g0 and g4 share partition 1


@dataclass
class TxnProducer:
    producer_id: int
    txn: int = 0
    open: bool = False
    groups: set = field(default_factory=set)         # the groups of the open transaction
    in_flight: int | None = None                     # a TxnOffsetCommit waiting for its answer
    completing: bool = False                         # markers written, CompleteTxn queued


class TxnWorld:
    def __init__(self, seed: int, producers: int = 3):
        self.rng = random.Random(seed)
        self.d = Driver(GroupCoordinatorConfig(offsets_topic_num_partitions=4), seed=seed,
                        auto_ack=False)
        self.producers = [TxnProducer(1000 + i) for i in range(producers)]
        self.values = itertools.count(1)
        self.outcome: dict[int, int] = {}             # token → error decided when emitted
        self.writer: dict = {}                        # (group, tp, value) → "plain" | (pid, txn)
        self.position: dict = {}                      # (group, tp, value) → its log index
        self.ended: dict = {}                         # (pid, txn) → committed?
        self.requests: dict[int, tuple] = {}          # request id → what it was
        self.seen: dict = {}                          # (group, tp) → latest log index seen
        self.completions: list = []                   # CompleteTxn not delivered yet
        self.unloaded: set[int] = set()
        self.loading: dict[int, tuple] = {}           # partition → the log read at BeginLoad
        self.marker_txn: dict = {}                    # (partition, log offset) → (pid, txn)
        self.view: dict[int, list | None] = {}        # partition → what the coordinator learnt
        self.deferred: dict[int, list] = {}           # partition → markers told while loading
        self.sessions = itertools.count(1)
        self.session: dict[int, int | None] = {}      # partition → its current load
        self.emitted: dict[int, tuple] = {}           # token → (partition, session, entries)
        self.violations: list[str] = []
        self.stats: collections.Counter = collections.Counter()
        for p in self.partitions():
            self.finish_load(p, ())

    def partitions(self) -> list[int]:
        return sorted({self.d.partition(g) for g in GROUPS})

    # -- plumbing -------------------------------------------------------------------------
    def send(self, event) -> None:
        for eff in self.d.send(event):
            if isinstance(eff, m.Append):
                self._decide(eff)

    def _decide(self, append: m.Append) -> None:
        # decided when emitted, so the log keeps the order the coordinator appended in
        if self.rng.random() < 0.15:
            error, written = self.rng.choice(WRITE_OUTCOMES)
            self.stats["failed append, written" if written else "failed append"] += 1
        else:
            error, written = E.NONE, True
        self.outcome[append.token] = error
        log = self.d.logs[append.partition]
        if written:
            self.d.write(append)
        entries = []
        for i, record in enumerate(append.records):
            entry = self._entry(record)
            entries.append(entry)
            if written:
                self.position[entry] = len(log) - len(append.records) + i
        self.emitted[append.token] = (append.partition, self.session[append.partition], entries)

    @staticmethod
    def _entry(record) -> tuple:
        key = R.decode_key(record.key)
        value = R.decode_offset_commit_value(record.value).offset
        return key.group, (key.topic, key.partition), value

    def request(self, kind: str, cls, **fields) -> int:
        rid = next(self.d._rid)
        event = cls(request_id=rid, **fields)
        self.d.issued[rid] = event
        self.requests[rid] = (kind, event)
        self.send(event)
        return rid

    # -- the actors -----------------------------------------------------------------------
    def txn_commit(self, pr: TxnProducer) -> None:
        if pr.in_flight is not None or pr.completing:
            return
        if not pr.open:
            pr.txn, pr.open, pr.groups = pr.txn + 1, True, set()
        gid = self.rng.choice(GROUPS)
        offsets = {}
        for p in self.rng.sample(range(TOPIC_PARTITIONS), self.rng.randint(1, 2)):
            value = next(self.values)
            offsets[(TOPIC, p)] = value
            self.writer[(gid, (TOPIC, p), value)] = (pr.producer_id, pr.txn)
        pr.groups.add(gid)   # AddOffsetsToTxn: the group's partition is in the transaction
        pr.in_flight = self.request(
            "txn", m.TxnOffsetCommit, transactional_id=f"tx{pr.producer_id}", group_id=gid,
            producer_id=pr.producer_id, producer_epoch=0,
            offsets=tuple(m.CommitOffset(t, p, v) for (t, p), v in offsets.items()))

    def plain_commit(self) -> None:
        gid, p = self.rng.choice(GROUPS), self.rng.randrange(TOPIC_PARTITIONS)
        value = next(self.values)
        self.writer[(gid, (TOPIC, p), value)] = "plain"
        self.request("plain", m.OffsetCommit, group_id=gid,
                     offsets=(m.CommitOffset(TOPIC, p, value),))

    def end_txn(self, pr: TxnProducer) -> None:
        """EndTxn: the markers are appended to every partition of the transaction's groups
        (an append in flight too: the client would not, a timed-out transaction would)."""
        if not pr.open or pr.completing or (pr.in_flight is not None and self.rng.random() < 0.6):
            return
        committed = self.rng.random() < 0.6
        self.ended[(pr.producer_id, pr.txn)] = committed
        pr.open = False
        partitions = sorted({self.d.partition(g) for g in pr.groups})
        for p in partitions:
            self.marker_txn[(p, len(self.d.logs[p]))] = (pr.producer_id, pr.txn)
        self.d.marker(pr.producer_id, partitions, committed, complete=False)
        self.stats["commit" if committed else "abort"] += 1
        if pr.in_flight is not None:
            self.stats["ended with an append in flight"] += 1
        if any(p in self.unloaded or p in self.loading for p in partitions):
            self.stats["marker while not loaded"] += 1
        pr.completing = True
        self.completions.append((pr, partitions, committed))

    def deliver_completion(self, index: int) -> None:
        pr, partitions, committed = self.completions.pop(index)
        if any(p in self.loading for p in partitions):
            self.stats["completion while loading"] += 1
        if any(p in self.unloaded for p in partitions):
            self.stats["completion while unloaded"] += 1
        self.send(m.CompleteTxn(pr.producer_id, tuple(partitions), committed))
        pr.completing = False
        for p in partitions:
            marker = ("marker", (pr.producer_id, pr.txn), committed)
            if self.session.get(p) is not None:
                self.view[p].append(marker)
            elif p in self.loading:
                self.deferred[p].append(marker)

    def deliver_append(self, token: int) -> None:
        self.d.inflight.pop(token)
        error = self.outcome.pop(token)
        self.send(m.AppendDone(token, error))
        p, session, entries = self.emitted.pop(token)
        if error == E.NONE and self.session[p] == session:
            self.view[p] += [("record", entry, self.position[entry]) for entry in entries]

    # -- leadership of the offsets partitions ---------------------------------------------
    def unload(self, p: int) -> None:
        self.unloaded.add(p)
        self.session[p] = self.view[p] = None
        self.send(m.UnloadPartition(p))

    def begin_load(self, p: int) -> None:
        self.unloaded.discard(p)
        self.loading[p] = tuple(self.d.logs[p])   # read now, handed over later
        self.deferred[p] = []
        self.send(m.BeginLoad(p))

    def finish_load(self, p: int, log: tuple) -> None:
        self.loading.pop(p, None)
        self.session[p] = next(self.sessions)
        self.view[p] = [("marker", self.marker_txn[(p, r.offset)], r.committed)
                        if isinstance(r, R.TxnMarkerRecord) else
                        ("record", self._entry(r), r.offset) for r in log]
        self.view[p] += self.deferred.pop(p, [])
        self.send(m.LoadPartition(p, log))

    def fetch(self, gid: str, require_stable: bool) -> m.OffsetFetchResult:
        rid = self.request("fetch", m.OffsetFetch, group_id=gid, partitions=tuple(
            (TOPIC, p) for p in range(TOPIC_PARTITIONS)), require_stable=require_stable)
        return self.d.answers[rid]

    # -- one step -------------------------------------------------------------------------
    def step(self) -> None:
        rng, roll = self.rng, self.rng.random()
        if roll < 0.25:
            self.txn_commit(rng.choice(self.producers))
        elif roll < 0.35:
            self.end_txn(rng.choice(self.producers))
        elif roll < 0.47:
            self.plain_commit()
        elif roll < 0.70:
            if self.d.inflight:
                self.deliver_append(rng.choice(sorted(self.d.inflight)))
        elif roll < 0.80:
            if self.completions:
                self.deliver_completion(rng.randrange(len(self.completions)))
        elif roll < 0.82:
            p = rng.choice(self.partitions())
            if p not in self.unloaded and p not in self.loading:
                self.stats["unload"] += 1
                self.unload(p)
        else:
            gid = rng.choice(GROUPS)
            res = self.fetch(gid, rng.random() < 0.5)
            if res.error == E.NONE:
                self.stats["fetch"] += 1
                for part in res.partitions:
                    if part.error == E.NONE:
                        self._check_value(gid, (part.topic, part.partition), part.offset, "fetched")
        if self.loading and rng.random() < 0.2:
            p = rng.choice(sorted(self.loading))
            self.stats["reload"] += 1
            self.finish_load(p, self.loading[p])
        if self.unloaded and rng.random() < 0.15:
            self.begin_load(rng.choice(sorted(self.unloaded)))
        self.collect()
        self.check()

    def collect(self) -> None:
        for pr in self.producers:
            rid = pr.in_flight
            if rid is None or rid not in self.d.answers:
                continue
            pr.in_flight = None
            res, event = self.d.answers[rid], self.requests[rid][1]
            errors = {part.error for part in res.partitions}
            self.stats[("TxnOffsetCommit", min(errors))] += 1
            p = self.d.partition(event.group_id)
            if errors == {E.NONE} and pr.open and pr.txn == self._txn_of(event) \
                    and p not in self.unloaded and p not in self.loading:
                stable = self.fetch(event.group_id, True)
                for part in stable.partitions:
                    tp = (part.topic, part.partition)
                    if any(tp == (o.topic, o.partition) for o in event.offsets) \
                            and part.error != E.UNSTABLE_OFFSET_COMMIT:
                        self.violations.append(f"{event.group_id} {tp}: acknowledged in an open "
                                               f"transaction but answered {part}")

    def _txn_of(self, event) -> int:
        o = event.offsets[0]
        return self.writer[(event.group_id, (o.topic, o.partition), o.offset)][1]

    # -- invariants -----------------------------------------------------------------------
    def _check_value(self, gid: str, tp, value: int, where: str) -> None:
        if value == -1:
            if self.seen.get((gid, tp), -1) >= 0:
                self.violations.append(f"{where} {gid} {tp}: back to nothing")
            return
        writer = self.writer.get((gid, tp, value))
        if writer is None:
            self.violations.append(f"{where} {gid} {tp}: {value} was never committed")
        elif writer != "plain" and self.ended.get(writer) is not True:
            state = {None: "open", False: "aborted"}[self.ended.get(writer)]
            self.violations.append(f"{where} {gid} {tp}: {value} from the {state} "
                                   f"transaction {writer}")
        position = self.position.get((gid, tp, value))
        if position is None:
            self.violations.append(f"{where} {gid} {tp}: {value} is not in the log")
            return
        if position < self.seen.get((gid, tp), -1):
            self.violations.append(f"{where} {gid} {tp}: {value} at {position} is older than "
                                   f"{self.seen[(gid, tp)]}")
        self.seen[(gid, tp)] = max(position, self.seen.get((gid, tp), -1))

    def check(self) -> None:
        for gid in GROUPS:
            group = self.d.coord.group(gid)
            p = self.d.partition(gid)
            if self.session[p] is None and group is not None:
                self.violations.append(f"{gid} is cached while {p} is not loaded")
            if group is None:
                continue
            committed, unstable = self.expected_view(p)
            for tp in ((TOPIC, i) for i in range(TOPIC_PARTITIONS)):
                value = group.offset(tp)
                value = -1 if value is None else value.offset
                self._check_value(gid, tp, value, "cached")
                if value != committed.get((gid, tp), -1):
                    self.violations.append(f"{gid} {tp}: {value}, but what the coordinator "
                                           f"learnt says {committed.get((gid, tp), -1)}")
                if group.has_pending_offset_commits(tp) != ((gid, tp) in unstable):
                    self.violations.append(f"{gid} {tp}: pending is "
                                           f"{group.has_pending_offset_commits(tp)}")

    def expected_view(self, p: int) -> tuple[dict, set]:
        """From what the coordinator learnt of partition p: the committed value per (group,
        tp) (the latest in the log among plain records and records of transactions whose
        COMMIT it learnt) and the unstable (group, tp)s (a record of a transaction whose
        marker it has not learnt; a commit in flight, unless its transaction was aborted)."""
        view = self.view[p] or []
        ended = {txn: committed for kind, txn, committed in
                 (item for item in view if item[0] == "marker")}
        best, unstable = {}, set()
        for kind, entry, position in (item for item in view if item[0] == "record"):
            gid, tp, _ = entry
            writer = self.writer[entry]
            if writer != "plain" and writer not in ended:
                unstable.add((gid, tp))
            elif (writer == "plain" or ended[writer]) \
                    and position > best.get((gid, tp), (-1, -1))[0]:
                best[(gid, tp)] = (position, entry[2])
        for partition, session, entries in self.emitted.values():
            if partition == p and session == self.session[p]:
                for entry in entries:
                    if ended.get(self.writer[entry]) is not False:
                        unstable.add(entry[:2])
        return {k: v for k, (_, v) in best.items()}, unstable

    # -- the end --------------------------------------------------------------------------
    def finish(self) -> None:
        """Every transaction ends, every append and CompleteTxn is delivered, every partition
        is loaded; then every partition is reloaded from its log."""
        for p in sorted(self.loading):
            self.finish_load(p, self.loading[p])
        for p in sorted(self.unloaded):
            self.begin_load(p)
            self.finish_load(p, self.loading[p])
        while self.d.inflight or self.completions or any(pr.open for pr in self.producers):
            while self.d.inflight:
                self.deliver_append(min(self.d.inflight))
            self.collect()
            while self.completions:
                self.deliver_completion(0)
            for pr in self.producers:
                if pr.open and pr.in_flight is None:
                    self.end_txn(pr)
            self.check()
        for gid in GROUPS:
            group = self.d.coord.group(gid)
            if group is not None and group.txn_offsets:
                self.violations.append(f"{gid} still has pending offsets "
                                       f"{group.txn_offsets.by_producer}")
        for p in self.partitions():
            self.unload(p)
            self.begin_load(p)
            self.finish_load(p, self.loading[p])
        self.check()

    def expected(self) -> dict:
        """What the logs say, from the simulation's own bookkeeping: per (group, tp) the value
        at the latest position among plain records and records of committed transactions."""
        best: dict = {}
        for (gid, tp, value), position in self.position.items():
            writer = self.writer[(gid, tp, value)]
            if writer == "plain" or self.ended.get(writer) is True:
                if position > best.get((gid, tp), (-1, -1))[0]:
                    best[(gid, tp)] = (position, value)
        return {k: v for k, (_, v) in best.items()}
