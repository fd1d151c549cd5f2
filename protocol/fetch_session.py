"""Fetch sessions (KIP-227), both sides, pure: a steady fetcher sends only the partitions
whose fetch position changed, and is answered only the partitions that have something new.

The broker's side is Kafka's FetchManager / FetchSession (core/.../server/FetchSession.scala),
the fetcher's side Kafka's FetchSessionHandler (clients/.../FetchSessionHandler.java).

Rules, broker side (`FetchSessionCache.new_context`):
- epoch -1 (FINAL): a sessionless full fetch of the partitions asked; a session_id given
  is closed. Answered with session_id 0.
- epoch 0 (INITIAL): a full fetch; a session holding the partitions asked is created when
  the cache has room (one with the same id is replaced), and its id goes in the answer (0
  when none could be made: the fetcher then stays sessionless).
- epoch > 0: an incremental fetch of session `session_id`: an unknown session is
  FETCH_SESSION_ID_NOT_FOUND (70), another epoch than the one expected
  INVALID_FETCH_SESSION_EPOCH (71) (the fetcher starts over with a full fetch). Otherwise
  the partitions asked are added or updated, the forgotten ones removed, the expected
  epoch moves on, and every partition of the session is watched (a parked fetch wakes on
  any of them).
- Which are READ at once (`context.reads(journal)`): Kafka reads every partition of the
  session on every fetch; a follower of 3,000 quiet partitions then spends its rounds on
  them. Here an incremental fetch reads only the partitions asked in this request, those
  the broker's ChangeJournal names as changed (an append, a high watermark or log start
  move) since the session's last read, and those whose last answer was unfinished (records,
  an error, a diverging epoch, a preferred read replica); the others would answer exactly
  what the session last answered, so they are left out of the answer, as Kafka's
  incremental answer leaves them.
  Everything is read when the journal cannot tell (leadership moved, retention ran, the
  session is new, the last answer came near its byte budget) and at least every
  `full_read_interval_ms` (the cache's clock; the broker uses a quarter of
  replica.lag.time.max.ms), so that the leader's view of its followers (caught-up times,
  ISR expansion retries) is never staler than that. Without a clock everything is read.
- Between fetches a session keeps what a broker needs to wait on it without going over its
  partitions (`FetchContext.by_tp`: its asks by partition, the session's own dict for an
  incremental fetch, so a reader iterates it only through a copy made in one call;
  `members`: a number that moves whenever partitions join or leave the session;
  `session.watch`: a slot for the broker's own watch of those partitions). A session
  that leaves the cache (closed, replaced, emptied, evicted) is marked `closed` and handed
  to the cache's `on_close` (called under the cache's lock: it must only take note).
- `context.respond(outcomes)`: a full fetch answers every partition; an incremental one
  only the partitions with records, an error, a diverging epoch, a preferred read replica
  (KIP-392), or a high watermark, last stable offset or log start offset other than the
  one the session last answered (Kafka's maybeUpdateResponseData); the session remembers
  what it answered either way.
- Topic ids: a session made by Fetch v13+ uses topic ids, one made below v13 does not; an
  incremental fetch of the other kind is FETCH_SESSION_TOPIC_ID_ERROR (106), checked after
  the epoch (FetchManager.newContext). An incremental fetch that forgets every partition
  closes the session and is answered sessionless.
- The cache holds at most `max_slots` sessions (max.incremental.fetch.session.cache.slots,
  1000), with Kafka's eviction (FetchSessionCacheShard.tryEvict, evictionMs 120 s on the
  cache's clock): a new session takes a free slot; else the least recently used session,
  if unused for more than `eviction_ms`, makes room; else a privileged (follower) fetcher
  may evict the smallest of the consumer sessions and of the sessions created more than
  `eviction_ms` before their last use, a consumer only the smallest of the latter, where
  smallest orders (privileged, partitions, id) and the victim must not be larger than the
  newcomer (privileged, partitions, 0); else no session is made (session_id 0). Which
  sessions are evictable and their sizes are taken when a session is last used, as
  Kafka's touch does. Ids are random positive int32s.
- `stats`: per kind of fetcher (consumer, follower), counts of full (session made or not),
  incremental and sessionless fetches, session errors and the evictions its new sessions
  made (`Broker.fetch_session_stats()`).

Rules, fetcher side (`FetchSessionHandler`):
- `build(wanted)` with {tp: FetchData} of everything this fetcher wants now → a FetchPlan:
  a full request (epoch 0) while there is no session, else an incremental one with only the
  partitions whose FetchData differs from what the session holds, and the partitions no
  longer wanted as forgotten. `build(wanted, changed)` gives the same plan comparing only
  the partitions named in `changed`, which must hold every partition whose entry was
  changed, added or removed since the previous build (the fetcher knows which positions
  it read again).
- `on_response(plan, error, session_id)`: after an error the next request is full (and
  sessionless until the broker gives a new id); after a full answer the session is the
  id given (epoch 1 next), after an incremental one the epoch moves on (1 after 2^31-1),
  unless it came sessionless (session_id 0: the broker closed the session).
  `reset()` after a lost connection.
"""

from __future__ import annotations

import random
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

from protocol.api import FetchAsk
from replicas.errors import ErrorCode as E

FINAL_EPOCH, INITIAL_EPOCH = -1, 0
MAX_EPOCH = 2**31 - 1
DEFAULT_SLOTS = 1000
EVICTION_MS = 120_000       # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS

__all__ = ["FetchData", "FetchSessionCache", "FetchContext", "FetchSessionHandler", "FetchPlan",
           "ChangeJournal"]


@dataclass(frozen=True, slots=True)
class FetchData:
    """What a fetcher asks of one partition."""
    fetch_offset: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1
    max_bytes: int = 1 << 20
    topic_id: str | None = None     # Fetch v13+: the id the fetcher named the topic by


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= MAX_EPOCH else epoch + 1


# ---------------------------------------------------------------- the broker's side
class ChangeJournal:
    """Which partitions changed since a token: `note(tps)` on an append or a high-watermark
    or log-start move, `note_all()` when anything may have (leadership, retention);
    `since(token)` → (the token now, the set changed since `token`, or None: anything);
    `token()` the token now. Token 0 means "never read". Thread-safe; O(partitions
    changed) per call."""

    def __init__(self):
        self._lock = threading.Lock()
        self._seq = 1
        self._reset = 1
        self._last: OrderedDict[tuple, int] = OrderedDict()   # tp → seq, oldest first

    def note(self, tps) -> None:
        with self._lock:
            last = self._last
            for tp in tps:
                self._seq += 1
                last[tp] = self._seq
                last.move_to_end(tp)

    def note_all(self) -> None:
        with self._lock:
            self._seq += 1
            self._reset = self._seq
            self._last.clear()

    def token(self) -> int:
        return self._seq

    def since(self, token: int) -> tuple[int, set | None]:
        with self._lock:
            if token <= 0 or token < self._reset:
                return self._seq, None
            changed = set()
            last = self._last
            for tp in reversed(last):
                if last[tp] <= token:
                    break
                changed.add(tp)
            return self._seq, changed


def _ask(tp, d: FetchData) -> FetchAsk:
    return FetchAsk(tp, d.fetch_offset, d.current_leader_epoch, d.last_fetched_epoch,
                    d.max_bytes, d.log_start_offset)


class _Session:
    __slots__ = ("id", "privileged", "epoch", "partitions", "asks", "answered", "token",
                 "unfinished", "full_read_ms", "uses_topic_ids", "created_ms",
                 "evictable_by_all", "evictable_by_privileged", "cached_size", "last_used_ms",
                 "members", "closed", "watch")

    def __init__(self, session_id: int, privileged: bool, uses_topic_ids: bool = False,
                 now_ms: int = 0):
        self.id, self.privileged, self.epoch = session_id, privileged, 1
        self.uses_topic_ids, self.created_ms = uses_topic_ids, now_ms
        self.evictable_by_all = self.evictable_by_privileged = False
        self.cached_size, self.last_used_ms = 0, now_ms
        self.partitions: OrderedDict[tuple, FetchData] = OrderedDict()
        self.asks: dict[tuple, FetchAsk] = {}      # the same partitions, in the same order
        self.answered: dict[tuple, tuple] = {}     # tp → (hw, last stable, log start)
        self.token = 0                  # the journal's token when the session last read
        self.unfinished: set = set()    # tps whose last answer must be read again
        self.full_read_ms: int | None = None
        self.members = 0                # moves whenever partitions join or leave
        self.closed = False             # left the cache
        self.watch = None               # the broker's, opaque here (module rules)


class FetchContext:
    """One fetch request's view: what to read (`asks`, `reads`) and what to answer
    (`respond`)."""

    __slots__ = ("session", "partitions", "incremental", "_cache", "requested", "_token",
                 "by_tp", "members")

    def __init__(self, cache, session: _Session | None, partitions, incremental: bool,
                 requested=(), by_tp: dict | None = None):
        self._cache, self.session = cache, session
        self.partitions: OrderedDict = partitions
        self.incremental = incremental
        self.requested = requested
        self._token = 0
        self.by_tp = by_tp        # tp → FetchAsk, in the session's order (made when asked)
        self.members = session.members if session is not None else 0

    def reads(self, journal: ChangeJournal | None) -> set | None:
        """The partitions to read at once, None for all of them (module rules)."""
        session, cache = self.session, self._cache
        if journal is None or session is None or cache.clock_ms is None:
            return None
        token, changed = journal.since(session.token if self.incremental else 0)
        self._token = token
        now = cache.clock_ms()
        if changed is None or session.full_read_ms is None or \
                now - session.full_read_ms >= cache.full_read_interval_ms:
            session.full_read_ms = now
            return None
        wanted = changed.union(self.requested, session.unfinished)
        return {tp for tp in wanted if tp in self.partitions}

    @property
    def session_id(self) -> int:
        return self.session.id if self.session is not None else 0

    def asks(self) -> list[tuple[tuple, FetchData]]:
        return list(self.partitions.items())

    def fetch_asks(self) -> list[FetchAsk]:
        """The partitions to fetch as the broker takes them, in the session's order; an
        incremental fetch's come from the session as they were (nothing made per quiet
        partition)."""
        return list(self.asks_by_tp().values())

    def asks_by_tp(self) -> dict:
        """{tp: FetchAsk} of `fetch_asks`."""
        if self.by_tp is None:
            self.by_tp = {tp: _ask(tp, d) for tp, d in self.partitions.items()}
        return self.by_tp

    def respond(self, outcomes: dict, budget: int | None = None) -> list[tuple]:
        """[(tp, outcome)] to answer: a full fetch's in the session's order, an incremental
        one's in the order of `outcomes`. An outcome has error,
        records, high_watermark, last_stable_offset, log_start_offset, diverging_epoch.
        `budget`: the request's max_bytes (an answer near it reads everything next time:
        partitions it had no room for look unchanged)."""
        if self.session is None:
            return [(tp, outcomes[tp]) for tp in self.partitions if tp in outcomes]
        out = []
        size = 0
        # an incremental answer costs what was read, not what the session holds
        partitions = self.partitions
        pairs = ((tp, outcomes.get(tp)) for tp in partitions) if not self.incremental else \
            ((tp, o) for tp, o in outcomes.items() if tp in partitions)
        with self._cache.lock:
            session = self.session
            answered, unfinished = session.answered, session.unfinished
            for tp, o in pairs:
                if o is None:
                    continue
                marks = (o.high_watermark, o.last_stable_offset, o.log_start_offset)
                changed = answered.get(tp) != marks
                answered[tp] = marks
                diverging = o.diverging_epoch is not None and o.diverging_epoch[0] >= 0
                urgent = diverging or o.preferred_read_replica >= 0
                if o.records or o.error or urgent:
                    unfinished.add(tp)
                    size += len(o.records)
                elif unfinished:
                    unfinished.discard(tp)
                if not self.incremental or changed or o.records or o.error or urgent:
                    out.append((tp, o))
            session.token = 0 if budget is not None and size >= budget // 2 else self._token
        return out


class FetchSessionCache:
    def __init__(self, max_slots: int = DEFAULT_SLOTS, rng: random.Random | None = None,
                 clock_ms: Callable[[], int] | None = None,
                 full_read_interval_ms: int = 1000, eviction_ms: int = EVICTION_MS,
                 on_close: Callable[[_Session], None] | None = None):
        self.max_slots = max_slots
        self.on_close = on_close
        self.clock_ms = clock_ms
        self.full_read_interval_ms = full_read_interval_ms
        self.eviction_ms = eviction_ms
        self._rng = rng or random.Random()
        self._sessions: OrderedDict[int, _Session] = OrderedDict()   # least recently used first
        self.lock = threading.Lock()
        self.stats = {kind: {"full": 0, "incremental": 0, "sessionless": 0, "errors": 0,
                             "evictions": 0} for kind in ("consumer", "follower")}

    def __len__(self) -> int:
        return len(self._sessions)

    def _now(self) -> int:
        return self.clock_ms() if self.clock_ms is not None else 0

    def new_context(self, session_id: int, epoch: int, requested: dict, forgotten,
                    privileged: bool, uses_topic_ids: bool = False) -> FetchContext | int:
        """The context of a fetch request, or an error code (70, 71, 106) to answer it with.
        `requested` {tp: FetchData} in request order; `forgotten` [tp]."""
        with self.lock:
            stats = self.stats["follower" if privileged else "consumer"]
            if epoch == FINAL_EPOCH:
                self._drop(session_id)
                stats["sessionless"] += 1
                return FetchContext(self, None, OrderedDict(requested), False)
            if epoch == INITIAL_EPOCH:
                self._drop(session_id)
                stats["full"] += 1
                session = self._create(privileged, len(requested), uses_topic_ids)
                by_tp = {tp: _ask(tp, d) for tp, d in requested.items()}
                if session is not None:
                    session.partitions.update(requested)
                    session.asks.update(by_tp)
                    session.members += 1
                    self._touch(session)
                return FetchContext(self, session, OrderedDict(requested), False, requested,
                                    by_tp)
            session = self._sessions.get(session_id)
            if session is None:
                error = E.FETCH_SESSION_ID_NOT_FOUND
            elif epoch != session.epoch:
                error = E.INVALID_FETCH_SESSION_EPOCH
            elif session.uses_topic_ids != uses_topic_ids:
                error = E.FETCH_SESSION_TOPIC_ID_ERROR
            else:
                error = None
            if error is not None:
                stats["errors"] += 1
                return error
            partitions = session.partitions
            for tp in forgotten:
                if partitions.pop(tp, None) is not None:
                    session.members += 1
                session.asks.pop(tp, None)
                session.answered.pop(tp, None)
                session.unfinished.discard(tp)
            kept = len(partitions)
            partitions.update(requested)
            if len(partitions) != kept:     # a partition joined
                session.members += 1
            session.asks.update((tp, _ask(tp, d)) for tp, d in requested.items())
            if not partitions:              # nothing left: closed, answered sessionless
                self._drop(session_id)
                stats["sessionless"] += 1
                return FetchContext(self, None, OrderedDict(requested), False)
            stats["incremental"] += 1
            self._touch(session)
            session.epoch = _next_epoch(epoch)
            # the session's own dicts, not copies: only a later fetch of the same session
            # changes them, and a fetcher sends that after this one's answer
            return FetchContext(self, session, partitions, True, requested, session.asks)

    def _drop(self, session_id: int) -> None:
        """The session leaves the cache (module rules: closed, handed to on_close)."""
        session = self._sessions.pop(session_id, None)
        if session is not None:
            session.closed = True
            if self.on_close is not None:
                self.on_close(session)

    def _touch(self, session: _Session) -> None:
        """Kafka's FetchSessionCacheShard.touch: most recently used now; evictability and
        size as of now."""
        now = self._now()
        self._sessions.move_to_end(session.id)
        session.last_used_ms = now
        session.cached_size = len(session.partitions)
        old = now - session.created_ms > self.eviction_ms
        session.evictable_by_all = old
        session.evictable_by_privileged = old or not session.privileged

    def _evict(self, privileged: bool, size: int) -> bool:
        """Kafka's tryEvict (module rules)."""
        if not self._sessions:
            return False
        lru = min(self._sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if self._now() - lru.last_used_ms > self.eviction_ms:
            victim = lru
        else:
            allowed = [s for s in self._sessions.values()
                       if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
            if not allowed:
                return False
            victim = min(allowed, key=lambda s: (s.privileged, s.cached_size, s.id))
            if (privileged, size, 0) < (victim.privileged, victim.cached_size, victim.id):
                return False
        self._drop(victim.id)
        self.stats["follower" if privileged else "consumer"]["evictions"] += 1
        return True

    def _create(self, privileged: bool, size: int, uses_topic_ids: bool) -> _Session | None:
        if len(self._sessions) >= self.max_slots and not self._evict(privileged, size):
            return None
        while True:
            session_id = self._rng.randint(1, MAX_EPOCH)
            if session_id not in self._sessions:
                break
        session = self._sessions[session_id] = _Session(session_id, privileged, uses_topic_ids,
                                                        self._now())
        return session


# ---------------------------------------------------------------- the fetcher's side
@dataclass(frozen=True)
class FetchPlan:
    session_id: int
    epoch: int
    partitions: dict          # {tp: FetchData} to put in the request
    forgotten: tuple          # tps to forget
    wanted: dict | None       # everything wanted when it was built (None: built from changes)


class FetchSessionHandler:
    def __init__(self):
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self.held: dict = {}      # what the broker's session holds, as last acknowledged

    def build(self, wanted: dict, changed=None) -> FetchPlan:
        """The next request's plan for `wanted` ({tp: FetchData}). `changed`, when given,
        names every partition whose entry in `wanted` may differ from the one the previous
        `build` saw (changed, added or removed); only those are compared with what the
        session holds, so a steady fetcher of many quiet partitions pays for the few that
        moved. None compares everything."""
        if self.session_id == 0 or self.epoch == INITIAL_EPOCH:
            wanted = dict(wanted)
            return FetchPlan(0, INITIAL_EPOCH, wanted, (), wanted)
        held = self.held
        if changed is None:
            wanted = dict(wanted)
            send = {tp: d for tp, d in wanted.items()
                    if (h := held.get(tp)) is not d and h != d}
            forgotten = tuple(tp for tp in held if tp not in wanted)
            return FetchPlan(self.session_id, self.epoch, send, forgotten, wanted)
        send, gone = {}, []
        for tp in changed:
            d, h = wanted.get(tp), held.get(tp)
            if d is None:
                if h is not None:
                    gone.append(tp)
            elif h is not d and h != d:
                send[tp] = d
        return FetchPlan(self.session_id, self.epoch, send, tuple(gone), None)

    def on_response(self, plan: FetchPlan, error: int, session_id: int) -> None:
        if error:
            self.reset()
            return
        if plan.epoch == INITIAL_EPOCH:
            self.session_id = session_id
            self.epoch = 1 if session_id else INITIAL_EPOCH
        elif session_id == 0:       # the broker closed the session (nothing left in it)
            self.reset()
            return
        else:
            self.epoch = _next_epoch(plan.epoch)
        if not self.session_id:
            self.held = {}
        elif plan.wanted is not None:
            self.held = plan.wanted
        else:                       # a plan built from `changed`: the session moved by it
            held = self.held
            held.update(plan.partitions)
            for tp in plan.forgotten:
                held.pop(tp, None)

    def reset(self) -> None:
        self.session_id, self.epoch, self.held = 0, INITIAL_EPOCH, {}
