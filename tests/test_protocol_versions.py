"""protocol/versions.py: what ApiVersions advertises against Kafka 3.8's ranges, and README's
table (docs/api_table.py) kept in step with both."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from protocol.codec import has_request_schema
from protocol.legacy import SCHEMAS
from protocol.versions import KAFKA_38, KAFKA_40, REJECTED_VERSIONS, SUPPORTED, api_table

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
_spec = importlib.util.spec_from_file_location("api_table", ROOT / "docs" / "api_table.py")
_script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_script)
START, END, with_table = _script.START, _script.END, _script.with_table
# what rayka serves short of Kafka 3.8, and why


def test_every_api_served_is_served_over_kafka_38s_whole_range():
    for key, (lo, hi) in SUPPORTED.items():
        name, klo, khi = KAFKA_40.get(key) or KAFKA_38[key]
        assert (lo, hi) == (klo, khi), name
    assert REJECTED_VERSIONS == {}       # Kafka 3.8 rejects nothing it advertises


def test_every_served_version_has_a_schema():
    for key, (lo, hi) in SUPPORTED.items():
        for v in range(lo, hi + 1):
            assert has_request_schema(key, v) or (key, v) in SCHEMAS, (key, v)


def test_readme_shows_the_current_table():
    text = README.read_text()
    assert with_table(text, api_table()) == text, \
        "README.md's API table is stale: run .venv/bin/python docs/api_table.py"


def test_the_table_lists_every_kafka_api_once():
    rows = [r for r in api_table().splitlines()[2:]]
    kafka_4_only = [k for k in KAFKA_40 if k not in KAFKA_38 and k in SUPPORTED]
    assert len(rows) == len(KAFKA_38) + len(kafka_4_only)
    assert "| 78 | ShareFetch | 1-2 | — |" in rows
    assert "| 0 | Produce | 0-12 | 0-11 |" in rows and "| 1 | Fetch | 0-16 | 0-16 |" in rows
    assert "| 33 | AlterConfigs | 0-2 | 0-2 |" in rows and "| 34 | AlterReplicaLogDirs | — | 0-2 |" in rows


def test_the_markers_are_required():
    with pytest.raises(ValueError):
        with_table("no table here", "| x |")
    assert with_table(f"a\n{START}\nold\n{END}\nb", "new") == f"a\n{START}\nnew\n{END}\nb"
