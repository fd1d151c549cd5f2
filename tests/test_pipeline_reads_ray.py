"""Spark reads outlive their driver: pipeline/tasklog.py's TaskLog forwards a read's plan and
its task reports to the cluster's detached ClusterHost (actors/cluster_host.py), and
Cluster.pipeline_reads answers them after the TaskLog is gone. Real Ray and a real cluster;
no Spark: the reports are posted as pipeline/reader.py's tasks post them."""

from __future__ import annotations

import uuid

import pytest
import ray

from rayka.client.admin import wait_for
from tests.ray_cluster import cluster, ray_session  # noqa: F401  (fixtures)

pytestmark = pytest.mark.ray


def task_report(partition: int) -> dict:
    return {"partition": partition, "start": 0, "end": 10, "rows": 10, "leader_at_plan": 1,
            "leader_node_at_plan": "n1", "leader_at_end": 1, "leader_node_at_end": "n1",
            "pinned_executor": "1", "task_node": "n1", "pid": 1, "resolves": 0,
            "attempt": 0, "seconds": 0.1}


def test_a_reads_reports_reach_the_cluster_host_and_outlive_the_task_log(cluster):
    from pipeline.tasklog import TaskLog
    read_id = uuid.uuid4().hex[:12]
    log = TaskLog.options(namespace=cluster.namespace).remote(cluster.namespace)
    log.plan.remote(read_id, {"topic": "clicks", "partitions": 2, "records": 20})
    for p in (0, 1):
        ray.get(log.record.remote(read_id, task_report(p)))      # as a task reports

    def kept():
        return next((r for r in cluster.pipeline_reads(100) if r["read_id"] == read_id), None)
    wait_for(lambda: len((kept() or {}).get("reports", [])) == 2, 30,
             "both reports kept by the ClusterHost")
    assert ray.get(log.get.remote(read_id)) == [task_report(0), task_report(1)]
    ray.kill(log, no_restart=True)                   # the driver's TaskLog goes with it
    read = kept()
    assert read["topic"] == "clicks" and read["partitions"] == 2 and read["records"] == 20
    assert read["reports"] == [task_report(0), task_report(1)]
    assert cluster.pipeline_reads(1)[0]["read_id"] == read_id         # the newest


def test_a_task_log_without_a_host_still_records(ray_session):
    from pipeline.tasklog import TaskLog
    log = TaskLog.options(namespace="rayka-no-such-cluster").remote("rayka-no-such-cluster")
    ray.get(log.plan.remote("r", {"topic": "t"}))
    ray.get(log.record.remote("r", task_report(0)))
    assert ray.get(log.get.remote("r")) == [task_report(0)]
    ray.kill(log, no_restart=True)
