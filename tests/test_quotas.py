"""Client quotas, pure: Kafka's precedence of quota entities, its windowed Rate against a
naive reference, throttle times, and a throttled client converging on its quota; Kafka's
entity-config formats (protocol/quotas.py, protocol/entity_config.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from protocol.entity_config import (decode_config, desanitize, encode_config, entity_of_path,
                                    entity_path, quota_value, sanitize)
from protocol.quotas import (DEFAULT, FETCH, PRODUCE, REQUEST, QuotaEntity, QuotaTracker, Rate,
                             metric_tags, principal_name, quota_limit, request_percentage,
                             throttle_ms)

pytestmark = pytest.mark.unit

E = QuotaEntity
ALL_LEVELS = {                 # Kafka's eight levels, each with its own bound (its rank)
    E("alice", "app"): 1, E("alice", DEFAULT): 2, E("alice", None): 3, E(DEFAULT, "app"): 4,
    E(DEFAULT, DEFAULT): 5, E(DEFAULT, None): 6, E(None, "app"): 7, E(None, DEFAULT): 8}


def without(*ranks):
    return {e: r for e, r in ALL_LEVELS.items() if r not in ranks}


# ClientQuotaManager's documented order: the most specific level configured wins
@pytest.mark.parametrize("configured,user,client,tags,bound", [
    (ALL_LEVELS, "alice", "app", ("alice", "app"), 1),
    (without(1), "alice", "app", ("alice", "app"), 2),
    (without(1, 2), "alice", "app", ("alice", ""), 3),
    (without(1, 2, 3), "alice", "app", ("alice", "app"), 4),
    (without(1, 2, 3, 4), "alice", "app", ("alice", "app"), 5),
    (without(1, 2, 3, 4, 5), "alice", "app", ("alice", ""), 6),
    (without(1, 2, 3, 4, 5, 6), "alice", "app", ("", "app"), 7),
    (without(1, 2, 3, 4, 5, 6, 7), "alice", "app", ("", "app"), 8),
    ({}, "alice", "app", ("", "app"), None),
    (ALL_LEVELS, "bob", "app", ("bob", "app"), 4),          # bob: the defaults of level 4
    (ALL_LEVELS, "bob", "web", ("bob", "web"), 5),
    ({E(DEFAULT, None): 10}, "ANONYMOUS", "x", ("ANONYMOUS", ""), 10),
    ({E(None, "app"): 7}, "alice", "web", ("", "web"), None),
    ({E("alice", None): 3}, "alice", "", ("alice", ""), 3),
    ({E(None, DEFAULT): 8}, "alice", "", ("", ""), None),    # Kafka's ("", "") finds none
])
def test_quota_precedence_is_kafkas(configured, user, client, tags, bound):
    assert metric_tags(configured, user, client) == tags
    assert quota_limit(configured, tags) == bound


def test_principal_names_and_request_time():
    assert principal_name("User:alice") == "alice"
    assert principal_name("User:CN=a,O=b") == "CN=a,O=b"
    assert principal_name("User:ANONYMOUS") == principal_name("ANONYMOUS") == "ANONYMOUS"
    assert request_percentage(10_000_000) == pytest.approx(1.0)      # 10 ms = 1 % of 1 s


class NaiveRate:
    """Kafka's Rate written out from its documentation, over a full event history: samples
    are opened by events; a sample older than samples × window (by its last event) no longer
    counts; the elapsed time is from the oldest counted sample's start, at least
    (samples - 1) windows."""

    def __init__(self, samples=11, window_ms=1000):
        self.samples, self.window = samples, window_ms
        self.history: list[list] = []       # every sample ever: [start, last, value]

    def record(self, value, now):
        live = self.history[-(self.samples + 1):]
        if not live or now - live[-1][0] >= self.window:
            self.history.append([now, now, 0.0])
        self.history[-1][2] += value
        self.history[-1][1] = now

    def _kept(self, now):
        return [s for s in self.history[-(self.samples + 1):]
                if now - s[1] < self.samples * self.window]

    def measure(self, now):
        kept = self._kept(now)
        start = min((s[0] for s in kept), default=now)
        # a sample Kafka purged restarts at `now` in its slot: it counts as starting now
        if len(kept) < len(self.history[-(self.samples + 1):]):
            start = min(start, now)
        elapsed = now - start
        full = elapsed // self.window
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window
        return sum(s[2] for s in kept) / (max(elapsed, 1) / 1000)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3000), st.floats(0, 1e6)), min_size=1, max_size=60))
def test_rate_matches_the_naive_reference(steps):
    rate, naive, now = Rate(), NaiveRate(), 0
    for gap, value in steps:
        now += gap
        rate.record(value, now)
        naive.record(value, now)
        assert rate.measure(now) == pytest.approx(naive.measure(now), rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("rate,bound,window,cap,expected", [
    (100.0, 100.0, 11_000, None, 0),           # at the bound: fine
    (150.0, 100.0, 10_000, None, 5000),        # (150-100)/100 * 10 s
    (100.5, 100.0, 11_000, None, 55),          # Java's Math.round(55.0)
    (300.0, 100.0, 10_000, 1000, 1000),        # request quotas are capped at one window
])
def test_throttle_time_is_quota_utils(rate, bound, window, cap, expected):
    assert throttle_ms(rate, bound, window, cap) == expected


def simulate(bound: float, size: int, seconds: float) -> tuple[float, int]:
    """A client sending `size` bytes as soon as it may (after each throttle): its rate from
    12 s on, and the largest throttle it saw."""
    now = [0]
    tracker = QuotaTracker(lambda: now[0])
    tracker.set_quotas({E(None, "c"): {PRODUCE: bound}})
    sent_after, biggest = 0, 0
    while now[0] < seconds * 1000:
        t = tracker.record(PRODUCE, "ANONYMOUS", "c", size)
        if now[0] >= 12_000:
            sent_after += size
        biggest = max(biggest, t)
        now[0] += max(t, 1)
    return sent_after / (seconds - 12), biggest


@settings(max_examples=15, deadline=None, derandomize=True)
@given(st.integers(100_000, 5_000_000), st.floats(0.02, 1.0))
def test_a_throttled_client_converges_on_its_quota(bound, fraction):
    # one request every ms unless throttled: at least 20 times the quota when free
    rate, biggest = simulate(bound, int(bound * fraction), 120)
    assert biggest > 0
    assert rate == pytest.approx(bound, rel=0.1)


def test_tracker_without_quota_measures_nothing_and_sensors_keep_history():
    now = [0]
    tracker = QuotaTracker(lambda: now[0])
    assert not tracker.enabled()
    assert tracker.record(PRODUCE, "u", "c", 1e9) == 0
    tracker.set_quotas({E("u", None): {PRODUCE: 1000.0, "SCRAM-SHA-256": 1}})
    assert tracker.enabled() and tracker.enabled(PRODUCE) and not tracker.enabled(FETCH)
    assert tracker.record(PRODUCE, "u", "c", 10_000) == 0    # 10 s allowance: exactly at
    first = tracker.record(PRODUCE, "u", "c", 1000)
    assert first == 1000                 # 11 000 B over 10 s = 1100 B/s: 10 % of 10 s
    tracker.set_quotas({E("u", None): {PRODUCE: 2000.0}})      # raised: same sensor
    assert tracker.record(PRODUCE, "u", "other-client", 0) == 0
    assert tracker.max_value_in_window(PRODUCE, "u", "c") == 2000.0 * 10
    assert tracker.max_value_in_window(FETCH, "u", "c") is None


def test_request_quota_throttle_is_capped_at_one_window():
    tracker = QuotaTracker(lambda: 0)
    tracker.set_quotas({E(None, DEFAULT): {REQUEST: 1.0}})
    assert tracker.record(REQUEST, "ANONYMOUS", "c", 500.0) == 1000


# -- entity configs -------------------------------------------------------------------------
@pytest.mark.parametrize("name,zk", [
    ("alice", "alice"), ("a.b-c_d", "a.b-c_d"), ("<default>", "%3Cdefault%3E"),
    ("CN=a b,O=x", "CN%3Da%20b%2CO%3Dx"), ("a*b+c~", "a%2Ab%2Bc%7E"), ("é", "%C3%A9"),
    ("a/b", "a%2Fb")])
def test_names_are_sanitized_as_kafka_does(name, zk):
    assert sanitize(name) == zk and desanitize(zk) == name


@given(st.text(min_size=1, max_size=20))
def test_sanitize_round_trips(name):
    assert desanitize(sanitize(name)) == name
    assert "/" not in sanitize(name)


@pytest.mark.parametrize("entity,path", [
    (E("alice", None), "users/alice"), (E(DEFAULT, None), "users/<default>"),
    (E(None, "app"), "clients/app"), (E(None, DEFAULT), "clients/<default>"),
    (E("alice", "app"), "users/alice/clients/app"),
    (E(DEFAULT, DEFAULT), "users/<default>/clients/<default>"),
    (E("<default>", None), "users/%3Cdefault%3E")])
def test_entity_paths_are_kafkas(entity, path):
    assert entity_path(entity) == path
    assert entity_of_path(path) == entity


def test_entity_paths_refuse_what_is_not_an_entity():
    with pytest.raises(ValueError):
        entity_path(E(None, None))
    assert entity_of_path("brokers/1") is None
    assert entity_of_path("users/a/groups/b") is None


@pytest.mark.parametrize("key,value,stored", [
    ("producer_byte_rate", 1048576.0, "1048576"), ("consumer_byte_rate", 2e6, "2000000"),
    ("producer_byte_rate", 1000.0000001, "1000"), ("request_percentage", 50.0, "50.0"),
    ("request_percentage", 12.5, "12.5"), ("controller_mutation_rate", 10.0, "10.0")])
def test_quota_values_are_stored_as_kafka_writes_them(key, value, stored):
    assert quota_value(key, value) == stored


@pytest.mark.parametrize("key,value", [
    ("producer_byte_rate", 1.5), ("nope", 1.0), ("consumer_byte_rate", 0.0),
    ("request_percentage", -1.0), ("producer_byte_rate", float("nan")),
    ("SCRAM-SHA-256", 1.0)])
def test_quota_values_kafka_refuses(key, value):
    with pytest.raises(ValueError):
        quota_value(key, value)


def test_entity_config_json_is_kafkas():
    data = encode_config({"producer_byte_rate": "1024", "SCRAM-SHA-256": "salt=..."})
    assert data == (b'{"version":1,"config":{"producer_byte_rate":"1024",'
                    b'"SCRAM-SHA-256":"salt=..."}}')
    assert decode_config(data) == {"producer_byte_rate": "1024", "SCRAM-SHA-256": "salt=..."}
    assert decode_config(b"") == {} and decode_config(b'{"version":1}') == {}
    for bad in (b"{", b"[1]", b'{"config":[1]}'):
        with pytest.raises(ValueError):
            decode_config(bad)
