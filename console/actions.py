"""Actions: the console's writes, sent over Kafka's protocol by real Kafka clients.

Rules:
- Off unless the console runs with --allow-writes; `Actions(None)` refuses each one with
  CLUSTER_AUTHORIZATION_FAILED (31) and the reason.
- Every write goes to the brokers' Kafka listener through confluent_kafka's AdminClient
  (librdkafka), and a reassignment through kafka-python's (librdkafka has no
  AlterPartitionReassignments), as the principal of the client config the console was given
  (Kafka's --command-config: security.protocol, sasl.mechanism, sasl.username,
  sasl.password, ssl.ca.location). The brokers' authorizer judges the console exactly as it
  judges kafka-topics.sh: what the ACLs refuse is refused, with Kafka's error.
- Input is checked before anything is sent and refused with Kafka's names: INVALID_REQUEST
  (42) for a malformed form, INVALID_PARTITIONS (37), INVALID_REPLICATION_FACTOR (38),
  INVALID_CONFIG (40); the brokers check the rest.
- Each action answers an Outcome: ok, one line for the page, and per item (partition,
  config) its result or error, so a partial failure shows which part failed.
- A reset of a group's offsets follows kafka-consumer-groups --reset-offsets: to
  "earliest", "latest" or a number, for every partition of the topic; Kafka refuses it while
  the group has members.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Mapping

from rayka.errors import ErrorCode, InvalidConfig, InvalidPartitions, InvalidReplicationFactor, \
    InvalidRequest, KafkaError

log = logging.getLogger(__name__)
TIMEOUT_S = 30.0
WIRE_KEYS = ("security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username",
             "sasl.password", "ssl.ca.location")


@dataclasses.dataclass
class Outcome:
    ok: bool
    message: str
    items: dict = dataclasses.field(default_factory=dict)


def wire_error_text(err) -> str:
    """confluent_kafka's KafkaError → Kafka's name (code): message."""
    code = err.code()
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = err.name()
    return f"{name} ({code}): {err.str()}"


def _positive_int(value, what: str, error=InvalidRequest) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise error(f"{what} must be a whole number, not {value!r}") from None
    if n < 1:
        raise error(f"{what} must be at least 1, not {n}")
    return n


def parse_configs(text: str) -> dict[str, str | None]:
    """"key=value" lines or comma-separated pairs → {key: value}; "key=" deletes the key. A
    list value goes in brackets, as kafka-configs takes it: `cleanup.policy=[compact,delete]`
    is "compact,delete"."""
    out: dict[str, str | None] = {}
    for item in re.split(r",(?![^\[]*\])|\n", text):
        item = item.strip()
        if not item:
            continue
        if "=" not in item:
            raise InvalidConfig(f"config {item!r} is not key=value")
        k, v = item.split("=", 1)
        if not k.strip():
            raise InvalidConfig(f"config {item!r} has no key")
        v = v.strip()
        if v.startswith("[") and v.endswith("]"):
            v = v[1:-1]
        out[k.strip()] = v or None
    return out


class Actions:
    def __init__(self, bootstrap: str | None, client_config: Mapping[str, str] | None = None,
                 why_off: str = "writes are off: start the console with --allow-writes"):
        self.bootstrap = bootstrap
        self.client_config = {k: v for k, v in (client_config or {}).items() if k in WIRE_KEYS}
        self.why_off = why_off
        self._client = None

    @property
    def allowed(self) -> bool:
        return self.bootstrap is not None

    def _admin(self):
        """One AdminClient for the console's life (thread-safe; its futures need it alive)."""
        if self._client is None:
            from confluent_kafka.admin import AdminClient
            self._client = AdminClient({"bootstrap.servers": self.bootstrap,
                                        "client.id": "rayka-console", **self.client_config})
        return self._client

    def _refused(self) -> Outcome | None:
        if self.allowed:
            return None
        return Outcome(False, f"CLUSTER_AUTHORIZATION_FAILED (31): {self.why_off}")

    def _run(self, what: str, do) -> Outcome:
        """Run one action; a typed error (ours or the wire's) becomes the page's one line."""
        refused = self._refused()
        if refused is not None:
            return refused
        from confluent_kafka import KafkaException
        try:
            return do()
        except KafkaError as exc:
            return Outcome(False, str(exc))
        except KafkaException as exc:
            return Outcome(False, f"{what}: {wire_error_text(exc.args[0])}")
        except Exception as exc:     # a client's own failure: said on the page, never a 500
            log.exception("console action %s failed", what)
            return Outcome(False, f"{what}: UNKNOWN_SERVER_ERROR (-1): "
                           f"{type(exc).__name__}: {exc}")

    @staticmethod
    def _each(futures: Mapping, ok_text: str, what: str) -> Outcome:
        """Wait for per-item futures → an Outcome naming each item's error."""
        from confluent_kafka import KafkaException
        items, failed = {}, []
        for key, fut in futures.items():
            try:
                fut.result(timeout=TIMEOUT_S)
                items[str(key)] = "ok"
            except KafkaException as exc:
                items[str(key)] = wire_error_text(exc.args[0])
                failed.append(items[str(key)])
        if failed:
            return Outcome(False, f"{what}: {failed[0]}", items)
        return Outcome(True, ok_text, items)

    # -- topics --------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions, replication_factor, configs: str = "") -> Outcome:
        def do():
            from confluent_kafka.admin import NewTopic
            if not name or not name.strip():
                raise InvalidRequest("a topic name is required")
            n = _positive_int(partitions, "partitions", InvalidPartitions)
            rf = _positive_int(replication_factor, "replication factor", InvalidReplicationFactor)
            conf = {k: v for k, v in parse_configs(configs).items() if v is not None}
            futures = self._admin().create_topics([NewTopic(name.strip(), n, rf, config=conf)],
                                                  request_timeout=TIMEOUT_S)
            return self._each(futures, f"created topic {name.strip()} ({n} partitions, RF {rf})",
                              f"create topic {name}")
        return self._run(f"create topic {name}", do)

    def delete_topic(self, name: str) -> Outcome:
        def do():
            futures = self._admin().delete_topics([name], request_timeout=TIMEOUT_S)
            return self._each(futures, f"deleted topic {name}", f"delete topic {name}")
        return self._run(f"delete topic {name}", do)

    def alter_configs(self, topic: str, configs: str) -> Outcome:
        """Kafka's incremental alter: "key=value" sets, "key=" deletes (back to the default)."""
        def do():
            from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                               ResourceType)
            changes = parse_configs(configs)
            if not changes:
                raise InvalidRequest("no config to change: give key=value lines")
            entries = [ConfigEntry(k, v or "", incremental_operation=(
                AlterConfigOpType.DELETE if v is None else AlterConfigOpType.SET))
                for k, v in changes.items()]
            futures = self._admin().incremental_alter_configs(
                [ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)],
                request_timeout=TIMEOUT_S)
            return self._each(futures, f"altered {', '.join(changes)} of topic {topic}",
                              f"alter configs of {topic}")
        return self._run(f"alter configs of {topic}", do)

    # -- leadership ----------------------------------------------------------------------------
    def elect_preferred(self, topic: str, partitions: list[int]) -> Outcome:
        def do():
            from confluent_kafka import TopicPartition
            from confluent_kafka import ElectionType
            tps = [TopicPartition(topic, p) for p in partitions]
            # no request_timeout: confluent_kafka 2.16's elect_leaders refuses that keyword
            # (SystemError "more argument specifiers than keyword list entries")
            result = self._admin().elect_leaders(ElectionType.PREFERRED, tps).result(TIMEOUT_S)
            items, failed = {}, []
            for tp, err in sorted(result.items(), key=lambda x: (x[0].topic, x[0].partition)):
                key = f"{tp.topic}-{tp.partition}"
                if err is None or err.code() == ErrorCode.ELECTION_NOT_NEEDED:
                    items[key] = "ok" if err is None else "already the preferred leader"
                else:
                    items[key] = wire_error_text(err)
                    failed.append(items[key])
            moved = sum(v == "ok" for v in items.values())
            if failed:
                return Outcome(False, f"elect preferred leaders of {topic}: {failed[0]}", items)
            return Outcome(True, f"preferred leaders of {topic}: {moved} moved, "
                           f"{len(items) - moved} already preferred", items)
        return self._run(f"elect preferred leaders of {topic}", do)

    def reassign(self, topic: str, partition, replicas: str) -> Outcome:
        """One partition to the replica list "3,1,2" (Kafka's AlterPartitionReassignments)."""
        def do():
            from kafka import TopicPartition
            from kafka.admin import KafkaAdminClient
            try:
                p = int(str(partition).strip())
            except ValueError:
                raise InvalidRequest(f"partition must be a whole number, not {partition!r}") \
                    from None
            try:
                target = [int(x) for x in replicas.replace(" ", "").split(",") if x]
            except ValueError:
                raise InvalidRequest(f"replicas must be broker ids like 1,2,3, not {replicas!r}") \
                    from None
            if not target:
                raise InvalidRequest("replicas must name at least one broker")
            admin = KafkaAdminClient(**self._kafka_python_config())
            try:
                result = admin.alter_partition_reassignments({TopicPartition(topic, p): target},
                                                             timeout_ms=int(TIMEOUT_S * 1000))
            finally:
                admin.close()
            for _tp, err in result.items():
                if err is not None:
                    raise _kafka_python_error(err)
            return Outcome(True, f"reassigning {topic}-{p} to {target}")
        return self._run(f"reassign {topic}-{partition}", do)

    def _kafka_python_config(self) -> dict:
        c = self.client_config
        out = {"bootstrap_servers": self.bootstrap.split(","), "client_id": "rayka-console",
               "request_timeout_ms": int(TIMEOUT_S * 1000)}
        if "security.protocol" in c:
            out["security_protocol"] = c["security.protocol"]
        mechanism = c.get("sasl.mechanism") or c.get("sasl.mechanisms")
        if mechanism:
            out["sasl_mechanism"] = mechanism
            out["sasl_plain_username"] = c.get("sasl.username")
            out["sasl_plain_password"] = c.get("sasl.password")
        if "ssl.ca.location" in c:
            out["ssl_cafile"] = c["ssl.ca.location"]
        return out

    # -- groups --------------------------------------------------------------------------------
    def reset_offsets(self, group: str, topic: str, to: str, partitions: list[int]) -> Outcome:
        def do():
            from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
            from confluent_kafka.admin import OffsetSpec
            target = (to or "").strip().lower()
            if target not in ("earliest", "latest"):      # checked before the client connects
                try:
                    n = int(target)
                except ValueError:
                    raise InvalidRequest(f"reset to earliest, latest or an offset, not {to!r}") \
                        from None
                if n < 0:
                    raise InvalidRequest(f"an offset is never negative: {n}")
            admin = self._admin()
            if target in ("earliest", "latest"):
                spec = OffsetSpec.earliest() if target == "earliest" else OffsetSpec.latest()
                asked = admin.list_offsets({TopicPartition(topic, p): spec for p in partitions},
                                           request_timeout=TIMEOUT_S)
                offsets = {tp.partition: fut.result(TIMEOUT_S).offset for tp, fut in asked.items()}
            else:
                offsets = {p: n for p in partitions}
            futures = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
                group, [TopicPartition(topic, p, o) for p, o in sorted(offsets.items())])],
                request_timeout=TIMEOUT_S)
            for fut in futures.values():
                got = fut.result(TIMEOUT_S)
                bad = [tp for tp in got.topic_partitions if tp.error is not None]
                if bad:
                    return Outcome(False, f"reset offsets of {group}: "
                                   f"{wire_error_text(bad[0].error)}")
            return Outcome(True, f"group {group} on {topic} reset to {target} "
                           f"({len(offsets)} partitions)",
                           {f"{topic}-{p}": o for p, o in sorted(offsets.items())})
        return self._run(f"reset offsets of {group}", do)


def _kafka_python_error(err) -> KafkaError:
    """kafka-python's error class (or instance) → rayka's typed error of the same code."""
    from rayka.errors import error_for_code
    code = getattr(err, "errno", -1)
    return error_for_code(code, getattr(err, "description", None) or str(err))
