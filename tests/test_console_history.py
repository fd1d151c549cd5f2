"""The console's memory of figures (console/history.py): a bounded Series and the rates
drawn from it, and History's named series in uPlot's columnar form. Pure: no clock, no Ray."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.history import History, Series

pytestmark = pytest.mark.unit


def series_of(samples, capacity: int = 100) -> Series:
    s = Series(capacity)
    for t, v in samples:
        s.add(t, v)
    return s


# -- Series --------------------------------------------------------------------------------------
def test_a_series_keeps_at_most_its_capacity_dropping_the_oldest():
    s = series_of([(t, t * 10) for t in range(1, 8)], capacity=3)
    assert list(s.samples) == [(5, 50), (6, 60), (7, 70)]
    assert s.last() == 70


@pytest.mark.parametrize("samples, expected", [
    ([(1.0, 5), (1.0, 7)], [(1.0, 7)]),                     # same instant: the last value
    ([(1.0, 5), (2.0, 6), (2.0, 9)], [(1.0, 5), (2.0, 9)]),
    ([(2.0, 5), (1.0, 8)], [(2.0, 8)]),                     # a step back in time: no new time
    ([(1.0, 5), (2.0, 6), (3.0, 7)], [(1.0, 5), (2.0, 6), (3.0, 7)]),
])
def test_a_sample_at_or_before_the_last_time_replaces_the_last_value(samples, expected):
    assert list(series_of(samples).samples) == expected


def test_an_empty_series_has_no_last_value_and_no_rates():
    s = Series(10)
    assert s.last() is None and s.rates() == [] and s.rate() is None


@pytest.mark.parametrize("samples, expected", [
    ([(0, 0), (1, 10), (3, 30)], [(1, 10.0), (3, 10.0)]),
    # the counter went back at t=2 (offsets reset): no rate for that step, and the next step
    # is measured from the value it went back to
    ([(0, 0), (1, 10), (2, 5), (4, 9)], [(1, 10.0), (4, 2.0)]),
    ([(0, 7), (2, 7)], [(2, 0.0)]),                        # flat: zero, not skipped
    ([(0, 7)], []),
])
def test_rates_skip_the_steps_that_went_backwards(samples, expected):
    assert series_of(samples).rates() == expected


@pytest.mark.parametrize("samples, expected", [
    ([], None),
    ([(1, 5)], None),                                       # one sample: no step yet
    ([(1, 5), (2, 3)], None),                               # the last step went back
    ([(1, 5), (2, 3), (4, 7)], 2.0),                        # a forward step after it
    ([(0, 0), (4, 10)], 2.5),
    ([(0, 3), (4, 3)], 0.0),
])
def test_rate_is_the_last_steps_or_none(samples, expected):
    assert series_of(samples).rate() == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 1000), st.integers(0, 10**9)), min_size=1, max_size=60),
       st.integers(0, 10**6), st.integers(0, 10**12))
def test_rates_times_step_lengths_sum_back_to_the_counters_growth(steps, t0, v0):
    """For increasing times and a non-decreasing counter, every step has a rate and the
    rates times their step lengths add up to last - first."""
    times, values = [t0], [v0]
    for dt, dv in steps:
        times.append(times[-1] + dt)
        values.append(values[-1] + dv)
    s = series_of(zip(times, values), capacity=len(times))
    rates = s.rates()
    assert [t for t, _ in rates] == times[1:]
    total = sum(r * (t - before) for (t, r), before in zip(rates, times))
    assert math.isclose(total, values[-1] - values[0], rel_tol=1e-9, abs_tol=1e-6)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-50, 50), st.integers(-10**6, 10**6)), max_size=80),
       st.integers(1, 20))
def test_any_adds_keep_times_strictly_increasing_bounded_and_rates_non_negative(adds, capacity):
    s = series_of(adds, capacity=capacity)
    times = [t for t, _ in s.samples]
    assert len(times) <= capacity
    assert all(a < b for a, b in zip(times, times[1:]))
    assert all(r >= 0 for _, r in s.rates())
    if adds:
        assert s.last() == adds[-1][1]                      # the newest value always wins


# -- History -------------------------------------------------------------------------------------
def test_history_adds_to_named_series_of_its_capacity():
    h = History(capacity=2)
    for t in range(5):
        h.add("topic:a:end", t, t)
    h.add("topic:b:end", 1, 42)
    assert list(h.get("topic:a:end").samples) == [(3, 3), (4, 4)]
    assert h.get("topic:b:end").last() == 42
    assert h.get("topic:c:end") is None


def test_drop_forgets_the_series_under_a_prefix_only():
    h = History()
    for name in ("topic:a:end", "topic:a:bytes", "topic:ab:end", "group:a:lag", "topic:b:end"):
        h.add(name, 1, 1)
    h.drop("topic:a:")
    assert h.names() == ["group:a:lag", "topic:ab:end", "topic:b:end"]
    h.drop("nothing:")
    assert len(h.names()) == 3


@pytest.mark.parametrize("prefix, expected", [
    ("", ["broker:1:requests", "topic:a:bytes", "topic:a:end", "topic:b:end"]),
    ("topic:", ["topic:a:bytes", "topic:a:end", "topic:b:end"]),
    ("topic:a:", ["topic:a:bytes", "topic:a:end"]),
    ("group:", []),
])
def test_names_are_sorted_and_filtered_by_prefix(prefix, expected):
    h = History()
    for name in ("topic:b:end", "topic:a:end", "broker:1:requests", "topic:a:bytes"):
        h.add(name, 1, 1)
    assert h.names(prefix) == expected


def plotted() -> History:
    h = History()
    for t, v in [(10, 100), (20, 150), (40, 250)]:
        h.add("a", t, v)
    for t, v in [(20, 5), (30, 2), (40, 8)]:
        h.add("b", t, v)
    return h


def test_plot_is_columnar_on_the_union_of_times_with_none_where_a_series_has_no_sample():
    assert plotted().plot(["a", "b"]) == {
        "names": ["a", "b"],
        "data": [[10, 20, 30, 40], [100, 150, None, 250], [None, 5, 2, 8]]}


def test_plot_of_an_unknown_series_is_a_column_of_none():
    assert plotted().plot(["b", "missing"]) == {
        "names": ["b", "missing"], "data": [[20, 30, 40], [5, 2, 8], [None, None, None]]}
    assert History().plot([]) == {"names": [], "data": [[]]}


def test_plot_rates_and_since_filter():
    h = plotted()
    # a: 5/s at 20, 5/s at 40; b: 20→30 went back (no rate), 30→40 is 0.6/s
    assert h.plot(["a", "b"], rate=True) == {
        "names": ["a", "b"], "data": [[20, 40], [5.0, 5.0], [None, 0.6]]}
    assert h.plot(["a", "b"], since_s=25) == {
        "names": ["a", "b"], "data": [[30, 40], [None, 250], [2, 8]]}
    assert h.plot(["a"], since_s=41) == {"names": ["a"], "data": [[], []]}
    assert h.plot(["a", "b"], since_s=30, rate=True) == {
        "names": ["a", "b"], "data": [[40], [5.0], [0.6]]}
