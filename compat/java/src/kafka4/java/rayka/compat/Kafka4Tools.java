package rayka.compat;

import static rayka.compat.Common.*;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Kafka 4's operator tools (this build's kafka-tools: ShareGroupCommand, ConsumerGroupCommand, FeatureCommand)
 * run as an operator runs them: a JVM of their own on this classpath, client logs at WARN.
 * A tool that does not end within 120 s or exits non-zero (zero, for `runFailing`) fails
 * the check; its output is logged (INFO) and returned.
 */
final class Kafka4Tools {
    private Kafka4Tools() {}

    static String run(String mainClass, String name, String bootstrap, String... args)
            throws Exception {
        return run(true, mainClass, name, bootstrap, args);
    }

    /** A tool that must FAIL (exit non-zero within 120 s): its output. */
    static String runFailing(String mainClass, String name, String bootstrap, String... args)
            throws Exception {
        return run(false, mainClass, name, bootstrap, args);
    }

    private static String run(boolean ok, String mainClass, String name, String bootstrap,
                              String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(
                ProcessHandle.current().info().command().orElse("java"),
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                "-cp", System.getProperty("java.class.path"), mainClass,
                "--bootstrap-server", bootstrap));
        cmd.addAll(List.of(args));
        String line = name + " " + String.join(" ", args);
        Process proc = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String output = new String(proc.getInputStream().readAllBytes());
        check(proc.waitFor(120, TimeUnit.SECONDS), line + " did not end");
        check((proc.exitValue() == 0) == ok, line + " exited " + proc.exitValue() + ": "
                + output.replace('\n', ' '));
        info(line + ": " + output.trim().replace('\n', '|'));
        return output;
    }

    /** The rows of a tool's table under the header naming `column` (cells split on blanks). */
    static List<Map<String, String>> table(String output, String column) {
        List<Map<String, String>> rows = new ArrayList<>();
        String[] header = null;
        for (String line : output.split("\n")) {
            String[] cells = line.trim().split("\\s+");
            if (header == null) {
                if (List.of(cells).contains(column)) header = cells;
                continue;
            }
            if (cells.length != header.length) continue;
            Map<String, String> row = new HashMap<>();
            for (int i = 0; i < cells.length; i++) row.put(header[i], cells[i]);
            rows.add(row);
        }
        check(header != null, "no " + column + " column in: " + output);
        return rows;
    }
}
