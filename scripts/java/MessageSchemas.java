import java.lang.reflect.Field;

/**
 * Prints Apache Kafka's message schemas, version by version, as the kafka-clients jar on the
 * classpath defines them: for each class named (ApiVersionsRequestData, ...), a line
 * "vN: {field:TYPE,...}" per version, from the class's SCHEMAS. scripts/kafka-message-schemas
 * runs it; codec/schemas' tests compare the codec's own schema classes with it. With
 * --api-keys, instead, a line "KEY NAME" for each API a broker listener serves (ApiKeys), the
 * list codec.ApiKey is checked against.
 */
public final class MessageSchemas {
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
        for (String name : args) {
            Class<?> message = Class.forName("org.apache.kafka.common.message." + name);
            Field field = message.getField("SCHEMAS");
            Object[] schemas = (Object[]) field.get(null);
            System.out.println("== " + name);
            for (int version = 0; version < schemas.length; version++) {
                Object schema = schemas[version];
                System.out.println("v" + version + ": " + (schema == null ? "null" : schema));
            }
        }
    }
}
