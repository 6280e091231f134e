import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * One member of a share group: Kafka's own KafkaShareConsumer, driven by
 * tests/clients/test_share_consumers.py so that the test sees what the client saw.
 *
 * Arguments: bootstrap, group, topic, role, seconds. Roles:
 *   accept           implicit acknowledgement (the client's default): each poll accepts the last
 *   accept-explicit  explicit mode, ACCEPT each record, commitSync after each poll
 *   release-tenth    explicit mode, RELEASE a record whose offset is a multiple of ten at its
 *                    first delivery, ACCEPT every other, commitSync after each poll
 *   hold             explicit mode, print the first records received and acknowledge nothing,
 *                    until killed (a member that dies holding locks)
 *
 * Each non-empty poll prints one JSON line, a list of [partition, offset, delivery count,
 * action] with action "A" (accepted), "R" (released) or "H" (held). A line "stop" on stdin
 * (or its end) ends the member: its acknowledgements committed, the consumer closed. It also
 * stops by itself after `seconds`, so that no run outlives its test.
 */
public final class ShareMember {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2], role = args[3];
        long deadline = System.nanoTime() + Long.parseLong(args[4]) * 1_000_000_000L;
        Properties config = new Properties();
        config.put("bootstrap.servers", bootstrap);
        config.put("group.id", group);
        config.put("client.id", "share-member-" + role);
        if (!role.equals("accept")) {
            config.put("share.acknowledgement.mode", "explicit");
        }
        KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(
            config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        watchStdin(consumer);
        consumer.subscribe(List.of(topic));
        try {
            while (System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                StringBuilder line = new StringBuilder("[");
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    int count = record.deliveryCount().orElse((short) -1);
                    String action = act(consumer, role, record, count);
                    if (line.length() > 1) {
                        line.append(',');
                    }
                    line.append('[').append(record.partition()).append(',')
                        .append(record.offset()).append(',').append(count)
                        .append(",\"").append(action).append("\"]");
                }
                System.out.println(line.append(']'));
                System.out.flush();
                if (role.equals("hold")) {
                    Thread.sleep(Long.MAX_VALUE); // killed here, holding its records
                }
                if (!role.equals("accept")) {
                    consumer.commitSync();
                }
            }
        } catch (WakeupException stopped) {
            // asked to stop: what was acknowledged is committed below
        }
        if (!role.equals("hold")) {
            consumer.commitSync(); // in implicit mode, accepts the last poll's records
        }
        consumer.close();
    }

    private static String act(KafkaShareConsumer<byte[], byte[]> consumer, String role,
                              ConsumerRecord<byte[], byte[]> record, int count) {
        switch (role) {
            case "hold":
                return "H";
            case "accept":
                return "A"; // accepted by the next poll or commit, implicitly
            case "release-tenth":
                if (record.offset() % 10 == 0 && count == 1) {
                    consumer.acknowledge(record, AcknowledgeType.RELEASE);
                    return "R";
                }
                consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                return "A";
            default:
                consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                return "A";
        }
    }

    /** A line "stop" or the end of stdin wakes the consumer from its poll, to end. */
    private static void watchStdin(KafkaShareConsumer<byte[], byte[]> consumer) {
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
            consumer.wakeup();
        });
        watcher.setDaemon(true);
        watcher.start();
    }
}
