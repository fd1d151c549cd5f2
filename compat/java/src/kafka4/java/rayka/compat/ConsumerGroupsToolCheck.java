package rayka.compat;

import static rayka.compat.Common.*;

import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * cgtool BOOTSTRAP PREFIX: Kafka 4's kafka-consumer-groups (ConsumerGroupCommand of this
 * build's kafka-tools) on a KIP-848 group (4.x only; src/kafka4):
 *  - two consumers with group.protocol=consumer read a 3-partition topic of 900 records
 *    between them and commit once both hold partitions, each at the end of its own (a commit refused as
 *    STALE_MEMBER_EPOCH, a new epoch on its way, is retried after a poll, at most 5 times);
 *  - while they are up: --list --type consumer lists the group; --describe shows every
 *    partition at CURRENT-OFFSET = LOG-END-OFFSET = 300, lag 0, owned by a member;
 *    --describe --members lists two members whose assignments cover the 3 partitions;
 *    --describe --state says Stable;
 *  - once they closed (the group Empty): --reset-offsets --to-earliest --execute moves
 *    every partition to 0 (--describe then says so, lag 300); --delete-offsets --topic
 *    forgets them (the group stays, as Kafka 4's); --delete removes the group (--list no
 *    longer has it).
 */
public final class ConsumerGroupsToolCheck {
    static final int RECORDS = 900, PARTITIONS = 3;
    static final Duration TIMEOUT = Duration.ofSeconds(120);

    static String tool(String bootstrap, String... args) throws Exception {
        return Kafka4Tools.run("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                               "kafka-consumer-groups", bootstrap, args);
    }

    static boolean listed(String bootstrap, String group) throws Exception {
        return tool(bootstrap, "--list", "--type", "consumer").lines()
                .anyMatch(l -> l.trim().split("\\s+")[0].equals(group));
    }

    public static Map<String, Object> run(String bootstrap, String prefix) throws Exception {
        Map<String, Object> out = obj();
        String topic = prefix + "-cg", group = prefix + "-g848";
        try (Admin admin = admin(bootstrap)) {
            createTopic(admin, topic, PARTITIONS, (short) 3, Map.of());
        }
        try (KafkaProducer<String, String> p = producer(bootstrap, Map.of())) {
            for (int i = 0; i < RECORDS; i++)
                p.send(new ProducerRecord<>(topic, i % PARTITIONS, "k" + i, "v" + i));
            p.flush();
        }
        Map<String, Object> conf = Map.of(ConsumerConfig.GROUP_ID_CONFIG, group,
                ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        Set<String> seen = new HashSet<>();
        try (KafkaConsumer<String, String> a = consumer(bootstrap, conf);
             KafkaConsumer<String, String> b = consumer(bootstrap, conf)) {
            a.subscribe(List.of(topic));
            b.subscribe(List.of(topic));
            int[] stale = {0};
            waitFor(TIMEOUT, RECORDS + " records read by the two members, committed (read "
                    + seen.size() + ")", () -> {
                        for (KafkaConsumer<String, String> c : List.of(a, b))
                            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100)))
                                seen.add(r.partition() + "@" + r.offset());
                        if (seen.size() < RECORDS || a.assignment().isEmpty()
                                || b.assignment().isEmpty()
                                || a.assignment().size() + b.assignment().size() != PARTITIONS)
                            return false;
                        for (KafkaConsumer<String, String> c : List.of(a, b))     // at the end
                            for (TopicPartition tp : c.assignment())              // of each one
                                if (c.position(tp) < RECORDS / PARTITIONS) return false;
                        try {
                            for (KafkaConsumer<String, String> c : List.of(a, b)) c.commitSync();
                            return true;
                        } catch (CommitFailedException e) {
                            // a new member epoch on its way (KIP-848: STALE_MEMBER_EPOCH): as an
                            // application does, poll again and commit then
                            stale[0]++;
                            return false;
                        }
                    });
            check(seen.size() == RECORDS, "read " + seen.size() + " distinct records");
            check(stale[0] <= 5, stale[0] + " commits refused as stale after the group settled");
            out.put("stale_commits_retried", stale[0]);

            check(listed(bootstrap, group), "--list --type consumer lacks " + group);
            List<Map<String, String>> rows = Kafka4Tools.table(
                    tool(bootstrap, "--describe", "--group", group), "CURRENT-OFFSET");
            check(rows.size() == PARTITIONS, "--describe listed " + rows.size() + " partitions: " + rows);
            for (Map<String, String> r : rows) {
                check(r.get("CURRENT-OFFSET").equals(String.valueOf(RECORDS / PARTITIONS))
                      && r.get("LOG-END-OFFSET").equals(String.valueOf(RECORDS / PARTITIONS))
                      && r.get("LAG").equals("0") && !r.get("CONSUMER-ID").equals("-"),
                      "--describe row " + r);
            }
            List<Map<String, String>> members = Kafka4Tools.table(
                    tool(bootstrap, "--describe", "--members", "--group", group), "#PARTITIONS");
            check(members.size() == 2, "--describe --members listed " + members);
            int owned = 0;
            for (Map<String, String> m : members) owned += Integer.parseInt(m.get("#PARTITIONS"));
            check(owned == PARTITIONS, "the members own " + owned + " partitions: " + members);
            check(tool(bootstrap, "--describe", "--state", "--group", group).contains("Stable"),
                  "--describe --state: not Stable");
        }
        waitFor(TIMEOUT, group + " empty", () -> {
            try {
                return tool(bootstrap, "--describe", "--state", "--group", group).contains("Empty");
            } catch (Exception e) {
                return false;
            }
        });
        tool(bootstrap, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
             "--execute");
        for (Map<String, String> r : Kafka4Tools.table(
                tool(bootstrap, "--describe", "--group", group), "CURRENT-OFFSET"))
            check(r.get("CURRENT-OFFSET").equals("0")
                  && r.get("LAG").equals(String.valueOf(RECORDS / PARTITIONS)),
                  "after --reset-offsets --to-earliest: " + r);
        check(tool(bootstrap, "--delete-offsets", "--group", group, "--topic", topic)
                      .contains("Successful"), "--delete-offsets did not succeed");
        String deleted = tool(bootstrap, "--delete", "--group", group);
        check(deleted.contains("successful") && !deleted.contains("Error"),
              "--delete: " + deleted.replace('\n', ' '));
        check(!listed(bootstrap, group), "--delete left " + group);
        out.put("records", RECORDS);
        out.put("kafka_consumer_groups", "list --type, describe (offsets, members, state), "
                + "reset-offsets, delete-offsets, delete");
        return out;
    }
}
