"""Test harness for the pure group coordinator (coordinator/): a driver playing the broker,
and a seeded simulation of consumers against it.

- `Driver` feeds events to one GroupCoordinator with a fake clock, records every Respond
  (asserting each request is answered at most once) and plays the broker's log: an Append is
  either acknowledged at once (`auto_ack`) or held until `ack(token, error)`; what was written
  is kept per offsets partition as the shell reads it back (records with their batch's
  producer id, transactional flag and log offset; `marker` appends a producer's COMMIT or
  ABORT control batch and tells the coordinator, as actors/group_host.py does) so
  `load(partition)` can replay it.
- `World` is the simulation: consumers join, heartbeat, commit, leave, die and restart
  (static ones), with appends failing at random (written or not) and offsets partitions
  unloaded and reloaded from what was written. `check()` states the invariants.
"""

from __future__ import annotations

import collections
import itertools
import random
import struct
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

from coordinator import messages as m
from coordinator import records as R
from coordinator.config import GroupCoordinatorConfig
from coordinator.coordinator import GroupCoordinator
from coordinator.states import GroupState
from replicas.errors import ErrorCode as E

G = GroupState
PROTOCOLS = (("range", b"r"),)


class FakeClock:
    def __init__(self, now: int = 0):
        self.now = now

    def __call__(self) -> int:
        return self.now


def seeded_uuids(seed: int):
    rng = random.Random(seed)
    return lambda: uuid.UUID(int=rng.getrandbits(128), version=4)


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


class Driver:
    def __init__(self, config: GroupCoordinatorConfig | None = None, seed: int = 0,
                 auto_ack: bool = True, now: int = 0):
        self.clock = FakeClock(now)
        self.config = config or GroupCoordinatorConfig()
        self.coord = GroupCoordinator(1, self.clock, self.config, new_uuid=seeded_uuids(seed))
        self.auto_ack = auto_ack
        self.answers: dict[int, object] = {}
        self.issued: dict[int, object] = {}
        self.inflight: dict[int, m.Append] = {}
        self.appends: list[m.Append] = []
        self.logs: dict[int, list] = defaultdict(list)
        self._rid = itertools.count(1)

    # -- events ---------------------------------------------------------------------------
    def send(self, event) -> list:
        effects = self.coord.process(event)
        acks = []
        for eff in effects:
            if isinstance(eff, m.Respond):
                assert eff.request_id in self.issued, f"answer to unknown request {eff}"
                assert eff.request_id not in self.answers, f"second answer {eff} to {eff.request_id}"
                self.answers[eff.request_id] = eff.result
            else:
                assert isinstance(eff, m.Append)
                self.appends.append(eff)
                self.inflight[eff.token] = eff
                acks.append(eff.token)
        if self.auto_ack:
            for token in acks:
                self.ack(token)
        return effects

    def ack(self, token: int, error: int = E.NONE, written: bool | None = None) -> list:
        append = self.inflight.pop(token)
        if written is None:
            written = error == E.NONE
        if written:
            self.write(append)
        return self.send(m.AppendDone(token, error))

    def write(self, append: m.Append) -> None:
        """The append's records into its partition's log, as a load reads them back."""
        log = self.logs[append.partition]
        for r in append.records:
            log.append(R.OffsetsRecord(r.key, r.value, append.producer_id, append.transactional,
                                       len(log)))

    def marker(self, producer_id: int, partitions, committed: bool, complete: bool = True) -> list:
        """The producer's COMMIT/ABORT marker into each partition's log, then (`complete`)
        CompleteTxn, as the shell does after WriteTxnMarkers."""
        for p in partitions:
            self.logs[p].append(R.TxnMarkerRecord(producer_id, committed, len(self.logs[p])))
        if not complete:
            return []
        return self.send(m.CompleteTxn(producer_id, tuple(partitions), committed))

    def request(self, cls, **fields) -> int:
        rid = next(self._rid)
        event = cls(request_id=rid, **fields)
        self.issued[rid] = event
        self.send(event)
        return rid

    def call(self, cls, **fields):
        """A request answered at once: its result."""
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
    def partition(self, group_id: str) -> int:
        return self.coord.partition_for(group_id)

    def own(self, *group_ids: str) -> None:
        for p in sorted({self.partition(g) for g in group_ids}):
            self.load(p)

    def load(self, partition: int) -> list:
        return self.send(m.LoadPartition(partition, tuple(self.logs[partition])))

    def unload(self, partition: int) -> list:
        return self.send(m.UnloadPartition(partition))

    # -- requests -------------------------------------------------------------------------
    def join(self, group: str, member_id: str = "", *, protocols=PROTOCOLS, instance: str | None = None,
             version: int = 5, session: int = 10_000, rebalance: int = 30_000, client_id: str = "c",
             protocol_type: str = "consumer") -> int:
        return self.request(m.JoinGroup, group_id=group, member_id=member_id, session_timeout_ms=session,
                            rebalance_timeout_ms=rebalance, protocol_type=protocol_type,
                            protocols=tuple(protocols), group_instance_id=instance, client_id=client_id,
                            client_host="/127.0.0.1", version=version)

    def join_new(self, group: str, **kw) -> tuple[int, str]:
        """KIP-394's two steps for a dynamic member: (the parked join's id, member id)."""
        first = self.call(m.JoinGroup, group_id=group, member_id="",
                          session_timeout_ms=kw.get("session", 10_000),
                          rebalance_timeout_ms=kw.get("rebalance", 30_000), protocol_type="consumer",
                          protocols=tuple(kw.get("protocols", PROTOCOLS)), client_id="c", version=5)
        assert first.error == E.MEMBER_ID_REQUIRED, first
        return self.join(group, first.member_id, **kw), first.member_id

    def sync(self, group: str, member_id: str, generation: int, assignments=(), instance=None) -> int:
        return self.request(m.SyncGroup, group_id=group, generation_id=generation, member_id=member_id,
                            group_instance_id=instance, assignments=tuple(assignments))

    def heartbeat(self, group: str, member_id: str, generation: int, instance=None):
        return self.call(m.Heartbeat, group_id=group, generation_id=generation, member_id=member_id,
                         group_instance_id=instance)

    def commit(self, group: str, offsets: dict, member_id: str = "", generation: int = -1,
               instance=None, metadata: str = "") -> int:
        return self.request(m.OffsetCommit, group_id=group, generation_id=generation, member_id=member_id,
                            group_instance_id=instance, offsets=tuple(
                                m.CommitOffset(t, p, o, metadata=metadata) for (t, p), o in offsets.items()))

    def txn_commit(self, group: str, offsets: dict, producer_id: int = 1000, epoch: int = 0,
                   member_id: str = "", generation: int = -1, instance=None, version: int = 3,
                   metadata: str = "") -> int:
        return self.request(m.TxnOffsetCommit, transactional_id=f"tx-{producer_id}",
                            group_id=group, producer_id=producer_id, producer_epoch=epoch,
                            generation_id=generation, member_id=member_id,
                            group_instance_id=instance, version=version, offsets=tuple(
                                m.CommitOffset(t, p, o, metadata=metadata)
                                for (t, p), o in offsets.items()))

    def fetch(self, group: str, partitions=None, require_stable=False):
        return self.call(m.OffsetFetch, group_id=group, partitions=partitions, require_stable=require_stable)

    def committed(self, group: str, tp) -> int:
        res = self.fetch(group, (tp,))
        assert res.error == E.NONE, res
        return res.partitions[0].offset

    def leave(self, group: str, *members) -> m.LeaveGroupResult:
        return self.call(m.LeaveGroup, group_id=group, members=tuple(
            x if isinstance(x, m.LeaveMember) else m.LeaveMember(x) for x in members))

    def stable_group(self, group: str, n: int, assign=lambda members: {}, **kw) -> tuple[list[str], int]:
        """n dynamic members joined and synced; returns (member ids, leader first; generation)."""
        self.own(group)
        joins = [self.join_new(group, **kw) for _ in range(n)]
        for _ in range(100):
            if all(rid in self.answers for rid, _ in joins):
                break
            self.advance(self.config.group_initial_rebalance_delay_ms or 1)
        results = [self.answers[rid] for rid, _ in joins]
        assert all(r.error == E.NONE for r in results), results
        leader = results[0].leader
        gen = results[0].generation_id
        ids = [leader] + [r.member_id for r in results if r.member_id != leader]
        syncs = [self.sync(group, mid, gen, assign(ids) if mid == leader else ()) for mid in ids]
        assert all(self.answers[s].error == E.NONE for s in syncs)
        assert self.coord.group(group).is_(G.STABLE)
        return ids, gen


# ---------------------------------------------------------------------------------------------
# the simulation
TOPIC, TOPIC_PARTITIONS = "t", 6
WRITE_OUTCOMES = [(E.NOT_ENOUGH_REPLICAS, False), (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, True),
                  (E.NOT_LEADER_OR_FOLLOWER, False), (E.REQUEST_TIMED_OUT, True)]


def range_assign(member_ids: list[str]) -> dict[str, list[int]]:
    """A naive range assignor over one topic: contiguous blocks, the first P % C get one more."""
    ids = sorted(member_ids)
    per, extra = divmod(TOPIC_PARTITIONS, len(ids))
    out, start = {}, 0
    for i, mid in enumerate(ids):
        count = per + (1 if i < extra else 0)
        out[mid] = list(range(start, start + count))
        start += count
    return out


def encode_assignment(parts: list[int]) -> bytes:
    return ",".join(map(str, parts)).encode()


def decode_assignment(data: bytes) -> tuple[int, ...]:
    return tuple(int(x) for x in data.decode().split(",")) if data else ()


@dataclass
class SimMember:
    name: str
    group: str
    instance: str | None = None
    member_id: str = ""
    generation: int = -1
    assignment: tuple[int, ...] | None = None
    state: str = "idle"  # idle | joining | syncing | stable | dead
    inflight: tuple[int, str] | None = None
    commits: set = field(default_factory=set)  # request ids of commits in flight
    acked: dict = field(default_factory=dict)  # partition → last acknowledged commit


class World:
    def __init__(self, seed: int, groups=("g0", "g1", "g2"), max_members: int = 4):
        self.rng = random.Random(seed)
        config = GroupCoordinatorConfig(offsets_topic_num_partitions=4, group_initial_rebalance_delay_ms=1000)
        self.d = Driver(config, seed=seed, auto_ack=False)
        self.groups, self.max_members = groups, max_members
        self.members: list[SimMember] = []
        self.names = itertools.count()
        self.outcome: dict[int, int] = {}          # token → error decided when it was emitted
        self.unloaded: set[int] = set()
        self.next_offset: dict = defaultdict(int)   # (group, partition) → next offset to commit
        self.max_acked: dict = defaultdict(lambda: -1)
        self.last_seen: dict = {}
        self.request_group: dict[int, str] = {}
        self.static_instances = itertools.count()
        self.violations: list[str] = []
        self.stats: collections.Counter = collections.Counter()
        for p in sorted({self.d.partition(g) for g in groups}):
            self.d.load(p)

    # -- plumbing -------------------------------------------------------------------------
    def send(self, event) -> None:
        effects = self.d.send(event)
        for eff in effects:
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
        if written:
            self.d.write(append)

    def deliver(self, token: int) -> None:
        self.d.inflight.pop(token)
        self.send(m.AppendDone(token, self.outcome.pop(token)))

    def request(self, member: SimMember, kind: str, cls, **fields) -> None:
        rid = next(self.d._rid)
        event = cls(request_id=rid, **fields)
        self.d.issued[rid] = event
        self.request_group[rid] = member.group
        if kind == "commit":
            member.commits.add(rid)
        else:
            member.inflight = (rid, kind)
        self.send(event)

    # -- the members ----------------------------------------------------------------------
    def spawn(self, group: str, instance: str | None = None) -> SimMember:
        member = SimMember(f"m{next(self.names)}", group, instance)
        self.members.append(member)
        return member

    def act(self, mb: SimMember) -> None:
        if mb.inflight is not None:
            return
        if mb.state == "idle":
            mb.assignment = None  # eager protocol: revoke everything before joining
            mb.state = "joining"
            self.request(mb, "join", m.JoinGroup, group_id=mb.group, member_id=mb.member_id,
                         session_timeout_ms=10_000, rebalance_timeout_ms=15_000, protocol_type="consumer",
                         protocols=(("range", subscription(TOPIC)),), group_instance_id=mb.instance,
                         client_id=mb.name, version=5)
        elif mb.state == "stable":
            roll = self.rng.random()
            if roll < 0.5:
                self.request(mb, "heartbeat", m.Heartbeat, group_id=mb.group, generation_id=mb.generation,
                             member_id=mb.member_id, group_instance_id=mb.instance)
            elif roll < 0.96 and mb.assignment:
                # commitAsync: several commits may be in flight next to the main request
                for _ in range(self.rng.randint(1, 3)):
                    p = self.rng.choice(mb.assignment)
                    offset = self.next_offset[(mb.group, p)]
                    self.next_offset[(mb.group, p)] += 1
                    self.request(mb, "commit", m.OffsetCommit, group_id=mb.group, generation_id=mb.generation,
                                 member_id=mb.member_id, group_instance_id=mb.instance,
                                 offsets=(m.CommitOffset(TOPIC, p, offset),))
            elif roll < 0.98:
                mb.state = "idle"  # rejoins (for the leader: forces a rebalance)
            else:
                self.request(mb, "leave", m.LeaveGroup, group_id=mb.group,
                             members=(m.LeaveMember(mb.member_id, mb.instance),))
                mb.state = "dead"

    def on_answer(self, mb: SimMember, kind: str, rid: int, res) -> None:
        if kind == "commit":
            mb.commits.discard(rid)
        else:
            mb.inflight = None
        if mb.state == "dead":
            return
        error = getattr(res, "error", None)
        if kind == "join":
            if error == E.NONE:
                mb.member_id, mb.generation = res.member_id, res.generation_id
                assignments = ()
                if res.leader == res.member_id and res.members:
                    plan = range_assign([x.member_id for x in res.members])
                    assignments = tuple((mid, encode_assignment(ps)) for mid, ps in plan.items())
                mb.state = "syncing"
                self.request(mb, "sync", m.SyncGroup, group_id=mb.group, generation_id=mb.generation,
                             member_id=mb.member_id, group_instance_id=mb.instance, assignments=assignments)
                return
            if error in (E.MEMBER_ID_REQUIRED,):
                mb.member_id = res.member_id
            elif error in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
                mb.member_id = ""
            mb.state = "idle"
        elif kind == "sync":
            if error == E.NONE:
                mb.assignment, mb.state = decode_assignment(res.assignment), "stable"
            else:
                self._reset(mb, error)
        elif kind == "heartbeat":
            if error in (E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID,
                         E.FENCED_INSTANCE_ID):
                self._reset(mb, error)
        elif kind == "commit":
            part = res.partitions[0]
            if part.error == E.NONE:
                key = (mb.group, part.partition)
                offset = self.d.issued[rid].offsets[0].offset
                mb.acked[part.partition] = max(offset, mb.acked.get(part.partition, -1))
                self.max_acked[key] = max(self.max_acked[key], offset)
            elif part.error in (E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID,
                                E.FENCED_INSTANCE_ID) and mb.state == "stable" \
                    and self.d.issued[rid].generation_id == mb.generation:
                self._reset(mb, part.error)

    def _reset(self, mb: SimMember, error: int) -> None:
        mb.assignment, mb.state = None, "idle"
        if error in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
            mb.member_id = ""

    def collect_answers(self) -> None:
        for mb in self.members:
            for rid in sorted(mb.commits):
                if rid in self.d.answers:
                    self.on_answer(mb, "commit", rid, self.d.answers[rid])
            if mb.inflight is not None and mb.inflight[0] in self.d.answers:
                rid, kind = mb.inflight
                self.on_answer(mb, kind, rid, self.d.answers[rid])

    # -- one step -------------------------------------------------------------------------
    def step(self) -> None:
        rng, roll = self.rng, self.rng.random()
        alive = [mb for mb in self.members if mb.state != "dead"]
        if roll < 0.2:
            self.d.clock.now += rng.randint(0, 600)
            self.send(m.Tick())
        elif roll < 0.7 and alive:
            self.act(rng.choice(alive))
        elif roll < 0.87 and self.d.inflight:
            self.deliver(rng.choice(sorted(self.d.inflight)))  # in any order
        elif roll < 0.93:
            self._spawn_one(alive)
        elif roll < 0.96 and alive:
            rng.choice(alive).state = "dead"  # stops acting: its session will expire
            self.stats["death"] += 1
        elif roll < 0.975:
            p = self.d.partition(rng.choice(self.groups))
            if p not in self.unloaded:
                self.unloaded.add(p)
                self.stats["unload"] += 1
                self.send(m.UnloadPartition(p))
                self.check_unload(p)
        if self.unloaded and rng.random() < 0.15:
            p = rng.choice(sorted(self.unloaded))
            self.unloaded.discard(p)
            self.stats["reload"] += 1
            self.send(m.BeginLoad(p))
            self.send(m.LoadPartition(p, tuple(self.d.logs[p])))
        self.collect_answers()
        self.check()

    def _spawn_one(self, alive) -> None:
        rng = self.rng
        group = rng.choice(self.groups)
        if sum(1 for mb in alive if mb.group == group) >= self.max_members:
            return
        restartable = [mb.instance for mb in self.members if mb.group == group and mb.state == "dead"
                       and mb.instance is not None and mb.inflight is None and not mb.commits
                       and not any(x.instance == mb.instance and x.state != "dead" for x in self.members)]
        if restartable and rng.random() < 0.5:
            self.spawn(group, rng.choice(restartable))  # a static member restarts
            self.stats["static restart"] += 1
        else:
            self.spawn(group, f"i{next(self.static_instances)}" if rng.random() < 0.3 else None)

    def finish(self) -> None:
        """Everyone stops; every append completes; time runs out every timer."""
        for mb in self.members:
            mb.state = "dead"
        for p in sorted(self.unloaded):
            self.send(m.LoadPartition(p, tuple(self.d.logs[p])))
        self.unloaded.clear()
        for _ in range(200):
            while self.d.inflight:
                self.deliver(min(self.d.inflight))
            self.d.clock.now += 1000
            self.send(m.Tick())
        self.collect_answers()
        self.check()

    # -- invariants -----------------------------------------------------------------------
    def check_unload(self, partition: int) -> None:
        left = [rid for rid in self.d.unanswered()
                if self.d.partition(self.request_group[rid]) == partition]
        if left:
            self.violations.append(f"unload of {partition} left requests {left} unanswered")

    def check(self) -> None:
        coord = self.d.coord
        alive = [mb for mb in self.members if mb.state != "dead"]
        for gid in self.groups:
            group = coord.group(gid)
            # one generation active: a live dynamic member holding an assignment that the
            # coordinator still counts as a member holds the coordinator's generation
            if group is not None:
                for mb in alive:
                    if mb.group == gid and mb.instance is None and mb.assignment is not None \
                            and group.has(mb.member_id) and mb.generation != group.generation_id:
                        self.violations.append(f"{mb.name} holds generation {mb.generation} in {group}")
                self._check_group(group)
            # no two members of one generation own one partition
            owners: dict = {}
            for mb in alive:
                if mb.group == gid and mb.assignment is not None:
                    for p in mb.assignment:
                        other = owners.setdefault((mb.generation, p), mb.name)
                        if other != mb.name:
                            self.violations.append(
                                f"{gid} gen {mb.generation} partition {p}: {other} and {mb.name}")
            # committed offsets never go backwards, and never below an acknowledged commit
            if group is not None:
                for p in range(TOPIC_PARTITIONS):
                    value = group.offset((TOPIC, p))
                    current = -1 if value is None else value.offset
                    key = (gid, p)
                    if current < self.last_seen.get(key, -1) or current < self.max_acked[key]:
                        self.violations.append(f"{key} went back to {current} (seen "
                                               f"{self.last_seen.get(key)}, acked {self.max_acked[key]})")
                    self.last_seen[key] = max(current, self.last_seen.get(key, -1))

    def _check_group(self, group) -> None:
        g = group
        ok = (g.leader_id is None) == (not g.members) and (g.leader_id is None or g.leader_id in g.members)
        ok &= all(g.members.get(mid) is not None and g.members[mid].group_instance_id == iid
                  for iid, mid in g.static_members.items())
        ok &= not (g.is_(G.EMPTY) and g.members)
        ok &= all(not mb.is_awaiting_sync for mb in g.members.values()) or g.is_(G.COMPLETING_REBALANCE)
        ok &= g.join_timer is None or g.is_(G.PREPARING_REBALANCE)
        if g.state in (G.COMPLETING_REBALANCE, G.STABLE):
            ok &= all(g.protocol_name in mb.protocol_names for mb in g.members.values())
        if not ok:
            self.violations.append(f"inconsistent {g}")
