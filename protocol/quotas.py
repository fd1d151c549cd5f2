"""Kafka's client quotas, pure: which quota applies to a (user, client id), the windowed rate
it is measured by, and how long a client over it is throttled (KIP-13, KIP-55, KIP-124,
KIP-219).

Rules (Kafka 3.8: ClientQuotaManager.scala and its DefaultQuotaCallback,
ClientRequestQuotaManager.scala; the clients' metrics Rate, SampledStat, WindowedSum and
QuotaUtils):
- Quota entities are the eight ZooKeeper levels, most specific first:
  /config/users/<user>/clients/<client-id>, /config/users/<user>/clients/<default>,
  /config/users/<user>, /config/users/<default>/clients/<client-id>,
  /config/users/<default>/clients/<default>, /config/users/<default>,
  /config/clients/<client-id>, /config/clients/<default>. `QuotaEntity(user, client_id)`
  names one: each part a name, DEFAULT, or None (no such part).
- Each quota type (producer_byte_rate, consumer_byte_rate, request_percentage) resolves
  on its own: the first level above that sets THIS type decides which sensor a client's
  usage goes into (its metric tags: (user, client id), (user, "") or ("", client id), so
  clients under one user quota share one rate) and the bound is looked up for those tags
  as Kafka's quotaLimit does. No quota found: the client is not measured.
- The user is the principal's name ("alice" of "User:alice"; "ANONYMOUS" without
  authentication), so /config/users/<default> covers anonymous clients too.
- A sensor is Kafka's Rate over a WindowedSum: quota.window.num (11) samples of
  quota.window.size.seconds (1 s) each; the elapsed time counts at least samples - 1 full
  windows (a new client's first bytes are not a huge rate). A value is recorded first, then
  the rate (per second) is checked: over the bound, the throttle time is
  round((rate - bound) / bound * window size), the time for the average to come back to
  the bound if nothing more arrives; request_percentage throttles are capped at one
  window (QuotaUtils.boundedThrottleTime). Nothing is refused: the caller answers with the
  throttle time and delays the client's next request by it.
- request_percentage is measured as Kafka does: thread time in nanoseconds × 100 / 1e9 per
  second, i.e. a percentage of one thread.
- Time comes from the caller (a `clock_ms` callable): the module reads no clock, starts no
  thread; one lock makes a tracker usable from the network loop and the worker threads.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Callable, Mapping

__all__ = ["PRODUCE", "FETCH", "REQUEST", "CONTROLLER_MUTATION", "QUOTA_TYPES", "DEFAULT",
           "QuotaEntity", "Rate", "QuotaTracker", "metric_tags", "quota_limit",
           "throttle_ms", "principal_name", "request_percentage"]

PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
CONTROLLER_MUTATION = "controller_mutation_rate"
QUOTA_TYPES = (PRODUCE, FETCH, REQUEST)
WINDOW_NUM, WINDOW_MS = 11, 1000          # quota.window.num, quota.window.size.seconds


class _Default:
    """The `<default>` entity of a level (Kafka's DefaultUserEntity / DefaultClientIdEntity)."""
    __slots__ = ()

    def __repr__(self) -> str:
        return "DEFAULT"

    def __reduce__(self):
        return "DEFAULT"


DEFAULT = _Default()


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """One quota level: user and client_id are a name, DEFAULT, or None (no such part)."""
    user: object = None
    client_id: object = None


def principal_name(principal: str) -> str:
    """Kafka quotas key users by KafkaPrincipal.getName: "User:alice" → "alice"."""
    kind, sep, name = principal.partition(":")
    return name if sep else principal


def request_percentage(thread_time_ns: int) -> float:
    """Kafka's nanosToPercentage: what a request's thread time adds to request_percentage."""
    return thread_time_ns * 100.0 / 1e9


# -- which quota --------------------------------------------------------------------------------
def metric_tags(configured: Mapping[QuotaEntity, float], user: str, client_id: str
                ) -> tuple[str, str]:
    """DefaultQuotaCallback.quotaMetricTags: the (user, client id) tags of the sensor this
    client's usage goes into, given the entities that set this quota type."""
    has = configured.__contains__
    if has(QuotaEntity(user, client_id)) or has(QuotaEntity(user, DEFAULT)):
        return user, client_id
    if has(QuotaEntity(user, None)):
        return user, ""
    if has(QuotaEntity(DEFAULT, client_id)) or has(QuotaEntity(DEFAULT, DEFAULT)):
        return user, client_id
    if has(QuotaEntity(DEFAULT, None)):
        return user, ""
    return "", client_id


def quota_limit(configured: Mapping[QuotaEntity, float], tags: tuple[str, str]
                ) -> float | None:
    """DefaultQuotaCallback.quotaLimit: the bound for a sensor's tags (None: no quota)."""
    user, client_id = tags
    if user and client_id:
        order = [QuotaEntity(user, client_id), QuotaEntity(user, DEFAULT),
                 QuotaEntity(DEFAULT, client_id), QuotaEntity(DEFAULT, DEFAULT)]
    elif user:
        order = [QuotaEntity(user, None), QuotaEntity(DEFAULT, None)]
    elif client_id:
        order = [QuotaEntity(None, client_id), QuotaEntity(None, DEFAULT)]
    else:
        # an empty client id: Kafka's tags ("", "") find nothing
        return None
    for entity in order:
        if entity in configured:
            return configured[entity]
    return None


# -- the rate -------------------------------------------------------------------------------------
class Rate:
    """Kafka's Rate(SampledStat WindowedSum): `samples` windows of `window_ms`, plus the one
    "overlapping" placeholder Kafka keeps; values per second."""

    __slots__ = ("samples", "window_ms", "_s", "_current")

    def __init__(self, samples: int = WINDOW_NUM, window_ms: int = WINDOW_MS):
        self.samples, self.window_ms = samples, window_ms
        self._s: list[list] = []            # [start_ms, last_event_ms, value, event_count]
        self._current = 0

    def _cur(self, now: int) -> list:
        if not self._s:
            self._s.append([now, now, 0.0, 0])
        return self._s[self._current]

    def record(self, value: float, now: int) -> None:
        sample = self._cur(now)
        if now - sample[0] >= self.window_ms:       # complete: advance
            self._current = (self._current + 1) % (self.samples + 1)
            if self._current >= len(self._s):
                sample = [now, now, 0.0, 0]
                self._s.append(sample)
            else:
                sample = self._s[self._current]
                sample[:] = [now, now, 0.0, 0]
        sample[2] += value
        sample[3] += 1
        sample[1] = now

    def _purge(self, now: int) -> None:
        expire = self.samples * self.window_ms
        for sample in self._s:
            if now - sample[1] >= expire:
                sample[:] = [now, now, 0.0, 0]

    def window_size(self, now: int) -> int:
        self._purge(now)
        if not self._s:
            self._s.append([now, now, 0.0, 0])
        elapsed = now - min(s[0] for s in self._s)
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now: int) -> float:
        self._purge(now)
        total = sum(s[2] for s in self._s)
        return total / (self.window_size(now) / 1000.0)


def throttle_ms(rate: float, bound: float, window_ms: int, cap_ms: int | None = None) -> int:
    """QuotaUtils.throttleTime (and boundedThrottleTime with a cap): 0 within the bound."""
    if rate <= bound:
        return 0
    t = math.floor((rate - bound) / bound * window_ms + 0.5)      # Java's Math.round
    return min(t, cap_ms) if cap_ms is not None else t


# -- the tracker ----------------------------------------------------------------------------------
class QuotaTracker:
    """The quotas in force and every client's sensors; `record` is Kafka's
    recordAndGetThrottleTimeMs for one quota type."""

    def __init__(self, clock_ms: Callable[[], int], samples: int = WINDOW_NUM,
                 window_ms: int = WINDOW_MS):
        self._clock = clock_ms
        self.samples, self.window_ms = samples, window_ms
        self._lock = threading.Lock()
        self._configured: dict[str, dict[QuotaEntity, float]] = {t: {} for t in QUOTA_TYPES}
        self._sensors: dict[tuple[str, str, str], Rate] = {}

    def set_quotas(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """Replace every quota at once: entity → {quota type: bound}. Sensors keep their
        history (Kafka updates a sensor's bound in place)."""
        by_type: dict[str, dict[QuotaEntity, float]] = {t: {} for t in QUOTA_TYPES}
        for entity, values in quotas.items():
            for key, value in values.items():
                if key in by_type:
                    by_type[key][entity] = float(value)
        with self._lock:
            self._configured = by_type

    def enabled(self, quota_type: str | None = None) -> bool:
        """Any quota of this type (of any type, for None) configured."""
        conf = self._configured
        return any(conf.values()) if quota_type is None else bool(conf[quota_type])

    def quota(self, quota_type: str, user: str, client_id: str
              ) -> tuple[tuple[str, str], float | None]:
        conf = self._configured[quota_type]
        tags = metric_tags(conf, user, client_id)
        return tags, quota_limit(conf, tags)

    def record(self, quota_type: str, user: str, client_id: str, value: float) -> int:
        """Record `value` for this client and answer the throttle time in ms (0: within)."""
        with self._lock:
            conf = self._configured[quota_type]
            if not conf:
                return 0
            tags = metric_tags(conf, user, client_id)
            bound = quota_limit(conf, tags)
            if bound is None:
                return 0
            now = self._clock()
            rate = self._sensors.get((quota_type, *tags))
            if rate is None:
                rate = self._sensors[(quota_type, *tags)] = Rate(self.samples, self.window_ms)
            rate.record(value, now)
            measured = rate.measure(now)
            if measured <= bound:
                return 0
            cap = self.window_ms if quota_type == REQUEST else None
            return throttle_ms(measured, bound, rate.window_size(now), cap)

    def max_value_in_window(self, quota_type: str, user: str, client_id: str) -> float | None:
        """getMaxValueInQuotaWindow: the most one request may carry without being throttled
        for sure (Fetch caps its max_bytes with it); None without a quota."""
        _tags, bound = self.quota(quota_type, user, client_id)
        if bound is None:
            return None
        return bound * (self.samples - 1) * self.window_ms / 1000.0
