"""replicas/config_keys.py: Kafka config keys dotted or underscored, one normaliser that never
rewrites a dotted key (listener names hold "_")."""

from __future__ import annotations

import pytest

from actors.broker_config import broker_config_for, split_broker_config
from replicas.config_keys import dotted_key, dotted_keys, underscored_key
from replicas.errors import InvalidConfig

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("key", ["log.retention.ms", "log_retention_ms"])
def test_either_spelling_gives_each_spelling(key):
    assert dotted_key(key) == "log.retention.ms"
    assert underscored_key(key) == "log_retention_ms"


@pytest.mark.parametrize("key", [
    "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config",
    "listener.name.SASL_SSL.ssl.keystore.location",
    "log.retention_ms",                  # a typo stays a typo: an unknown key, not a guess
])
def test_a_dotted_key_is_never_rewritten(key):
    assert dotted_key(key) == key
    assert dotted_keys({key: 1}) == {key: 1}


def test_an_underscored_listener_key_is_refused_with_the_dotted_spelling_named():
    with pytest.raises(InvalidConfig, match="listener.name.<listener>.<key>"):
        dotted_key("listener_name_sasl_ssl_ssl_keystore_location")


def test_mappings_keep_their_values():
    assert dotted_keys({"num_partitions": 3, "x": None}) == {"num.partitions": 3, "x": None}


JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="broker" password="p";')


@pytest.mark.parametrize("listener", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_a_listener_prefixed_jaas_key_reaches_the_inter_broker_credentials(listener):
    scheme = listener.lower()
    settings = split_broker_config({
        "listeners": f"PLAINTEXT://127.0.0.1:0,{listener}://127.0.0.1:0",
        "inter_broker_listener_name": listener,
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        f"listener.name.{scheme}.scram-sha-512.sasl.jaas.config": JAAS,
        f"listener.name.{scheme}.ssl.keystore.location": "/k.pem",
    })
    assert settings.security.inter_broker_credentials(listener) == ("SCRAM-SHA-512", "broker", "p")
    assert settings.security.get("ssl.keystore.location", listener) == "/k.pem"


def test_replicating_over_sasl_without_credentials_is_refused_at_start():
    with pytest.raises(InvalidConfig, match="listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"):
        split_broker_config({"listeners": "SASL_SSL://127.0.0.1:0",
                             "inter.broker.listener.name": "SASL_SSL",
                             "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"})


def test_a_brokers_own_key_wins_in_either_spelling():
    merged = broker_config_for({"broker_rack": "a", "log.retention.ms": 1},
                               {"broker.rack": "b", "log_retention_ms": 2})
    assert merged == {"broker.rack": "b", "log_retention_ms": 2}
