"""A broker actor's config dict, split by who consumes it (Kafka's KafkaConfig, flattened).

Rules:
- Keys come dotted (Kafka's names, `rayka start --config`) or underscored (Python keywords
  to `start_local`); both mean the same key, and a dotted key is never rewritten
  (replicas/config_keys.py: `listener.name.sasl_ssl.*` keeps its listener). A broker's own static keys (`broker_configs`
  of start_local, `rayka start --broker-config`; broker.rack) are laid over the
  cluster-wide ones (`broker_config_for`).
- Shell settings: `tick_ms` (100), `metrics_interval_s`, `zk_session_timeout_ms` (3000).
- Listener settings, broker.rack and replica.selector.class go to KafkaConfig
  (actors/kafka_api.py; the selector is handed on to the replica manager); security
  settings (ssl.*, sasl.*, listener.name.*, authorizer.class.name, super.users, ...) to
  SecurityConfig (actors/security.py); group.*, offsets.*, offset.*
  to the group coordinator's config; transaction.*, transactional.id.expiration.ms to the
  transaction coordinator's; `transaction.partition.verification.enable` (KIP-890, true)
  and replica-manager settings (`replica.lag.time.max.ms`,
  `max.fetch.bytes`, `hw.checkpoint.interval.ms`, `log.retention.check.interval.ms`,
  `log.cleaner.enable`, `log.cleaner.backoff.ms`, `log.max.open.files`: the LRU of open
  segment files, half the process's descriptor limit by default) to BrokerConfig;
  `log.flush.before.ack` (false; rayka's: no acks=all produce is answered before every ISR
  replica fsynced it, replicas/replica_manager.py) and
  `log.dirs` (over `log.dir`; comma-separated) too: each broker keeps its logs in
  `broker-<id>/` under each listed directory (default: the broker's data dir alone).
- Everything else is a topic-config default; Kafka's broker names of topic defaults
  (`log.retention.ms`, `log.segment.bytes`, `log.roll.ms`, ...) map to the topic names.
- A group config that does not parse raises InvalidConfig; so does replication over a SASL
  listener without the credentials for it (as Kafka refuses to start).
- Who this broker is when it replicates (`inter_broker_principal`, Kafka's rules): over SASL
  the user of its jaas config, over SSL with client authentication its certificate's
  subject, else User:ANONYMOUS. With an authorizer that principal needs ClusterAction on
  the cluster (a super user has it); `replication_refusal` says in one line when it has not
  and what fixes it.
"""

from __future__ import annotations

import dataclasses
import resource
import ssl
import tempfile
from dataclasses import dataclass

from actors import metrics
from actors.kafka_api import KafkaConfig
from actors.security import SecurityConfig
from coordinator.config import GroupCoordinatorConfig
from transactions.config import TransactionCoordinatorConfig
from protocol.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from protocol.security.authorizer import Authorizer
from protocol.security.session import SASL_PROTOCOLS, tls_principal
from replicas.config_keys import dotted_key, dotted_keys, underscored_key
from replicas.errors import InvalidConfig
from replicas.replica_types import topic_defaults_from_broker_config

BROKER_KEYS = {"replica.lag.time.max.ms", "max.fetch.bytes", "hw.checkpoint.interval.ms",
               "log.retention.check.interval.ms", "log.cleaner.backoff.ms", "log.max.open.files"}


@dataclass(frozen=True)
class BrokerSettings:
    tick_ms: int
    metrics_interval_s: float
    zk_session_timeout_ms: int
    kafka: KafkaConfig
    group: GroupCoordinatorConfig
    replica_manager: dict            # BrokerConfig keyword arguments
    topic_defaults: dict
    security: SecurityConfig = SecurityConfig()
    txn: TransactionCoordinatorConfig = TransactionCoordinatorConfig()


def pop_group_config(config: dict) -> GroupCoordinatorConfig:
    """The group coordinator's broker configs (group.*, offsets.*, offset.*), dotted or
    underscored, taken out of `config`."""
    names = {f.name for f in dataclasses.fields(GroupCoordinatorConfig)}
    props = {}
    for key in list(config):
        name = underscored_key(key)
        if name in names:
            props[dotted_key(name)] = config.pop(key)
    try:
        return GroupCoordinatorConfig.from_properties(props)
    except (TypeError, ValueError) as exc:
        raise InvalidConfig(f"group coordinator config: {exc}") from None


def pop_txn_config(config: dict, group: GroupCoordinatorConfig) -> TransactionCoordinatorConfig:
    """The transaction coordinator's broker configs (transaction.*, transactional.id.*),
    dotted or underscored, taken out of `config`; offsets.topic.num.partitions is the
    group coordinator's (AddOffsetsToTxn finds a group's partition with it)."""
    names = {f.name for f in dataclasses.fields(TransactionCoordinatorConfig)}
    props = {}
    for key in list(config):
        name = underscored_key(key)
        if name in names and name != "offsets_topic_num_partitions":
            props[dotted_key(name)] = config.pop(key)
    props["offsets.topic.num.partitions"] = group.offsets_topic_num_partitions
    try:
        return TransactionCoordinatorConfig.from_properties(props)
    except (TypeError, ValueError) as exc:
        raise InvalidConfig(f"transaction coordinator config: {exc}") from None


def default_max_open_files() -> int:
    """Half the process's descriptor limit for segment files: the rest is for sockets
    (clients, Ray, ZooKeeper), index writes and the cleaner."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(64, (soft if soft != resource.RLIM_INFINITY else 1 << 20) // 2)


def broker_config_for(shared: dict, own: dict | None) -> dict:
    """One broker's config: the cluster-wide keys with its own static keys laid over them
    (a key given dotted in one and underscored in the other is the same key: its own
    wins)."""
    if not own:
        return dict(shared)
    mine = {dotted_key(k) for k in own}
    return {**{k: v for k, v in shared.items() if dotted_key(k) not in mine}, **own}


def log_dirs_of(log_dirs, log_dir) -> tuple[str, ...]:
    """Kafka's log.dirs (comma-separated, or a list) over log.dir; () for neither (the
    broker's data dir). Each broker keeps its logs in `broker-<id>/` under each one, so
    one cluster-wide setting serves every broker of a machine."""
    given = log_dirs if log_dirs not in (None, "") else log_dir
    if given in (None, ""):
        return ()
    items = given.split(",") if isinstance(given, str) else list(given)
    dirs = tuple(str(d).strip() for d in items if str(d).strip())
    if not dirs:
        raise InvalidConfig(f"log.dirs {given!r} names no directory")
    return dirs


def split_broker_config(config: dict | None) -> BrokerSettings:
    config = dict(config or {})
    tick_ms = int(config.pop("tick_ms", 100))
    metrics_interval_s = float(config.pop("metrics_interval_s", metrics.DEFAULT_INTERVAL_S))
    config.setdefault("hw_checkpoint_interval_ms", 1000)
    session_ms = int(config.pop("zk_session_timeout_ms", 3000))
    security = SecurityConfig.pop_from(config)
    kafka = KafkaConfig.pop_from(config)
    group = pop_group_config(config)
    txn = pop_txn_config(config, group)
    config = dotted_keys(config)
    log_dirs = log_dirs_of(config.pop("log.dirs", None), config.pop("log.dir", None))
    replica_manager = {underscored_key(k): int(config.pop(k)) for k in list(config)
                       if k in BROKER_KEYS}
    if log_dirs:
        replica_manager["log_dirs"] = log_dirs
    replica_manager.setdefault("log_max_open_files", default_max_open_files())
    # a KafkaConfig key (DescribeConfigs lists it there) that the replica manager applies
    replica_manager["replica_selector_class"] = kafka.replica_selector_class
    for flag in ("log.cleaner.enable", "transaction.partition.verification.enable",
                 "log.flush.before.ack"):
        if flag in config:
            replica_manager[underscored_key(flag)] = \
                str(config.pop(flag)).strip().lower() in ("true", "1")
    topic_defaults = topic_defaults_from_broker_config(config)
    settings = BrokerSettings(tick_ms, metrics_interval_s, session_ms, kafka, group,
                              replica_manager, topic_defaults, security, txn)
    inter_broker_principal(settings)          # InvalidConfig: SASL without credentials
    return settings


def inter_broker_endpoint(settings: BrokerSettings):
    name = settings.kafka.inter_broker_listener()
    return next(e for e in settings.kafka.bind_endpoints() if e.listener == name)


def inter_broker_principal(settings: BrokerSettings) -> str | None:
    """The principal another broker's inter-broker listener sees when this broker fetches
    from it; None when it cannot be told (a certificate that does not load)."""
    endpoint, sec = inter_broker_endpoint(settings), settings.security
    if endpoint.security_protocol in SASL_PROTOCOLS:
        return f"User:{sec.inter_broker_credentials(endpoint.listener)[1]}"
    if endpoint.security_protocol == "SSL" and \
            (sec.get("ssl.client.auth", endpoint.listener) or "none").lower() != "none":
        return _certificate_principal(sec, endpoint.listener)
    return "User:ANONYMOUS"


def _certificate_principal(sec: SecurityConfig, listener: str) -> str | None:
    location = sec.get("ssl.keystore.location", listener)
    chain = sec.get("ssl.keystore.certificate.chain", listener)
    try:
        if location:
            return tls_principal(ssl._ssl._test_decode_cert(location))
        if chain:     # the stdlib decodes certificates from files only
            with tempfile.NamedTemporaryFile("w", suffix=".pem") as f:
                f.write(chain)
                f.flush()
                return tls_principal(ssl._ssl._test_decode_cert(f.name))
    except (OSError, ssl.SSLError):
        pass
    return None


def replication_refusal(settings: BrokerSettings, bindings) -> str | None:
    """One line when an authorizer is on and this broker's inter-broker principal may not
    replicate (neither a super user nor granted ClusterAction by `bindings`, the cluster's
    ACLs), naming Kafka's configs that fix it; None when it may, or cannot be told."""
    sec = settings.security
    if not sec.authorizer:
        return None
    principal = inter_broker_principal(settings)
    if principal is None:
        return None
    authorizer = Authorizer(sec.super_users, sec.allow_everyone_if_no_acl_found)
    authorizer.replace_all(bindings)
    if authorizer.authorize(principal, "*", AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER,
                            CLUSTER_NAME):
        return None
    listener = inter_broker_endpoint(settings).listener
    return (f"followers replicate over {listener} as {principal}, which is not in super.users "
            f"and has no ClusterAction on the cluster: leaders will refuse them and the ISR "
            f"will shrink to the leaders. Fix: inter.broker.listener.name=<a SASL listener>, "
            f"sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512 and listener.name.<listener>."
            f"scram-sha-512.sasl.jaas.config naming a broker user listed in super.users, or "
            f"`rayka acls add --allow-principal {principal} --operation ClusterAction "
            f"--cluster`")
