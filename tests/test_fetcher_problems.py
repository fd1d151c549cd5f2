"""actors/fetcher.py: how a follower fetcher reports what keeps it from replicating.

A refusal (a config it lacks, a SASL user the leader does not know, no ClusterAction) is
logged at ERROR once per cause, retried with a backoff doubling to REFUSED_BACKOFF_MAX_S,
and reported by `problem()`; other errors go to INFO once per cause at the plain backoff; the
first clean round logs the recovery and clears the report."""

from __future__ import annotations

import logging

import pytest

from actors.broker_link import SaslFailed
from actors.fetcher import REFUSED_BACKOFF_MAX_S, Fetcher, PartitionErrors, round_error
from replicas.errors import InvalidConfig
from tests.fakes import IdleBroker

pytestmark = pytest.mark.unit


@pytest.fixture
def fetcher():
    f = Fetcher(IdleBroker(), leader_id=1)
    f.partitions = {("t", 0): False, ("t", 1): False}
    return f


def errors_logged(caplog, level):
    return [r for r in caplog.records if r.name == "actors.fetcher" and r.levelno == level]


def test_a_refusal_is_logged_once_at_error_and_backs_off_doubling(fetcher, caplog):
    caplog.set_level(logging.INFO, logger="actors.fetcher")
    refused = PartitionErrors(29, "Fetch", [("t", 1), ("t", 0)])
    pauses = [fetcher._on_error(refused) for _ in range(6)]
    assert pauses == [0.1, 0.2, 0.4, 0.8, REFUSED_BACKOFF_MAX_S, REFUSED_BACKOFF_MAX_S]
    assert len(errors_logged(caplog, logging.ERROR)) == 1
    p = fetcher.problem()
    assert (p["leader"], p["error"], p["code"], p["refusal"]) == \
        (1, "TOPIC_AUTHORIZATION_FAILED", 29, True)
    assert p["partitions"] == [["t", 0], ["t", 1]]


@pytest.mark.parametrize("exc", [
    SaslFailed("127.0.0.1:9093: Authentication failed (error 58)"),
    InvalidConfig("listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config is not set"),
])
def test_a_config_or_a_user_the_leader_refuses_is_a_refusal_for_every_partition(fetcher, exc):
    fetcher._on_error(exc)
    p = fetcher.problem()
    assert p["refusal"] and p["partitions"] == [["t", 0], ["t", 1]] and str(exc) in p["message"]


def test_a_new_cause_is_logged_again_and_a_clean_round_clears_it(fetcher, caplog):
    caplog.set_level(logging.INFO, logger="actors.fetcher")
    for _ in range(3):
        assert fetcher._on_error(ConnectionRefusedError("leader restarting")) == 0.1
    assert len(errors_logged(caplog, logging.INFO)) == 1 and not fetcher.problem()["refusal"]
    fetcher._on_error(PartitionErrors(29, "Fetch", [("t", 0)]))
    assert len(errors_logged(caplog, logging.ERROR)) == 1
    fetcher._on_clean_round()
    assert fetcher.problem() is None
    assert "replicating again" in errors_logged(caplog, logging.INFO)[-1].getMessage()
    # the backoff starts over after a clean round
    assert fetcher._on_error(PartitionErrors(29, "Fetch", [("t", 0)])) == 0.1


def test_a_rounds_refusal_outranks_a_commoner_error():
    e = round_error({6: [("a", 0), ("a", 1), ("a", 2)], 29: [("b", 0)]}, "Fetch")
    assert (e.code, e.name, e.partitions) == (29, "TOPIC_AUTHORIZATION_FAILED", [("b", 0)])
    assert round_error({6: [("a", 0)], 75: [("a", 1), ("a", 2)]}, "Fetch").code == 75

