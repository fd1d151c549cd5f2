package rayka.compat;

import static rayka.compat.Common.*;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * An idempotent acks=all producer (max.in.flight 5) writes numbered records to a 3-partition,
 * RF 3, min.insync.replicas=2 topic (record i to partition i % 3) while the leader of
 * partition 0 is hard-killed: once KILL_AFTER records are acked it asks the driver for the
 * kill and keeps producing, at least AFTER_KILL more records after the kill. Every send must
 * succeed; then read_committed and read_uncommitted consumers must see, per partition,
 * exactly the numbers sent there, in order: no gap, no duplicate.
 */
final class IdempotentCheck {
    static final int PARTITIONS = 3;
    static final int TOTAL = 30000;
    static final int KILL_AFTER = 6000;
    static final int AFTER_KILL = 12000;
    static final int WINDOW = 3000;          // records in flight at most: production spans the kill

    static Map<String, Object> run(String bootstrap, String prefix) throws Exception {
        String topic = prefix + "-idem";
        int leader0;
        try (Admin admin = admin(bootstrap)) {
            leader0 = createTopic(admin, topic, PARTITIONS, (short) 3,
                    Map.of("min.insync.replicas", "2")).get(0).leader().id();
        }
        AtomicLong acked = new AtomicLong();
        AtomicReference<String> sendError = new AtomicReference<>();
        AtomicLong lastAck = new AtomicLong(), maxGap = new AtomicLong();
        long[] lastOffset = new long[PARTITIONS];
        java.util.Arrays.fill(lastOffset, -1);
        Semaphore window = new Semaphore(WINDOW);
        long t0 = System.nanoTime();
        int sent = 0, killedAt = -1;
        double killSeconds = 0;
        try (KafkaProducer<String, String> p = producer(bootstrap, Map.of(
                ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5",
                ProducerConfig.LINGER_MS_CONFIG, "5",
                ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000",
                ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000"))) {
            Thread killer = null;
            final int[] killedAtBox = {-1};
            final AtomicLong sentBox = new AtomicLong();
            while (sent < TOTAL || killedAtBox[0] < 0 || sent < killedAtBox[0] + AFTER_KILL) {
                check(sendError.get() == null, "send failed: " + sendError.get());
                if (!window.tryAcquire(90, TimeUnit.SECONDS))
                    throw new CheckFailed("no ack for 90 s with " + WINDOW + " records in flight ("
                            + acked.get() + " acked of " + sent + " sent)");
                final int n = sent;
                int part = n % PARTITIONS;
                p.send(new ProducerRecord<>(topic, part, null, Integer.toString(n)), (md, ex) -> {
                    long now = System.nanoTime();
                    long prev = lastAck.getAndSet(now);
                    if (prev != 0) maxGap.accumulateAndGet(now - prev, Math::max);
                    if (ex != null) sendError.compareAndSet(null, "record " + n + ": " + describe(ex));
                    else synchronized (lastOffset) {
                        if (md.offset() <= lastOffset[part])
                            sendError.compareAndSet(null, "record " + n + " acked at offset " + md.offset()
                                    + " of partition " + part + ", not after " + lastOffset[part]);
                        lastOffset[part] = md.offset();
                    }
                    acked.incrementAndGet();
                    window.release();
                });
                sent++;
                sentBox.set(sent);
                if (killer == null && acked.get() >= KILL_AFTER) {
                    killer = new Thread(() -> {
                        try {
                            killBroker(leader0, Duration.ofSeconds(60));
                            killedAtBox[0] = (int) sentBox.get();
                        } catch (Exception e) {
                            sendError.compareAndSet(null, "kill: " + describe(e));
                        }
                    }, "killer");
                    killer.start();
                    killSeconds = seconds(t0);
                }
            }
            killedAt = killedAtBox[0];
            p.flush();
            check(sendError.get() == null, "send failed: " + sendError.get());
        }
        double produceSeconds = seconds(t0);
        check(acked.get() == sent, "acked " + acked.get() + " of " + sent + " records");

        List<TopicPartition> tps = partitions(topic, PARTITIONS);
        Map<String, Object> out = obj();
        for (String isolation : List.of("read_committed", "read_uncommitted")) {
            long r0 = System.nanoTime();
            Map<Integer, List<ConsumerRecord<String, String>>> got =
                    readAll(bootstrap, tps, isolation, Duration.ofSeconds(120));
            for (int part = 0; part < PARTITIONS; part++) {
                List<Integer> want = new ArrayList<>();
                for (int i = part; i < sent; i += PARTITIONS) want.add(i);
                List<Integer> seen = new ArrayList<>();
                for (ConsumerRecord<String, String> r : got.get(part)) seen.add(Integer.parseInt(r.value()));
                if (!seen.equals(want)) throw new CheckFailed(isolation + " partition " + part + ": "
                        + difference(want, seen));
            }
            out.put(isolation + "_seconds", seconds(r0));
        }
        out.put("records", sent);
        out.put("killed_broker", leader0);
        out.put("killed_after_s", killSeconds);
        out.put("sent_before_kill_done", killedAt);
        out.put("produce_seconds", produceSeconds);
        out.put("records_per_s", sent / produceSeconds);
        out.put("longest_ack_gap_s", maxGap.get() / 1e9);
        return out;
    }

    /** The first place two per-partition sequences differ, and what is missing or repeated. */
    static String difference(List<Integer> want, List<Integer> seen) {
        java.util.Set<Integer> w = new java.util.HashSet<>(want), s = new java.util.HashSet<>();
        int dups = 0;
        for (Integer x : seen) if (!s.add(x)) dups++;
        long missing = want.stream().filter(x -> !s.contains(x)).count();
        long extra = s.stream().filter(x -> !w.contains(x)).count();
        int i = 0;
        while (i < Math.min(want.size(), seen.size()) && want.get(i).equals(seen.get(i))) i++;
        return seen.size() + " records, want " + want.size() + "; " + missing + " missing, " + dups
                + " duplicates, " + extra + " foreign; first difference at index " + i + ": want "
                + (i < want.size() ? want.get(i) : "end") + ", got " + (i < seen.size() ? seen.get(i) : "end");
    }
}
