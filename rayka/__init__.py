"""rayka: a Kafka-style replicated, partitioned log that runs inside a Ray cluster.

Driver API: `rayka.start_local(...)` / `rayka.connect(name)` → `Cluster` with `admin()`,
`producer()`, `consumer()`; typed errors in `rayka.errors`. Importing `rayka` stays cheap:
Ray is imported only when one of those is first used (module `__getattr__`).
"""

__version__ = "0.1.0"

__all__ = ["start_local", "connect", "Cluster", "__version__"]


def __getattr__(name):
    if name in ("start_local", "connect", "Cluster"):
        from rayka import cluster
        return getattr(cluster, name)
    raise AttributeError(f"module 'rayka' has no attribute {name!r}")
