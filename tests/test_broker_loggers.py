"""actors/broker_loggers.py: Kafka's BROKER_LOGGER resource on Python's logging (KIP-412)."""

from __future__ import annotations

import logging

import pytest

from actors import broker_loggers as bl
from replicas.errors import InvalidConfig, InvalidRequest

pytestmark = pytest.mark.unit


@pytest.fixture
def logger():
    lg = logging.getLogger("rayka.test.broker_loggers")
    before = lg.level
    yield lg
    lg.setLevel(before)


@pytest.mark.parametrize("level, name", [(logging.CRITICAL, "FATAL"), (logging.ERROR, "ERROR"),
                                         (logging.WARNING, "WARN"), (logging.INFO, "INFO"),
                                         (15, "DEBUG"), (logging.DEBUG, "DEBUG"),
                                         (bl.TRACE, "TRACE"), (1, "TRACE")])
def test_python_levels_read_as_log4j_levels(level, name):
    assert bl.log4j_level(level) == name


@pytest.mark.parametrize("name, error, message", [
    ("", InvalidRequest, "Broker id must not be empty"),
    ("2", InvalidRequest, "Unexpected broker id, expected 1 but received 2")])
def test_the_resource_is_this_broker(name, error, message):
    with pytest.raises(error, match=message):
        bl.check_resource(name, 1)
    bl.check_resource("1", 1)


def test_describe_lists_root_and_every_logger_with_its_effective_level(logger):
    logger.setLevel(logging.DEBUG)
    entries = {e.name: e for e in bl.describe(None)}
    assert entries[logger.name].value == "DEBUG"
    assert entries["root"].value == bl.log4j_level(logging.getLogger().getEffectiveLevel())
    assert {e.source for e in entries.values()} == {bl.DYNAMIC_BROKER_LOGGER}
    assert not any(e.read_only or e.sensitive for e in entries.values())
    assert [e.name for e in bl.describe([logger.name, "no.such"])] == [logger.name]


def test_set_and_delete_change_the_level_validate_only_does_not(logger):
    bl.alter([(logger.name, bl.SET, "TRACE")], validate_only=True)
    assert logger.level == logging.NOTSET
    bl.alter([(logger.name, bl.SET, "TRACE")], validate_only=False)
    assert logger.level == bl.TRACE
    bl.alter([(logger.name, bl.DELETE, None)], validate_only=False)
    assert logger.level == logging.NOTSET


@pytest.mark.parametrize("op, name, value, error, message", [
    (bl.SET, "no.such.logger", "INFO", InvalidConfig, "Logger no.such.logger does not exist!"),
    (bl.SET, "LOGGER", "LOUD", InvalidConfig, "not a supported log level"),
    (bl.DELETE, "root", None, InvalidRequest, "Removing the log level of the root logger"),
    (bl.APPEND, "LOGGER", "INFO", InvalidRequest, "APPEND operation is not allowed"),
    (bl.SUBTRACT, "LOGGER", "INFO", InvalidRequest, "SUBTRACT operation is not allowed"),
])
def test_refusals_change_nothing(logger, op, name, value, error, message):
    name = logger.name if name == "LOGGER" else name
    with pytest.raises(error, match=message):
        bl.alter([(logger.name, bl.SET, "ERROR"), (name, op, value)], validate_only=False)
    assert logger.level == logging.NOTSET
