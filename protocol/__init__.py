"""protocol/: the Kafka wire protocol, sans-I/O: frames in, requests out; results in, frames out.

What goes here: frames in → typed requests (kio, generated from Kafka's JSON schemas),
typed results → frames out; the API-version table (what ApiVersions advertises is exactly
what is served); request handlers that turn a Kafka request into calls on the replica
manager, the group coordinator and admin operations, and their answers into responses.
Record batches stay opaque bytes end to end.

Modules: frames (the 4-byte size prefix), codec (kio requests and responses), hot_writers
(Fetch and Produce answers written by hand, kio's bytes), fetch_answer (a Fetch v12-18
answer kept as its outcomes and written straight to bytes), legacy (the
versions kio has no schema for: Kafka 3.8's oldest), connection
(one connection's bytes → requests → ordered answers), versions (the API-version table),
build (one internal result to the version asked), api (`BrokerApi`, what handlers need
from a broker), errors (why a connection must close), fetch_session (KIP-227 fetch
sessions and the change journal), client (the client side of a connection: the brokers'
replication links and tools), quotas (Kafka's client quotas: which applies, the windowed
rate, throttle times), entity_config (Kafka's /config/<type>/<name> JSON, names and quota
values); handlers/ (one per API) and security/ (SASL, SCRAM, ACLs).

May import: the stdlib, kio, replicas/, coordinator/, controller's pure modules (topic
config and assignment rules). Never ray, kazoo or sockets: the socket loop lives in the
broker actor (actors/listener.py) and passes bytes in and out.

Rules (like h11): bytes in, requests out; results in, bytes out. Answers keep request
order per connection; a malformed frame is an error answer or a closed connection, never
a crash; no clock reads (time comes in).
"""
