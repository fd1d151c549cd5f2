"""rayka.client.metadata.newest_leaders: how answers of several brokers' metadata caches are
merged (the first answer's partitions, each at the highest leader epoch any answer knows)."""

from __future__ import annotations

import pytest

from rayka.client.metadata import newest_leaders

pytestmark = pytest.mark.unit

A0, B1, C2 = (1, 0, (1, 2, 3), (1, 2, 3)), (2, 1, (1, 2, 3), (2, 3)), (3, 2, (1, 2, 3), (3,))


@pytest.mark.parametrize("answers, expected", [
    ([{("t", 0): A0}], {("t", 0): A0}),
    # a frozen leader's stale cache answered first; a broker told of the election later
    ([{("t", 0): A0}, {("t", 0): B1}], {("t", 0): B1}),
    ([{("t", 0): B1}, {("t", 0): A0}], {("t", 0): B1}),
    ([{("t", 0): A0}, {("t", 0): C2}, {("t", 0): B1}], {("t", 0): C2}),
    # same epoch: the first answer stands
    ([{("t", 0): A0}, {("t", 0): (2, 0, (1, 2, 3), (2,))}], {("t", 0): A0}),
    # partitions only a later answer knows are not added (a stale cache may hold a deleted topic)
    ([{("t", 0): A0}, {("t", 0): A0, ("gone", 0): B1}], {("t", 0): A0}),
    ([{("t", 0): A0, ("t", 1): A0}, {("t", 1): B1}], {("t", 0): A0, ("t", 1): B1}),
])
def test_newest_leaders(answers, expected):
    assert newest_leaders(answers) == expected


def test_newest_leaders_leaves_the_answers_alone():
    first, second = {("t", 0): A0}, {("t", 0): B1}
    newest_leaders([first, second])
    assert first == {("t", 0): A0} and second == {("t", 0): B1}
