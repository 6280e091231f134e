import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.MessageUtil;

/**
 * Prints Apache Kafka's message schemas, version by version, as the kafka-clients jar on the
 * classpath defines them: for each class named (ApiVersionsRequestData, ...), a line
 * "vN: {field:TYPE,...}" per version, from the class's SCHEMAS. scripts/kafka-message-schemas
 * runs it; codec/schemas' tests compare the codec's own schema classes with it. With
 * --api-keys, instead, a line "KEY NAME" for each API a broker listener serves (ApiKeys), the
 * list codec.ApiKey is checked against.
 *
 * With --serialize, Kafka's own serializer, for codec/schemas' tests to compare the codec's
 * bytes with: each line read from stdin, "DATA_CLASS VERSION JSON" (the JSON as the class's
 * generated JsonConverter reads it), is answered, when read, by a line of the message's bytes
 * at that version in hex (MessageUtil, as the Java client and broker write them), or by
 * "error: ..." when the converter or the serializer refuses it.
 */
public final class MessageSchemas {
    private static final String MESSAGES = "org.apache.kafka.common.message.";

    public static void main(String[] args) throws Exception {
        if (args.length == 1 && args[0].equals("--api-keys")) {
            for (org.apache.kafka.common.protocol.ApiKeys key
                    : org.apache.kafka.common.protocol.ApiKeys.values()) {
                if (key.inScope(org.apache.kafka.common.message.ApiMessageType.ListenerType.BROKER)) {
                    System.out.println(key.id + " " + key.name);
                }
            }
            return;
        }
        if (args.length == 1 && args[0].equals("--serialize")) {
            serialize();
            return;
        }
        for (String name : args) {
            Class<?> message = Class.forName(MESSAGES + name);
            Field field = message.getField("SCHEMAS");
            Object[] schemas = (Object[]) field.get(null);
            System.out.println("== " + name);
            for (int version = 0; version < schemas.length; version++) {
                Object schema = schemas[version];
                System.out.println("v" + version + ": " + (schema == null ? "null" : schema));
            }
        }
    }

    private static void serialize() throws Exception {
        ObjectMapper json = new ObjectMapper();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] parts = line.split(" ", 3);
            try {
                short version = Short.parseShort(parts[1]);
                Object message = Class.forName(MESSAGES + parts[0] + "JsonConverter")
                    .getMethod("read", JsonNode.class, short.class)
                    .invoke(null, json.readTree(parts[2]), version);
                ByteBuffer buffer = MessageUtil.toByteBufferAccessor((Message) message, version).buffer();
                byte[] bytes = new byte[buffer.remaining()];
                buffer.get(bytes);
                out.println(HexFormat.of().formatHex(bytes));
            } catch (Exception error) {
                Throwable cause = error instanceof InvocationTargetException ? error.getCause() : error;
                out.println("error: " + String.valueOf(cause).replace('\n', ' '));
            }
            out.flush();
        }
    }
}
