"""bench/cold_cache.py: a short run times every step in both modes (the leader's append
really replicates: the followers' appends and the high watermark follow), and the summary
is the median and min–max over runs."""

from __future__ import annotations

import pytest

from bench.cold_cache import STEPS, run_once, summary

pytestmark = pytest.mark.unit


def test_a_short_run_times_every_step_in_both_modes():
    out = run_once(n=20, warmup=5, sweep_mib=1, quiet=3)
    for mode in ("warm", "cold"):
        assert set(out[mode]) == set(STEPS) and all(v > 0 for v in out[mode].values())
    assert out["cold_over_warm"]["floor"] == round(out["cold"]["floor"] / out["warm"]["floor"], 1)


def test_summary_is_the_median_and_range_over_runs():
    runs = [{m: {s: float(i) for s in STEPS} for m in ("warm", "cold", "cold_over_warm")}
            for i in (3, 1, 2)]
    got = summary(runs)
    assert got["cold"]["leader_append"] == {"median": 2.0, "min": 1.0, "max": 3.0}
