package rayka.compat;

import static rayka.compat.Common.*;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * The cluster's features through Kafka 4's kafka-features (FeatureCommand) and what the
 * transaction version changes for Kafka's 4.x producer (KIP-890 part 2):
 * describe shows transaction.version supported 0-2, finalized 2; a producer of 4
 * transactions ends at epoch 4 (one bump per transaction); `downgrade --feature
 * transaction.version=1` (a safe downgrade), then a new producer's 4 transactions leave its
 * epoch at 0; `upgrade --feature transaction.version=3` is refused (beyond the supported
 * range) and `upgrade ... =2` restores the default, after which the epoch bumps again.
 */
final class FeaturesCheck {
    static final String TOOL = "org.apache.kafka.tools.FeatureCommand";
    static final String TV = "transaction.version";
    static final int TRANSACTIONS = 4;

    static String features(String bootstrap, String... args) throws Exception {
        return Kafka4Tools.run(TOOL, "kafka-features", bootstrap, args);
    }

    static short finalized(Admin admin) throws Exception {
        FinalizedVersionRange r = admin.describeFeatures().featureMetadata()
                .get(30, TimeUnit.SECONDS).finalizedFeatures().get(TV);
        return r == null ? 0 : r.maxVersionLevel();
    }

    /** TRANSACTIONS committed transactions by a new producer of `id`: its epoch then. */
    static int epochAfterTransactions(String bootstrap, Admin admin, String topic, String id)
            throws Exception {
        try (KafkaProducer<String, String> p = producer(bootstrap, Map.of(
                ProducerConfig.TRANSACTIONAL_ID_CONFIG, id))) {
            p.initTransactions();
            for (int i = 0; i < TRANSACTIONS; i++) {
                p.beginTransaction();
                p.send(new ProducerRecord<>(topic, 0, null, id + "-" + i));
                p.commitTransaction();
            }
        }
        return admin.describeTransactions(List.of(id)).description(id)
                .get(30, TimeUnit.SECONDS).producerEpoch();
    }

    public static Map<String, Object> run(String bootstrap, String prefix) throws Exception {
        Map<String, Object> out = obj();
        String topic = prefix + "-features";
        try (Admin admin = admin(bootstrap)) {
            createTopic(admin, topic, 1, (short) 3, Map.of("min.insync.replicas", "2"));
            String described = features(bootstrap, "describe").replaceAll("\\s+", " ");
            check(described.contains("Feature: " + TV + " SupportedMinVersion: 0 "
                                     + "SupportedMaxVersion: 2 FinalizedVersionLevel: 2"),
                  "kafka-features describe: " + described);
            int bumped = epochAfterTransactions(bootstrap, admin, topic, prefix + "-tv2-a");
            check(bumped == TRANSACTIONS, "at transaction.version 2 the epoch after "
                  + TRANSACTIONS + " transactions is " + bumped + ", want " + TRANSACTIONS);

            features(bootstrap, "downgrade", "--feature", TV + "=1");
            waitFor(Duration.ofSeconds(30), "describeFeatures shows " + TV + " 1",
                    () -> { try { return finalized(admin) == 1; } catch (Exception e) { return false; } });
            int kept = epochAfterTransactions(bootstrap, admin, topic, prefix + "-tv1");
            check(kept == 0, "at transaction.version 1 the epoch after " + TRANSACTIONS
                  + " transactions is " + kept + ", want 0");

            String refused = Kafka4Tools.runFailing(TOOL, "kafka-features", bootstrap,
                    "upgrade", "--feature", TV + "=3");
            check(refused.contains("Invalid update version 3"), "upgrade to 3: " + refused);
            check(finalized(admin) == 1, "a refused upgrade changed " + TV);

            features(bootstrap, "upgrade", "--feature", TV + "=2");
            waitFor(Duration.ofSeconds(30), "describeFeatures shows " + TV + " 2",
                    () -> { try { return finalized(admin) == 2; } catch (Exception e) { return false; } });
            int again = epochAfterTransactions(bootstrap, admin, topic, prefix + "-tv2-b");
            check(again == TRANSACTIONS, "back at transaction.version 2 the epoch is " + again);
            out.put("epoch_at_tv2", bumped);
            out.put("epoch_at_tv1", kept);
        }
        return out;
    }
}
