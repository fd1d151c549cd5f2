"""Ray metrics (actors/metrics.py) on a REAL cluster: the controllers' and brokers' `metrics()`
figures through a broker killed for good (under-replicated > 0) and recreated (back to 0),
and the gauges as Ray's metrics agent exports them for Prometheus (no dashboard needed).

Waits are rayka.client.admin.wait_for with generous deadlines (2 cores, other Ray tests may run)."""

from __future__ import annotations

import urllib.request

import pytest
import ray
from prometheus_client.parser import text_string_to_metric_families

from actors.metrics import broker_figures, controller_figures
from rayka.client.admin import wait_for
from tests.test_docs import dashboard_metric_names

from tests.ray_cluster import cluster, ray_session  # noqa: F401  (fixtures)

pytestmark = pytest.mark.ray

TIMEOUT_S = 120


def controller_metrics(c) -> dict:
    """{controller id: metrics()} of every controller candidate that answers."""
    out = {}
    for cid in c.facts["controllers"]:
        actor = c.controller_actor(cid)
        if actor is None:
            continue
        try:
            out[cid] = ray.get(actor.metrics.remote(), timeout=10)
        except Exception:     # restarting
            pass
    return out


def broker_metrics(c) -> dict:
    """{broker id: metrics()} of every broker that answers."""
    out = {}
    for b in c.facts["brokers"]:
        actor = c.broker_actor(b)
        if actor is None:
            continue
        try:
            out[b] = ray.get(actor.metrics.remote(), timeout=10)
        except Exception:     # dead or restarting
            pass
    return out


def active_figures(c) -> dict | None:
    active = c.store.get_controller()
    return controller_metrics(c).get(active) if active is not None else None


def exported_samples(name: str) -> list:
    """Samples of `name` on every alive node's Ray metrics export endpoint."""
    samples = []
    for node in ray.nodes():
        if not node["Alive"]:
            continue
        url = f"http://{node['NodeManagerAddress']}:{node['MetricsExportPort']}/metrics"
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        for family in text_string_to_metric_families(text):
            samples += [s for s in family.samples if s.name == name]
    return samples


def test_figures_are_pure_functions_of_the_status():
    assert controller_figures({"active": False}) == {
        "active_controller_count": 0, "offline_partitions": 0,
        "under_replicated_partitions": 0, "controller_epoch": 0}
    assert controller_figures({"active": True, "epoch": 4, "offline_partitions": 1,
                               "under_replicated_partitions": 2}) == {
        "active_controller_count": 1, "offline_partitions": 1,
        "under_replicated_partitions": 2, "controller_epoch": 4}
    infos = [{"role": "leader", "replicas": (1, 2, 3), "isr": (1, 2)},
             {"role": "leader", "replicas": (1, 2), "isr": (2, 1)},
             {"role": "follower", "replicas": (2, 1), "isr": (2,)},
             {"role": "inactive", "replicas": (), "isr": ()}]
    assert broker_figures(infos) == {"partitions": 4, "leader_partitions": 2,
                                     "under_replicated_partitions": 1, "offline_log_dirs": 0}
    assert broker_figures([], offline_log_dirs=1)["offline_log_dirs"] == 1


def test_metrics_follow_a_broker_lost_and_recovered(cluster):
    admin = cluster.admin()
    admin.create_topic("metered", 3, 3)
    active = cluster.store.get_controller()
    healthy = wait_for(lambda: (f := active_figures(cluster)) and f["active_controller_count"] == 1
                       and f["under_replicated_partitions"] == 0 and f, TIMEOUT_S,
                       "the active controller's metrics")
    assert healthy["offline_partitions"] == 0 and healthy["controller_epoch"] >= 1
    # a standby answers within a poll's deadline: one 10 s call can miss it on a busy box
    candidates = wait_for(lambda: {cid: m for cid, m in controller_metrics(cluster).items()
                                   if cid != active}, TIMEOUT_S, "a standby controller's metrics")
    assert candidates and all(m == controller_figures({"active": False})
                              for m in candidates.values())

    def brokers_agree(under: int, live: int):
        figures = broker_metrics(cluster)
        return (len(figures) == live
                and sum(f["leader_partitions"] for f in figures.values()) == 3
                and sum(f["under_replicated_partitions"] for f in figures.values()) == under
                and figures)
    figures = wait_for(lambda: brokers_agree(0, 3), TIMEOUT_S, "brokers' metrics, 3 leaders")
    assert all(f["partitions"] == 3 for f in figures.values())

    victim = admin.describe_topic("metered")[0].leader
    cluster.kill_broker(victim, restart=False)
    # every partition has a replica on the victim: all three end up under-replicated, none
    # offline (status() is read while the controller works: wait for the settled figures)
    lost = wait_for(lambda: (f := active_figures(cluster)) and f["under_replicated_partitions"] == 3
                    and f["offline_partitions"] == 0 and f, TIMEOUT_S,
                    "under-replicated partitions after a broker loss")
    assert lost["active_controller_count"] == 1
    # the survivors lead all three partitions, each with an ISR of two out of three replicas
    wait_for(lambda: brokers_agree(3, 2), TIMEOUT_S, "survivors reporting 3 under-replicated")

    cluster.ensure_actors()
    wait_for(lambda: (f := active_figures(cluster)) and f["under_replicated_partitions"] == 0,
             TIMEOUT_S, "no under-replicated partition after the broker came back")
    wait_for(lambda: brokers_agree(0, 3), TIMEOUT_S, "brokers' metrics back to healthy")

    # Ray's metrics agent exports the gauges (prefixed `ray_`) for Prometheus; the earlier
    # waits took longer than one export interval, the poll covers a slow export
    def exported():
        tagged = [s for s in exported_samples("ray_rayka_active_controller_count")
                  if s.labels.get("cluster") == cluster.name]
        leaders = [s for s in exported_samples("ray_rayka_broker_leader_partitions")
                   if s.labels.get("cluster") == cluster.name]
        return (sum(s.value for s in tagged) == 1
                and {s.labels["controller"] for s in tagged if s.value == 1} == {str(active)}
                and leaders)
    wait_for(exported, TIMEOUT_S, "rayka gauges on Ray's metrics export endpoint")

    # the shipped Grafana dashboard asks only for series this cluster really exports
    def exported_names():
        names = set()
        for node in ray.nodes():
            if node["Alive"]:
                url = f"http://{node['NodeManagerAddress']}:{node['MetricsExportPort']}/metrics"
                text = urllib.request.urlopen(url, timeout=10).read().decode()
                names |= {s.name for f in text_string_to_metric_families(text)
                          for s in f.samples if s.labels.get("cluster") == cluster.name}
        return names
    wanted = dashboard_metric_names()
    assert wanted and wait_for(lambda: wanted <= exported_names(), TIMEOUT_S,
                               f"every dashboard metric exported: {sorted(wanted)}")
