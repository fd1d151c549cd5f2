"""Chaos on real parts: a 3-server ZooKeeper ensemble, a multi-node Ray test cluster with one
broker per node, controller and broker actors, a concurrent workload, faults of every kind,
and the checker's verdict over the history and the brokers' files. The seed is printed;
replay with RAYKA_CHAOS_SEED=<seed> (and `rayka chaos --seed <seed>` for longer runs)."""

from __future__ import annotations

import os

import pytest

from rayka.chaos.runner import FAULT_KINDS, TXN_FAULT_KINDS, ChaosConfig, run_chaos

pytestmark = [pytest.mark.chaos, pytest.mark.ray]
SEED = int(os.environ.get("RAYKA_CHAOS_SEED", "7"))


def _every_kind(tmp_path, per_kind: int) -> None:
    print(f"chaos seed {SEED}")
    verdict, out = run_chaos(ChaosConfig(duration_s=0, min_faults_per_kind=per_kind, seed=SEED,
                                         faults=FAULT_KINDS, out_dir=str(tmp_path / "run")))
    print(verdict.table())
    assert verdict.stats["liveness_failures"] == [], f"seed {SEED}: {out}"
    assert verdict.ok, f"seed {SEED}: {verdict.violations[:5]} (history in {out})"
    assert all(verdict.stats["faults_by_kind"].get(k, 0) >= per_kind for k in FAULT_KINDS), \
        verdict.stats["faults_by_kind"]
    assert verdict.stats["acknowledged"] > 2_000 * per_kind and verdict.stats["lost"] == 0
    # indeterminate sends may or may not have landed; acknowledged ones all did
    assert verdict.stats["final_records"] >= verdict.stats["acknowledged"]


def test_short_run_with_a_fault_of_every_kind_loses_nothing(tmp_path):
    """`make test`'s schedule: every fault kind once (about 2 minutes; `make chaos` runs
    every kind five times)."""
    _every_kind(tmp_path, 1)


@pytest.mark.slow
@pytest.mark.timeout(3600)      # a soak: 6-15 minutes on 2 cores (pytest's cap is 600 s)
def test_run_with_five_faults_of_every_kind_loses_nothing(tmp_path):
    """`make chaos`: every fault kind five times (6-8 minutes on 2 cores)."""
    _every_kind(tmp_path, 5)


# both halves run in `make chaos` (the suite's budget): the every-kind run above holds the
# safe defaults to losing nothing in `make test`, and tests/test_chaos_checker.py shows the
# checker sees a loss in a history that has one; here the real cluster under the unsafe
# configuration must lose acknowledged writes and the checker must say so
@pytest.mark.slow
@pytest.mark.parametrize("unsafe", [
    pytest.param(True, id="unsafe-config-loses"),
    pytest.param(False, id="safe-config-keeps")])
def test_isr_of_one_the_checker_sees_loss_only_when_the_config_allows_it(tmp_path, unsafe):
    """Jepsen 2013 against Kafka 0.8, scripted: followers paused, the ISR shrinks to the leader,
    the leader acknowledges alone and dies. Unclean election + min ISR 1 must LOSE acknowledged
    writes (the checker is not vacuous); the safe defaults must lose none."""
    verdict, out = run_chaos(ChaosConfig(scenario="isr-of-one", unsafe=unsafe, seed=SEED,
                                         faults=("kill-broker",), out_dir=str(tmp_path / "run")))
    print(verdict.table())
    if unsafe:
        assert verdict.stats["lost"] > 0, f"the unsafe configuration lost nothing ({out})"
        assert {v.invariant for v in verdict.violations} >= {1}
    else:
        assert verdict.ok and verdict.stats["lost"] == 0, f"{verdict.violations[:5]} ({out})"
        assert verdict.stats["liveness_failures"] == []


@pytest.mark.slow      # `make chaos`: the suite's budget keeps one short run in make test
def test_librdkafka_clients_through_broker_faults_lose_nothing(tmp_path):
    """`rayka chaos --client librdkafka`: the workload through unmodified Kafka clients over the
    listeners (idempotent acks=all producers, an assigned consumer), the same checker."""
    kinds = ("kill-broker", "pause-leader", "controlled-shutdown", "expire-broker", "cut-links")
    verdict, out = run_chaos(ChaosConfig(duration_s=0, min_faults_per_kind=1, seed=SEED,
                                         faults=kinds, client="librdkafka",
                                         out_dir=str(tmp_path / "run")))
    print(verdict.table())
    assert verdict.ok and verdict.stats["lost"] == 0, f"{verdict.violations[:5]} ({out})"
    assert verdict.stats["liveness_failures"] == [], out
    assert all(verdict.stats["faults_by_kind"].get(k, 0) >= 1 for k in kinds)
    assert verdict.stats["acknowledged"] > 1_000 and verdict.stats["duplicated"] == 0
    assert verdict.stats["reads"] > 0        # the librdkafka consumer read what it recorded


@pytest.mark.slow      # `make chaos`: the suite's budget keeps one short run in make test
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_consumer_group_through_coordinator_faults_commits_never_go_back(tmp_path, protocol):
    """`rayka chaos --group-members 3 [--group-protocol consumer]`: a group churns over the
    topic (members join, leave and die; some poll in their own thread, some share one; some
    auto-commit) while its coordinator's broker is killed and paused; committed offsets never
    go back, no partition has two owners in a generation (KIP-848: a member epoch), every
    acknowledged record is read by the group and the group ends caught up."""
    kinds = ("kill-coordinator", "pause-coordinator", "kill-broker")
    # 20 s: a member that dies while leading a join stalls the group for a session timeout
    # (as in Kafka), and the churn needs time for several generations
    verdict, out = run_chaos(ChaosConfig(duration_s=20, min_faults_per_kind=1, seed=SEED,
                                         faults=kinds, group_members=3,
                                         group_protocol=protocol,
                                         out_dir=str(tmp_path / "run")))
    print(verdict.table())
    assert verdict.ok and verdict.stats["lost"] == 0, f"{verdict.violations[:5]} ({out})"
    assert verdict.stats["liveness_failures"] == [], out
    assert all(verdict.stats["faults_by_kind"].get(k, 0) >= 1 for k in kinds)
    assert verdict.stats["group_generations"] >= 2 and verdict.stats["group_reads"] > 0
    assert verdict.stats["group_committed_samples"] > 0


@pytest.mark.slow      # `make chaos`: the suite's budget keeps one short run in make test
def test_a_compacted_topic_through_broker_faults_keeps_every_keys_last_value(tmp_path):
    """`rayka chaos --compact-keys 20`: values overwrite 20 keys on a compacted topic with small
    segments while the cleaners run (every second) and brokers are killed and paused: no
    acknowledged record is lost unless a later record of its key is there, and the ISR
    replicas end with the same last value for every key."""
    kinds = ("kill-broker", "pause-leader", "kill-broker-norestart")
    verdict, out = run_chaos(ChaosConfig(duration_s=30, min_faults_per_kind=1, seed=SEED,
                                         faults=kinds, compact_keys=20,
                                         out_dir=str(tmp_path / "run")))
    print(verdict.table())
    assert verdict.ok and verdict.stats["lost"] == 0, f"{verdict.violations[:5]} ({out})"
    assert verdict.stats["liveness_failures"] == [], out
    assert verdict.stats["compacted_away"] > 0, verdict.stats      # the cleaners did work
    assert all(verdict.stats["faults_by_kind"].get(k, 0) >= 1 for k in kinds)


@pytest.mark.slow
@pytest.mark.timeout(3600)      # a soak: 6-15 minutes on 2 cores (pytest's cap is 600 s)
def test_librdkafka_clients_through_five_faults_of_every_kind_lose_nothing(tmp_path):
    """`make chaos`: the full fault schedule (>= 5 of every kind, the link cut included)
    with the workload over unmodified Kafka clients."""
    verdict, out = run_chaos(ChaosConfig(duration_s=0, min_faults_per_kind=5, seed=SEED,
                                         faults=FAULT_KINDS, client="librdkafka",
                                         out_dir=str(tmp_path / "run")))
    print(verdict.table())
    assert verdict.ok and verdict.stats["lost"] == 0, f"{verdict.violations[:5]} ({out})"
    assert verdict.stats["liveness_failures"] == [], out
    assert all(verdict.stats["faults_by_kind"].get(k, 0) >= 5 for k in FAULT_KINDS), \
        verdict.stats["faults_by_kind"]
    assert verdict.stats["duplicated"] == 0 and verdict.stats["reads"] > 0


def _transactions(tmp_path, kinds, per_kind: int, writers: int):
    print(f"chaos seed {SEED}")
    verdict, out = run_chaos(ChaosConfig(duration_s=0, min_faults_per_kind=per_kind, seed=SEED,
                                         faults=kinds, transactions=writers,
                                         out_dir=str(tmp_path / "run")))
    print(verdict.table())
    s = verdict.stats
    assert s["liveness_failures"] == [], f"seed {SEED}: {out}"
    assert verdict.ok, f"seed {SEED}: {verdict.violations[:5]} (history in {out})"
    assert all(s["faults_by_kind"].get(k, 0) >= per_kind for k in kinds), s["faults_by_kind"]
    # not vacuous: commits, aborts, a zombie and a pipeline that moved data, all checked
    assert s["txn_committed"] > 10 * writers and s["txn_aborted"] > 0, s
    assert s["txn_zombies"] >= writers and s["txn_abandoned"] >= 1, s
    assert s["ctp_outputs"] > 100 and s["txn_live_reads"] > 0, s
    assert s["txn_max_stable_ms"] is not None
    return s


def test_transactions_through_coordinator_and_leader_faults(tmp_path):
    """`rayka chaos --transactions 2`: transactional writers (commit, abort, zombies) and a
    consume-transform-produce pipeline while the transaction coordinator's broker is killed
    and paused and data leaders die and freeze: nothing aborted is read, commits are whole,
    the pipeline is exactly once, no transaction hangs, zombies are fenced (about a minute)."""
    _transactions(tmp_path, TXN_FAULT_KINDS + ("kill-broker", "pause-leader"), 1, 2)


@pytest.mark.slow
@pytest.mark.timeout(3600)      # a soak: 6-15 minutes on 2 cores (pytest's cap is 600 s)
def test_transactions_through_five_faults_of_every_kind(tmp_path):
    """`make chaos`: the transactional workload under the full schedule (>= 5 faults of every
    kind, the transaction coordinator's kinds included)."""
    _transactions(tmp_path, FAULT_KINDS + TXN_FAULT_KINDS, 5, 3)
