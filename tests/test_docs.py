"""The docs match the tree: README's layout table and docs/architecture.md name only paths
that exist (or are marked reserved), every package appears in both, the architecture
picture names existing modules, and the Grafana dashboard is the one its script generates
from the gauges actors/metrics.py declares."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from actors.metrics import BROKER_GAUGES, CONTROLLER_GAUGES

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
PATH_TOKEN = re.compile(r"`([\w./-]+/(?:[\w.-]+\.py)?|[\w./-]+\.py)`")
PACKAGES = ("replicas", "controller", "coordinator", "transactions", "share", "protocol", "actors",
            "rayka",
            "pipeline", "console")


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dashboard_metric_names() -> set[str]:
    text = (ROOT / "docs" / "grafana" / "rayka.json").read_text()
    return set(re.findall(r"\bray_rayka_\w+", text))


def path_tokens(text: str) -> list[tuple[str, bool]]:
    """(path, reserved?) for every backticked file or directory path; a path is reserved
    when the same line says so right after it (`x.py` (reserved ...) or `x/` ... reserved:).
    In a table row, a bare `module.py` is relative to the row's first directory; elsewhere
    bare names are skipped (nothing to resolve them against)."""
    out = []
    for line in text.splitlines():
        row_dir = None
        for m in PATH_TOKEN.finditer(line):
            token = m.group(1)
            if token.startswith(("http", ".", "~", "/")) or "<" in token:
                continue
            if "/" not in token.rstrip("/") and not (token.endswith("/") and (ROOT / token).is_dir()):
                if not (line.startswith("|") and row_dir):
                    continue
                token = row_dir + token         # a module (or subpackage) of the row's room
            elif line.startswith("|") and row_dir is None:
                row_dir = token if token.endswith("/") else token.rpartition("/")[0] + "/"
            after = line[m.end():m.end() + 14]
            before = line[max(0, m.start() - 12):m.start()]
            out.append((token, "reserved" in after or "reserved" in before))
    return out


def packages() -> set[str]:
    """Every package directory of the product, as `dir/` (relative)."""
    return {str(p.parent.relative_to(ROOT)) + "/" for pkg in PACKAGES
            for p in (ROOT / pkg).rglob("__init__.py")}


@pytest.mark.parametrize("doc", ["README.md", "docs/architecture.md"])
def test_named_paths_exist_unless_reserved(doc):
    missing = [t for t, reserved in path_tokens((ROOT / doc).read_text())
               if not reserved and not (ROOT / t).exists()]
    assert missing == []


def test_reserved_paths_are_really_not_built_yet():
    """A reserved room that got built must lose its `reserved` mark in the docs."""
    built = [t for doc in ("README.md", "docs/architecture.md")
             for t, reserved in path_tokens((ROOT / doc).read_text())
             if reserved and t.endswith(".py") and (ROOT / t).exists()]
    assert built == []


@pytest.mark.parametrize("doc", ["README.md", "docs/architecture.md"])
def test_every_package_is_in_the_layout(doc):
    text = (ROOT / doc).read_text()
    named = {t for t, _ in path_tokens(text)}
    # rayka/ itself is shown by the modules that are rooms of their own
    missing = sorted(p for p in packages() if p not in named and p != "rayka/")
    assert missing == []
    assert {"rayka/cli.py", "rayka/cluster.py"} <= named


def test_the_picture_names_existing_modules():
    arch = load(ROOT / "docs" / "architecture.py")
    missing = sorted(m for m in arch.modules()
                     if m not in arch.RESERVED_MODULES and not (ROOT / m).exists())
    assert missing == []
    assert (ROOT / "docs" / "architecture.png").stat().st_size > 10_000


def test_the_grafana_dashboard_is_generated_and_names_declared_gauges():
    build = load(ROOT / "docs" / "grafana" / "build_dashboard.py")
    assert (ROOT / "docs" / "grafana" / "rayka.json").read_text() == build.render(), \
        "docs/grafana/rayka.json is stale: run docs/grafana/build_dashboard.py"
    declared = {f"ray_rayka_{k}" for k in CONTROLLER_GAUGES} | \
        {f"ray_rayka_broker_{k}" for k in BROKER_GAUGES}
    names = dashboard_metric_names()
    assert names and names <= declared, names - declared
    panels = json.loads(build.render())["panels"]
    assert all(p["targets"][0]["expr"] for p in panels)


def test_the_checkers_see_a_missing_path():
    tokens = path_tokens("see `nowhere/gone.py` and `actors/listener.py` (reserved) and "
                         "`replicas/`")
    assert tokens == [("nowhere/gone.py", False), ("actors/listener.py", True),
                      ("replicas/", False)]
    assert not (ROOT / "nowhere/gone.py").exists()


# Documents that live outside the repository (the founders' notes): a clone cannot follow a
# reference to them, so the code and docs cite Kafka's sources or this repository instead.
OUTSIDE = re.compile(r"DESIGN §|DESIGN\.md|KAFKA_FACTS|KAFKA_GROUPS_LOGS|KAFKA_PROTOCOL|"
                     r"PLATFORM_NOTES|\.\./shared")


def test_nothing_cites_a_document_the_repository_does_not_hold():
    import subprocess
    files = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=ROOT,
                           check=True).stdout.split()
    cited = []
    for name in files:
        path = ROOT / name
        if path.suffix not in (".py", ".md", ".toml", ".yaml", ".cfg") and path.name != "Makefile":
            continue
        if path == Path(__file__).resolve() or not path.exists():   # deleted, not yet committed
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                cited.append(f"{name}:{number}: {line.strip()}")
    assert cited == []


def package_docstring_gaps(root: Path, packages=PACKAGES + ("bench",)) -> dict[str, list[str]]:
    """package → the modules and subpackages its `__init__` docstring does not name (as a
    whole word: `storage` does not count for `storage_api`)."""
    import ast
    gaps = {}
    for pkg in packages:
        for init in sorted((root / pkg).rglob("__init__.py")):
            doc = ast.get_docstring(ast.parse(init.read_text())) or ""
            here = init.parent
            names = [p.stem for p in here.glob("*.py") if p.stem != "__init__"]
            names += [d.name for d in here.iterdir() if (d / "__init__.py").exists()]
            missing = sorted(n for n in names
                             if not re.search(rf"(?<![\w.]){re.escape(n)}(?![\w])", doc))
            if missing:
                gaps[str(here.relative_to(root))] = missing
    return gaps


def test_every_package_docstring_names_its_modules():
    assert package_docstring_gaps(ROOT) == {}


def test_the_docstring_check_sees_an_unnamed_module(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text('"""pkg/: storage_api holds the API."""\n')
    (tmp_path / "pkg" / "storage.py").write_text("")
    (tmp_path / "pkg" / "storage_api.py").write_text("")
    assert package_docstring_gaps(tmp_path, ("pkg",)) == {"pkg": ["storage"]}


NAMED_PATH = re.compile(r"((?:actors|replicas|controller|coordinator|transactions|share|protocol|rayka|"
                        r"pipeline|bench|tests|docs)/[\w/]*\w\.(?:py|md))")


def test_every_file_a_docstring_or_doc_names_exists():
    """A module renamed or folded away leaves no docstring, comment or doc pointing at it."""
    import subprocess
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"],
                           capture_output=True, text=True, cwd=ROOT, check=True).stdout.split()
    stale = []
    for name in files:
        path = ROOT / name
        if path.suffix not in (".py", ".md", ".toml") or not path.exists():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            stale += [f"{name}:{number}: {m}" for m in NAMED_PATH.findall(line)
                      if not (ROOT / m).exists()]
    assert stale == []
