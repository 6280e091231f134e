// Several Kafka producers in one JVM, each sending its records as fast as it can to a topic
// of its own, as kafka-producer-perf-test does (a fixed random payload, no key, the producer's
// default configs), then closing: perf.telemetry_cost's load with the clients' start-up and
// their telemetry paths paid once, not once per producer (python -m perf.telemetry_cost
// --one-jvm). Arguments: bootstrap producers records recordSize topicPrefix.
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class ManyProducers {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        int producers = Integer.parseInt(args[1]);
        long records = Long.parseLong(args[2]);
        int recordSize = Integer.parseInt(args[3]);
        String prefix = args[4];
        byte[] payload = new byte[recordSize];
        new Random(0).nextBytes(payload);
        AtomicLong failed = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        for (int index = 0; index < producers; index++) {
            Properties props = new Properties();
            props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            props.put(ProducerConfig.CLIENT_ID_CONFIG, prefix + "-producer-" + index);
            String topic = prefix + "-" + index;
            Thread thread = new Thread(() -> {
                try (KafkaProducer<byte[], byte[]> producer =
                         new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
                    for (long sent = 0; sent < records; sent++) {
                        producer.send(new ProducerRecord<>(topic, payload), (metadata, error) -> {
                            if (error != null) failed.incrementAndGet();
                        });
                    }
                    producer.flush();
                }
            });
            thread.start();
            threads.add(thread);
        }
        for (Thread thread : threads) thread.join();
        if (failed.get() > 0) {
            System.err.println(failed.get() + " records failed");
            System.exit(1);
        }
    }
}
