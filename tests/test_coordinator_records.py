"""`__consumer_offsets` records byte for byte (Kafka's JSON schemas, hand-encoded here), and
the group → partition hash (vectors printed by OpenJDK 17's String.hashCode on this machine)."""

import struct

import pytest
from hypothesis import given, settings, strategies as st

from coordinator import records as R

pytestmark = pytest.mark.unit


def s16(text: str) -> bytes:  # non-flexible string: int16 length + UTF-8
    data = text.encode()
    return struct.pack(">h", len(data)) + data


NULL = b"\xff\xff"


# -- keys -----------------------------------------------------------------------------------
def test_offset_commit_key_v1_bytes():
    data = R.encode_key(R.OffsetCommitKey("my-group", "t", 3))
    assert data == bytes.fromhex("0001" "0008") + b"my-group" + bytes.fromhex("0001") + b"t" + \
        bytes.fromhex("00000003")
    assert R.decode_key(data) == R.OffsetCommitKey("my-group", "t", 3)


def test_group_metadata_key_v2_bytes():
    data = R.encode_key(R.GroupMetadataKey("g"))
    assert data == bytes.fromhex("0002" "0001" "67")
    assert R.decode_key(data) == R.GroupMetadataKey("g")


def test_offset_commit_key_v0_reads_like_v1_and_other_versions_are_unknown():
    v0 = b"\x00\x00" + s16("g") + s16("topic") + struct.pack(">i", 7)
    assert R.decode_key(v0) == R.OffsetCommitKey("g", "topic", 7)
    assert R.decode_key(b"\x00\x03" + s16("x")) == R.UnknownKey(3)
    assert R.decode_key(b"\xff\xff") == R.UnknownKey(-1)


# -- OffsetCommitValue ----------------------------------------------------------------------
def test_offset_commit_value_v3_bytes():
    value = R.OffsetCommitValue(offset=42, leader_epoch=5, metadata="m", commit_timestamp=1000)
    data = R.encode_offset_commit_value(value)
    assert data == bytes.fromhex("0003" "000000000000002a" "00000005" "0001" "6d" "00000000000003e8")
    assert R.decode_offset_commit_value(data) == value


def test_offset_commit_value_no_epoch_and_empty_metadata():
    data = R.encode_offset_commit_value(R.OffsetCommitValue(0, -1, "", 0))
    assert data == bytes.fromhex("0003" "0000000000000000" "ffffffff" "0000" "0000000000000000")


@pytest.mark.parametrize("version", [0, 2])
def test_offset_commit_value_v0_v2_have_no_epoch(version):
    data = struct.pack(">hq", version, 9) + s16("md") + struct.pack(">q", 77)
    assert R.decode_offset_commit_value(data) == R.OffsetCommitValue(9, -1, "md", 77, -1)


def test_offset_commit_value_v1_has_an_expire_timestamp():
    data = struct.pack(">hq", 1, 9) + s16("") + struct.pack(">qq", 77, 88)
    assert R.decode_offset_commit_value(data) == R.OffsetCommitValue(9, -1, "", 77, 88)


# -- GroupMetadataValue ---------------------------------------------------------------------
MEMBER = R.MemberRecord("m1", None, "c", "/h", 300_000, 10_000, b"\x01", b"")


def test_group_metadata_value_v3_bytes():
    value = R.GroupMetadataValue("consumer", 1, "range", "m1", 7, (MEMBER,))
    data = R.encode_group_metadata_value(value)
    assert data == (b"\x00\x03" + s16("consumer") + struct.pack(">i", 1) + s16("range") + s16("m1")
                    + struct.pack(">q", 7) + struct.pack(">i", 1)
                    + s16("m1") + NULL + s16("c") + s16("/h")
                    + bytes.fromhex("000493e0" "00002710")    # rebalance 300000, session 10000
                    + bytes.fromhex("00000001" "01")          # subscription
                    + bytes.fromhex("00000000"))              # assignment
    assert R.decode_group_metadata_value(data) == value


def test_empty_group_value_has_null_protocol_and_leader():
    data = R.encode_group_metadata_value(R.GroupMetadataValue("consumer", 2, None, None, 5, ()))
    assert data == b"\x00\x03" + s16("consumer") + \
        bytes.fromhex("00000002" "ffff" "ffff" "0000000000000005" "00000000")


def test_static_member_instance_id_is_written():
    member = R.MemberRecord("m", "inst", "c", "h", 1, 2, b"", b"a")
    value = R.GroupMetadataValue("consumer", 1, "range", "m", -1, (member,))
    data = R.encode_group_metadata_value(value)
    assert s16("m") + s16("inst") + s16("c") in data
    assert R.decode_group_metadata_value(data) == value


def _old_member(version: int) -> bytes:
    out = s16("m1") + (s16("inst") if version >= 3 else b"") + s16("c") + s16("/h")
    out += struct.pack(">i", 300_000) if version >= 1 else b""
    return out + struct.pack(">i", 10_000) + struct.pack(">i", 1) + b"\x01" + struct.pack(">i", 0)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_group_metadata_value_older_versions(version):
    data = struct.pack(">h", version) + s16("consumer") + struct.pack(">i", 4) + s16("range") + s16("m1")
    data += struct.pack(">q", 7) if version >= 2 else b""
    data += struct.pack(">i", 1) + _old_member(version)
    value = R.decode_group_metadata_value(data)
    assert value.generation == 4 and value.protocol == "range" and value.leader == "m1"
    assert value.current_state_timestamp == (7 if version >= 2 else -1)
    member = value.members[0]
    assert member.group_instance_id == ("inst" if version >= 3 else None)
    assert member.rebalance_timeout == (300_000 if version >= 1 else 10_000)  # v0: = session timeout
    assert (member.session_timeout, member.subscription, member.assignment) == (10_000, b"\x01", b"")


@pytest.mark.parametrize("data", [
    b"\x00\x04" + b"\x00" * 30,                        # v4 is flexible: not read here
    b"\x00\x03\x00",                                    # truncated
    R.encode_group_metadata_value(R.GroupMetadataValue("c", 1, None, None)) + b"\x00",  # trailing
    b"\x00\x03" + struct.pack(">h", -1) + b"\x00" * 20,  # null protocol type
])
def test_malformed_group_values_raise(data):
    with pytest.raises(R.RecordFormatError):
        R.decode_group_metadata_value(data)


def test_malformed_offset_values_raise():
    for data in (b"\x00\x05" + b"\x00" * 30, b"\x00\x03\x00\x00", b"\x00"):
        with pytest.raises(R.RecordFormatError):
            R.decode_offset_commit_value(data)


def test_records_and_tombstones():
    record = R.offset_commit_record("g", "t", 0, R.OffsetCommitValue(1, -1, "", 2))
    assert record.key == R.encode_key(R.OffsetCommitKey("g", "t", 0))
    assert R.decode_offset_commit_value(record.value).offset == 1
    assert R.offset_commit_record("g", "t", 0, None) == R.OffsetsRecord(record.key, None)
    assert R.group_metadata_record("g", None) == R.OffsetsRecord(R.encode_key(R.GroupMetadataKey("g")), None)


# -- partition_for: Java's String.hashCode -------------------------------------------------
JAVA = [  # string, String.hashCode(), Utils.abs(hash) % 50  (OpenJDK 17, this machine)
    ("my-group", -1906497762, 12),
    ("", 0, 0),
    ("polygenelubricants", -2147483648, 0),   # hashCode == Integer.MIN_VALUE: abs gives 0
    ("GydZG_", -2147483648, 0),
    ("grüppe", -1233264812, 12),
    ("a", 97, 47),
    ("abc", 96354, 4),
    ("\U0001F600", 1772899, 49),               # one code point, two UTF-16 units
    ("console-consumer-12345", 158455506, 6),
    ("消费组", 28099635, 35),
]


@pytest.mark.parametrize("text, java_hash, partition", JAVA)
def test_java_string_hash_code_and_partition(text, java_hash, partition):
    assert R.java_string_hash(text) == java_hash
    assert R.partition_for(text) == partition
    assert R.partition_for(text, 50) == partition


def test_abs_of_min_value_is_zero_not_negative():
    assert R.java_abs(-2**31) == 0 and R.java_abs(-5) == 5
    assert all(R.partition_for("polygenelubricants", n) == 0 for n in (1, 3, 7, 50))


def _reference_hash(text: str) -> int:
    units = [int.from_bytes(text.encode("utf-16-be")[i:i + 2], "big")
             for i in range(0, len(text.encode("utf-16-be")), 2)]
    n = len(units)
    h = sum(u * pow(31, n - 1 - i, 2**32) for i, u in enumerate(units)) % 2**32
    return h - 2**32 if h >= 2**31 else h


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40), st.integers(1, 200))
def test_hash_matches_the_closed_form_and_partitions_stay_in_range(text, partitions):
    assert R.java_string_hash(text) == _reference_hash(text)
    assert 0 <= R.partition_for(text, partitions) < partitions


def test_java_length_counts_utf16_units():
    assert R.java_length("abc") == 3 and R.java_length("é") == 1 and R.java_length("\U0001F600") == 2


def test_subscribed_topics_of_a_consumer_subscription():
    sub = struct.pack(">hi", 1, 2) + s16("a") + s16("b") + struct.pack(">i", -1) + b"more v1 fields"
    assert R.subscribed_topics(sub) == frozenset({"a", "b"})
    assert R.subscribed_topics(b"\x00") is None


# -- round trips ----------------------------------------------------------------------------
names = st.text(max_size=30)
i32 = st.integers(-2**31, 2**31 - 1)
i64 = st.integers(-2**63, 2**63 - 1)


@settings(max_examples=200, deadline=None)
@given(names, names, i32)
def test_key_round_trip(group, topic, partition):
    for key in (R.OffsetCommitKey(group, topic, partition), R.GroupMetadataKey(group)):
        assert R.decode_key(R.encode_key(key)) == key


@settings(max_examples=200, deadline=None)
@given(i64, i32, names, i64)
def test_offset_value_round_trip(offset, epoch, metadata, ts):
    value = R.OffsetCommitValue(offset, epoch, metadata, ts)
    assert R.decode_offset_commit_value(R.encode_offset_commit_value(value)) == value


members = st.builds(R.MemberRecord, names, st.none() | names, names, names, i32, i32,
                    st.binary(max_size=20), st.binary(max_size=20))


@settings(max_examples=200, deadline=None)
@given(names, i32, st.none() | names, st.none() | names, i64, st.lists(members, max_size=4))
def test_group_value_round_trip(ptype, gen, protocol, leader, ts, ms):
    value = R.GroupMetadataValue(ptype, gen, protocol, leader, ts, tuple(ms))
    assert R.decode_group_metadata_value(R.encode_group_metadata_value(value)) == value


def test_strings_longer_than_int16_are_refused():
    with pytest.raises(R.RecordFormatError):
        R.encode_key(R.GroupMetadataKey("x" * 40_000))
