"""TaskLog: a small Ray actor where Spark tasks report what they did and where they ran.

Rules:
- One per rayka cluster and driver (named `pipeline-tasklog` in the cluster's namespace,
  created by the driver's first read with get_if_exists and owned by it, so it goes with
  the driver); Spark's Python workers look it up by name.
- Reports are kept per read (read id) in arrival order; a retried task attempt adds its
  own report, so a test sees every attempt, not just the last.
- Running tasks also report their position (fire and forget, a few times a second):
  `progress(read_id)` tells a monitor, or a test that must act mid-read, how far each
  partition's task is.
- Failpoint `hold`: a read may name offsets where its tasks stop and wait until the
  driver releases them, so a test (or a chaos run) can kill a leader strictly in the middle
  of a task's range instead of racing it. Only partitions named in the read's holds pay a
  synchronous call; the others never ask.
- Bounded: the oldest reads are dropped past MAX_READS, so a long-lived cluster running
  many pipelines does not grow without limit.
- The record outlives the driver: the read's plan (`plan`, from read_topic) and each task
  report, as it is recorded, are forwarded to the cluster's detached ClusterHost
  (actors/cluster_host.py `record_pipeline_read`, which keeps the last 100 reads) fire and
  forget: neither a task nor the driver ever waits on that bookkeeping, and a cluster
  without a ClusterHost (or an older one without the method) only loses the forward.
  Forwarding here, not on the driver, catches every report whatever Spark action ran the
  read, at one extra Ray call per task.
"""

from __future__ import annotations

import collections

import ray

from actors.cluster_host import HOST_NAME

NAME = "pipeline-tasklog"
MAX_READS = 1000


@ray.remote(num_cpus=0, max_restarts=-1)
class TaskLog:
    def __init__(self, namespace: str | None = None):
        self.namespace = namespace          # the cluster's, where its ClusterHost lives
        self.host = None
        self.reads: collections.OrderedDict[str, list] = collections.OrderedDict()
        self.positions: collections.OrderedDict[str, dict] = collections.OrderedDict()
        self.held: set[tuple[str, int]] = set()
        self.released: set[tuple[str, int]] = set()

    def plan(self, read_id: str, summary: dict) -> None:
        """The driver's plan of a read (topic, partitions, records, ...), kept by the host."""
        self.forward(read_id, summary)

    def record(self, read_id: str, report: dict) -> None:
        self.reads.setdefault(read_id, []).append(report)
        while len(self.reads) > MAX_READS:
            self.reads.popitem(last=False)
        self.forward(read_id, {"reports": [report]})

    def forward(self, read_id: str, summary: dict) -> None:
        """To the ClusterHost, fire and forget (module rules)."""
        if self.namespace is None:
            return
        try:
            if self.host is None:
                self.host = ray.get_actor(HOST_NAME, namespace=self.namespace)
            self.host.record_pipeline_read.remote(read_id, summary)
        except Exception:   # no host (a bare Ray test) or a host without the method
            self.host = None

    def record_progress(self, read_id: str, partition: int, offset: int) -> None:
        self.positions.setdefault(read_id, {})[partition] = offset
        while len(self.positions) > MAX_READS:
            self.positions.popitem(last=False)

    def hold_here(self, read_id: str, partition: int) -> bool:
        """Called by a task that reached its hold offset: True while it must wait."""
        self.held.add((read_id, partition))
        return (read_id, partition) not in self.released

    def release(self, read_id: str, partition: int) -> None:
        self.released.add((read_id, partition))

    def holding(self, read_id: str) -> set[int]:
        return {p for r, p in self.held if r == read_id and (r, p) not in self.released}

    def get(self, read_id: str) -> list[dict]:
        return list(self.reads.get(read_id, []))

    def progress(self, read_id: str) -> dict[int, int]:
        return dict(self.positions.get(read_id, {}))


_handles: dict = {}


def task_log(namespace: str):
    # the driver keeps the handle for its lifetime: a non-detached actor dies with its last
    # handle, and a DataFrame derived from a read (df.select(...)) does not carry it
    if namespace not in _handles:
        _handles[namespace] = TaskLog.options(name=NAME, namespace=namespace,
                                              get_if_exists=True).remote(namespace)
    return _handles[namespace]
