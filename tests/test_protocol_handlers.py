"""What every API protocol/handlers/ serves shares, over tests/handler_wire.py: a Kafka error
the broker raises is answered in the API's own error fields, any other exception propagates,
a version not served is answered UNSUPPORTED_VERSION, ApiVersions v4 gets KIP-511's answer,
and FakeBrokerApi is a real BrokerApi. Each API family's own rules are in the
test_handlers_* modules."""

from __future__ import annotations

import inspect

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from protocol.api import BrokerApi
from protocol.codec import has_request_schema
from protocol.connection import Connection
from protocol.handlers import HANDLERS
from protocol.versions import REJECTED_VERSIONS, SUPPORTED
from replicas.errors import NotController
from tests.fake_broker_api import FakeBrokerApi, Partition
from tests.handler_wire import ask, cluster, send
from tests.protocol_samples import ASKED, asked_names, sample_request, walk

pytestmark = pytest.mark.unit


# The BrokerApi method each API's handler calls.
METHOD = {0: "produce", 1: "fetch", 2: "list_offsets", 3: "metadata", 19: "create_topics",
          20: "delete_topics", 21: "delete_records", 22: "init_producer_id", 23: "offsets_for_leader_epoch",
          32: "describe_configs", 37: "create_partitions", 44: "alter_configs",
          60: "metadata", 10: "find_coordinator", 27: "write_txn_markers",
          61: "describe_producers", 33: "replace_configs", 35: "describe_log_dirs",
          43: "elect_leaders", 45: "alter_partition_reassignments", 57: "update_features",
          46: "list_partition_reassignments", 47: "group_call",
          **dict.fromkeys((8, 9, 11, 12, 13, 14, 15, 16, 42, 28, 68, 69), "group_call"),
          76: "share_heartbeat", 77: "share_describe", 78: "share_fetch",
          79: "share_acknowledge", 90: "share_offsets", 91: "share_offsets",
          92: "share_offsets",
          **dict.fromkeys((24, 25, 26, 65, 66), "txn_call")}
# Kafka 3.8 answers these from ZooKeeper or from the log's segments
LEGACY_METHOD = {(2, 0): "legacy_offsets", (8, 0): "zk_commit_offsets",
                 (9, 0): "zk_fetch_offsets"}
SERVED = [(k, v) for k, (lo, hi) in SUPPORTED.items() if k in HANDLERS or k in (11, 68, 76)
          for v in range(lo, hi + 1) if v not in REJECTED_VERSIONS.get(k, ())]


@pytest.mark.parametrize("api_key,version", SERVED)
def test_a_kafka_error_raised_by_the_broker_is_answered_everywhere(api_key, version):
    fake = cluster()
    method = LEGACY_METHOD.get((api_key, version), METHOD[api_key])
    fake.raises[method] = NotController("moved")
    resp = ask(fake, sample_request(api_key, version))
    assert len(fake.calls_of(method)) == 1                # the call was made, and raised
    tree = resp.to_dict()
    codes = list(walk(tree, "error_code")) + list(walk(tree, "partition_error_code"))
    if api_key == 35 and version < 3:        # DescribeLogDirs v0-2: no field for it (Kafka)
        assert codes == [] and tree["results"] == []
        return
    assert codes and set(codes) == {41}
    groups_batched = api_key == 9 and version >= 8
    if api_key in (0, 1, 2, 3, 8, 9, 19, 20, 23, 37, 27, 28, 61) and not groups_batched or \
            (api_key, version) < (24, 4) and api_key == 24:     # topics asked are echoed
        assert asked_names(tree) == set(ASKED)
    if api_key in (15, 42) or groups_batched or (api_key, version) == (10, 4):  # groups
        assert set(walk(tree, "group_id")) | set(walk(tree, "key")) == (
            {"g1"} if api_key == 10 else {"g1", "g2"})


def test_any_other_exception_propagates_to_the_caller():
    fake = cluster()
    fake.raises["fetch"] = RuntimeError("disk on fire")
    with pytest.raises(RuntimeError, match="disk on fire"):
        send(fake, sample_request(1, 12))


@pytest.mark.parametrize("api_key,version", [(3, 13), (1, 17), (2, 9), (22, 6), (60, 2)])
def test_a_version_not_served_is_answered_unsupported_version(api_key, version):
    assert has_request_schema(api_key, version)           # decodable, just not served
    fake = cluster()
    request, _ = send(fake, sample_request(api_key, version))
    assert not request.served
    resp = ask(fake, sample_request(api_key, version))
    codes = list(walk(resp.to_dict(), "error_code"))
    assert codes and set(codes) == {35}
    assert fake.calls == []


def test_apiversions_v4_gets_the_kip_511_answer_then_v3_works():
    fake = cluster()
    conn = Connection()
    hello = ApiVersionsRequest[4](client_software_name="kafka-python",
                                  client_software_version="3.0.12")
    request, out = send(fake, hello, correlation_id=1, conn=conn)
    assert not request.served
    # Header v0 (no tagged-field byte), v0 body: error 35 and our ApiVersions range only.
    assert out == (b"\x00\x00\x00\x10" b"\x00\x00\x00\x01" b"\x00\x23"
                   b"\x00\x00\x00\x01" b"\x00\x12\x00\x00\x00\x03")
    first = ApiVersionsResponse.decode(out[4:], version=0, header=True)
    assert first.error_code == 35
    assert [(a.api_key, a.min_version, a.max_version) for a in first.api_keys] == [(18, 0, 3)]
    retry = min(4, first.api_keys[0].max_version)
    request, out = send(fake, ApiVersionsRequest[retry](
        client_software_name="kafka-python", client_software_version="3.0.12"),
        correlation_id=2, conn=conn)
    assert request.served
    assert out[4:10] == b"\x00\x00\x00\x02\x00\x00"        # header v0, then error 0
    second = ApiVersionsResponse.decode(out[4:], version=retry, header=True)
    assert second.error_code == 0
    assert {a.api_key: (a.min_version, a.max_version) for a in second.api_keys} == SUPPORTED
    assert conn.responses_sent == 2 and fake.calls == []


def test_the_fake_is_a_real_broker_api():
    # Every BrokerApi method exists on the fake with the same parameter names.
    for name, member in vars(BrokerApi).items():
        if inspect.isfunction(member) and not name.startswith("_"):
            ours = getattr(FakeBrokerApi, name)
            assert list(inspect.signature(ours).parameters) == \
                list(inspect.signature(member).parameters), name
    assert isinstance(FakeBrokerApi().broker_id, int)
    assert Partition(leader=1, replicas=(1,), isr=(1,)).log_end == 0
