package rayka.compat;

import static rayka.compat.Common.*;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;

/**
 * Two consumers of one group (eager range, cooperative-sticky, static members with the
 * range assignor, or KIP-848's consumer protocol: group.protocol=consumer, the assignment
 * made by the coordinator) consume a pre-filled 6-partition topic, committing after every poll, paced
 * so the run spans the kill. Once both hold partitions and a quarter of the records is
 * committed, the group's coordinator (Admin.describeConsumerGroups(...).coordinator()) is
 * hard-killed. Asserted: every offset of every partition consumed at least once; the group's
 * committed offsets reach the end offsets; both consumers' assignments (their own view and
 * the coordinator's, Admin.describeConsumerGroups) cover every partition with no overlap
 * after the rebalance. Static: after the kill, member B is closed (a static member leaves no
 * LeaveGroup) and restarted with the same group.instance.id: it must get B's partitions back
 * while A sees no rebalance (no listener call, same generation).
 */
final class GroupCheck {
    static final int PARTITIONS = 6;
    static final int RECORDS = 3000;
    static final int POLL_RECORDS = 20;
    static final long POLL_PAUSE_MS = 60;

    /** One consumer in its own thread; what it saw, readable from the main thread. */
    static final class Member implements Runnable {
        final String name;
        final Map<String, Object> props;
        final Set<Long> seen;             // partition << 32 | offset
        final AtomicLong records = new AtomicLong();
        volatile Set<TopicPartition> assignment = Set.of();
        volatile int generation = -1;
        final AtomicInteger listenerCalls = new AtomicInteger();
        final AtomicInteger commitFailures = new AtomicInteger();
        final AtomicReference<String> error = new AtomicReference<>();
        volatile boolean stop;
        volatile boolean closed;
        final String topic, bootstrap;
        Thread thread;

        Member(String name, String bootstrap, String topic, Map<String, Object> props, Set<Long> seen) {
            this.name = name;
            this.bootstrap = bootstrap;
            this.topic = topic;
            this.props = props;
            this.seen = seen;
        }

        Member start() {
            thread = new Thread(this, "consumer-" + name);
            thread.start();
            return this;
        }

        public void run() {
            try (KafkaConsumer<String, String> c = consumer(bootstrap, props)) {
                c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    public void onPartitionsRevoked(Collection<TopicPartition> ps) {
                        if (!ps.isEmpty()) listenerCalls.incrementAndGet();
                    }
                    public void onPartitionsAssigned(Collection<TopicPartition> ps) {
                        listenerCalls.incrementAndGet();
                    }
                });
                // commit what was consumed after every poll that consumed, and again after a
                // failed commit (a partition read to its end is otherwise never committed)
                boolean dirty = false;
                while (!stop) {
                    ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
                    for (ConsumerRecord<String, String> r : recs) {
                        seen.add(((long) r.partition() << 32) | r.offset());
                        records.incrementAndGet();
                    }
                    if (!recs.isEmpty() || dirty) {
                        try {
                            c.commitSync(Duration.ofSeconds(60));
                            dirty = false;
                        } catch (org.apache.kafka.common.errors.RebalanceInProgressException
                                 | org.apache.kafka.clients.consumer.CommitFailedException
                                 | org.apache.kafka.common.errors.TimeoutException e) {
                            commitFailures.incrementAndGet();
                            dirty = true;
                        }
                    }
                    assignment = Set.copyOf(c.assignment());
                    generation = c.groupMetadata().generationId();
                    if (!recs.isEmpty()) Thread.sleep(POLL_PAUSE_MS);
                }
            } catch (WakeupException | InterruptedException e) {
                // stopped
            } catch (Throwable e) {
                error.compareAndSet(null, name + ": " + describe(e));
            } finally {
                closed = true;
            }
        }

        void close() throws InterruptedException {
            stop = true;
            thread.join(60000);
            check(!thread.isAlive(), "consumer " + name + " did not close within 60 s");
        }
    }

    static Map<String, Object> run(String bootstrap, String prefix, String mode) throws Exception {
        String topic = prefix + "-grp-" + mode, group = prefix + "-g-" + mode;
        List<TopicPartition> tps = partitions(topic, PARTITIONS);
        Map<String, Object> out = obj();
        try (Admin admin = admin(bootstrap)) {
            createTopic(admin, topic, PARTITIONS, (short) 3, Map.of("min.insync.replicas", "2"));
            try (KafkaProducer<String, String> p = producer(bootstrap, Map.of())) {
                for (int i = 0; i < RECORDS; i++)
                    p.send(new ProducerRecord<>(topic, i % PARTITIONS, null, "r" + i));
                p.flush();
            }
            Map<TopicPartition, Long> end = endOffsets(admin, tps);
            check(end.values().stream().mapToLong(Long::longValue).sum() == RECORDS,
                  "end offsets " + end + " do not add up to the " + RECORDS + " records produced");

            Map<String, Object> props = new HashMap<>();
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Integer.toString(POLL_RECORDS));
            if (mode.equals("consumer")) {
                // KIP-848: the coordinator assigns and times sessions; the client may not set
                // an assignment strategy, a session timeout or a heartbeat interval
                props.put("group.protocol", "consumer");
            } else {
                props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                          (mode.equals("cooperative") ? CooperativeStickyAssignor.class : RangeAssignor.class).getName());
                props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, mode.equals("static") ? "45000" : "10000");
                props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
            }
            Set<Long> seen = ConcurrentHashMap.newKeySet();
            long t0 = System.nanoTime();
            Member a = new Member("A", bootstrap, topic, withInstance(props, mode, "A"), seen).start();
            waitFor(Duration.ofSeconds(60), "consumer A has partitions", () -> !a.assignment.isEmpty() || a.closed);
            Member b0 = new Member("B", bootstrap, topic, withInstance(props, mode, "B"), seen).start();
            Member[] members = {a, b0};
            waitFor(Duration.ofSeconds(60), "both consumers hold partitions after B joined", () ->
                    a.closed || b0.closed || !a.assignment.isEmpty() && !b0.assignment.isEmpty()
                    && disjointCover(a.assignment, b0.assignment, tps) == null);
            checkMembers(members);
            out.put("join_seconds", seconds(t0));

            waitFor(Duration.ofSeconds(60), "a quarter of the records committed",
                    () -> committedSum(admin, group) >= RECORDS / 4 || a.closed || b0.closed);
            checkMembers(members);
            int coordinator = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)
                    .get(30, TimeUnit.SECONDS).coordinator().id();
            long committedBefore = committedSum(admin, group);
            long k0 = System.nanoTime();
            killBroker(coordinator, Duration.ofSeconds(60));
            out.put("coordinator_killed", coordinator);
            out.put("committed_at_kill", committedBefore);
            // the group goes on: commits resume through the new coordinator (more than what
            // one poll of each member may have had in flight at the kill)
            waitFor(Duration.ofSeconds(90), "commits resume after the coordinator kill",
                    () -> committedSum(admin, group) > committedBefore + 4 * POLL_RECORDS || a.closed || b0.closed);
            out.put("commits_resumed_after_kill_s", seconds(k0));
            try {
                out.put("coordinator_after", admin.describeConsumerGroups(List.of(group)).describedGroups()
                        .get(group).get(30, TimeUnit.SECONDS).coordinator().id());
            } catch (Exception e) {
                out.put("coordinator_after", describe(e));
            }
            checkMembers(members);

            if (mode.equals("static")) {
                waitFor(Duration.ofSeconds(60), "both static members hold partitions after the kill", () ->
                        a.closed || b0.closed || !b0.assignment.isEmpty()
                        && disjointCover(a.assignment, b0.assignment, tps) == null);
                Set<TopicPartition> bBefore = b0.assignment, aBefore = a.assignment;
                int aGeneration = a.generation, aCalls = a.listenerCalls.get();
                b0.close();
                long r0 = System.nanoTime();
                Member b1 = new Member("B'", bootstrap, topic, withInstance(props, mode, "B"), seen).start();
                members[1] = b1;
                waitFor(Duration.ofSeconds(60), "restarted static member B gets partitions",
                        () -> !b1.assignment.isEmpty() || b1.closed);
                checkMembers(members);
                out.put("static_rejoin_s", seconds(r0));
                check(b1.assignment.equals(bBefore), "restarted static member B got " + sorted(b1.assignment)
                        + ", had " + sorted(bBefore));
                check(a.listenerCalls.get() == aCalls && a.assignment.equals(aBefore),
                      "member A rebalanced when static member B restarted: listener calls " + aCalls + " -> "
                      + a.listenerCalls.get() + ", assignment " + sorted(aBefore) + " -> " + sorted(a.assignment));
                check(a.generation == aGeneration, "member A's generation moved from " + aGeneration + " to "
                      + a.generation + " when static member B restarted");
                out.put("generation", aGeneration);
            }

            try {
                waitFor(Duration.ofSeconds(120), "the group's committed offsets reach the end offsets", () ->
                        members[0].closed || members[1].closed || committedEqual(admin, group, end));
            } catch (CheckFailed e) {
                throw new CheckFailed(e.getMessage() + ": committed " + committedView(admin, group) + ", end "
                        + new java.util.TreeMap<>(byPartition(end)) + "; A holds " + sorted(members[0].assignment) + " (" + members[0].records
                        + " records, " + members[0].commitFailures + " failed commits), B holds "
                        + sorted(members[1].assignment) + " (" + members[1].records + " records, "
                        + members[1].commitFailures + " failed commits); coordinator's view: "
                        + coordinatorView(admin, group, tps));
            }
            checkMembers(members);
            out.put("consume_seconds", seconds(t0));
            // after the last rebalance: both views of the assignment cover all, no overlap
            AtomicReference<String> why = new AtomicReference<>();
            waitFor(Duration.ofSeconds(60), "a stable assignment covering every partition once", () -> {
                String w = disjointCover(members[0].assignment, members[1].assignment, tps);
                if (w == null) w = coordinatorView(admin, group, tps);
                why.set(w);
                return w == null || members[0].closed || members[1].closed;
            });
            checkMembers(members);
            check(why.get() == null, why.get());
            Set<Long> want = new HashSet<>();
            for (TopicPartition tp : tps)
                for (long o = 0; o < end.get(tp); o++) want.add(((long) tp.partition() << 32) | o);
            want.removeAll(seen);
            check(want.isEmpty(), want.size() + " records never consumed, e.g. partition "
                  + (want.iterator().hasNext() ? (want.iterator().next() >> 32) + " offset "
                     + (want.iterator().next() & 0xffffffffL) : ""));
            long consumed = members[0].records.get() + members[1].records.get()
                    + (members[1] != b0 ? b0.records.get() : 0);
            out.put("records", RECORDS);
            out.put("records_consumed", consumed);
            out.put("redelivered", consumed - RECORDS);
            out.put("commit_failures", members[0].commitFailures.get() + members[1].commitFailures.get());
            out.put("paced_records_per_s", RECORDS / (double) out.get("consume_seconds"));
            out.put("assignment_A", sorted(members[0].assignment).toString());
            out.put("assignment_B", sorted(members[1].assignment).toString());
            for (Member m : members) m.close();
            checkMembers(members);
        }
        return out;
    }

    static Map<String, Object> withInstance(Map<String, Object> props, String mode, String id) {
        Map<String, Object> p = new HashMap<>(props);
        if (mode.equals("static")) p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "member-" + id);
        return p;
    }

    static void checkMembers(Member[] members) {
        for (Member m : members) {
            check(m.error.get() == null, "consumer " + m.error.get());
            check(!m.closed || m.stop, "consumer " + m.name + " stopped by itself");
        }
    }

    static List<String> sorted(Set<TopicPartition> s) {
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : s) out.add(Integer.toString(tp.partition()));
        out.sort(null);
        return out;
    }

    /** null when a and b cover tps with no overlap, else what is wrong. */
    static String disjointCover(Set<TopicPartition> a, Set<TopicPartition> b, List<TopicPartition> tps) {
        Set<TopicPartition> both = new HashSet<>(a);
        both.retainAll(b);
        if (!both.isEmpty()) return "partitions " + sorted(both) + " assigned to both consumers";
        Set<TopicPartition> all = new HashSet<>(a);
        all.addAll(b);
        if (!all.equals(new HashSet<>(tps)))
            return "assignments " + sorted(a) + " + " + sorted(b) + " do not cover all " + tps.size() + " partitions";
        return null;
    }

    static String coordinatorView(Admin admin, String group, List<TopicPartition> tps) {
        try {
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups()
                    .get(group).get(30, TimeUnit.SECONDS);
            List<MemberDescription> ms = new ArrayList<>(d.members());
            if (ms.size() != 2) return "coordinator lists " + ms.size() + " members (state " + d.state() + ")";
            return disjointCover(ms.get(0).assignment().topicPartitions(),
                                 ms.get(1).assignment().topicPartitions(), tps) == null ? null
                    : "coordinator's view: " + disjointCover(ms.get(0).assignment().topicPartitions(),
                                 ms.get(1).assignment().topicPartitions(), tps);
        } catch (Exception e) {
            return "describeConsumerGroups: " + describe(e);
        }
    }

    static Map<Integer, Long> byPartition(Map<TopicPartition, Long> m) {
        Map<Integer, Long> out = new HashMap<>();
        m.forEach((tp, o) -> out.put(tp.partition(), o));
        return out;
    }

    static String committedView(Admin admin, String group) {
        try {
            Map<Integer, Long> out = new java.util.TreeMap<>();
            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS)
                    .forEach((tp, o) -> out.put(tp.partition(), o == null ? -1 : o.offset()));
            return out.toString();
        } catch (Exception e) {
            return describe(e);
        }
    }

    static long committedSum(Admin admin, String group) {
        try {
            return admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                    .get(30, TimeUnit.SECONDS).values().stream()
                    .mapToLong(o -> o == null ? 0 : o.offset()).sum();
        } catch (Exception e) {
            return -1;          // the coordinator moving: asked again at the next poll
        }
    }

    static boolean committedEqual(Admin admin, String group, Map<TopicPartition, Long> end) {
        try {
            Map<TopicPartition, OffsetAndMetadata> c = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
            for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
                OffsetAndMetadata o = c.get(e.getKey());
                if (o == null || o.offset() != e.getValue()) return false;
            }
            return true;
        } catch (Exception e) {
            return false;
        }
    }
}
