"""protocol/security/: who a connection is and what it may do, as pure functions of bytes.

What goes here: Kafka's SCRAM credentials as stored in ZooKeeper (credentials.py: the
`salt=...,stored_key=...,server_key=...,iterations=...` text form and the
`/config/users/<user>` JSON), the per-connection SASL server for SaslHandshake and
SaslAuthenticate (sasl.py: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), the connection's
identity (session.py), the client side of SASL (sasl_client.py), and ACLs: the model and
its filters (acl.py), the authorizer's decisions (authorizer.py) and the ZooKeeper paths
and JSON they are stored in (acl_znodes.py).

May import: the stdlib (SCRAM is a few HMACs here; scramp only checks it in the tests) and
replicas/errors.py (Kafka's error codes).
Never ray, kazoo, sockets, ssl or a clock: pure.
"""
