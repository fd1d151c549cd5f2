"""bench/systems.gc_pauses: the stop-the-world pauses a JVM's GC log gives (-loggc's
unified logging, decorations time,tags), each by when it began; nothing else is one."""

from datetime import datetime

import pytest

from bench.systems import gc_pauses

LOG = """\
[2026-11-30T18:58:11.955+0000][gc,start    ] GC(31) Pause Young (Normal) (G1 Evacuation Pause)
[2026-11-30T18:58:11.955+0000][gc,task     ] GC(31) Using 2 workers of 2 for evacuation
[2026-11-30T18:58:12.000+0000][gc,phases   ] GC(31)   Pre Evacuate Collection Set: 0.1ms
[2026-11-30T18:58:12.000+0000][gc,heap     ] GC(31) Eden regions: 60->0(60)
[2026-11-30T18:58:12.000+0000][gc          ] GC(31) Pause Young (Normal) (G1 Evacuation Pause) 403M->161M(3072M) 44.906ms
[2026-11-30T18:58:12.000+0000][gc,cpu      ] GC(31) User=0.06s Sys=0.01s Real=0.05s
[2026-11-30T18:58:20.500+0000][gc          ] GC(32) Concurrent Mark Cycle 45.200ms
[2026-11-30T18:58:21.003+0000][gc          ] GC(32) Pause Remark 200M->200M(3072M) 3.456ms
[2026-11-30T18:58:21.100+0000][gc          ] GC(32) Pause Cleanup 200M->200M(3072M) 0.050ms
[2026-11-30T18:58:40.000+0000][gc          ] GC(33) Pause Full (System.gc()) 50M->20M(3072M) 120.500ms
[2026-11-30T18:58:41.000+0000][safepoint   ] Safepoint "G1CollectForAllocation", Total: 45123456 ns
"""


def _t(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def test_every_pause_and_nothing_else():
    got = gc_pauses(LOG.splitlines(keepends=True), 0, 4e9)
    assert [(round(ms, 3), what) for _, ms, what in got] == [
        (44.906, "Pause Young (Normal) (G1 Evacuation Pause)"),
        (3.456, "Pause Remark"), (0.05, "Pause Cleanup"), (120.5, "Pause Full (System.gc())")]
    # stamped at its end: it began its length earlier
    assert got[0][0] == pytest.approx(_t("2026-11-30T18:58:12.000+00:00") - 0.044906)


@pytest.mark.parametrize("since,until,count", [
    ("18:58:11.950", "18:58:11.960", 1),       # the young pause began at 11.955
    ("18:58:11.960", "18:58:39.000", 2),       # remark and cleanup; the full one began 39.8795
    ("18:58:11.960", "18:58:39.879", 2),
    ("18:58:11.960", "18:58:39.880", 3),
    ("18:58:41.000", "18:59:00.000", 0),
])
def test_window_is_by_start(since, until, count):
    day = "2026-11-30T"
    got = gc_pauses(LOG.splitlines(), _t(day + since + "+00:00"), _t(day + until + "+00:00"))
    assert len(got) == count
