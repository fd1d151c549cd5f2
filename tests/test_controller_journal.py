"""The controller's journal (controller/journal.py): the Journal alone, table-driven, then
through the controller's pure core over the in-memory ZooKeeper (tests/memory_zk.py),
brokers as plain sessions, elections and ISR changes journaled with the controller's clock."""

from __future__ import annotations

import pytest

from controller import events as ev
from controller.context import ControllerContext, TopicPartition
from controller.controller import Controller, ControllerConfig
from controller.journal import DEFAULT_MAX_ENTRIES, Journal
from controller.layout import LeaderIsrAndControllerEpoch
from controller.requests import RequestBatch
from controller.scheduler import ManualScheduler
from tests.fakes import AnsweringChannel
from tests.memory_zk import MemoryZk, MemoryZkStore, registered_broker, SimLoop, settle

pytestmark = pytest.mark.unit


# -- the Journal alone --------------------------------------------------------------------------
def observe_all(journal, states, time_ms=1_000):
    """states: (leader, leader_epoch, isr, zk_version) of partition t-0, one after another."""
    return [journal.observe(time_ms + i, "t", 0, *s) for i, s in enumerate(states)]


@pytest.mark.parametrize("states, kinds, last", [
    # a partition first seen: a leader entry with no previous state
    ([(1, 0, (1, 2, 3), 0)], ["leader"],
     {"leader": 1, "leader_epoch": 0, "isr": (1, 2, 3), "previous_leader": None,
      "previous_leader_epoch": None, "previous_isr": None}),
    # the same state again records nothing, whatever its partition epoch
    ([(1, 0, (1, 2, 3), 0), (1, 0, (1, 2, 3), 0), (1, 0, (1, 2, 3), 4)], ["leader"],
     {"leader": 1, "zk_version": 0}),
    # only the ISR changed: "isr"
    ([(1, 0, (1, 2, 3), 0), (1, 0, (1, 2), 1)], ["leader", "isr"],
     {"leader": 1, "leader_epoch": 0, "isr": (1, 2), "previous_isr": (1, 2, 3),
      "zk_version": 1}),
    # the ISR grows back
    ([(1, 0, (1, 2, 3), 0), (1, 0, (1, 2), 1), (1, 0, (1, 2, 3), 2)], ["leader", "isr", "isr"],
     {"isr": (1, 2, 3), "previous_isr": (1, 2)}),
    # a new leader: "leader", with the previous one
    ([(1, 0, (1, 2), 0), (2, 1, (2,), 1)], ["leader", "leader"],
     {"leader": 2, "leader_epoch": 1, "isr": (2,), "previous_leader": 1,
      "previous_leader_epoch": 0, "previous_isr": (1, 2)}),
    # a leader epoch bump alone (same leader and ISR) is a leader change too
    ([(1, 0, (1, 2), 0), (1, 1, (1, 2), 1)], ["leader", "leader"],
     {"leader": 1, "leader_epoch": 1, "previous_leader": 1, "previous_leader_epoch": 0}),
    # no leader (-1) and back
    ([(1, 0, (1,), 0), (-1, 1, (1,), 1), (1, 2, (1,), 2)], ["leader", "leader", "leader"],
     {"leader": 1, "previous_leader": -1}),
])
def test_a_change_is_journaled_once_by_its_kind(states, kinds, last):
    journal = Journal()
    observe_all(journal, states)
    entries = journal.entries()
    assert [e["kind"] for e in entries] == kinds
    assert [e["seq"] for e in entries] == list(range(1, len(kinds) + 1))
    assert {k: entries[-1][k] for k in last} == last
    assert entries[-1]["topic"] == "t" and entries[-1]["partition"] == 0
    assert "reason" not in entries[-1]          # never guessed


@pytest.mark.parametrize("max_entries, records, kept", [
    (3, 2, [1, 2]),
    (3, 3, [1, 2, 3]),
    (3, 7, [5, 6, 7]),
    (1, 4, [4]),
])
def test_the_bound_keeps_the_newest(max_entries, records, kept):
    journal = Journal(max_entries)
    for i in range(records):
        journal.broker(i, "joined", i)
    assert [e["seq"] for e in journal.entries()] == kept
    assert len(journal) == len(kept) and journal.last_seq == records


@pytest.mark.parametrize("after_seq, limit, seqs", [
    (0, None, [3, 4, 5, 6]),          # entries 1-2 fell off the bound: the oldest kept
    (2, None, [3, 4, 5, 6]),
    (3, None, [4, 5, 6]),
    (4, 1, [5]),
    (5, 10, [6]),
    (6, None, []),                    # nothing new
    (99, None, []),
    (0, 0, []),
])
def test_entries_after_a_seq(after_seq, limit, seqs):
    journal = Journal(4)
    for i in range(6):
        journal.broker(1_000 + i, "joined", i)
    assert [e["seq"] for e in journal.entries(after_seq, limit)] == seqs


def test_entries_are_copies_with_times_and_fields_as_passed():
    journal = Journal(first_seq=501)
    journal.controller(7_000, "active", 3)
    journal.controller(8_000, "resigned", 3, reason="moved")
    journal.observe(9_000, "t", 2, 1, 0, [1, 2], 5, reason="created")
    first, second, third = journal.entries()
    assert first == {"seq": 501, "time_ms": 7_000, "kind": "controller", "event": "active",
                     "epoch": 3}
    assert second["reason"] == "moved" and third["reason"] == "created"
    assert third["isr"] == (1, 2) and third["time_ms"] == 9_000
    first["epoch"] = 99
    assert journal.entries()[0]["epoch"] == 3
    assert journal.entries(502) == [third] and journal.last_seq == 503


def test_baseline_and_forgetting():
    journal = Journal()
    journal.baseline("t", 0, 1, 4, (1, 2), 9)
    journal.baseline("u", 0, 2, 0, (2,), 0)
    assert journal.observe(1, "t", 0, 1, 4, (1, 2), 9) is None       # remembered, not journaled
    change = journal.observe(2, "t", 0, 2, 5, (2,), 10, reason="election")
    assert (change["previous_leader"], change["previous_leader_epoch"], change["reason"]) == \
        (1, 4, "election")
    assert journal.partitions_remembered == 2
    journal.forget_topic("u")
    assert journal.partitions_remembered == 1 and journal.remembered("u", 0) is None
    journal.forget_partitions()
    assert journal.partitions_remembered == 0
    assert journal.observe(3, "t", 0, 2, 5, (2,), 10)["kind"] == "leader"   # first seen again


def test_a_journal_needs_room():
    assert Journal().max_entries == DEFAULT_MAX_ENTRIES
    with pytest.raises(ValueError):
        Journal(0)
    with pytest.raises(ValueError):
        Journal().record(0, "gossip")


@pytest.mark.parametrize("notes, reason", [
    ([("replica-offline", False)], "replica-offline"),
    ([("reassignment", False), ("replica-offline", False)], "reassignment"),   # first stays
    ([("replica-offline", False), ("election", True)], "election"),     # an election wins
    ([("election", True), ("replica-offline", False)], "election"),
    ([("election", True), ("preferred", True)], "election"),            # the first election
])
def test_the_reason_a_batch_keeps(notes, reason):
    batch = RequestBatch(100, ControllerContext())
    for why, election in notes:
        batch.note_reason(TopicPartition("t", 0), why, election=election)
    assert batch.reasons == {("t", 0): reason}
    batch.clear()
    assert batch.reasons == {} and batch.announced_partitions() == set()


# -- through the controller ---------------------------------------------------------------------
CLUSTER = "journal"


class World:
    """Controllers over the in-memory ZooKeeper with a settable clock; brokers are sessions
    that register; StopReplica(delete) is answered (AnsweringChannel)."""

    def __init__(self, brokers=(1, 2, 3)):
        self.zk = MemoryZk()
        self.now_ms = 1_000_000
        self.admin = MemoryZkStore(self.zk, CLUSTER).start()
        self.channel = AnsweringChannel()
        self.brokers: dict[int, MemoryZkStore] = {}
        self.controllers: dict[int, Controller] = {}
        for b in brokers:
            self.broker_up(b)

    def controller(self, cid: int) -> Controller:
        store = MemoryZkStore(self.zk, CLUSTER).start()
        c = Controller(cid, store, self.channel, lambda: 0,
                       ControllerConfig(auto_leader_rebalance_enable=False),
                       scheduler=ManualScheduler(0), wall_clock_ms=lambda: self.now_ms)
        c.loop = SimLoop(c.process, name=f"controller-{cid}")
        self.channel.controllers[cid] = c
        self.controllers[cid] = c.start()
        self.settle()
        return c

    def settle(self, advance_ms: int = 0) -> None:
        self.now_ms += advance_ms
        settle(self.zk, *(c.loop for c in self.controllers.values()))

    def broker_up(self, b: int) -> None:
        self.brokers[b] = registered_broker(self.zk, CLUSTER, b)
        self.settle()


def brief(entries) -> list[tuple]:
    """(kind, what) per entry: a partition's (topic, partition, leader, isr, reason), a
    broker's or a controller's event."""
    out = []
    for e in entries:
        if e["kind"] in ("leader", "isr"):
            out.append((e["kind"], e["topic"], e["partition"], e["leader"], e["isr"],
                        e.get("reason")))
        elif e["kind"] == "broker":
            out.append(("broker", e["event"], e["broker"]))
        else:
            out.append(("controller", e["event"], e["epoch"], e.get("reason")))
    return out


def test_the_controller_journals_elections_isr_changes_and_its_terms():
    w = World()
    c = w.controller(100)
    assert c.is_active
    assert brief(c.journal.entries()) == [("controller", "active", 1, None)]

    w.admin.create_topic("t", {0: [1, 2, 3], 1: [2, 3, 1]})
    w.settle(advance_ms=1_000)
    seen = c.journal.last_seq
    created = c.journal.entries(1)
    assert brief(created) == [("leader", "t", 0, 1, (1, 2, 3), "created"),
                              ("leader", "t", 1, 2, (2, 3, 1), "created")]
    assert all(e["time_ms"] == 1_001_000 and e["leader_epoch"] == 0
               and e["previous_leader"] is None for e in created)

    # the leader shrinks its ISR (AlterPartition): an "isr" entry, UpdateMetadata only
    state = c.ctx.leadership[("t", 0)]
    replies = []
    c.loop.put(ev.AlterPartition(1, c.ctx.broker_epoch(1), {("t", 0): LeaderIsrAndControllerEpoch(
        1, state.leader_epoch, (1, 2), c.ctx.epoch, state.zk_version)}, reply=replies.append))
    w.settle(advance_ms=1_000)
    (shrink,) = c.journal.entries(seen)
    assert brief([shrink]) == [("isr", "t", 0, 1, (1, 2), "alter-partition")]
    assert (shrink["previous_isr"], shrink["zk_version"], shrink["time_ms"]) == \
        ((1, 2, 3), state.zk_version + 1, 1_002_000)
    seen = c.journal.last_seq

    # every partition's state sent again (a full UpdateMetadata): nothing new
    c.loop.put(ev.BrokerModification(2))
    w.settle()
    assert c.journal.entries(seen) == []

    # broker 1 dies: it leaves; t-0 elects a new leader, t-1 loses it from the ISR (the
    # leader epoch is bumped: a leader-kind entry with the same leader)
    w.brokers.pop(1).close()
    w.settle(advance_ms=1_000)
    changes = c.journal.entries(seen)
    assert brief(changes) == [("broker", "left", 1),
                              ("leader", "t", 0, 2, (2,), "election"),
                              ("leader", "t", 1, 2, (2, 3), "replica-offline")]
    assert (changes[1]["previous_leader"], changes[1]["previous_isr"]) == (1, (1, 2))
    assert (changes[2]["previous_leader"], changes[2]["leader_epoch"]) == \
        (2, changes[2]["previous_leader_epoch"] + 1)
    seen = c.journal.last_seq

    # it comes back (nothing else changes), catches up into t-0's ISR, and a preferred
    # election gives it t-0 again
    w.broker_up(1)
    state = c.ctx.leadership[("t", 0)]
    c.loop.put(ev.AlterPartition(2, c.ctx.broker_epoch(2), {("t", 0): LeaderIsrAndControllerEpoch(
        2, state.leader_epoch, (2, 1), c.ctx.epoch, state.zk_version)}, reply=replies.append))
    w.settle()
    c.loop.put(ev.PreferredReplicaElection(frozenset({("t", 0)}), reply=replies.append))
    w.settle()
    assert brief(c.journal.entries(seen)) == [
        ("broker", "joined", 1),
        ("isr", "t", 0, 2, (2, 1), "alter-partition"),
        ("leader", "t", 0, 1, (2, 1), "preferred")]

    # a deleted topic leaves the journal's memory
    assert c.journal.partitions_remembered == 2
    w.admin.request_topic_deletion("t")
    w.settle()
    assert c.journal.partitions_remembered == 0

    # the controller resigns; another candidate takes over and journals its own term
    d = w.controller(200)
    assert not d.is_active and d.journal.entries() == []
    c.shutdown()
    w.settle(advance_ms=1_000)
    assert d.is_active
    assert brief(c.journal.entries())[-1] == ("controller", "resigned", 1, "shutdown")
    assert brief(d.journal.entries()) == [("controller", "active", 2, None)]


def test_a_failover_journals_only_what_the_new_controller_changes():
    w = World()
    c = w.controller(100)
    w.admin.create_topic("t", {0: [1, 2], 1: [2, 1]})
    w.settle()
    d = w.controller(200)
    c.shutdown()
    w.brokers.pop(1).close()            # gone before the new controller loads the cluster
    w.settle()
    assert d.is_active
    assert brief(d.journal.entries()) == [
        ("controller", "active", 2, None),
        ("leader", "t", 0, 2, (2,), "election"),          # loaded states: not journaled
        ("leader", "t", 1, 2, (2,), "replica-offline")]
    assert d.journal.partitions_remembered == 2


def test_a_term_whose_zookeeper_goes_away_mid_event_resigns_answers_and_comes_back():
    """A write failing with ZkUnavailable mid-event moves the controller even when freeing
    /controller fails too (ZooKeeper still away): the event's caller is answered
    NOT_CONTROLLER, the term is journaled resigned for "error", and the re-election after the
    back-off starts a new term."""
    w = World()
    c = w.controller(100)
    w.admin.create_topic("t", {0: [1, 2, 3]})
    w.settle()
    w.brokers.pop(1).close()                   # t-0 moves to 2; 1 comes back into the ISR
    w.broker_up(1)
    state = c.ctx.leadership[("t", 0)]
    c.loop.put(ev.AlterPartition(2, c.ctx.broker_epoch(2), {("t", 0): LeaderIsrAndControllerEpoch(
        2, state.leader_epoch, (2, 3, 1), c.ctx.epoch, state.zk_version)}))
    w.settle()
    w.zk.fail_next_writes(c.store, 2)          # the preferred election's write, the delete
    replies = []
    c.loop.put(ev.PreferredReplicaElection(frozenset({("t", 0)}), reply=replies.append))
    w.settle()
    assert [type(r).__name__ for r in replies] == ["NotController"]
    assert brief(c.journal.entries())[-1] == ("controller", "resigned", 1, "error")
    assert not c.is_active and w.admin.get_controller() == 100   # /controller not freed
    c.scheduler.advance(c.config.reelect_backoff_ms)
    w.settle()
    assert c.is_active
    assert brief(c.journal.entries())[-1] == ("controller", "active", 2, None)
