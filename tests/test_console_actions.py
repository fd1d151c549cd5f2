"""The console's writes (console/actions.py) before anything is sent: the config parser,
writes off, the input checks that refuse a malformed form with Kafka's names, and the wire
errors' text. The checked Actions point at 127.0.0.1:1, where nothing listens: a check that
let a request through would show as a transport error or a timeout, not as the refusal."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError as WireError

from console.actions import Actions, parse_configs, wire_error_text
from rayka.errors import InvalidConfig

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]

NOWHERE = "127.0.0.1:1"


@pytest.mark.parametrize("text, expected", [
    ("a=1,b=2", {"a": "1", "b": "2"}),
    ("a=1\nb=2", {"a": "1", "b": "2"}),
    ("  a = 1 \n\n , b=2,\r\n", {"a": "1", "b": "2"}),
    ("retention.ms=86400000", {"retention.ms": "86400000"}),
    ("a=", {"a": None}),                                   # back to the default
    ("a=  ", {"a": None}),
    ("a=x=y", {"a": "x=y"}),                               # only the first '=' splits
    ("a=1\na=2", {"a": "2"}),
    ("", {}),
    (" \n , ", {}),
    ("cleanup.policy=[compact,delete],retention.ms=5",            # a list, as kafka-configs
     {"cleanup.policy": "compact,delete", "retention.ms": "5"}),
])
def test_parse_configs(text, expected):
    assert parse_configs(text) == expected


@pytest.mark.parametrize("text", ["a", "a=1,b", "=1", " = 1", "a=1\n=2"])
def test_parse_configs_refuses_what_is_not_key_value(text):
    with pytest.raises(InvalidConfig) as got:
        parse_configs(text)
    assert got.value.code == 40 and got.value.name == "INVALID_CONFIG"


# -- writes off ----------------------------------------------------------------------------------
EVERY_ACTION = {
    "create_topic": lambda a: a.create_topic("t", 3, 3, "retention.ms=1"),
    "delete_topic": lambda a: a.delete_topic("t"),
    "alter_configs": lambda a: a.alter_configs("t", "retention.ms=1"),
    "elect_preferred": lambda a: a.elect_preferred("t", [0, 1]),
    "reassign": lambda a: a.reassign("t", 0, "1,2,3"),
    "reset_offsets": lambda a: a.reset_offsets("g", "t", "earliest", [0]),
}


@pytest.mark.parametrize("action", sorted(EVERY_ACTION))
def test_writes_off_refuses_every_action(action):
    actions = Actions(None)
    assert actions.allowed is False
    outcome = EVERY_ACTION[action](actions)
    assert outcome.ok is False
    assert outcome.message == ("CLUSTER_AUTHORIZATION_FAILED (31): writes are off: start the "
                               "console with --allow-writes")
    assert actions._client is None


def test_writes_off_says_the_reason_given():
    outcome = Actions(None, why_off="the console is read-only here").delete_topic("t")
    assert outcome.message == "CLUSTER_AUTHORIZATION_FAILED (31): the console is read-only here"


def test_writes_on_keeps_only_the_wire_keys_of_the_client_config():
    actions = Actions(NOWHERE, {"security.protocol": "SASL_SSL", "sasl.username": "u",
                                "bootstrap.servers": "elsewhere:9092", "acks": "0"})
    assert actions.allowed is True
    assert actions.client_config == {"security.protocol": "SASL_SSL", "sasl.username": "u"}


# -- input checked before anything is sent -------------------------------------------------------
INVALID_PARTITIONS = "INVALID_PARTITIONS (37): "
INVALID_RF = "INVALID_REPLICATION_FACTOR (38): "
INVALID_REQUEST = "INVALID_REQUEST (42): "
INVALID_CONFIG = "INVALID_CONFIG (40): "


@pytest.mark.parametrize("call, refused", [
    pytest.param(lambda a: a.create_topic("t", "x", 3), INVALID_PARTITIONS,
                 id='create_topic(t,x,3)'),
    pytest.param(lambda a: a.create_topic("t", "0", 3), INVALID_PARTITIONS,
                 id='create_topic(t,0,3)'),
    pytest.param(lambda a: a.create_topic("t", "-1", 3), INVALID_PARTITIONS,
                 id='create_topic(t,-1,3)'),
    pytest.param(lambda a: a.create_topic("t", "", 3), INVALID_PARTITIONS,
                 id='create_topic(t,,3)'),
    pytest.param(lambda a: a.create_topic("t", "1.5", 3), INVALID_PARTITIONS,
                 id='create_topic(t,1.5,3)'),
    pytest.param(lambda a: a.create_topic("t", 3, "x"), INVALID_RF,
                 id='create_topic(t,3,x)'),
    pytest.param(lambda a: a.create_topic("t", 3, "0"), INVALID_RF,
                 id='create_topic(t,3,0)'),
    pytest.param(lambda a: a.create_topic("t", 3, "-2"), INVALID_RF,
                 id='create_topic(t,3,-2)'),
    pytest.param(lambda a: a.create_topic("", 3, 3), INVALID_REQUEST,
                 id='create_topic(,3,3)'),
    pytest.param(lambda a: a.create_topic("   ", 3, 3), INVALID_REQUEST,
                 id='create_topic(blank,3,3)'),
    pytest.param(lambda a: a.create_topic("t", 3, 3, "retention.ms"), INVALID_CONFIG,
                 id='create_topic(t,3,3,retention.ms)'),
    pytest.param(lambda a: a.alter_configs("t", ""), INVALID_REQUEST,
                 id='alter_configs(t,)'),
    pytest.param(lambda a: a.alter_configs("t", " \n, "), INVALID_REQUEST,
                 id='alter_configs(t,nl,)'),
    pytest.param(lambda a: a.alter_configs("t", "=1"), INVALID_CONFIG,
                 id='alter_configs(t,=1)'),
    pytest.param(lambda a: a.reset_offsets("g", "t", "yesterday", [0]), INVALID_REQUEST,
                 id='reset_offsets(g,t,yesterday,[0])'),
    pytest.param(lambda a: a.reset_offsets("g", "t", "-5", [0]), INVALID_REQUEST,
                 id='reset_offsets(g,t,-5,[0])'),
    pytest.param(lambda a: a.reset_offsets("g", "t", "", [0]), INVALID_REQUEST,
                 id='reset_offsets(g,t,,[0])'),
    pytest.param(lambda a: a.reassign("t", 0, "a,b"), INVALID_REQUEST,
                 id='reassign(t,0,a,b)'),
    pytest.param(lambda a: a.reassign("t", 0, " , "), INVALID_REQUEST,
                 id='reassign(t,0,,)'),
    pytest.param(lambda a: a.reassign("t", "x", "1,2"), INVALID_REQUEST,
                 id='reassign(t,x,1,2)'),
])
def test_a_malformed_form_is_refused_before_any_client_exists(call, refused):
    actions = Actions(NOWHERE)
    outcome = call(actions)
    assert outcome.ok is False
    assert outcome.message.startswith(refused), outcome.message
    assert actions._client is None          # no AdminClient made: nothing was sent


def test_the_partitions_check_names_the_value():
    outcome = Actions(NOWHERE).create_topic("t", "x", 3)
    assert outcome.message == "INVALID_PARTITIONS (37): partitions must be a whole number, " \
                              "not 'x'"
    assert Actions(NOWHERE).create_topic("t", 0, 3).message == \
        "INVALID_PARTITIONS (37): partitions must be at least 1, not 0"


# -- the wire's errors ---------------------------------------------------------------------------
@pytest.mark.parametrize("code, name", [
    (3, "UNKNOWN_TOPIC_OR_PARTITION"),        # librdkafka says UNKNOWN_TOPIC_OR_PART
    (29, "TOPIC_AUTHORIZATION_FAILED"),
    (36, "TOPIC_ALREADY_EXISTS"),
    (37, "INVALID_PARTITIONS"),
    (69, "GROUP_ID_NOT_FOUND"),
])
def test_wire_error_text_gives_kafkas_name_and_code(code, name):
    err = WireError(code)
    assert wire_error_text(err) == f"{name} ({code}): {err.str()}"
    assert wire_error_text(WireError(code, "the broker's reason")) == \
        f"{name} ({code}): the broker's reason"


def test_a_client_side_error_keeps_librdkafkas_name():
    err = WireError(WireError._TRANSPORT)
    assert wire_error_text(err) == f"_TRANSPORT ({WireError._TRANSPORT}): {err.str()}"
