"""compat/run.py's list of librdkafka broker tests, read from librdkafka's own test list in the
pinned source snapshot (no build needed)."""

from __future__ import annotations

import importlib.util
import os
import tarfile

import pytest

pytestmark = pytest.mark.unit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def compat_run():
    spec = importlib.util.spec_from_file_location("compat_run", os.path.join(ROOT, "compat",
                                                                               "run.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tests_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("rdk")
    with tarfile.open(os.path.join(ROOT, "compat", "librdkafka-v2.15.0.tar.gz")) as tar:
        member = next(m for m in tar.getmembers() if m.name == "librdkafka-2.15.0/tests/test.c")
        (out / "test.c").write_bytes(tar.extractfile(member).read())
    return str(out)


def test_broker_tests_are_the_non_local_entries_rayka_can_serve(compat_run, tests_dir):
    listed = compat_run.broker_tests(tests_dir)
    names = [name for name, _ in listed]
    assert len(names) == len(set(names)) > 80
    for wanted in ("0001_multiobj", "0011_produce_batch", "0030_offset_commit", "0081_admin",
                   "0092_mixed_msgver", "0103_transactions", "0129_fetch_aborted_msgs"):
        assert wanted in names
    for local in ("0000_unittests", "0004_conf", "0006_symbols", "0009_mock_cluster"):
        assert local not in names                      # TEST_F_LOCAL: no broker involved
    assert set(compat_run.NOT_APPLICABLE) <= set(names)  # listed, with the reason
    assert names[0] == "0001_multiobj"                  # test.c's order kept
    assert names.index("0011_produce_batch") < names.index("0103_transactions")
    scenarios = dict(listed)
    assert scenarios["0107_topic_recreate"] == "noautocreate"      # a cluster of its own
    assert scenarios["0001_multiobj"] == "default"
    assert set(scenarios.values()) == {"default", "noautocreate"}


def test_tests_mapped_to_a_cluster_of_their_own_are_broker_tests(compat_run, tests_dir):
    """CLUSTER_OF names a cluster for tests whose test.c entry names no scenario (0101
    needs racks; 0126, 0135 and 0142 a SASL user): each is a broker test run with its own
    scenario, on that cluster."""
    scenarios = dict(compat_run.broker_tests(tests_dir))
    assert compat_run.CLUSTER_OF == {"0101_fetch_from_follower": "rack",
                                     "0126_oauthbearer_oidc": "sasl",
                                     "0135_sasl_credentials": "sasl",
                                     "0142_reauthentication": "sasl"}
    assert set(compat_run.SASL_CONF) >= {"security.protocol", "sasl.mechanism",
                                         "sasl.username", "sasl.password"}
    for name in compat_run.CLUSTER_OF:
        assert scenarios[name] == "default"
