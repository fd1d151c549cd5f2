package rayka.compat;

import static rayka.compat.Common.*;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;

/**
 * Transactions through a transaction-coordinator kill. One transactional producer commits
 * TRANSACTIONS transactions of RECORDS records each over a 3-partition RF 3 topic; half-way
 * the broker that coordinates its transactional id (describeTransactions) is hard-killed.
 * The producer goes on as Kafka's documentation says: a commit that times out is committed
 * again, an abortable error aborts the transaction and sends it again; a fatal one
 * (fenced, out of order, authorization) fails the check. Asserted: read_committed reads
 * every record of every committed transaction exactly once and none of an aborted one. The
 * figures: how many transactions were retried, and the longest commit (the failover).
 * With a 4.x client on a transaction.version 2 cluster this runs KIP-890 part 2 across the
 * coordinator's move (the epoch bumped by each EndTxn must survive the reload).
 */
final class TxnKillCheck {
    static final int PARTITIONS = 3;
    static final int TRANSACTIONS = 40;
    static final int RECORDS = 10;

    static Map<String, Object> run(String bootstrap, String prefix) throws Exception {
        String topic = prefix + "-txnkill", id = prefix + "-txnkill-p";
        List<TopicPartition> tps = partitions(topic, PARTITIONS);
        Set<String> committed = new HashSet<>(), aborted = new HashSet<>();
        Map<String, Object> out = obj();
        int retried = 0, killed = -1;
        double longestCommit = 0;
        try (Admin admin = admin(bootstrap)) {
            createTopic(admin, topic, PARTITIONS, (short) 3, Map.of("min.insync.replicas", "2"));
            try (KafkaProducer<String, String> p = producer(bootstrap, Map.of(
                    ProducerConfig.TRANSACTIONAL_ID_CONFIG, id,
                    ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "60000"))) {
                p.initTransactions();
                for (int t = 0; t < TRANSACTIONS; t++) {
                    if (t == TRANSACTIONS / 2) {
                        killed = admin.describeTransactions(List.of(id)).description(id)
                                .get(30, TimeUnit.SECONDS).coordinatorId();
                        info("killing broker " + killed + ", the coordinator of " + id);
                        killBroker(killed, Duration.ofSeconds(60));
                    }
                    for (int attempt = 0; ; attempt++) {
                        check(attempt < 10, "transaction " + t + " failed 10 times");
                        List<String> values = new ArrayList<>();
                        for (int i = 0; i < RECORDS; i++) values.add(id + "-" + t + "-" + attempt + "-" + i);
                        try {
                            p.beginTransaction();
                            for (int i = 0; i < RECORDS; i++)
                                p.send(new ProducerRecord<>(topic, i % PARTITIONS, null, values.get(i)));
                            long c0 = System.nanoTime();
                            commit(p);
                            longestCommit = Math.max(longestCommit, seconds(c0));
                            committed.addAll(values);
                            break;
                        } catch (ProducerFencedException | OutOfOrderSequenceException
                                 | AuthorizationException e) {
                            throw new CheckFailed("transaction " + t + ": fatal " + describe(e));
                        } catch (KafkaException e) {
                            info("transaction " + t + " aborted after " + describe(e));
                            p.abortTransaction();
                            aborted.addAll(values);
                            retried++;
                        }
                    }
                }
            }
        }
        Map<Integer, List<ConsumerRecord<String, String>>> read = readAll(bootstrap, tps,
                "read_committed", Duration.ofSeconds(120));
        Set<String> seen = new HashSet<>();
        for (List<ConsumerRecord<String, String>> l : read.values())
            for (ConsumerRecord<String, String> r : l) {
                check(seen.add(r.value()), "read_committed saw " + r.value() + " twice");
                check(!aborted.contains(r.value()), "read_committed saw aborted " + r.value());
            }
        Set<String> missing = new HashSet<>(committed);
        missing.removeAll(seen);
        check(missing.isEmpty(), "read_committed lacks " + missing.size() + " committed records, e.g. "
              + (missing.isEmpty() ? "" : missing.iterator().next()));
        check(seen.equals(committed), "read_committed saw " + seen.size() + " records, want "
              + committed.size());
        out.put("killed_broker", killed);
        out.put("transactions_retried", retried);
        out.put("longest_commit_s", longestCommit);
        out.put("records_committed", committed.size());
        return out;
    }

    /** commitTransaction, again after a timeout (the documented way: it may have committed). */
    static void commit(KafkaProducer<String, String> p) {
        for (int i = 0; ; i++) {
            try {
                p.commitTransaction();
                return;
            } catch (TimeoutException e) {
                if (i >= 5) throw e;
            }
        }
    }
}
