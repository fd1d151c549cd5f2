"""End-transaction marker batches (replicas/control.py) against Kafka's format, checked by
two independent decoders (kafka-python's and aiokafka's) and by aiokafka's builder."""

from __future__ import annotations

import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch

from replicas import control, records
from replicas.errors import CorruptRecord

pytestmark = pytest.mark.unit

# ABORT for producer 7 epoch 3, coordinator epoch 12, at 1_700_000_000_000 ms, offset 5:
# the 61-byte header (attributes 0x30, base sequence -1, one record) and the 17-byte record
# (length 16, attributes 0, deltas 0, key 00000000, value 0000 0000000c, no headers).
GOLDEN_ABORT = bytes.fromhex(
    "0000000000000005" "00000042" "ffffffff" "02" "bc857b9a" "0030" "00000000"
    "0000018bcfe56800" "0000018bcfe56800" "0000000000000007" "0003" "ffffffff" "00000001"
    "20" "00" "00" "00" "08" "00000000" "0c" "00000000000c" "00")


def test_an_abort_marker_is_kafkas_bytes():
    buf = control.end_txn_marker_batch(7, 3, control.ABORT, 12, 1_700_000_000_000, base_offset=5)
    assert bytes(buf) == GOLDEN_ABORT and len(buf) == 78
    header = records.validate_batch(buf)          # CRC-32C right, a whole batch
    assert (header.attributes, header.base_sequence, header.records_count) == (0x30, -1, 1)
    assert header.base_timestamp == header.max_timestamp == 1_700_000_000_000


@pytest.mark.parametrize("kind", [control.ABORT, control.COMMIT])
@pytest.mark.parametrize("decoder", [KafkaPythonBatch, AioBatch])
def test_independent_decoders_read_the_marker(kind, decoder):
    buf = control.end_txn_marker_batch(123456789, 32000, kind, 2**31 - 1, 42, base_offset=99,
                                       partition_leader_epoch=4)
    batch = decoder(bytes(buf))
    assert batch.validate_crc() and batch.is_control_batch and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (123456789, 32000, -1)
    [record] = list(batch)
    assert (record.offset, record.timestamp) == (99, 42)
    assert bytes(record.key) == bytes([0, 0, 0, kind])
    assert bytes(record.value) == bytes([0, 0, 0x7F, 0xFF, 0xFF, 0xFF])
    assert control.end_txn_marker(buf) == (kind, 2**31 - 1)
    assert control.control_type(buf) == kind


def test_the_marker_matches_aiokafkas_builder_with_the_control_bit_set():
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=1,
                                        producer_id=5, producer_epoch=1, base_sequence=-1,
                                        batch_size=1 << 20)
    builder.append(0, timestamp=1000, key=b"\x00\x00\x00\x01", value=b"\x00\x00\x00\x00\x00\x09",
                   headers=[])
    theirs = builder.build()
    theirs[21:23] = (0x30).to_bytes(2, "big")
    records.reseal(theirs)
    assert control.end_txn_marker_batch(5, 1, control.COMMIT, 9, 1000) == theirs


def test_a_compressed_control_batch_is_read_through_the_codec():
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=1, is_transactional=1,
                                        producer_id=5, producer_epoch=1, base_sequence=-1,
                                        batch_size=1 << 20)
    builder.append(0, timestamp=1000, key=b"\x00\x00\x00\x00", value=b"\x00\x00\x00\x00\x00\x03",
                   headers=[])
    buf = builder.build()
    buf[22] |= 0x20                         # low byte of the attributes: gzip | control
    records.reseal(buf)
    assert control.end_txn_marker(buf) == (control.ABORT, 3)


def test_unknown_types_empty_batches_and_corrupt_keys():
    marker = control.end_txn_marker_batch(5, 1, control.COMMIT, 9, 1000)
    assert control.parse_control_key(b"\x00\x00\x00\x02") == 2       # KRaft LEADER_CHANGE
    assert control.parse_control_key(b"\x00\x01\x00\x63") == control.UNKNOWN
    with pytest.raises(CorruptRecord):
        control.parse_control_key(b"\x00\x00")
    with pytest.raises(CorruptRecord):
        control.parse_control_key(b"\xff\xff\x00\x00")            # negative version
    empty = bytearray(marker[:records.HEADER_SIZE])                 # what a cleaner may leave
    records.HEADER.pack_into(empty, 0, 0, records.HEADER_SIZE - records.LOG_OVERHEAD, -1, 2, 0,
                             0x30, 0, 1000, 1000, 5, 1, -1, 0)
    records.reseal(empty)
    assert control.control_type(empty) is None and control.end_txn_marker(empty) is None
    with pytest.raises(ValueError):
        control.end_txn_marker_batch(5, 1, 2, 9, 1000)
