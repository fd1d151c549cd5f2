"""bench/ab_versions.py: which files an A/B swaps and how (on a throwaway git repository),
the alternating order, and the paired differences of its summary."""

from __future__ import annotations

import subprocess

import pytest

from bench.ab_versions import changed_files, dirty, order, parse_windows, summarize, use

pytestmark = pytest.mark.unit


def _git(root, *args):
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "user.email", "t@example.com")
    _git(tmp_path, "config", "user.name", "t")
    (tmp_path / "console").mkdir()
    (tmp_path / "bench").mkdir()
    (tmp_path / "console" / "a.py").write_text("old\n")
    (tmp_path / "bench" / "b.py").write_text("bench old\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "old")
    old = _git(tmp_path, "rev-parse", "HEAD")
    (tmp_path / "console" / "a.py").write_text("new\n")
    (tmp_path / "console" / "added.py").write_text("only new\n")
    (tmp_path / "bench" / "b.py").write_text("bench new\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "new")
    return tmp_path, old, _git(tmp_path, "rev-parse", "HEAD")


def test_only_product_files_are_swapped_and_put_back(repo):
    root, old, new = repo
    files = changed_files(old, new, root)
    assert files == ["console/a.py", "console/added.py"]          # bench/ is not product
    assert dirty(files, root) == []
    use(old, files, root)
    assert (root / "console" / "a.py").read_text() == "old\n"
    assert not (root / "console" / "added.py").exists()
    assert (root / "bench" / "b.py").read_text() == "bench new\n"
    assert sorted(dirty(files, root)) == files                  # a run would refuse now
    use(new, files, root)
    assert dirty(files, root) == []


def test_versions_alternate_which_goes_first():
    assert [order(p) for p in range(3)] == [("old", "new"), ("new", "old"), ("old", "new")]


def test_windows_parse():
    assert parse_windows("200:0,1000:2,500") == [(200, 0.0), (1000, 2.0), (500, 0.0)]


def test_the_summary_pairs_each_new_with_the_old_of_its_pair():
    def row(pair, version, p50, cpu):
        return {"pair": pair, "version": version, "window": 0, "rate": 200,
                "linger_ms": 0, "ack_p50_ms": p50, "broker_us_per_record": cpu}
    rows = [row(0, "old", 2.0, 1000), row(0, "new", 1.8, 1010),
            row(1, "new", 2.6, 900), row(1, "old", 3.0, 880),      # a slower hour
            row(2, "old", 1.5, 700)]                               # its pair never ran
    s = summarize(rows)
    p50 = s["200/s linger 0 #0 ack_p50_ms"]
    assert p50["deltas"] == [-0.2, -0.4] and p50["median_delta"] == pytest.approx(-0.3)
    assert p50["same_sign"] and p50["old"] == [2.0, 3.0, 1.5]
    cpu = s["200/s linger 0 #0 broker_us_per_record"]
    assert cpu["deltas"] == [10, 20] and cpu["same_sign"]
    assert "200/s linger 0 #0 ack_p99_ms" in s and s["200/s linger 0 #0 ack_p99_ms"]["deltas"] == []
