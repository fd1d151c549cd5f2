"""The rooms of the house and who may import what (docs/architecture.md, "The rooms"),
checked on the source.

Nothing is imported or executed: every `import` statement of every module (module level
and inside functions alike) is read with `ast` and resolved to a first-party module.

- Rooms are ordered top to bottom (ROOMS); an import may point to its own room or one below
  it, never upward. Inside `rayka/` the sub-rooms are ordered too (cli, chaos, ops, cluster,
  client, errors), and inside `controller/` its ZooKeeper subpackage sits above the core.
- No import cycle between modules (strongly connected components of the module graph).
- Third-party rules: replicas/ imports only the stdlib and the record codec; the pure
  rooms never import ray, pyspark or raydp; kazoo only inside controller/zookeeper/; the
  protocol and both coordinator rooms open no sockets (sans-I/O); the transaction
  coordinator shares the group coordinator's rank but imports only replicas/.
- The core (replicas/, controller/ minus its ZooKeeper subpackage, protocol/, coordinator/,
  transactions/) never reads or sleeps on the real clock: time is passed in.
- Every package opens with a docstring saying what it holds and what it "May import";
  product modules stay at or under 1,000 lines (pylint's max-module-lines: a smoke alarm,
  not a target; modules are cut by concept, never to fit a count).
- No module (product or bench) uses another project module's `_private` name, neither imported
  (`from x import _y`) nor reached through an imported module (`import x` ... `x._y`):
  what another module needs is public.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
STDLIB = set(sys.stdlib_module_names)
CODEC = {"aiokafka", "crc32c", "cramjam"}
PRODUCT = ("replicas", "controller", "coordinator", "transactions", "share", "protocol", "actors",
           "rayka", "pipeline", "console")

# Top to bottom. A module's room is the longest prefix naming it; it may import its own
# room and the rooms after it. Prefixes on one line share a rank.
ROOMS: list[tuple[str, ...]] = [
    ("bench",),
    ("console",),
    ("pipeline",),
    ("rayka.cli",),
    ("rayka.chaos",),
    ("rayka.ops",),
    ("rayka", "rayka.cluster"),
    ("rayka.client",),
    ("rayka.errors",),
    ("actors",),
    ("protocol",),
    ("coordinator", "transactions", "share"),
    ("controller.zookeeper",),
    ("controller",),
    ("replicas",),
]
CORE = ("replicas", "controller", "protocol", "coordinator", "transactions", "share")
NOT_IN_CORE = {"ray", "pyspark", "raydp"}
SANS_IO = {"socket", "socketserver", "selectors", "asyncio", "ssl", "ray", "kazoo"}
MAX_LINES = 1000


# -- reading the tree --------------------------------------------------------------------------
def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules(root: Path, packages=PRODUCT + ("bench",)) -> dict[str, Path]:
    mods = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            mods[module_name(path, root)] = path
    return mods


def raw_imports(path: Path, module: str) -> list[tuple[str, list[str], int]]:
    """(absolute module, imported names, line) for every import statement in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, [], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.append((target, [a.name for a in node.names], node.lineno))
    return out


def first_party_edges(mods: dict[str, Path]) -> dict[str, set[tuple[str, int]]]:
    """module -> {(imported first-party module, line)}; `from pkg import sub` points to
    pkg.sub when that is a module, else to pkg."""
    edges: dict[str, set[tuple[str, int]]] = {m: set() for m in mods}
    for mod, path in mods.items():
        for target, names, line in raw_imports(path, mod):
            if target.split(".")[0] not in {m.split(".")[0] for m in mods}:
                continue
            subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in mods]
            if subs:
                edges[mod].update((s, line) for s in subs)
            if len(subs) < len(names) or not names:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target:
                    edges[mod].add((target, line))
    return edges


def third_party(path: Path, module: str) -> set[str]:
    return {t.split(".")[0] for t, _, _ in raw_imports(path, module)} - {""}


# -- the rules ---------------------------------------------------------------------------------
def room_rank(module: str, rooms=ROOMS) -> int | None:
    best, rank = "", None
    for i, prefixes in enumerate(rooms):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > len(best):
                best, rank = p, i
    return rank


def upward_imports(edges, rooms=ROOMS) -> list[str]:
    bad = []
    for mod, targets in edges.items():
        mine = room_rank(mod, rooms)
        for target, line in sorted(targets):
            theirs = room_rank(target, rooms)
            if mine is not None and theirs is not None and theirs < mine:
                bad.append(f"{mod}:{line} imports {target} (a room above it)")
    return bad


def import_cycles(edges) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    graph = {m: sorted({t for t, _ in ts if t != m}) for m, ts in edges.items()}
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in graph:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter[0]
                counter[0] += 1
                stack.append(node)
                on_stack.add(node)
            succ = graph.get(node, [])
            if i < len(succ):
                work.append((node, i + 1))
                nxt = succ[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return out


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


MODS = project_modules(ROOT)
EDGES = first_party_edges(MODS)


def in_room(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(mods: dict[str, Path]) -> list[str]:
    """`module:line` for each `_private` name of another project module that a module
    imports, or reads as an attribute of a name bound to that module."""
    roots = {m.split(".")[0] for m in mods}
    bad = []
    for mod, path in mods.items():
        for target, names, line in raw_imports(path, mod):
            if target.split(".")[0] in roots and target != mod:
                bad += [f"{mod}:{line} imports {target}.{n}" for n in names if is_private(n)]
        tree = ast.parse(path.read_text(), filename=str(path))
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        bound: dict[str, str] = {}          # local name -> the project module it names
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    name = alias.name if alias.asname else alias.name.split(".")[0]
                    bound[alias.asname or name] = name
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[:len(package.split(".")) - node.level + 1] \
                    if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:
                    if f"{target}.{alias.name}" in mods:
                        bound[alias.asname or alias.name] = f"{target}.{alias.name}"

        def dotted(node) -> str | None:
            if isinstance(node, ast.Name):
                return bound.get(node.id)
            if isinstance(node, ast.Attribute) and (owner := dotted(node.value)):
                return f"{owner}.{node.attr}"
            return None

        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and is_private(node.attr):
                owner = dotted(node.value)
                if owner in mods and owner != mod:
                    bad.append(f"{mod}:{node.lineno} uses {owner}.{node.attr}")
    return bad


# -- tests on the real tree ----------------------------------------------------------------------
def test_every_module_has_a_room():
    assert [m for m in MODS if room_rank(m) is None] == []


def test_no_import_runs_upward():
    assert upward_imports(EDGES) == []


def test_no_import_cycles():
    assert import_cycles(EDGES) == []


def test_replicas_imports_only_stdlib_and_the_codec():
    offenders = {m: sorted(third_party(p, m) - STDLIB - CODEC - {"replicas"})
                 for m, p in MODS.items() if in_room(m, "replicas")}
    assert {m: x for m, x in offenders.items() if x} == {}


def test_the_core_never_imports_ray_and_only_the_zookeeper_store_imports_kazoo():
    offenders = {}
    for m, p in MODS.items():
        mods = third_party(p, m)
        banned = set()
        if in_room(m, *CORE):
            banned |= mods & NOT_IN_CORE
        if "kazoo" in mods and in_room(m, *PRODUCT) and not in_room(m, "controller.zookeeper"):
            banned.add("kazoo")
        if banned:
            offenders[m] = sorted(banned)
    assert offenders == {}


def test_the_clients_pure_parts_import_no_ray():
    pure = ("rayka.client.partitioner", "rayka.client.types", "rayka.client.accumulator")
    first_party = {m.split(".")[0] for m in MODS}
    offenders = {m: sorted(third_party(MODS[m], m) - STDLIB - CODEC - first_party) for m in pure}
    assert {m: x for m, x in offenders.items() if x} == {}


def test_protocol_and_coordinator_are_sans_io():
    offenders = {m: sorted(third_party(p, m) & SANS_IO) for m, p in MODS.items()
                 if in_room(m, "protocol", "coordinator", "transactions", "share")}
    assert {m: x for m, x in offenders.items() if x} == {}


def test_the_two_coordinators_share_a_rank_but_not_each_other():
    """transactions/ imports the stdlib (no threads) and replicas/ only; coordinator/ never
    imports it."""
    threads = {"threading", "_thread", "concurrent", "multiprocessing"}
    offenders = {m: sorted((third_party(p, m) - STDLIB - {"replicas", "transactions"})
                           | (third_party(p, m) & threads))
                 for m, p in MODS.items() if in_room(m, "transactions")}
    assert {m: x for m, x in offenders.items() if x} == {}
    assert not [(m, t) for m, targets in EDGES.items() if in_room(m, "coordinator")
                for t, _ in targets if in_room(t, "transactions")]


def test_the_share_room_imports_only_the_stdlib_and_replicas():
    threads = {"threading", "_thread", "concurrent", "multiprocessing"}
    offenders = {m: sorted((third_party(p, m) - STDLIB - {"replicas", "share"})
                           | (third_party(p, m) & threads))
                 for m, p in MODS.items() if in_room(m, "share")}
    assert {m: x for m, x in offenders.items() if x} == {}


def test_the_console_never_imports_the_pipeline_nor_spark():
    offenders = {m: sorted(third_party(p, m) & {"pipeline", "pyspark", "raydp"})
                 for m, p in MODS.items() if in_room(m, "console")}
    assert {m: x for m, x in offenders.items() if x} == {}


def test_core_takes_a_clock():
    bad = []
    for m, p in MODS.items():
        if in_room(m, *CORE) and not in_room(m, "controller.zookeeper"):
            bad += clock_calls(p)
    assert bad == []


def test_every_package_says_what_it_holds_and_may_import():
    missing = []
    for m, p in MODS.items():
        if p.name == "__init__.py" and m != "bench":
            doc = ast.get_docstring(ast.parse(p.read_text())) or ""
            if "May import" not in doc or "placeholder" in doc:
                missing.append(m)
    assert missing == []


def test_product_modules_stay_small():
    big = {m: n for m, p in MODS.items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert big == {}


def test_no_module_uses_another_modules_private_names():
    assert private_uses(MODS) == []


# -- the checker itself sees violations ---------------------------------------------------------
def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    for rel, text in files.items():
        f = tmp_path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    return project_modules(tmp_path, ("low", "high"))


def test_the_checker_sees_an_upward_import_and_a_cycle(tmp_path):
    mods = _tree(tmp_path, {
        "low/__init__.py": "", "high/__init__.py": "",
        "low/a.py": "from high.b import x\n",          # upward
        "high/b.py": "from . import c\n",              # relative, part of a cycle
        "high/c.py": "def f():\n    import high.b\n",  # function-level import closes it
    })
    edges = first_party_edges(mods)
    rooms = [("high",), ("low",)]
    assert upward_imports(edges, rooms) == ["low.a:1 imports high.b (a room above it)"]
    assert import_cycles(edges) == [["high.b", "high.c"]]


def test_the_checker_sees_private_names_used_across_modules(tmp_path):
    mods = _tree(tmp_path, {
        "low/__init__.py": "", "high/__init__.py": "",
        "low/a.py": "_hidden = 1\nshown = 2\n\n\ndef _helper():\n    pass\n",
        "low/b.py": "from low.a import _hidden, shown\n",            # a private name
        "low/c.py": "from . import a\nx = a._helper()\ny = a.shown\n",  # through the module
        "high/d.py": "import low.a as alias\nz = alias._hidden\n",
        "high/e.py": "import low.a\nw = low.a._helper\nv = low.a.__name__\n",
        "high/f.py": "_mine = 1\nfrom os import _exit\nprint(_mine)\n",  # own / not ours
    })
    assert sorted(private_uses(mods)) == [
        "high.d:2 uses low.a._hidden", "high.e:2 uses low.a._helper",
        "low.b:1 imports low.a._hidden", "low.c:2 uses low.a._helper"]


def test_the_checker_sees_banned_modules_and_clock_reads(tmp_path):
    sample = tmp_path / "x.py"
    sample.write_text("import ray\nfrom kazoo.client import KazooClient\nimport time\ntime.sleep(1)\n")
    assert {"ray", "kazoo", "time"} <= third_party(sample, "x")
    global ROOT
    old, ROOT = ROOT, tmp_path
    try:
        assert clock_calls(sample) == ["x.py:4 time.sleep"]
    finally:
        ROOT = old
