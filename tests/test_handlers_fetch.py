"""Fetch through protocol/handlers/ (over tests/handler_wire.py; v0-3 are
test_protocol_legacy's): what reaches the broker, every partition asked answered, fetch
sessions (full then incremental, forgotten partitions, reads decided by the broker's change
journal), a diverging epoch for a follower, client metadata and the preferred read replica
(v11+, KIP-392), topics by id (v13+), the replica in replica_state (v15) and the new
leader's endpoint (v16)."""

from __future__ import annotations

import uuid

import pytest
from kafka.protocol.consumer import FetchRequest

from protocol.api import ClientMetadata, FetchAsk, topic_id_text
from protocol.fetch_session import ChangeJournal
from tests.fake_broker_api import FakeBrokerApi
from tests.handler_wire import ask, cluster, fetch_request, versions
from tests.protocol_samples import TOPIC_IDS

pytestmark = pytest.mark.unit


def name_of(t) -> str:
    """A Fetch answer's topic: its name, or from v13 the name of its id."""
    return t.topic or {i: n for n, i in TOPIC_IDS.items()}.get(t.topic_id)


def fetch_cluster() -> FakeBrokerApi:
    fake = cluster()
    tp = ("orders", 0)
    for data, count in ((b"first-batch", 2), (b"second-batch", 3), (b"third-batch", 1)):
        fake.append(tp, data, count=count)                    # 0-1, 2-4, 5
    fake.partition(tp).hw = 5                                 # offset 5 not yet committed
    fake.partition(tp).log_start = 1
    fake.partition(("orders", 1)).leader = 2                  # not us
    return fake


@pytest.mark.parametrize("version", versions(1, 4))          # v0-3: test_protocol_legacy
def test_fetch_passes_the_request_to_the_broker(version):
    fake = fetch_cluster()
    ask(fake, fetch_request(version, {"orders": [(0, 3, 4, 4, 1000), (2, 0, -1, -1, 50)],
                                      "audit": [(0, 0, -1, -1, 4096)]}, isolation=1,
                            max_wait_ms=750))
    (call,) = fake.calls_of("fetch")
    assert (call["replica_id"], call["max_wait_ms"], call["min_bytes"], call["max_bytes"],
            call["isolation_level"]) == (-1, 750, 7, 123456, 1)
    assert type(call["max_wait_ms"]) is int
    cle = 4 if version >= 9 else -1
    lfe = 4 if version >= 12 else -1
    assert call["asks"] == [FetchAsk(("orders", 0), 3, cle, lfe, 1000),
                            FetchAsk(("orders", 2), 0, -1, -1, 50),
                            FetchAsk(("audit", 0), 0, -1, -1, 4096)]


@pytest.mark.parametrize("isolation", [0, 1])
@pytest.mark.parametrize("version", versions(1, 4))          # v0-3: test_protocol_legacy
def test_fetch_answers_every_partition_asked(version, isolation):
    fake = fetch_cluster()
    resp = ask(fake, fetch_request(version, {"orders": [(0, 3, -1, -1, 1 << 20),
                                                        (1, 0, -1, -1, 1 << 20)],
                                             "audit": [(0, 0, -1, -1, 1 << 20),
                                                       (7, 0, -1, -1, 1 << 20)]},
                                   isolation=isolation))
    if version >= 7:
        assert (resp.error_code, resp.session_id) == (0, 0)
    start = (lambda n: n) if version >= 5 else (lambda n: -1)
    rows = [(name_of(t), p.partition_index, p.error_code, p.high_watermark,
             p.last_stable_offset, p.log_start_offset, p.records)
            for t in resp.responses for p in t.partitions]
    # The batch holding offset 3, unchanged; the one at 5 is above the HW.
    assert rows[0] == ("orders", 0, 0, 5, 5, start(1), b"second-batch")
    # orders-1 is led by broker 2; from v11 a consumer may read our follower copy (KIP-392)
    follower_read = 0 if version >= 11 else 6
    assert [r[:3] for r in rows[1:]] == [("orders", 1, follower_read), ("audit", 0, 0),
                                         ("audit", 7, 3)]
    assert rows[2][3:6] == (0, 0, start(0))
    assert rows[2][6] in (b"", None)
    aborted = [] if isolation == 1 else None
    assert [p.aborted_transactions for t in resp.responses for p in t.partitions] == \
        [aborted] * 4
    if version >= 12:
        p = resp.responses[0].partitions[0]
        assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, 4)
        assert p.diverging_epoch is None          # tagged field left out: no divergence
    if version >= 11:
        assert resp.responses[0].partitions[0].preferred_read_replica == -1


@pytest.mark.parametrize("version", versions(1, 4))          # v0-3: test_protocol_legacy
def test_fetch_returns_the_first_batch_even_when_larger_than_max_bytes(version):
    fake = fetch_cluster()
    resp = ask(fake, fetch_request(version, {"orders": [(0, 1, -1, -1, 3)]}))
    assert resp.responses[0].partitions[0].records == b"first-batch"
    resp = ask(fake, fetch_request(version, {"orders": [(0, 1, -1, -1, 1 << 20)]}))
    assert resp.responses[0].partitions[0].records == b"first-batch" b"second-batch"


@pytest.mark.parametrize("version", versions(1, 7))
def test_fetch_with_a_session_id_we_never_gave_is_session_not_found(version):
    fake = fetch_cluster()
    resp = ask(fake, fetch_request(version, {"orders": [(0, 0, -1, -1, 1 << 20)]},
                                   session_id=99, session_epoch=1))
    assert (resp.error_code, resp.session_id, resp.responses) == (70, 0, [])
    assert fake.calls_of("fetch") == []


@pytest.mark.parametrize("version", versions(1, 7))
def test_fetch_session_full_then_incremental_answers_only_what_changed(version):
    fake = fetch_cluster()
    parts = {"orders": [(0, 2, -1, -1, 1 << 20)], "audit": [(0, 0, -1, -1, 1 << 20)]}
    full = ask(fake, fetch_request(version, parts, session_epoch=0))
    assert full.session_id > 0
    assert [(name_of(t), len(t.partitions)) for t in full.responses] == \
        [("orders", 1), ("audit", 1)]
    # Only the moved position is sent; nothing new: the broker reads both, answers none.
    quiet = ask(fake, fetch_request(version, {"orders": [(0, 5, -1, -1, 1 << 20)]},
                                    session_id=full.session_id, session_epoch=1))
    assert (quiet.error_code, quiet.session_id, quiet.responses) == (0, full.session_id, [])
    assert [(a.tp, a.offset) for a in fake.calls_of("fetch")[-1]["asks"]] == \
        [(("orders", 0), 5), (("audit", 0), 0)]
    fake.append(("audit", 0), b"news", count=1)                  # HW 1: audit changed
    news = ask(fake, fetch_request(version, {}, session_id=full.session_id, session_epoch=2))
    assert [(name_of(t), [p.records for p in t.partitions]) for t in news.responses] == \
        [("audit", [b"news"])]
    stale = ask(fake, fetch_request(version, {}, session_id=full.session_id, session_epoch=2))
    assert (stale.error_code, stale.responses) == (71, [])       # INVALID_FETCH_SESSION_EPOCH


def test_a_session_with_a_change_journal_reads_only_what_changed():
    """With the broker's ChangeJournal (and a clock) an incremental fetch reads the
    partitions asked, changed or unfinished, and watches the rest."""
    clock = [0]
    fake = FakeBrokerApi(broker_id=1, clock_ms=lambda: clock[0], full_read_interval_ms=1000)
    fake.add_broker(1, PLAINTEXT=("10.0.0.1", 9092))
    fake.add_topic("orders", 2)
    fake.add_topic("audit", 1)
    parts = {"orders": [(0, 0, -1, -1, 1 << 20), (1, 0, -1, -1, 1 << 20)],
             "audit": [(0, 0, -1, -1, 1 << 20)]}
    full = ask(fake, fetch_request(12, parts, session_epoch=0, replica_id=2))
    assert fake.calls_of("fetch")[-1]["reads"] is None
    quiet = ask(fake, fetch_request(12, {}, session_id=full.session_id, session_epoch=1,
                                    replica_id=2))
    call = fake.calls_of("fetch")[-1]
    assert call["reads"] == set() and len(call["asks"]) == 3 and quiet.responses == []
    fake.append(("audit", 0), b"news", count=1)
    news = ask(fake, fetch_request(12, {}, session_id=full.session_id, session_epoch=2,
                                   replica_id=2))
    assert fake.calls_of("fetch")[-1]["reads"] == {("audit", 0)}
    assert [(name_of(t), [p.records for p in t.partitions]) for t in news.responses] == \
        [("audit", [b"news"])]
    ask(fake, fetch_request(12, {"audit": [(0, 1, -1, -1, 1 << 20)]},
                            session_id=full.session_id, session_epoch=3, replica_id=2))
    assert fake.calls_of("fetch")[-1]["reads"] == {("audit", 0)}    # asked, had records
    clock[0] = 1000
    ask(fake, fetch_request(12, {}, session_id=full.session_id, session_epoch=4,
                            replica_id=2))
    assert fake.calls_of("fetch")[-1]["reads"] is None                # the interval passed


def test_a_session_fetch_hands_the_broker_its_session_whole():
    """With a change journal the broker is given the fetch's session context (its asks by
    partition, the session's own), so a parked fetch can wait on the session's watch; a fetch
    reading a session partly (a topic id re-created: INCONSISTENT_TOPIC_ID) is given none."""
    fake = FakeBrokerApi(broker_id=1, clock_ms=lambda: 0)
    fake.add_broker(1, PLAINTEXT=("10.0.0.1", 9092))
    fake.add_topic("orders", 2)
    parts = {"orders": [(0, 0, -1, -1, 1 << 20), (1, 0, -1, -1, 1 << 20)]}
    full = ask(fake, fetch_request(12, parts, session_epoch=0, replica_id=2))
    call = fake.calls_of("fetch")[-1]
    assert call["session"].session_id == full.session_id
    assert list(call["session"].asks_by_tp()) == [a.tp for a in call["asks"]]
    ask(fake, fetch_request(12, {"orders": [(1, 3, -1, -1, 1 << 20)]},
                            session_id=full.session_id, session_epoch=1, replica_id=2))
    context = fake.calls_of("fetch")[-1]["session"]
    assert context.session is call["session"].session
    assert [(a.tp, a.offset) for a in context.asks_by_tp().values()] == \
        [(("orders", 0), 0), (("orders", 1), 3)]
    sessionless = ask(fake, fetch_request(12, parts, replica_id=2))
    assert sessionless.session_id == 0 and fake.calls_of("fetch")[-1]["session"] is None


def test_a_session_read_partly_is_not_handed_to_the_broker():
    fake = cluster()                              # topic ids as fetch_request names them
    fake.fetch_changes = ChangeJournal()
    fake.fetch_sessions.clock_ms = lambda: 0
    full = ask(fake, fetch_request(13, {"orders": [(0, 0, -1, -1, 1 << 20)],
                                        "audit": [(0, 0, -1, -1, 1 << 20)]}, session_epoch=0))
    assert fake.calls_of("fetch")[-1]["session"] is not None
    fake.topic_id_of["audit"] = topic_id_text(uuid.UUID(int=0x7777))   # re-created
    ask(fake, fetch_request(13, {}, session_id=full.session_id, session_epoch=1))
    call = fake.calls_of("fetch")[-1]
    assert [a.tp for a in call["asks"]] == [("orders", 0)] and call["session"] is None


class AppendsBeforeItReads(FakeBrokerApi):
    """A broker where another thread's append lands after the handler was called but
    before the broker takes its lock to read: the decision of what to read must see it."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.land = None

    def fetch(self, *args, **kw):
        if self.land is not None:
            self.append(*self.land)
            self.land = None
        return super().fetch(*args, **kw)


def test_what_a_session_reads_is_decided_where_the_broker_orders_its_changes():
    fake = AppendsBeforeItReads(broker_id=1, clock_ms=lambda: 0)
    fake.add_broker(1, PLAINTEXT=("10.0.0.1", 9092))
    fake.add_topic("audit", 1)
    full = ask(fake, fetch_request(12, {"audit": [(0, 0, -1, -1, 1 << 20)]}, session_epoch=0,
                                   replica_id=2))
    fake.land = (("audit", 0), b"late", 1)
    got = ask(fake, fetch_request(12, {}, session_id=full.session_id, session_epoch=1,
                                  replica_id=2))
    assert [(name_of(t), [p.records for p in t.partitions]) for t in got.responses] == \
        [("audit", [b"late"])]


def test_fetch_session_forgets_partitions_a_follower_drops():
    from kafka.protocol.consumer import FetchRequest as FR
    fake = fetch_cluster()
    full = ask(fake, fetch_request(12, {"orders": [(0, 2, -1, -1, 1 << 20)],
                                        "audit": [(0, 0, -1, -1, 1 << 20)]},
                                   session_epoch=0, replica_id=2))
    req = fetch_request(12, {}, session_id=full.session_id, session_epoch=1, replica_id=2)
    req.forgotten_topics_data = [FR.ForgottenTopic(topic="audit", partitions=[0])]
    ask(fake, req)
    assert [a.tp for a in fake.calls_of("fetch")[-1]["asks"]] == [("orders", 0)]


def test_fetch_v12_carries_a_diverging_epoch_to_a_follower():
    fake = fetch_cluster()
    fake.new_leader_epoch(("orders", 0))                     # epochs [(4, 0), (5, 6)]
    fake.partition(("orders", 0)).epochs = [(3, 0), (4, 2), (5, 6)]
    # A follower that last fetched epoch 3 at offset 4: epoch 3 ended at offset 2.
    resp = ask(fake, fetch_request(12, {"orders": [(0, 4, 5, 3, 1 << 20)]}, replica_id=2))
    p = resp.responses[0].partitions[0]
    assert (p.error_code, p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (0, 3, 2)
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, 5)
    assert p.records in (b"", None)
    assert fake.calls_of("fetch")[0]["replica_id"] == 2


@pytest.mark.parametrize("version", versions(1, 13))
def test_fetch_by_topic_id_unknown_and_reused_ids(version):
    fake = fetch_cluster()
    ghost = uuid.UUID(int=5)
    ft, fp = FetchRequest.FetchTopic, FetchRequest.FetchTopic.FetchPartition
    req = fetch_request(version, {"orders": [(0, 3, -1, -1, 1 << 20)]}, session_epoch=0)
    req.topics.append(ft(topic_id=ghost, partitions=[fp(partition=0, fetch_offset=0,
                                                        current_leader_epoch=-1,
                                                        last_fetched_epoch=-1,
                                                        log_start_offset=-1,
                                                        partition_max_bytes=100)]))
    resp = ask(fake, req)
    rows = [(t.topic_id, p.partition_index, p.error_code) for t in resp.responses
            for p in t.partitions]
    assert rows == [(TOPIC_IDS["orders"], 0, 0), (ghost, 0, 100)]
    assert [a.tp for a in fake.calls_of("fetch")[0]["asks"]] == [("orders", 0)]
    # "orders" is re-created under a new id: the session's partition is inconsistent
    sid = resp.session_id
    fake.topic_id_of["orders"] = topic_id_text(uuid.UUID(int=0x7777))
    again = ask(fake, fetch_request(version, {}, session_id=sid, session_epoch=1))
    assert [(t.topic_id, p.error_code) for t in again.responses for p in t.partitions] == \
        [(uuid.UUID(int=0x7777), 103)]
    # a session made by v13+ is not for v12, nor the other way round
    old = ask(fake, fetch_request(12, {}, session_id=sid, session_epoch=2))
    assert (old.error_code, old.session_id) == (106, 0)


def test_fetch_v15_reads_the_replica_from_replica_state():
    fake = fetch_cluster()
    req = fetch_request(15, {"orders": [(0, 3, -1, -1, 1 << 20)]}, replica_id=2)
    ask(fake, req)
    assert fake.calls_of("fetch")[0]["replica_id"] == 2


def test_fetch_v16_answers_the_new_leaders_endpoint():
    fake = fetch_cluster()
    fake.partition(("orders", 1)).replicas = (2, 9)   # no copy here: not even a follower read
    resp = ask(fake, fetch_request(16, {"orders": [(1, 0, -1, -1, 1 << 20)]}))
    (p,) = resp.responses[0].partitions
    assert (p.error_code, p.current_leader.leader_id) == (6, 2)
    assert [(n.node_id, n.host, n.port) for n in resp.node_endpoints] == [(2, "10.0.0.2", 9092)]


@pytest.mark.parametrize("listener", ["PLAINTEXT", "EXTERNAL"])
@pytest.mark.parametrize("version", versions(1, 4))
def test_fetch_v11_carries_the_clients_rack_and_listener(version, listener):
    """KafkaApis builds client metadata for every v11+ fetch; below v11 there is none, and
    a consumer reads the leader only."""
    fake = fetch_cluster()
    ask(fake, fetch_request(version, {"orders": [(0, 0, -1, -1, 1 << 20)]}, rack_id="r2"),
        listener=listener)
    (call,) = fake.calls_of("fetch")
    assert call["client"] == (ClientMetadata("r2", listener) if version >= 11 else None)


@pytest.mark.parametrize("version", versions(1, 11))
def test_fetch_answers_the_preferred_read_replica_without_records(version):
    fake = fetch_cluster()
    fake.preferred_read_replicas[("orders", 0)] = 2
    resp = ask(fake, fetch_request(version, {"orders": [(0, 0, -1, -1, 1 << 20)],
                                             "audit": [(0, 0, -1, -1, 1 << 20)]},
                                   rack_id="r2"))
    rows = {(name_of(t), p.partition_index): p for t in resp.responses for p in t.partitions}
    p = rows[("orders", 0)]
    assert (p.error_code, p.preferred_read_replica, p.high_watermark, p.log_start_offset) == \
        (0, 2, 5, 1)
    assert p.records in (b"", None)
    assert rows[("audit", 0)].preferred_read_replica == -1


@pytest.mark.parametrize("version", versions(1, 11))
def test_a_session_answers_a_preferred_read_replica_every_time(version):
    """Kafka's maybeUpdateResponseData: a partition with a preferred read replica is in
    every incremental answer, though its marks did not move."""
    fake = fetch_cluster()
    fake.preferred_read_replicas[("orders", 0)] = 2
    parts = {"orders": [(0, 0, -1, -1, 1 << 20)], "audit": [(0, 0, -1, -1, 1 << 20)]}
    full = ask(fake, fetch_request(version, parts, session_epoch=0, rack_id="r2"))
    assert full.session_id > 0
    again = ask(fake, fetch_request(version, {}, session_id=full.session_id, session_epoch=1,
                                    rack_id="r2"))
    assert [(name_of(t), p.partition_index, p.preferred_read_replica)
            for t in again.responses for p in t.partitions] == [("orders", 0, 2)]


def test_a_follower_replica_fetching_is_never_sent_to_a_preferred_replica():
    fake = fetch_cluster()
    fake.preferred_read_replicas[("orders", 0)] = 2
    resp = ask(fake, fetch_request(12, {"orders": [(0, 1, -1, -1, 1 << 20)]}, replica_id=2,
                                   rack_id="r2"))
    p = resp.responses[0].partitions[0]
    assert (p.error_code, p.preferred_read_replica) == (0, -1)
    assert p.records
