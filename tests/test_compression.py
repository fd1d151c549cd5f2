"""Compression (replicas/compression.py): the leader's recompression keeps every record and
the idempotence fields; batches are stored with their codec bits and read back by rayka's
decoder and by kafka-python on the segment files."""

import pytest
from kafka.record import MemoryRecords

from controller.topic_config import normalize_topic_config
from rayka.client.accumulator import ProducerBatch
from replicas import records
from replicas.compression import (PRODUCER_CODECS, codec_of, needs_recompression,
                                  producer_codec, recompress, topic_codec)
from replicas.errors import InvalidConfig
from replicas.log import Log, LogConfig

pytestmark = pytest.mark.unit
CODECS = ["gzip", "snappy", "lz4", "zstd"]


def sample(codec=0, pid=7, seq=40):
    return records.build_batch([b"value-%d" % i * 3 for i in range(50)],
                               keys=[b"k%d" % (i % 5) for i in range(50)],
                               timestamps_ms=[1000 + i for i in range(50)],
                               headers=[[("h", b"%d" % i)] for i in range(50)],
                               producer_id=pid, producer_epoch=2, base_sequence=seq,
                               compression_type=codec)


def as_tuples(buf):
    return [(r.offset, r.timestamp_ms, r.key, r.value, r.headers)
            for r in records.decode_records(buf)]


@pytest.mark.parametrize("source", ["none"] + CODECS)
@pytest.mark.parametrize("target", ["uncompressed"] + CODECS)
def test_recompress_keeps_records_and_producer_fields(source, target):
    buf = sample(PRODUCER_CODECS[source])
    headers = records.validate_batches(buf)
    codec = topic_codec(target)
    assert needs_recompression(headers, codec) == (PRODUCER_CODECS[source] != codec)
    out = recompress(buf, headers, codec)
    (h,) = records.validate_batches(out)
    (before,) = headers
    assert codec_of(h.attributes) == codec
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.records_count,
            h.last_offset_delta, h.max_timestamp) == \
        (7, 2, 40, 50, before.last_offset_delta, before.max_timestamp)
    assert as_tuples(out) == as_tuples(buf)


@pytest.mark.parametrize("target", CODECS)
def test_a_topic_codec_is_what_lands_on_disk(tmp_path, target):
    log = Log(tmp_path / "t-0", LogConfig(compression=topic_codec(target)))
    log.append_as_leader(sample(0), leader_epoch=3)
    log.append_as_leader(sample(PRODUCER_CODECS[target], pid=8, seq=0), leader_epoch=3)
    log.flush()
    data = (tmp_path / "t-0" / "00000000000000000000.log").read_bytes()
    headers = list(records.iter_headers(data))
    assert [codec_of(h.attributes) for h in headers] == [PRODUCER_CODECS[target]] * 2
    parsed = MemoryRecords(data)                     # an independent reader of the file
    offsets = []
    while parsed.has_next():
        batch = parsed.next_batch()
        assert batch.validate_crc() and batch.compression_type == PRODUCER_CODECS[target]
        offsets += [r.offset for r in batch]
    assert offsets == list(range(100))
    got = records.decode_records(log.read(0, 1 << 20))
    assert [r.value for r in got] == [b"value-%d" % i * 3 for i in range(50)] * 2


def test_producer_codec_is_kept_by_default(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig())
    log.append_as_leader(sample(PRODUCER_CODECS["lz4"]), leader_epoch=0)
    (h,) = records.iter_headers(log.read(0, 1 << 20))
    assert codec_of(h.attributes) == 3


def test_bad_codecs_are_invalid_config():
    with pytest.raises(InvalidConfig):
        producer_codec("brotli")
    with pytest.raises(InvalidConfig):
        topic_codec("none")                          # a producer name, not a topic one
    with pytest.raises(InvalidConfig):
        normalize_topic_config({"compression.type": "brotli"})
    assert normalize_topic_config({"compression.type": "zstd"}) == {"compression.type": "zstd"}


@pytest.mark.parametrize("name", CODECS)
def test_a_producer_batch_is_built_in_its_codec(name):
    batch = ProducerBatch(("t", 0), 0, producer_codec(name))
    for i in range(100):
        batch._add(b"x" * 100, None, None, 1000, 110)
    built = batch.build()
    (h,) = records.validate_batches(built)
    assert codec_of(h.attributes) == PRODUCER_CODECS[name] and len(built) < 100 * 100
    assert [r.value for r in records.decode_records(built)] == [b"x" * 100] * 100
