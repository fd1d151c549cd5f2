"""Unit tests for replicas/errors.py: the error-code table is Kafka 3.8's, row for row.

kio's ErrorCode is generated from Kafka's Errors.java; it runs ahead of Kafka 3.8, whose
last code is TRANSACTION_ABORTABLE (120), so the codes above that are left out."""

from __future__ import annotations

import pickle

import pytest
from kio.schema.errors import ErrorCode as KioErrorCode

from replicas import errors
from replicas.errors import ERRORS_BY_CODE, RETRIABLE, ErrorCode, error_for_code

pytestmark = pytest.mark.unit

LAST_KAFKA_38_CODE = 120


# Kafka 4's codes rayka answers (KIP-848's regular-expression subscriptions, KIP-932's
# share groups)
KAFKA_4_ANSWERED = {"INVALID_REGULAR_EXPRESSION", "INVALID_RECORD_STATE",
                    "SHARE_SESSION_NOT_FOUND", "INVALID_SHARE_SESSION_EPOCH",
                    "FENCED_STATE_EPOCH", "SHARE_SESSION_LIMIT_REACHED"}


def kafka_38_rows() -> dict[str, tuple[int, bool]]:
    return {c.name.upper(): (c.value, c.retriable) for c in KioErrorCode
            if c.value <= LAST_KAFKA_38_CODE or c.name.upper() in KAFKA_4_ANSWERED}


def test_the_table_is_kafkas_names_numbers_and_retriable_flags():
    ours = {c.name: (c.value, c.retriable) for c in ErrorCode}
    assert ours == kafka_38_rows()


def test_retriable_holds_exactly_the_retriable_codes_as_plain_ints():
    assert RETRIABLE == {c.value for c in ErrorCode if c.retriable}
    assert all(type(c) is int for c in RETRIABLE)


def test_every_typed_error_carries_its_rows_code_name_and_flag():
    assert len(ERRORS_BY_CODE) == len(errors._NAMES)        # one class per code
    for code, cls in ERRORS_BY_CODE.items():
        row = ErrorCode(code)
        exc = cls("m")
        assert type(cls.code) is int
        assert (exc.name, cls.retriable) == (row.name, row.retriable)


def test_typed_errors_pickle_and_unknown_codes_are_unknown_server_errors():
    exc = pickle.loads(pickle.dumps(errors.NotCoordinator("moved")))
    assert isinstance(exc, errors.NotCoordinator) and exc.message == "moved"
    assert str(exc) == "NOT_COORDINATOR (16): moved"
    assert isinstance(error_for_code(ErrorCode.UNSUPPORTED_SASL_MECHANISM),
                      errors.UnknownServerError)


def test_codes_are_the_numbers_they_name():
    assert ErrorCode.INVALID_REQUEST == 42 and hash(ErrorCode.INVALID_REQUEST) == hash(42)
    assert f"{ErrorCode.UNSUPPORTED_VERSION}" == "35"
    assert {3: "x"}[ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] == "x"
