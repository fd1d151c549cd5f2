"""Rayka's health as Ray metrics (Ray dashboard, Prometheus through Ray's metrics agent).

Rules:
- Gauges named `rayka_*` (Ray's exporter prefixes `ray_`: Prometheus sees
  `ray_rayka_offline_partitions`), every one tagged `cluster` and `controller` or `broker`.
- Every controller candidate reports `rayka_active_controller_count` (1 active, 0 candidate:
  summed over the cluster it is Kafka's ActiveControllerCount, != 1 is an alarm) and
  `rayka_offline_partitions`, `rayka_under_replicated_partitions`, `rayka_controller_epoch`
  (the active controller's figures, 0 on a candidate: a sum over controllers is the cluster's).
- Every broker reports `rayka_broker_partitions` (replicas hosted),
  `rayka_broker_leader_partitions` and `rayka_broker_under_replicated_partitions` (partitions
  it leads whose committed ISR is smaller than the replicas: Kafka's per-broker
  UnderReplicatedPartitions) and `rayka_broker_offline_log_dirs` (its log directories
  taken offline by a disk fault: Kafka's OfflineLogDirectoryCount).
- The figures are a plain dict (what the actors' `metrics()` answers, short keys without the
  prefixes); `Gauges.set` publishes one. A `Reporter` daemon thread refreshes them every
  `metrics_interval_s` until its stop event; a failing refresh is logged and retried.
- Gauges live in the actor's process: a dead actor's series age out of Ray's exporter after
  about two export intervals (Ray's metrics_report_interval_ms, 10 s by default).
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Iterable, Mapping

log = logging.getLogger(__name__)
DEFAULT_INTERVAL_S = 5.0

CONTROLLER_GAUGES = {
    "active_controller_count": "1 on the active controller, 0 on a candidate",
    "offline_partitions": "partitions without a live leader (active controller)",
    "under_replicated_partitions": "partitions whose ISR is smaller than their replicas",
    "controller_epoch": "controller epoch of the active controller (0 on a candidate)",
}
BROKER_GAUGES = {
    "partitions": "partition replicas hosted by the broker",
    "leader_partitions": "partitions the broker leads",
    "under_replicated_partitions": "partitions the broker leads whose ISR < replicas",
    "offline_log_dirs": "log directories offline after a disk fault (full, I/O errors)",
}


def controller_figures(status: Mapping) -> dict:
    """ControllerActor.status() → the controller's figures (zeros on a candidate)."""
    active = bool(status.get("active"))
    return {"active_controller_count": int(active),
            "offline_partitions": int(status.get("offline_partitions", 0)) if active else 0,
            "under_replicated_partitions":
                int(status.get("under_replicated_partitions", 0)) if active else 0,
            "controller_epoch": int(status.get("epoch") or 0) if active else 0}


def broker_figures(infos: Iterable[Mapping], offline_log_dirs: int = 0) -> dict:
    """ReplicaManager.partition_info() dicts of the hosted partitions, and how many of its
    log directories are offline → the broker's figures."""
    partitions = leaders = under = 0
    for info in infos:
        partitions += 1
        if info["role"] == "leader":
            leaders += 1
            under += len(info["isr"]) < len(info["replicas"])
    return {"partitions": partitions, "leader_partitions": leaders,
            "under_replicated_partitions": under, "offline_log_dirs": offline_log_dirs}


class Gauges:
    """One Ray Gauge per figure, created in this process, with this actor's tags."""

    def __init__(self, prefix: str, descriptions: Mapping[str, str], tags: Mapping[str, str]):
        from ray.util.metrics import Gauge
        self.tags = {k: str(v) for k, v in tags.items()}
        self.gauges = {key: Gauge(prefix + key, desc, tag_keys=tuple(self.tags))
                       for key, desc in descriptions.items()}

    def set(self, figures: Mapping[str, float]) -> None:
        for key, value in figures.items():
            gauge = self.gauges.get(key)
            if gauge is not None:
                gauge.set(value, tags=self.tags)


def controller_gauges(cluster: str, controller_id: int) -> Gauges:
    return Gauges("rayka_", CONTROLLER_GAUGES, {"cluster": cluster, "controller": controller_id})


def broker_gauges(cluster: str, broker_id: int) -> Gauges:
    return Gauges("rayka_broker_", BROKER_GAUGES, {"cluster": cluster, "broker": broker_id})


class Reporter:
    """Daemon thread: `gauges.set(figures())` now and every `interval_s` until `stop`."""

    def __init__(self, figures: Callable[[], Mapping], gauges: Gauges, interval_s: float,
                 stop: threading.Event, name: str = "rayka-metrics"):
        self.figures, self.gauges, self.interval_s, self.stop = figures, gauges, interval_s, stop
        self.thread = threading.Thread(target=self._run, daemon=True, name=name)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self.gauges.set(self.figures())
            except Exception:   # a refresh racing a state change or shutdown: try again later
                log.warning("metrics refresh failed", exc_info=True)
            self.stop.wait(self.interval_s)
