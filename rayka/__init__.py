"""rayka: a Kafka-style replicated, partitioned log that runs inside a Ray cluster.

The driver API (start_local, connect, Cluster, Admin, Producer, Consumer) arrives with
the broker actors; today this package holds the embedded ZooKeeper launcher
(`rayka.zookeeper`), the typed errors (`rayka.errors`), the `rayka` CLI and its demo.
Importing `rayka` stays cheap: nothing heavy (Ray, Spark) is imported here.
"""

__version__ = "0.1.0"
