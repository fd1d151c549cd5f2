"""protocol/handlers/groups.py end to end, without Ray or sockets: consumer-group requests
encoded by kafka-python go through protocol.connection.Connection and protocol.handlers.answer
against FakeBrokerApi, whose `group_call` drives a REAL pure GroupCoordinator on a fake clock
(tests/fake_broker_api.py). Answers are read by kio's reader (every byte) and decoded by
kafka-python. A parked call (JoinGroup, a follower's SyncGroup, a commit waiting for its
append) has no answer until the coordinator gives one: `Call.parked` says so.
Table-driven over every served version where a rule depends on the version. KIP-848's
ConsumerGroupHeartbeat and ConsumerGroupDescribe too (their kafka-python classes from
tests/protocol_samples.py).
"""

from __future__ import annotations

import itertools
import struct
import uuid

import pytest
from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import (
    HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest,
    OffsetFetchRequest, SyncGroupRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest
from kio.index import load_response_schema

from coordinator import messages as gm
from protocol.api import Deferred
from protocol.codec import has_request_schema
from protocol.connection import Connection
from protocol.handlers import answer
from tests.fake_broker_api import NotAnsweredYet
from tests.handler_wire import cluster, kio_read, versions
from tests.protocol_samples import (RESPONSES, TOPIC_IDS, ConsumerGroupDescribeRequest,
                                   ConsumerGroupHeartbeatRequest)

pytestmark = pytest.mark.unit

NOT_LEADER_OR_FOLLOWER = 6
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
INVALID_REQUEST = 42
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82
UNSTABLE_OFFSET_COMMIT = 88
NO_AUTHORIZED_OPERATIONS = -2147483648


def member(client: str, n: int) -> str:
    """The n-th member id the fake's coordinator hands out (client id + "-" + UUID(int=n))."""
    return f"{client}-{uuid.UUID(int=n)}"


# -- plumbing ----------------------------------------------------------------------------------
class Call:
    """One request sent through a Connection and answer(); its answer may come later."""

    _ids = itertools.count(1)

    def __init__(self, fake, msg, client_id: str = "rayka-test"):
        self.msg = msg
        self.correlation_id = next(self._ids)
        conn = Connection()
        conn.receive_data(_frame(msg, self.correlation_id, client_id))
        request = conn.next_request()
        assert request is not None and request.served and conn.next_request() is None
        self._out = answer(conn, fake, request, "PLAINTEXT")
        self._frame = None

    @property
    def parked(self) -> bool:
        try:
            self.frame()
        except NotAnsweredYet:
            return True
        return False

    def frame(self) -> bytes:
        if self._frame is None:
            out = self._out.result() if isinstance(self._out, Deferred) else self._out
            assert out is not None
            self._frame = out
        return self._frame

    def answer(self):
        """The answer, checked (size, correlation id, kio reads every byte), as kafka-python
        decodes it."""
        api_key, version = self.msg.API_KEY, self.msg.API_VERSION
        out = self.frame()
        assert struct.unpack_from(">ii", out) == (len(out) - 4, self.correlation_id)
        if has_request_schema(api_key, version):      # not protocol/legacy.py's
            header, self.kio_body = kio_read(out, load_response_schema(api_key, version))
            assert header.correlation_id == self.correlation_id
        decoded = RESPONSES[api_key].decode(out[4:], version=version, header=True)
        assert decoded.header.correlation_id == self.correlation_id
        return decoded


def _frame(msg, correlation_id: int, client_id: str) -> bytes:
    msg.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(msg.encode(header=True, framed=True))


def ask(fake, msg, client_id: str = "rayka-test", kio: bool = False):
    """Send and decode an answer that must be there at once (kio: also kio's reading)."""
    call = Call(fake, msg, client_id)
    assert not call.parked, "the coordinator parked a call expected to be answered"
    decoded = call.answer()
    return (decoded, call.kio_body) if kio else decoded


def groups_cluster(*owned: str):
    """cluster() whose coordinator owns the offsets partitions of `owned` groups (default
    g1, g2, g3)."""
    fake = cluster()
    fake.own_groups(*(owned or ("g1", "g2", "g3")))
    return fake


def not_owned_group(fake, prefix: str = "far") -> str:
    owned = fake.coordinator.owned_partitions
    return next(g for i in itertools.count() if fake.group_partition(g := f"{prefix}{i}")
                not in owned)


# -- request builders ------------------------------------------------------------------------
def join(fake, version, member_id="", client="ca", group="g1", instance=None,
         protocols=None, session=10000, rebalance=30000) -> Call:
    p = JoinGroupRequest.JoinGroupRequestProtocol
    protocols = protocols or [("range", f"meta-{client}".encode())]
    return Call(fake, JoinGroupRequest[version](
        group_id=group, session_timeout_ms=session, rebalance_timeout_ms=rebalance,
        member_id=member_id, group_instance_id=instance, protocol_type="consumer", reason=None,
        protocols=[p(name=n, metadata=md) for n, md in protocols]), client)


def sync(fake, version, member_id, generation=1, group="g1", assignments=(), instance=None,
         protocol_type="consumer", protocol_name="range") -> Call:
    a = SyncGroupRequest.SyncGroupRequestAssignment
    return Call(fake, SyncGroupRequest[version](
        group_id=group, generation_id=generation, member_id=member_id,
        group_instance_id=instance, protocol_type=protocol_type, protocol_name=protocol_name,
        assignments=[a(member_id=m, assignment=x) for m, x in assignments]))


def heartbeat(fake, version, member_id, generation=1, group="g1", instance=None):
    return ask(fake, HeartbeatRequest[version](group_id=group, generation_id=generation,
                                               member_id=member_id, group_instance_id=instance))


def commit(fake, version, offsets, group="g1", generation=-1, member_id="", instance=None):
    """offsets: {(topic, partition): (offset, leader epoch, metadata)}."""
    t = OffsetCommitRequest.OffsetCommitRequestTopic
    p = t.OffsetCommitRequestPartition
    topics: dict[str, list] = {}
    for (topic, part), (offset, epoch, meta) in offsets.items():
        topics.setdefault(topic, []).append(p(partition_index=part, committed_offset=offset,
                                              committed_leader_epoch=epoch,
                                              committed_metadata=meta))
    return Call(fake, OffsetCommitRequest[version](
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        group_instance_id=instance, retention_time_ms=-1,
        topics=[t(name=n, partitions=ps) for n, ps in topics.items()]))


def commit_codes(resp) -> dict:
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def fetch(fake, version, asked, group="g1", require_stable=False):
    """asked: {topic: [partitions]} or None (every committed partition, v2+). From v8 the
    one group's part of the batched answer (it too has topics and error_code)."""
    if version >= 8:
        g = OffsetFetchRequest.OffsetFetchRequestGroup
        gt = g.OffsetFetchRequestTopics
        topics = None if asked is None else [gt(name=n, partition_indexes=ps)
                                             for n, ps in asked.items()]
        resp = ask(fake, OffsetFetchRequest[version](require_stable=require_stable, groups=[
            g(group_id=group, member_id=None, member_epoch=-1, topics=topics)]))
        (answer,) = resp.groups
        assert answer.group_id == group
        return answer
    t = OffsetFetchRequest.OffsetFetchRequestTopic
    topics = None if asked is None else [t(name=n, partition_indexes=ps)
                                         for n, ps in asked.items()]
    return ask(fake, OffsetFetchRequest[version](group_id=group, topics=topics,
                                                 require_stable=require_stable))


def fetched(resp) -> dict:
    """{(topic, partition): (offset, metadata, error)} of an OffsetFetch answer."""
    return {(t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
            for t in resp.topics for p in t.partitions}


def new_member(fake, version, client, group="g1", instance=None, protocols=None) -> Call:
    """A new member's JoinGroup, rejoining with its id after MEMBER_ID_REQUIRED (v4+)."""
    call = join(fake, version, client=client, group=group, instance=instance,
                protocols=protocols)
    if version >= 4 and instance is None:
        first = call.answer()
        assert first.error_code == MEMBER_ID_REQUIRED
        call = join(fake, version, member_id=first.member_id, client=client, group=group,
                    protocols=protocols)
    assert call.parked
    return call


def stable_group(fake, group="g1", clients=("ca", "cb"), instances=(None, None)):
    """Drive `group` to Stable through the wire (JoinGroup v5, SyncGroup v3): member ids, in
    join order; generation 1; the first member leads."""
    joins = [new_member(fake, 5, c, group, i) for c, i in zip(clients, instances)]
    fake.advance(3000)
    fake.advance(3000)
    answers = [j.answer() for j in joins]
    ids = [a.member_id for a in answers]
    assert {a.generation_id for a in answers} == {1} and answers[0].leader == ids[0]
    followers = [sync(fake, 3, mid, group=group, instance=i)
                 for mid, i in zip(ids[1:], instances[1:])]
    leader = sync(fake, 3, ids[0], group=group, instance=instances[0],
                  assignments=[(mid, f"asg-{mid}".encode()) for mid in ids])
    assert [c.answer().error_code for c in [leader] + followers] == [0] * len(ids)
    assert fake.coordinator.group(group).state.value == "Stable"
    return ids


# -- FindCoordinator ---------------------------------------------------------------------------
@pytest.mark.parametrize("listener", ["PLAINTEXT", "EXTERNAL"])
@pytest.mark.parametrize("version", versions(10))
def test_find_coordinator_answers_the_groups_coordinator_on_the_listener_asked(version,
                                                                               listener):
    fake = cluster()     # brokers 1 and 2 on PLAINTEXT, 1 and 3 on EXTERNAL
    fake.coordinator_nodes.update({"g1": 2, "g2": 3})
    fake.coordinator_errors["g3"] = COORDINATOR_LOAD_IN_PROGRESS
    keys = ["g1", "g2", "g3", "g4"] if version >= 4 else ["g1"]
    conn = Connection()
    conn.receive_data(_frame(FindCoordinatorRequest[version](
        key=keys[0], key_type=0, coordinator_keys=keys), 5, "kp"))
    req = conn.next_request()
    out = answer(conn, fake, req, listener)
    assert isinstance(out, bytes)                      # no coordinator round trip: at once
    kio_read(out, load_response_schema(10, version))
    resp = RESPONSES[10].decode(out[4:], version=version, header=True)
    assert fake.calls_of("find_coordinator") == [{"group_ids": keys, "listener": listener}]
    none = (COORDINATOR_NOT_AVAILABLE, -1, "", -1)
    expected = {
        "PLAINTEXT": {"g1": (0, 2, "10.0.0.2", 9092), "g2": none,
                      "g3": (COORDINATOR_LOAD_IN_PROGRESS, -1, "", -1),
                      "g4": (0, 1, "10.0.0.1", 9092)},
        "EXTERNAL": {"g1": none, "g2": (0, 3, "ext-3", 19093),
                     "g3": (COORDINATOR_LOAD_IN_PROGRESS, -1, "", -1),
                     "g4": (0, 1, "ext-1", 19092)},
    }[listener]
    if version >= 4:
        assert [(c.key, (c.error_code, c.node_id, c.host, c.port)) for c in resp.coordinators] \
            == [(k, expected[k]) for k in keys]
        assert [c.error_message is None for c in resp.coordinators] == [
            expected[k][0] == 0 for k in keys]
    else:
        assert (resp.error_code, resp.node_id, resp.host, resp.port) == expected["g1"]
        if version >= 1:
            assert (resp.error_message is None) == (expected["g1"][0] == 0)


@pytest.mark.parametrize("version", versions(10, 1))
def test_find_coordinator_of_a_transactional_id_asks_for_its_coordinator(version):
    fake = cluster()
    fake.coordinator_nodes["tx-2"] = 2
    keys = ["tx-1", "tx-2"] if version >= 4 else ["tx-1"]
    resp = ask(fake, FindCoordinatorRequest[version](key=keys[0], key_type=1,
                                                     coordinator_keys=keys))
    got = [(c.key, c.error_code, c.node_id, c.host, c.port)
           for c in resp.coordinators] if version >= 4 else \
        [(keys[0], resp.error_code, resp.node_id, resp.host, resp.port)]
    assert got == [("tx-1", 0, 1, "10.0.0.1", 9092), ("tx-2", 0, 2, "10.0.0.2", 9092)
                   ][:len(keys)]
    assert fake.calls_of("find_coordinator") == [
        {"group_ids": keys, "listener": "PLAINTEXT", "key_type": 1}]


@pytest.mark.parametrize("key_type", [2, 7])
@pytest.mark.parametrize("version", versions(10, 1))
def test_find_coordinator_of_an_unknown_key_type_is_an_invalid_request(version, key_type):
    # Kafka: share coordinators (2) exist from v6 only, other types are unknown: INVALID_REQUEST.
    fake = cluster()
    keys = ["k1", "k2"] if version >= 4 else ["k1"]
    resp = ask(fake, FindCoordinatorRequest[version](key=keys[0], key_type=key_type,
                                                     coordinator_keys=keys))
    codes = [c.error_code for c in resp.coordinators] if version >= 4 else [resp.error_code]
    assert codes == [INVALID_REQUEST] * len(keys)
    assert fake.calls_of("find_coordinator") == []


def test_find_coordinator_v6_finds_a_share_partitions_state_coordinator():
    fake = cluster()
    good = "g1:AAAAAAAAAAAAAAAAAAAAAQ:3"
    fake.coordinator_nodes[good] = 2
    keys = [good, "g1:not-a-topic-id:3", "g1:AAAAAAAAAAAAAAAAAAAAAQ:x"]
    resp = ask(fake, FindCoordinatorRequest[6](key_type=2, coordinator_keys=keys))
    assert [(c.key, c.error_code, c.node_id) for c in resp.coordinators] == [
        (good, 0, 2), (keys[1], INVALID_REQUEST, -1), (keys[2], INVALID_REQUEST, -1)]
    assert fake.calls_of("find_coordinator") == [
        {"group_ids": [good], "listener": "PLAINTEXT", "key_type": 2}]


# -- JoinGroup / SyncGroup ---------------------------------------------------------------------
@pytest.mark.parametrize("join_v", versions(11))
def test_two_members_join_and_sync(join_v):
    sync_v = min(join_v, 5)
    fake = groups_cluster()
    a = join(fake, join_v, client="ca",
             protocols=[("roundrobin", b"rr-a"), ("range", b"meta-a")])
    a_id, b_id = member("ca", 1), member("cb", 2)
    if join_v >= 4:       # KIP-394: a dynamic member first gets its id, then rejoins with it
        first = a.answer()
        assert (first.error_code, first.member_id, first.generation_id, first.leader,
                first.members) == (MEMBER_ID_REQUIRED, a_id, -1, "", [])
        assert first.protocol_name == (None if join_v >= 7 else "")
        assert fake.coordinator.group("g1").members == {}
        a = join(fake, join_v, member_id=a_id, client="ca",
                 protocols=[("roundrobin", b"rr-a"), ("range", b"meta-a")])
    assert a.parked                                   # the initial delay (3 s) runs
    b = new_member(fake, join_v, "cb", protocols=[("range", b"meta-b")])
    joins = [e for e in fake.group_events if isinstance(e, gm.JoinGroup)]
    assert {(e.session_timeout_ms, e.rebalance_timeout_ms, e.version) for e in joins} == {
        (10000, 10000 if join_v == 0 else 30000, join_v)}      # v0: rebalance = session
    assert [e.client_id for e in joins] == ["ca"] * (len(joins) // 2) + ["cb"] * (len(joins) // 2)

    fake.advance(3000)
    assert a.parked and b.parked                     # a member joined meanwhile: re-armed
    fake.advance(3000)
    ra, rb = a.answer(), b.answer()
    assert (ra.error_code, ra.generation_id, ra.leader, ra.member_id) == (0, 1, a_id, a_id)
    assert (rb.error_code, rb.generation_id, rb.leader, rb.member_id) == (0, 1, a_id, b_id)
    assert ra.protocol_name == rb.protocol_name == "range"      # the only common protocol
    assert ra.protocol_type == rb.protocol_type == ("consumer" if join_v >= 7 else None)
    assert [(x.member_id, x.metadata) for x in ra.members] == [(a_id, b"meta-a"),
                                                               (b_id, b"meta-b")]
    if join_v >= 5:
        assert [x.group_instance_id for x in ra.members] == [None, None]
    assert rb.members == []                           # only the leader gets the metadata

    sb = sync(fake, sync_v, b_id)
    assert sb.parked                                  # a follower waits for the leader
    sa = sync(fake, sync_v, a_id, assignments=[(a_id, b"asg-a"), (b_id, b"asg-b")])
    got = [(r.error_code, r.assignment) for r in (sa.answer(), sb.answer())]
    assert got == [(0, b"asg-a"), (0, b"asg-b")]
    for r in (sa.answer(), sb.answer()):
        assert (r.protocol_type, r.protocol_name) == (
            ("consumer", "range") if sync_v >= 5 else (None, None))
    (append,) = fake.offsets_log                      # the group record, then Stable
    assert append.partition == fake.group_partition("g1")
    assert fake.coordinator.group("g1").state.value == "Stable"
    assert heartbeat(fake, min(join_v, 4), b_id).error_code == 0


@pytest.mark.parametrize("error,expected", [(0, 0), (NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR),
                                            (7, REBALANCE_IN_PROGRESS)])
@pytest.mark.parametrize("version", versions(14))
def test_the_leaders_sync_is_answered_after_the_group_append(version, error, expected):
    fake = groups_cluster()
    joins = [new_member(fake, 3, c) for c in ("ca", "cb")]
    fake.advance(3000)
    fake.advance(3000)
    a_id, b_id = (j.answer().member_id for j in joins)
    fake.hold_appends = True
    sb = sync(fake, version, b_id)
    sa = sync(fake, version, a_id, assignments=[(a_id, b"x"), (b_id, b"y")])
    assert sa.parked and sb.parked and len(fake.held_appends) == 1
    fake.release_appends(error)
    assert [(r.error_code, r.assignment) for r in (sa.answer(), sb.answer())] == (
        [(0, b"x"), (0, b"y")] if expected == 0 else [(expected, b""), (expected, b"")])


@pytest.mark.parametrize("field", ["protocol_type", "protocol_name"])
def test_sync_group_v5_without_protocol_type_or_name_is_inconsistent(field):
    # Kafka (KafkaApis.handleSyncGroupRequest): both are mandatory from v5.
    fake = groups_cluster()
    (a_id,) = stable_group(fake, clients=("ca",), instances=(None,))
    calls = len(fake.group_events)
    resp = sync(fake, 5, a_id, **{field: None}).answer()
    assert resp.error_code == INCONSISTENT_GROUP_PROTOCOL
    assert len(fake.group_events) == calls
    assert sync(fake, 4, a_id, **{field: None}).answer().error_code == 0   # optional before


@pytest.mark.parametrize("version", versions(11))
def test_join_group_errors(version):
    fake = groups_cluster()
    elsewhere = not_owned_group(fake)
    cases = [
        (dict(session=1000), INVALID_SESSION_TIMEOUT, ""),           # < group.min 6000
        (dict(member_id="ghost"), UNKNOWN_MEMBER_ID, "ghost"),        # no such group yet
        (dict(group=elsewhere), NOT_COORDINATOR, ""),
        (dict(group=""), 24, ""),                                     # INVALID_GROUP_ID
    ]
    for kwargs, code, member_id in cases:
        resp = join(fake, version, **kwargs).answer()
        assert (resp.error_code, resp.member_id, resp.generation_id, resp.leader) == (
            code, member_id, -1, ""), kwargs
        assert resp.protocol_name == (None if version >= 7 else "")


@pytest.mark.parametrize("version", versions(14))
def test_sync_group_errors(version):
    fake = groups_cluster()
    a_id, b_id = stable_group(fake)
    assert sync(fake, version, a_id, generation=2).answer().error_code == ILLEGAL_GENERATION
    assert sync(fake, version, "nobody").answer().error_code == UNKNOWN_MEMBER_ID
    assert sync(fake, version, a_id, group="g3").answer().error_code == UNKNOWN_MEMBER_ID
    assert sync(fake, version, a_id, group=not_owned_group(fake)).answer().error_code == \
        NOT_COORDINATOR
    # Stable: the stored assignment again, at once
    again = sync(fake, version, b_id).answer()
    assert (again.error_code, again.assignment) == (0, f"asg-{b_id}".encode())


# -- Heartbeat ---------------------------------------------------------------------------------
def _hb_stable(fake, ids):
    return dict(member_id=ids[0])


def _hb_preparing(fake, ids):
    new_member(fake, 3, "cc")                 # a third member: PreparingRebalance
    return dict(member_id=ids[0])


def _hb_completing(fake, ids):
    new_member(fake, 3, "cc")
    fake.advance(30000)                      # the join phase ends: A and B did not rejoin
    return dict(member_id=member("cc", 3), generation=2)


def _hb_empty(fake, ids):
    assert commit(fake, 5, {("orders", 0): (1, -1, "")}, group="g2").answer()
    return dict(member_id="m", group="g2", generation=0)


def _hb_not_coordinator(fake, ids):
    return dict(member_id=ids[0], group=not_owned_group(fake))


def _hb_loading(fake, ids):
    far = not_owned_group(fake)
    fake.begin_load(fake.group_partition(far))
    return dict(member_id="whoever", group=far)


HEARTBEATS = [
    ("stable", _hb_stable, 0),
    ("stale generation", lambda f, ids: dict(member_id=ids[0], generation=0), ILLEGAL_GENERATION),
    ("unknown member", lambda f, ids: dict(member_id="nobody"), UNKNOWN_MEMBER_ID),
    ("preparing rebalance", _hb_preparing, REBALANCE_IN_PROGRESS),
    ("completing rebalance", _hb_completing, 0),
    ("empty group", _hb_empty, UNKNOWN_MEMBER_ID),
    ("unknown group", lambda f, ids: dict(member_id=ids[0], group="g3"), UNKNOWN_MEMBER_ID),
    ("not the coordinator", _hb_not_coordinator, NOT_COORDINATOR),
    ("loading: answered blindly", _hb_loading, 0),
    ("invalid group id", lambda f, ids: dict(member_id=ids[0], group=""), 24),
]


@pytest.mark.parametrize("case,setup,expected", HEARTBEATS, ids=[h[0] for h in HEARTBEATS])
@pytest.mark.parametrize("version", versions(12))
def test_heartbeat_errors_by_state(version, case, setup, expected):
    fake = groups_cluster()
    ids = stable_group(fake)
    assert heartbeat(fake, version, **setup(fake, ids)).error_code == expected
    if case == "completing rebalance":
        assert fake.coordinator.group("g1").state.value == "CompletingRebalance"


@pytest.mark.parametrize("version", versions(12, 3))
def test_heartbeat_from_a_fenced_static_member(version):
    fake = groups_cluster()
    a_id, _ = stable_group(fake, instances=("i-a", "i-b"))
    assert a_id == member("i-a", 1)                   # static ids start with the instance id
    assert heartbeat(fake, version, a_id, instance="i-a").error_code == 0
    assert heartbeat(fake, version, "old-id", instance="i-a").error_code == FENCED_INSTANCE_ID
    assert heartbeat(fake, version, a_id, instance="i-x").error_code == UNKNOWN_MEMBER_ID


# -- LeaveGroup --------------------------------------------------------------------------------
def leave(fake, version, members, group="g1"):
    """members: [(member id, instance id)]; v0-2 send the first member id only."""
    i = LeaveGroupRequest.MemberIdentity
    return ask(fake, LeaveGroupRequest[version](
        group_id=group, member_id=members[0][0],
        members=[i(member_id=m, group_instance_id=g, reason=None) for m, g in members]))


@pytest.mark.parametrize("version", versions(13, hi=2))
def test_leave_group_v0_to_v2_one_member_its_error_is_the_answer(version):
    fake = groups_cluster()
    a_id, b_id = stable_group(fake)
    assert leave(fake, version, [("nobody", None)]).error_code == UNKNOWN_MEMBER_ID
    assert leave(fake, version, [(a_id, None)]).error_code == 0
    group = fake.coordinator.group("g1")
    assert set(group.members) == {b_id} and group.state.value == "PreparingRebalance"
    assert leave(fake, version, [(a_id, None)]).error_code == UNKNOWN_MEMBER_ID   # gone
    assert leave(fake, version, [(b_id, None)], group="g3").error_code == UNKNOWN_MEMBER_ID
    assert leave(fake, version, [(b_id, None)], group=not_owned_group(fake)).error_code == \
        NOT_COORDINATOR
    (event,) = [e for e in fake.group_events if isinstance(e, gm.LeaveGroup)][1:2]
    assert event.members == (gm.LeaveMember(a_id),)


@pytest.mark.parametrize("version", versions(13, 3))
def test_leave_group_v3_up_is_batched_with_an_error_per_member(version):
    fake = groups_cluster()
    a_id, b_id = stable_group(fake, instances=(None, "i-b"))
    resp = leave(fake, version, [(a_id, None), ("nobody", None), ("", "i-ghost"), ("", "i-b")])
    assert resp.error_code == 0
    assert [(x.member_id, x.group_instance_id, x.error_code) for x in resp.members] == [
        (a_id, None, 0), ("nobody", None, UNKNOWN_MEMBER_ID),
        ("", "i-ghost", UNKNOWN_MEMBER_ID), ("", "i-b", 0)]   # "" + instance: by instance id
    assert fake.coordinator.group("g1").members == {}
    far = leave(fake, version, [(a_id, None)], group=not_owned_group(fake))
    assert (far.error_code, far.members) == (NOT_COORDINATOR, [])


# -- OffsetCommit ------------------------------------------------------------------------------
THREE = {("orders", 0): (5, 3, "m0"), ("orders", 2): (7, 3, None), ("audit", 1): (0, 2, "")}


@pytest.mark.parametrize("version", versions(8, 1))         # v0: ZooKeeper, below
def test_offset_commit_of_a_simple_group_then_fetch(version):
    # generation -1, no member: a consumer outside group management (assign(), not subscribe())
    fake = groups_cluster()
    resp = commit(fake, version, THREE, group="g2").answer()
    assert commit_codes(resp) == dict.fromkeys(THREE, 0)
    (append,) = fake.offsets_log
    assert (append.partition, len(append.records)) == (fake.group_partition("g2"), 3)
    (event,) = [e for e in fake.group_events if isinstance(e, gm.OffsetCommit)]
    assert (event.generation_id, event.member_id) == (-1, "")
    back = fetch(fake, 5, {"orders": [0, 2], "audit": [1]}, group="g2")
    assert fetched(back) == {("orders", 0): (5, "m0", 0), ("orders", 2): (7, "", 0),
                             ("audit", 1): (0, "", 0)}         # null metadata is stored ""
    epochs = {(t.name, p.partition_index): p.committed_leader_epoch
              for t in back.topics for p in t.partitions}
    assert epochs == ({("orders", 0): 3, ("orders", 2): 3, ("audit", 1): 2} if version >= 6
                      else dict.fromkeys(THREE, -1))           # committed_leader_epoch: v6+
    assert fake.coordinator.group("g2").state.value == "Empty"


@pytest.mark.parametrize("version", versions(8, 1))         # v0: ZooKeeper, below
def test_offset_commit_generation_and_member_checks(version):
    fake = groups_cluster()
    a_id, _ = stable_group(fake)
    one = {("orders", 0): (11, -1, "")}
    cases = [
        (dict(generation=1, member_id=a_id), 0),
        (dict(generation=2, member_id=a_id), ILLEGAL_GENERATION),
        (dict(generation=1, member_id="nobody"), UNKNOWN_MEMBER_ID),
        (dict(generation=-1, member_id=""), UNKNOWN_MEMBER_ID),    # a simple commit, group in use
        (dict(group="g3", generation=1, member_id=a_id), ILLEGAL_GENERATION),   # no such group
        (dict(group=not_owned_group(fake), generation=1, member_id=a_id), NOT_COORDINATOR),
    ]
    for kwargs, code in cases:
        offsets = {("orders", 0): (20 + code, -1, ""), ("audit", 1): (code, -1, "")}
        resp = commit(fake, version, offsets if code else one, **kwargs).answer()
        assert set(commit_codes(resp).values()) == {code}, kwargs
    assert fetched(fetch(fake, 2, {"orders": [0], "audit": [1]})) == {
        ("orders", 0): (11, "", 0), ("audit", 1): (-1, "", 0)}     # only the accepted commit


@pytest.mark.parametrize("version", versions(8, 1))         # v0: ZooKeeper, below
def test_offset_commit_during_completing_rebalance_is_rebalance_in_progress(version):
    fake = groups_cluster()
    joins = [new_member(fake, 3, c) for c in ("ca", "cb")]
    fake.advance(3000)
    fake.advance(3000)
    a_id = joins[0].answer().member_id
    resp = commit(fake, version, {("orders", 0): (1, -1, "")}, generation=1,
                  member_id=a_id).answer()
    assert commit_codes(resp) == {("orders", 0): REBALANCE_IN_PROGRESS}


@pytest.mark.parametrize("version", versions(8, 1))         # v0: ZooKeeper, below
def test_offset_commit_waits_for_its_append_and_maps_its_error(version):
    fake = groups_cluster()
    fake.hold_appends = True
    lost = commit(fake, version, THREE, group="g2")
    assert lost.parked and len(fake.held_appends) == 1
    fake.release_appends(NOT_LEADER_OR_FOLLOWER)
    assert commit_codes(lost.answer()) == dict.fromkeys(THREE, NOT_COORDINATOR)
    assert fetched(fetch(fake, 3, None, group="g2")) == {}      # nothing reached the cache
    kept = commit(fake, version, {("orders", 0): (9, -1, "x" * 5000), ("audit", 1): (4, -1, "")},
                  group="g2")
    assert kept.parked
    fake.release_appends(0)
    assert commit_codes(kept.answer()) == {("orders", 0): OFFSET_METADATA_TOO_LARGE,
                                           ("audit", 1): 0}
    assert fetched(fetch(fake, 3, None, group="g2")) == {("audit", 1): (4, "", 0)}


# -- OffsetFetch -------------------------------------------------------------------------------
@pytest.mark.parametrize("version", versions(9, 1))          # v0: ZooKeeper, below
def test_offset_fetch_answers_committed_and_unknown_partitions(version):
    fake = groups_cluster()
    assert commit(fake, 8, THREE, group="g2").answer()
    resp = fetch(fake, version, {"orders": [0, 1], "audit": [1], "ghost": [0]}, group="g2")
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in resp.topics] == [
        ("orders", [0, 1]), ("audit", [1]), ("ghost", [0])]
    assert fetched(resp) == {("orders", 0): (5, "m0", 0), ("orders", 1): (-1, "", 0),
                             ("audit", 1): (0, "", 0), ("ghost", 0): (-1, "", 0)}
    if version >= 5:
        assert [p.committed_leader_epoch for t in resp.topics for p in t.partitions] == [
            3, -1, 2, -1]
    if version >= 2:
        assert resp.error_code == 0
    unknown = fetch(fake, version, {"orders": [0]}, group="g3")
    assert fetched(unknown) == {("orders", 0): (-1, "", 0)}


@pytest.mark.parametrize("version", versions(9, 2))
def test_offset_fetch_without_topics_answers_every_committed_partition(version):
    fake = groups_cluster()
    assert commit(fake, 8, THREE, group="g2").answer()
    resp = fetch(fake, version, None, group="g2")
    assert fetched(resp) == {("orders", 0): (5, "m0", 0), ("orders", 2): (7, "", 0),
                             ("audit", 1): (0, "", 0)}
    assert fetch(fake, version, None, group="g3").topics == []
    (event,) = [e for e in fake.group_events if isinstance(e, gm.OffsetFetch)][:1]
    assert event.partitions is None


@pytest.mark.parametrize("state,code", [("not owned", NOT_COORDINATOR),
                                        ("loading", COORDINATOR_LOAD_IN_PROGRESS)])
@pytest.mark.parametrize("version", versions(9, 1))
def test_offset_fetch_group_error_v1_on_every_partition_v2_up_at_the_top(version, state, code):
    # Kafka's OffsetFetchRequest.getErrorResponse: v0-1 have no top-level error code, so it
    # goes on every partition asked (offset -1); from v2 it is the top-level error.
    fake = groups_cluster()
    far = not_owned_group(fake)
    if state == "loading":
        fake.begin_load(fake.group_partition(far))
    resp = fetch(fake, version, {"orders": [0, 2], "audit": [1]}, group=far)
    if version >= 2:
        assert (resp.error_code, resp.topics) == (code, [])
    else:
        assert fetched(resp) == {("orders", 0): (-1, "", code), ("orders", 2): (-1, "", code),
                                 ("audit", 1): (-1, "", code)}


def test_offset_fetch_v7_require_stable_sees_a_commit_in_flight():
    fake = groups_cluster()
    assert commit(fake, 8, {("orders", 0): (1, -1, "")}, group="g2").answer()
    fake.hold_appends = True
    pending = commit(fake, 8, {("orders", 0): (2, -1, "")}, group="g2")
    assert pending.parked
    asked = {"orders": [0]}
    assert fetched(fetch(fake, 7, asked, group="g2", require_stable=True)) == {
        ("orders", 0): (-1, "", UNSTABLE_OFFSET_COMMIT)}
    assert fetched(fetch(fake, 7, asked, group="g2")) == {("orders", 0): (1, "", 0)}
    fake.release_appends(0)
    assert commit_codes(pending.answer()) == {("orders", 0): 0}
    assert fetched(fetch(fake, 7, asked, group="g2", require_stable=True)) == {
        ("orders", 0): (2, "", 0)}


# -- ListGroups, DescribeGroups, DeleteGroups ----------------------------------------------------
def list_groups(fake, version, states=()):
    return ask(fake, ListGroupsRequest[version](states_filter=list(states), types_filter=[]))


@pytest.mark.parametrize("version", versions(16))
def test_list_groups(version):
    fake = groups_cluster()
    stable_group(fake)
    assert commit(fake, 8, {("orders", 0): (1, -1, "")}, group="g2").answer()
    resp = list_groups(fake, version)
    assert resp.error_code == 0
    got = sorted((g.group_id, g.protocol_type, g.group_state if version >= 4 else "-")
                 for g in resp.groups)              # group_state: v4+
    assert got == ([("g1", "consumer", "Stable"), ("g2", "", "Empty")] if version >= 4
                   else [("g1", "consumer", "-"), ("g2", "", "-")])
    if version >= 4:                    # the states filter, any case (KIP-518)
        assert [g.group_id for g in list_groups(fake, version, ["stable"]).groups] == ["g1"]
        assert [g.group_id for g in list_groups(fake, version, ["Empty", "Dead"]).groups] == [
            "g2"]
        (event,) = [e for e in fake.group_events if isinstance(e, gm.ListGroups)][1:2]
        assert event.states == frozenset({"stable"})
    fake.begin_load(fake.group_partition(not_owned_group(fake)))
    loading = list_groups(fake, version)
    assert loading.error_code == COORDINATOR_LOAD_IN_PROGRESS and len(loading.groups) == 2


@pytest.mark.parametrize("version", versions(15))
def test_describe_groups(version):
    fake = groups_cluster()
    a_id, b_id = stable_group(fake, instances=(None, "i-b"))
    far = not_owned_group(fake)
    resp, body = ask(fake, DescribeGroupsRequest[version](groups=["g1", "g3", far],
                                                          include_authorized_operations=True),
                     client_id="admin", kio=True)
    g1, ghost, elsewhere = resp.groups
    assert (g1.error_code, g1.group_id, g1.group_state, g1.protocol_type, g1.protocol_data) == (
        0, "g1", "Stable", "consumer", "range")
    assert [(x.member_id, x.client_id, x.client_host, x.member_metadata, x.member_assignment)
            for x in g1.members] == [
        (a_id, "ca", "", b"meta-ca", f"asg-{a_id}".encode()),
        (b_id, "cb", "", b"meta-cb", f"asg-{b_id}".encode())]
    if version >= 4:
        assert [x.group_instance_id for x in g1.members] == [None, "i-b"]
    assert (ghost.error_code, ghost.group_id, ghost.group_state, ghost.protocol_type,
            ghost.members) == (0, "g3", "Dead", "", [])            # unknown: Dead, no error
    assert (elsewhere.error_code, elsewhere.group_id, elsewhere.group_state) == (
        NOT_COORDINATOR, far, "")
    if version >= 3:      # asked: every group operation without an authorizer (Read,
        # Delete, Describe); a group answered with an error keeps "not computed"
        assert [g.authorized_operations for g in body.groups] == [
            (1 << 3) | (1 << 6) | (1 << 8)] * 2 + [NO_AUTHORIZED_OPERATIONS]
        assert resp.groups[2].authorized_operations is None


@pytest.mark.parametrize("version", versions(42))
def test_delete_groups(version):
    fake = groups_cluster()
    stable_group(fake)
    assert commit(fake, 8, THREE, group="g2").answer()
    before = len(fake.offsets_log)
    far = not_owned_group(fake)
    resp = ask(fake, DeleteGroupsRequest[version](groups_names=["g2", "g1", "g3", far, "g2"]))
    assert [(r.group_id, r.error_code) for r in resp.results] == [
        ("g2", 0), ("g1", NON_EMPTY_GROUP), ("g3", GROUP_ID_NOT_FOUND),
        (far, NOT_COORDINATOR)]
    (tombstones,) = fake.offsets_log[before:]         # its offsets, deleted for good
    assert len(tombstones.records) == 3 and {r.value for r in tombstones.records} == {None}
    assert fetched(fetch(fake, 5, {"orders": [0]}, group="g2")) == {("orders", 0): (-1, "", 0)}
    assert sorted(g.group_id for g in list_groups(fake, 4).groups) == ["g1"]
    again = ask(fake, DeleteGroupsRequest[version](groups_names=["g2"]))
    assert [(r.group_id, r.error_code) for r in again.results] == [("g2", GROUP_ID_NOT_FOUND)]


# -- the fake itself ---------------------------------------------------------------------------
def test_a_parked_call_is_visible_and_answered_later():
    fake = groups_cluster()
    call = join(fake, 3)
    assert call.parked
    with pytest.raises(NotAnsweredYet):
        call.frame()
    fake.advance(2999)
    assert call.parked
    fake.advance(1)
    assert call.answer().generation_id == 1


# -- KIP-848: ConsumerGroupHeartbeat, ConsumerGroupDescribe -----------------------------------
def cg_heartbeat(fake, version, member_id="m1", epoch=0, topics=("orders",), owned=(),
                 regex=None, group="g1"):
    tp = ConsumerGroupHeartbeatRequest.TopicPartitions
    return ask(fake, ConsumerGroupHeartbeatRequest[version](
        group_id=group, member_id=member_id, member_epoch=epoch, instance_id=None,
        rack_id=None, rebalance_timeout_ms=5000 if epoch == 0 else -1,
        subscribed_topic_names=list(topics) if topics is not None else None,
        subscribed_topic_regex=regex, server_assignor=None,
        topic_partitions=[tp(topic_id=t, partitions=ps) for t, ps in owned]
        if owned is not None else None), client_id="cg")


@pytest.mark.parametrize("version", versions(68))
def test_consumer_group_heartbeat_assigns_by_topic_id(version):
    fake = groups_cluster()
    first = cg_heartbeat(fake, version, member_id="" if version == 0 else "m1")
    assert (first.error_code, first.error_message, first.member_epoch,
            first.heartbeat_interval_ms) == (0, None, 1, 5000)
    member_id = first.member_id
    assert member_id == "m1" if version == 1 else len(member_id) == 36   # v0: the coordinator's
    orders = TOPIC_IDS["orders"]
    assert [(t.topic_id, sorted(t.partitions)) for t in first.assignment.topic_partitions] \
        == [(orders, [0, 1, 2])]
    quiet = cg_heartbeat(fake, version, member_id, 1, topics=None, owned=[(orders, [0, 1, 2])])
    assert (quiet.error_code, quiet.member_epoch, quiet.assignment) == (0, 1, None)
    (event,) = [e for e in fake.group_events if isinstance(e, gm.ConsumerGroupHeartbeat)][:1]
    assert event.request.client_id == "cg" and event.topics["orders"][1] == 3
    left = cg_heartbeat(fake, version, member_id, -1, topics=None, owned=None)
    assert (left.error_code, left.member_epoch) == (0, -1)


def test_consumer_group_heartbeat_errors_carry_kafkas_message():
    fake = groups_cluster()
    bad = cg_heartbeat(fake, 1, topics=None)
    assert (bad.error_code, bad.error_message) == (
        INVALID_REQUEST,
        "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
    unknown = cg_heartbeat(fake, 1, epoch=4, topics=None, owned=None, group="g2")
    assert (unknown.error_code, unknown.error_message) == (
        GROUP_ID_NOT_FOUND, "Consumer group g2 not found.")
    far = cg_heartbeat(fake, 1, group=not_owned_group(fake))
    assert far.error_code == NOT_COORDINATOR
    assert cg_heartbeat(fake, 1, regex="").error_code == 0        # "" is no expression


@pytest.mark.parametrize("version", versions(69))
def test_consumer_group_describe(version):
    fake = groups_cluster()
    cg_heartbeat(fake, 1, "m1", topics=("orders", "audit"))
    resp, body = ask(fake, ConsumerGroupDescribeRequest[version](
        group_ids=["g1", "g3"], include_authorized_operations=True), kio=True)
    g1, g3 = resp.groups
    assert (g1.error_code, g1.group_state, g1.group_epoch, g1.assignment_epoch,
            g1.assignor_name) == (0, "Stable", 1, 1, "uniform")
    (x,) = g1.members
    assert (x.member_id, x.member_epoch, x.client_id, sorted(x.subscribed_topic_names)) == (
        "m1", 1, "cg", ["audit", "orders"])
    assert sorted((t.topic_name, sorted(t.partitions)) for t in x.assignment.topic_partitions) \
        == [("audit", [0]), ("orders", [0, 1, 2])]
    assert body.groups[0].authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
    assert (g3.error_code, g3.error_message) == (GROUP_ID_NOT_FOUND, "Group g3 not found.")


def test_commit_v9_and_fetch_v9_carry_the_member_epoch_and_list_groups_v5_the_type():
    fake = groups_cluster()
    cg_heartbeat(fake, 1, "m1")
    ok = commit(fake, 9, {("orders", 0): (5, -1, "")}, member_id="m1", generation=1)
    stale = commit(fake, 9, {("orders", 1): (5, -1, "")}, member_id="m1", generation=0)
    assert [p.error_code for t in ok.answer().topics for p in t.partitions] == [0]
    assert [p.error_code for t in stale.answer().topics for p in t.partitions] == [113]
    t = OffsetFetchRequest[9].OffsetFetchRequestGroup
    resp = ask(fake, OffsetFetchRequest[9](groups=[
        t(group_id="g1", member_id="m1", member_epoch=0, topics=None)], require_stable=False))
    assert resp.groups[0].error_code == 113                     # STALE_MEMBER_EPOCH
    listed = ask(fake, ListGroupsRequest[5](states_filter=[], types_filter=["consumer"]))
    assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups] == [
        ("g1", "consumer", "Stable")]
    assert ask(fake, ListGroupsRequest[5](states_filter=[], types_filter=["classic"])).groups \
        == []


@pytest.mark.parametrize("api_key", [11, 68, 76])
def test_a_members_host_is_the_connections_address_as_kafka_prints_it(api_key):
    from protocol.security.session import Session
    from tests.handler_wire import ask
    from tests.protocol_samples import sample_request
    fake = cluster()
    version = {11: 9, 68: 1, 76: 1}[api_key]
    ask(fake, sample_request(api_key, version), Session("PLAINTEXT", "10.1.2.3"))
    if api_key == 76:
        hosts = [c["request"].client_host for c in fake.calls_of("share_heartbeat")]
    else:
        event = {11: gm.JoinGroup, 68: gm.ConsumerGroupHeartbeat}[api_key]
        hosts = [getattr(e, "client_host", None) or e.request.client_host
                 for e in fake.group_events if isinstance(e, event)]
    assert hosts == ["/10.1.2.3"]
