"""replicas/config_keys.py: Kafka config keys dotted or underscored, one normaliser."""

from __future__ import annotations

import pytest

from replicas.config_keys import dotted_key, dotted_keys, underscored_key, underscored_keys

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("key", ["log.retention.ms", "log_retention_ms", "log.retention_ms"])
def test_either_spelling_gives_each_spelling(key):
    assert dotted_key(key) == "log.retention.ms"
    assert underscored_key(key) == "log_retention_ms"


def test_only_dots_and_underscores_change():
    assert dotted_key("listener.name.SASL_SSL.ssl-x") == "listener.name.SASL.SSL.ssl-x"
    assert underscored_key("Min.InSync") == "Min_InSync"


def test_mappings_keep_their_values():
    assert underscored_keys({"num.partitions": 3}) == {"num_partitions": 3}
    assert dotted_keys({"num_partitions": 3, "x": None}) == {"num.partitions": 3, "x": None}
