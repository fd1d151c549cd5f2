"""A quixstreams application in exactly-once mode: a stateful word count.

Run by compat/run.py in compat's own venv (quixstreams pins an older confluent-kafka than
rayka's tests do): `python quix_wordcount.py <bootstrap> <in topic> <out topic> <state dir>
<idle timeout s>`. Each input value is a sentence; each word is re-keyed (a repartition
topic, quixstreams' group_by), counted in a RocksDB state store (a changelog topic), and the
new count goes to the output topic keyed by the word. processing_guarantee="exactly-once"
runs every checkpoint as a Kafka transaction (output, changelog and input offsets
together). It stops after `idle timeout` seconds without input.
"""

from __future__ import annotations

import sys

from quixstreams import Application


def main(bootstrap: str, source: str, sink: str, state_dir: str, idle_s: float) -> None:
    app = Application(broker_address=bootstrap, consumer_group="rayka-compat-wordcount",
                      processing_guarantee="exactly-once", auto_offset_reset="earliest",
                      state_dir=state_dir, commit_interval=0.5,
                      producer_extra_config={"transaction.timeout.ms": 20000})
    words = app.topic(source, value_deserializer="string", key_deserializer="string")
    counts = app.topic(sink, value_serializer="json", key_serializer="string")
    sdf = app.dataframe(words)
    sdf = sdf.apply(lambda sentence: sentence.split(), expand=True)
    sdf = sdf.group_by(lambda word: word, name="word")

    def count(word, state):
        n = state.get("n", 0) + 1
        state.set("n", n)
        return {"word": word, "count": n}
    sdf = sdf.apply(count, stateful=True)
    sdf.to_topic(counts)
    app.run(sdf, timeout=idle_s)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]))
