"""The clusters a compat suite runs against: rayka, or Apache Kafka 3.9 on this machine.

Rules:
- A suite takes a `Target` and nothing else: it reaches the cluster only through its
  bootstrap servers (as any Kafka client does) and through the few operator acts a
  suite needs (kill a broker, wait until all are back). The same suite therefore runs
  against rayka and against Kafka 3.9 unchanged, and a failure can be shown to happen
  (or not) on Kafka too.
- `open_target("rayka")` is compat's default cluster (compat/run.py start_cluster: 3
  brokers, 4 partitions, replication factor 3, topic auto-creation, an ACL authorizer
  allowing what no ACL names, anonymous PLAINTEXT clients); `open_target("kafka")` is
  Kafka 3.9.2 in ZooKeeper mode (compat/kafka/launcher.py KafkaCluster) with the same
  topic defaults, authorizer and SCRAM listener. Both come from compat/run.py
  open_cluster, so a suite run alone meets the cluster `make compat` gives it.
- kill_broker is a hard kill (rayka: the broker's actor killed, Ray restarts it on the same
  data; Kafka: SIGKILL, then the same broker started again). It returns at once; the
  broker comes back by itself. wait_all_up(timeout_s) polls until every broker answers a
  Metadata request listing all of them.
- scram() names a SASL_PLAINTEXT listener and a SCRAM user for suites that test SASL
  (rayka's compat cluster has one: its brokers replicate over it; Kafka's when made with
  a scram_user).
- Both stop everything they started, by pid, when closed (a `with` block).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


class Target:
    name = "?"

    def bootstrap_servers(self) -> str:
        raise NotImplementedError

    def broker_ids(self) -> list[int]:
        raise NotImplementedError

    def kill_broker(self, broker_id: int) -> None:
        raise NotImplementedError

    def wait_all_up(self, timeout_s: float = 120.0) -> None:
        """Until every broker is live and lists all the others in its Metadata answer."""
        from compat.kafka.launcher import wait_all_listed
        wait_all_listed(self._addresses(), self.broker_ids(), timeout_s, self.name)

    def _addresses(self) -> list[tuple[str, int]]:
        out = []
        for hp in self.bootstrap_servers().split(","):
            host, port = hp.rsplit(":", 1)
            out.append((host, int(port)))
        return out

    def scram(self) -> tuple[str, str, str, str] | None:
        """(bootstrap servers of a SASL_PLAINTEXT listener, user, password, mechanism) a
        suite may authenticate with, or None when the target has no SASL listener."""
        return None

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class RaykaTarget(Target):
    name = "rayka"

    def __init__(self, kind: str = "default"):
        """compat's rayka cluster of scenario `kind` (compat/run.py start_cluster)."""
        from compat.run import start_cluster
        self.cluster = start_cluster(kind)

    def bootstrap_servers(self) -> str:
        return self.cluster.bootstrap_servers()

    def broker_ids(self) -> list[int]:
        return sorted(b.id for b in self.cluster.brokers())

    def kill_broker(self, broker_id: int) -> None:
        self.cluster.kill_broker(broker_id, restart=True)

    def scram(self):
        from compat.run import BROKER_PASSWORD, BROKER_USER
        seeds = self.cluster.bootstrap_servers("SASL_PLAINTEXT")
        return (seeds, BROKER_USER, BROKER_PASSWORD, "SCRAM-SHA-512") if seeds else None

    def wait_all_up(self, timeout_s: float = 120.0) -> None:
        self.cluster.wait_ready(timeout_s)
        super().wait_all_up(timeout_s)

    def close(self) -> None:
        self.cluster.shutdown()


class KafkaTarget(Target):
    name = "kafka-3.9"

    def __init__(self, brokers: int = 3, properties: dict | None = None,
                 broker_properties: dict | None = None,
                 scram_user: tuple[str, str] | None = None):
        """`scram_user` (user, password): a SASL_PLAINTEXT listener too, with that
        SCRAM-SHA-512 user (scram())."""
        from compat.kafka.launcher import KafkaCluster
        self.cluster = KafkaCluster(
            brokers, num_partitions=4, default_replication_factor=min(3, brokers),
            broker_properties=broker_properties, sasl=scram_user is not None,
            properties={"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                        "allow.everyone.if.no.acl.found": "true",
                        "auto.create.topics.enable": "true", **(properties or {})}).start()
        self._restarts: list[threading.Thread] = []
        self._scram = None
        if scram_user is not None:
            self.cluster.add_scram_user(*scram_user)
            self._scram = (self.cluster.sasl_bootstrap_servers, *scram_user, "SCRAM-SHA-512")

    def bootstrap_servers(self) -> str:
        return self.cluster.bootstrap_servers

    def broker_ids(self) -> list[int]:
        return self.cluster.broker_ids

    def kill_broker(self, broker_id: int) -> None:
        self.cluster.kill_broker(broker_id)
        t = threading.Thread(target=self.cluster.start_broker, args=(broker_id,), daemon=True)
        t.start()
        self._restarts.append(t)

    def wait_all_up(self, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        for t in self._restarts:
            t.join(max(0.0, deadline - time.monotonic()))
        super().wait_all_up(max(1.0, deadline - time.monotonic()))

    def scram(self):
        return self._scram

    def close(self) -> None:
        self.cluster.stop()


def finish(result: dict, out: str | None) -> int:
    """A suite's CLI ending: its result as JSON in `out` (if given); exit 1 on a failure."""
    if out:
        with open(out, "w") as f:
            json.dump(result, f, indent=2)
    return 1 if result["failed"] else 0


def open_target(which: str) -> Target:
    """"rayka" or "kafka" (Apache Kafka 3.9.2 on this machine): the cluster `make compat`
    runs its suites against (compat/run.py open_cluster), for a suite run alone."""
    from compat.run import open_cluster
    if which not in ("rayka", "kafka", "kafka-3.9"):
        raise ValueError(f"unknown target {which!r}: rayka or kafka")
    return open_cluster("rayka" if which == "rayka" else "kafka")
