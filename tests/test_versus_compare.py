"""bench/versus_compare.py on synthetic kafka_bench results: which ratios reproduce within
the tolerance, which stay on their side of 1.0, and both input shapes; no Ray, no sockets."""

from __future__ import annotations

import json

import pytest

from bench import versus_compare
from bench.common import figure

pytestmark = pytest.mark.unit


def result(**ratios) -> dict:
    """A kafka_bench result with one ratio per keyword: name=(rayka, kafka, better)."""
    figs = []
    for name, (ray, kaf, better) in ratios.items():
        figs.append(figure(f"versus.{name}.rayka", "x", [ray] * 3, better=better))
        figs.append(figure(f"versus.{name}.kafka", "x", [kaf] * 3, better=better))
        figs.append(figure(f"versus.{name}.ratio", "x", [ray / kaf] * 3, 1.0, better))
    return {"bench": "kafka", "setup": {}, "figures": figs}


@pytest.mark.parametrize("a, b, within, same_side", [
    ((200, 100, "higher"), (220, 100, "higher"), True, True),      # 2.0 → 2.2: 10 %
    ((200, 100, "higher"), (300, 100, "higher"), False, True),     # 2.0 → 3.0: 50 %, ahead
    ((105, 100, "higher"), (95, 100, "higher"), True, False),      # crosses 1.0 within 20 %
    ((5, 100, "lower"), (10, 100, "lower"), False, True),          # 0.05 → 0.10, still ahead
    ((150, 100, "lower"), (80, 100, "lower"), False, False),       # behind, then ahead
    ((100, 100, "lower"), (100, 100, "lower"), True, True),        # 1.0 is Kafka's side
])
def test_verdicts(a, b, within, same_side):
    out = versus_compare.compare(result(f=a), result(f=b))
    (row,) = out["rows"]
    assert (row["within"], row["same_side"]) == (within, same_side)
    assert row["rayka"] == [a[0], b[0]] and row["kafka"] == [a[1], b[1]]
    assert row["rayka_change"] == pytest.approx(abs(b[0] / a[0] - 1))
    assert row["kafka_change"] == pytest.approx(0.0)


def test_a_report_holding_the_result_reads_the_same():
    a, b = result(f=(200, 100, "higher")), result(f=(210, 100, "higher"))
    wrapped = {"benches": {"kafka": a}}
    assert versus_compare.compare(wrapped, b)["rows"] == versus_compare.compare(a, b)["rows"]


def test_ratios_in_one_file_only_are_listed_apart():
    out = versus_compare.compare(result(f=(2, 1, "higher"), g=(1, 2, "lower")),
                                 result(f=(2, 1, "higher"), h=(3, 1, "higher")))
    assert [r["name"] for r in out["rows"]] == ["f"]
    assert out["only_in_a"] == ["g"] and out["only_in_b"] == ["h"]


def test_tolerance_is_a_parameter():
    a, b = result(f=(200, 100, "higher")), result(f=(250, 100, "higher"))
    assert not versus_compare.compare(a, b)["rows"][0]["within"]
    assert versus_compare.compare(a, b, tolerance=0.3)["rows"][0]["within"]


def test_main_prints_a_table_and_a_count(tmp_path, capsys):
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(json.dumps(result(f=(200, 100, "higher"), g=(50, 100, "lower"))))
    pb.write_text(json.dumps(result(f=(210, 100, "higher"), g=(90, 100, "lower"))))
    versus_compare.main([str(pa), str(pb)])
    text = capsys.readouterr().out
    assert "1 of 2 ratios within 20 %; 2 of 2 on the same side of 1.0" in text
    assert "rayka's own medians: 1 of 2 within 20 %" in text
    assert "kafka's own medians: 2 of 2 within 20 %" in text
    versus_compare.main([str(pa), str(pb), "--json"])
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {r["name"]: r["within"] for r in rows} == {"f": True, "g": False}


def with_steal(res: dict, rayka: list, kafka: list) -> dict:
    res["extra"] = {f"{s}.notes": {"machine": [{"wall_ms": 45.0, "steal_s": x} for x in v]}
                    for s, v in (("rayka", rayka), ("kafka", kafka))}
    return res


def test_a_run_whose_systems_lost_far_apart_to_steal_is_uneven():
    a = with_steal(result(f=(2, 1, "higher")), [5.8, 0.3, 5.3], [82.4, 29.2, 7.0])
    b = result(f=(2, 1, "higher"))                       # an older file: no notes
    out = versus_compare.compare(a, b)
    assert [r["uneven"] for r in out["steal"]["a"]] == [True, True, False]
    assert out["steal"]["b"] == []
    lines = versus_compare.render(out).splitlines()
    assert "A: seconds stolen per run, rayka / kafka: 5.8 / 82.4 UNEVEN, 0.3 / 29.2 UNEVEN, " \
        "5.3 / 7" in lines
    assert not any(line.startswith("B:") for line in lines)
