"""Source: what the console knows of a cluster, gathered in one sweep and kept as a Snapshot.

Rules:
- Every read goes through `rayka/` (Cluster, Admin) and Ray's own state (ray.nodes()); the
  console never reaches a broker's internals another way.
- One sweep costs a fixed number of calls whatever the partition count: the partition
  states from ONE live broker's metadata cache (what a Kafka client's Metadata request
  answers), one partition_stats, kafka_stats and topic_io call per live broker, log dirs per
  broker (their partition counts, not lists), the controller's info, Ray's node table, the group list and one offset fetch per
  group. Pages render from the last Snapshot; only a detail page asks for more (a topic's
  configs, a group's members, a transaction), and only when opened.
- A part that fails (a broker restarting, no controller during an election) is recorded in
  `snapshot.errors` with Kafka's error name and the sweep goes on: the console shows what
  it could read and says what it could not.
- With a principal (console/principal.py), a sweep keeps only the topics and groups that
  principal may describe, and a page asking for another is refused with Kafka's error.
- A partition is under-replicated when its ISR is smaller than its replicas and offline when
  it has no live leader (Kafka's UnderReplicatedPartitions and OfflinePartitionsCount).
"""

from __future__ import annotations

import dataclasses
import time

import ray

from console.principal import Visibility
from rayka.errors import KafkaError


def error_text(exc: BaseException) -> str:
    """Kafka's name and code for a typed error ("UNKNOWN_TOPIC_OR_PARTITION (3): ..."), the
    exception's class otherwise."""
    if isinstance(exc, KafkaError):
        return str(exc)                   # KafkaError.__str__ is Kafka's form
    return f"{type(exc).__name__}: {exc}"


@dataclasses.dataclass
class PartitionView:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple
    isr: tuple
    log_start: int | None = None
    log_end: int | None = None
    high_watermark: int | None = None
    size_bytes: int | None = None

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclasses.dataclass
class Snapshot:
    time_s: float = 0.0
    took_s: float = 0.0
    nodes: list = dataclasses.field(default_factory=list)         # Ray nodes
    brokers: list = dataclasses.field(default_factory=list)       # broker dicts
    controller: dict = dataclasses.field(default_factory=dict)
    controllers: list = dataclasses.field(default_factory=list)   # every candidate
    zookeeper: dict = dataclasses.field(default_factory=dict)
    partitions: dict = dataclasses.field(default_factory=dict)    # (topic, p) -> PartitionView
    log_dirs: dict = dataclasses.field(default_factory=dict)      # broker -> [dir dicts]
    broker_io: dict = dataclasses.field(default_factory=dict)     # broker -> counters
    topic_io: dict = dataclasses.field(default_factory=dict)      # topic -> [bytes in, out]
    groups: list = dataclasses.field(default_factory=list)
    committed: dict = dataclasses.field(default_factory=dict)     # group -> {tp: offset}
    errors: list = dataclasses.field(default_factory=list)
    principal: str | None = None          # the console's principal when it has credentials
    hidden_topics: int = 0                # topics and groups that principal may not describe
    hidden_groups: int = 0

    def topics(self) -> dict[str, list[PartitionView]]:
        out: dict[str, list[PartitionView]] = {}
        for tp in sorted(self.partitions):
            out.setdefault(tp[0], []).append(self.partitions[tp])
        return out

    def live_broker_ids(self) -> set[int]:
        return {b["id"] for b in self.brokers if b["alive"]}

    def offline(self) -> list[PartitionView]:
        live = self.live_broker_ids()
        return [p for p in self.partitions.values() if p.leader < 0 or p.leader not in live]

    def under_replicated(self) -> list[PartitionView]:
        return [p for p in self.partitions.values() if p.under_replicated]

    def lag(self, group: str) -> dict:
        """(topic, partition) → committed offset, high watermark and lag of `group`."""
        out = {}
        for tp, offset in sorted(self.committed.get(group, {}).items()):
            p = self.partitions.get(tp)
            hw = p.high_watermark if p is not None else None
            out[tp] = {"committed": offset, "end": hw,
                       "lag": None if hw is None else max(0, hw - offset)}
        return out


class Source:
    def __init__(self, cluster, call_timeout_s: float = 10.0, principal=None):
        self.cluster = cluster
        self.admin = cluster.admin()
        self.call_timeout_s = call_timeout_s
        self.principal = principal      # console/principal.py's PrincipalView, or None
        self.access = Visibility()      # what the pages may show (all without a principal)

    def sweep(self) -> Snapshot:
        snap = Snapshot(time_s=time.time())
        t0 = time.monotonic()
        for part in (self._brokers, self._nodes, self._controller, self._partitions,
                     self._log_dirs, self._broker_io, self._groups):
            try:
                part(snap)
            except Exception as exc:       # one part's failure must not blank the others
                snap.errors.append(f"{part.__name__.strip('_')}: {error_text(exc)}")
        if self.principal is not None:
            self._only_visible(snap)
        snap.took_s = time.monotonic() - t0
        return snap

    def _only_visible(self, snap: Snapshot) -> None:
        """Leave out what the console's principal may not describe (console/principal.py);
        when Kafka cannot be asked, leave out everything."""
        snap.principal = self.principal.name
        try:
            topics, groups = self.principal.visible()
        except Exception as exc:
            snap.errors.append(f"principal {self.principal.name}: {error_text(exc)}")
            topics, groups = set(), set()
        self.access.visible = (topics, groups)
        all_topics = {tp[0] for tp in snap.partitions}
        snap.hidden_topics = len(all_topics - topics)
        snap.partitions = {tp: p for tp, p in snap.partitions.items() if tp[0] in topics}
        snap.hidden_groups = sum(g["group"] not in groups for g in snap.groups)
        snap.groups = [g for g in snap.groups if g["group"] in groups]
        snap.committed = {g: {tp: o for tp, o in offsets.items() if tp[0] in topics}
                          for g, offsets in snap.committed.items() if g in groups}
        snap.topic_io = {t: io for t, io in snap.topic_io.items() if t in topics}

    # -- parts of a sweep --------------------------------------------------------------------
    def _brokers(self, snap: Snapshot) -> None:
        regs = self.cluster.store.get_brokers()
        for b in self.cluster.brokers():
            reg = regs.get(b.id)
            snap.brokers.append({"id": b.id, "alive": b.alive, "node_id": b.node_id,
                                 "endpoints": list(b.endpoints),
                                 "rack": getattr(reg, "rack", None) if reg else None,
                                 "epoch": getattr(reg, "epoch", None) if reg else None,
                                 "host": getattr(reg, "host", None) if reg else None})

    def _nodes(self, snap: Snapshot) -> None:
        for n in ray.nodes():
            snap.nodes.append({"node_id": n["NodeID"], "address": n.get("NodeManagerAddress"),
                               "alive": bool(n.get("Alive")),
                               "hostname": n.get("NodeManagerHostname"),
                               "resources": {k: v for k, v in n.get("Resources", {}).items()
                                             if not k.startswith("node:")}})

    def _controller(self, snap: Snapshot) -> None:
        info = self.cluster.controller()
        snap.controller = {"id": info.id, "epoch": info.epoch}
        snap.zookeeper = {"connect": self.cluster.facts.get("zookeeper"),
                          "chroot": f"/rayka/{self.cluster.name}"}
        refs = {c: self.cluster.controller_actor(c) for c in self.cluster.facts["controllers"]}
        asks = {c: (a.info.remote(), a.node_id.remote()) for c, a in refs.items() if a is not None}
        for c, (info_ref, node_ref) in sorted(asks.items()):
            try:
                got = ray.get(info_ref, timeout=self.call_timeout_s)
                node = ray.get(node_ref, timeout=self.call_timeout_s)
                snap.controllers.append({**got, "node_id": node})
            except ray.exceptions.RayError as exc:
                snap.controllers.append({"id": c, "active": False, "error": type(exc).__name__})

    def _partitions(self, snap: Snapshot) -> None:
        live = sorted(snap.live_broker_ids())
        metadata = None
        for b in live:                    # the first live broker that answers
            actor = self.cluster.broker_actor(b)
            try:
                metadata = ray.get(actor.metadata.remote(), timeout=self.call_timeout_s)
                break
            except (ray.exceptions.RayError, AttributeError):
                continue
        if metadata is None:
            snap.errors.append("partitions: no live broker answered its metadata")
            return
        for tp, (leader, epoch, replicas, isr) in metadata["partitions"].items():
            tp = (tp[0], tp[1])
            snap.partitions[tp] = PartitionView(tp[0], tp[1], leader, epoch, tuple(replicas),
                                                tuple(isr))
        for broker_id, stats in self.cluster.partition_stats(self.call_timeout_s).items():
            for tp, (role, start, end, hw, size) in stats.items():
                p = snap.partitions.get((tp[0], tp[1]))
                if p is not None and role == "leader" and p.leader == broker_id:
                    p.log_start, p.log_end, p.high_watermark, p.size_bytes = start, end, hw, size

    def _log_dirs(self, snap: Snapshot) -> None:
        snap.log_dirs = self.cluster.log_dirs(self.call_timeout_s, with_partitions=False)

    def _broker_io(self, snap: Snapshot) -> None:
        """Per live broker: requests, bytes in and out over every listener and API; per
        topic: bytes in from producers and out to consumers, summed over the brokers."""
        answers = self.cluster.kafka_stats(self.call_timeout_s)
        for b, per_listener in answers.items():
            req = bin_ = bout = produce = fetch = 0
            for apis in per_listener.values():
                for api, s in apis.items():
                    req += s["requests"]
                    bin_ += s["bytes_in"]
                    bout += s["bytes_out"]
                    if api == "Produce":
                        produce += s["requests"]
                    elif api == "Fetch":
                        fetch += s["requests"]
            snap.broker_io[b] = {"requests": req, "bytes_in": bin_, "bytes_out": bout,
                                 "produce_requests": produce, "fetch_requests": fetch}
        for per_topic in self.cluster.topic_io(self.call_timeout_s).values():
            for topic, (bytes_in, bytes_out) in per_topic.items():
                io = snap.topic_io.setdefault(topic, [0, 0])
                io[0] += bytes_in
                io[1] += bytes_out

    def _groups(self, snap: Snapshot) -> None:
        snap.groups = self.admin.list_groups()
        for g in snap.groups:
            try:
                if g["type"] == "share":      # a share group's position is its start offset
                    got = {tp: o["start_offset"] for tp, o in
                           self.admin.share_group_offsets(g["group"]).items()
                           if o.get("start_offset", -1) >= 0}
                else:
                    got = self.admin.committed_offsets(g["group"])
                snap.committed[g["group"]] = {(tp[0], tp[1]): o for tp, o in got.items()}
            except Exception as exc:
                snap.errors.append(f"group {g['group']}: {error_text(exc)}")
