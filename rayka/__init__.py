"""rayka: a Kafka-style replicated, partitioned log that runs inside a Ray cluster.

Driver API: `rayka.start_local(...)` / `rayka.connect(name)` → `Cluster` with `admin()`,
`producer()`, `consumer()`; `rayka.Admin`, `rayka.Producer`, `rayka.Consumer`; typed errors
in `rayka.errors`; the `rayka` command is `rayka.cli`. Importing `rayka` stays cheap: Ray is
imported only when one of those is first used (module `__getattr__`).

The rooms of this package, top to bottom (an import only ever points down this list):
- cli: the `rayka` command (front door: one line per error, exit codes);
- chaos/: fault injector, workload, history and checker behind `rayka chaos`;
- ops/: operating a cluster — the private Ray head, `rayka zookeeper`, process helpers, the
  log demo;
- cluster: `start_local`, `connect`, `Cluster` (starts and finds the actors);
  share_workers: Ray actors as one share group (`Cluster.share_workers`);
  cluster_state: where a named cluster's Ray is (the state file `rayka start` writes);
  console_process: the web console as a child process (`start_local(console=True)`);
- client/: what a driver uses to talk to a cluster — Admin, Producer, Consumer and their
  pure parts (accumulator, partitioner, metadata, types);
- errors: Kafka's typed errors, re-exported from replicas/.

May import: ray, actors/, protocol/, coordinator/, controller/, replicas/. Never pipeline/
nor console/ (they sit above; `rayka demo` finds the Spark job through the `rayka.demos`
entry point, `rayka console` the console through `rayka.console`).
"""

__version__ = "0.1.0"

__all__ = ["start_local", "connect", "Cluster", "Admin", "Producer", "Consumer", "__version__"]

_LAZY = {"start_local": "rayka.cluster", "connect": "rayka.cluster", "Cluster": "rayka.cluster",
         "Admin": "rayka.client.admin", "Producer": "rayka.client.producer",
         "Consumer": "rayka.client.consumer"}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rayka' has no attribute {name!r}")
