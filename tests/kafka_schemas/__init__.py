"""Kafka message schemas (Kafka's JSON message format) for the APIs kafka-python 3.0.12
does not ship, written from Kafka 4.0's protocol: ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69); and KIP-932's ShareGroupHeartbeat (76), ShareGroupDescribe
(77), ShareFetch (78) and ShareAcknowledge (79) from Kafka 4.2's (Kafka's JSON at 4.2.0's
development tree, with v2's ShareAcquireMode, IsRenewAck and AcquisitionLockTimeoutMs
from 4.2's protocol reference), and its DescribeShareGroupOffsets (90, v1's Lag from 4.2's
protocol reference), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92). tests/protocol_samples.py loads them into kafka-python message
classes, so these APIs too are checked against an encoder other than kio."""
