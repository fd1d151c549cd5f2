"""protocol/fetch_session.py, pure: the broker's session cache (KIP-227 rules, table-driven),
the fetcher's handler, and a hypothesis property that a fetcher and a broker driven by random
wants, answers and losses always agree on what the broker reads: exactly what the fetcher
wants, at the positions it wants them (against a naive sessionless reference)."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from hypothesis import given, settings, strategies as st

from protocol.api import FetchAsk
from protocol.fetch_session import (MAX_EPOCH, ChangeJournal, FetchData, FetchSessionCache,
                                    FetchSessionHandler)
from replicas.errors import ErrorCode

FETCH_SESSION_ID_NOT_FOUND = ErrorCode.FETCH_SESSION_ID_NOT_FOUND
INVALID_FETCH_SESSION_EPOCH = ErrorCode.INVALID_FETCH_SESSION_EPOCH

pytestmark = pytest.mark.unit
A, B, C = ("t", 0), ("t", 1), ("u", 0)


@dataclass(frozen=True)
class Outcome:
    error: int = 0
    records: bytes = b""
    high_watermark: int = 10
    last_stable_offset: int = 10
    log_start_offset: int = 0
    diverging_epoch: tuple | None = None
    preferred_read_replica: int = -1


def cache(slots=10) -> FetchSessionCache:
    return FetchSessionCache(slots, random.Random(1))


def d(offset: int) -> FetchData:
    return FetchData(offset)


def ask_of(tp, data: FetchData) -> FetchAsk:
    return FetchAsk(tp, data.fetch_offset, data.current_leader_epoch, data.last_fetched_epoch,
                    data.max_bytes, data.log_start_offset)


# -- the broker's side ----------------------------------------------------------------------
def test_final_epoch_is_sessionless_and_closes_the_session_named():
    c = cache()
    ctx = c.new_context(0, 0, {A: d(1)}, (), privileged=False)
    assert ctx.session_id and len(c) == 1
    final = c.new_context(ctx.session_id, -1, {A: d(4), B: d(0)}, (), privileged=False)
    assert final.session_id == 0 and len(c) == 0
    assert final.asks() == [(A, d(4)), (B, d(0))]
    assert c.new_context(ctx.session_id, 1, {}, (), False) == FETCH_SESSION_ID_NOT_FOUND


@pytest.mark.parametrize("session_id, epoch, expected", [
    (12345, 1, FETCH_SESSION_ID_NOT_FOUND),        # never given
    ("given", 2, INVALID_FETCH_SESSION_EPOCH),     # skipped one
    ("given", 5, INVALID_FETCH_SESSION_EPOCH),
    ("given", 1, None),                            # the one expected
])
def test_incremental_fetch_errors(session_id, epoch, expected):
    c = cache()
    given_id = c.new_context(0, 0, {A: d(0)}, (), False).session_id
    ctx = c.new_context(given_id if session_id == "given" else session_id, epoch, {}, (), False)
    if expected is None:
        assert ctx.asks() == [(A, d(0))] and ctx.incremental
    else:
        assert ctx == expected


def test_an_incremental_fetch_updates_adds_forgets_and_reads_the_whole_session():
    c = cache()
    sid = c.new_context(0, 0, {A: d(0), B: d(0)}, (), False).session_id
    ctx = c.new_context(sid, 1, {A: d(7), C: d(2)}, [B], False)
    assert ctx.asks() == [(A, d(7)), (C, d(2))]
    ctx = c.new_context(sid, 2, {}, (), False)
    assert ctx.asks() == [(A, d(7)), (C, d(2))]
    # a repeated epoch is refused: the fetcher starts over
    assert c.new_context(sid, 2, {}, (), False) == INVALID_FETCH_SESSION_EPOCH


@pytest.mark.parametrize("asked, forgotten, moves", [
    ({}, (), False),                        # nothing new
    ({A: d(5)}, (), False),                 # a position moved: the same partitions
    ({C: d(0)}, (), True),                  # one joined
    ({}, [B], True),                        # one left
    ({C: d(0)}, [B], True),                 # one left, one joined: as many as before
    ({}, [C], False),                       # forgetting one it never held
])
def test_a_sessions_members_move_only_when_partitions_join_or_leave(asked, forgotten, moves):
    c = cache()
    first = c.new_context(0, 0, {A: d(0), B: d(0)}, (), True)
    ctx = c.new_context(first.session_id, 1, asked, forgotten, True)
    assert (ctx.members != first.members) == moves
    assert ctx.asks_by_tp() is first.session.asks        # the session's own, no copy


def test_a_session_leaving_the_cache_is_marked_closed_and_handed_over():
    closed = []
    c = FetchSessionCache(10, random.Random(1), on_close=closed.append)
    a = c.new_context(0, 0, {A: d(0)}, (), True)
    b = c.new_context(0, 0, {B: d(0)}, (), True)
    c.new_context(a.session_id, -1, {}, (), True)
    assert closed == [a.session] and a.session.closed and not b.session.closed


def test_an_incremental_fetch_makes_asks_only_for_the_partitions_it_names():
    c = cache()
    first = c.new_context(0, 0, {A: d(0), B: d(0), C: d(0)}, (), True)
    before = {a.tp: a for a in first.fetch_asks()}
    ctx = c.new_context(first.session_id, 1, {B: d(5)}, (), True)
    asks = ctx.fetch_asks()
    assert asks == [ask_of(A, d(0)), ask_of(B, d(5)), ask_of(C, d(0))]    # the session's order
    assert asks[0] is before[A] and asks[2] is before[C]     # the quiet ones as they were
    assert asks[1] is not before[B]
    ctx = c.new_context(first.session_id, 2, {}, [A], True)
    assert ctx.fetch_asks() == [ask_of(B, d(5)), ask_of(C, d(0))]


def test_a_full_answer_lists_all_an_incremental_one_only_what_changed():
    c = cache()
    ctx = c.new_context(0, 0, {A: d(0), B: d(0), C: d(0)}, (), False)
    quiet = {A: Outcome(), B: Outcome(), C: Outcome()}
    assert [tp for tp, _ in ctx.respond(quiet)] == [A, B, C]
    ctx = c.new_context(ctx.session_id, 1, {}, (), False)
    assert ctx.respond(quiet) == []
    ctx = c.new_context(ctx.session_id, 2, {}, (), False)
    moved = {A: Outcome(records=b"x", high_watermark=11, last_stable_offset=11), B: Outcome(high_watermark=11, last_stable_offset=11),
             C: Outcome()}
    assert [tp for tp, _ in ctx.respond(moved)] == [A, B]
    ctx = c.new_context(ctx.session_id, 3, {}, (), False)
    changed = {A: Outcome(high_watermark=11, last_stable_offset=11),
               B: Outcome(high_watermark=11, last_stable_offset=11, log_start_offset=3),
               C: Outcome(error=6)}
    assert [tp for tp, _ in ctx.respond(changed)] == [B, C]
    ctx = c.new_context(ctx.session_id, 4, {}, (), False)
    diverged = {A: Outcome(high_watermark=11, last_stable_offset=11),
                B: Outcome(high_watermark=11, last_stable_offset=11, log_start_offset=3,
                           diverging_epoch=(2, 5)),
                C: Outcome(diverging_epoch=(-1, -1))}
    assert [tp for tp, _ in ctx.respond(diverged)] == [B]


def test_a_forgotten_then_readded_partition_is_answered_again():
    c = cache()
    sid = c.new_context(0, 0, {A: d(0), B: d(0)}, (), False).session_id
    c.new_context(sid, 1, {}, (), False).respond({A: Outcome(), B: Outcome()})
    c.new_context(sid, 2, {}, [A], False)
    ctx = c.new_context(sid, 3, {A: d(0)}, (), False)
    assert [tp for tp, _ in ctx.respond({A: Outcome(), B: Outcome()})] == [A]


def test_forgetting_every_partition_closes_the_session():
    c = cache()
    sid = c.new_context(0, 0, {A: d(0)}, (), False).session_id
    ctx = c.new_context(sid, 1, {}, [A], False)
    assert ctx.session_id == 0 and len(c) == 0 and ctx.asks() == []
    assert c.new_context(sid, 2, {}, (), False) == FETCH_SESSION_ID_NOT_FOUND


@pytest.mark.parametrize("made_with, asked_with", [(False, True), (True, False)])
def test_a_session_keeps_its_kind_of_topic_naming(made_with, asked_with):
    c = cache()
    sid = c.new_context(0, 0, {A: d(0)}, (), False, uses_topic_ids=made_with).session_id
    assert c.new_context(sid, 1, {}, (), False, uses_topic_ids=asked_with) == \
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    assert c.new_context(sid, 2, {}, (), False, uses_topic_ids=asked_with) == \
        INVALID_FETCH_SESSION_EPOCH       # the epoch is checked first
    assert c.new_context(sid, 1, {}, (), False, uses_topic_ids=made_with).incremental


class Clock:
    def __init__(self):
        self.ms = 0

    def __call__(self) -> int:
        return self.ms


def parts(n: int) -> dict:
    return {("p", i): d(0) for i in range(n)}


MIN = 120_000       # Kafka's eviction time


# existing: [(privileged, partitions, created at s)]; newcomer (privileged, partitions);
# now s; evicted: the index of the session evicted, None when none is made.
@pytest.mark.parametrize("existing, newcomer, now_s, evicted", [
    ([(False, 1, 0), (False, 1, 0)], (False, 1), 10, None),   # young consumers: no room
    ([(False, 1, 0), (False, 1, 0)], (True, 1), 10, "smaller id"),  # a follower takes one
    ([(False, 3, 0), (False, 1, 0)], (True, 1), 10, 1),       # the smallest goes
    ([(True, 1, 0), (True, 1, 0)], (True, 5), 10, None),      # young followers: no room
    ([(True, 1, 0), (False, 1, 0)], (False, 1), 10, None),
    ([(False, 1, 0), (False, 1, 1)], (False, 1), 130, 0),     # unused > 120 s: the LRU goes
    ([(True, 2, 0), (True, 4, 0)], (True, 3), 119, None),
])
def test_a_full_cache_evicts_as_kafka_does(existing, newcomer, now_s, evicted):
    clock = Clock()
    c = FetchSessionCache(len(existing), random.Random(1), clock)
    ids = []
    for privileged, n, at in existing:
        clock.ms = at * 1000
        ids.append(c.new_context(0, 0, parts(n), (), privileged).session_id)
    clock.ms = now_s * 1000
    ctx = c.new_context(0, 0, parts(newcomer[1]), (), newcomer[0])
    assert bool(ctx.session_id) == (evicted is not None)
    if evicted == "smaller id":
        evicted = ids.index(min(ids))
    gone = [i for i, sid in enumerate(ids) if c.new_context(sid, 1, {}, (), False) ==
            FETCH_SESSION_ID_NOT_FOUND]
    assert gone == ([] if evicted is None else [evicted])
    assert sum(k["evictions"] for k in c.stats.values()) == len(gone)


def test_old_sessions_become_evictable_by_size_once_used_after_120_s():
    clock = Clock()
    c = FetchSessionCache(2, random.Random(1), clock)
    small = c.new_context(0, 0, parts(1), (), True).session_id
    big = c.new_context(0, 0, parts(4), (), True).session_id
    clock.ms = 121_000                          # both old now, touched again: evictable
    c.new_context(small, 1, {}, (), True)
    c.new_context(big, 1, {}, (), True)
    assert c.new_context(0, 0, parts(1), (), False).session_id == 0   # a consumer < a follower
    assert c.new_context(0, 0, parts(2), (), True).session_id != 0    # a follower: smallest
    assert c.new_context(small, 2, {}, (), True) == FETCH_SESSION_ID_NOT_FOUND
    assert c.new_context(big, 2, {}, (), True).incremental


class NaiveCache:
    """Kafka's FetchSessionCacheShard restated with plain lists: what a session's
    evictability and size were at its last use, and tryEvict over sorted copies."""

    def __init__(self, slots):
        self.slots, self.sessions = slots, {}     # name -> dict

    def use(self, name, now):
        s = self.sessions[name]
        s["last"], s["size_key"] = now, s["size"]
        s["by_all"] = now - s["created"] > MIN
        s["by_priv"] = s["by_all"] or not s["privileged"]

    def create(self, name, privileged, size, now):
        if len(self.sessions) >= self.slots:
            lru = min(self.sessions,
                      key=lambda n: (self.sessions[n]["last"], self.sessions[n]["id"]))
            if now - self.sessions[lru]["last"] > MIN:
                del self.sessions[lru]
            else:
                flag = "by_priv" if privileged else "by_all"
                keys = sorted((s["privileged"], s["size_key"], s["id"], n)
                              for n, s in self.sessions.items() if s[flag])
                if not keys or (privileged, size, 0) < keys[0][:3]:
                    return False
                del self.sessions[keys[0][3]]
        self.sessions[name] = dict(privileged=privileged, size=size, created=now, id=None,
                                   order=0)
        return True


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["new", "use"]), st.booleans(),
                          st.integers(1, 4), st.integers(0, 90), st.integers(0, 9)),
                max_size=40))
def test_eviction_matches_a_naive_restatement_of_kafka(script):
    clock = Clock()
    c, ref = FetchSessionCache(3, random.Random(3), clock), NaiveCache(3)
    live, epochs, order = {}, {}, 0           # name -> session id
    for i, (op, privileged, size, advance_s, pick) in enumerate(script):
        clock.ms += advance_s * 1000
        order += 1
        if op == "new":
            ctx = c.new_context(0, 0, parts(size), (), privileged)
            made = ref.create(i, privileged, size, clock.ms)
            assert bool(ctx.session_id) == made
            if made:
                live[i], epochs[i] = ctx.session_id, 1
                ref.sessions[i]["id"] = ctx.session_id
                ref.sessions[i]["order"] = order
                ref.use(i, clock.ms)
        elif live:
            name = sorted(live)[pick % len(live)]
            ctx = c.new_context(live[name], epochs[name], {}, (), False)
            if name in ref.sessions:
                assert not isinstance(ctx, int)
                epochs[name] += 1
                ref.sessions[name]["order"] = order
                ref.use(name, clock.ms)
            else:
                assert ctx == FETCH_SESSION_ID_NOT_FOUND
                del live[name]
        assert {live[n] for n in ref.sessions} == {sid for n, sid in live.items()
                                                   if n in ref.sessions}
        assert len(c) == len(ref.sessions)


# -- the fetcher's side ---------------------------------------------------------------------
def test_handler_sends_everything_first_then_only_changes_and_forgets():
    h = FetchSessionHandler()
    plan = h.build({A: d(0), B: d(0)})
    assert (plan.session_id, plan.epoch, set(plan.partitions)) == (0, 0, {A, B})
    h.on_response(plan, 0, 77)
    plan = h.build({A: d(5), C: d(0)})
    assert (plan.session_id, plan.epoch) == (77, 1)
    assert plan.partitions == {A: d(5), C: d(0)} and plan.forgotten == (B,)
    h.on_response(plan, 0, 77)
    plan = h.build({A: d(5), C: d(0)})
    assert (plan.epoch, plan.partitions, plan.forgotten) == (2, {}, ())


@pytest.mark.parametrize("error", [FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, 7])
def test_handler_starts_over_after_an_error(error):
    h = FetchSessionHandler()
    h.on_response(h.build({A: d(0)}), 0, 9)
    h.on_response(h.build({A: d(3)}), error, 0)
    plan = h.build({A: d(3)})
    assert (plan.session_id, plan.epoch, plan.partitions) == (0, 0, {A: d(3)})


def test_handler_stays_sessionless_when_the_broker_gives_no_session():
    h = FetchSessionHandler()
    h.on_response(h.build({A: d(0)}), 0, 0)
    assert h.build({A: d(1)}).epoch == 0


def test_handler_epoch_wraps_to_one():
    h = FetchSessionHandler()
    h.session_id, h.epoch = 5, MAX_EPOCH
    plan = h.build({})
    h.on_response(plan, 0, 5)
    assert h.epoch == 1


# -- both sides, against a naive reference --------------------------------------------------
steps = st.lists(st.tuples(
    st.dictionaries(st.sampled_from([A, B, C, ("v", 3)]), st.integers(0, 3), max_size=4),
    st.sampled_from(["ok", "ok", "ok", "lost", "evicted"])), min_size=1, max_size=30)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_the_broker_reads_exactly_what_the_fetcher_wants(script):
    clock = Clock()
    c, h = FetchSessionCache(1, random.Random(1), clock), FetchSessionHandler()
    for wants, fate in script:
        wanted = {tp: d(o) for tp, o in wants.items()}
        plan = h.build(wanted)
        if fate == "evicted":           # unused past the eviction time: another takes the slot
            clock.ms += MIN + 1
            c.new_context(0, 0, {}, (), privileged=True)
        forgotten = list(plan.forgotten)
        ctx = c.new_context(plan.session_id, plan.epoch, plan.partitions, forgotten, True)
        if isinstance(ctx, int):
            h.on_response(plan, ctx, 0)
            continue
        # The naive reference: a sessionless fetcher asks for all it wants, every time.
        assert dict(ctx.asks()) == wanted
        assert ctx.fetch_asks() == [ask_of(tp, x) for tp, x in ctx.asks()]
        if fate == "lost":              # the answer never arrived: the connection is reset
            h.reset()
            continue
        h.on_response(plan, 0, ctx.session_id)


# -- reading only what changed (the ChangeJournal) ------------------------------------------
def test_journal_names_what_changed_since_a_token_and_nothing_when_it_cannot_tell():
    j = ChangeJournal()
    assert j.since(0)[1] is None                      # never read: everything
    token, _ = j.since(0)
    j.note([A])
    j.note([B, A])
    later, changed = j.since(token)
    assert changed == {A, B} and later > token
    assert j.since(later)[1] == set()
    j.note_all()                                      # leadership moved: anything may have
    assert j.since(later)[1] is None
    fresh, _ = j.since(0)
    j.note([C])
    assert j.since(fresh)[1] == {C}


def journal_cache(clock, interval_ms=1000) -> FetchSessionCache:
    return FetchSessionCache(10, random.Random(1), clock, interval_ms)


def test_an_incremental_fetch_reads_only_what_was_asked_changed_or_unfinished():
    clock, j = Clock(), ChangeJournal()
    c = journal_cache(clock)
    full = c.new_context(0, 0, {A: d(0), B: d(0), C: d(0)}, (), True)
    assert full.reads(j) is None                      # a new session reads everything
    full.respond({A: Outcome(), B: Outcome(records=b"x"), C: Outcome()}, 1 << 20)
    sid = full.session_id
    ctx = c.new_context(sid, 1, {A: d(7)}, (), True)
    assert ctx.reads(j) == {A, B}                     # A asked (a seek), B had records
    ctx.respond({A: Outcome(), B: Outcome()}, 1 << 20)
    ctx = c.new_context(sid, 2, {A: d(1)}, (), True)
    assert ctx.reads(j) == {A}                        # asked (its position moved)
    ctx.respond({A: Outcome(error=6)}, 1 << 20)       # an error: unfinished
    ctx = c.new_context(sid, 3, {}, (), True)
    assert ctx.reads(j) == {A}
    ctx.respond({A: Outcome()}, 1 << 20)
    j.note([C])                                       # an append to C
    ctx = c.new_context(sid, 4, {}, (), True)
    assert ctx.reads(j) == {C}
    ctx.respond({C: Outcome(high_watermark=11)}, 1 << 20)
    ctx = c.new_context(sid, 5, {}, (), True)
    assert ctx.reads(j) == set()                      # quiet: nothing read
    ctx.respond({}, 1 << 20)
    clock.ms = 1000                                   # the interval: everything again
    ctx = c.new_context(sid, 6, {}, (), True)
    assert ctx.reads(j) is None
    ctx.respond({A: Outcome(), B: Outcome(), C: Outcome(high_watermark=11)}, 1 << 20)
    ctx = c.new_context(sid, 7, {}, (), True)
    assert ctx.reads(j) == set()


def test_an_answer_near_its_budget_or_a_reset_journal_reads_everything_next():
    clock, j = Clock(), ChangeJournal()
    c = journal_cache(clock)
    full = c.new_context(0, 0, {A: d(0), B: d(0)}, (), True)
    full.reads(j)
    full.respond({A: Outcome(records=b"x" * 60), B: Outcome()}, 100)   # B had no room
    ctx = c.new_context(full.session_id, 1, {A: d(5)}, (), True)
    assert ctx.reads(j) is None
    ctx.respond({A: Outcome(), B: Outcome()}, 100)
    j.note_all()
    ctx = c.new_context(full.session_id, 2, {}, (), True)
    assert ctx.reads(j) is None


def test_without_a_clock_or_a_journal_everything_is_read():
    c = cache()
    ctx = c.new_context(0, 0, {A: d(0)}, (), True)
    assert ctx.reads(ChangeJournal()) is None
    ctx.respond({A: Outcome()})
    assert c.new_context(ctx.session_id, 1, {}, (), True).reads(ChangeJournal()) is None
    assert journal_cache(Clock()).new_context(0, 0, {A: d(0)}, (), True).reads(None) is None


# One step of a random life: (kind, partition index, amount).
life_step = st.tuples(st.sampled_from(["append", "hw", "start", "fetch", "error", "tick",
                                       "all", "seek"]), st.integers(0, 2), st.integers(1, 3))


@given(st.lists(life_step, max_size=60))
@settings(max_examples=150, deadline=None)
def test_reading_only_what_changed_answers_what_reading_everything_answers(steps):
    """Against Kafka's rule (read every partition of the session on every fetch): a session
    that reads only what its journal, its request and its unfinished set name answers the
    same partitions with the same outcomes, request after request, whatever happens between
    them, as long as every change is noted (as the broker's purgatory does)."""
    tps = (A, B, C)
    state = {tp: {"leo": 0, "hw": 0, "start": 0, "error": 0} for tp in tps}
    position = {tp: 0 for tp in tps}

    def outcome(tp, offset):
        s = state[tp]
        if s["error"]:
            return Outcome(error=s["error"], high_watermark=s["hw"])
        return Outcome(records=b"r" * max(0, s["hw"] - offset), high_watermark=s["hw"],
                       last_stable_offset=s["hw"], log_start_offset=s["start"])

    clock, j = Clock(), ChangeJournal()
    smart, naive = journal_cache(clock, 10_000), cache()
    # what the fetcher's next request carries: every partition first, then the positions
    # that moved (records received, seeks) since its last request
    pending = {tp: d(0) for tp in tps}
    s_ctx = n_ctx = None
    epoch = 0
    for kind, i, amount in steps + [("fetch", 0, 1)]:
        tp = tps[i]
        if kind == "append":
            state[tp]["leo"] += amount
            j.note([tp])
        elif kind == "hw":
            state[tp]["hw"] = min(state[tp]["hw"] + amount, state[tp]["leo"])
            j.note([tp])
        elif kind == "start":
            state[tp]["start"] = min(state[tp]["start"] + 1, state[tp]["hw"])
            j.note_all()
        elif kind == "error":
            state[tp]["error"] = 0 if state[tp]["error"] else 6
            j.note_all()
        elif kind == "tick":
            clock.ms += amount * 4000
        elif kind == "all":
            j.note_all()
        elif kind == "seek":           # the fetcher moves without records: its request says so
            position[tp] = max(0, position[tp] - amount)
            pending[tp] = d(position[tp])
        if kind != "fetch":
            continue
        s_ctx = smart.new_context(s_ctx.session_id if s_ctx else 0, epoch, pending, (), True)
        n_ctx = naive.new_context(n_ctx.session_id if n_ctx else 0, epoch, pending, (), True)
        pending = {}
        reads = s_ctx.reads(j)
        s_out = s_ctx.respond({tp: outcome(tp, position[tp]) for tp in tps
                               if reads is None or tp in reads}, 1 << 20)
        n_ctx.reads(None)
        n_out = n_ctx.respond({tp: outcome(tp, position[tp]) for tp in tps}, 1 << 20)
        assert s_out == n_out
        for tp, o in n_out:            # the fetcher moves past what it received
            if o.records:
                position[tp] += len(o.records)
                pending[tp] = d(position[tp])
        epoch += 1


edits = st.lists(st.tuples(
    st.dictionaries(st.sampled_from([A, B, C, ("v", 3), ("v", 4)]),
                    st.none() | st.integers(0, 3), max_size=4),
    st.sampled_from(["ok", "ok", "ok", "error", "lost", "closed"]),
    st.booleans()), min_size=1, max_size=30)


@settings(max_examples=300, deadline=None)
@given(edits)
def test_a_plan_built_from_the_changes_is_the_plan_built_from_everything(script):
    """`build(wanted, changed)` with `changed` naming what moved since the previous build
    (and, at random, a few partitions that did not) sends, forgets and holds exactly what
    `build(wanted)` does, through errors, lost answers and sessions the broker closed."""
    by_changes, by_all = FetchSessionHandler(), FetchSessionHandler()
    wanted: dict = {}
    session_ids = iter(range(10, 10**6))
    for edit, fate, extra in script:
        for tp, offset in edit.items():
            if offset is None:
                wanted.pop(tp, None)
            else:       # a new FetchData each time, as the fetcher makes them
                wanted[tp] = d(offset)
        changed = set(edit) | ({A, ("v", 4)} if extra else set())
        plan, reference = by_changes.build(wanted, changed), by_all.build(wanted)
        assert (plan.session_id, plan.epoch, plan.partitions, set(plan.forgotten)) == \
            (reference.session_id, reference.epoch, reference.partitions,
             set(reference.forgotten))
        if fate == "lost":
            by_changes.reset(), by_all.reset()
            continue
        error = 70 if fate == "error" else 0
        sid = 0 if fate == "closed" else (plan.session_id or next(session_ids))
        by_changes.on_response(plan, error, sid)
        by_all.on_response(reference, error, sid)
        assert (by_changes.session_id, by_changes.epoch, by_changes.held) == \
            (by_all.session_id, by_all.epoch, by_all.held)
