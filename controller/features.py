"""The cluster's features: which ones rayka supports, and Kafka's rules for changing their
finalized levels (UpdateFeatures; Kafka 4's FeatureControlManager.updateFeature). Pure.

Rules:
- `SUPPORTED` (name → (min, max)) is what every rayka broker supports: transaction.version 0-2
  (KIP-890; 2 bumps the producer epoch at every transaction's end). ApiVersions v3 advertises
  it; the finalized levels live in ZooKeeper's /feature (controller/layout.py), created with
  DEFAULT_FEATURES.
- `plan_update(finalized, updates)` checks each update (name, level, upgrade type: 1 upgrade,
  2 safe downgrade, 3 unsafe downgrade) in order and answers (error code, message, new
  levels). The first update that fails answers the whole request, nothing changes (all or
  nothing, as Kafka's updateFeatures): an unknown upgrade type → "The controller does not
  support the given upgrade type."; a level below 0 → "A feature version cannot be less than
  0."; a feature not in SUPPORTED, or a level outside its range (0 always allowed: it removes
  the feature) → "... does not support ..."; a level below the finalized one asked as an
  upgrade → "Can't downgrade the version of this feature without setting the upgrade type to
  either safe or unsafe downgrade."; a level above it asked as a downgrade → "Can't
  downgrade to a newer version.". Each is INVALID_UPDATE_VERSION with Kafka's message
  "Invalid update version <level> for feature <name>. <reason>". A feature never finalized
  counts as level 0; level 0 removes the feature.
- UpdateFeatures v0's AllowDowngrade is a safe downgrade when set, an upgrade otherwise (how
  Kafka's ControllerApis reads v0).
"""

from __future__ import annotations

from typing import Mapping, Sequence

from replicas.errors import ErrorCode as E

SUPPORTED: dict[str, tuple[int, int]] = {"transaction.version": (0, 2)}
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def _invalid(name: str, level: int, reason: str) -> tuple[int, str]:
    return E.INVALID_UPDATE_VERSION, \
        f"Invalid update version {level} for feature {name}. {reason}"


def plan_update(finalized: Mapping[str, int], updates: Sequence[tuple[str, int, int]],
                supported: Mapping[str, tuple[int, int]] = SUPPORTED
                ) -> tuple[int, str | None, dict[str, int]]:
    """(error, message, the finalized levels after the updates); see the module's rules."""
    levels = dict(finalized)
    for name, level, upgrade_type in updates:
        current = levels.get(name, 0)
        if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            return (*_invalid(name, level, "The controller does not support the given "
                                           "upgrade type."), dict(finalized))
        if level < 0:
            return (*_invalid(name, level, "A feature version cannot be less than 0."),
                    dict(finalized))
        bounds = supported.get(name)
        if bounds is None:
            return (*_invalid(name, level, f"The broker does not support feature {name}."),
                    dict(finalized))
        if level != 0 and not bounds[0] <= level <= bounds[1]:
            return (*_invalid(name, level, f"The broker only supports versions "
                                           f"{bounds[0]}-{bounds[1]} of {name}."),
                    dict(finalized))
        if level < current and upgrade_type == UPGRADE:
            return (*_invalid(name, level, "Can't downgrade the version of this feature "
                                           "without setting the upgrade type to either safe "
                                           "or unsafe downgrade."), dict(finalized))
        if level > current and upgrade_type != UPGRADE:
            return (*_invalid(name, level, "Can't downgrade to a newer version."),
                    dict(finalized))
        if level == 0:
            levels.pop(name, None)
        else:
            levels[name] = level
    return E.NONE, None, levels
