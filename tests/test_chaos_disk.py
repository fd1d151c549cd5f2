"""`rayka chaos` with the disk faults (rayka/chaos/runner.py DISK_FAULT_KINDS): every broker's
log directory on its own faultfs mount, log.flush.before.ack on. One short real run
(real ZooKeeper ensemble, real Ray, real FUSE) with each disk kind at least once: the
checker must find nothing (its invariants unchanged, every ISR replica's bytes compared up to
the HW through the mounts' sources), the cluster must heal after each fault, every full or
failing disk must have taken its directory offline while acknowledgements went on, and
every mount must be gone afterwards."""

from __future__ import annotations

import os

import pytest

from rayka.chaos.faultfs import is_mounted
from rayka.chaos.runner import DISK_FAULT_KINDS, ChaosConfig, config_error, run_chaos

pytestmark = [
    pytest.mark.chaos, pytest.mark.ray, pytest.mark.disk,
    pytest.mark.skipif(not os.path.exists("/dev/fuse") or os.geteuid() != 0,
                       reason="faultfs mounts need /dev/fuse and root"),
]
SEED = int(os.environ.get("RAYKA_CHAOS_SEED", "7"))


def test_power_loss_of_every_broker_needs_flush_before_ack():
    problem = config_error(ChaosConfig(faults=("power-loss-all",)))
    assert problem is not None and "--flush-before-ack" in problem and "\n" not in problem
    assert config_error(ChaosConfig(faults=DISK_FAULT_KINDS, flush_before_ack=True)) is None


@pytest.mark.timeout(420)
def test_every_disk_fault_loses_nothing_with_flush_before_ack(tmp_path):
    verdict, out = run_chaos(ChaosConfig(duration_s=0, min_faults_per_kind=1, seed=SEED,
                                         faults=DISK_FAULT_KINDS, flush_before_ack=True,
                                         out_dir=str(tmp_path / "run"), keep_data=True))
    print(verdict.table())
    s = verdict.stats
    assert s["liveness_failures"] == [], f"seed {SEED}: {out}"
    assert verdict.ok and s["lost"] == 0 and s["duplicated"] == 0, \
        f"seed {SEED}: {verdict.violations[:5]} (history in {out})"
    assert s["skipped"].get(3) is None and s["acknowledged"] > 0, s
    assert all(s["faults_by_kind"].get(k, 0) >= 1 for k in DISK_FAULT_KINDS), s["faults_by_kind"]
    sick = [f for f in s["disk_faults"] if f["kind"] in ("fill-disk", "disk-eio")]
    assert sick and all(f["dir_offline_s"] is not None and f["acked_during_hold"] > 0
                        and f["leads_after_hold"] == [] for f in sick), sick
    data = tmp_path / "run" / "data" / "faultfs"
    assert not any(is_mounted(str(data / f"mnt-{b}")) for b in (1, 2, 3))
