"""Kafka message schemas (Kafka's JSON message format) for the APIs kafka-python 3.0.12
does not ship, written from Kafka 4.0's protocol: ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69). tests/protocol_samples.py loads them into kafka-python message
classes, so these APIs too are checked against an encoder other than kio."""
