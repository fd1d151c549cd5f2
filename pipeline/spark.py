"""Spark on Ray for rayka: start/stop RayDP and know where every executor runs.

Rules (RayDP 1.6.5 + pyspark 3.5.7 on Java 17, as tests/test_pipeline.py runs them):
- Java 17 needs the module opens below for the app master, the executors and the driver, or
  Spark→Ray conversion kills the executor; executors run the venv's Python (PYSPARK_PYTHON)
  or they fail with "No module named pyspark".
- One executor per Ray node by default: each executor actor asks for one unit of the
  resource `executor_resource` (the caller gives every node one unit, e.g. the nodes'
  `rayka_broker` resource or a dedicated `spark_slot`); without it Ray packs executors
  wherever CPUs are free, which is fine on a single node.
- Executor CPU is fractional (`spark.ray.raydp_spark_executor.actor.resource.cpu`) so Spark
  fits next to brokers on a small machine; Spark's own task slots are `executor_cores`.
- `spark.locality.wait` is long: a pinned task waits for ITS executor rather than running
  elsewhere (the read path pins every task to its leader's node).
- `executors(spark)` maps Spark executor ids to Ray node ids, pids and Spark host strings,
  read from Ray's actor table (`raydp-executor-<id>`, alive) and Spark's block manager list;
  it waits until every expected executor is up, since they register after init_spark
  returns.
"""

from __future__ import annotations

import dataclasses
import os
import sys

import ray

from rayka.client.admin import wait_for

JAVA_OPENS = ("java.lang", "java.lang.invoke", "java.lang.reflect", "java.io", "java.net",
              "java.nio", "java.math", "java.text", "java.util", "java.util.concurrent",
              "java.util.concurrent.atomic", "sun.nio.ch", "sun.nio.cs", "sun.security.action",
              "sun.util.calendar")
JAVA_OPTIONS = " ".join(f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in JAVA_OPENS)
EXECUTOR_PREFIX = "raydp-executor-"
_state: dict = {}


@dataclasses.dataclass(frozen=True)
class Executor:
    executor_id: str
    node_id: str          # Ray node id (hex) of the executor actor
    pid: int              # the executor JVM's pid: Python workers are its descendants
    host: str             # the host string Spark reports for it

    @property
    def location(self) -> str:
        """Spark's executor-level preferred location (TaskLocation 'executor_<host>_<id>')."""
        return f"executor_{self.host}_{self.executor_id}"


def start_spark(cluster=None, executors: int | None = None, executor_cores: int = 1,
                executor_memory: str = "1g", executor_cpu: float = 0.5,
                executor_resource: str | None = None, app_name: str = "rayka",
                configs: dict | None = None, start_timeout_s: float = 120.0):
    """raydp.init_spark with what Java 17 and the venv need; returns the SparkSession.

    `executors` defaults to the number of alive Ray nodes (one per node when
    `executor_resource` names a resource every node holds one unit of)."""
    import raydp
    if executors is None:
        executors = len([n for n in ray.nodes() if n["Alive"]])
    conf = {
        "spark.ray.raydp_app_master.extraJavaOptions": JAVA_OPTIONS,
        "spark.executor.extraJavaOptions": JAVA_OPTIONS,
        "spark.driver.extraJavaOptions": JAVA_OPTIONS,
        "spark.ray.raydp_spark_executor.actor.resource.cpu": str(executor_cpu),
        "spark.locality.wait": "120s",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        "spark.pyspark.python": sys.executable,
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": str(max(2, executors * executor_cores)),
    }
    if executor_resource:
        conf[f"spark.ray.raydp_spark_executor.actor.resource.{executor_resource}"] = "1"
    # a token-auth Ray head (a rayka private head's token file): tasks' ray.init needs it too
    for key in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_TOKEN"):
        if os.environ.get(key):
            conf[f"spark.executorEnv.{key}"] = os.environ[key]
    conf.update(configs or {})
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    spark = raydp.init_spark(app_name, executors, executor_cores, executor_memory, configs=conf)
    _state.update(spark=spark, expected=executors)
    executors_of(spark, timeout_s=start_timeout_s)
    return spark


def stop_spark() -> None:
    import raydp
    _state.clear()
    raydp.stop_spark()


def executors_of(spark, timeout_s: float = 60.0) -> dict[str, Executor]:
    """Spark executor id → Executor, once every expected executor is alive in Ray and
    registered with Spark's driver."""
    expected = _state.get("expected", 1) if _state.get("spark") is spark else 1
    found: dict[str, Executor] = {}

    def ready() -> bool:
        hosts = _spark_executor_hosts(spark)
        found.clear()
        for a in _alive_actors():
            name = a["name"]
            if name.startswith(EXECUTOR_PREFIX):
                eid = name[len(EXECUTOR_PREFIX):]
                if eid in hosts:
                    found[eid] = Executor(eid, a["node_id"], a["pid"], hosts[eid])
        return len(found) >= expected
    wait_for(ready, timeout_s, f"{expected} Spark executors alive and registered", poll_s=0.5)
    return dict(found)


def _alive_actors() -> list[dict]:
    """Ray's actor table (name, node id, pid of alive actors). ray.util.state needs the
    dashboard's API server, which test clusters and `rayka start` do not run; the GCS
    actor table behind it is read directly (Ray 2.60: ray._private.state.actors)."""
    try:
        from ray._private.state import actors
    except ImportError:  # a Ray without it: the public state API (needs the dashboard)
        from ray.util.state import list_actors
        return [{"name": a.get("name") or "", "node_id": a["node_id"], "pid": int(a["pid"])}
                for a in list_actors(filters=[("state", "=", "ALIVE")], limit=10_000)]
    return [{"name": a.get("Name") or "", "node_id": a["Address"]["NodeID"], "pid": int(a["Pid"])}
            for a in actors().values() if a.get("State") == "ALIVE"]


def _spark_executor_hosts(spark) -> dict[str, str]:
    """Executor id → host, from the driver's status tracker (the driver itself excluded)."""
    hosts = {}
    bms = spark.sparkContext._jsc.sc().env().blockManager().master().getMemoryStatus()
    it = bms.keySet().iterator()
    while it.hasNext():
        bm = it.next()
        if bm.executorId() != "driver":
            hosts[bm.executorId()] = bm.host()
    return hosts


def node_of_process(pid_to_node: dict[int, str], pid: int | None = None,
                    depth: int = 8) -> str | None:
    """The Ray node an executor's Python worker runs on: walk up the parent chain to the
    executor JVM (a Ray actor whose pid Ray reports). Honest proof of where a task ran."""
    pid = os.getpid() if pid is None else pid
    for _ in range(depth):
        if pid in pid_to_node:
            return pid_to_node[pid]
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return None
        if pid <= 1:
            return None
    return None


_connected: dict = {}


def ensure_ray(address: str, namespace: str) -> None:
    """A Spark task's Python worker is not a Ray worker: connect it once per process."""
    if _connected.get("address") == address and ray.is_initialized():
        return
    if not ray.is_initialized():
        ray.init(address=address, namespace=namespace, logging_level="ERROR",
                 log_to_driver=False)
    _connected["address"] = address

