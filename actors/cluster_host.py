"""ClusterHost: the detached actor that remembers how a named rayka cluster is set up and,
for the embedded default, owns its ZooKeeper server.

Rules:
- One per cluster, named `rayka-cluster` in the namespace `rayka-<cluster>`; any driver
  finds the cluster through it (`rayka.connect(name)`).
- If no ZooKeeper connect string is given it starts the real ZooKeeper server (Debian's,
  through controller.zookeeper.server) inside its own process, on loopback, and stops it by pid on
  `stop_zookeeper()`; a given ensemble is only recorded. A launch failure is raised by
  `info()` (start_local removes the host and re-raises it to the driver).
- It holds plain facts (connect string, data dir, broker and controller ids, config);
  nothing about leadership, which lives in ZooKeeper.
- It also keeps the last MAX_PIPELINE_READS Spark reads' plans and task reports
  (PipelineReads), forwarded by pipeline/tasklog.py as they come, so that what a read did
  outlives its driver (the console's Pipelines page); in memory only, bounded, oldest read
  dropped first, at most MAX_REPORTS_PER_READ reports kept per read (the rest counted).
"""

from __future__ import annotations

import collections
import os
import warnings

import ray

HOST_NAME = "rayka-cluster"
MAX_PIPELINE_READS = 100
MAX_REPORTS_PER_READ = 1000


def normal_priority() -> None:
    """Ray starts workers at nice 15 (background work); brokers and controllers are servers
    whose latency every client waits on (measured: librdkafka's producer threads at nice 0
    starved nice-15 brokers, acks=all p50 152 ms → 11 ms at 1,000 rec/s once they were
    equal), so they ask for the normal priority back. Lowering a nice value needs
    CAP_SYS_NICE: without it the actor keeps Ray's."""
    try:
        if os.getpriority(os.PRIO_PROCESS, 0) > 0:
            os.setpriority(os.PRIO_PROCESS, 0, 0)
    except OSError:
        pass


def was_restarted() -> bool:
    """Is this actor a Ray restart of an earlier incarnation? (Ray 2.60's own property reads a
    deprecated field and warns in every actor log; the answer is what matters.)"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return bool(ray.get_runtime_context().was_current_actor_reconstructed)


def namespace_for(cluster: str) -> str:
    return f"rayka-{cluster}"


def broker_actor_name(broker_id: int) -> str:
    return f"broker-{broker_id}"


def controller_actor_name(controller_id: int) -> str:
    return f"controller-{controller_id}"


class PipelineReads:
    """The last `max_reads` Spark reads, each a dict of its plan's fields and its task
    reports, merged from summaries in any order (see `record`)."""

    def __init__(self, max_reads: int = MAX_PIPELINE_READS,
                 max_reports: int = MAX_REPORTS_PER_READ):
        self.max_reads, self.max_reports = max_reads, max_reports
        self.reads: collections.OrderedDict[str, dict] = collections.OrderedDict()

    def record(self, read_id: str, summary: dict) -> None:
        """Merge `summary` into the read: its "reports" are appended (past `max_reports`
        only counted in "reports_dropped"), every other field replaces the kept one. A new
        read past `max_reads` drops the oldest."""
        read = self.reads.get(read_id)
        if read is None:
            read = self.reads[read_id] = {"read_id": read_id, "reports": [],
                                          "reports_dropped": 0}
            while len(self.reads) > self.max_reads:
                self.reads.popitem(last=False)
        for key, value in summary.items():
            if key == "reports":
                room = max(0, self.max_reports - len(read["reports"]))
                read["reports"].extend(value[:room])
                read["reports_dropped"] += max(0, len(value) - room)
            elif key not in ("read_id", "reports_dropped"):
                read[key] = value

    def latest(self, limit: int) -> list[dict]:
        """The newest `limit` reads (by their first summary), newest first, as copies."""
        newest = list(self.reads.values())[::-1][:max(0, limit)]
        return [dict(r, reports=list(r["reports"])) for r in newest]


@ray.remote(num_cpus=0, max_restarts=0)
class ClusterHost:
    def __init__(self, facts: dict, zookeeper: str | None, zk_tick_time_ms: int = 200):
        self._server = None
        self._error = None
        if zookeeper is None:
            from controller.zookeeper.server import ZooKeeperLaunchError, ZooKeeperServer
            try:
                self._server = ZooKeeperServer(tick_time_ms=zk_tick_time_ms).start()
                zookeeper = self._server.connect_string
            except ZooKeeperLaunchError as exc:   # answered by info(): a typed error, not a dead actor
                self._error = exc
        self.facts = dict(facts, zookeeper=zookeeper, embedded_zookeeper=self._server is not None)
        self.pipeline = PipelineReads()

    def info(self) -> dict:
        if self._error is not None:
            raise self._error
        return dict(self.facts)

    def update(self, **changes) -> dict:
        self.facts.update(changes)
        return dict(self.facts)

    def record_pipeline_read(self, read_id: str, summary: dict) -> None:
        """Keep a Spark read's plan fields and new task reports (PipelineReads.record): called
        fire-and-forget by pipeline/tasklog.py, never waited on by a pipeline."""
        self.pipeline.record(read_id, summary)

    def pipeline_reads(self, limit: int = 50) -> list[dict]:
        """The newest `limit` Spark reads kept (at most MAX_PIPELINE_READS), newest first."""
        return self.pipeline.latest(limit)

    def zookeeper_pid(self) -> int | None:
        return self._server.pid if self._server is not None else None

    def stop_zookeeper(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
