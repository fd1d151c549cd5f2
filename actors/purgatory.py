"""Parked fetches, keyed by the partitions they read (Kafka's DelayedFetch purgatory).

Rules:
- A long-poll fetch that found less than min_bytes becomes a DelayedFetch, watched on
  every partition it reads. `changed(tps)` (a leader append added data, a high watermark
  moved) looks only at the fetches watching those partitions, and for each runs its cheap
  `ready(tp)` check (is there something past its fetch offset on THAT partition, or an
  error to tell?); only a fetch that passes reads again, and only the partitions that
  passed (`read(only)`: the others keep their first, empty answer with their high
  watermark and log start brought up to date: a follower's session of a hundred quiet
  partitions costs one read, not a hundred). `moved(tps)` (the leadership of those
  partitions moved) reads them again in every fetch watching them, ready or not. A fetch
  that reaches its deadline (the broker's Timers) completes with what is there then (`read(frozenset())`: the marks brought up to date).
- Marks are brought up to date only where they may have moved: every read is told which
  partitions the journal (below) names as changed since the fetch's last read (`changed`,
  None when the journal cannot tell), so a wake or a deadline costs what changed, not
  what the fetch watches (a consumer's fetch of 3,000 partitions woken by one append
  refreshes one partition's marks, not 3,000).
- Every change it hears of also goes to its ChangeJournal (`journal`), which the fetch
  sessions ask which partitions a new fetch must read (protocol/fetch_session.py).
- Everything here runs under the broker's lock (the callers hold it), so a change can never
  fall between a fetch's "not enough yet" and its parking.
- Completion stores the answer, releases `result()` and runs the `ready` callbacks (from
  the completing thread: they must be short, e.g. hand the answer to an event loop). A
  completed fetch leaves the purgatory at once.
- No thundering herd: one append wakes only the fetches reading that partition, and an
  appended batch a consumer cannot see yet (above the HW) wakes none of the consumers.
- A fetch of a session (protocol/fetch_session.py) parks on its session's SessionWatch:
  the session's partitions stay watched between its fetches and the watch is brought up
  to date only when partitions joined or left (the session's `members` moved), so a
  steady follower of thousands of partitions parks and leaves in O(1), not O(partitions).
  A change wakes the fetches parked on the watches of that partition. A closed session
  (`session_closed`, from any thread) is taken note of, and its watch leaves the index at
  the next park or change once no fetch is parked on it; a session already closed parks
  its fetch as one without a session.
"""

from __future__ import annotations

import collections

from actors.completion import RESULT_TIMEOUT_S, Completion, Watchers
from protocol.fetch_session import ChangeJournal


class DelayedFetch(Completion):
    """One parked fetch. `read(only, previous, changed)` (under the broker lock) →
    (answers, enough): the partitions in `only` read again (all when None), the others'
    `previous` answers refreshed where in `changed` (all when None; the read never refers
    to its DelayedFetch: no cycle);
    `ready(tp)` → whether reading again could be worth it for that partition. `answers`
    holds the first read's until completion stores the last; `token` is the journal's when
    they were read."""

    __slots__ = ("tps", "read", "ready", "answers", "token", "watch")

    def __init__(self, tps, read, ready, answers=None):
        super().__init__()
        self.tps = tps                  # iterable again (a tuple, or the asks' dict)
        self.read, self.ready = read, ready
        self.answers = answers
        self.token = 0
        self.watch = None               # its session's SessionWatch, while parked on one

    def complete(self, answers) -> None:
        def store():
            self.answers = answers
        self.settle(store)

    def result(self) -> dict:
        self.wait(RESULT_TIMEOUT_S)
        return self.answers


class SessionWatch:
    """A fetch session's partitions as watched (`tps`, as of the session's `members`)
    and the fetches parked on them."""

    __slots__ = ("tps", "members", "fetches", "closed")

    def __init__(self):
        self.tps: frozenset = frozenset()
        self.members = -1
        self.fetches: set[DelayedFetch] = set()
        self.closed = False


class FetchPurgatory:
    def __init__(self):
        self._watchers = Watchers()         # tp → fetches parked without a session
        self._sessions = Watchers()         # tp → SessionWatches
        self._all: set[DelayedFetch] = set()
        self._closed: collections.deque = collections.deque()   # sessions closed since
        self.journal = ChangeJournal()     # the same changes, for the fetch sessions

    def park(self, fetch: DelayedFetch, session=None, members: int = 0) -> None:
        """Watch `fetch`, whose answers were read just now (under the same lock hold); with
        `session` (its fetch session; `members` as the fetch saw it) on the session's
        watch of `fetch.tps` (module rules)."""
        if self._closed:
            self._forget_closed()
        fetch.token = self.journal.token()
        self._all.add(fetch)
        if session is None or session.closed:
            self._watchers.watch(fetch, fetch.tps)
            return
        watch = session.watch
        if watch is None:
            watch = session.watch = SessionWatch()
        if members > watch.members:         # an older fetch of it keeps the newer set
            tps = frozenset(fetch.tps)
            self._sessions.unwatch(watch, watch.tps - tps)
            self._sessions.watch(watch, tps - watch.tps)
            watch.tps, watch.members = tps, members
        watch.fetches.add(fetch)
        fetch.watch = watch

    def unpark(self, fetch: DelayedFetch) -> None:
        self._all.discard(fetch)
        watch = fetch.watch
        if watch is None:
            self._watchers.unwatch(fetch, fetch.tps)
            return
        fetch.watch = None
        watch.fetches.discard(fetch)
        if watch.closed and not watch.fetches:
            self._sessions.unwatch(watch, watch.tps)

    def session_closed(self, session) -> None:
        """`session` left its cache (any thread: only noted here)."""
        self._closed.append(session)

    def _forget_closed(self) -> None:
        while self._closed:
            watch = self._closed.popleft().watch
            if watch is not None and not watch.closed:
                watch.closed = True
                if not watch.fetches:
                    self._sessions.unwatch(watch, watch.tps)

    def _watching(self, tp) -> list:
        """The fetches parked on `tp`, with or without a session (a copy)."""
        fetches = list(self._watchers.of(tp))
        for watch in self._sessions.of(tp):
            fetches.extend(watch.fetches)
        return fetches

    def changed(self, tps) -> None:
        self.journal.note(tps)
        if self._closed:
            self._forget_closed()
        ready: dict[DelayedFetch, set] = {}
        for tp in tps:
            for fetch in self._watching(tp):
                if not fetch.done and fetch.ready(tp):
                    ready.setdefault(fetch, set()).add(tp)
        for fetch, only in ready.items():
            self._try(fetch, only)

    def moved(self, tps) -> None:
        """The replica states of `tps` moved (leadership): the fetches watching them read
        those partitions again, ready or not (an error may be the news)."""
        self.journal.note(tps)
        again: dict[DelayedFetch, set] = {}
        for tp in tps:
            for fetch in self._watching(tp):
                if not fetch.done:
                    again.setdefault(fetch, set()).add(tp)
        for fetch, only in again.items():
            self._try(fetch, only)

    def expire(self, fetch: DelayedFetch) -> None:
        """Its deadline passed: complete with whatever is there now."""
        if not fetch.done:
            _, changed = self.journal.since(fetch.token)
            answers, _ = fetch.read(frozenset(), fetch.answers, changed)
            self.unpark(fetch)
            fetch.complete(answers)

    def _try(self, fetch: DelayedFetch, only) -> None:
        token, changed = self.journal.since(fetch.token)
        answers, enough = fetch.read(only, fetch.answers, changed)
        if enough:
            self.unpark(fetch)
            fetch.complete(answers)
        else:
            fetch.answers, fetch.token = answers, token

    def __len__(self) -> int:
        return len(self._all)

    def watched_partitions(self) -> int:
        """Partitions someone waits on (with or without a session), watches of closed
        sessions included until they go."""
        return len(self._watchers.partitions() | self._sessions.partitions())
