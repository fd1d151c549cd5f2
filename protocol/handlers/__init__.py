"""protocol/handlers/: one handler per served Kafka API, and `handle`, the dispatcher.

Modules: data (Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords),
metadata (ApiVersions, Metadata, DescribeCluster), admin (topics, partitions, configs),
replication (log dirs, leader elections, partition reassignments), groups (the
consumer-group APIs), share (KIP-932's share-group APIs), txn (InitProducerId and the transaction APIs), security
(SASL and ACL APIs), quotas (client quotas and SCRAM administration), authorized
(the authorizer's view of a BrokerApi).

May import: the stdlib, kio, protocol/ (codec, build, api, versions), share/ (its request and
answer types), replicas/ (errors,
the record codecs: records, legacy_records).
Never ray, kazoo or sockets: every effect goes through the `BrokerApi` the caller passes.

Rules:
- `handle(api, request, listener)` answers a decoded, served request with a kio response
  entity of the request's version, or None when Kafka sends no answer (Produce acks=0).
- A handler builds ONE internal result (protocol/api.py) and maps it to the version asked
  with `build`, which drops fields a version lacks and zero-fills the ones it adds.
- Security: the third argument is the connection's `Session` (protocol/security/session.py)
  or just a listener name. With SASL on the listener, only ApiVersions and the SASL exchange
  are handled before authentication completes (anything else closes the connection, as
  Kafka does); with an authorizer, the handlers talk to `AuthorizedApi` (authorized.py), so
  a denied item never reaches the broker.
- Per-item problems are per-item error codes; a handler that raises a KafkaError is answered
  with that code everywhere (codec.error_response); anything else is UNKNOWN_SERVER_ERROR
  and logged by the caller. Requests are checked in Kafka's order (KafkaApis.handle*).
"""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Callable, Protocol

from protocol.api import BrokerApi, Deferred
from protocol.codec import api_versions_response
from protocol.errors import ProtocolError
from protocol.fetch_answer import FetchAnswer
from protocol.handlers import (admin, data, groups, metadata, quotas, replication, security, share,
                               txn)
from protocol.handlers.authorized import AuthorizedApi
from protocol.security.session import Session, as_session
from replicas.errors import ErrorCode, KafkaError

API_VERSIONS, SASL_HANDSHAKE = 18, 17
PRODUCE, FETCH, WRITE_TXN_MARKERS = 0, 1, 27


class QuotaHook(Protocol):
    """What `answer` asks the shell about client quotas (actors/listener.py measures; the
    decisions are protocol/quotas.py's). Each returns the throttle time in ms (0: none)."""

    def request_time(self, request, principal: str) -> int:
        """Record the request's handling time so far (request_percentage)."""

    def bandwidth(self, request, principal: str, nbytes: int) -> int:
        """Record a Produce's request bytes or a Fetch's record bytes (byte-rate quotas)."""

Handler = Callable[[BrokerApi, object, str], object]

HANDLERS: dict[int, Handler] = {
    0: data.produce,
    1: data.fetch,
    2: data.list_offsets,
    3: metadata.metadata,
    19: admin.create_topics,
    20: admin.delete_topics,
    21: data.delete_records,
    22: txn.init_producer_id,
    24: txn.add_partitions_to_txn,
    25: txn.add_offsets_to_txn,
    26: txn.end_txn,
    27: txn.write_txn_markers,
    28: txn.txn_offset_commit,
    61: txn.describe_producers,
    65: txn.describe_transactions,
    66: txn.list_transactions,
    23: data.offset_for_leader_epoch,
    32: admin.describe_configs,
    37: admin.create_partitions,
    33: admin.alter_configs,
    35: replication.describe_log_dirs,
    43: replication.elect_leaders,
    44: admin.incremental_alter_configs,
    57: admin.update_features,
    45: replication.alter_partition_reassignments,
    46: replication.list_partition_reassignments,
    47: groups.offset_delete,
    60: metadata.describe_cluster,
    8: groups.offset_commit,
    9: groups.offset_fetch,
    10: groups.find_coordinator,
    12: groups.heartbeat,
    13: groups.leave_group,
    14: groups.sync_group,
    15: groups.describe_groups,
    16: groups.list_groups,
    42: groups.delete_groups,
    69: groups.consumer_group_describe,
    77: share.share_group_describe,
    78: share.share_fetch,
    79: share.share_acknowledge,
    90: share.describe_share_group_offsets,
    91: share.alter_share_group_offsets,
    92: share.delete_share_group_offsets,
}

# these take the connection's Session; the others only its listener name
SESSION_HANDLERS: dict[int, Handler] = {
    17: security.sasl_handshake,
    36: security.sasl_authenticate,
    29: security.describe_acls,
    30: security.create_acls,
    31: security.delete_acls,
    48: quotas.describe_client_quotas,
    49: quotas.alter_client_quotas,
    50: quotas.describe_user_scram_credentials,
    51: quotas.alter_user_scram_credentials,
    # group membership records the member's address (Kafka's clientHost: "/127.0.0.1")
    11: groups.join_group,
    68: groups.consumer_group_heartbeat,
    76: share.share_group_heartbeat,
}


def handle(api: BrokerApi, request, context: Session | str = "PLAINTEXT"):
    """The response body for `request` (protocol.codec.Request), or None for no answer."""
    session = as_session(context)
    _gate(session, request)
    return _dispatch(api, request, session)


def _gate(session: Session, request) -> None:
    """SASL: before authentication only ApiVersions and the exchange itself (asked ONCE per
    request: the SASL state moves on ApiVersions). Kafka closes the connection otherwise."""
    if not session.allows_api(request.api_key):
        raise ProtocolError(f"{request.api_name} before SASL authentication completed "
                            f"(ILLEGAL_SASL_STATE)", api_key=request.api_key,
                            api_version=request.api_version,
                            correlation_id=request.correlation_id)


def _dispatch(api: BrokerApi, request, session: Session):
    if request.api_key == API_VERSIONS:
        if not request.served and session.sasl is not None:
            session.sasl.process_api_versions_rejected()    # the client retries older
        return api_versions_response(request, finalized=api.finalized_features())
    if session.authorizer is not None:
        api = AuthorizedApi(api, session)
    special = SESSION_HANDLERS.get(request.api_key)
    if special is not None:
        return special(api, request, session)
    return HANDLERS[request.api_key](api, request, session.listener)


def answer(connection, api: BrokerApi, request, context: Session | str = "PLAINTEXT",
           quota: QuotaHook | None = None) -> bytes | Deferred | None:
    """What answers `request` on `connection` (protocol.connection.Connection): the bytes,
    a Deferred of them (a produce appended now whose acknowledgements are pending, a parked
    fetch or group request: the caller sends its result() in request order, and
    when_ready() tells it when that no longer blocks), or None (an acks=0 produce). A version we do not
    serve is answered UNSUPPORTED_VERSION (ApiVersions' own KIP-511 downgrade included); a
    KafkaError raised by a handler is its code everywhere, except for an acks=0 produce,
    which gets no answer: a ProtocolError (close the connection, as Kafka does). Anything
    else propagates (the caller logs it and answers UNKNOWN_SERVER_ERROR, or closes for
    acks=0)."""
    session = as_session(context)
    _gate(session, request)
    if not request.served and request.api_key != API_VERSIONS:
        return connection.respond_error(request, ErrorCode.UNSUPPORTED_VERSION)
    try:
        body = _dispatch(api, request, session)
    except KafkaError as exc:
        if not request.expects_response:     # acks=0: Kafka answers nothing and closes
            raise ProtocolError(f"acks=0 produce failed: {exc}", api_key=request.api_key,
                                api_version=request.api_version,
                                correlation_id=request.correlation_id) from exc
        return connection.respond_error(request, exc.code)
    _sasl_framing(connection, request, session)
    if quota is not None and _quota_applies(request):
        body = _throttled(request, body, quota, session.principal)
    if body is None:
        return None
    if isinstance(body, Deferred):
        return Deferred(lambda: _finish(connection, request, body), body._ready)
    return connection.respond(request, body)


def _sasl_framing(connection, request, session: Session) -> None:
    """Bare SASL tokens follow a successful SaslHandshake v0 until authentication completes
    (Kafka's SaslServerAuthenticator without enableKafkaSaslAuthenticateHeaders)."""
    sasl = session.sasl
    if sasl is None:
        return
    if request.api_key == SASL_HANDSHAKE and request.api_version == 0:
        connection.sasl_tokens = sasl.state == "authenticate"
    elif connection.sasl_tokens and sasl.authenticated:
        connection.sasl_tokens = False


def _quota_applies(request) -> bool:
    if request.api_key == WRITE_TXN_MARKERS:
        return False
    return request.api_key != FETCH or getattr(request.body, "replica_id", -1) < 0


def _record_bytes(body) -> int:
    total = 0
    for topic in getattr(body, "responses", ()) or ():
        for p in getattr(topic, "partitions", ()) or ():
            records = getattr(p, "records", None)
            total += len(records) if records else 0
    return total


def _throttled(request, body, quota: QuotaHook, principal: str):
    """The body with its throttle time set, measured now (a Deferred: when it is ready)."""
    request_ms = 0 if (request.api_key == PRODUCE and not request.expects_response) \
        else quota.request_time(request, principal)

    def apply(b):
        ms = request_ms
        if request.api_key == PRODUCE:
            ms = max(ms, quota.bandwidth(request, principal, request.size))
        elif request.api_key == FETCH:
            ms = max(ms, quota.bandwidth(request, principal, b.record_bytes()
                                         if isinstance(b, FetchAnswer) else _record_bytes(b)))
        if isinstance(b, FetchAnswer):
            return b.throttled(ms) if ms > 0 else b
        if ms > 0 and isinstance(getattr(b, "throttle_time", None), datetime.timedelta):
            b = replace(b, throttle_time=max(b.throttle_time, datetime.timedelta(milliseconds=ms)))
        return b
    if isinstance(body, Deferred):
        return body.then(apply)
    return apply(body)


def _finish(connection, request, body: Deferred) -> bytes | None:
    try:
        return connection.respond(request, body.result())
    except KafkaError as exc:
        return connection.respond_error(request, exc.code)
