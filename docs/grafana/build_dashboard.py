"""Writes docs/grafana/rayka.json: a Grafana dashboard of rayka's Ray metrics.

The panels are built from the gauges actors/metrics.py declares, so the dashboard names
only metrics the brokers and controllers export (tests/test_metrics_ray.py checks the file
against the declarations and against a live cluster's export). Ray's exporter prefixes
every metric with `ray_`. Import the JSON in Grafana (Dashboards → Import) with the
Prometheus data source that scrapes Ray (`ray metrics launch-prometheus`).

    python docs/grafana/build_dashboard.py        # rewrites rayka.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from actors.metrics import BROKER_GAUGES, CONTROLLER_GAUGES  # noqa: E402

OUT = Path(__file__).with_name("rayka.json")
DS = {"type": "prometheus", "uid": "${datasource}"}


def metric(name: str) -> str:
    return f"ray_rayka_{name}"


def broker_metric(name: str) -> str:
    return f"ray_rayka_broker_{name}"


def panel(pid: int, title: str, expr: str, legend: str, kind: str, x: int, y: int, w: int,
          description: str, thresholds: list | None = None) -> dict:
    p = {"id": pid, "type": kind, "title": title, "description": description, "datasource": DS,
         "gridPos": {"h": 6 if kind == "stat" else 8, "w": w, "x": x, "y": y},
         "targets": [{"refId": "A", "datasource": DS, "expr": expr, "legendFormat": legend}],
         "fieldConfig": {"defaults": {"decimals": 0}, "overrides": []}, "options": {}}
    if thresholds:
        p["fieldConfig"]["defaults"]["thresholds"] = {"mode": "absolute", "steps": thresholds}
        p["options"] = {"colorMode": "background", "reduceOptions": {"calcs": ["lastNotNull"]}}
    return p


def dashboard() -> dict:
    sel = '{cluster="$cluster"}'
    bad_if_not_one = [{"color": "red", "value": None}, {"color": "green", "value": 1},
                      {"color": "red", "value": 2}]
    bad_if_any = [{"color": "green", "value": None}, {"color": "red", "value": 1}]
    c, b = CONTROLLER_GAUGES, BROKER_GAUGES
    panels = [
        panel(1, "Active controllers", f"sum({metric('active_controller_count')}{sel})", "active",
              "stat", 0, 0, 6, c["active_controller_count"] + "; summed: must be 1",
              bad_if_not_one),
        panel(2, "Offline partitions", f"sum({metric('offline_partitions')}{sel})", "offline",
              "stat", 6, 0, 6, c["offline_partitions"], bad_if_any),
        panel(3, "Under-replicated partitions",
              f"sum({metric('under_replicated_partitions')}{sel})", "under-replicated",
              "stat", 12, 0, 6, c["under_replicated_partitions"], bad_if_any),
        panel(4, "Controller epoch", f"max({metric('controller_epoch')}{sel})", "epoch",
              "stat", 18, 0, 6, c["controller_epoch"] + "; jumps mean controllers flap"),
        panel(5, "Leaders per broker", f"{broker_metric('leader_partitions')}{sel}",
              "broker {{broker}}", "timeseries", 0, 6, 8, b["leader_partitions"]),
        panel(6, "Replicas per broker", f"{broker_metric('partitions')}{sel}",
              "broker {{broker}}", "timeseries", 8, 6, 8, b["partitions"]),
        panel(7, "Under-replicated, per leading broker",
              f"{broker_metric('under_replicated_partitions')}{sel}", "broker {{broker}}",
              "timeseries", 16, 6, 8, b["under_replicated_partitions"]),
        panel(8, "Offline log directories", f"sum({broker_metric('offline_log_dirs')}{sel})",
              "offline", "stat", 0, 14, 6, b["offline_log_dirs"], bad_if_any),
    ]
    return {
        "uid": "rayka-overview", "title": "rayka: controllers and brokers",
        "tags": ["rayka", "ray", "kafka"], "timezone": "browser", "schemaVersion": 39,
        "version": 1, "refresh": "10s", "time": {"from": "now-1h", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus",
             "label": "Prometheus"},
            {"name": "cluster", "type": "query", "datasource": DS, "label": "rayka cluster",
             "query": f"label_values({metric('controller_epoch')}, cluster)",
             "definition": f"label_values({metric('controller_epoch')}, cluster)",
             "refresh": 2, "includeAll": False},
        ]},
        "panels": panels,
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


if __name__ == "__main__":
    OUT.write_text(render())
    print(f"wrote {OUT}")
