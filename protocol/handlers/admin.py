"""Admin APIs: CreateTopics (19), DeleteTopics (20), CreatePartitions (37),
DescribeConfigs (32), IncrementalAlterConfigs (44).

Rules (Kafka's ZkAdminManager): every topic / resource gets its own error code and message;
a topic named twice in one request is INVALID_REQUEST for that name (Kafka's duplicate
rule) and is not acted on; validate_only checks everything and writes nothing; the timeout
bounds how long the broker waits for the change to be visible (leaders elected, topic
gone), and a change not visible in time is answered REQUEST_TIMED_OUT (the change stays).
DeleteTopics below v3 cannot say TOPIC_DELETION_DISABLED: INVALID_REQUEST instead
(KafkaApis.handleDeleteTopicsRequest). CreateTopics v7 answers the new topic's id;
DeleteTopics v6 names a topic by name or by id (not both: INVALID_REQUEST for the whole
request): an id this broker's metadata does not know is UNKNOWN_TOPIC_ID, a known one is
deleted as its topic, and every answer carries the name and the id.
"""

from __future__ import annotations

import collections

from protocol.api import BrokerApi, ConfigResource, TopicSpec, topic_id_text, topic_uuid
from protocol.build import build, millis
from replicas.errors import ErrorCode as E
from replicas.errors import InvalidRequest


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
        if name in dup:
            return build(key, v, "CreatableTopicResult", name=name, error_code=E.INVALID_REQUEST,
                         error_message=f"Create topics request from client contains multiple "
                                       f"entries for the topic {name}", num_partitions=-1,
                         replication_factor=-1, configs=None)
        o = outcomes[name]
        configs = tuple(build(key, v, "CreatableTopicConfigs", name=c.name, value=c.value,
                              read_only=c.read_only, config_source=c.source,
                              is_sensitive=c.sensitive) for c in o.configs) \
            if not o.error and v >= 5 else None             # configs answered from v5
        return build(key, v, "CreatableTopicResult", name=name, error_code=o.error,
                     topic_id=topic_uuid(o.topic_id),
                     error_message=o.message, topic_config_error_code=E.NONE,
                     num_partitions=o.partitions, replication_factor=o.replication_factor,
                     configs=configs)

    seen, results = set(), []
    for t in body.topics:
        if t.name not in seen:
            seen.add(t.name)
            results.append(result(t.name))
    return build(key, v, "CreateTopicsResponse", topics=tuple(results))


def delete_topics(api: BrokerApi, request, _listener: str):
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
    dup = _duplicates(names)
    outcomes = api.delete_topics([n for n in dict.fromkeys(names) if n not in dup],
                                 millis(body.timeout))
    results, seen = [], set()
    for name, topic_id in items:
        if name is None:
            code, message = E.UNKNOWN_TOPIC_ID, f"unknown topic id {topic_id}"
        elif name in seen:
            continue
        elif name in dup:
            code, message = E.INVALID_REQUEST, f"duplicate topic {name} in the request"
        else:
            code, message = outcomes[name].error, outcomes[name].message
            if code == E.TOPIC_DELETION_DISABLED and v < 3:
                code = E.INVALID_REQUEST
        if name is not None:
            seen.add(name)
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
        code, message = (E.INVALID_REQUEST, f"duplicate topic {name} in the request") \
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
    docs = bool(getattr(body, "include_documentation", False))
    results = []
    for res, _keys in resources:
        o = outcomes[res]
        entries = tuple(build(key, v, "DescribeConfigsResourceResult", name=e.name,
                              value=e.value, read_only=e.read_only, is_default=e.is_default,
                              config_source=e.source, is_sensitive=e.sensitive, synonyms=(),
                              config_type=0, documentation=e.doc if docs else None)
                        for e in o.entries)
        results.append(build(key, v, "DescribeConfigsResult", error_code=o.error,
                             error_message=o.message, resource_type=res.kind,
                             resource_name=res.name, configs=entries))
    return build(key, v, "DescribeConfigsResponse", results=tuple(results))


def incremental_alter_configs(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    resources = [(ConfigResource(r.resource_type, r.resource_name),
                  [(c.name, c.config_operation, c.value) for c in r.configs])
                 for r in body.resources]
    outcomes = api.alter_configs(resources, bool(body.validate_only))
    return build(key, v, "IncrementalAlterConfigsResponse", responses=tuple(
        build(key, v, "AlterConfigsResourceResponse", error_code=outcomes[res].error,
              error_message=outcomes[res].message, resource_type=res.kind,
              resource_name=res.name) for res, _ in resources))
