"""share/: KIP-932 share groups (queues on a topic), pure.

What lives here:
- group: share groups' membership on their group coordinator (ShareGroupHeartbeat,
  ShareGroupDescribe, the SimpleAssignor, session expiry), `ShareGroups` the collection;
- partition: one share-partition on a topic partition's leader (SPSO/SPEO, in-flight records
  with acquisition locks and delivery counts, acknowledgements, what is persisted);
- sessions: share sessions on a leader (ShareFetch/ShareAcknowledge epochs);
- coordinator, records: the share coordinator (share-partitions' state, read by a new
  leader, written after every change, fencing old leaders) and its `__share_group_state`
  records (Kafka's ShareSnapshot / ShareUpdate);
- offsets: share-group offsets as an admin describes, alters and deletes them (SPSO,
  leader epoch, lag).

A room of its own beside the group and transaction coordinators, as Kafka keeps its share
coordinator (share-coordinator/ and core/src/main/java/kafka/server/share in Kafka 4).

May import: the stdlib and replicas/ (errors). Never ray, kazoo, sockets, threads, the
clock, nor coordinator/, transactions/ or protocol/ (the shells call this room).

Rules: requests in, answers and state out; the clock is passed in (`now_ms`); the broker's
shells (actors/share_host.py, actors/share_state_host.py) read the logs, append, hold the
locks and keep the timers.
"""
