package rayka.compat;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** What every check shares: the driver protocol on stdout/stdin, client configs, topics, JSON. */
final class Common {
    private Common() {}

    /** A check's failure: its message is the one-line reason the driver reports. */
    static final class CheckFailed extends RuntimeException {
        CheckFailed(String why) { super(why); }
    }

    static void check(boolean ok, String why) {
        if (!ok) throw new CheckFailed(why);
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static void info(String text) { say("INFO " + text); }

    // -- the driver: "KILL <broker id>" out, one line back once the broker is killed ---------
    private static final BlockingQueue<String> STDIN = new LinkedBlockingQueue<>();
    private static volatile boolean stdinStarted;

    private static synchronized void startStdin() {
        if (stdinStarted) return;
        stdinStarted = true;
        Thread t = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(
                    new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) STDIN.add(line);
            } catch (Exception e) {
                STDIN.add("EOF " + e);
            }
            STDIN.add("EOF");
        }, "stdin");
        t.setDaemon(true);
        t.start();
    }

    /** Ask the driver to hard-kill a broker; returns once it says the kill is done. */
    static void killBroker(int brokerId, Duration timeout) throws InterruptedException {
        startStdin();
        say("KILL " + brokerId);
        String reply = STDIN.poll(timeout.toMillis(), TimeUnit.MILLISECONDS);
        check(reply != null, "driver did not answer KILL " + brokerId + " within " + timeout);
        check(reply.startsWith("KILLED"), "driver answered KILL " + brokerId + " with: " + reply);
    }

    // -- clients -------------------------------------------------------------------------------
    static Properties base(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return p;
    }

    static Admin admin(String bootstrap) {
        Properties p = base(bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        return Admin.create(p);
    }

    static KafkaProducer<String, String> producer(String bootstrap, Map<String, Object> extra) {
        Properties p = base(bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, Map<String, Object> extra) {
        Properties p = base(bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.putAll(extra);
        return new KafkaConsumer<>(p);
    }

    /** Create a topic and wait until every partition has a leader and all replicas in sync. */
    static Map<Integer, TopicPartitionInfo> createTopic(Admin admin, String topic, int partitions,
                                                        short rf, Map<String, String> configs)
            throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, partitions, rf).configs(configs)))
                .all().get(60, TimeUnit.SECONDS);
        Map<Integer, TopicPartitionInfo> out = new HashMap<>();
        waitFor(Duration.ofSeconds(60), "topic " + topic + " has leaders and full ISRs", () -> {
            try {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames()
                        .get(20, TimeUnit.SECONDS).get(topic);
                if (d.partitions().size() != partitions) return false;
                for (TopicPartitionInfo p : d.partitions()) {
                    if (p.leader() == null || p.leader().id() < 0 || p.isr().size() < rf)
                        return false;
                    out.put(p.partition(), p);
                }
                return true;
            } catch (Exception e) {
                return false;
            }
        });
        return out;
    }

    static Map<TopicPartition, Long> endOffsets(Admin admin, Collection<TopicPartition> tps)
            throws Exception {
        Map<TopicPartition, OffsetSpec> req = new HashMap<>();
        for (TopicPartition tp : tps) req.put(tp, OffsetSpec.latest());
        Map<TopicPartition, Long> out = new HashMap<>();
        admin.listOffsets(req).all().get(60, TimeUnit.SECONDS)
                .forEach((tp, info) -> out.put(tp, info.offset()));
        return out;
    }

    static List<TopicPartition> partitions(String topic, int n) {
        List<TopicPartition> out = new ArrayList<>();
        for (int i = 0; i < n; i++) out.add(new TopicPartition(topic, i));
        return out;
    }

    /** Every record of the partitions from the start to their end offsets now. */
    static Map<Integer, List<ConsumerRecord<String, String>>> readAll(
            String bootstrap, List<TopicPartition> tps, String isolation, Duration timeout) {
        Map<Integer, List<ConsumerRecord<String, String>>> out = new HashMap<>();
        try (KafkaConsumer<String, String> c = consumer(bootstrap,
                Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation,
                       ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "2000"))) {
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(60));
            for (TopicPartition tp : tps) out.put(tp.partition(), new ArrayList<>());
            long deadline = System.nanoTime() + timeout.toNanos();
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) done &= c.position(tp, Duration.ofSeconds(30)) >= end.get(tp);
                if (done) break;
                check(System.nanoTime() < deadline, "reading " + tps + " (" + isolation
                        + ") did not reach end offsets " + end + " within " + timeout);
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500)))
                    out.get(r.partition()).add(r);
            }
        }
        return out;
    }

    static void waitFor(Duration timeout, String what, BooleanSupplier cond)
            throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!cond.getAsBoolean()) {
            check(System.nanoTime() < deadline, "timed out after " + timeout + " waiting until " + what);
            Thread.sleep(200);      // poll interval
        }
    }

    /** The exception behind an ExecutionException, as "Class: message". */
    static String describe(Throwable e) {
        while ((e instanceof ExecutionException || e instanceof java.lang.reflect.InvocationTargetException
                || e instanceof org.apache.kafka.common.KafkaException && e.getCause() != null
                   && e.getClass() == org.apache.kafka.common.KafkaException.class)
               && e.getCause() != null) e = e.getCause();
        String msg = e.getMessage() == null ? "" : ": " + e.getMessage().replace('\n', ' ');
        return e.getClass().getSimpleName() + msg;
    }

    static String clientVersion() {
        try (var in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            Properties p = new Properties();
            p.load(in);
            return p.getProperty("version", "?");
        } catch (Exception e) {
            return "?";
        }
    }

    // -- JSON (results only: maps, lists, strings, numbers, booleans) --------------------------
    static Map<String, Object> obj() { return new LinkedHashMap<>(); }

    static String json(Object o) {
        StringBuilder sb = new StringBuilder();
        write(sb, o);
        return sb.toString();
    }

    private static void write(StringBuilder sb, Object o) {
        if (o == null) sb.append("null");
        else if (o instanceof Map<?, ?> m) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (!first) sb.append(',');
                first = false;
                write(sb, String.valueOf(e.getKey()));
                sb.append(':');
                write(sb, e.getValue());
            }
            sb.append('}');
        } else if (o instanceof Collection<?> c) {
            sb.append('[');
            boolean first = true;
            for (Object x : c) {
                if (!first) sb.append(',');
                first = false;
                write(sb, x);
            }
            sb.append(']');
        } else if (o instanceof Double d) {
            sb.append(d.isNaN() || d.isInfinite() ? "null" : String.format("%.3f", d));
        } else if (o instanceof Number || o instanceof Boolean) sb.append(o);
        else {
            sb.append('"');
            for (char ch : o.toString().toCharArray()) {
                if (ch == '"' || ch == '\\') sb.append('\\').append(ch);
                else if (ch < 0x20) sb.append(String.format("\\u%04x", (int) ch));
                else sb.append(ch);
            }
            sb.append('"');
        }
    }

    static double seconds(long startNanos) { return (System.nanoTime() - startNanos) / 1e9; }
}
