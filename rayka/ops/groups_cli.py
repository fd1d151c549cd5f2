"""`rayka groups list | describe <g> | delete <g> | reset-offsets <g> --topic t ... |
delete-offsets <g> --topic t [--partition p]`: Kafka's
kafka-consumer-groups habits over rayka's Admin (rayka/client/admin.py).

Rules:
- `list` prints group, state, protocol type and group type ("classic", or "consumer" for
  KIP-848's protocol); `describe` covers both (a consumer group's protocol is its
  server-side assignor).
- `describe` prints, per partition, the committed offset, the end offset, the lag and the
  member that owns it (the columns kafka-consumer-groups --describe prints); `--json` for
  scripts.
- `reset-offsets` works only on an inactive group (NON_EMPTY_GROUP otherwise, as Kafka's
  tool refuses) and needs exactly one of --to-earliest, --to-latest, --to-offset N.
- `delete-offsets` is kafka-consumer-groups --delete-offsets (OffsetDelete): per partition
  "deleted" or Kafka's error name (GROUP_SUBSCRIBED_TO_TOPIC while a member consumes it).
- Share groups (KIP-932) as kafka-share-groups: `describe` prints each partition's start
  offset (SPSO) in CURRENT-OFFSET and its lag (records not yet acknowledged), the readers
  comma-separated; `reset-offsets` moves an empty share group's start offsets;
  `delete-offsets` forgets its state on the whole topic (no --partition: Kafka's
  DeleteShareGroupOffsets takes topics), per topic "deleted" or Kafka's error name.
- Errors are the Admin's typed Kafka errors: one line from `rayka` (GROUP_ID_NOT_FOUND,
  NON_EMPTY_GROUP, UNKNOWN_TOPIC_OR_PARTITION ...).
"""

from __future__ import annotations

import json

from replicas.errors import ErrorCode, InvalidRequest


def add_parser(sub, command) -> None:
    """`command(name, help)` makes a subcommand with the cluster options (rayka/cli.py)."""
    g = command("groups", "consumer and share groups: list, describe (lag), delete, reset "
                "offsets")
    gsub = g.add_subparsers(dest="groups_command", required=True, parser_class=type(g))
    gsub.add_parser("list", help="every group the coordinators know, with its state")
    p = gsub.add_parser("describe", help="members, committed offsets, end offsets and lag")
    p.add_argument("group")
    p.add_argument("--json", action="store_true")
    p = gsub.add_parser("delete", help="delete an empty group and its committed offsets")
    p.add_argument("group")
    p = gsub.add_parser("reset-offsets", help="move an inactive group's committed offsets")
    p.add_argument("group")
    p.add_argument("--topic", required=True)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--to-earliest", action="store_true")
    where.add_argument("--to-latest", action="store_true")
    where.add_argument("--to-offset", type=int)
    p.add_argument("--partition", type=int, action="append",
                   help="only these partitions (repeatable; default all)")
    p = gsub.add_parser("delete-offsets", help="forget committed offsets of a topic "
                        "(refused while a member consumes it)")
    p.add_argument("group")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, action="append",
                   help="only these partitions (repeatable; default all)")


def run(args, cluster) -> int:
    admin = cluster.admin()
    cmd = args.groups_command
    if cmd == "list":
        for g in admin.list_groups():
            print(f"{g['group']}\t{g['state']}\t{g['protocol_type'] or '-'}\t{g['type']}")
    elif cmd == "describe":
        d = admin.describe_group(args.group)
        if args.json:
            print(json.dumps(d, indent=2))
            return 0
        print(f"group {d['group']}  type {d['type']}  state {d['state']}  "
              f"protocol {d['protocol'] or '-'}  members {len(d['members'])}")
        print("TOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID")
        for p in d["partitions"]:
            print("\t".join(str(x if x is not None else "-") for x in (
                p["topic"], p["partition"], p["committed"], p["end"], p["lag"], p["owner"])))
    elif cmd == "delete":
        admin.delete_group(args.group)
        print(f"deleted group {args.group}")
    elif cmd == "delete-offsets" and admin.is_share_group(args.group):
        if args.partition:
            raise InvalidRequest("a share group's offsets are deleted per topic: no --partition")
        results = admin.delete_share_group_offsets(args.group, [args.topic])
        for topic, code in sorted(results.items()):
            print(f"{topic}\t{'deleted' if not code else ErrorCode(code).name}")
    elif cmd == "delete-offsets":
        parts = args.partition or [p.partition for p in admin.describe_topic(args.topic)]
        results = admin.delete_offsets(args.group, [(args.topic, p) for p in parts])
        for (topic, partition), code in sorted(results.items()):
            print(f"{topic}\t{partition}\t{'deleted' if not code else ErrorCode(code).name}")
    else:
        to = "earliest" if args.to_earliest else "latest" if args.to_latest else args.to_offset
        new = admin.reset_offsets(args.group, args.topic, to, args.partition)
        for (topic, partition), offset in sorted(new.items()):
            print(f"{topic}\t{partition}\t{offset}")
    return 0
