import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * Kafka Streams' WordCount, as Kafka's quickstart writes it: the lines of the input topic split
 * into words, grouped by word (through the repartition topic APP-counts-repartition) and
 * counted in the state store "counts" (backed by the changelog topic APP-counts-changelog),
 * each word's count written to the output topic (key: the word, value: the count as a long).
 * Two subtopologies, so tasks 0_P (read and split) and 1_P (count) for each input partition
 * P. Driven by tests/clients/test_streams_groups.py.
 *
 * Arguments: bootstrap, application id, input topic, output topic, processing guarantee
 * (at_least_once | exactly_once_v2), group protocol (streams | classic), state dir, seconds,
 * and optionally the changelog's retention.bytes (a compacted topic: Kafka keeps it whole
 * whatever it says; nullbroker --retain keeps no more than it, cleaned), which also turns the
 * store's cache off, so that every count is written to the changelog.
 *
 * It prints one JSON line whenever its state or its active tasks change
 * ({"state":"RUNNING","active":["0_0","1_1"]}), one when it has restored a store's
 * partition from its changelog ({"restored":"APP-counts-changelog-1","records":N}), one when
 * a stream thread fails ({"error":"..."}), and a last one when it has closed
 * ({"closed":"NOT_RUNNING","clean":true}). A line "stop" on stdin (or its end) closes it,
 * leaving the group; so does a stream thread's failure, and `seconds` passing, so that no
 * run outlives its test. It exits 0 when it closed cleanly after running without error.
 */
public final class WordCount {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], applicationId = args[1], input = args[2], output = args[3];
        String guarantee = args[4], protocol = args[5], stateDir = args[6];
        long seconds = Long.parseLong(args[7]);
        Map<String, String> changelog = args.length > 8
            ? Map.of("retention.bytes", args[8]) : Map.of();

        Properties config = new Properties();
        config.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        config.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
        config.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, protocol);
        config.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        config.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        config.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        config.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        config.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        config.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        if (!changelog.isEmpty()) {
            config.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        }

        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> lines = builder.stream(input);
        lines.flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
            .groupBy((key, word) -> word)
            .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts")
                .withLoggingEnabled(changelog))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), config);
        CountDownLatch stop = new CountDownLatch(1);
        AtomicBoolean failed = new AtomicBoolean();
        streams.setUncaughtExceptionHandler(exception -> {
            say("{\"error\":" + quote(String.valueOf(exception)) + "}");
            failed.set(true);
            stop.countDown();
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.PENDING_ERROR) {
                failed.set(true);
                stop.countDown();
            }
        });
        streams.setGlobalStateRestoreListener(new Restored());
        watchStdin(stop);
        streams.start();

        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        String said = "";
        while (!stop.await(100, TimeUnit.MILLISECONDS) && System.nanoTime() < deadline) {
            String line = "{\"state\":" + quote(streams.state().name()) + ",\"active\":"
                + activeTasks(streams) + "}";
            if (!line.equals(said)) {
                say(line);
                said = line;
            }
        }
        boolean clean = streams.close(CloseOptions
            .groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
            .withTimeout(Duration.ofSeconds(30)));
        say("{\"closed\":" + quote(streams.state().name()) + ",\"clean\":" + clean + "}");
        System.exit(clean && !failed.get() ? 0 : 1);
    }

    /** The ids of this instance's active tasks, sorted, as a JSON list. */
    private static String activeTasks(KafkaStreams streams) {
        TreeSet<String> tasks = new TreeSet<>();
        for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
            for (TaskMetadata task : thread.activeTasks()) {
                tasks.add(quote(task.taskId().toString()));
            }
        }
        return "[" + String.join(",", tasks) + "]";
    }

    private static final class Restored implements StateRestoreListener {
        @Override
        public void onRestoreStart(TopicPartition partition, String store, long start, long end) {
        }

        @Override
        public void onBatchRestored(TopicPartition partition, String store, long end, long count) {
        }

        @Override
        public void onRestoreEnd(TopicPartition partition, String store, long restored) {
            say("{\"restored\":" + quote(partition.toString()) + ",\"records\":" + restored + "}");
        }
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static String quote(String text) {
        return "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")
            .replace("\r", "\\r").replace("\t", "\\t") + "\"";
    }

    /** A line "stop" or the end of stdin ends the application. */
    private static void watchStdin(CountDownLatch stop) {
        Thread watcher = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(
                    new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null && !line.trim().equals("stop")) {
                    // nothing else is said on stdin
                }
            } catch (Exception ignored) {
                // stdin gone: stop as well
            }
            stop.countDown();
        });
        watcher.setDaemon(true);
        watcher.start();
    }
}
