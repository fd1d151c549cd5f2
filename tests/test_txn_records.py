"""`__transaction_state` records byte for byte (Kafka 3.8's TransactionLogKey.json and
TransactionLogValue.json, hand-encoded here), and the transactional id → partition hash."""

import struct

import pytest
from hypothesis import given, settings, strategies as st

from coordinator import records as group_records
from transactions import records as R
from transactions.metadata import TransactionMetadata, TxnTransitMetadata
from transactions.states import TransactionState as S

pytestmark = pytest.mark.unit

ONGOING = R.TransactionLogValue(
    producer_id=1000, producer_epoch=5, transaction_timeout_ms=60_000,
    transaction_status=S.ONGOING.id, transaction_partitions=(("a", (0, 1)), ("b", (2,))),
    transaction_last_update_timestamp_ms=7, transaction_start_timestamp_ms=3)
EMPTY = R.TransactionLogValue(1000, 0, 60_000, S.EMPTY.id, None, 9, -1)


# -- keys -----------------------------------------------------------------------------------
def test_key_v0_bytes():
    data = R.encode_key("t1")
    assert data == bytes.fromhex("0000" "0002") + b"t1"
    assert R.decode_key(data) == R.TransactionLogKey("t1")


def test_other_key_versions_are_unknown_and_trailing_bytes_refused():
    assert R.decode_key(bytes.fromhex("0001" "0002") + b"t1") == R.UnknownKey(1)
    assert R.decode_key(b"\xff\xff") == R.UnknownKey(-1)
    with pytest.raises(R.RecordFormatError):
        R.decode_key(bytes.fromhex("0000" "0002") + b"t1!")
    with pytest.raises(R.RecordFormatError):
        R.decode_key(bytes.fromhex("0000" "0005") + b"t1")


# -- values, v0 (what the coordinator writes) -----------------------------------------------
ONGOING_V0 = bytes.fromhex(
    "0000"                        # version 0
    "00000000000003e8"            # producerId 1000
    "0005"                        # producerEpoch 5
    "0000ea60"                    # transactionTimeoutMs 60000
    "01"                          # transactionStatus Ongoing
    "00000002"                    # two topics
    "0001" "61" "00000002" "00000000" "00000001"   # "a": [0, 1]
    "0001" "62" "00000001" "00000002"              # "b": [2]
    "0000000000000007"            # transactionLastUpdateTimestampMs
    "0000000000000003")           # transactionStartTimestampMs


def test_value_v0_bytes():
    assert R.encode_value(ONGOING) == ONGOING_V0
    assert R.decode_value(ONGOING_V0) == ONGOING


def test_empty_is_written_with_a_null_partitions_array():
    data = R.encode_value(EMPTY)
    assert data == bytes.fromhex("0000" "00000000000003e8" "0000" "0000ea60" "00" "ffffffff"
                                 "0000000000000009" "ffffffffffffffff")
    assert R.decode_value(data) == EMPTY


# -- values, v1 (flexible: read, never written by the coordinator) --------------------------
ONGOING_V1 = bytes.fromhex(
    "0001"
    "00000000000003e8" "0005" "0000ea60" "01"
    "03"                          # compact array: 2 topics + 1
    "02" "61" "03" "00000000" "00000001" "00"      # compact "a", compact [0, 1], no tags
    "02" "62" "02" "00000002" "00"                 # compact "b", compact [2], no tags
    "0000000000000007" "0000000000000003"
    "00")                         # no tagged fields


def test_value_v1_bytes():
    assert R.decode_value(ONGOING_V1) == ONGOING
    assert R.encode_value(ONGOING, version=1) == ONGOING_V1


def test_value_v1_null_partitions_and_unknown_tagged_fields_are_skipped():
    data = bytes.fromhex("0001" "00000000000003e8" "0000" "0000ea60" "00"
                         "00"                                   # null array
                         "0000000000000009" "ffffffffffffffff"
                         "02" "05" "02" "abcd" "81" "01" "00")  # tag 5 (2 bytes), tag 129 (0)
    assert R.decode_value(data) == EMPTY
    # a tagged field inside a partitions struct: tag 0, one byte
    inner = bytes.fromhex("0001" "00000000000003e8" "0005" "0000ea60" "01"
                          "02" "02" "61" "02" "00000007" "01" "00" "01" "ff"
                          "0000000000000007" "0000000000000003" "00")
    assert R.decode_value(inner).transaction_partitions == (("a", (7,)),)


@pytest.mark.parametrize("data", [
    bytes.fromhex("0002") + ONGOING_V0[2:],           # unknown version
    ONGOING_V0[:-1],                                  # truncated
    ONGOING_V0 + b"\x00",                             # trailing byte
    ONGOING_V1[:-1],                                  # missing the tagged fields
    bytes.fromhex("0000") + ONGOING_V0[2:17] + bytes.fromhex("fffffffe") + ONGOING_V0[21:],
])
def test_malformed_values_are_refused(data):
    with pytest.raises(R.RecordFormatError):
        R.decode_value(data)


def test_a_record_and_its_tombstone():
    assert R.transaction_record("t1", ONGOING) == (R.encode_key("t1"), ONGOING_V0)
    assert R.transaction_record("t1", None) == (R.encode_key("t1"), None)


def test_metadata_reads_back_what_it_writes():
    """TransactionLog.readTxnRecordValue: no last producer id or epoch in Kafka 3.8's value;
    the partitions of an Empty value are ignored."""
    md = TransactionMetadata.from_log_value("t1", ONGOING)
    assert (md.producer_id, md.last_producer_id, md.producer_epoch, md.last_producer_epoch) == \
        (1000, -1, 5, -1)
    assert md.state is S.ONGOING and md.partitions == {("a", 0), ("a", 1), ("b", 2)}
    assert (md.txn_start_timestamp_ms, md.txn_last_update_timestamp_ms) == (3, 7)
    assert md.to_log_value() == ONGOING
    odd = R.TransactionLogValue(1, 0, 1, S.EMPTY.id, (("a", (0,)),), 0, -1)
    assert TransactionMetadata.from_log_value("t", odd).partitions == set()
    with pytest.raises(ValueError):
        TransactionMetadata.from_log_value("t", R.TransactionLogValue(1, 0, 1, 9, None, 0, 0))


def test_a_transit_is_written_sorted_by_topic_and_partition():
    transit = TxnTransitMetadata(1000, 1000, 5, -1, 60_000, S.ONGOING,
                                 frozenset({("b", 2), ("a", 1), ("a", 0)}), 3, 7)
    assert R.encode_value(transit.to_log_value()) == ONGOING_V0


# -- the partition hash ---------------------------------------------------------------------
JAVA = [  # (text, String.hashCode as OpenJDK 17 prints it, partition of 50)
    ("", 0, 0),
    ("abc", 96354, 4),
    ("\U0001F600", 1772899, 49),
    ("console-consumer-12345", 158455506, 6),
    ("消费组", 28099635, 35),
]


@pytest.mark.parametrize("text, java_hash, partition", JAVA)
def test_java_string_hash_code_and_partition(text, java_hash, partition):
    assert R.java_string_hash(text) == java_hash
    assert R.partition_for(text) == partition == R.partition_for(text, 50)


def test_abs_of_min_value_is_zero_not_negative():
    assert R.java_abs(-2**31) == 0 and R.java_abs(-5) == 5
    assert all(R.partition_for("polygenelubricants", n) == 0 for n in (1, 3, 7, 50))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40), st.integers(1, 200))
def test_the_hash_is_the_group_coordinators(text, partitions):
    assert R.partition_for(text, partitions) == group_records.partition_for(text, partitions)
    assert 0 <= R.partition_for(text, partitions) < partitions


# -- round trips ----------------------------------------------------------------------------
names = st.text(max_size=30)
i8 = st.integers(-2**7, 2**7 - 1)
i16 = st.integers(-2**15, 2**15 - 1)
i32 = st.integers(-2**31, 2**31 - 1)
i64 = st.integers(-2**63, 2**63 - 1)
partitions = st.none() | st.lists(
    st.tuples(names, st.lists(i32, max_size=5).map(tuple)), max_size=4).map(tuple)
values = st.builds(R.TransactionLogValue, i64, i16, i32, i8, partitions, i64, i64)


@settings(max_examples=200, deadline=None)
@given(names)
def test_key_round_trip(tid):
    assert R.decode_key(R.encode_key(tid)) == R.TransactionLogKey(tid)


@settings(max_examples=300, deadline=None)
@given(values, st.sampled_from(R.VALUE_READ_VERSIONS))
def test_value_round_trip(value, version):
    data = R.encode_value(value, version)
    assert struct.unpack(">h", data[:2])[0] == version
    assert R.decode_value(data) == value


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=60))
def test_garbage_is_refused_or_read_never_crashes(data):
    try:
        R.decode_value(data)
    except R.RecordFormatError:
        pass
    try:
        R.decode_key(data)
    except R.RecordFormatError:
        pass


def test_strings_longer_than_int16_are_refused():
    with pytest.raises(R.RecordFormatError):
        R.encode_key("x" * 40_000)
