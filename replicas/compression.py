"""Compression codecs of RecordBatch v2 and the leader's recompression (Kafka's LogValidator).

Rules (Kafka's LogValidator.scala):
- Attributes bits 0-2 name the codec: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd. Only the
  records after RecordsCount are compressed; the header stays readable, so the broker's hot
  path (offsets, epochs stamped in place) never decompresses.
- Producer `compression_type`: none, gzip, snappy, lz4, zstd. Topic `compression.type`:
  uncompressed, gzip, snappy, lz4, zstd, or producer (the default: keep what was sent).
- Leader append with a topic codec: a batch already in that codec is kept as it is (header
  rewrite only); any other batch is decompressed and rebuilt as ONE batch in the topic
  codec with the same records (offset deltas, timestamps, keys, values, headers) and the same
  producer id, epoch and base sequence, so idempotence still holds. Control batches are
  never rebuilt.
- Encoding and decoding go through aiokafka's codec (stdlib gzip; cramjam for snappy, lz4
  and zstd; snappy in xerial framing as Kafka's Java client writes it).
"""

from __future__ import annotations

from typing import Sequence

from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from replicas.errors import InvalidConfig

CODEC_MASK = 0x07
CONTROL_FLAG = 0x20
PRODUCER_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
TOPIC_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4, "producer": None}


def producer_codec(name: str) -> int:
    """The codec id for a producer's compression_type; InvalidConfig (40) for anything else."""
    codec = PRODUCER_CODECS.get(str(name).lower())
    if codec is None:
        raise InvalidConfig(f"Invalid value {name!r} for configuration compression.type: "
                            f"must be one of {', '.join(PRODUCER_CODECS)}")
    return codec


def topic_codec(name: str) -> int | None:
    """The codec id a topic's compression.type forces, None for `producer`."""
    if str(name).lower() not in TOPIC_CODECS:
        raise InvalidConfig(f"Invalid value {name!r} for configuration compression.type: "
                            f"must be one of {', '.join(TOPIC_CODECS)}")
    return TOPIC_CODECS[str(name).lower()]


def codec_of(attributes: int) -> int:
    return attributes & CODEC_MASK


def needs_recompression(headers: Sequence, codec: int | None) -> bool:
    return codec is not None and any(codec_of(h.attributes) != codec
                                     and not h.attributes & CONTROL_FLAG for h in headers)


def rebuild(raw: bytes, kept, codec: int) -> bytearray:
    """A new batch holding the records `kept` of the batch `raw`, in `codec`, with raw's base
    offset, producer id and epoch, base sequence and transactional bit (offset deltas and
    timestamps as the records say)."""
    batch = DefaultRecordBatch(raw)
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=batch.is_transactional,
        producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence, batch_size=1 << 62)
    for r in kept:
        builder.append(r.offset - batch.base_offset, timestamp=r.timestamp, key=r.key,
                       value=r.value, headers=list(r.headers))
    out = builder.build()
    out[0:8] = raw[0:8]                                # the base offset
    return out


def recompress(buf, headers: Sequence, codec: int) -> bytearray:
    """Every batch of `buf` in `codec` (see module rules); batches already in it are copied."""
    out = bytearray()
    for h in headers:
        raw = bytes(buf[h.position:h.position + h.size])
        if codec_of(h.attributes) == codec or h.attributes & CONTROL_FLAG:
            out += raw
        else:
            out += rebuild(raw, DefaultRecordBatch(raw), codec)
    return out
