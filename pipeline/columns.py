"""RecordBatch v2 bytes → Arrow columns in Spark's Kafka-source schema.

Rules:
- The schema is Spark's Kafka source's, column for column: key binary, value binary,
  topic string, partition int, offset long, timestamp timestamp, timestampType int.
- Only records with start ≤ offset < end are kept: a fetch answers whole batches, which may
  begin before the position or run past the requested end.
- timestampType is the batch's (attribute bit 3: 0 CreateTime, 1 LogAppendTime); with
  LogAppendTime every record carries the batch's max timestamp, as Kafka defines it.
- Decoding goes through the project's codec (aiokafka's C batch reader); no per-record
  Python object outlives the batch, the columns are plain lists turned into Arrow arrays.
"""

from __future__ import annotations

import pyarrow as pa
from aiokafka.record.default_records import DefaultRecordBatch

from replicas.records import iter_headers

TIMESTAMP_TYPE_BIT = 0x08
ARROW_SCHEMA = pa.schema([
    ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
    ("partition", pa.int32()), ("offset", pa.int64()),
    ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32())])


class Columns:
    """Accumulates decoded records of one partition until `to_arrow`."""

    def __init__(self, topic: str, partition: int):
        self.topic, self.partition = topic, partition
        self.keys: list = []
        self.values: list = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.types: list[int] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, data: bytes, start: int, end: int) -> int:
        """Decode every batch of `data`; keep records in [start, end). Returns the offset
        after the last record seen (kept or not), or `start` when there was none."""
        view = memoryview(data)
        nxt = start
        for h in iter_headers(data):
            if h.last_offset < start:
                continue
            if h.base_offset >= end:
                break
            batch = DefaultRecordBatch(bytes(view[h.position: h.position + h.size]))
            log_append = 1 if h.attributes & TIMESTAMP_TYPE_BIT else 0
            whole = h.base_offset >= start and h.last_offset < end
            n0 = len(self.offsets)
            if whole:
                for r in batch:
                    self.offsets.append(r.offset)
                    self.timestamps.append(r.timestamp)
                    self.keys.append(r.key)
                    self.values.append(r.value)
            else:
                for r in batch:
                    if start <= r.offset < end:
                        self.offsets.append(r.offset)
                        self.timestamps.append(r.timestamp)
                        self.keys.append(r.key)
                        self.values.append(r.value)
            added = len(self.offsets) - n0
            if log_append:
                self.timestamps[n0:] = [h.max_timestamp] * added
            self.types.extend([log_append] * added)
            nxt = max(nxt, h.next_offset)
        return nxt

    def to_arrow(self) -> pa.RecordBatch:
        n = len(self.offsets)
        ts = pa.array(self.timestamps, pa.int64())
        batch = pa.RecordBatch.from_arrays([
            _binary(self.keys), _binary(self.values),
            pa.array([self.topic] * n) if n else pa.array([], pa.string()),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.array(self.offsets, pa.int64()),
            pa.compute.multiply(ts, 1000).cast(pa.timestamp("us", tz="UTC")),
            pa.array(self.types, pa.int8()).cast(pa.int32())], schema=ARROW_SCHEMA)
        self.keys, self.values, self.offsets, self.timestamps, self.types = [], [], [], [], []
        return batch


def _binary(items: list) -> pa.Array:
    # pyarrow converts a list of bytes ~100x faster when it infers the type than when it is
    # told pa.binary() (measured: 24 M vs 0.24 M items/s); all-None infers null: cast it
    arr = pa.array(items)
    return arr if arr.type == pa.binary() else arr.cast(pa.binary())
