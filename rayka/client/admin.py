"""Admin: topic and leadership operations, Kafka's AdminClient over rayka's ZooKeeper layout.

Rules:
- Admin writes go to Kafka's ZooKeeper paths (/brokers/topics, /admin/..., /config/topics)
  and the active controller acts on its watches, as in Kafka's ZooKeeper mode.
- Bad input raises a typed error before anything is written: InvalidTopic (17),
  InvalidPartitions (37), InvalidReplicationFactor (38) when RF < 1 or RF > live brokers,
  InvalidConfig (40), TopicAlreadyExists (36), UnknownTopicOrPartition (3),
  InvalidReplicaAssignment (39). A new topic follows the brokers' own rules
  (controller/topic_admin.py), without their defaults: -1 partitions or replicas is refused.
- With wait=True (default) an operation returns once its effect is visible: every partition
  of a new topic led by a live broker AND known with that leader to every live broker's
  metadata cache; a deleted topic gone from ZooKeeper; a reassignment finished. A change
  not visible within `timeout_s` raises RequestTimedOut (7) (the change itself stays).
"""

from __future__ import annotations

import time
from typing import Callable, Mapping, Sequence

import ray

from actors import security_store as security
from controller.topic_admin import plan_topic
from rayka.client.types import ControllerInfo, PartitionInfo, TopicPartition
from replicas.errors import RETRIABLE, ErrorCode as E
from replicas.errors import (InvalidConfig, InvalidReplicaAssignment, InvalidRequest, KafkaError,
                             NonEmptyGroup, RequestTimedOut, UnknownTopicOrPartition,
                             error_for_code)

POLL_S = 0.02


def wait_for(predicate: Callable[[], object], timeout_s: float, what: str,
             poll_s: float | None = None):
    """Poll `predicate` until truthy (returned) or raise RequestTimedOut after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise RequestTimedOut(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(POLL_S if poll_s is None else poll_s)  # poll interval of a deadline loop


def hanging_among(candidates, ids: Mapping[int, str], described: Mapping[str, set],
                  now_ms: int) -> list[dict]:
    """Kafka's filterHangingTransactions: of the open transactions [(tp, producer state)],
    those whose producer id no transactional id holds (`ids`), or whose transactional id
    is not described or does not list the partition (`described`: id → its partitions)."""
    out = []
    for tp, x in sorted(candidates):
        tid = ids.get(x[0])
        if tid not in described or tp not in described[tid]:
            out.append({"topic": tp[0], "partition": tp[1], "producer_id": x[0],
                        "producer_epoch": x[1], "coordinator_epoch": x[4], "start_offset": x[5],
                        "last_timestamp_ms": x[3], "duration_ms": now_ms - x[3],
                        "transactional_id": tid})
    return out


class Admin:
    def __init__(self, cluster):
        self.cluster = cluster
        self.store = cluster.store

    # -- topics ------------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     config: Mapping[str, object] | None = None, *, wait: bool = True,
                     timeout_s: float = 30.0) -> list[PartitionInfo]:
        plan = plan_topic(name, partitions, replication_factor, self.store.get_broker_ids(),
                          config=config)      # no broker defaults: -1 is not "the default" here
        self.store.create_topic(name, plan.assignment, plan.config)
        if wait:
            self.wait_for_leaders(name, timeout_s)
        return self.describe_topic(name)

    def delete_topic(self, name: str, *, wait: bool = True, timeout_s: float = 30.0) -> None:
        self.store.request_topic_deletion(name)
        if wait:
            wait_for(lambda: name not in self.store.get_topics()
                     and name not in self.store.get_topic_deletions(),
                     timeout_s, f"topic {name} to be deleted")

    # -- features -------------------------------------------------------------------------------
    def features(self) -> dict:
        """The cluster's features (ZooKeeper's /feature): {"supported": {name: (min, max)},
        "finalized": {name: level}, "epoch": its zkVersion}, what kafka-features describe
        shows."""
        from controller.features import SUPPORTED
        from controller.layout import DEFAULT_FEATURES
        levels, epoch = self.store.get_or_create_features(DEFAULT_FEATURES)
        return {"supported": dict(SUPPORTED), "finalized": levels, "epoch": epoch}

    def update_features(self, levels: Mapping[str, int], downgrade: str | None = None,
                        validate_only: bool = False) -> None:
        """Set finalized feature levels, all or none, by Kafka's rules (UpdateFeatures,
        controller/features.py): a lower level needs `downgrade` "safe" or "unsafe", level 0
        removes the feature; InvalidUpdateVersion (95) otherwise. Brokers follow /feature
        (a transaction.version change reaches producers that connect afterwards)."""
        from controller.features import SAFE_DOWNGRADE, UNSAFE_DOWNGRADE, UPGRADE
        kinds = {None: UPGRADE, "safe": SAFE_DOWNGRADE, "unsafe": UNSAFE_DOWNGRADE}
        if downgrade not in kinds:
            raise InvalidRequest(f"downgrade must be 'safe' or 'unsafe', not {downgrade!r}")
        error, message = self.store.update_features(
            [(name, int(level), kinds[downgrade]) for name, level in levels.items()],
            validate_only)
        if error:
            raise error_for_code(error, message or "")

    def list_topics(self) -> list[str]:
        return sorted(self.store.get_topics())

    def describe_topic(self, name: str) -> list[PartitionInfo]:
        assignment = self.store.get_topic_assignment(name)
        if assignment is None:
            raise UnknownTopicOrPartition(f"Topic '{name}' does not exist.")
        states = self.store.get_partition_states([name])
        out = []
        for p, replicas in sorted(assignment.partitions.items()):
            s = states.get((name, p))
            out.append(PartitionInfo(p, s.leader if s else -1, s.leader_epoch if s else -1,
                                     tuple(replicas), tuple(s.isr) if s else ()))
        return out

    def set_topic_config(self, name: str, config: Mapping[str, object]) -> None:
        self.store.set_topic_config(name, config)

    def topic_config(self, name: str) -> dict[str, str]:
        got = self.store.get_topic_config(name)
        if got is None and name not in self.store.get_topics():
            raise UnknownTopicOrPartition(f"Topic '{name}' does not exist.")
        return got or {}

    def group_config(self, group_id: str) -> dict[str, str]:
        """A group's configs (Kafka 4's group configs: consumer.session.timeout.ms,
        share.auto.offset.reset, ...): its own values over the broker's defaults."""
        return {k: v for k, (v, _source) in self._group_config(group_id, None).items()}

    def set_group_config(self, group_id: str, config: Mapping[str, object | None]) -> None:
        """Set (a value) or remove (None) a group's own configs, checked whole against the
        broker's bounds (InvalidConfig with Kafka's message otherwise)."""
        ops = [(k, 1, None) if v is None else (k, 0, str(v)) for k, v in config.items()]
        self._group_config(group_id, ops)

    def _group_config(self, group_id: str, ops) -> dict:
        brokers = self.cluster.broker_actors()
        if not brokers:
            raise error_for_code(E.BROKER_NOT_AVAILABLE, "no broker is running")
        got = ray.get(brokers[0].group_config.remote(group_id, ops), timeout=30)
        if isinstance(got, KafkaError):
            raise got
        return got

    def delete_records(self, offsets: Mapping[tuple, int], timeout_s: float = 30.0) -> dict:
        """Kafka's Admin.deleteRecords: {(topic, partition): offset, -1 = the HW} →
        {(topic, partition): the low watermark (the lowest log start of its live replicas,
        at or past the offset) | the typed error}. Each leader moves its log start and
        checkpoints it, then answers once every live follower's log start passed the offset
        too (they follow from their next fetch; RequestTimedOut if they did not within
        `timeout_s`). Leaders that move meanwhile are asked again until `timeout_s`."""
        left, out = {tuple(tp): int(o) for tp, o in offsets.items()}, {}
        deadline = time.monotonic() + timeout_s
        while left:
            by_leader: dict[int, list] = {}
            leaders: dict[str, dict[int, int]] = {}     # one ZooKeeper read per topic
            for tp in left:
                if tp[0] not in leaders:
                    try:
                        leaders[tp[0]] = {p.partition: p.leader for p in self.describe_topic(tp[0])}
                    except UnknownTopicOrPartition:
                        leaders[tp[0]] = {}
                leader = leaders[tp[0]].get(tp[1])
                if leader is None:
                    out[tp] = UnknownTopicOrPartition(f"{tp[0]}-{tp[1]} does not exist")
                else:
                    by_leader.setdefault(leader, []).append((tp, left[tp]))
            retry = {}
            for leader, asks in by_leader.items():
                actor = self.cluster.broker_actor(leader) if leader >= 0 else None
                left_s = max(0.0, deadline - time.monotonic())
                try:
                    answers = ray.get(actor.delete_records.remote(asks, int(left_s * 1000)),
                                      timeout=left_s + 30) \
                        if actor is not None else \
                        {tp: (E.LEADER_NOT_AVAILABLE, -1) for tp, _ in asks}
                except ray.exceptions.RayError:        # the leader is restarting
                    answers = {tp: (E.BROKER_NOT_AVAILABLE, -1) for tp, _ in asks}
                for tp, (error, low) in answers.items():
                    tp = tuple(tp)
                    exc = error_for_code(error, f"delete records of {tp[0]}-{tp[1]}") \
                        if error else None
                    # Retriable, and BROKER_NOT_AVAILABLE too (not retriable in Kafka): here
                    # it stands for a Ray call that failed while the leader restarts.
                    if exc is not None and (error in RETRIABLE or error == E.BROKER_NOT_AVAILABLE) \
                            and time.monotonic() < deadline:
                        retry[tp] = left[tp]
                    else:
                        out[tp] = exc if exc is not None else low
            left = retry
            if left:
                time.sleep(POLL_S * 5)          # poll interval while leadership moves
        return out

    # -- leadership ----------------------------------------------------------------------------------
    def controller(self) -> ControllerInfo:
        return ControllerInfo(self.store.get_controller(), self.store.get_controller_epoch()[0])

    def elect_preferred_leaders(self, topic: str | None = None) -> dict:
        """Preferred-replica election; per partition the new PartitionInfo or a KafkaError
        (ElectionNotNeeded when the preferred replica already leads)."""
        topics = [topic] if topic is not None else self.list_topics()
        partitions = []
        for t in topics:
            partitions += [(t, p.partition) for p in self.describe_topic(t)]
        controller = self.cluster.active_controller_actor()
        answers = ray.get(controller.elect_preferred_leaders.remote(partitions))
        if isinstance(answers, KafkaError):
            raise answers
        out = {}
        for tp, result in answers.items():
            tp = TopicPartition(*tp)
            out[tp] = result if isinstance(result, KafkaError) else PartitionInfo(
                tp.partition, result.leader, result.leader_epoch,
                tuple(self.store.get_topic_assignment(tp.topic).partitions[tp.partition]),
                tuple(result.isr))
        return out

    def elect_leaders(self, partitions: Sequence[tuple] | None = None, *,
                      unclean: bool = False) -> dict:
        """Kafka's ElectLeaders: a preferred (or unclean) election of `partitions` (None:
        every partition); per partition the new leader's id or a KafkaError
        (ElectionNotNeeded, PreferredLeaderNotAvailable, EligibleLeadersNotAvailable,
        UnknownTopicOrPartition)."""
        if partitions is None:
            partitions = [(t, p.partition) for t in self.list_topics()
                          for p in self.describe_topic(t)]
        controller = self.cluster.active_controller_actor()
        answers = ray.get(controller.elect_leaders.remote(
            [tuple(tp) for tp in partitions], 1 if unclean else 0))
        if isinstance(answers, KafkaError):
            raise answers
        return {TopicPartition(*tp): r if isinstance(r, KafkaError) else r.leader
                for tp, r in answers.items()}

    def list_reassignments(self, partitions: Sequence[tuple] | None = None) -> dict:
        """Kafka's ListPartitionReassignments: {tp: (replicas, adding, removing)} of the
        reassignments in progress."""
        controller = self.cluster.active_controller_actor()
        answers = ray.get(controller.list_partition_reassignments.remote(
            None if partitions is None else [tuple(tp) for tp in partitions]))
        if isinstance(answers, KafkaError):
            raise answers
        return {TopicPartition(*tp): r for tp, r in answers.items()}

    def alter_reassignments(self, targets: Mapping[tuple, Sequence[int] | None]) -> dict:
        """Kafka's AlterPartitionReassignments (KIP-455): {tp: target replicas, or None to
        cancel}; per partition None (started or cancelled) or a KafkaError
        (NoReassignmentInProgress, InvalidReplicaAssignment, UnknownTopicOrPartition). Does
        not wait for the move (list_reassignments shows it)."""
        controller = self.cluster.active_controller_actor()
        answers = ray.get(controller.alter_partition_reassignments.remote(
            {tuple(tp): None if r is None else list(r) for tp, r in targets.items()}))
        if isinstance(answers, KafkaError):
            raise answers
        return {TopicPartition(*tp): r for tp, r in answers.items()}

    def reassign_partitions(self, topic: str, targets: Mapping[int, Sequence[int]], *,
                            wait: bool = True, timeout_s: float = 60.0) -> list[PartitionInfo]:
        current = self.describe_topic(topic)
        live = self.store.get_broker_ids()
        known = {p.partition for p in current}
        for p, replicas in targets.items():
            if p not in known:
                raise UnknownTopicOrPartition(f"{topic}-{p} does not exist.")
            if not replicas or len(set(replicas)) != len(replicas) or set(replicas) - live:
                raise InvalidReplicaAssignment(
                    f"{topic}-{p}: target {list(replicas)} must be distinct live brokers {sorted(live)}")
        self.store.request_reassignment({(topic, p): list(r) for p, r in targets.items()})
        if wait:
            def done():
                if self.store.get_reassignment():
                    return False
                got = self.store.get_topic_assignment(topic)
                return all(tuple(got.partitions[p]) == tuple(r) for p, r in targets.items())
            wait_for(done, timeout_s, f"reassignment of {topic}")
            self.wait_for_leaders(topic, timeout_s)
        return self.describe_topic(topic)

    # -- consumer groups (Kafka's kafka-consumer-groups) ---------------------------------------------
    def list_groups(self) -> list[dict]:
        """Every group any coordinator knows: [{group, state, protocol_type, type}], sorted
        (type: "classic", or "consumer" for a KIP-848 group)."""
        from coordinator import messages as m
        out = {}
        for broker in self.cluster.broker_actors():
            try:
                result = ray.get(broker.group.remote(m.ListGroups(0)), timeout=30)
            except ray.exceptions.RayError:
                continue                 # a broker restarting: its groups moved or come back
            for g in result.groups:
                out[g.group_id] = {"group": g.group_id, "state": g.state,
                                   "protocol_type": g.protocol_type, "type": g.group_type}
        return [out[g] for g in sorted(out)]

    def describe_group(self, group_id: str) -> dict:
        """State, members (client, assignment) and, per partition, the committed offset, the
        end offset and the lag, as kafka-consumer-groups --describe shows them."""
        from coordinator import messages as m
        from rayka.client.consumer_protocol import decode_assignment
        from rayka.client.group import CoordinatorLink
        link = CoordinatorLink(self.cluster, group_id)
        described = link.call(m.DescribeGroups(0, (group_id,)), time.monotonic() + 60).groups[0]
        if described.error:
            raise error_for_code(described.error, f"describe group {group_id}")
        kind, members = "classic", []
        for x in described.members:
            parts = sorted(tuple(tp) for tp in decode_assignment(x.assignment).partitions) \
                if x.assignment else []
            members.append({"member_id": x.member_id, "client_id": x.client_id,
                            "instance_id": x.group_instance_id, "host": x.client_host,
                            "partitions": parts})
        if described.state == "Dead":          # not a classic group: a KIP-848 one?
            cg = link.call(m.ConsumerGroupDescribe(0, (group_id,)),
                           time.monotonic() + 60).groups[0]
            if cg.error == E.NONE:
                kind = "consumer"
                described = m.DescribedGroup(E.NONE, group_id, cg.state, "consumer",
                                             cg.assignor)
                members = [{"member_id": x.member_id, "client_id": x.client_id,
                            "instance_id": x.instance_id, "host": x.client_host,
                            "member_epoch": x.member_epoch,
                            "partitions": sorted((t, p) for t, ps in x.assignment.items()
                                                 for p in ps)} for x in cg.members]
        if described.state == "Dead":          # nor a consumer group: a share group?
            share = CoordinatorLink(self.cluster, group_id, method="share_describe").call(
                group_id, time.monotonic() + 60)
            if share.error == E.NONE:
                return self._share_group(share)
        fetched = link.call(m.OffsetFetch(0, group_id, None), time.monotonic() + 60)
        if fetched.error:
            raise error_for_code(fetched.error, f"offsets of group {group_id}")
        committed = {(p.topic, p.partition): p.offset for p in fetched.partitions if p.offset >= 0}
        owner = {tp: x["member_id"] for x in members for tp in x["partitions"]}
        ends = self._end_offsets(set(committed) | set(owner))
        partitions = [{"topic": tp[0], "partition": tp[1], "committed": committed.get(tp),
                       "end": ends.get(tp), "owner": owner.get(tp),
                       "lag": None if committed.get(tp) is None or ends.get(tp) is None
                       else max(0, ends[tp] - committed[tp])}
                      for tp in sorted(set(committed) | set(owner))]
        return {"group": group_id, "type": kind, "state": described.state,
                "protocol_type": described.protocol_type, "protocol": described.protocol,
                "members": members, "partitions": partitions}

    def _share_group(self, d) -> dict:
        """describe_group of a share group: its members, and per partition the members
        reading it (a share group's partitions may have several), its start offset (SPSO,
        in "committed"), end offset and lag (records not acknowledged yet)."""
        members = [{"member_id": x.member_id, "client_id": x.client_id, "instance_id": None,
                    "host": x.client_host, "member_epoch": x.member_epoch,
                    "partitions": sorted((t, p) for t, ps in x.assignment.items() for p in ps)}
                   for x in d.members]
        readers: dict = {}
        for x in members:
            for tp in x["partitions"]:
                readers.setdefault(tp, []).append(x["member_id"])
        offsets = {tuple(tp): o for tp, o in self.share_group_offsets(d.group_id).items()}
        tps = set(readers) | set(offsets)
        ends = self._end_offsets(tps)

        def known(tp, what: str):          # -1: never initialized, or unknown
            value = offsets.get(tp, {}).get(what, -1)
            return value if value >= 0 else None
        return {"group": d.group_id, "type": "share", "state": d.state,
                "protocol_type": "share", "protocol": d.assignor, "members": members,
                "partitions": [{"topic": tp[0], "partition": tp[1],
                                "committed": known(tp, "start_offset"), "end": ends.get(tp),
                                "owner": ",".join(sorted(readers.get(tp, ()))) or None,
                                "lag": known(tp, "lag")} for tp in sorted(tps)]}

    def _end_offsets(self, tps) -> dict:
        if not tps:
            return {}
        consumer = self.cluster.consumer()
        try:
            return consumer.end_offsets(sorted(tps))
        finally:
            consumer.close()

    def committed_offsets(self, group_id: str, topic: str | None = None) -> dict[tuple, int]:
        """{(topic, partition): committed offset} of a group (one topic or all)."""
        from coordinator import messages as m
        from rayka.client.group import CoordinatorLink
        fetched = CoordinatorLink(self.cluster, group_id).call(
            m.OffsetFetch(0, group_id, None), time.monotonic() + 60)
        if fetched.error:
            raise error_for_code(fetched.error, f"offsets of group {group_id}")
        return {(p.topic, p.partition): p.offset for p in fetched.partitions
                if p.offset >= 0 and not p.error and (topic is None or p.topic == topic)}

    def commit_offsets(self, group_id: str, offsets: dict) -> None:
        """Commit {tp: offset} as a simple group (no generation: Kafka's commits from outside
        group management); refused while the group has members."""
        from coordinator import messages as m
        from rayka.client.group import CoordinatorLink
        result = CoordinatorLink(self.cluster, group_id).call(m.OffsetCommit(0, group_id, tuple(
            m.CommitOffset(tp[0], tp[1], int(o)) for tp, o in sorted(offsets.items()))),
            time.monotonic() + 60)
        failed = [p for p in result.partitions if p.error]
        if failed:
            raise error_for_code(failed[0].error, f"commit offsets of group {group_id}")

    def delete_group(self, group_id: str) -> None:
        """Kafka's DeleteGroups: NonEmptyGroup while it has members, GroupIdNotFound."""
        from coordinator import messages as m
        from rayka.client.group import CoordinatorLink
        result = CoordinatorLink(self.cluster, group_id).call(
            m.DeleteGroups(0, (group_id,)), time.monotonic() + 60)
        if result.groups[0].error:
            raise error_for_code(result.groups[0].error, f"delete group {group_id}")

    def delete_offsets(self, group_id: str, partitions: Sequence[tuple]) -> dict:
        """Kafka's OffsetDelete: forget the group's committed offsets of `partitions`; per
        partition 0 or Kafka's error code (GROUP_SUBSCRIBED_TO_TOPIC while a member consumes
        the topic). GroupIdNotFound and other group errors raise."""
        from coordinator import messages as m
        from rayka.client.group import CoordinatorLink
        result = CoordinatorLink(self.cluster, group_id).call(
            m.OffsetDelete(0, group_id, tuple(tuple(tp) for tp in partitions)),
            time.monotonic() + 60)
        if result.error:
            raise error_for_code(result.error, f"delete offsets of group {group_id}")
        return {TopicPartition(t, p): code for t, p, code in result.partitions}

    def reset_offsets(self, group_id: str, topic: str, to: str | int,
                      partitions=None) -> dict[tuple, int]:
        """Commit new offsets for an INACTIVE group (kafka-consumer-groups --reset-offsets):
        `to` "earliest" | "latest" | an offset (clamped to [log start, end] as Kafka does).
        A share group gets those as its share-partitions' start offsets (kafka-share-groups
        --reset-offsets). NonEmptyGroup while members are active; returns {tp: new offset}."""
        from coordinator import messages as m
        from rayka.client.group import CoordinatorLink
        link = CoordinatorLink(self.cluster, group_id)
        described = link.call(m.DescribeGroups(0, (group_id,)), time.monotonic() + 60).groups[0]
        share = described.state == "Dead" and self.is_share_group(group_id)
        if described.state not in ("Empty", "Dead"):
            raise NonEmptyGroup(f"Assignments can only be reset if the group '{group_id}' is "
                                f"inactive, but the current state is {described.state}.")
        if not isinstance(to, int) and to not in ("earliest", "latest"):
            raise InvalidRequest(f"reset to {to!r}: earliest, latest or an offset")
        tps = [(topic, p.partition) for p in self.describe_topic(topic)
               if partitions is None or p.partition in partitions]
        consumer = self.cluster.consumer()
        try:
            bounds = consumer.offset_bounds(tps)
        finally:
            consumer.close()
        new = {tp: bounds[tp][0] if to == "earliest" else bounds[tp][1] if to == "latest"
               else min(max(int(to), bounds[tp][0]), bounds[tp][1]) for tp in tps}
        if share:                   # a share group: its share-partitions' start offsets
            failed = {tp: code for tp, code in self.alter_share_group_offsets(
                group_id, new).items() if code}
            if failed:
                tp, code = sorted(failed.items())[0]
                raise error_for_code(code, f"reset offsets of share group {group_id}: {tp}")
            return new
        result = link.call(m.OffsetCommit(0, group_id, tuple(
            m.CommitOffset(tp[0], tp[1], o) for tp, o in sorted(new.items()))),
            time.monotonic() + 60)
        failed = [p for p in result.partitions if p.error]
        if failed:
            raise error_for_code(failed[0].error, f"reset offsets of group {group_id}")
        return new

    # -- share groups' offsets (kafka-share-groups --describe / --reset-offsets / --delete-offsets)
    def _share_offsets(self, request):
        from rayka.client.group import CoordinatorLink
        answer = CoordinatorLink(self.cluster, request.group_id, method="share_offsets").call(
            request, time.monotonic() + 60)
        if answer.error:
            raise error_for_code(answer.error, answer.message or
                                 f"share-group offsets of {request.group_id}")
        return answer

    def share_group_offsets(self, group_id: str, topics: Sequence[str] | None = None) -> dict:
        """{TopicPartition: {"start_offset", "leader_epoch", "lag"}} of a share group: every
        partition it holds state for, or every partition of `topics` (-1 where it holds
        none). The start offset is the share-partition start offset (SPSO); the lag counts
        the records from there to the high watermark not yet acknowledged."""
        from share.offsets import DescribeOffsets
        asked = None if topics is None else {
            t: [p.partition for p in self.describe_topic(t)] for t in topics}
        answer = self._share_offsets(DescribeOffsets(group_id, asked))
        return {TopicPartition(t.topic, p.partition): {
                    "start_offset": p.start_offset, "leader_epoch": p.leader_epoch,
                    "lag": p.lag}
                for t in answer.topics for p in t.partitions}

    def alter_share_group_offsets(self, group_id: str, offsets: Mapping[tuple, int]) -> dict:
        """Set the start offsets of an EMPTY share group's share-partitions (Kafka's
        AlterShareGroupOffsets): {tp: 0 or Kafka's error code}; NonEmptyGroup while it has
        members, GroupIdNotFound for a classic or consumer group's id."""
        from share.offsets import AlterOffsets
        asked: dict[str, dict[int, int]] = {}
        for (t, p), o in offsets.items():
            asked.setdefault(t, {})[int(p)] = int(o)
        answer = self._share_offsets(AlterOffsets(group_id, asked))
        return {TopicPartition(t.topic, p.partition): p.error
                for t in answer.topics for p in t.partitions}

    def delete_share_group_offsets(self, group_id: str, topics: Sequence[str]) -> dict:
        """Forget an EMPTY share group's state on whole topics (DeleteShareGroupOffsets): the
        next member starts them at share.auto.offset.reset. {topic: 0 or error code}."""
        from share.offsets import DeleteOffsets
        answer = self._share_offsets(DeleteOffsets(group_id, tuple(topics)))
        return {o.topic: o.error for o in answer.outcomes}

    def is_share_group(self, group_id: str) -> bool:
        """Whether the id names a share group its coordinator knows (members or not)."""
        from rayka.client.group import CoordinatorLink
        share = CoordinatorLink(self.cluster, group_id, method="share_describe").call(
            group_id, time.monotonic() + 60)
        return share.error == E.NONE

    # -- security (Kafka's kafka-configs users and AdminClient ACL calls) -------------------------
    # -- transactions (Kafka's kafka-transactions.sh) ------------------------------------------
    def list_transactions(self, states: Sequence[str] = (), producer_ids: Sequence[int] = (),
                          duration_ms: int = -1) -> list[dict]:
        """Every transaction every coordinator holds, optionally filtered by state name
        ("Ongoing", "CompleteCommit", ...), producer id, or running longer than
        `duration_ms`: [{transactional_id, producer_id, state, coordinator}], sorted."""
        from transactions import messages as tm
        out = {}
        for broker_id in sorted(self.cluster.facts["brokers"]):
            actor = self.cluster.broker_actor(broker_id)
            if actor is None:
                continue
            try:
                r = ray.get(actor.txn.remote(tm.ListTransactions(
                    0, tuple(states), tuple(producer_ids), duration_ms)), timeout=30)
            except ray.exceptions.RayError:
                continue                 # a broker restarting: its coordinators move
            if r.unknown_state_filters:
                raise error_for_code(E.INVALID_REQUEST, "unknown transaction states "
                                     f"{list(r.unknown_state_filters)}")
            for t in r.transactions:
                out[t.transactional_id] = {"transactional_id": t.transactional_id,
                                           "producer_id": t.producer_id, "state": t.state,
                                           "coordinator": broker_id}
        return [out[t] for t in sorted(out)]

    def describe_transaction(self, transactional_id: str) -> dict:
        """The coordinator's view of one transactional id: state, producer id and epoch,
        timeout, start time, partitions (TRANSACTIONAL_ID_NOT_FOUND when unknown)."""
        from rayka.client.group import CoordinatorLink
        from transactions import messages as tm
        link = CoordinatorLink(self.cluster, transactional_id, key_type=1, method="txn")
        d = link.call(tm.DescribeTransactions(0, (transactional_id,)),
                      time.monotonic() + 60).transactions[0]
        if d.error:
            raise error_for_code(d.error, f"describe transaction {transactional_id}")
        return {"transactional_id": d.transactional_id, "state": d.state,
                "producer_id": d.producer_id, "producer_epoch": d.producer_epoch,
                "transaction_timeout_ms": d.transaction_timeout_ms,
                "transaction_start_time_ms": d.transaction_start_time_ms,
                "partitions": [list(tp) for tp in d.partitions]}

    def describe_producers(self, topic: str, partition: int) -> list[dict]:
        """The active producers of a partition, from its leader (KIP-664): producer id,
        epoch, last sequence, coordinator epoch, the open transaction's first offset (-1:
        none)."""
        tp = (topic, partition)
        leader = self._leader_actor(tp)
        error, producers = ray.get(leader.describe_producers.remote([tp]), timeout=30)[tp]
        if error:
            raise error_for_code(error, f"describe producers of {topic}-{partition}")
        return [{"producer_id": p[0], "producer_epoch": p[1], "last_sequence": p[2],
                 "coordinator_epoch": p[4], "current_transaction_start_offset": p[5]}
                for p in producers]

    def find_hanging_transactions(self, topics: Sequence[str] | None = None,
                                  max_transaction_timeout_ms: int = 15 * 60 * 1000,
                                  now_ms: int | None = None) -> list[dict]:
        """kafka-transactions.sh find-hanging (TransactionsCommand.java): the open
        transactions on `topics`' partitions (all topics when None), asked of each leader
        (one call per broker), whose producer wrote last more than
        `max_transaction_timeout_ms` ago and whose coordinator will not finish them: no
        transactional id holds that producer id, or it does not list the partition.
        [{topic, partition, producer_id, producer_epoch, coordinator_epoch, start_offset,
        last_timestamp_ms, duration_ms, transactional_id}]; each is what `abort` takes."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        if topics is not None:
            missing = sorted(set(topics) - self.store.get_topics())
            if missing:
                raise UnknownTopicOrPartition(f"Topic '{missing[0]}' does not exist.")
        by_leader: dict[int, list] = {}
        # every partition's leader in one pipelined ZooKeeper round, not one per topic
        for tp, state in sorted(self.store.get_partition_states(topics).items()):
            if state.leader >= 0:
                by_leader.setdefault(state.leader, []).append(tuple(tp))
        refs = {b: a.describe_producers.remote(tps) for b, tps in by_leader.items()
                if (a := self.cluster.broker_actor(b)) is not None}
        candidates = []
        for b, ref in refs.items():
            for tp, (error, producers) in ray.get(ref, timeout=60).items():
                if error:
                    raise error_for_code(error, f"describe producers of {tp[0]}-{tp[1]}")
                candidates += [(tuple(tp), x) for x in producers
                               if x[5] >= 0 and now_ms - x[3] > max_transaction_timeout_ms]
        if not candidates:
            return []
        ids = {t["producer_id"]: t["transactional_id"] for t in self.list_transactions(
            producer_ids=sorted({x[0] for _, x in candidates}))}
        described = {}
        for tid in set(ids.values()):
            try:
                described[tid] = {tuple(tp) for tp in self.describe_transaction(tid)["partitions"]}
            except KafkaError:             # gone meanwhile: nothing will finish it
                pass
        return hanging_among(candidates, ids, described, now_ms)

    def abort_transaction(self, topic: str, partition: int, start_offset: int) -> dict:
        """Abort a HANGING transaction (one its coordinator no longer finishes) on one
        partition: the producer whose open transaction starts at `start_offset` gets an
        ABORT marker from the leader (kafka-transactions.sh abort). Raises
        InvalidTxnState when no open transaction starts there."""
        tp = (topic, partition)
        hanging = [p for p in self.describe_producers(topic, partition)
                   if p["current_transaction_start_offset"] == start_offset]
        if not hanging:
            raise error_for_code(E.INVALID_TXN_STATE, f"no open transaction of {topic}-"
                                 f"{partition} starts at offset {start_offset}")
        p = hanging[0]
        leader = self._leader_actor(tp)
        errors = ray.get(leader.write_txn_markers.remote(
            [(p["producer_id"], p["producer_epoch"], False, p["coordinator_epoch"], [tp])],
            30_000), timeout=60)[0]
        if errors[tp]:
            raise error_for_code(errors[tp], f"abort the transaction of producer "
                                 f"{p['producer_id']} on {topic}-{partition}")
        return {"topic": topic, "partition": partition, "producer_id": p["producer_id"],
                "producer_epoch": p["producer_epoch"], "start_offset": start_offset}

    def _leader_actor(self, tp):
        info = self.describe_topic(tp[0])
        leader = info[tp[1]].leader if tp[1] < len(info) else -1
        actor = self.cluster.broker_actor(leader) if leader >= 0 else None
        if actor is None:
            raise error_for_code(E.LEADER_NOT_AVAILABLE, f"{tp[0]}-{tp[1]} has no leader")
        return actor

    def add_user(self, user: str, password: str, mechanisms: Sequence[str] | None = None,
                 iterations: int = 4096) -> None:
        """Set SCRAM credentials (both SCRAM-SHA-256 and -512 unless `mechanisms`); every
        broker picks them up from the change notification."""
        from protocol.security.credentials import MECHANISMS
        try:
            security.add_user(self.store, user, password, tuple(mechanisms or MECHANISMS),
                              iterations)
        except ValueError as exc:
            raise InvalidConfig(str(exc)) from None

    def delete_user(self, user: str) -> bool:
        try:
            return security.delete_user(self.store, user)
        except ValueError as exc:
            raise InvalidConfig(str(exc)) from None

    def list_users(self) -> dict[str, tuple[str, ...]]:
        return security.list_users(self.store)

    def create_acls(self, bindings) -> list[tuple[int, str | None]]:
        """Per binding (protocol.security.acl.AclBinding): (0, None) or (error, message);
        an invalid binding is INVALID_REQUEST and nothing of it is written."""
        from protocol.security.acl import validate_binding
        problems = [validate_binding(b) for b in bindings]
        ok = [b for b, p in zip(bindings, problems) if p is None]
        written = iter(security.create_acls(self.store, ok) if ok else ())
        return [p if p is not None else next(written) for p in problems]

    def delete_acls(self, filters) -> list[tuple[int, str | None, tuple]]:
        return security.delete_acls(self.store, filters)

    def list_acls(self, flt=None) -> list:
        return security.list_acls(self.store, flt)

    # -- client quotas (Kafka's /config/users, /config/clients) ---------------------------------
    def alter_client_quotas(self, user=None, client_id=None, set: Mapping[str, float] | None = None,
                            remove: Sequence[str] = (), validate_only: bool = False) -> None:
        """kafka-configs --alter --entity-type users|clients: set and remove quota keys
        (producer_byte_rate, consumer_byte_rate, request_percentage,
        controller_mutation_rate) of the entity named by `user` and/or `client_id`
        (protocol.quotas.DEFAULT for the default entity). InvalidRequest for what Kafka
        refuses; every broker applies it from the change notification."""
        from actors.config_store import rewrite_entity, set_or_delete
        from protocol.entity_config import entity_path, quota_value
        from protocol.quotas import QuotaEntity
        if user is None and client_id is None:
            raise InvalidRequest("a quota entity needs a user or a client id")
        for part in (user, client_id):
            if part == "":
                raise InvalidRequest("an empty user or client id is not a quota entity")
        try:
            ops = [(k, quota_value(k, float(v))) for k, v in (set or {}).items()] + \
                  [(k, None) for k in remove]
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from None

        if not validate_only:
            rewrite_entity(self.store, entity_path(QuotaEntity(user, client_id)),
                           set_or_delete(ops))

    def describe_client_quotas(self, user=None, client_id=None, strict: bool = False) -> list:
        """DescribeClientQuotas's rules: `user` / `client_id` each None (no filter), a name,
        protocol.quotas.DEFAULT, or "*" (any); [(QuotaEntity, {key: value})]."""
        from actors.config_store import read_quotas
        from protocol.handlers.quotas import ANY_NAME, filter_quotas
        components = {k: (ANY_NAME if v == "*" else v) for k, v in
                      (("user", user), ("client-id", client_id)) if v is not None}
        return filter_quotas(read_quotas(self.store), components, strict)

    # -- visibility ----------------------------------------------------------------------------------
    def wait_for_leaders(self, topic: str, timeout_s: float) -> None:
        """Every partition led by a live broker, and every live broker's metadata agrees."""
        def visible():
            live = self.store.get_broker_ids()
            infos = self.describe_topic(topic)
            if not all(p.leader in live for p in infos):
                return False
            want = {(topic, p.partition): (p.leader, p.leader_epoch) for p in infos}
            for broker in self.cluster.broker_actors(live):
                try:
                    seen = ray.get(broker.metadata_leaders.remote([topic]), timeout=5)
                except Exception:
                    return False
                if {tuple(k): tuple(v) for k, v in seen.items()} != want:
                    return False
            return True
        wait_for(visible, timeout_s, f"leaders of {topic} in broker metadata")
