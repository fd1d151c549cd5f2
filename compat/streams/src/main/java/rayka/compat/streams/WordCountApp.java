package rayka.compat.streams;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.config.TopicConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A stateful word count under exactly_once_v2, for compat/kafka_streams.py.
 *
 * <p>Args: bootstrap application.id input-topic output-topic state.dir instance-name.
 * Topology: sentences (String values) -> flatMapValues to lower-case words -> groupBy word
 * (repartition topic {@code <app>-words-repartition}) -> count() into the store
 * {@code word-counts} (changelog {@code <app>-word-counts-changelog}) -> output topic, key the
 * word, value the count as a Long. Record caches are off (statestore.cache.max.bytes=0), so
 * every update of a count is forwarded: each input word yields exactly one output record.
 *
 * <p>Besides Streams' own log lines it prints {@code EVENT {json}} lines to stdout for the
 * driver: the client's state and its active tasks whenever either changes (polled every
 * 100 ms), and any exception reaching the uncaught exception handler (which then shuts the
 * client down: a failure is never papered over by replacing the thread). SIGTERM closes the
 * client cleanly.
 */
public final class WordCountApp {
    private WordCountApp() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: WordCountApp bootstrap app-id input output state-dir name");
            System.exit(2);
        }
        String bootstrap = args[0], appId = args[1], input = args[2], output = args[3];
        String stateDir = args[4], name = args[5];

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.CLIENT_ID_CONFIG, appId + "-" + name);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, 0);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        // internal topics survive one broker down and still refuse a write to one replica
        p.put(StreamsConfig.topicPrefix(TopicConfig.MIN_IN_SYNC_REPLICAS_CONFIG), 2);
        // a SIGKILLed member leaves the group in 10 s, not the client default of 45 s
        p.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 10000);
        p.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 2000);

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(v -> Arrays.asList(v.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((k, w) -> !w.isEmpty())
                .groupBy((k, w) -> w, Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.as("word-counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        streams.setUncaughtExceptionHandler(exc -> {
            event(name, "\"error\":" + json(exc.toString()));
            exc.printStackTrace(System.out);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(java.time.Duration.ofSeconds(20));
            event(name, "\"closed\":true");
            closed.countDown();
        }, "close-on-sigterm"));

        event(name, "\"pid\":" + ProcessHandle.current().pid());
        streams.start();
        String last = "";
        while (!closed.await(100, TimeUnit.MILLISECONDS)) {
            KafkaStreams.State state = streams.state();
            TreeSet<String> active = new TreeSet<>();
            try {
                for (ThreadMetadata t : streams.metadataForLocalThreads()) {
                    for (TaskMetadata task : t.activeTasks()) {
                        active.add(task.taskId().toString());
                    }
                }
            } catch (RuntimeException e) {
                // the client is not running (yet, or any more): state alone says so
            }
            List<String> quoted = new ArrayList<>();
            for (String t : active) {
                quoted.add(json(t));
            }
            String now = "\"state\":" + json(state.name()) + ",\"active\":" + quoted;
            if (!now.equals(last)) {
                event(name, now);
                last = now;
            }
            if (state == KafkaStreams.State.ERROR || state == KafkaStreams.State.NOT_RUNNING) {
                break;
            }
        }
    }

    private static synchronized void event(String name, String fields) {
        System.out.println("EVENT {\"t\":" + System.currentTimeMillis() + ",\"name\":" + json(name)
                + "," + fields + "}");
        System.out.flush();
    }

    private static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
