"""kafka-transactions.sh find-hanging's filter (rayka/client/admin.py hanging_among, after
Kafka's TransactionsCommand.filterHangingTransactions): an open transaction is hanging when
no transactional id holds its producer id, or its transactional id is gone, or its
coordinator does not list the partition."""

from __future__ import annotations

import pytest

from rayka.client.admin import hanging_among

pytestmark = pytest.mark.unit

NOW = 10_000_000
TP = ("t", 0)
# (producer id, epoch, last sequence, last timestamp, coordinator epoch, txn start offset)
OPEN = (7, 1, 4, NOW - 3_600_000, 2, 40)


@pytest.mark.parametrize("ids, described, hanging", [
    ({}, {}, True),                                       # no transactional id holds pid 7
    ({7: "app"}, {}, True),                               # its id is gone (not described)
    ({7: "app"}, {"app": {("t", 1)}}, True),              # the coordinator forgot this partition
    ({7: "app"}, {"app": {TP}}, False),                   # still its coordinator's to finish
    ({8: "other"}, {"other": {TP}}, True),                # another producer's id
])
def test_an_open_transaction_hangs_when_no_coordinator_will_finish_it(ids, described, hanging):
    got = hanging_among([(TP, OPEN)], ids, described, NOW)
    if not hanging:
        assert got == []
        return
    assert got == [{"topic": "t", "partition": 0, "producer_id": 7, "producer_epoch": 1,
                    "coordinator_epoch": 2, "start_offset": 40, "last_timestamp_ms": NOW - 3_600_000,
                    "duration_ms": 3_600_000, "transactional_id": ids.get(7)}]
