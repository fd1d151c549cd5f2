"""Admin APIs: CreateTopics (19), DeleteTopics (20), CreatePartitions (37),
DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44), UpdateFeatures (57).

Rules (Kafka's ZkAdminManager): every topic / resource gets its own error code and message;
a topic named twice in CreateTopics is INVALID_REQUEST for every copy, in CreatePartitions
for the name, once (KafkaApis); DeleteTopics deletes it once and answers every copy;
validate_only checks everything and writes nothing; the timeout
bounds how long the broker waits for the change to be visible (leaders elected, topic
gone), and a change not visible in time is answered REQUEST_TIMED_OUT (the change stays).
DeleteTopics below v3 cannot say TOPIC_DELETION_DISABLED: INVALID_REQUEST instead
(KafkaApis.handleDeleteTopicsRequest). CreateTopics v7 answers the new topic's id;
DeleteTopics v6 names a topic by name or by id (not both: INVALID_REQUEST for the whole
request): an id this broker's metadata does not know is UNKNOWN_TOPIC_ID, a known one is
deleted as its topic, and every answer carries the name and the id.
Configs (ConfigAdminManager.preprocess, BEFORE authorisation): a resource named twice is
INVALID_REQUEST for every copy, so is one naming a config twice, a null value (except an
incremental DELETE) or an unknown resource type; the rest are answered in the order asked.
DescribeConfigs describes a resource named twice twice, each with its own keys.
AlterConfigs replaces a topic's overrides with exactly the ones sent.
UpdateFeatures (v0-1): the cluster's finalized feature levels, all updates or none
(controller/features.py's rules); v0's AllowDowngrade reads as a safe downgrade, v1 sends
its upgrade type and may only validate. A success answers every feature NONE; an error
answers it at the top with no per-feature results (Kafka 4's UpdateFeaturesResponse.
createWithErrors).
"""

from __future__ import annotations

import collections

from protocol.api import BrokerApi, ConfigResource, TopicSpec, topic_id_text, topic_uuid
from protocol.build import build, millis
from replicas.errors import ErrorCode as E
from replicas.errors import InvalidRequest

# Kafka 3.8's ConfigResource.Type (GROUP, 32, is Kafka 4's: unknown here)
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
DELETE = 1                               # IncrementalAlterConfigs' OpType.DELETE


def _duplicates(names) -> set:
    return {n for n, c in collections.Counter(names).items() if c > 1}


# -- topics ---------------------------------------------------------------------------------------
def create_topics(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    dup = _duplicates(t.name for t in body.topics)
    specs = [TopicSpec(t.name, t.num_partitions, t.replication_factor,
                       {a.partition_index: tuple(a.broker_ids) for a in t.assignments},
                       {c.name: c.value for c in t.configs})
             for t in body.topics if t.name not in dup]
    outcomes = api.create_topics(specs, millis(body.timeout),
                                 bool(getattr(body, "validate_only", False)))

    def result(name):
        if name in dup:         # every copy answered (Kafka's multi-collection of results)
            return build(key, v, "CreatableTopicResult", name=name, error_code=E.INVALID_REQUEST,
                         error_message="Found multiple entries for this topic.",
                         num_partitions=-1, replication_factor=-1, configs=None)
        o = outcomes[name]
        configs = tuple(build(key, v, "CreatableTopicConfigs", name=c.name, value=c.value,
                              read_only=c.read_only, config_source=c.source,
                              is_sensitive=c.sensitive) for c in o.configs) \
            if not o.error and v >= 5 else None             # configs answered from v5
        return build(key, v, "CreatableTopicResult", name=name, error_code=o.error,
                     topic_id=topic_uuid(o.topic_id),
                     error_message=o.message, topic_config_error_code=o.config_error,
                     num_partitions=o.partitions, replication_factor=o.replication_factor,
                     configs=configs)

    return build(key, v, "CreateTopicsResponse",
                 topics=tuple(result(t.name) for t in body.topics))


def delete_topics(api: BrokerApi, request, _listener: str):
    """A name given twice is deleted once and answered per copy (Kafka 3.8 has no duplicate
    rule for DeleteTopics)."""
    body, key, v = request.body, request.api_key, request.api_version
    if hasattr(body, "topic_names"):
        asked = [(n, None) for n in body.topic_names]
    else:
        asked = [(t.name, topic_id_text(t.topic_id)) for t in body.topics]
        if any(n is not None and i is not None for n, i in asked):
            raise InvalidRequest("Topic name and topic ID can not both be specified.")
    ids = api.topic_ids() if any(i is not None for _, i in asked) else {}
    names_of = {i: n for n, i in ids.items()}
    # (name or None, id or None) in the order asked, ids resolved to names where known
    items = [(n if i is None else names_of.get(i), i) for n, i in asked]
    names = [n for n, _ in items if n is not None]
    outcomes = api.delete_topics(list(dict.fromkeys(names)), millis(body.timeout))
    results = []
    for name, topic_id in items:
        if name is None:
            code, message = E.UNKNOWN_TOPIC_ID, f"unknown topic id {topic_id}"
        else:
            code, message = outcomes[name].error, outcomes[name].message
            if code == E.TOPIC_DELETION_DISABLED and v < 3:
                code = E.INVALID_REQUEST
        results.append(build(key, v, "DeletableTopicResult", name=name,
                             topic_id=topic_uuid(topic_id), error_code=code,
                             error_message=message))
    return build(key, v, "DeleteTopicsResponse", responses=tuple(results))


def create_partitions(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    dup = _duplicates(t.name for t in body.topics)
    asks = [(t.name, t.count, None if t.assignments is None
             else [tuple(a.broker_ids) for a in t.assignments])
            for t in body.topics if t.name not in dup]
    outcomes = api.create_partitions(asks, millis(body.timeout), bool(body.validate_only))
    results = []
    for name in dict.fromkeys(t.name for t in body.topics):
        o = outcomes.get(name)
        code, message = (E.INVALID_REQUEST, "Duplicate topic in request.") \
            if name in dup else (o.error, o.message)
        results.append(build(key, v, "CreatePartitionsTopicResult", name=name, error_code=code,
                             error_message=message))
    return build(key, v, "CreatePartitionsResponse", results=tuple(results))


# -- configs -----------------------------------------------------------------------------------
def describe_configs(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    resources = [(ConfigResource(r.resource_type, r.resource_name),
                  None if r.configuration_keys is None else list(r.configuration_keys))
                 for r in body.resources]
    outcomes = api.describe_configs(resources)
    if len(set(res for res, _ in resources)) != len(resources):
        # a resource named twice is described twice, each with its own keys (Kafka)
        outcomes = [api.describe_configs([item])[item[0]] for item in resources]
    else:
        outcomes = [outcomes[res] for res, _ in resources]
    docs = bool(getattr(body, "include_documentation", False))
    synonyms = bool(getattr(body, "include_synonyms", False))
    results = []
    for (res, _keys), o in zip(resources, outcomes):
        entries = tuple(build(key, v, "DescribeConfigsResourceResult", name=e.name,
                              value=e.value, read_only=e.read_only, is_default=e.is_default,
                              config_source=e.source, is_sensitive=e.sensitive,
                              synonyms=tuple(build(key, v, "DescribeConfigsSynonym", name=n,
                                                   value=val, source=src)
                                             for n, val, src in e.synonyms) if synonyms else (),
                              config_type=0, documentation=e.doc if docs else None)
                        for e in o.entries)
        results.append(build(key, v, "DescribeConfigsResult", error_code=o.error,
                             error_message=o.message, resource_type=res.kind,
                             resource_name=res.name, configs=entries))
    return build(key, v, "DescribeConfigsResponse", results=tuple(results))


def _preprocess(resources, null_ok, kinds) -> dict[int, tuple[int, str]]:
    """Kafka's ConfigAdminManager.preprocess, before any authorisation: index → (error,
    message) for a resource named twice (every copy), with a config named twice, with a null
    value where `null_ok(op)` says no, or of a type neither API knows."""
    counts = collections.Counter((r.resource_type, r.resource_name) for r in resources)
    out = {}
    for i, r in enumerate(resources):
        if counts[(r.resource_type, r.resource_name)] > 1:
            out[i] = (E.INVALID_REQUEST, "Each resource must appear at most once.")
        elif _duplicates(c.name for c in r.configs):
            out[i] = (E.INVALID_REQUEST, "Error due to duplicate config keys")
        elif nulls := [c.name for c in r.configs if c.value is None and not null_ok(c)]:
            out[i] = (E.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
        elif r.resource_type not in kinds:
            out[i] = (E.INVALID_REQUEST, f"Unknown resource type {r.resource_type}")
    return out


def _alter_response(key, v, body, early, call):
    ok = [(i, r) for i, r in enumerate(body.resources) if i not in early]
    outcomes = call([r for _, r in ok]) if ok else {}
    results = []
    for i, r in enumerate(body.resources):
        if i in early:
            code, message = early[i]
        else:
            o = outcomes[ConfigResource(r.resource_type, r.resource_name)]
            code, message = o.error, o.message
        results.append(build(key, v, "AlterConfigsResourceResponse", error_code=code,
                             error_message=message, resource_type=r.resource_type,
                             resource_name=r.resource_name))
    return tuple(results)


def incremental_alter_configs(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    early = _preprocess(body.resources, lambda c: c.config_operation == DELETE,
                        (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP))
    responses = _alter_response(key, v, body, early, lambda rs: api.alter_configs(
        [(ConfigResource(r.resource_type, r.resource_name),
          [(c.name, c.config_operation, c.value) for c in r.configs]) for r in rs],
        bool(body.validate_only)))
    return build(key, v, "IncrementalAlterConfigsResponse", responses=responses)


def alter_configs(api: BrokerApi, request, _listener: str):
    """AlterConfigs (legacy): the resource's overrides are replaced by exactly the ones sent
    (ZkAdminManager.alterConfigs); broker resources answer as IncrementalAlterConfigs does."""
    body, key, v = request.body, request.api_key, request.api_version
    early = _preprocess(body.resources, lambda _c: False, (TOPIC, BROKER, CLIENT_METRICS))
    responses = _alter_response(key, v, body, early, lambda rs: api.replace_configs(
        [(ConfigResource(r.resource_type, r.resource_name),
          [(c.name, c.value) for c in r.configs]) for r in rs], bool(body.validate_only)))
    return build(key, v, "AlterConfigsResponse", responses=responses)


# -- features --------------------------------------------------------------------------------------
def update_features(api: BrokerApi, request, _listener: str):
    from controller.features import SAFE_DOWNGRADE, UPGRADE
    body, key, v = request.body, request.api_key, request.api_version
    updates = [(u.feature, int(u.max_version_level),
                int(u.upgrade_type) if v >= 1 else
                (SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE))
               for u in body.feature_updates]
    if len({name for name, _l, _t in updates}) != len(updates):
        error, message = E.INVALID_REQUEST, "Duplicate feature names in the request."
    else:
        error, message = api.update_features(updates, bool(getattr(body, "validate_only",
                                                                    False)))
    return build(key, v, "UpdateFeaturesResponse", error_code=error, error_message=message,
                 results=() if error else tuple(
                     build(key, v, "UpdatableFeatureResult", feature=name, error_code=E.NONE,
                           error_message=None) for name, _l, _t in updates))
