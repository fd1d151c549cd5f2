package rayka.compat;

import static rayka.compat.Common.*;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * Transactions. A consume-transform-produce loop: a read_committed consumer of a pre-filled
 * input topic, a transactional producer P1 that writes one output record per input record
 * and sendOffsetsToTransaction(positions, consumer.groupMetadata()) in every transaction;
 * every third transaction is aborted, after which the consumer's committed offsets must still
 * be those of the last commit and the loop rewinds to them. A second transactional producer
 * P2 writes to the same output partitions in transactions that overlap P1's (begun before
 * P1's, ended after), committing and aborting in turn. Asserted: read_committed sees exactly
 * the committed records (P1's output holds every input exactly once), each producer's in
 * the order sent per partition; read_uncommitted sees every record sent, aborted ones too,
 * exactly once; the group's committed offsets on the input reach its end offsets. The
 * transaction version in use: a 4.x client on a cluster that finalizes transaction.version 2
 * (describeFeatures) ends every transaction with an epoch bump (KIP-890 part 2), so P1's
 * epoch (describeTransactions) is the number of its transactions; otherwise it stays 0.
 */
final class TxnCheck {
    static final int PARTITIONS = 3;
    static final int INPUT = 900;
    static final int POLL_RECORDS = 40;

    static void written(List<Future<RecordMetadata>> fs, String who) throws InterruptedException {
        for (Future<RecordMetadata> f : fs) {
            try {
                f.get();
            } catch (java.util.concurrent.ExecutionException e) {
                throw new CheckFailed(who + "'s send before abort failed: " + describe(e));
            }
        }
    }

    static Map<String, Object> run(String bootstrap, String prefix) throws Exception {
        String in = prefix + "-txn-in", outTopic = prefix + "-txn-out", group = prefix + "-txn-g";
        List<TopicPartition> inTps = partitions(in, PARTITIONS), outTps = partitions(outTopic, PARTITIONS);
        Map<String, Object> out = obj();
        Set<String> committed = new HashSet<>(), aborted = new HashSet<>();
        Map<Integer, List<String>> committedOrder = new HashMap<>();   // partition -> values in send order
        for (int p = 0; p < PARTITIONS; p++) committedOrder.put(p, new ArrayList<>());
        int commits = 0, aborts = 0, p1Ends = 0;
        long t0;
        try (Admin admin = admin(bootstrap)) {
            createTopic(admin, in, PARTITIONS, (short) 3, Map.of("min.insync.replicas", "2"));
            createTopic(admin, outTopic, PARTITIONS, (short) 3, Map.of("min.insync.replicas", "2"));
            try (KafkaProducer<String, String> p = producer(bootstrap, Map.of())) {
                for (int i = 0; i < INPUT; i++) p.send(new ProducerRecord<>(in, i % PARTITIONS, null, "in" + i));
                p.flush();
            }
            Map<TopicPartition, Long> inEnd = endOffsets(admin, inTps);

            t0 = System.nanoTime();
            try (KafkaConsumer<String, String> c = consumer(bootstrap, Map.of(
                         ConsumerConfig.GROUP_ID_CONFIG, group,
                         ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed",
                         ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Integer.toString(POLL_RECORDS)));
                 KafkaProducer<String, String> p1 = producer(bootstrap, Map.of(
                         ProducerConfig.TRANSACTIONAL_ID_CONFIG, prefix + "-txn-p1"));
                 KafkaProducer<String, String> p2 = producer(bootstrap, Map.of(
                         ProducerConfig.TRANSACTIONAL_ID_CONFIG, prefix + "-txn-p2"))) {
                p1.initTransactions();
                p2.initTransactions();
                c.subscribe(List.of(in));
                int round = 0, done = 0, idle = 0;
                Map<TopicPartition, Long> lastCommitted = new HashMap<>();
                while (done < INPUT) {
                    ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(500));
                    if (recs.isEmpty()) {
                        check(++idle < 120, "consume-transform-produce stalled at " + done + " of " + INPUT
                              + " inputs (assignment " + c.assignment() + ")");
                        continue;
                    }
                    idle = 0;
                    boolean abort1 = round % 3 == 2, abort2 = round % 2 == 1;
                    // P2 opens first and ends last: its transaction spans P1's
                    p2.beginTransaction();
                    List<ProducerRecord<String, String>> sent2 = new ArrayList<>();
                    List<Future<RecordMetadata>> f1 = new ArrayList<>(), f2 = new ArrayList<>();
                    for (int p = 0; p < PARTITIONS; p++) {
                        ProducerRecord<String, String> r = new ProducerRecord<>(outTopic, p, null,
                                "p2-r" + round + "-" + p);
                        f2.add(p2.send(r));
                        sent2.add(r);
                    }
                    p1.beginTransaction();
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    List<ProducerRecord<String, String>> sent1 = new ArrayList<>();
                    for (ConsumerRecord<String, String> r : recs) {
                        ProducerRecord<String, String> o = new ProducerRecord<>(outTopic, r.partition(), null,
                                "p1-" + r.value() + "-r" + round);
                        f1.add(p1.send(o));
                        sent1.add(o);
                        offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                    p1.sendOffsetsToTransaction(offsets, c.groupMetadata());
                    if (abort1) {
                        // flushed first: Kafka's producer fails unsent batches on abort, and the
                        // aborted records must be in the log for read_uncommitted to see them
                        p1.flush();
                        written(f1, "P1");
                        p1.abortTransaction();
                        aborts++;
                        p1Ends++;
                        for (ProducerRecord<String, String> r : sent1) aborted.add(r.value());
                        // the aborted offsets must not have been committed: rewind to the last commit
                        Map<TopicPartition, OffsetAndMetadata> now = c.committed(offsets.keySet(), Duration.ofSeconds(30));
                        for (TopicPartition tp : offsets.keySet()) {
                            OffsetAndMetadata o = now.get(tp);
                            long at = o == null ? 0 : o.offset(), want = lastCommitted.getOrDefault(tp, 0L);
                            check(at == want, "after an aborted transaction the group's committed offset of "
                                  + tp + " is " + at + ", want the last committed " + want);
                            c.seek(tp, at);
                        }
                    } else {
                        p1.commitTransaction();
                        commits++;
                        p1Ends++;
                        for (ProducerRecord<String, String> r : sent1) {
                            committed.add(r.value());
                            committedOrder.get(r.partition()).add(r.value());
                        }
                        done += recs.count();
                        offsets.forEach((tp, o) -> lastCommitted.put(tp, o.offset()));
                    }
                    if (abort2) {
                        p2.flush();
                        written(f2, "P2");
                        p2.abortTransaction();
                        aborts++;
                        for (ProducerRecord<String, String> r : sent2) aborted.add(r.value());
                    } else {
                        p2.commitTransaction();
                        commits++;
                        for (ProducerRecord<String, String> r : sent2) {
                            committed.add(r.value());
                            committedOrder.get(r.partition()).add(r.value());
                        }
                    }
                    round++;
                }
            }
            double loopSeconds = seconds(t0);
            Map<TopicPartition, OffsetAndMetadata> groupOffsets = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
            for (TopicPartition tp : inTps) {
                OffsetAndMetadata o = groupOffsets.get(tp);
                check(o != null && o.offset() == inEnd.get(tp), "group's committed offset of " + tp + " is "
                      + (o == null ? "none" : o.offset()) + ", want the end offset " + inEnd.get(tp));
            }
            FinalizedVersionRange tvRange = admin.describeFeatures().featureMetadata()
                    .get(30, TimeUnit.SECONDS).finalizedFeatures().get("transaction.version");
            short finalizedTv = tvRange == null ? 0 : tvRange.maxVersionLevel();
            boolean bumps = finalizedTv >= 2 && clientVersion().startsWith("4.");
            String p1Id = prefix + "-txn-p1";
            TransactionDescription p1State = admin.describeTransactions(List.of(p1Id))
                    .description(p1Id).get(30, TimeUnit.SECONDS);
            int wantEpoch = bumps ? p1Ends : 0;
            check(p1State.producerEpoch() == wantEpoch, "P1's epoch after " + p1Ends
                  + " transactions is " + p1State.producerEpoch() + ", want " + wantEpoch
                  + " (finalized transaction.version " + finalizedTv + ", client "
                  + clientVersion() + ")");
            out.put("finalized_transaction_version", (int) finalizedTv);
            out.put("transactions_epoch_bumped", bumps);
            out.put("transactions_committed", commits);
            out.put("transactions_aborted", aborts);
            out.put("loop_seconds", loopSeconds);
            out.put("transactions_per_s", (commits + aborts) / loopSeconds);
        }

        // read_committed: exactly the committed records, each producer's in its order
        long r0 = System.nanoTime();
        Map<Integer, List<ConsumerRecord<String, String>>> rc = readAll(bootstrap, outTps, "read_committed",
                Duration.ofSeconds(120));
        Set<String> inputsSeen = new HashSet<>();
        for (int p = 0; p < PARTITIONS; p++) {
            List<String> vals = new ArrayList<>();
            for (ConsumerRecord<String, String> r : rc.get(p)) vals.add(r.value());
            for (String v : vals) {
                check(!aborted.contains(v), "read_committed saw aborted record " + v + " in partition " + p);
                check(committed.contains(v), "read_committed saw unknown record " + v + " in partition " + p);
                if (v.startsWith("p1-"))
                    check(inputsSeen.add(v.substring(3, v.lastIndexOf('-'))), "input " + v + " output twice");
            }
            for (String prod : List.of("p1-", "p2-")) {
                List<String> got = vals.stream().filter(v -> v.startsWith(prod)).toList();
                List<String> want = committedOrder.get(p).stream().filter(v -> v.startsWith(prod)).toList();
                check(got.equals(want), "read_committed partition " + p + ": " + got.size() + " " + prod
                      + " records, want " + want.size() + (got.size() == want.size() ? " (order differs)" : ""));
            }
        }
        check(inputsSeen.size() == INPUT, "read_committed output covers " + inputsSeen.size() + " of " + INPUT + " inputs");
        out.put("read_committed_seconds", seconds(r0));
        // read_uncommitted: every record sent, aborted too, once
        Map<Integer, List<ConsumerRecord<String, String>>> ru = readAll(bootstrap, outTps, "read_uncommitted",
                Duration.ofSeconds(120));
        Set<String> all = new HashSet<>();
        int n = 0;
        for (List<ConsumerRecord<String, String>> l : ru.values())
            for (ConsumerRecord<String, String> r : l) {
                check(all.add(r.value()), "read_uncommitted saw " + r.value() + " twice");
                n++;
            }
        Set<String> want = new HashSet<>(committed);
        want.addAll(aborted);
        Set<String> missing = new HashSet<>(want);
        missing.removeAll(all);
        check(missing.isEmpty(), "read_uncommitted lacks " + missing.size() + " records sent, e.g. "
              + (missing.isEmpty() ? "" : missing.iterator().next()));
        check(all.equals(want), "read_uncommitted saw " + n + " records, want " + want.size());
        out.put("records_committed", committed.size());
        out.put("records_aborted", aborted.size());
        return out;
    }
}
