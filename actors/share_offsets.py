"""Share-group offsets on the group's coordinator: DescribeShareGroupOffsets (90),
AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92), and the states a deleted share
group leaves behind (share/offsets.py decides; this shell asks the other brokers).

Rules:
- They answer on the group's coordinator only (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS
  as the group calls); an id a classic or consumer group holds is GROUP_ID_NOT_FOUND
  "Group <g> is not a share group.".
- Describe reads what the share coordinators stored (share.coordinator.ReadSummary, one call
  per broker leading `__share_group_state` partitions: nothing fenced, nothing written) and
  the high watermarks from the partitions' leaders (ListOffsets latest).
- Alter and Delete need an empty group (NON_EMPTY_GROUP "The group is not empty."): a group
  this coordinator knows no members of counts as empty (share-group membership is not
  persisted, so an empty group and one unknown here look alike; Kafka answers
  GROUP_ID_NOT_FOUND for the second). Each partition's change is made by its leader
  (ShareHost.reset_offsets through BrokerActor.share_offsets_reset): a share-partition it
  holds in memory restarts there and the write is fenced like its own; a partition without
  a leader is LEADER_NOT_AVAILABLE.
- Deleting a share group (DeleteGroups) deletes its states the same way, after the group
  went; a failure there is logged (the states stay, as after a coordinator crash).
- A share coordinator that cannot answer yet (COORDINATOR_NOT_AVAILABLE,
  COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR: `__share_group_state` just created, its
  leaders being elected or loading) or a partition without a leader yet is asked again
  with a growing back-off (0.1 s doubling to 1 s) for up to RETRY_S, as Kafka's persister
  (PersisterStateManager) retries those errors; then the error is the answer.
- The work runs on a thread of its own, never the share worker thread: it waits on other
  brokers, whose share worker threads it asks (a worker waiting on another broker's worker
  could wait on itself).
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from replicas.errors import ErrorCode as E
from share import coordinator as sc
from share import offsets as so
from share.records import ShareKey

log = logging.getLogger(__name__)
NOT_SHARE = "Group {} is not a share group."
RETRY_S = 15.0
RETRIABLE = frozenset({E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS,
                       E.NOT_COORDINATOR, E.LEADER_NOT_AVAILABLE})
NOT_EMPTY = "The group is not empty."


class ShareOffsets:
    def __init__(self, shares):
        self.shares, self.broker = shares, shares.broker
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="share-admin")

    def call(self, request):
        """A share.offsets request (DescribeOffsets, AlterOffsets, DeleteOffsets): a Deferred
        of its share.offsets.OffsetsAnswer."""
        return self.shares.in_pool(self._call_now, request, pool=self._pool)

    def _call_now(self, request) -> so.OffsetsAnswer:
        run = {so.DescribeOffsets: self._describe_now, so.AlterOffsets: self._alter_now,
               so.DeleteOffsets: self._delete_now}[type(request)]
        refused = self._refused(request.group_id,
                                writes=not isinstance(request, so.DescribeOffsets))
        return refused or run(request, self.broker.kafka_api.topic_partition_counts())

    def forget_group(self, group_id: str) -> None:
        """A deleted share group's states go too (DeleteGroups)."""
        def run():
            try:
                topics = self.broker.kafka_api.topic_partition_counts()
                stored = self._stored(group_id, None, topics)
                if isinstance(stored, dict) and stored:
                    self._on_leaders(group_id, {tp: None for tp in stored})
            except Exception:
                log.exception("share group %s: its states were not deleted", group_id)
        self._pool.submit(run)

    def stop(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- on the admin thread ----------------------------------------------------------------------
    def _refused(self, group_id: str, writes: bool) -> so.OffsetsAnswer | None:
        status, taken = self.broker.groups.status(group_id)
        if status is not None:
            return so.OffsetsAnswer(status)
        if taken:
            return so.OffsetsAnswer(E.GROUP_ID_NOT_FOUND, NOT_SHARE.format(group_id))
        if writes and self.shares.has_members(group_id):
            return so.OffsetsAnswer(E.NON_EMPTY_GROUP, NOT_EMPTY)
        return None

    def _describe_now(self, r: so.DescribeOffsets, topics: dict) -> so.OffsetsAnswer:
        group_id, asked = r.group_id, r.topics
        keys = None if asked is None else [(t, p) for t, ps in asked.items() if t in topics
                                           for p in ps]
        stored = self._stored(group_id, keys, topics)
        if not isinstance(stored, dict):
            return so.OffsetsAnswer(stored)
        hwms = self._high_watermarks(list(stored))
        return so.OffsetsAnswer(topics=so.describe(asked, topics, stored, hwms))

    def _alter_now(self, r: so.AlterOffsets, topics: dict) -> so.OffsetsAnswer:
        group_id, asked = r.group_id, r.offsets
        targets, errors = so.plan_alter(asked, topics)
        errors.update(self._on_leaders(group_id, targets))
        return so.OffsetsAnswer(topics=tuple(
            so.TopicOffsets(t, topics[t][0] if t in topics else None, tuple(
                so.PartitionOffset(p, error=errors.get((t, p), E.NONE),
                                   message=so.MESSAGES.get(errors.get((t, p))))
                for p in parts))
            for t, parts in asked.items()))

    def _delete_now(self, r: so.DeleteOffsets, topics: dict) -> so.OffsetsAnswer:
        group_id, asked = r.group_id, r.topics
        stored = self._stored(group_id, [(t, p) for t in asked if t in topics
                                         for p in range(topics[t][1])], topics)
        if not isinstance(stored, dict):
            return so.OffsetsAnswer(stored)
        targets, refused_topics = so.plan_delete(asked, topics, {t for t, _p in stored})
        errors = self._on_leaders(group_id, {tp: None for tp in targets})
        failed = {tp[0]: code for tp, code in errors.items()}
        refused_by = {o.topic: o for o in refused_topics}
        return so.OffsetsAnswer(outcomes=tuple(
            refused_by.get(t) or so.TopicOutcome(t, topics[t][0], failed.get(t, E.NONE))
            for t in asked))

    # -- helpers ------------------------------------------------------------------------------------
    def _backoffs(self):
        """The waits between attempts until RETRY_S has passed (module rules)."""
        deadline, wait = time.monotonic() + RETRY_S, 0.1
        while time.monotonic() + wait < deadline and not self.broker.stopped.is_set():
            yield wait
            wait = min(wait * 2, 1.0)

    def _stored(self, group_id: str, keys, topics: dict) -> dict | int:
        """{(topic, partition): ShareState} the share coordinators hold for the group (of
        `keys` [(topic, partition)], or all), topics named from `topics` {name: (id,
        partition count)}; an error code when one cannot answer."""
        got = self._stored_once(group_id, keys, topics)
        for wait in self._backoffs():
            if not (isinstance(got, int) and got in RETRIABLE):
                break
            self.broker.stopped.wait(wait)
            got = self._stored_once(group_id, keys, topics)
        return got

    def _stored_once(self, group_id: str, keys, topics: dict) -> dict | int:
        host = self.broker.share_states
        ids = {t: i for t, (i, _n) in topics.items()}
        names = {i: t for t, i in ids.items()}
        if not host.ensure_topic():
            return {}
        asks: dict[int, list | None] = {}
        if keys is None:
            for p in range(host.partitions):
                asks[self.shares.state_leader(p)] = None
        else:
            for t, p in keys:
                if t in ids:
                    k = ShareKey(group_id, ids[t], p)
                    asks.setdefault(self.shares.state_leader(host.partition_for(k)),
                                    []).append(k)
        out = {}
        for leader, ks in asks.items():
            if leader < 0:
                return E.COORDINATOR_NOT_AVAILABLE
            event = sc.ReadSummary(0, group_id, None if ks is None else tuple(ks))
            answer = self.shares.state_call_at(leader,
                                               lambda rid: replace(event, request_id=rid))
            if answer.error:
                return answer.error
            out.update({(names[k.topic_id], k.partition): s for k, s in answer.summaries
                        if k.topic_id in names})
        return out

    def _leaders(self, tps) -> dict[int, list]:
        by: dict[int, list] = {}
        with self.broker.lock:
            md = self.broker.rm.metadata.partitions
            for tp in tps:
                part = md.get(tuple(tp))
                by.setdefault(part.leader if part is not None else -1, []).append(tuple(tp))
        return by

    def _high_watermarks(self, tps) -> dict:
        out = {}
        for leader, mine in self._leaders(tps).items():
            if leader < 0:
                continue
            asks = [(tp, -1, -1) for tp in mine]
            try:
                got = (self.broker.kafka_api.list_offsets(0, asks) if leader == self.broker.id
                       else self.broker.host.call_broker(leader, "list_offsets", asks))
            except Exception as exc:
                log.info("high watermarks from broker %s: %s", leader, exc)
                continue
            out.update({tuple(tp): a.offset for tp, a in got.items() if not a.error})
        return out

    def _on_leaders(self, group_id: str, targets: dict) -> dict:
        """Each partition's new SPSO (None: its state deleted), set by its leader: {tp:
        error} of those that failed."""
        errors = self._on_leaders_once(group_id, targets)
        for wait in self._backoffs():
            again = {tp: targets[tp] for tp, code in errors.items() if code in RETRIABLE}
            if not again:
                break
            self.broker.stopped.wait(wait)
            errors.update({tp: E.NONE for tp in again})
            errors.update(self._on_leaders_once(group_id, again))
        return {tp: code for tp, code in errors.items() if code}

    def _on_leaders_once(self, group_id: str, targets: dict) -> dict:
        errors = {}
        for leader, mine in self._leaders(targets).items():
            asks = {tp: targets[tp] for tp in mine}
            if leader < 0:
                errors.update({tp: E.LEADER_NOT_AVAILABLE for tp in mine})
                continue
            try:
                got = (self.shares.reset_offsets(group_id, asks).result()
                       if leader == self.broker.id else
                       self.broker.host.call_broker(leader, "share_offsets_reset", group_id,
                                                    asks))
            except Exception as exc:
                log.info("share offsets of %s via broker %s: %s", group_id, leader, exc)
                got = {tp: E.COORDINATOR_NOT_AVAILABLE for tp in mine}
            errors.update({tuple(tp): code for tp, code in got.items() if code})
        return errors
