"""Where replicas live and who leads them: DescribeLogDirs (35), ElectLeaders (43),
AlterPartitionReassignments (45), ListPartitionReassignments (46).

Rules (Kafka 3.8's KafkaApis.handleDescribeLogDirsRequest, handleElectLeaders,
handleAlterPartitionReassignmentsRequest, handleListPartitionReassignmentsRequest; the
authorisation is protocol/handlers/authorized.py's):
- DescribeLogDirs: null topics = every replica the broker holds; a partition the broker
  does not hold is left out (not an error). v3+ carry a top-level error code, v4+ the
  volume's total and usable bytes.
- ElectLeaders: election type 0 preferred, 1 unclean (v0 carries none: preferred); null
  partitions = every partition in the metadata cache, and then a partition answered
  ELECTION_NOT_NEEDED is left out of the answer (Kafka's adjustedResults). A partition
  named twice is asked once (Kafka keeps a set). v1+ carry a top-level error code.
- AlterPartitionReassignments: replicas null cancels the partition's reassignment
  (NO_REASSIGNMENT_IN_PROGRESS when there is none); a partition named twice takes its last
  target (Kafka builds a map). A request-level failure (NOT_CONTROLLER, ...) is the
  top-level error with no per-partition answers.
- ListPartitionReassignments: null topics = every reassignment in progress; partitions
  asked that are not moving are left out.
- Answers group partitions by topic in the order topics were first named.
"""

from __future__ import annotations

from protocol.api import BrokerApi
from protocol.build import build, millis
from replicas.errors import ErrorCode as E
from replicas.errors import InvalidRequest

PREFERRED, UNCLEAN = 0, 1          # Kafka's ElectionType


def _by_topic(tps) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in tps:
        out.setdefault(topic, []).append(partition)
    return out


def describe_log_dirs(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    tps = None if body.topics is None else list(dict.fromkeys(
        (t.topic, p) for t in body.topics for p in t.partitions))
    dirs = api.describe_log_dirs(tps)
    results = []
    for d in dirs:
        topics = tuple(build(key, v, "DescribeLogDirsTopic", name=topic, partitions=tuple(
            build(key, v, "DescribeLogDirsPartition", partition_index=p.tp[1],
                  partition_size=p.size, offset_lag=p.offset_lag, is_future_key=p.is_future)
            for p in parts)) for topic, parts in _group(d.partitions).items())
        results.append(build(key, v, "DescribeLogDirsResult", error_code=d.error,
                             log_dir=d.path, topics=topics, total_bytes=d.total_bytes,
                             usable_bytes=d.usable_bytes))
    return build(key, v, "DescribeLogDirsResponse", error_code=E.NONE, results=tuple(results))


def _group(partitions) -> dict[str, list]:
    out: dict[str, list] = {}
    for p in partitions:
        out.setdefault(p.tp[0], []).append(p)
    return out


def elect_leaders(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    election_type = getattr(body, "election_type", PREFERRED)
    if election_type not in (PREFERRED, UNCLEAN):
        raise InvalidRequest(f"Unknown election type {election_type}")
    asked = None if body.topic_partitions is None else list(dict.fromkeys(
        (t.topic, p) for t in body.topic_partitions for p in t.partitions))
    results = api.elect_leaders(election_type, asked, millis(body.timeout))
    if asked is None:
        results = {tp: r for tp, r in results.items() if r[0] != E.ELECTION_NOT_NEEDED}
    order = asked if asked is not None else sorted(results)
    answers = tuple(
        build(key, v, "ReplicaElectionResult", topic=topic, partition_result=tuple(
            build(key, v, "PartitionResult", partition_id=p, error_code=results[(topic, p)][0],
                  error_message=results[(topic, p)][1]) for p in parts))
        for topic, parts in _by_topic(tp for tp in order if tp in results).items())
    return build(key, v, "ElectLeadersResponse", error_code=E.NONE,
                 replica_election_results=answers)


def alter_partition_reassignments(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    targets: dict = {}
    for t in body.topics:
        for p in t.partitions:
            targets[(t.name, p.partition_index)] = \
                None if p.replicas is None else tuple(p.replicas)
    results = api.alter_partition_reassignments(targets, millis(body.timeout))
    answers = tuple(
        build(key, v, "ReassignableTopicResponse", name=topic, partitions=tuple(
            build(key, v, "ReassignablePartitionResponse", partition_index=p,
                  error_code=results[(topic, p)][0], error_message=results[(topic, p)][1])
            for p in parts))
        for topic, parts in _by_topic(targets).items())
    return build(key, v, "AlterPartitionReassignmentsResponse", error_code=E.NONE,
                 error_message=None, responses=answers)


def list_partition_reassignments(api: BrokerApi, request, _listener: str):
    body, key, v = request.body, request.api_key, request.api_version
    asked = None if body.topics is None else list(dict.fromkeys(
        (t.name, p) for t in body.topics for p in t.partition_indexes))
    ongoing = {r.tp: r for r in api.list_partition_reassignments(asked)}
    order = [tp for tp in asked if tp in ongoing] if asked is not None else sorted(ongoing)
    topics = tuple(
        build(key, v, "OngoingTopicReassignment", name=topic, partitions=tuple(
            build(key, v, "OngoingPartitionReassignment", partition_index=p,
                  replicas=ongoing[(topic, p)].replicas,
                  adding_replicas=ongoing[(topic, p)].adding,
                  removing_replicas=ongoing[(topic, p)].removing) for p in parts))
        for topic, parts in _by_topic(order).items())
    return build(key, v, "ListPartitionReassignmentsResponse", error_code=E.NONE,
                 error_message=None, topics=topics)
