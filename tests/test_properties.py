"""rayka/ops/properties.py: Kafka's server.properties read as java.util.Properties reads it."""

from __future__ import annotations

import pytest

from rayka.ops.properties import load_properties, parse_properties

pytestmark = pytest.mark.unit
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="broker" password="p=q";')


@pytest.mark.parametrize("text, expected", [
    ("a=1", {"a": "1"}),
    ("a = 1", {"a": "1"}),
    ("a:1", {"a": "1"}),
    ("a 1", {"a": "1"}),
    ("  a=1  ", {"a": "1  "}),                       # trailing blanks belong to the value
    ("a=", {"a": ""}),
    ("a", {"a": ""}),
    ("# c\n! c\n\n  # indented\na=1", {"a": "1"}),
    ("a=1\na=2", {"a": "2"}),
    ("listeners=PLAINTEXT://0.0.0.0:9092", {"listeners": "PLAINTEXT://0.0.0.0:9092"}),
    ("a=one \\\n    two", {"a": "one two"}),          # continued, next line's blanks dropped
    ("a=ends\\\\", {"a": "ends\\"}),                  # an even run of backslashes: no join
    ("a\\=b=c", {"a=b": "c"}),                        # an escaped separator is the key's
    ("a=tab\\there\\u00e9", {"a": "tab\there\u00e9"}),
])
def test_entries(text, expected):
    assert parse_properties(text) == expected


def test_listener_keys_and_a_jaas_config_are_kept_as_written(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text(f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={JAAS}\n"
                    "listener.name.sasl_plaintext.plain.sasl.jaas.config = x\n"
                    "inter.broker.listener.name=SASL_SSL\n")
    assert load_properties(str(path)) == {
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": JAAS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": "x",
        "inter.broker.listener.name": "SASL_SSL"}
