"""share/: KIP-932 share groups (queues on a topic), pure.

What lives here:
- group: share groups' membership on their group coordinator (ShareGroupHeartbeat,
  ShareGroupDescribe, the SimpleAssignor, session expiry), `ShareGroups` the collection;
- partition: one share-partition on a topic partition's leader (SPSO/SPEO, in-flight records
  with acquisition locks and delivery counts, acknowledgements, what is persisted);
- sessions: share sessions on a leader (ShareFetch/ShareAcknowledge epochs).

A room of its own beside the group and transaction coordinators, as Kafka keeps its share
coordinator (share-coordinator/ and core/src/main/java/kafka/server/share in Kafka 4).

May import: the stdlib and replicas/ (errors). Never ray, kazoo, sockets, threads, the
clock, nor coordinator/, transactions/ or protocol/ (the shells call this room).

Rules: requests in, answers and state out; the clock is passed in (`now_ms`); the broker's
shell (actors/share_host.py) reads the log, holds the locks and keeps the timers.
"""
