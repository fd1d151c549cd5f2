package rayka.compat;

import static rayka.compat.Common.*;

import java.util.Map;

/**
 * Checks of Kafka's Java client against a cluster, one per sub-command:
 *
 *   idempotent BOOTSTRAP PREFIX   idempotent acks=all producer through a leader kill
 *   group BOOTSTRAP PREFIX MODE   two consumers of one group through a coordinator kill
 *                                 (MODE: range | cooperative | static)
 *   txn BOOTSTRAP PREFIX          transactions: commit/abort, consume-transform-produce
 *   txnkill BOOTSTRAP PREFIX      transactions through a transaction-coordinator kill
 *   admin BOOTSTRAP PREFIX        the Admin calls a tool uses, each asserted
 *   share BOOTSTRAP PREFIX        KIP-932 share groups (ShareCheck, in 4.x builds only)
 *   cgtool BOOTSTRAP PREFIX       Kafka 4's kafka-consumer-groups on a KIP-848 group (4.x)
 *   features BOOTSTRAP PREFIX     kafka-features and the transaction version it sets (4.x)
 *
 * Protocol with the driver (compat/java_client.py), one line each on stdout:
 *   KILL <broker id>   the driver hard-kills that broker and answers a line on stdin
 *   INFO <text>        progress, for the log
 *   SUB <json>         one sub-check's result (admin)
 *   RESULT <json>      the figures of a passed check; exit code 0
 *   FAIL <reason>      one line: why the check failed; exit code 1
 */
public final class JavaClientCheck {
    /** `name`.run, found at run time: src/kafka4 is compiled against kafka-clients 4.x only. */
    @SuppressWarnings("unchecked")
    static Map<String, Object> kafka4Check(String name, String bootstrap, String prefix)
            throws Exception {
        Class<?> check;
        try {
            check = Class.forName("rayka.compat." + name);
        } catch (ClassNotFoundException e) {
            throw new CheckFailed("this build has no " + name + " (kafka-clients " + clientVersion()
                                  + "; built without -Dkafka4)");
        }
        try {
            return (Map<String, Object>) check.getMethod("run", String.class, String.class)
                    .invoke(null, bootstrap, prefix);
        } catch (java.lang.reflect.InvocationTargetException e) {
            if (e.getCause() instanceof Exception ex) throw ex;
            throw e;
        }
    }

    public static void main(String[] args) {
        int code;
        try {
            if (args.length < 3) throw new CheckFailed("usage: idempotent|group|txn|admin BOOTSTRAP PREFIX [MODE]");
            String bootstrap = args[1], prefix = args[2];
            Map<String, Object> result = switch (args[0]) {
                case "idempotent" -> IdempotentCheck.run(bootstrap, prefix);
                case "group" -> GroupCheck.run(bootstrap, prefix, args.length > 3 ? args[3] : "range");
                case "txn" -> TxnCheck.run(bootstrap, prefix);
                case "txnkill" -> TxnKillCheck.run(bootstrap, prefix);
                case "admin" -> AdminCheck.run(bootstrap, prefix);
                case "share" -> kafka4Check("ShareCheck", bootstrap, prefix);
                case "cgtool" -> kafka4Check("ConsumerGroupsToolCheck", bootstrap, prefix);
                case "features" -> kafka4Check("FeaturesCheck", bootstrap, prefix);
                default -> throw new CheckFailed("unknown check " + args[0]);
            };
            result.put("client", clientVersion());
            say("RESULT " + json(result));
            code = 0;
        } catch (CheckFailed e) {
            say("FAIL " + e.getMessage().replace('\n', ' '));
            code = 1;
        } catch (Throwable e) {
            e.printStackTrace();
            say("FAIL " + describe(e));
            code = 1;
        }
        System.out.flush();
        // client threads (a stuck producer/consumer after a failure) must not keep the JVM up
        Runtime.getRuntime().halt(code);
    }
}
