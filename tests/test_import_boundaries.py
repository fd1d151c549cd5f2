"""DESIGN §1: who may import what, checked on the source (no imports are executed).

- replicas/ imports only the stdlib and the record codec (aiokafka, crc32c): never ray,
  kazoo, pyspark, raydp, nor any other rayka layer.
- controller/ never imports ray, pyspark or raydp; only its ZooKeeper store module(s)
  import kazoo.
- The core (replicas/, controller/ minus the store) never reads or sleeps on the real
  clock: time is passed in.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
STDLIB = set(sys.stdlib_module_names)
CODEC = {"aiokafka", "crc32c"}
ZK_STORE = ("controller/zk", "controller/store", "controller/zookeeper")


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def clock_calls(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "time" and node.attr in {"time", "monotonic", "sleep",
                                                               "time_ns", "monotonic_ns"}:
            bad.append(f"{path.relative_to(ROOT)}:{node.lineno} time.{node.attr}")
        if isinstance(node, ast.Attribute) and node.attr in {"now", "utcnow"} \
                and isinstance(node.value, ast.Name) and node.value.id == "datetime":
            bad.append(f"{path.relative_to(ROOT)}:{node.lineno} datetime.{node.attr}")
    return bad


def sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def test_replicas_imports_only_stdlib_and_the_codec():
    offenders = {}
    for path in sources("replicas"):
        extra = imports_of(path) - STDLIB - CODEC - {"replicas"}
        if extra:
            offenders[str(path.relative_to(ROOT))] = sorted(extra)
    assert not offenders


def test_controller_never_imports_ray_and_only_the_store_imports_kazoo():
    offenders = {}
    for path in sources("controller"):
        rel = str(path.relative_to(ROOT))
        mods = imports_of(path)
        banned = mods & {"ray", "pyspark", "raydp", "actors", "rayka", "pipeline"}
        if "kazoo" in mods and not rel.startswith(ZK_STORE):
            banned.add("kazoo")
        if banned:
            offenders[rel] = sorted(banned)
    assert not offenders


def test_core_takes_a_clock():
    bad = []
    for package in ("replicas", "controller"):
        for path in sources(package):
            if not str(path.relative_to(ROOT)).startswith(ZK_STORE):
                bad += clock_calls(path)
    assert not bad


def test_the_checker_sees_a_violation(tmp_path):
    sample = tmp_path / "x.py"
    sample.write_text("import ray\nfrom kazoo.client import KazooClient\nimport time\ntime.sleep(1)\n")
    assert {"ray", "kazoo"} <= imports_of(sample)
    global ROOT
    old, ROOT = ROOT, tmp_path
    try:
        assert clock_calls(sample) == ["x.py:4 time.sleep"]
    finally:
        ROOT = old
