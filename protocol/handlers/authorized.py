"""Authorisation as a second `BrokerApi` around the first: same calls, denied items answered.

`AuthorizedApi(api, session)` is what the handlers talk to when the broker has an authorizer.
Every item the session's principal may not touch is answered here with Kafka's code and never
reaches the broker; the rest go through unchanged, and the two are merged in the order asked.
So the handlers stay as they are, and the broker never sees an unauthorised request.

Rules (Kafka's KafkaApis, ZooKeeper mode; authorisation comes before existence, so a denied
unknown topic is TOPIC_AUTHORIZATION_FAILED, not UNKNOWN_TOPIC_OR_PARTITION):
- Produce: Write on the topic. Fetch: Read on the topic; a follower's fetch (replica_id >= 0)
  needs ClusterAction on the cluster. ListOffsets: Describe. OffsetForLeaderEpoch:
  ClusterAction on the cluster covers every topic, else Describe on each. DeleteRecords:
  Delete. Denied partitions: TOPIC_AUTHORIZATION_FAILED (29), with no message.
- InitProducerId without a transactional id: IdempotentWrite on the cluster, or Write on
  some topic (Kafka 3's authorizeByResourceType), else CLUSTER_AUTHORIZATION_FAILED (31).
- Metadata: every topic needs Describe. Asked by name: a denied topic is answered 29; all
  topics: the denied ones are left out. Auto-creation needs Create on the cluster or the
  topic: a missing topic the principal may not create is 29.
- CreateTopics: Create on the cluster or the topic ("Authorization failed."); a created
  topic's configs, partition count and replication factor are answered only with
  DescribeConfigs on it (else -1, -1 and no configs). DeleteTopics: Delete. CreatePartitions:
  Alter ("The topic authorization is failed."). DescribeConfigs / IncrementalAlterConfigs:
  DescribeConfigs / AlterConfigs on the topic (29), the group (30) or, for broker, broker
  logger and client-metrics resources, on the cluster (31); DescribeConfigs answers Kafka's
  default message for the code, IncrementalAlterConfigs none (a broker logger excepted).
- Groups: FindCoordinator, DescribeGroups, OffsetFetch need Describe on the group;
  JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit need Read on it; DeleteGroups
  Delete (each group once, as Kafka dedupes); a denied group is GROUP_AUTHORIZATION_FAILED
  (30), a denied JoinGroup with the empty member id. OffsetDelete: Delete on the group
  (its top-level 30), Read on each topic (29). OffsetCommit also needs Read on each
  topic and OffsetFetch Describe (29 per partition; all-partition fetches leave denied topics
  out; the coordinator is asked even when no topic is left, and its group error is then the
  whole answer). ListGroups: Describe on the cluster lists all, else the groups one may
  describe. ConsumerGroupHeartbeat: Read on the group (30), then Describe on every
  subscribed topic (TOPIC_AUTHORIZATION_FAILED, 29); ConsumerGroupDescribe: Describe on
  each group (30 per group). Share groups alike: ShareGroupHeartbeat Read on the group,
  Describe on its topics; ShareGroupDescribe Describe per group; ShareFetch and
  ShareAcknowledge Read on the group (the whole answer 30) and Read on each topic (29 per
  partition, never reaching the share-partitions). DescribeShareGroupOffsets: Describe on
  the group (30 for that group) and on each topic (29 per partition, start offset -1; all
  partitions: the denied topics are left out); AlterShareGroupOffsets: Read on the group
  (the whole answer 30) and on each topic (29 per partition); DeleteShareGroupOffsets:
  Delete on the group (30) and Read on each topic (29 per topic).
- Transactions: FindCoordinator of a transactional id and DescribeTransactions need
  Describe on the transactional id; InitProducerId with one, AddPartitionsToTxn,
  AddOffsetsToTxn, EndTxn, TxnOffsetCommit and a transactional Produce need Write on it
  (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED, 53: a Produce's whole answer).
  AddPartitionsToTxn also needs Write on each topic (denied ones 29, the others
  OPERATION_NOT_ATTEMPTED); AddOffsetsToTxn and TxnOffsetCommit Read on the group (30),
  TxnOffsetCommit Read on each topic (29). A partition leader's verification
  (AddPartitionsToTxn v4) and WriteTxnMarkers need ClusterAction on the cluster (31).
  ListTransactions lists the transactional ids one may describe; DescribeProducers needs
  Read on the topic (29).
- authorized_operations (Metadata, DescribeGroups, DescribeCluster, when asked): the
  bitfield of Kafka 3.8's supported operations on the resource the principal may do; every
  one of them without an authorizer.
- AlterConfigs as IncrementalAlterConfigs (Alter on the cluster for brokers).
  DescribeLogDirs and ListPartitionReassignments need Describe on the cluster,
  ElectLeaders, AlterPartitionReassignments and UpdateFeatures Alter: else the whole
  request is CLUSTER_AUTHORIZATION_FAILED (31).
"""

from __future__ import annotations

from dataclasses import replace

from coordinator import messages as m
from coordinator.consumer_group import HeartbeatAnswer
from transactions import messages as tm
from protocol.api import (ClusterMetadata, ConfigsOutcome, Deferred, FetchOutcome,
                          OffsetAnswer, ProduceOutcome, ShareFetchPartition, ShareFetchResult,
                          TopicMetadata, TopicOutcome)
from share.group import DescribedShareGroup, ShareHeartbeatAnswer
from share import offsets as so
from protocol.security.acl import CLUSTER_NAME, AclOperation as Op, ResourceType as Res
from replicas.errors import ErrorCode as E
from replicas.errors import ClusterAuthorizationFailed, TransactionalIdAuthorizationFailed

DENIED = "Authorization failed."
TOPIC_CONFIG, BROKER_CONFIG, BROKER_LOGGER, CLIENT_METRICS, GROUP_CONFIG = 2, 4, 8, 16, 32
# Errors.<code>.message(): what DescribeConfigs (ConfigHelper) answers a denied resource with
DEFAULT_MESSAGE = {E.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
                   E.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
                   E.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed."}


def _denied_topics(partitions: dict) -> tuple:
    """{topic: partitions} denied → share.offsets.TopicOffsets answering each partition 29."""
    return tuple(so.TopicOffsets(t, None, tuple(so.PartitionOffset(
        p, error=E.TOPIC_AUTHORIZATION_FAILED,
        message=DEFAULT_MESSAGE[E.TOPIC_AUTHORIZATION_FAILED]) for p in ps))
        for t, ps in partitions.items())


class AuthorizedApi:
    def __init__(self, api, session):
        self._api, self._s = api, session
        self.broker_id = api.broker_id

    def __getattr__(self, name):               # calls with nothing to authorise
        return getattr(self._api, name)

    def allowed_operations(self, resource_type, name: str) -> frozenset:
        """KafkaApis' authorizedOperations: the supported operations this principal may do."""
        return frozenset(op for op in operations_of(resource_type)
                         if self._s.allowed(op, resource_type, name))

    def _topic(self, op, name: str) -> bool:
        return self._s.allowed(op, Res.TOPIC, name)

    def _cluster(self, op) -> bool:
        return self._s.allowed(op, Res.CLUSTER, CLUSTER_NAME)

    def _split(self, items, op, key=lambda item: item[0][0]):
        ok, denied = [], []
        for item in items:
            (ok if self._topic(op, key(item)) else denied).append(item)
        return ok, denied

    # -- metadata --------------------------------------------------------------------------
    def metadata(self, topics, allow_auto_create: bool, listener: str) -> ClusterMetadata:
        if topics is None:
            md = self._api.metadata(None, False, listener)
            return replace(md, topics=tuple(t for t in md.topics
                                            if self._topic(Op.DESCRIBE, t.name)))
        # Kafka asks for Create only when the broker would create (auto.create.topics.enable)
        allow_auto_create = allow_auto_create and getattr(self._api, "auto_create_topics_enable",
                                                          True)
        may_create = allow_auto_create and self._cluster(Op.CREATE)
        creatable = [t for t in topics if self._topic(Op.DESCRIBE, t)
                     and (may_create or not allow_auto_create or self._topic(Op.CREATE, t))]
        plain = [t for t in topics if self._topic(Op.DESCRIBE, t) and t not in creatable]
        answers: dict[str, TopicMetadata] = {}
        md = None
        for names, create in ((creatable, allow_auto_create), (plain, False)):
            if names or md is None:
                md = self._api.metadata(names, create, listener)
                for t in md.topics:
                    # a missing topic this principal may not create: Kafka answers 29
                    denied = names is plain and t.error == E.UNKNOWN_TOPIC_OR_PARTITION
                    answers[t.name] = TopicMetadata(t.name, E.TOPIC_AUTHORIZATION_FAILED) \
                        if denied else t
        return replace(md, topics=tuple(
            answers.get(t, TopicMetadata(t, E.TOPIC_AUTHORIZATION_FAILED))
            for t in dict.fromkeys(topics)))

    # -- data ------------------------------------------------------------------------------
    def may_write(self, topic: str) -> bool:
        """Produce validates and converts records only where the principal may write
        (KafkaApis authorises before ProduceRequest.validateRecords and LogValidator)."""
        return self._topic(Op.WRITE, topic)

    def produce(self, acks, timeout_ms, partitions, transactional_id=None, add_partitions=False):
        if transactional_id is not None and not self._txn(Op.WRITE, transactional_id):
            raise TransactionalIdAuthorizationFailed("Transactional Id authorization failed.")
        ok, denied = self._split(partitions, Op.WRITE)
        refused = {tp: ProduceOutcome(E.TOPIC_AUTHORIZATION_FAILED) for tp, _ in denied}
        got = self._api.produce(acks, timeout_ms, ok, transactional_id=transactional_id,
                                add_partitions=add_partitions) if ok else {}
        if isinstance(got, Deferred):
            return got.then(lambda answers: {**answers, **refused})
        return {**got, **refused}

    def fetch(self, replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, asks,
              reads=None, client=None, session=None):
        if replica_id >= 0 and not self._cluster(Op.CLUSTER_ACTION):
            ok, denied = [], list(asks)
        else:
            ok, denied = self._split(asks, Op.READ, key=lambda a: a.tp[0]) \
                if replica_id < 0 else (list(asks), [])
        if denied:      # the asks are no longer the whole session
            session = None
        extra = {k: v for k, v in (("reads", reads), ("client", client), ("session", session))
                 if v is not None}
        got = self._api.fetch(replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level,
                              ok, **extra) if ok else {}
        refused = {a.tp: FetchOutcome(E.TOPIC_AUTHORIZATION_FAILED) for a in denied}
        if isinstance(got, Deferred):
            return got.then(lambda answers: {**answers, **refused})
        return {**got, **refused}

    def list_offsets(self, isolation_level, asks):
        ok, denied = self._split(asks, Op.DESCRIBE)
        got = self._api.list_offsets(isolation_level, ok) if ok else {}
        return {**got, **{a[0]: OffsetAnswer(E.TOPIC_AUTHORIZATION_FAILED) for a in denied}}

    def legacy_offsets(self, replica_id, asks):
        ok, _ = self._split(asks, Op.DESCRIBE)
        got = iter(self._api.legacy_offsets(replica_id, ok) if ok else ())
        return [next(got) if a in ok else (E.TOPIC_AUTHORIZATION_FAILED, ()) for a in asks]

    def offsets_for_leader_epoch(self, asks):
        # a follower's truncation check: ClusterAction covers every topic (KafkaApis)
        ok, denied = (list(asks), []) if self._cluster(Op.CLUSTER_ACTION) \
            else self._split(asks, Op.DESCRIBE)
        got = self._api.offsets_for_leader_epoch(ok) if ok else {}
        return {**got, **{a[0]: OffsetAnswer(E.TOPIC_AUTHORIZATION_FAILED) for a in denied}}

    def delete_records(self, asks, timeout_ms):
        ok, denied = self._split(asks, Op.DELETE)
        got = self._api.delete_records(ok, timeout_ms) if ok else {}
        refused = {a[0]: (E.TOPIC_AUTHORIZATION_FAILED, -1) for a in denied}
        if isinstance(got, Deferred):
            return got.then(lambda answers: {**answers, **refused})
        return {**got, **refused}

    def init_producer_id(self, transactional_id, producer_id, producer_epoch):
        if transactional_id is None and not (self._cluster(Op.IDEMPOTENT_WRITE)
                                             or self._may_write_some_topic()):
            return E.CLUSTER_AUTHORIZATION_FAILED, -1, -1
        return self._api.init_producer_id(transactional_id, producer_id, producer_epoch)

    def _may_write_some_topic(self) -> bool:
        authorizer = self._s.authorizer
        return authorizer is None or authorizer.may_on_some(
            self._s.principal, self._s.host, Op.WRITE, Res.TOPIC)

    # -- admin -----------------------------------------------------------------------------
    def create_topics(self, specs, timeout_ms, validate_only):
        cluster = self._cluster(Op.CREATE)
        ok = [s for s in specs if cluster or self._topic(Op.CREATE, s.name)]
        got = self._api.create_topics(ok, timeout_ms, validate_only) if ok else {}

        def outcome(name):
            o = got.get(name)
            if o is None:
                return TopicOutcome(E.TOPIC_AUTHORIZATION_FAILED, DENIED)
            if self._topic(Op.DESCRIBE_CONFIGS, name):
                return o
            return TopicOutcome(o.error, o.message, topic_id=o.topic_id,  # no configs, counts
                                config_error=E.TOPIC_AUTHORIZATION_FAILED)
        return {s.name: outcome(s.name) for s in specs}

    def delete_topics(self, names, timeout_ms):
        ok = [n for n in names if self._topic(Op.DELETE, n)]
        got = self._api.delete_topics(ok, timeout_ms) if ok else {}
        return {n: got.get(n) or TopicOutcome(E.TOPIC_AUTHORIZATION_FAILED) for n in names}

    def create_partitions(self, asks, timeout_ms, validate_only):
        ok = [a for a in asks if self._topic(Op.ALTER, a[0])]
        got = self._api.create_partitions(ok, timeout_ms, validate_only) if ok else {}
        return {a[0]: got.get(a[0]) or TopicOutcome(E.TOPIC_AUTHORIZATION_FAILED,
                                                    "The topic authorization is failed.")
                for a in asks}

    def _config_denial(self, resource, op) -> int:
        if resource.kind == TOPIC_CONFIG:
            return E.NONE if self._topic(op, resource.name) else E.TOPIC_AUTHORIZATION_FAILED
        if resource.kind == GROUP_CONFIG:
            return E.NONE if self._group(op, resource.name) else E.GROUP_AUTHORIZATION_FAILED
        if resource.kind in (BROKER_CONFIG, BROKER_LOGGER, CLIENT_METRICS):
            return E.NONE if self._cluster(op) else E.CLUSTER_AUTHORIZATION_FAILED
        return 0                  # an unknown kind: the broker answers it

    def describe_configs(self, resources):
        return self._configs(resources, Op.DESCRIBE_CONFIGS,
                             lambda ok: self._api.describe_configs(ok),
                             lambda r, code: DEFAULT_MESSAGE[code])

    def alter_configs(self, resources, validate_only):
        # KafkaApis.configsAuthorizationApiError: no message; a broker logger's refusal comes
        # from RuntimeLoggerManager, with Errors.CLUSTER_AUTHORIZATION_FAILED.message()
        return self._configs(resources, Op.ALTER_CONFIGS,
                             lambda ok: self._api.alter_configs(ok, validate_only),
                             lambda r, code: DEFAULT_MESSAGE[code]
                             if r.kind == BROKER_LOGGER else None)

    def replace_configs(self, resources, validate_only):
        return self._configs(resources, Op.ALTER_CONFIGS,
                             lambda ok: self._api.replace_configs(ok, validate_only),
                             lambda r, code: None)

    # -- replicas: log dirs, elections, reassignments (KafkaApis: on the cluster) ------------
    def describe_log_dirs(self, tps):
        if not self._cluster(Op.DESCRIBE):
            raise ClusterAuthorizationFailed("Cluster authorization failed.")
        return self._api.describe_log_dirs(tps)

    def update_features(self, updates, validate_only):
        if not self._cluster(Op.ALTER):
            return E.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
        return self._api.update_features(updates, validate_only)

    def elect_leaders(self, election_type, tps, timeout_ms):
        if not self._cluster(Op.ALTER):
            raise ClusterAuthorizationFailed("Cluster authorization failed.")
        return self._api.elect_leaders(election_type, tps, timeout_ms)

    def alter_partition_reassignments(self, targets, timeout_ms):
        if not self._cluster(Op.ALTER):
            raise ClusterAuthorizationFailed("Cluster authorization failed.")
        return self._api.alter_partition_reassignments(targets, timeout_ms)

    def list_partition_reassignments(self, tps):
        if not self._cluster(Op.DESCRIBE):
            raise ClusterAuthorizationFailed("Cluster authorization failed.")
        return self._api.list_partition_reassignments(tps)

    def known_partitions(self, tps):
        """A partition of a topic the principal may not read counts as known here: its
        refusal (29) comes first, from the group call (authorisation before existence)."""
        known = self._api.known_partitions(tps)
        return known | {tuple(tp) for tp in tps if not self._topic(Op.READ, tp[0])}

    def _configs(self, resources, op, call, message):
        codes = {r[0]: self._config_denial(r[0], op) for r in resources}
        ok = [r for r in resources if not codes[r[0]]]
        got = call(ok) if ok else {}
        return {r[0]: got[r[0]] if not codes[r[0]]
                else ConfigsOutcome(codes[r[0]], message(r[0], codes[r[0]]))
                for r in resources}

    # -- groups ----------------------------------------------------------------------------
    def find_coordinator(self, keys, listener, key_type: int = 0):
        if key_type == 2:          # a share coordinator: brokers ask it (ClusterAction)
            if not self._cluster(Op.CLUSTER_ACTION):
                return dict.fromkeys(keys, (E.CLUSTER_AUTHORIZATION_FAILED, -1, "", -1))
            return self._api.find_coordinator(keys, listener, key_type)
        if key_type == 1:
            ok = [k for k in keys if self._txn(Op.DESCRIBE, k)]
            denied = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        else:
            ok = [k for k in keys if self._group(Op.DESCRIBE, k)]
            denied = E.GROUP_AUTHORIZATION_FAILED
        got = self._api.find_coordinator(ok, listener, key_type) if ok else {}
        return {k: got.get(k) or (denied, -1, "", -1) for k in keys}

    def _group(self, op, group_id: str) -> bool:
        return self._s.allowed(op, Res.GROUP, group_id)

    def _txn(self, op, transactional_id: str) -> bool:
        return self._s.allowed(op, Res.TRANSACTIONAL_ID, transactional_id)

    def group_call(self, make_event) -> Deferred:
        event = make_event(-1)             # only looked at: the real one gets its request id
        check = _GROUP_CHECKS.get(type(event))
        if check is None:
            return self._api.group_call(make_event)
        return check(self, event, make_event)

    # -- share groups (KafkaApis.handleShareGroupHeartbeat, handleShareFetchRequest, ...) -------
    def share_heartbeat(self, request, topics):
        if not self._group(Op.READ, request.group_id):
            return ShareHeartbeatAnswer(E.GROUP_AUTHORIZATION_FAILED)
        if not all(self._topic(Op.DESCRIBE, t) for t in request.subscribed_topic_names or ()):
            return ShareHeartbeatAnswer(E.TOPIC_AUTHORIZATION_FAILED)
        return self._api.share_heartbeat(request, topics)

    def share_describe(self, group_ids):
        allowed = [g for g in group_ids if self._group(Op.DESCRIBE, g)]
        got = iter(self._api.share_describe(allowed) if allowed else ())
        return [next(got) if g in allowed
                else DescribedShareGroup(g, E.GROUP_AUTHORIZATION_FAILED) for g in group_ids]

    def _share_topics(self, asked: dict) -> tuple[dict, dict]:
        allowed = {tp: v for tp, v in asked.items() if self._topic(Op.READ, tp[0])}
        return allowed, {tp: E.TOPIC_AUTHORIZATION_FAILED for tp in asked if tp not in allowed}

    def share_fetch(self, group_id, member_id, epoch, asked, forgotten, max_wait_ms, min_bytes,
                    max_bytes, max_records, renew_only):
        if not self._group(Op.READ, group_id):
            return Deferred.done(ShareFetchResult(E.GROUP_AUTHORIZATION_FAILED))
        allowed, denied = self._share_topics(asked)

        def merged(r):
            for tp, code in denied.items():
                r.partitions[tp] = ShareFetchPartition(error=code)
            return r
        return self._api.share_fetch(group_id, member_id, epoch, allowed, forgotten,
                                     max_wait_ms, min_bytes, max_bytes, max_records,
                                     renew_only).then(merged)

    def share_acknowledge(self, group_id, member_id, epoch, acks):
        if not self._group(Op.READ, group_id):
            return Deferred.done((E.GROUP_AUTHORIZATION_FAILED, {}, 0))
        allowed, denied = self._share_topics(acks)

        def merged(answer):
            error, out, lock_ms = answer
            if not error:
                out = {**out, **{tp: (code, (-1, -1)) for tp, code in denied.items()}}
            return error, out, lock_ms
        return self._api.share_acknowledge(group_id, member_id, epoch, allowed).then(merged)

    def share_offsets(self, request):
        g = request.group_id
        if isinstance(request, so.DescribeOffsets):
            if not self._group(Op.DESCRIBE, g):
                return Deferred.done(so.OffsetsAnswer(E.GROUP_AUTHORIZATION_FAILED))
            if request.topics is None:
                return self._api.share_offsets(request).then(lambda a: replace(a, topics=tuple(
                    t for t in a.topics if self._topic(Op.DESCRIBE, t.topic))))
            denied = [t for t in request.topics if not self._topic(Op.DESCRIBE, t)]
            allowed = {t: ps for t, ps in request.topics.items() if t not in denied}
            refused = _denied_topics({t: request.topics[t] for t in denied})
            if not allowed:
                return Deferred.done(so.OffsetsAnswer(topics=refused))
            return self._api.share_offsets(replace(request, topics=allowed)).then(
                lambda a: a if a.error else replace(a, topics=a.topics + refused))
        if isinstance(request, so.AlterOffsets):
            if not self._group(Op.READ, g):
                return Deferred.done(so.OffsetsAnswer(E.GROUP_AUTHORIZATION_FAILED))
            denied = [t for t in request.offsets if not self._topic(Op.READ, t)]
            allowed = {t: ps for t, ps in request.offsets.items() if t not in denied}
            refused = _denied_topics({t: request.offsets[t] for t in denied})
            return self._api.share_offsets(replace(request, offsets=allowed)).then(
                lambda a: a if a.error else replace(a, topics=a.topics + refused))
        if not self._group(Op.DELETE, g):
            return Deferred.done(so.OffsetsAnswer(E.GROUP_AUTHORIZATION_FAILED))
        denied = [t for t in request.topics if not self._topic(Op.READ, t)]
        refused = tuple(so.TopicOutcome(t, None, E.TOPIC_AUTHORIZATION_FAILED,
                                     DEFAULT_MESSAGE[E.TOPIC_AUTHORIZATION_FAILED])
                        for t in denied)
        allowed = tuple(t for t in request.topics if t not in denied)
        return self._api.share_offsets(replace(request, topics=allowed)).then(
            lambda a: a if a.error else replace(a, outcomes=refused + a.outcomes))

    def zk_commit_offsets(self, group_id, asks):
        if not self._group(Op.READ, group_id):
            return {tuple(a[0]): E.GROUP_AUTHORIZATION_FAILED for a in asks}
        ok, denied = self._split(asks, Op.READ)
        got = self._api.zk_commit_offsets(group_id, ok) if ok else {}
        return {**got, **{tuple(a[0]): E.TOPIC_AUTHORIZATION_FAILED for a in denied}}

    def zk_fetch_offsets(self, group_id, tps):
        if not self._group(Op.DESCRIBE, group_id):
            return {tuple(tp): (E.GROUP_AUTHORIZATION_FAILED, -1) for tp in tps}
        ok = [tp for tp in tps if self._topic(Op.DESCRIBE, tp[0])]
        got = self._api.zk_fetch_offsets(group_id, ok) if ok else {}
        return {tuple(tp): got.get(tuple(tp), (E.TOPIC_AUTHORIZATION_FAILED, -1)) for tp in tps}

    def _membership(self, event, make_event):
        if self._group(Op.READ, event.group_id):
            return self._api.group_call(make_event)
        denied = {m.JoinGroup: lambda: m.JoinGroupResult(E.GROUP_AUTHORIZATION_FAILED, ""),
                  m.SyncGroup: lambda: m.SyncGroupResult(E.GROUP_AUTHORIZATION_FAILED),
                  m.Heartbeat: lambda: m.HeartbeatResult(E.GROUP_AUTHORIZATION_FAILED),
                  m.LeaveGroup: lambda: m.LeaveGroupResult(E.GROUP_AUTHORIZATION_FAILED)}
        return _now(denied[type(event)]())

    def _offset_commit(self, event: m.OffsetCommit, make_event):
        if not self._group(Op.READ, event.group_id):
            return _now(m.OffsetCommitResult(tuple(
                m.CommitPartitionResult(o.topic, o.partition, E.GROUP_AUTHORIZATION_FAILED)
                for o in event.offsets)))
        ok = tuple(o for o in event.offsets if self._topic(Op.READ, o.topic))
        refused = tuple(m.CommitPartitionResult(o.topic, o.partition, E.TOPIC_AUTHORIZATION_FAILED)
                        for o in event.offsets if o not in ok)
        if not refused:
            return self._api.group_call(make_event)
        if not ok:
            return _now(m.OffsetCommitResult(refused))
        pending = self._api.group_call(lambda rid: replace(make_event(rid), offsets=ok))
        return pending.then(lambda r: m.OffsetCommitResult(r.partitions + refused))

    def _offset_fetch(self, event: m.OffsetFetch, make_event):
        if not self._group(Op.DESCRIBE, event.group_id):
            return _now(m.OffsetFetchResult(E.GROUP_AUTHORIZATION_FAILED))
        if event.partitions is None:
            pending = self._api.group_call(make_event)
            return pending.then(lambda r: _keep(r, lambda x: self._topic(Op.DESCRIBE, x.topic)))
        ok = tuple(tp for tp in event.partitions if self._topic(Op.DESCRIBE, tp[0]))
        refused = tuple(m.FetchedOffset(t, p, -1, error=E.TOPIC_AUTHORIZATION_FAILED)
                        for t, p in event.partitions if (t, p) not in ok)
        if not refused:
            return self._api.group_call(make_event)
        # asked even with nothing left: a coordinator error is the whole answer (KafkaApis)
        pending = self._api.group_call(lambda rid: replace(make_event(rid), partitions=ok))
        return pending.then(lambda r: _merged_fetch(r, refused))

    def _list_groups(self, event, make_event):
        pending = self._api.group_call(make_event)
        if self._cluster(Op.DESCRIBE):
            return pending

        return pending.then(lambda r: replace(r, groups=tuple(
            g for g in r.groups if self._group(Op.DESCRIBE, g.group_id))))

    def _per_group(self, event, make_event, op, field, refuse, wrap, distinct=False):
        ids = tuple(dict.fromkeys(getattr(event, field))) if distinct else getattr(event, field)
        ok = tuple(g for g in ids if self._group(op, g))
        pending = self._api.group_call(lambda rid: replace(make_event(rid), **{field: ok})) \
            if ok else _now(wrap(()))

        def merged(result):
            got = {g.group_id: g for g in getattr(result, "groups")}
            return wrap(tuple(got[g] if g in got else refuse(g) for g in ids))
        return pending.then(merged)

    def _consumer_heartbeat(self, event: m.ConsumerGroupHeartbeat, make_event):
        """KafkaApis.handleConsumerGroupHeartbeat: READ on the group, then DESCRIBE on
        every subscribed topic."""
        if not self._group(Op.READ, event.request.group_id):
            return _now(HeartbeatAnswer(E.GROUP_AUTHORIZATION_FAILED))
        names = event.request.subscribed_topic_names or ()
        if not all(self._topic(Op.DESCRIBE, t) for t in names):
            return _now(HeartbeatAnswer(E.TOPIC_AUTHORIZATION_FAILED))
        return self._api.group_call(make_event)

    def _consumer_describe(self, event, make_event):
        return self._per_group(event, make_event, Op.DESCRIBE, "group_ids",
                               lambda g: m.DescribedConsumerGroup(
                                   E.GROUP_AUTHORIZATION_FAILED, g),
                               lambda gs: m.ConsumerGroupDescribeResult(gs))

    def _describe_groups(self, event, make_event):
        return self._per_group(event, make_event, Op.DESCRIBE, "group_ids",
                               lambda g: m.DescribedGroup(E.GROUP_AUTHORIZATION_FAILED, g, ""),
                               lambda gs: m.DescribeGroupsResult(gs))

    def _txn_offset_commit(self, event, make_event):
        def all_of(code):
            return _now(m.OffsetCommitResult(tuple(
                m.CommitPartitionResult(o.topic, o.partition, code) for o in event.offsets)))
        if not self._txn(Op.WRITE, event.transactional_id):
            return all_of(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not self._group(Op.READ, event.group_id):
            return all_of(E.GROUP_AUTHORIZATION_FAILED)
        return self._offset_commit(event, make_event)

    # -- transactions ----------------------------------------------------------------------
    def txn_call(self, make_event) -> Deferred:
        event = make_event(-1)             # only looked at: the real one gets its request id
        if isinstance(event, tm.DescribeTransactions):
            return self._describe_transactions(event, make_event)
        if isinstance(event, tm.ListTransactions):
            return self._api.txn_call(make_event).then(lambda r: replace(r, transactions=tuple(
                x for x in r.transactions if self._txn(Op.DESCRIBE, x.transactional_id))))
        denied = _txn_checks(self, event, make_event)
        return denied if denied is not None else self._api.txn_call(make_event)

    def _describe_transactions(self, event, make_event):
        ids = event.transactional_ids
        ok = tuple(t for t in ids if self._txn(Op.DESCRIBE, t))
        pending = self._api.txn_call(lambda rid: replace(make_event(rid), transactional_ids=ok)) \
            if ok else _now(tm.DescribeTransactionsResult(()))

        def merged(r):
            got = {d.transactional_id: d for d in r.transactions}
            return tm.DescribeTransactionsResult(tuple(
                got[t] if t in got else
                tm.TransactionDescription(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, t)
                for t in ids))
        return pending.then(merged)

    def write_txn_markers(self, markers, timeout_ms):
        if not self._cluster(Op.CLUSTER_ACTION):
            return _now([{tuple(tp): E.CLUSTER_AUTHORIZATION_FAILED for tp in mk[4]}
                         for mk in markers])
        return self._api.write_txn_markers(markers, timeout_ms)

    def describe_producers(self, tps):
        ok, denied = self._split([(tuple(tp), None) for tp in tps], Op.READ)
        got = self._api.describe_producers([tp for tp, _ in ok]) if ok else {}
        return {**got, **{tp: (E.TOPIC_AUTHORIZATION_FAILED, []) for tp, _ in denied}}

    def _offset_delete(self, event, make_event):
        if not self._group(Op.DELETE, event.group_id):
            return _now(m.OffsetDeleteResult(E.GROUP_AUTHORIZATION_FAILED))
        ok = tuple(tp for tp in event.partitions if self._topic(Op.READ, tp[0]))
        refused = tuple((t, p, E.TOPIC_AUTHORIZATION_FAILED)
                        for t, p in event.partitions if (t, p) not in ok)
        if not refused:
            return self._api.group_call(make_event)
        pending = self._api.group_call(lambda rid: replace(make_event(rid), partitions=ok)) \
            if ok else _now(m.OffsetDeleteResult(E.NONE))
        return pending.then(lambda r: r if r.error else replace(
            r, partitions=tuple(r.partitions) + refused))

    def _delete_groups(self, event, make_event):
        return self._per_group(event, make_event, Op.DELETE, "group_ids",
                               lambda g: m.DeletedGroup(g, E.GROUP_AUTHORIZATION_FAILED),
                               lambda gs: m.DeleteGroupsResult(gs), distinct=True)


def _txn_checks(api: "AuthorizedApi", event, make_event) -> Deferred | None:
    """None: allowed as asked; else the Deferred answer of a denied (part of a) request."""
    if isinstance(event, tm.InitProducerId):
        if event.transactional_id is not None and not api._txn(Op.WRITE, event.transactional_id):
            return _now(tm.InitProducerIdResult(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    elif isinstance(event, tm.AddPartitionsToTxn):
        if event.version >= 4 and not api._cluster(Op.CLUSTER_ACTION):
            return _now(tm.AddPartitionsResult(E.CLUSTER_AUTHORIZATION_FAILED))
        if not api._txn(Op.WRITE, event.transactional_id):
            return _now(tm.AddPartitionsResult(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
        denied = {tp for tp in event.partitions if not api._topic(Op.WRITE, tp[0])}
        if denied and not event.verify_only:
            return _now(tm.AddPartitionsResult(E.OPERATION_NOT_ATTEMPTED, {
                tp: E.TOPIC_AUTHORIZATION_FAILED if tp in denied else E.OPERATION_NOT_ATTEMPTED
                for tp in event.partitions}))
    elif isinstance(event, tm.AddOffsetsToTxn):
        if not api._txn(Op.WRITE, event.transactional_id):
            return _now(tm.AddOffsetsResult(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
        if not api._group(Op.READ, event.group_id):
            return _now(tm.AddOffsetsResult(E.GROUP_AUTHORIZATION_FAILED))
    elif isinstance(event, tm.EndTxn):
        if not api._txn(Op.WRITE, event.transactional_id):
            return _now(tm.EndTxnResult(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    return None


_GROUP_CHECKS = {m.JoinGroup: AuthorizedApi._membership, m.SyncGroup: AuthorizedApi._membership,
                 m.Heartbeat: AuthorizedApi._membership, m.LeaveGroup: AuthorizedApi._membership,
                 m.OffsetCommit: AuthorizedApi._offset_commit,
                 m.OffsetFetch: AuthorizedApi._offset_fetch,
                 m.ListGroups: AuthorizedApi._list_groups,
                 m.DescribeGroups: AuthorizedApi._describe_groups,
                 m.DeleteGroups: AuthorizedApi._delete_groups,
                 m.OffsetDelete: AuthorizedApi._offset_delete,
                 m.TxnOffsetCommit: AuthorizedApi._txn_offset_commit,
                 m.ConsumerGroupHeartbeat: AuthorizedApi._consumer_heartbeat,
                 m.ConsumerGroupDescribe: AuthorizedApi._consumer_describe}


# Kafka 3.8's AclEntry.supportedOperations, which authorizedOperations reports (groups have
# no config operations before Kafka 4)
_REPORTED = {Res.TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
                         Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
             Res.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE),
             Res.CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                           Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE)}


def operations_of(resource_type) -> tuple:
    return _REPORTED[resource_type]


def authorized_operations(api, resource_type, name: str) -> int:
    """The authorized_operations bitfield (Utils.to32BitField of the operation codes): what
    an AuthorizedApi's principal may do, or every supported operation without an
    authorizer (Kafka's rule)."""
    allowed = getattr(api, "allowed_operations", None)
    ops = operations_of(resource_type) if allowed is None else allowed(resource_type, name)
    return sum(1 << int(op) for op in set(ops))


def _now(result) -> Deferred:
    return Deferred.done(result)


def _keep(result: m.OffsetFetchResult, keep) -> m.OffsetFetchResult:
    return replace(result, partitions=tuple(x for x in result.partitions if keep(x)))


def _merged_fetch(result: m.OffsetFetchResult, refused) -> m.OffsetFetchResult:
    if result.error:
        return result
    return replace(result, partitions=tuple(result.partitions) + refused)
