"""The broker's dynamic configs from ZooKeeper, kept current without a restart: client quotas
(/config/users, /config/clients) into the broker's QuotaTracker (protocol/quotas.py), and
dynamic broker configs (/config/brokers/<id>, /config/brokers/<default>) into the
broker's topic-config defaults (`BrokerDynamicConfig`), and groups' own configs
(/config/groups/<group>) to the group coordinator.

Rules:
- Read once at start, then again whenever a /config/changes notification appears (Kafka's
  ZkConfigManager), on a thread of its own (ZooKeeper callbacks must not block); the
  notification names the entity, but a reload re-reads every quota entity (cheap for the
  hundreds a cluster has, not for 100k).
- A failed reload (ZooKeeper away) is retried after a pause; until then the last values
  stay in force.
- Dynamic broker configs (Kafka's DynamicBrokerConfig, ZooKeeper mode): only the log.*
  topic-config defaults with Kafka's broker names (log.retention.ms, log.retention.bytes,
  log.segment.bytes, log.roll.ms, log.cleanup.policy, message.max.bytes,
  log.cleaner.*.ratio/lag.ms, ...: `DYNAMIC_KEYS`) are dynamic here; they apply to every
  partition without an override of its own at its next (re)configuration or retention
  check (log.retention.check.interval.ms), as an altered topic config does. Precedence is
  Kafka's: /config/brokers/<id> (DYNAMIC_BROKER_CONFIG) over /config/brokers/<default>
  (DYNAMIC_DEFAULT_BROKER_CONFIG) over the broker's start config (STATIC_BROKER_CONFIG)
  over Kafka's default (DEFAULT_CONFIG). Kafka's dynamic Kerberos keys (`STORED_ONLY`:
  sasl.kerberos.*, reconfigurable per listener in Kafka) are stored and described, with
  no effect: rayka has no GSSAPI, as a Kafka without GSSAPI ignores them too; so are the
  replication throttle rates kafka-reassign-partitions --throttle sets and --verify
  clears (rayka does not throttle replication), and the sizes of Kafka's thread pools and
  cleaner buffers (log.cleaner.threads, num.io.threads, ...: no such pools here). Every other
  broker config is read-only (IncrementalAlterConfigs answers INVALID_CONFIG "Cannot
  update these configs dynamically"), unknown keys too (Kafka stores those).
"""

from __future__ import annotations

import logging
import threading

from actors.config_store import read_entity, read_group_configs, read_quotas
from controller.layout import CONFIG_CHANGES
from controller.topic_config import CONFIG_DEFS, normalize_topic_config
from controller.zookeeper.store import ZkStore
from protocol.api import ConfigEntry
from replicas.replica_types import BROKER_TOPIC_SYNONYMS, topic_defaults_from_broker_config

log = logging.getLogger(__name__)


class DynamicConfigWatcher:
    def __init__(self, store: ZkStore, tracker, broker_configs=None, on_group_configs=None):
        self.store, self.tracker, self.broker_configs = store, tracker, broker_configs
        self.on_group_configs = on_group_configs
        self._dirty = threading.Event()
        self._stopped = threading.Event()
        self._watch = None
        self.loads = 0                      # reloads done (tests poll it)

    def start(self) -> "DynamicConfigWatcher":
        self._watch = self.store.watch_notices(CONFIG_CHANGES, lambda _names: self._dirty.set())
        self._dirty.clear()
        self._reload()
        threading.Thread(target=self._run, daemon=True, name="dynamic-config").start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._dirty.set()
        if self._watch is not None:
            self._watch.cancel()

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._dirty.wait()
            if self._stopped.is_set():
                return
            self._dirty.clear()
            try:
                self._reload()
            except Exception:                   # ZooKeeper away: retried after a pause
                log.exception("reloading dynamic configs failed")
                self._dirty.set()
                self._stopped.wait(1.0)

    def _reload(self) -> None:
        self.tracker.set_quotas(read_quotas(self.store))
        if self.broker_configs is not None:
            self.broker_configs.reload(self.store)
        if self.on_group_configs is not None:
            self.on_group_configs(read_group_configs(self.store))
        self.loads += 1


DYNAMIC_KEYS = {k: t for k, t in BROKER_TOPIC_SYNONYMS.items() if t in CONFIG_DEFS}
STORED_ONLY = frozenset({"sasl.kerberos.min.time.before.relogin",
                         "sasl.kerberos.ticket.renew.jitter",
                         "sasl.kerberos.ticket.renew.window.factor",
                         "sasl.kerberos.kinit.cmd", "sasl.kerberos.principal.to.local.rules",
                         # what kafka-reassign-partitions --throttle sets and --verify clears
                         "leader.replication.throttled.rate",
                         "follower.replication.throttled.rate",
                         "replica.alter.log.dirs.io.max.bytes.per.second",
                         # Kafka's LogCleaner.ReconfigurableConfigs and DynamicThreadPool:
                         # sizes of JVM thread pools and cleaner buffers, which rayka's
                         # Python broker does not have
                         "log.cleaner.threads", "log.cleaner.io.max.bytes.per.second",
                         "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size",
                         "log.cleaner.io.buffer.load.factor", "log.cleaner.backoff.ms",
                         "num.io.threads", "num.network.threads", "num.replica.fetchers",
                         "num.recovery.threads.per.data.dir", "background.threads"})
# Kafka's ConfigSource
DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER, STATIC_BROKER, DEFAULT = 2, 3, 4, 5
DEFAULT_ENTITY = "<default>"
_LONG_MAX = str(2**63 - 1)
# Kafka 3.9's ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS: the broker keys behind each
# topic key, the finest unit first
TOPIC_SYNONYMS = {
    "segment.bytes": ("log.segment.bytes",), "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "segment.index.bytes": ("log.index.size.max.bytes",),
    "flush.messages": ("log.flush.interval.messages",),
    "flush.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    "retention.bytes": ("log.retention.bytes",),
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "max.message.bytes": ("message.max.bytes",),
    "index.interval.bytes": ("log.index.interval.bytes",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms",),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms",),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio",),
    "cleanup.policy": ("log.cleanup.policy",),
    "unclean.leader.election.enable": ("unclean.leader.election.enable",),
    "min.insync.replicas": ("min.insync.replicas",),
    "compression.type": ("compression.type",),
    "compression.gzip.level": ("compression.gzip.level",),
    "compression.lz4.level": ("compression.lz4.level",),
    "compression.zstd.level": ("compression.zstd.level",),
    "preallocate": ("log.preallocate",),
    "message.format.version": ("log.message.format.version",),
    "message.timestamp.type": ("log.message.timestamp.type",),
    "message.timestamp.difference.max.ms": ("log.message.timestamp.difference.max.ms",),
    "message.timestamp.before.max.ms": ("log.message.timestamp.before.max.ms",),
    "message.timestamp.after.max.ms": ("log.message.timestamp.after.max.ms",),
    "message.downconversion.enable": ("log.message.downconversion.enable",),
    "local.retention.ms": ("log.local.retention.ms",),
    "local.retention.bytes": ("log.local.retention.bytes",),
}
# Kafka 3.9's KafkaConfig defaults of those broker keys (the ones it has: no default for
# log.retention.ms, log.roll.ms, log.flush.interval.ms, ...)
BROKER_DEFAULTS = {
    "log.segment.bytes": "1073741824", "log.roll.hours": "168", "log.roll.jitter.hours": "0",
    "log.index.size.max.bytes": "10485760", "log.flush.interval.messages": _LONG_MAX,
    "log.flush.scheduler.interval.ms": _LONG_MAX, "log.retention.bytes": "-1",
    "log.retention.hours": "168", "message.max.bytes": "1048588",
    "log.index.interval.bytes": "4096", "log.cleaner.delete.retention.ms": "86400000",
    "log.cleaner.min.compaction.lag.ms": "0", "log.cleaner.max.compaction.lag.ms": _LONG_MAX,
    "log.segment.delete.delay.ms": "60000", "log.cleaner.min.cleanable.ratio": "0.5",
    "log.cleanup.policy": "delete", "unclean.leader.election.enable": "false",
    "min.insync.replicas": "1", "compression.type": "producer", "compression.gzip.level": "-1",
    "compression.lz4.level": "9", "compression.zstd.level": "3", "log.preallocate": "false",
    "log.message.format.version": "3.0-IV1", "log.message.timestamp.type": "CreateTime",
    "log.message.timestamp.difference.max.ms": _LONG_MAX,
    "log.message.timestamp.before.max.ms": _LONG_MAX,
    "log.message.timestamp.after.max.ms": _LONG_MAX,
    "log.message.downconversion.enable": "true", "log.local.retention.ms": "-2",
    "log.local.retention.bytes": "-2",
}


class BrokerDynamicConfig:
    """This broker's dynamic log.* defaults over its static ones; `topic_defaults` is the
    broker's live dict (the replica manager's default_topic_config), updated in place."""

    def __init__(self, broker_id: int, topic_defaults: dict, lock):
        self.broker_id, self.topic_defaults, self.lock = broker_id, topic_defaults, lock
        self.static = dict(topic_defaults)
        self.per_broker: dict[str, str] = {}
        self.cluster_default: dict[str, str] = {}

    def reload(self, store: ZkStore) -> None:
        per = {k: v for k, v in read_entity(store, f"brokers/{self.broker_id}").items()
               if k in DYNAMIC_KEYS or k in STORED_ONLY}
        dflt = {k: v for k, v in read_entity(store, f"brokers/{DEFAULT_ENTITY}").items()
                if k in DYNAMIC_KEYS or k in STORED_ONLY}
        merged = {**self.static, **topic_defaults_from_broker_config(
            {k: v for k, v in {**dflt, **per}.items() if k in DYNAMIC_KEYS})}
        with self.lock:
            self.per_broker, self.cluster_default = per, dflt
            self.topic_defaults.clear()
            self.topic_defaults.update(merged)

    def topic_synonyms(self, topic_name: str) -> tuple[tuple[str, str, int], ...]:
        """The broker-level synonyms of a topic config, most specific first: Kafka's
        ConfigHelper.configSynonyms over the broker keys behind it (per-broker dynamic,
        cluster-default dynamic, static, Kafka's default), cut before the first entry of
        the finest key (Kafka's dropWhile: log.retention.hours=168 alone is no synonym of
        retention.ms). A static value is named by its finest key in the topic's unit (the
        start config is kept in topic units)."""
        names = TOPIC_SYNONYMS.get(topic_name, ())
        static = {names[0]: str(self.static[topic_name])} \
            if names and topic_name in self.static else {}
        found = [(n, str(values[n]), source) for source, values in (
            (DYNAMIC_BROKER, self.per_broker), (DYNAMIC_DEFAULT_BROKER, self.cluster_default),
            (STATIC_BROKER, static), (DEFAULT, BROKER_DEFAULTS)) for n in names if n in values]
        while found and found[0][0] != names[0]:
            found.pop(0)
        return tuple(found)

    def entries(self, per_broker: bool, keys) -> list[ConfigEntry]:
        """DescribeConfigs of the dynamic keys: this broker's (per_broker) with every level
        as synonyms, most specific first; or the cluster default's entity alone."""
        out = []
        for key, topic_name in sorted(DYNAMIC_KEYS.items()):
            if keys is not None and key not in keys:
                continue
            levels = [(DYNAMIC_DEFAULT_BROKER, self.cluster_default.get(key))]
            if per_broker:
                static = self.static.get(topic_name)
                default = normalize_topic_config({topic_name: CONFIG_DEFS[topic_name].default}
                                                 )[topic_name]
                levels = [(DYNAMIC_BROKER, self.per_broker.get(key)), *levels,
                          (STATIC_BROKER, None if static is None else str(static)),
                          (DEFAULT, default)]
            synonyms = tuple((key, v, src) for src, v in levels if v is not None)
            if not synonyms:
                continue
            _name, value, source = synonyms[0]
            out.append(ConfigEntry(key, value, False, source == DEFAULT, source, False,
                                   CONFIG_DEFS[topic_name].doc, synonyms))
        for key in sorted(STORED_ONLY):
            if keys is not None and key not in keys:
                continue
            levels = ([(DYNAMIC_BROKER, self.per_broker.get(key))] if per_broker else []) + [
                (DYNAMIC_DEFAULT_BROKER, self.cluster_default.get(key))]
            synonyms = tuple((key, v, src) for src, v in levels if v is not None)
            if synonyms:
                out.append(ConfigEntry(key, synonyms[0][1], False, False, synonyms[0][2], False,
                                       None, synonyms))
        return out
