package rayka.compat;

import static rayka.compat.Common.*;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * share BOOTSTRAP PREFIX: KIP-932 share groups through Kafka's own Java client (4.x only;
 * built from src/kafka4 when compat/java_client.py passes -Dkafka4):
 *  - the group's share.auto.offset.reset set to earliest by IncrementalAlterConfigs on its
 *    GROUP resource, and read back by DescribeConfigs;
 *  - three KafkaShareConsumers (implicit acknowledgement) read a 2-partition topic of 3,000
 *    records together: every (partition, offset) delivered exactly once, delivery count 1;
 *  - Admin: listGroups(forShareGroups) lists the group, describeShareGroups shows three
 *    members, listShareGroupOffsets gives each partition's start offset at its end offset
 *    (every record accepted) and lag 0;
 *  - an explicit consumer of a second group: a RELEASEd record comes back with delivery
 *    count 2, a REJECTed one never; commitSync answers every partition without error;
 *  - with the first group empty: alterShareGroupOffsets moves partition 0 back to 0 and a
 *    new consumer reads that partition's 1,500 records again (delivery count 1, partition 1
 *    untouched); deleteShareGroupOffsets forgets the topic (listShareGroupOffsets then lists
 *    nothing); deleteShareGroups removes the group;
 *  - Kafka's kafka-share-groups tool (ShareGroupCommand of the same kafka-tools version) on the
 *    second group once empty: --list, --describe (--state Empty, --members, the offsets
 *    table), --reset-offsets --to-offset 1000 --execute on one partition (the table and
 *    listShareGroupOffsets then say 1000), --delete-offsets, --delete.
 */
public final class ShareCheck {
    static final int RECORDS = 3000;
    static final Duration TIMEOUT = Duration.ofSeconds(120);

    static KafkaShareConsumer<String, String> shareConsumer(String bootstrap, String group,
                                                            String mode) {
        Properties p = base(bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put("share.acknowledgement.mode", mode);
        return new KafkaShareConsumer<>(p);
    }

    static void earliest(Admin admin, String group) throws Exception {
        ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
        admin.incrementalAlterConfigs(Map.of(res, List.of(new AlterConfigOp(
                new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET))))
                .all().get(60, TimeUnit.SECONDS);
        String got = admin.describeConfigs(List.of(res)).all().get(60, TimeUnit.SECONDS)
                .get(res).get("share.auto.offset.reset").value();
        check("earliest".equals(got), "share.auto.offset.reset read back as " + got);
    }

    /** Members polling in threads until `want` first deliveries were seen. */
    static Map<String, Integer> readTogether(String bootstrap, String group, String topic,
                                             int members, int want) throws Exception {
        Map<String, Integer> seen = new ConcurrentHashMap<>();
        Map<String, Integer> counts = new ConcurrentHashMap<>();
        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> threads = new ArrayList<>();
        List<Throwable> errors = new ArrayList<>();
        for (int i = 0; i < members; i++) {
            Thread t = new Thread(() -> {
                try (KafkaShareConsumer<String, String> c = shareConsumer(bootstrap, group, "implicit")) {
                    c.subscribe(List.of(topic));
                    while (!stop.get()) {
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                            String key = r.partition() + "@" + r.offset();
                            seen.merge(key, 1, Integer::sum);
                            counts.merge(key, (int) r.deliveryCount().orElse((short) -1), Math::max);
                        }
                    }
                    c.commitSync(Duration.ofSeconds(30));
                } catch (Throwable e) {
                    synchronized (errors) { errors.add(e); }
                }
            }, "share-member-" + i);
            t.start();
            threads.add(t);
        }
        try {
            waitFor(TIMEOUT, want + " records read by " + members + " share consumers (read "
                    + seen.size() + ")", () -> seen.size() >= want || !errors.isEmpty());
        } finally {
            stop.set(true);
            for (Thread t : threads) t.join(60_000);
        }
        check(errors.isEmpty(), "a share consumer failed: " + (errors.isEmpty() ? "" : describe(errors.get(0))));
        check(seen.size() == want, "read " + seen.size() + " distinct records, want " + want);
        seen.forEach((k, n) -> check(n == 1, "record " + k + " delivered " + n + " times"));
        counts.forEach((k, n) -> check(n == 1, "record " + k + " delivery count " + n));
        return seen;
    }

    /** Until describeShareGroups shows the group without members (Alter and Delete need it). */
    static void waitEmpty(Admin admin, String group) throws InterruptedException {
        waitFor(TIMEOUT, group + " empty", () -> {
            try {
                return admin.describeShareGroups(List.of(group)).describedGroups().get(group)
                        .get(30, TimeUnit.SECONDS).members().isEmpty();
            } catch (Exception e) {
                return false;
            }
        });
    }

    static Map<TopicPartition, SharePartitionOffsetInfo> offsets(Admin admin, String group,
            Collection<TopicPartition> tps) throws Exception {
        ListShareGroupOffsetsSpec spec = new ListShareGroupOffsetsSpec();
        if (tps != null) spec.topicPartitions(tps);
        return admin.listShareGroupOffsets(Map.of(group, spec)).partitionsToOffsetInfo(group)
                .get(60, TimeUnit.SECONDS);
    }

    static String tool(String bootstrap, String... args) throws Exception {
        return Kafka4Tools.run("org.apache.kafka.tools.consumer.group.ShareGroupCommand",
                               "kafka-share-groups", bootstrap, args);
    }

    public static Map<String, Object> run(String bootstrap, String prefix) throws Exception {
        Map<String, Object> out = obj();
        String topic = prefix + "-share", group = prefix + "-sg", other = prefix + "-sg2";
        try (Admin admin = admin(bootstrap)) {
            createTopic(admin, topic, 2, (short) 3, Map.of());
            try (KafkaProducer<String, String> p = producer(bootstrap, Map.of())) {
                for (int i = 0; i < RECORDS; i++)
                    p.send(new ProducerRecord<>(topic, i % 2, "k" + i, "v" + i));
                p.flush();
            }
            earliest(admin, group);
            earliest(admin, other);
            long t0 = System.nanoTime();
            readTogether(bootstrap, group, topic, 3, RECORDS);
            out.put("read_seconds", seconds(t0));
            info("3 share consumers read " + RECORDS + " records once each");

            Collection<GroupListing> listed = admin.listGroups(ListGroupsOptions.forShareGroups())
                    .all().get(60, TimeUnit.SECONDS);
            check(listed.stream().anyMatch(g -> g.groupId().equals(group)
                    && g.type().orElse(null) == GroupType.SHARE), "listGroups(share) lacks " + group
                    + ": " + listed);
            ShareGroupDescription d = admin.describeShareGroups(List.of(group)).describedGroups()
                    .get(group).get(60, TimeUnit.SECONDS);
            check(d.groupId().equals(group), "describeShareGroups answered " + d);
            Map<TopicPartition, SharePartitionOffsetInfo> at = offsets(admin, group, null);
            for (int p = 0; p < 2; p++) {
                SharePartitionOffsetInfo o = at.get(new TopicPartition(topic, p));
                check(o != null && o.startOffset() == RECORDS / 2, "partition " + p
                        + " start offset " + o + ", want " + RECORDS / 2);
                check(o.lag().orElse(0L) == 0L, "partition " + p + " lag " + o.lag());
            }

            // explicit acknowledgement in a group of its own: release, reject, accept
            try (KafkaShareConsumer<String, String> c = shareConsumer(bootstrap, other, "explicit")) {
                c.subscribe(List.of(topic));
                Map<String, Short> firstSeen = new HashMap<>();
                ConsumerRecord<String, String>[] released = new ConsumerRecord[1];
                ConsumerRecord<String, String>[] rejected = new ConsumerRecord[1];
                waitFor(TIMEOUT, "two records for the explicit consumer", () -> {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                        AcknowledgeType kind = AcknowledgeType.ACCEPT;
                        if (released[0] == null) { released[0] = r; kind = AcknowledgeType.RELEASE; }
                        else if (rejected[0] == null) { rejected[0] = r; kind = AcknowledgeType.REJECT; }
                        firstSeen.put(r.partition() + "@" + r.offset(), r.deliveryCount().orElse((short) -1));
                        c.acknowledge(r, kind);
                    }
                    if (!firstSeen.isEmpty()) {
                        c.commitSync(Duration.ofSeconds(30)).forEach((tp, err) ->
                                check(err.isEmpty(), "commitSync of " + tp + ": " + err));
                    }
                    return rejected[0] != null;
                });
                String releasedKey = released[0].partition() + "@" + released[0].offset();
                String rejectedKey = rejected[0].partition() + "@" + rejected[0].offset();
                short[] again = {0};
                boolean[] rejectedBack = {false};
                waitFor(TIMEOUT, "the released record " + releasedKey + " delivered again", () -> {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                        String key = r.partition() + "@" + r.offset();
                        if (key.equals(releasedKey)) again[0] = r.deliveryCount().orElse((short) -1);
                        if (key.equals(rejectedKey)) rejectedBack[0] = true;
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                    }
                    c.commitSync(Duration.ofSeconds(30));
                    return again[0] != 0;
                });
                check(again[0] == 2, "released record came back with delivery count " + again[0]);
                check(!rejectedBack[0], "the rejected record " + rejectedKey + " came back");
                out.put("released_delivery_count", (int) again[0]);
            }
            info("release came back with delivery count 2; reject never");

            // Kafka's kafka-share-groups on the second group, empty now
            check(tool(bootstrap, "--list").lines().anyMatch(l -> l.trim().equals(other)),
                  "kafka-share-groups --list lacks " + other);
            check(tool(bootstrap, "--describe", "--state", "--group", other).contains("Empty"),
                  "kafka-share-groups --describe --state: not Empty");
            tool(bootstrap, "--describe", "--members", "--group", other);
            tool(bootstrap, "--reset-offsets", "--group", other, "--topic", topic + ":1",
                 "--to-offset", "1000", "--execute");
            Map<String, String> p1row = null;
            for (Map<String, String> row : Kafka4Tools.table(tool(bootstrap, "--describe", "--group", other),
                                                 "START-OFFSET"))
                if (row.get("TOPIC").equals(topic) && row.get("PARTITION").equals("1")) p1row = row;
            check(p1row != null && "1000".equals(p1row.get("START-OFFSET")),
                  "after --reset-offsets --to-offset 1000 partition 1 shows " + p1row);
            check(offsets(admin, other, List.of(new TopicPartition(topic, 1)))
                    .get(new TopicPartition(topic, 1)).startOffset() == 1000,
                  "listShareGroupOffsets disagrees with the tool's reset");
            tool(bootstrap, "--delete-offsets", "--group", other, "--topic", topic);
            check(offsets(admin, other, null).isEmpty(), "offsets left after --delete-offsets");
            tool(bootstrap, "--delete", "--group", other);
            check(tool(bootstrap, "--list").lines().noneMatch(l -> l.trim().equals(other)),
                  "kafka-share-groups --delete left " + other);
            out.put("kafka_share_groups", "list, describe (offsets, state, members), "
                    + "reset-offsets, delete-offsets, delete");

            // the first group is empty now: move partition 0 back, read it again
            TopicPartition p0 = new TopicPartition(topic, 0);
            waitEmpty(admin, group);
            admin.alterShareGroupOffsets(group, Map.of(p0, 0L)).all().get(60, TimeUnit.SECONDS);
            SharePartitionOffsetInfo moved = offsets(admin, group, List.of(p0)).get(p0);
            check(moved.startOffset() == 0 && moved.lag().orElse((long) RECORDS / 2) == RECORDS / 2,
                    "after the alteration partition 0 is " + moved);
            Map<String, Integer> again = readTogether(bootstrap, group, topic, 1, RECORDS / 2);
            again.keySet().forEach(k -> check(k.startsWith("0@"), "read " + k + " of partition 1 again"));
            info("alterShareGroupOffsets: partition 0 read again from 0");

            waitEmpty(admin, group);          // the reader above closed: Delete needs it empty
            admin.deleteShareGroupOffsets(group, Set.of(topic)).all().get(60, TimeUnit.SECONDS);
            Map<TopicPartition, SharePartitionOffsetInfo> left = offsets(admin, group, null);
            check(left.isEmpty(), "after deleteShareGroupOffsets: " + left);
            admin.deleteShareGroups(List.of(group)).all().get(60, TimeUnit.SECONDS);
            Collection<GroupListing> after = admin.listGroups(ListGroupsOptions.forShareGroups())
                    .all().get(60, TimeUnit.SECONDS);
            check(after.stream().noneMatch(g -> g.groupId().equals(group)), group + " still listed");
            out.put("records", RECORDS);
        }
        return out;
    }
}
