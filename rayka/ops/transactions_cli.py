"""`rayka transactions list | describe <id> | describe-producers <topic> <p> | find-hanging
[--topic T] | abort <topic> <p> --start-offset N`: Kafka's kafka-transactions.sh habits
over rayka's Admin (rayka/client/admin.py).

Rules:
- `list` prints every transaction the coordinators hold (id, producer id, state,
  coordinator broker), filtered by `--state` (Kafka's state names: Ongoing,
  PrepareCommit, CompleteAbort, ...) and `--producer-id`; `describe` one transactional
  id; `describe-producers` the active producers of a partition (an open transaction's
  first offset is what `abort` needs); `find-hanging` the open transactions, older than
  --max-transaction-timeout minutes, that no coordinator will finish (Kafka's
  find-hanging: each leader asked once); `abort` writes an ABORT marker for the hanging
  transaction that starts at --start-offset (one its coordinator no longer finishes).
- `--json` for scripts. Errors are the Admin's typed Kafka errors: one line from `rayka`
  (TRANSACTIONAL_ID_NOT_FOUND, INVALID_TXN_STATE, ...).
"""

from __future__ import annotations

import json


def add_parser(sub, command) -> None:
    """`command(name, help)` makes a subcommand with the cluster options (rayka/cli.py)."""
    t = command("transactions", "transactions: list, describe, producers, abort hanging ones")
    tsub = t.add_subparsers(dest="transactions_command", required=True, parser_class=type(t))
    p = tsub.add_parser("list", help="every transaction the coordinators hold")
    p.add_argument("--state", action="append", default=[], help="only this state (repeatable)")
    p.add_argument("--producer-id", type=int, action="append", default=[])
    p.add_argument("--json", action="store_true")
    p = tsub.add_parser("describe", help="one transactional id's state and partitions")
    p.add_argument("transactional_id")
    p.add_argument("--json", action="store_true")
    p = tsub.add_parser("describe-producers", help="a partition's active producers")
    p.add_argument("topic")
    p.add_argument("partition", type=int)
    p.add_argument("--json", action="store_true")
    p = tsub.add_parser("find-hanging", help="open transactions no coordinator will finish")
    p.add_argument("--topic", action="append", help="only this topic (repeatable; default all)")
    p.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES",
                   help="open longer than this (Kafka's default 15, its transaction.max.timeout.ms)")
    p.add_argument("--json", action="store_true")
    p = tsub.add_parser("abort", help="abort the hanging transaction starting at an offset")
    p.add_argument("topic")
    p.add_argument("partition", type=int)
    p.add_argument("--start-offset", type=int, required=True)


def run(args, cluster) -> int:
    admin = cluster.admin()
    cmd = args.transactions_command
    if cmd == "list":
        rows = admin.list_transactions(args.state, args.producer_id)
        if args.json:
            print(json.dumps(rows, indent=2))
            return 0
        print("TRANSACTIONAL-ID\tPRODUCER-ID\tSTATE\tCOORDINATOR")
        for t in rows:
            print(f"{t['transactional_id']}\t{t['producer_id']}\t{t['state']}\t"
                  f"{t['coordinator']}")
    elif cmd == "describe":
        d = admin.describe_transaction(args.transactional_id)
        if args.json:
            print(json.dumps(d, indent=2))
            return 0
        parts = ",".join(f"{t}-{p}" for t, p in d["partitions"]) or "-"
        print(f"{d['transactional_id']}\tstate {d['state']}\tproducer {d['producer_id']} "
              f"epoch {d['producer_epoch']}\ttimeout {d['transaction_timeout_ms']} ms\t"
              f"partitions {parts}")
    elif cmd == "describe-producers":
        rows = admin.describe_producers(args.topic, args.partition)
        if args.json:
            print(json.dumps(rows, indent=2))
            return 0
        print("PRODUCER-ID\tEPOCH\tLAST-SEQUENCE\tCOORDINATOR-EPOCH\tTXN-START-OFFSET")
        for p in rows:
            print("\t".join(str(p[k]) for k in ("producer_id", "producer_epoch",
                                                 "last_sequence", "coordinator_epoch",
                                                 "current_transaction_start_offset")))
    elif cmd == "find-hanging":
        rows = admin.find_hanging_transactions(
            args.topic, max_transaction_timeout_ms=args.max_transaction_timeout * 60_000)
        if args.json:
            print(json.dumps(rows, indent=2))
            return 0
        print("TOPIC\tPARTITION\tPRODUCER-ID\tPRODUCER-EPOCH\tCOORDINATOR-EPOCH\t"
              "START-OFFSET\tDURATION-MS\tTRANSACTIONAL-ID")
        for h in rows:
            print("\t".join(str(h[k]) for k in ("topic", "partition", "producer_id",
                                                 "producer_epoch", "coordinator_epoch",
                                                 "start_offset", "duration_ms",
                                                 "transactional_id")))
    else:
        done = admin.abort_transaction(args.topic, args.partition, args.start_offset)
        print(f"aborted the transaction of producer {done['producer_id']} (epoch "
              f"{done['producer_epoch']}) on {args.topic}-{args.partition} starting at "
              f"{done['start_offset']}")
    return 0
