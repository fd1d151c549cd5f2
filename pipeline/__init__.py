"""rayka's Spark on Ray pipeline (RayDP): topics as DataFrames, read where their leaders are.

    spark = pipeline.start_spark(cluster, executors=3, executor_resource="spark_slot")
    df = pipeline.read_topic(spark, cluster, "clicks")            # Kafka-source schema
    pipeline.write_topic(counts, cluster, "page-counts")          # from the executors
    pipeline.run_incremental(spark, cluster, "my-job", "clicks", "page-counts", transform)
    pipeline.stop_spark()

Modules: spark (RayDP start/stop, executor → node), source (read_topic: plan + pinned
descriptor RDD), reader (the task side: fetch from the leader, follow leader moves),
columns (batches → Arrow), sink (write_topic), incremental (exactly-once runs), tasklog
(where tasks ran; forwarded to the ClusterHost so it outlives the driver), demo (the
clickstream job behind `make demo`). Names are imported lazily so `import pipeline` does
not start a JVM or import pyspark.

May import: pyspark, raydp, ray, rayka/ (and below it actors/, controller/, replicas/).
Nothing in the project imports pipeline/ but bench/ and tests/; `rayka demo` reaches
pipeline.demo through the `rayka.demos` entry point (pyproject.toml).
"""

_EXPORTS = {
    "start_spark": "pipeline.spark", "stop_spark": "pipeline.spark",
    "executors_of": "pipeline.spark",
    "read_topic": "pipeline.source", "placements": "pipeline.source",
    "progress": "pipeline.source", "plan_of": "pipeline.source",
    "holding": "pipeline.source", "release": "pipeline.source",
    "KAFKA_SCHEMA": "pipeline.source",
    "write_topic": "pipeline.sink", "WriteResult": "pipeline.sink",
    "run_incremental": "pipeline.incremental", "plan_run": "pipeline.incremental",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        import importlib
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'pipeline' has no attribute {name!r}")
