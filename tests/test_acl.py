"""protocol/security/{acl,authorizer,acl_znodes}.py: Kafka's ACL model, AclAuthorizer's
decisions and its ZooKeeper format, checked against tables taken from Kafka's sources and a
plain reference implementation."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.security.acl import (
    CLUSTER_NAME, WILDCARD, WILDCARD_PRINCIPAL, AccessControlEntry, AclBinding,
    AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourcePattern,
    ResourceType, operation_name, parse_operation, parse_permission, parse_principal,
    parse_resource_type, permission_name, resource_type_name, supported_operations,
    validate_binding)
from protocol.security.acl_znodes import (
    ACL_CHANGES_EXTENDED, ACL_CHANGES_LITERAL, CHANGE_PREFIX, acl_path, acl_paths, change_path,
    decode_acls, decode_change, encode_acls, encode_change, pattern_of_path)
from protocol.security.authorizer import Authorizer

pytestmark = pytest.mark.unit

Op, Rt, Pt, Perm = AclOperation, ResourceType, PatternType, AclPermissionType
T, G, C = Rt.TOPIC, Rt.GROUP, Rt.CLUSTER
LIT, PRE = Pt.LITERAL, Pt.PREFIXED
ALLOW, DENY = Perm.ALLOW, Perm.DENY
ALICE, BOB, ADMIN = "User:alice", "User:bob", "User:admin"


def acl(rt=T, name="foo", pt=LIT, principal=ALICE, host="*", op=Op.READ, perm=ALLOW):
    return AclBinding(ResourcePattern(rt, name, pt), AccessControlEntry(principal, host, op, perm))


# -- codes and names -----------------------------------------------------------------------------
def test_codes_are_kafkas():
    assert {t.name: int(t) for t in Rt} == {
        "UNKNOWN": 0, "ANY": 1, "TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TRANSACTIONAL_ID": 5,
        "DELEGATION_TOKEN": 6, "USER": 7}
    assert {t.name: int(t) for t in Pt} == {
        "UNKNOWN": 0, "ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
    assert {t.name: int(t) for t in Op} == {
        "UNKNOWN": 0, "ANY": 1, "ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6,
        "ALTER": 7, "DESCRIBE": 8, "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10,
        "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12, "CREATE_TOKENS": 13, "DESCRIBE_TOKENS": 14}
    assert {t.name: int(t) for t in Perm} == {"UNKNOWN": 0, "ANY": 1, "DENY": 2, "ALLOW": 3}


@pytest.mark.parametrize("fn, value, name", [
    (operation_name, Op.READ, "Read"), (operation_name, Op.DESCRIBE_CONFIGS, "DescribeConfigs"),
    (operation_name, Op.IDEMPOTENT_WRITE, "IdempotentWrite"),
    (operation_name, Op.CLUSTER_ACTION, "ClusterAction"), (operation_name, Op.ALL, "All"),
    (permission_name, ALLOW, "Allow"), (permission_name, DENY, "Deny"),
    (resource_type_name, Rt.TRANSACTIONAL_ID, "TransactionalId"),
    (resource_type_name, Rt.DELEGATION_TOKEN, "DelegationToken"), (resource_type_name, T, "Topic"),
])
def test_names_as_kafka_spells_them(fn, value, name):
    assert fn(value) == name


@pytest.mark.parametrize("parse, text, expected", [
    (parse_operation, "DescribeConfigs", Op.DESCRIBE_CONFIGS),
    (parse_operation, "DESCRIBECONFIGS", Op.DESCRIBE_CONFIGS),
    (parse_operation, "describeconfigs", Op.DESCRIBE_CONFIGS),
    (parse_operation, "READ", Op.READ), (parse_operation, "read", Op.READ),
    (parse_operation, "DESCRIBE_CONFIGS", Op.UNKNOWN),      # SecurityUtils: no underscores
    (parse_operation, "Frobnicate", Op.UNKNOWN),
    (parse_permission, "Allow", ALLOW), (parse_permission, "DENY", DENY),
    (parse_permission, "maybe", Perm.UNKNOWN),
    (parse_resource_type, "TransactionalId", Rt.TRANSACTIONAL_ID),
    (parse_resource_type, "TOPIC", T), (parse_resource_type, "Nope", Rt.UNKNOWN),
])
def test_parse_names(parse, text, expected):
    assert parse(text) is expected


@pytest.mark.parametrize("enum, name_of, parse", [
    (Op, operation_name, parse_operation), (Perm, permission_name, parse_permission),
    (Rt, resource_type_name, parse_resource_type)])
def test_every_name_round_trips(enum, name_of, parse):
    assert [parse(name_of(v)) for v in enum] == list(enum)


@pytest.mark.parametrize("text, expected", [
    ("User:alice", ("User", "alice")), ("User:CN=a,O=b:c", ("User", "CN=a,O=b:c")),
    ("User:", ("User", "")), (":x", ("", "x"))])
def test_parse_principal(text, expected):
    assert parse_principal(text) == expected


@pytest.mark.parametrize("text", ["alice", "", None])
def test_parse_principal_refuses(text):
    with pytest.raises(ValueError):
        parse_principal(text)


def test_supported_operations():
    assert supported_operations(Rt.TRANSACTIONAL_ID) == {Op.DESCRIBE, Op.WRITE}
    assert Op.IDEMPOTENT_WRITE in supported_operations(C)
    assert Op.WRITE not in supported_operations(G)
    with pytest.raises(ValueError):
        supported_operations(Rt.ANY)


# -- authorize -----------------------------------------------------------------------------------
AUTHORIZE_CASES = [
    # (id, bindings, allow_everyone, (principal, host, op, type, name), expected)
    ("super user beats deny", [acl(op=Op.ALL, perm=DENY, principal=WILDCARD_PRINCIPAL)], False,
     (ADMIN, "h", Op.WRITE, T, "foo"), True),
    ("super user without ACLs", [], False, (ADMIN, "h", Op.ALTER, C, CLUSTER_NAME), True),
    ("literal allow", [acl()], False, (ALICE, "h", Op.READ, T, "foo"), True),
    ("literal other op", [acl()], False, (ALICE, "h", Op.WRITE, T, "foo"), False),
    ("literal other principal", [acl()], False, (BOB, "h", Op.READ, T, "foo"), False),
    ("literal other name", [acl()], False, (ALICE, "h", Op.READ, T, "foo2"), False),
    ("literal other type", [acl(rt=G)], False, (ALICE, "h", Op.READ, T, "foo"), False),
    ("wildcard name", [acl(name=WILDCARD)], False, (ALICE, "h", Op.READ, T, "anything"), True),
    ("wildcard name other type", [acl(rt=G, name=WILDCARD)], False,
     (ALICE, "h", Op.READ, T, "x"), False),
    ("prefixed", [acl(name="fo", pt=PRE)], False, (ALICE, "h", Op.READ, T, "foo"), True),
    ("prefixed equal to name", [acl(name="foo", pt=PRE)], False,
     (ALICE, "h", Op.READ, T, "foo"), True),
    ("prefixed longer than name", [acl(name="fooo", pt=PRE)], False,
     (ALICE, "h", Op.READ, T, "foo"), False),
    ("prefixed is not literal", [acl(name="foo", pt=PRE)], False,
     (ALICE, "h", Op.READ, T, "fo"), False),
    ("prefixed star is no wildcard", [acl(name="*", pt=PRE)], False,
     (ALICE, "h", Op.READ, T, "foo"), False),
    ("wildcard principal", [acl(principal=WILDCARD_PRINCIPAL)], False,
     (BOB, "h", Op.READ, T, "foo"), True),
    ("wildcard principal matches any principal type", [acl(principal=WILDCARD_PRINCIPAL)], False,
     ("Group:x", "h", Op.READ, T, "foo"), True),
    ("only User:* is a wildcard", [acl(principal="Group:*")], False,
     ("Group:x", "h", Op.READ, T, "foo"), False),
    ("host match", [acl(host="10.0.0.1")], False, (ALICE, "10.0.0.1", Op.READ, T, "foo"), True),
    ("host mismatch", [acl(host="10.0.0.1")], False,
     (ALICE, "10.0.0.2", Op.READ, T, "foo"), False),
    ("deny beats allow", [acl(), acl(perm=DENY)], False, (ALICE, "h", Op.READ, T, "foo"), False),
    ("deny via wildcard principal", [acl(), acl(principal=WILDCARD_PRINCIPAL, perm=DENY)], False,
     (ALICE, "h", Op.READ, T, "foo"), False),
    ("deny via prefixed", [acl(), acl(name="f", pt=PRE, perm=DENY)], False,
     (ALICE, "h", Op.READ, T, "foo"), False),
    ("deny via wildcard name", [acl(), acl(name=WILDCARD, perm=DENY)], False,
     (ALICE, "h", Op.READ, T, "foo"), False),
    ("deny ALL", [acl(), acl(op=Op.ALL, perm=DENY)], False, (ALICE, "h", Op.READ, T, "foo"), False),
    ("deny on another host", [acl(), acl(host="h2", perm=DENY)], False,
     (ALICE, "h1", Op.READ, T, "foo"), True),
    ("deny of another op", [acl(), acl(op=Op.WRITE, perm=DENY)], False,
     (ALICE, "h", Op.READ, T, "foo"), True),
    ("deny for another principal", [acl(), acl(principal=BOB, perm=DENY)], False,
     (ALICE, "h", Op.READ, T, "foo"), True),
    ("read implies describe", [acl(op=Op.READ)], False, (ALICE, "h", Op.DESCRIBE, T, "foo"), True),
    ("write implies describe", [acl(op=Op.WRITE)], False,
     (ALICE, "h", Op.DESCRIBE, T, "foo"), True),
    ("delete implies describe", [acl(op=Op.DELETE)], False,
     (ALICE, "h", Op.DESCRIBE, T, "foo"), True),
    ("alter implies describe", [acl(op=Op.ALTER)], False,
     (ALICE, "h", Op.DESCRIBE, T, "foo"), True),
    ("create does not imply describe", [acl(op=Op.CREATE)], False,
     (ALICE, "h", Op.DESCRIBE, T, "foo"), False),
    ("describe does not imply read", [acl(op=Op.DESCRIBE)], False,
     (ALICE, "h", Op.READ, T, "foo"), False),
    ("alter_configs implies describe_configs", [acl(op=Op.ALTER_CONFIGS)], False,
     (ALICE, "h", Op.DESCRIBE_CONFIGS, T, "foo"), True),
    ("describe does not imply describe_configs", [acl(op=Op.DESCRIBE)], False,
     (ALICE, "h", Op.DESCRIBE_CONFIGS, T, "foo"), False),
    ("alter_configs does not imply describe", [acl(op=Op.ALTER_CONFIGS)], False,
     (ALICE, "h", Op.DESCRIBE, T, "foo"), False),
    ("deny read does not deny describe", [acl(op=Op.WRITE), acl(op=Op.READ, perm=DENY)], False,
     (ALICE, "h", Op.DESCRIBE, T, "foo"), True),
    ("deny describe beats implied allow", [acl(op=Op.READ), acl(op=Op.DESCRIBE, perm=DENY)], False,
     (ALICE, "h", Op.DESCRIBE, T, "foo"), False),
    ("allow ALL", [acl(op=Op.ALL)], False, (ALICE, "h", Op.IDEMPOTENT_WRITE, T, "foo"), True),
    ("cluster", [acl(rt=C, name=CLUSTER_NAME, op=Op.CLUSTER_ACTION)], False,
     (ALICE, "h", Op.CLUSTER_ACTION, C, CLUSTER_NAME), True),
    ("no ACL, allow everyone", [], True, (ALICE, "h", Op.READ, T, "foo"), True),
    ("no ACL, deny everyone", [], False, (ALICE, "h", Op.READ, T, "foo"), False),
    ("ACLs elsewhere only", [acl(name="bar")], True, (ALICE, "h", Op.READ, T, "foo"), True),
    ("ACL for another principal makes the resource have ACLs", [acl(principal=BOB)], True,
     (ALICE, "h", Op.READ, T, "foo"), False),
    ("wildcard ACL for another principal too", [acl(name=WILDCARD, principal=BOB)], True,
     (ALICE, "h", Op.READ, T, "foo"), False),
    ("prefixed ACL for another principal too", [acl(name="f", pt=PRE, principal=BOB)], True,
     (ALICE, "h", Op.READ, T, "foo"), False),
]


@pytest.mark.parametrize("bindings, allow_everyone, request_, expected",
                         [c[1:] for c in AUTHORIZE_CASES], ids=[c[0] for c in AUTHORIZE_CASES])
def test_authorize(bindings, allow_everyone, request_, expected):
    a = Authorizer([ADMIN], allow_everyone)
    a.replace_all(bindings)
    assert a.authorize(*request_) is expected
    assert a.authorize(*request_) is expected                # and again, from the cache


def test_super_users_are_trimmed_and_checked():
    a = Authorizer([" User:admin ", ""])
    assert a.authorize(ADMIN, "h", Op.READ, T, "x")
    assert not a.authorize("User:admin2", "h", Op.READ, T, "x")
    with pytest.raises(ValueError):
        Authorizer(["admin"])


# -- the reference: Kafka's rules, written plainly ----------------------------------------------
def reference(bindings, supers, allow_everyone, principal, host, op, rt, name):
    if principal in supers:
        return True
    applying = []
    for b in bindings:
        p = b.pattern
        if p.resource_type != rt:
            continue
        if p.pattern_type == LIT and (p.name == name or p.name == "*"):
            applying.append(b.entry)
        if p.pattern_type == PRE and name.startswith(p.name):
            applying.append(b.entry)
    if not applying:
        return allow_everyone

    def matches(e, ops, perm):
        return (e.permission == perm and e.principal in (principal, "User:*")
                and e.host in (host, "*") and (e.operation in ops or e.operation == Op.ALL))

    if any(matches(e, {op}, DENY) for e in applying):
        return False
    ops = {op}
    if op == Op.DESCRIBE:
        ops |= {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}
    if op == Op.DESCRIBE_CONFIGS:
        ops |= {Op.ALTER_CONFIGS}
    return any(matches(e, ops, ALLOW) for e in applying)


NAMES = ["a", "ab", "abc", "b", "*"]
REQUEST_NAMES = ["a", "ab", "abc", "abd", "b", "ba", "*"]
OPS = [Op.READ, Op.WRITE, Op.DELETE, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS,
       Op.CREATE]
bindings_st = st.lists(st.builds(
    acl, rt=st.sampled_from([T, G]), name=st.sampled_from(NAMES), pt=st.sampled_from([LIT, PRE]),
    principal=st.sampled_from([ALICE, BOB, WILDCARD_PRINCIPAL]),
    host=st.sampled_from(["h1", "h2", "*"]), op=st.sampled_from(OPS + [Op.ALL]),
    perm=st.sampled_from([ALLOW, DENY])), max_size=8)
requests_st = st.lists(st.tuples(
    st.sampled_from([ALICE, BOB, "User:carol", "Group:x", ADMIN]), st.sampled_from(["h1", "h2"]),
    st.sampled_from(OPS), st.sampled_from([T, G]), st.sampled_from(REQUEST_NAMES)),
    min_size=1, max_size=12)


@settings(max_examples=400, deadline=None)
@given(bindings=bindings_st, requests=requests_st, allow_everyone=st.booleans(),
       supers=st.sampled_from([(), (ADMIN,)]))
def test_authorize_matches_reference(bindings, requests, allow_everyone, supers):
    a = Authorizer(supers, allow_everyone)
    a.replace_all(bindings)
    for r in requests:
        want = reference(bindings, supers, allow_everyone, *r)
        assert a.authorize(*r) is want, r
        assert a.authorize(*r) is want, r


@settings(max_examples=300, deadline=None)
@given(bindings=bindings_st, allow_everyone=st.booleans(),
       principal=st.sampled_from([ALICE, BOB, "User:carol"]), host=st.sampled_from(["h1", "h2"]),
       op=st.sampled_from([Op.READ, Op.WRITE, Op.DELETE, Op.CREATE]), rt=st.sampled_from([T, G]))
def test_allowed_somewhere_implies_may_on_some(bindings, allow_everyone, principal, host, op, rt):
    """authorizeByResourceType never refuses what authorize allows on some resource."""
    a = Authorizer((), allow_everyone)
    a.replace_all(bindings)
    if any(a.authorize(principal, host, op, rt, n) for n in REQUEST_NAMES + NAMES):
        assert a.may_on_some(principal, host, op, rt)


MAY_ON_SOME_CASES = [
    ("nothing", [], False, False),
    ("nothing, allow everyone", [], True, True),
    ("literal allow", [acl(op=Op.WRITE)], False, True),
    ("allow of another op", [acl(op=Op.READ)], False, False),
    ("allow for another principal", [acl(op=Op.WRITE, principal=BOB)], False, False),
    ("wildcard principal", [acl(op=Op.WRITE, principal=WILDCARD_PRINCIPAL)], False, True),
    ("allow ALL", [acl(op=Op.ALL)], False, True),
    ("deny everything", [acl(op=Op.WRITE), acl(name="*", op=Op.WRITE, perm=DENY)], True, False),
    ("deny same literal", [acl(op=Op.WRITE), acl(op=Op.WRITE, perm=DENY)], False, False),
    ("deny other literal", [acl(op=Op.WRITE), acl(name="x", op=Op.WRITE, perm=DENY)], False, True),
    ("dominant prefixed deny", [acl(name="foo", op=Op.WRITE),
                                acl(name="fo", pt=PRE, op=Op.WRITE, perm=DENY)], False, False),
    ("longer prefixed deny", [acl(name="fo", pt=PRE, op=Op.WRITE),
                              acl(name="foo", pt=PRE, op=Op.WRITE, perm=DENY)], False, True),
    ("wildcard allow survives", [acl(name="*", op=Op.WRITE),
                                 acl(name="f", pt=PRE, op=Op.WRITE, perm=DENY)], False, True),
    ("other type", [acl(rt=G, op=Op.WRITE)], False, False),
]


@pytest.mark.parametrize("bindings, allow_everyone, expected", [c[1:] for c in MAY_ON_SOME_CASES],
                         ids=[c[0] for c in MAY_ON_SOME_CASES])
def test_may_on_some(bindings, allow_everyone, expected):
    a = Authorizer([ADMIN], allow_everyone)
    a.replace_all(bindings)
    assert a.may_on_some(ALICE, "h", Op.WRITE, T) is expected
    assert a.may_on_some(ADMIN, "h", Op.WRITE, T)


def test_cache_is_dropped_by_replace_all_and_bounded():
    a = Authorizer(cache_limit=5)
    a.replace_all([acl()])
    assert a.authorize(ALICE, "h", Op.READ, T, "foo")
    assert a.cached == 1
    a.replace_all([acl(), acl(perm=DENY)])
    assert a.cached == 0
    assert not a.authorize(ALICE, "h", Op.READ, T, "foo")
    for i in range(20):
        a.authorize(ALICE, "h", Op.READ, T, f"t{i}")
        assert 1 <= a.cached <= 5
    a.replace_all([])
    assert not a.authorize(ALICE, "h", Op.READ, T, "foo")


def test_a_reader_keeps_its_snapshot():
    a = Authorizer()
    a.replace_all([acl()])
    before = a.bindings()
    a.replace_all([acl(name="bar")])
    assert [b.pattern.name for b in before] == ["foo"]
    assert [b.pattern.name for b in a.bindings()] == ["bar"]


def test_bindings_sorted_deduplicated_and_filtered():
    bs = [acl(name="b", principal=BOB), acl(rt=G, name="a"), acl(name="a", pt=PRE), acl(name="b"),
          acl(name="b")]
    a = Authorizer()
    a.replace_all(bs)
    got = a.bindings()
    assert got == [acl(name="b"), acl(name="b", principal=BOB), acl(name="a", pt=PRE),
                   acl(rt=G, name="a")]
    assert a.bindings(AclBindingFilter(principal=BOB)) == [acl(name="b", principal=BOB)]
    assert a.bindings(AclBindingFilter(T, "bx", Pt.MATCH)) == []
    assert a.bindings(AclBindingFilter(T, "ab", Pt.MATCH)) == [acl(name="a", pt=PRE)]


# -- filters -------------------------------------------------------------------------------------
B_LIT, B_STAR, B_PRE = acl(name="foo"), acl(name="*"), acl(name="fo", pt=PRE)
FILTER_CASES = [
    # filter, (matches B_LIT, B_STAR, B_PRE)
    (AclBindingFilter(), (True, True, True)),
    (AclBindingFilter(G), (False, False, False)),
    (AclBindingFilter(T, None, LIT), (True, True, False)),
    (AclBindingFilter(T, None, PRE), (False, False, True)),
    (AclBindingFilter(T, "foo", Pt.ANY), (True, False, False)),
    (AclBindingFilter(T, "fo", Pt.ANY), (False, False, True)),
    (AclBindingFilter(T, "foo", LIT), (True, False, False)),
    (AclBindingFilter(T, "*", LIT), (False, True, False)),
    (AclBindingFilter(T, "fo", PRE), (False, False, True)),
    (AclBindingFilter(T, "foo", PRE), (False, False, False)),
    (AclBindingFilter(T, "foo", Pt.MATCH), (True, True, True)),
    (AclBindingFilter(T, "fox", Pt.MATCH), (False, True, True)),
    (AclBindingFilter(T, "f", Pt.MATCH), (False, True, False)),
    (AclBindingFilter(T, None, Pt.MATCH), (True, True, True)),
    (AclBindingFilter(Rt.ANY, "foo", Pt.MATCH), (True, True, True)),
    (AclBindingFilter(principal=ALICE), (True, True, True)),
    (AclBindingFilter(principal=BOB), (False, False, False)),
    (AclBindingFilter(host="*"), (True, True, True)),
    (AclBindingFilter(host="h"), (False, False, False)),
    (AclBindingFilter(operation=Op.READ), (True, True, True)),
    (AclBindingFilter(operation=Op.ALL), (False, False, False)),
    (AclBindingFilter(permission=ALLOW), (True, True, True)),
    (AclBindingFilter(permission=DENY), (False, False, False)),
]


@pytest.mark.parametrize("flt, expected", FILTER_CASES)
def test_filter_matches(flt, expected):
    assert tuple(flt.matches(b) for b in (B_LIT, B_STAR, B_PRE)) == expected


@pytest.mark.parametrize("flt, expected", [
    (acl().to_filter(), None),
    (AclBindingFilter(), "Resource type is ANY."),
    (AclBindingFilter(Rt.UNKNOWN), "Resource type is UNKNOWN."),
    (AclBindingFilter(T), "Resource name is NULL."),
    (AclBindingFilter(T, "x", Pt.MATCH), "Resource pattern type is MATCH."),
    (AclBindingFilter(T, "x", Pt.UNKNOWN), "Resource pattern type is UNKNOWN."),
    (AclBindingFilter(T, "x", Pt.ANY), "Principal is NULL"),
    (AclBindingFilter(T, "x", LIT, ALICE), "Host is NULL"),
    (AclBindingFilter(T, "x", LIT, ALICE, "*"), "Operation is ANY"),
    (AclBindingFilter(T, "x", LIT, ALICE, "*", Op.UNKNOWN), "Operation is UNKNOWN"),
    (AclBindingFilter(T, "x", LIT, ALICE, "*", Op.READ), "Permission type is ANY"),
    (AclBindingFilter(T, "x", LIT, ALICE, "*", Op.READ, Perm.UNKNOWN),
     "Permission type is UNKNOWN"),
])
def test_find_indefinite_field(flt, expected):
    assert flt.find_indefinite_field() == expected
    assert flt.matches_at_most_one() is (expected is None)


def test_filter_of_a_binding_matches_it_and_unknowns_are_seen():
    assert acl().to_filter().matches(acl())
    assert not acl().to_filter().matches(acl(host="h"))
    assert AclBindingFilter(operation=Op.UNKNOWN).is_unknown()
    assert not AclBindingFilter().is_unknown()
    assert AclBindingFilter(operation=3).operation is Op.READ
    with pytest.raises(ValueError):
        AclBindingFilter(operation=99)


# -- CreateAcls validation ---------------------------------------------------------------------
CLUSTER_ONLY = "The only valid name for the CLUSTER resource is kafka-cluster"


@pytest.mark.parametrize("binding, expected", [
    (acl(), None),
    (acl(pt=PRE, name="fo"), None),
    (acl(rt=C, name=CLUSTER_NAME, op=Op.ALTER), None),
    (acl(name="*", pt=PRE), None),                           # Kafka accepts it
    (acl(rt=G, op=Op.WRITE), None),                          # only the CLI checks this
    (acl(principal="User:"), None),
    (acl(rt=Rt.ANY), (42, "Invalid resourceType ANY")),
    (acl(rt=Rt.UNKNOWN), (42, "Invalid resourceType UNKNOWN")),
    (acl(pt=Pt.MATCH), (42, "Invalid patternType MATCH")),
    (acl(pt=Pt.ANY), (42, "Invalid patternType ANY")),
    (acl(pt=Pt.UNKNOWN), (42, "Invalid patternType UNKNOWN")),
    (acl(op=Op.ANY), (42, "Invalid operation ANY")),
    (acl(op=Op.UNKNOWN), (42, "Invalid operation UNKNOWN")),
    (acl(perm=Perm.ANY), (42, "Invalid permissionType ANY")),
    (acl(perm=Perm.UNKNOWN), (42, "Invalid permissionType UNKNOWN")),
    (acl(rt=C, name="other"), (42, CLUSTER_ONLY)),
    (acl(rt=C, name=""), (42, CLUSTER_ONLY)),
    (acl(name=""), (42, "Invalid empty resource name")),
    (acl(name="a/b"), (42, "Failed to create ACL")),
    (acl(principal="alice"), (-1, None)),
])
def test_validate_binding(binding, expected):
    assert validate_binding(binding) == expected


# -- ZooKeeper: ACL znodes ---------------------------------------------------------------------
@pytest.mark.parametrize("pattern, path", [
    (ResourcePattern(T, "foo", LIT), "/kafka-acl/Topic/foo"),
    (ResourcePattern(T, "foo", PRE), "/kafka-acl-extended/prefixed/Topic/foo"),
    (ResourcePattern(G, "g.1_x-y", LIT), "/kafka-acl/Group/g.1_x-y"),
    (ResourcePattern(C, CLUSTER_NAME, LIT), "/kafka-acl/Cluster/kafka-cluster"),
    (ResourcePattern(Rt.TRANSACTIONAL_ID, "tx", PRE),
     "/kafka-acl-extended/prefixed/TransactionalId/tx"),
    (ResourcePattern(Rt.DELEGATION_TOKEN, "*", LIT), "/kafka-acl/DelegationToken/*"),
    (ResourcePattern(Rt.USER, "User:bob", LIT), "/kafka-acl/User/User:bob"),
])
def test_acl_path(pattern, path):
    assert acl_path(pattern) == path
    assert pattern_of_path(path) == pattern


@pytest.mark.parametrize("pattern", [
    ResourcePattern(T, "a/b", LIT), ResourcePattern(T, "", LIT), ResourcePattern(T, "x", Pt.ANY),
    ResourcePattern(T, "x", Pt.MATCH), ResourcePattern(Rt.ANY, "x", LIT)])
def test_acl_path_refuses(pattern):
    with pytest.raises(ValueError):
        acl_path(pattern)


@pytest.mark.parametrize("path", [
    "/kafka-acl", "/kafka-acl/Topic", "/kafka-acl/Topic/", "/kafka-acl/Nope/foo",
    "/kafka-acl/Topic/a/b", "/kafka-acl-extended/literal/Topic/foo",
    "/kafka-acl-extended/prefixed/Topic", "/kafka-acl-changes/acl_changes_0000000001",
    "/brokers/topics/foo", "/kafka-aclx/Topic/foo", "/kafka-acl/Any/foo"])
def test_pattern_of_other_paths_is_none(path):
    assert pattern_of_path(path) is None


def test_acl_paths_are_kafkas():
    paths = acl_paths()
    assert "/kafka-acl/Topic" in paths and "/kafka-acl-extended/prefixed/User" in paths
    assert paths[-2:] == ["/kafka-acl-changes", "/kafka-acl-extended-changes"]
    assert len(paths) == 2 + 2 * 6 + 2


name_st = st.text(st.sampled_from("abcXYZ019._-:*"), min_size=1, max_size=20).filter(
    lambda n: n not in (".", ".."))


@given(rt=st.sampled_from([t for t in Rt if t > Rt.ANY]), name=name_st,
       pt=st.sampled_from([LIT, PRE]))
def test_path_round_trip(rt, name, pt):
    p = ResourcePattern(rt, name, pt)
    assert pattern_of_path(acl_path(p)) == p


KAFKA_BLOB = (b'{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*",'
              b'"operation":"Read"},{"principal":"User:bob","permissionType":"Deny",'
              b'"host":"10.0.0.1","operation":"DescribeConfigs"}],"version":1}')
ALICE_READ = AccessControlEntry(ALICE, "*", Op.READ, ALLOW)
BOB_DENY = AccessControlEntry(BOB, "10.0.0.1", Op.DESCRIBE_CONFIGS, DENY)


def test_encode_acls_as_kafka_writes_it():
    assert encode_acls([BOB_DENY, ALICE_READ]) == KAFKA_BLOB
    assert encode_acls({ALICE_READ, BOB_DENY}) == KAFKA_BLOB
    assert decode_acls(KAFKA_BLOB) == {ALICE_READ, BOB_DENY}


def test_decode_acls_like_kafkas_acl_entry_test():
    blob = (b'{"version": 1, "acls": [{"host": "host1","permissionType": "Deny",'
            b'"operation": "READ", "principal": "User:alice"  },\n'
            b'    {  "host":  "*" ,  "permissionType": "Allow",  "operation":  "Read", '
            b'"principal": "User:bob"  },\n'
            b'    {  "host": "host1",  "permissionType": "Deny",  "operation":   "Read" ,  '
            b'"principal": "User:bob"}]}')
    assert decode_acls(blob) == {
        AccessControlEntry(ALICE, "host1", Op.READ, DENY),
        AccessControlEntry(BOB, "*", Op.READ, ALLOW),
        AccessControlEntry(BOB, "host1", Op.READ, DENY)}


def test_decode_acls_empty_and_unknown_names():
    assert decode_acls(b"") == frozenset()
    got = decode_acls(b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Perhaps",'
                      b'"host":"*","operation":"Juggle"}]}')
    assert got == {AccessControlEntry("User:a", "*", Op.UNKNOWN, Perm.UNKNOWN)}


@pytest.mark.parametrize("data", [
    b"not json", b"\xff\xfe", b"null", b"[]", b'{"version":2,"acls":[]}', b'{"acls":[]}',
    b'{"version":true,"acls":[]}', b'{"version":1}', b'{"version":1,"acls":{}}',
    b'{"version":1,"acls":[1]}',
    b'{"version":1,"acls":[{"principal":"alice","permissionType":"Allow","host":"*",'
    b'"operation":"Read"}]}',
    b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Read"}]}',
    b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","host":1,'
    b'"operation":"Read"}]}',
])
def test_decode_acls_refuses_malformed(data):
    with pytest.raises(ValueError):
        decode_acls(data)


entry_st = st.builds(
    AccessControlEntry,
    principal=st.builds(lambda t, n: f"{t}:{n}", st.sampled_from(["User", "Group", ""]),
                        st.text(max_size=12)),
    host=st.one_of(st.just("*"), st.text(max_size=15)),
    operation=st.sampled_from([o for o in Op if o > Op.ANY]),
    permission=st.sampled_from([ALLOW, DENY]))


@given(st.frozensets(entry_st, max_size=8), st.randoms())
def test_acls_json_round_trip(entries, rnd):
    data = encode_acls(entries)
    assert decode_acls(data) == entries
    shuffled = list(entries)
    rnd.shuffle(shuffled)
    assert encode_acls(shuffled) == data                       # deterministic
    doc = json.loads(data)
    assert list(doc) == ["acls", "version"] and doc["version"] == 1


# -- ZooKeeper: change notifications -------------------------------------------------------------
@pytest.mark.parametrize("pattern, path, data", [
    (ResourcePattern(T, "foo", LIT), ACL_CHANGES_LITERAL, b"TOPIC:foo"),
    (ResourcePattern(Rt.TRANSACTIONAL_ID, "a:b", LIT), ACL_CHANGES_LITERAL,
     b"TRANSACTIONAL_ID:a:b"),
    (ResourcePattern(T, "z_other", PRE), ACL_CHANGES_EXTENDED,
     b'{"version":1,"resourceType":"TOPIC","name":"z_other","patternType":"PREFIXED"}'),
])
def test_change_as_kafka_writes_it(pattern, path, data):
    assert change_path(pattern) == path
    assert encode_change(pattern) == data
    assert decode_change(data) == pattern


def test_change_names():
    assert (ACL_CHANGES_LITERAL, ACL_CHANGES_EXTENDED, CHANGE_PREFIX) == (
        "/kafka-acl-changes", "/kafka-acl-extended-changes", "acl_changes_")


@pytest.mark.parametrize("data, pattern", [
    (b"Topic:foo", ResourcePattern(T, "foo", LIT)),                 # pre-2.0 spelling
    (b"TransactionalId:x", ResourcePattern(Rt.TRANSACTIONAL_ID, "x", LIT)),
    (b"topic:", ResourcePattern(T, "", LIT)),
    (b'{"version":1,"resourceType":"Group","name":"g","patternType":"PREFIXED"}',
     ResourcePattern(G, "g", PRE)),
    (b'{"resourceType":"TOPIC","name":"t","patternType":"LITERAL"}',
     ResourcePattern(T, "t", LIT)),
])
def test_decode_change_accepts(data, pattern):
    assert decode_change(data) == pattern


@pytest.mark.parametrize("data", [
    b"foo", b"Nope:foo", b"Any:foo", b"\xff", b"{", b"[]",
    b'{"version":2,"resourceType":"TOPIC","name":"t","patternType":"PREFIXED"}',
    b'{"version":1,"resourceType":"TOPIC","name":"t","patternType":"prefixed"}',
    b'{"version":1,"resourceType":"TOPIC","name":"t","patternType":"MATCH"}',
    b'{"version":1,"resourceType":"TOPIC","patternType":"PREFIXED"}',
    b'{"version":1,"resourceType":"NOPE","name":"t","patternType":"PREFIXED"}',
])
def test_decode_change_refuses(data):
    with pytest.raises(ValueError):
        decode_change(data)


@pytest.mark.parametrize("pattern", [ResourcePattern(T, "x", Pt.ANY),
                                     ResourcePattern(Rt.UNKNOWN, "x", LIT)])
def test_encode_change_refuses(pattern):
    with pytest.raises(ValueError):
        encode_change(pattern)


@given(rt=st.sampled_from([t for t in Rt if t > Rt.ANY]), name=st.text(max_size=30),
       pt=st.sampled_from([LIT, PRE]))
def test_change_round_trip(rt, name, pt):
    p = ResourcePattern(rt, name, pt)
    assert decode_change(encode_change(p)) == p
