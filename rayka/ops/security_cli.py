"""`rayka users add|delete|list` and `rayka acls add|remove|list`: Kafka's kafka-configs (SCRAM
users) and kafka-acls habits over rayka's Admin (rayka/client/admin.py).

Rules:
- `users add NAME` takes the password from `--password-file` (its first line) or, without
  it, from stdin (one line), never from the command line (it would show in `ps`); it sets
  credentials for every SCRAM mechanism asked (`--mechanism`, repeatable; default both
  SCRAM-SHA-256 and SCRAM-SHA-512) with `--iterations` (4096..16384, Kafka's bounds).
- `acls add` needs one resource (`--topic`, `--group`, `--cluster`, `--transactional-id`),
  one or more principals (`--allow-principal` / `--deny-principal`, "User:name"), one or
  more `--operation`s (Kafka's names: Read, Write, Create, Delete, Alter, Describe,
  ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All), `--host` (default
  "*") and `--resource-pattern-type` literal|prefixed (default literal), as kafka-acls.
  `acls remove` takes the same options as a filter (omitted ones match anything);
  `acls list` prints every binding matching them, one per line.
- Errors are one line: INVALID_REQUEST for a bad binding, INVALID_CONFIG for a bad user.
"""

from __future__ import annotations

import json
import re
import sys

from replicas.errors import InvalidConfig, InvalidRequest

RESOURCES = (("topic", "TOPIC"), ("group", "GROUP"), ("transactional_id", "TRANSACTIONAL_ID"))


def add_parser(sub, command) -> None:
    """`command(name, help)` makes a subcommand with the cluster options (rayka/cli.py)."""
    u = command("users", "SCRAM users for SASL listeners: add, delete, list")
    usub = u.add_subparsers(dest="users_command", required=True, parser_class=type(u))
    p = usub.add_parser("add", help="set a user's SCRAM credentials (password from a file "
                                    "or stdin)")
    p.add_argument("user")
    p.add_argument("--password-file", help="read the password from this file's first line")
    p.add_argument("--mechanism", action="append", choices=["SCRAM-SHA-256", "SCRAM-SHA-512"])
    p.add_argument("--iterations", type=int, default=4096)
    p = usub.add_parser("delete", help="remove a user's credentials")
    p.add_argument("user")
    usub.add_parser("list", help="users and the mechanisms they have credentials for")

    a = command("acls", "Kafka ACLs (authorizer.class.name): add, remove, list")
    asub = a.add_subparsers(dest="acls_command", required=True, parser_class=type(a))
    for name, text in (("add", "add ACLs"), ("remove", "remove the ACLs matching"),
                       ("list", "list the ACLs matching")):
        p = asub.add_parser(name, help=text)
        p.add_argument("--topic")
        p.add_argument("--group")
        p.add_argument("--transactional-id")
        p.add_argument("--cluster", action="store_true")
        p.add_argument("--resource-pattern-type", default=None,
                       choices=["literal", "prefixed", "any", "match"])
        p.add_argument("--allow-principal", action="append", default=[])
        p.add_argument("--deny-principal", action="append", default=[])
        p.add_argument("--operation", action="append", default=[])
        p.add_argument("--host", default=None)
        p.add_argument("--json", action="store_true")


def run_users(args, cluster) -> int:
    admin = cluster.admin()
    if args.users_command == "add":
        password = _password(args.password_file)
        admin.add_user(args.user, password, mechanisms=tuple(args.mechanism or ()) or None,
                       iterations=args.iterations)
        print(f"set SCRAM credentials of user {args.user}")
    elif args.users_command == "delete":
        if not admin.delete_user(args.user):
            raise InvalidConfig(f"user {args.user} has no credentials")
        print(f"deleted user {args.user}")
    else:
        for user, mechs in admin.list_users().items():
            print(f"{user}\t{','.join(mechs)}")
    return 0


def _password(path: str | None) -> str:
    if path:
        with open(path) as f:
            line = f.readline()
    else:
        line = sys.stdin.readline()
    password = line.rstrip("\r\n")
    if not password:
        raise InvalidConfig("empty password (give --password-file or one line on stdin)")
    return password


def run_acls(args, cluster) -> int:
    from protocol.security import acl as a
    admin = cluster.admin()
    rtype, name = _resource(args, a)
    if args.acls_command == "add":
        bindings = _bindings(args, a, rtype, name)
        for b, (code, message) in zip(bindings, admin.create_acls(bindings)):
            if code:
                raise InvalidRequest(f"{_text(b)}: {message}")
            print(f"added {_text(b)}")
        return 0
    filters = _filters(args, a, rtype, name)
    if args.acls_command == "remove":
        for code, message, removed in admin.delete_acls(filters):
            if code:
                raise InvalidRequest(message or "delete failed")
            for b in removed:
                print(f"removed {_text(b)}")
        return 0
    found = sorted({b for f in filters for b in admin.list_acls(f)}, key=_text)
    if args.json:
        print(json.dumps([_json(b) for b in found], indent=2))
    else:
        for b in found:
            print(_text(b))
    return 0


def _resource(args, a):
    given = [(t, getattr(args, n)) for n, t in RESOURCES if getattr(args, n) is not None]
    if args.cluster:
        given.append(("CLUSTER", a.CLUSTER_NAME))
    if len(given) > 1:
        raise InvalidRequest("give at most one of --topic, --group, --transactional-id, --cluster")
    if not given:
        if args.acls_command == "add":
            raise InvalidRequest("acls add needs a resource: --topic, --group, "
                                 "--transactional-id or --cluster")
        return a.ResourceType.ANY, None
    return a.ResourceType[given[0][0]], given[0][1]


def _operation(a, text: str):
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", text.strip()).upper()
    try:
        op = a.AclOperation[snake]
    except KeyError:
        raise InvalidRequest(f"unknown operation {text!r} (Kafka's names: Read, Write, Create, "
                             "Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                             "AlterConfigs, IdempotentWrite, All)") from None
    if op in (a.AclOperation.ANY, a.AclOperation.UNKNOWN):
        raise InvalidRequest(f"operation {text!r} cannot be used in an ACL")
    return op


def _bindings(args, a, rtype, name) -> list:
    if not args.operation:
        raise InvalidRequest("acls add needs at least one --operation")
    principals = [(p, a.AclPermissionType.ALLOW) for p in args.allow_principal] + \
                 [(p, a.AclPermissionType.DENY) for p in args.deny_principal]
    if not principals:
        raise InvalidRequest("acls add needs --allow-principal or --deny-principal")
    pattern = a.ResourcePattern(rtype, name, a.PatternType[
        (args.resource_pattern_type or "literal").upper()])
    out = []
    for principal, permission in principals:
        for op in args.operation:
            b = a.AclBinding(pattern, a.AccessControlEntry(principal, args.host or "*",
                                                           _operation(a, op), permission))
            problem = a.validate_binding(b)
            if problem:
                raise InvalidRequest(f"{_text(b)}: {problem[1]}")
            out.append(b)
    return out


def _filters(args, a, rtype, name) -> list:
    pattern = a.PatternType[(args.resource_pattern_type or
                             ("literal" if name is not None else "any")).upper()]
    principals = [(p, a.AclPermissionType.ALLOW) for p in args.allow_principal] + \
                 [(p, a.AclPermissionType.DENY) for p in args.deny_principal] or \
                 [(None, a.AclPermissionType.ANY)]
    ops = [_operation(a, op) for op in args.operation] or [a.AclOperation.ANY]
    return [a.AclBindingFilter(rtype, name, pattern, principal, args.host, op, permission)
            for principal, permission in principals for op in ops]


def _text(b) -> str:
    p, e = b.pattern, b.entry
    return (f"{e.permission.name.title()} {e.principal} {e.operation.name} from {e.host} on "
            f"{p.resource_type.name}:{p.pattern_type.name}:{p.name}")


def _json(b) -> dict:
    p, e = b.pattern, b.entry
    return {"resource_type": p.resource_type.name, "name": p.name,
            "pattern_type": p.pattern_type.name, "principal": e.principal, "host": e.host,
            "operation": e.operation.name, "permission": e.permission.name}
