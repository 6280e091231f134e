/* The Produce lane's contract, in one place: what nullbroker/handlers/_produce_lane.c (the
 * common Produce request answered whole) and nullbroker/net/_lane_reader.c (a plain-TCP
 * connection's reader) share with each other and with the Python they stand beside.
 *
 * 1. The reader calls the lane through a function pointer (ProduceLaneApi), so a request
 *    costs no Python call between the two. The lane's module publishes it as the capsule
 *    `c_api`, which handlers/produce_lane.py hands on (`c_interface()`); the reader takes it
 *    once, when it is made.
 * 2. Both act on the broker's own Python objects, never a copy, by attribute name. Every
 *    name they use is an entry of LANE_ATTRIBUTES below, and C spells an attribute only as
 *    ATTRIBUTE(owner, name): a name missing from the table does not compile, and
 *    tests/handlers/test_lane_contract.py checks each entry against the Python twin's objects
 *    (the owner class exists, the attribute is on its instances, holds the kind said, and
 *    can be set where C sets it), so a rename on the Python side fails a test instead of a
 *    request. A header, not a table generated from Python: the C compiler reads it as it
 *    is, the build needs no Python step, and the test reads the same lines.
 * 3. The lane accounts a request as dispatch does (stats.BrokerStats.served and the node's
 *    count): the entries whose access is `moved` on the accounts' owners are the fields it
 *    moves, and the test requires them to be exactly those a request served by the Python
 *    path moves.
 *
 * The names are interned once per module (intern_lane_attributes, at import): a request
 * looks none up, as before the table.
 */
#ifndef NULLBROKER_PRODUCE_LANE_H
#define NULLBROKER_PRODUCE_LANE_H

#include "../../codec/_kafka_wire.h"

#define PRODUCE_LANE_CAPSULE "nullbroker.handlers._produce_lane.c_api"

typedef struct {
    PyTypeObject *lane_type; /* a reader is made for a Lane only */
    /* The bytes of the leading request frames of `data` (size prefixes included) the lane
     * answers, their answers appended to `out` (freed with PyMem_Free); *failed set (an
     * exception set) if one failed. */
    Py_ssize_t (*answer_leading)(PyObject *lane, const uint8_t *data, Py_ssize_t length,
                                 PyObject *node, Output *out, int *failed);
} ProduceLaneApi;

/* The Python classes whose instances the C reads: O(owner, module). For the test and the
 * reader: the C needs no more than the owner's name in ATTRIBUTE. */
#define LANE_OWNERS(O)                                  \
    O(Topic, "nullbroker.state.topics")                 \
    O(Partition, "nullbroker.state.topics")             \
    O(PartitionCounters, "nullbroker.stats")            \
    O(PartitionSequences, "nullbroker.state.producers") \
    O(deque, "collections")                             \
    O(Faults, "nullbroker.cluster.faults")              \
    O(LogGrowth, "nullbroker.broker")                   \
    O(Cluster, "nullbroker.cluster.nodes")              \
    O(BrokerStats, "nullbroker.stats")                  \
    O(ApiStats, "nullbroker.stats")                     \
    O(LatencyHistogram, "nullbroker.stats")             \
    O(Wire, "nullbroker.net.connection")                \
    O(ReceiveBuffer, "nullbroker.net.host_loop")

/* Every attribute the C reads or writes: A(owner, attribute, kind, access).
 * kind: int, bool (compared with False), str, list (a list itself), dict, deque, memoryview,
 *   optional (compared with None: anything else sends the request the Python way), truth
 *   (tested for truth), method (called), or an owner (an object read on).
 * access: read; set (read, and a new value assigned); moved (a count added to, or an item
 *   of it); called. */
#define LANE_ATTRIBUTES(A)                                  \
    /* the lane: the topic and partition a batch goes to */ \
    A(Topic, name, str, read)                               \
    A(Topic, source, optional, read)                        \
    A(Topic, internal, bool, read)                          \
    A(Topic, max_message_bytes, int, read)                  \
    A(Topic, partitions, list, read)                        \
    A(Partition, retained, optional, read)                  \
    A(Partition, log_start_offset, int, read)               \
    A(Partition, log_end_offset, int, set)                  \
    A(Partition, produced, PartitionCounters, read)         \
    A(PartitionCounters, records, int, moved)               \
    A(PartitionCounters, bytes, int, moved)                 \
    A(PartitionCounters, batches, int, moved)               \
    /* an idempotent producer's sequences on the partition */ \
    A(PartitionSequences, epoch, int, read)                 \
    A(PartitionSequences, last_sequence, int, set)          \
    A(PartitionSequences, last_timestamp, int, set)         \
    A(PartitionSequences, recent, deque, read)              \
    A(deque, append, method, called)                        \
    /* when the lane steps aside, and whom it wakes */      \
    A(Faults, active, truth, read)                          \
    A(Cluster, followed, method, called)                    \
    A(LogGrowth, waiting, int, read)                        \
    A(LogGrowth, notify, method, called)                    \
    /* the accounts, as dispatch keeps them */              \
    A(BrokerStats, node_requests, dict, moved)              \
    A(BrokerStats, client_records, dict, moved)             \
    A(BrokerStats, apis, dict, read)                        \
    A(BrokerStats, api, method, called)                     \
    A(ApiStats, requests, int, moved)                       \
    A(ApiStats, latency, LatencyHistogram, read)            \
    A(LatencyHistogram, counts, list, moved)                \
    A(LatencyHistogram, sum_ns, int, moved)                 \
    /* the reader: the connection layer's */                \
    A(Wire, reads, int, moved)                              \
    A(ReceiveBuffer, view, memoryview, read)

/* The fields of producers.RecentBatch, a NamedTuple the lane makes as a tuple, in order. */
#define RECENT_BATCH_FIELDS(F) F(first_sequence) F(last_sequence) F(base_offset) F(timestamp)

/* The name dispatch accounts a Produce request under (codec.api_name(ApiKey.PRODUCE)). */
#define PRODUCE_API_NAME "Produce"

/* stats.MAX_CLIENT_IDS and stats.OTHER_CLIENT_IDS: the client ids whose records are counted
 * apart, and the key the records of the rest are counted under. */
#define MAX_CLIENT_IDS 10000
#define OTHER_CLIENT_IDS "(other client ids)"

enum {
#define RECENT_BATCH_INDEX(field) RECENT_BATCH_##field,
    RECENT_BATCH_FIELDS(RECENT_BATCH_INDEX)
#undef RECENT_BATCH_INDEX
    RECENT_BATCH_FIELD_COUNT
};

/* The interned names, one per entry of LANE_ATTRIBUTES. */
static struct {
#define LANE_ATTRIBUTE_FIELD(owner, attribute, kind, access) PyObject *owner##__##attribute;
    LANE_ATTRIBUTES(LANE_ATTRIBUTE_FIELD)
#undef LANE_ATTRIBUTE_FIELD
} lane_attributes;

/* An attribute's name, as the table declares it: ATTRIBUTE(Partition, log_end_offset). */
#define ATTRIBUTE(owner, attribute) (lane_attributes.owner##__##attribute)

/* Interns the table's names: once, when a module is imported. 0, or -1 with an exception. */
static inline int intern_lane_attributes(void) {
#define LANE_ATTRIBUTE_INTERN(owner, attribute, kind, access)                        \
    if (ATTRIBUTE(owner, attribute) == NULL &&                                        \
        (ATTRIBUTE(owner, attribute) = PyUnicode_InternFromString(#attribute)) == NULL) \
        return -1;
    LANE_ATTRIBUTES(LANE_ATTRIBUTE_INTERN)
#undef LANE_ATTRIBUTE_INTERN
    return 0;
}

/* An int attribute moved by `delta`: the lane's counters, the reader's count of reads. */
static inline int add_to_attribute(PyObject *object, PyObject *name, int64_t delta) {
    PyObject *old = PyObject_GetAttr(object, name);
    if (old == NULL) return -1;
    PyObject *added = PyLong_FromLongLong(delta);
    PyObject *sum = added == NULL ? NULL : PyNumber_Add(old, added);
    Py_DECREF(old);
    Py_XDECREF(added);
    if (sum == NULL) return -1;
    int result = PyObject_SetAttr(object, name, sum);
    Py_DECREF(sum);
    return result;
}

#endif
