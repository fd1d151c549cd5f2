"""A broker's loggers as Kafka's BROKER_LOGGER config resource (KIP-412): what
`kafka-configs --entity-type broker-loggers` describes and alters, on Python's logging.

Rules (Kafka 3.9 ConfigHelper.describeConfigs for BROKER_LOGGER, RuntimeLoggerManager,
Log4jController):
- The resource name is the broker's own id (an empty name: "Broker id must not be empty";
  another id: "Unexpected broker id, expected <id> but received <name>"), both
  INVALID_REQUEST.
- Describe: every logger this process has, and "root", each with its effective level in
  log4j's words (Python's CRITICAL is FATAL, WARNING is WARN, level 5 is TRACE), source
  DYNAMIC_BROKER_LOGGER_CONFIG (6), neither read-only nor sensitive; asked keys only
  when keys are given.
- Alter (IncrementalAlterConfigs only): each name must be a logger that exists, else
  INVALID_CONFIG "Logger <name> does not exist!"; SET takes one of FATAL, ERROR, WARN,
  INFO, DEBUG, TRACE, else INVALID_CONFIG; DELETE gives the logger back the root's level
  (the root itself: INVALID_REQUEST); APPEND and SUBTRACT are INVALID_REQUEST. Every
  operation is checked before any applies; validate_only applies none. Levels live in this
  broker process only: a restarted broker starts from its logging configuration again, as
  Kafka's log4j does.
"""

from __future__ import annotations

import logging

from protocol.api import ConfigEntry
from replicas.errors import InvalidConfig, InvalidRequest

ROOT = "root"
DYNAMIC_BROKER_LOGGER = 6                    # Kafka's ConfigSource
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3   # AlterConfigOp.OpType
TRACE = 5
VALID = ("FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE")
_TO_PYTHON = {"FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING,
              "INFO": logging.INFO, "DEBUG": logging.DEBUG, "TRACE": TRACE}
_OP_NAMES = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


def log4j_level(level: int) -> str:
    """The log4j name of a Python level: the most verbose log4j level it still shows."""
    for name in VALID:
        if level >= _TO_PYTHON[name]:
            return name
    return "TRACE" if level > logging.NOTSET else "ALL"


def check_resource(name: str, broker_id: int) -> None:
    if not name:
        raise InvalidRequest("Broker id must not be empty")
    if name != str(broker_id):
        raise InvalidRequest(f"Unexpected broker id, expected {broker_id} but received {name}")


def _loggers() -> dict[str, logging.Logger]:
    found = {n: lg for n, lg in logging.root.manager.loggerDict.items()
             if isinstance(lg, logging.Logger)}
    return {ROOT: logging.getLogger(), **found}


def describe(keys) -> tuple[ConfigEntry, ...]:
    return tuple(ConfigEntry(name, log4j_level(lg.getEffectiveLevel()), False, False,
                             DYNAMIC_BROKER_LOGGER, False)
                 for name, lg in sorted(_loggers().items())
                 if keys is None or name in keys)


def alter(ops, validate_only: bool) -> None:
    """ops: [(logger name, operation, value)]; raises the first error, changing nothing."""
    loggers = _loggers()
    changes = []
    for name, op, value in ops:
        if name not in loggers:
            raise InvalidConfig(f"Logger {name} does not exist!")
        if op == SET:
            if value not in VALID:
                raise InvalidConfig(f"Cannot set the log level of {name} to {value} as it is "
                                    f"not a supported log level. Valid log levels are "
                                    f"{', '.join(VALID)}")
            changes.append((loggers[name], _TO_PYTHON[value]))
        elif op == DELETE:
            if name == ROOT:
                raise InvalidRequest(f"Removing the log level of the {ROOT} logger is not "
                                     "allowed")
            changes.append((loggers[name], logging.NOTSET))
        elif op in _OP_NAMES:
            raise InvalidRequest(f"{_OP_NAMES[op]} operation is not allowed for the "
                                 "BROKER_LOGGER resource")
        else:
            raise InvalidRequest(f"Unknown config operation {op}")
    if not validate_only:
        for lg, level in changes:
            lg.setLevel(level)
