import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider;

/**
 * The test suite's Kafka 4.4.0 client-telemetry plugin (KIP-714, KIP-1217): with it in
 * metric.reporters, Kafka advertises GetTelemetrySubscriptions and PushTelemetry, as a stock
 * broker does not, so that clients push to it as they push to nullbroker.
 *
 * It keeps nothing: Kafka's answers then depend only on its ClientMetricsManager. Like a
 * plugin that reads OTLP (and like nullbroker, which decodes every push), it refuses a payload
 * that is plainly not an OTLP MetricsData: not protobuf's wire format, or without a
 * ResourceMetrics (field 1). Kafka answers INVALID_RECORD to a plugin that throws. One line
 * a push goes to Kafka's log, for tests that look for a client's pushes there.
 */
public final class TelemetrySink implements MetricsReporter, ClientTelemetryExporterProvider {
    private static final int RESOURCE_METRICS = 1;
    private static final int VARINT = 0, I64 = 1, LEN = 2, I32 = 5;

    @Override
    public void configure(Map<String, ?> configs) {}

    @Override
    public void init(List<KafkaMetric> metrics) {}

    @Override
    public void metricChange(KafkaMetric metric) {}

    @Override
    public void metricRemoval(KafkaMetric metric) {}

    @Override
    public void close() {}

    @Override
    public ClientTelemetryExporter clientTelemetryExporter() {
        return (context, payload) -> {
            ByteBuffer data = payload.data();
            int size = data.remaining();
            if (size > 0 && !resourceMetricsIn(data.duplicate())) {
                throw new IllegalArgumentException("not OTLP MetricsData (" + size + " bytes)");
            }
            System.out.println("TelemetrySink: " + payload.clientInstanceId() + " pushed " + size
                + " bytes" + (payload.isTerminating() ? ", terminating" : ""));
        };
    }

    /** Whether `data` is a protobuf message (each field's tag, wire type and length in bounds)
     * with at least one ResourceMetrics. */
    private static boolean resourceMetricsIn(ByteBuffer data) {
        boolean found = false;
        try {
            while (data.hasRemaining()) {
                long tag = varint(data);
                int field = (int) (tag >>> 3);
                int wireType = (int) (tag & 7);
                long skip;
                switch (wireType) {
                    case VARINT: varint(data); skip = 0; break;
                    case I64: skip = 8; break;
                    case I32: skip = 4; break;
                    case LEN: skip = varint(data); break;
                    default: return false;
                }
                if (field < 1 || tag >>> 32 != 0 || skip < 0 || skip > data.remaining()) return false;
                data.position(data.position() + (int) skip);
                found |= field == RESOURCE_METRICS && wireType == LEN;
            }
        } catch (BufferUnderflowException | IllegalArgumentException cutShort) {
            return false;
        }
        return found;
    }

    /** A varint: at most ten bytes, the last without its high bit. */
    private static long varint(ByteBuffer data) {
        long value = 0;
        for (int shift = 0; shift < 70; shift += 7) {
            byte b = data.get();
            value |= (long) (b & 0x7f) << shift;
            if (b >= 0) return value;
        }
        throw new IllegalArgumentException("a varint longer than ten bytes");
    }
}
