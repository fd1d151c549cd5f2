"""A stand-in for Kafka's `bin/kafka-topics.sh` for librdkafka's tests (test_kafka_topics):
the same flags (--bootstrap-server, --create/--alter/--delete, --topic, --partitions,
--replication-factor, --config k=v), carried out over the Kafka protocol with
confluent-kafka's AdminClient against the cluster under test. Exit 0 on success, 1 with
Kafka's error on stderr otherwise (kafka-topics.sh's habit)."""

from __future__ import annotations

import argparse
import sys

from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="kafka-topics.sh")
    parser.add_argument("--bootstrap-server", required=True)
    action = parser.add_mutually_exclusive_group(required=True)
    for name in ("create", "alter", "delete"):
        action.add_argument(f"--{name}", action="store_true")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int)
    parser.add_argument("--replication-factor", type=int)
    parser.add_argument("--config", action="append", default=[])
    args = parser.parse_args(argv)
    admin = AdminClient({"bootstrap.servers": args.bootstrap_server})
    if args.create:
        configs = dict(c.split("=", 1) for c in args.config)
        futures = admin.create_topics([NewTopic(args.topic, args.partitions or -1,
                                                args.replication_factor or -1, config=configs)])
    elif args.alter:
        futures = admin.create_partitions([NewPartitions(args.topic, args.partitions)])
    else:
        futures = admin.delete_topics([args.topic])
    try:
        for future in futures.values():
            future.result(30)
    except Exception as exc:         # KafkaException: the broker's error, as the tool prints it
        print(f"Error while executing topic command : {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
