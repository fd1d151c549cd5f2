"""The cluster's features (controller/features.py): Kafka's rules for UpdateFeatures as a
table, all or nothing, and the request through protocol/handlers/ (v0's AllowDowngrade, v1's
upgrade type and validate_only) with ApiVersions showing the result."""

from __future__ import annotations

import pytest
from kafka.protocol.admin import UpdateFeaturesRequest

from controller.features import SAFE_DOWNGRADE as SAFE
from controller.features import UNSAFE_DOWNGRADE as UNSAFE
from controller.features import UPGRADE as UP
from controller.features import plan_update
from replicas.errors import ErrorCode as E
from tests.handler_wire import ask, cluster, versions

pytestmark = pytest.mark.unit

TV = "transaction.version"
CASES = [
    # (name, finalized before, update, error or 0, the reason's words, finalized after)
    ("upgrade", {TV: 1}, (TV, 2, UP), 0, None, {TV: 2}),
    ("the same level", {TV: 2}, (TV, 2, UP), 0, None, {TV: 2}),
    ("a safe downgrade", {TV: 2}, (TV, 1, SAFE), 0, None, {TV: 1}),
    ("an unsafe downgrade", {TV: 2}, (TV, 1, UNSAFE), 0, None, {TV: 1}),
    ("level 0 removes it", {TV: 2}, (TV, 0, SAFE), 0, None, {}),
    ("never finalized counts as 0", {}, (TV, 2, UP), 0, None, {TV: 2}),
    ("a downgrade asked as an upgrade", {TV: 2}, (TV, 1, UP), 95,
     "without setting the upgrade type", {TV: 2}),
    ("an upgrade asked as a downgrade", {TV: 1}, (TV, 2, SAFE), 95,
     "Can't downgrade to a newer version", {TV: 1}),
    ("above the supported range", {TV: 2}, (TV, 3, UP), 95, "only supports versions 0-2",
     {TV: 2}),
    ("below 0", {TV: 2}, (TV, -1, UNSAFE), 95, "cannot be less than 0", {TV: 2}),
    ("an unknown feature", {TV: 2}, ("group.version", 1, UP), 95,
     "does not support feature group.version", {TV: 2}),
    ("an unknown upgrade type", {TV: 2}, (TV, 2, 7), 95, "given upgrade type", {TV: 2}),
]


@pytest.mark.parametrize("name,before,update,error,words,after", CASES,
                         ids=[c[0] for c in CASES])
def test_update_rules(name, before, update, error, words, after):
    code, message, levels = plan_update(before, [update])
    assert code == error
    if error:
        assert message.startswith(f"Invalid update version {update[1]} for feature "
                                  f"{update[0]}. ") and words in message
        assert levels == before
    else:
        assert message is None and levels == after


def test_all_or_nothing():
    code, _message, levels = plan_update({TV: 1}, [(TV, 2, UP), ("nope", 1, UP)])
    assert code == E.INVALID_UPDATE_VERSION and levels == {TV: 1}


@pytest.mark.parametrize("version", versions(57))
def test_update_features_through_the_wire(version):
    fake = cluster()                              # finalized transaction.version 2, epoch 0
    key = UpdateFeaturesRequest.FeatureUpdateKey

    def update(level, downgrade, validate_only=False):
        fields = {"upgrade_type": SAFE if downgrade else UP} if version >= 1 else \
            {"allow_downgrade": downgrade}
        extra = {"validate_only": validate_only} if version >= 1 else {}
        return ask(fake, UpdateFeaturesRequest[version](
            timeout_ms=5000, feature_updates=[key(feature=TV, max_version_level=level,
                                                  **fields)], **extra))

    refused = update(1, downgrade=False)
    assert refused.error_code == E.INVALID_UPDATE_VERSION and refused.results == []
    assert "upgrade type" in refused.error_message
    if version >= 1:
        checked = update(1, downgrade=True, validate_only=True)
        assert checked.error_code == 0 and fake.finalized == ({TV: 2}, 0)
    done = update(1, downgrade=True)
    assert done.error_code == 0 and [(r.feature, r.error_code) for r in done.results] == \
        [(TV, 0)]
    assert fake.finalized == ({TV: 1}, 1)
