/* The common Produce request answered whole in C: decoded, checked, appended to the null
 * sink, accounted and answered without running a line of Python (nullbroker/handlers/produce_lane.py
 * says when a connection uses it, and what it bought).
 *
 * The lane answers a request only when handlers/produce.py would take it down its common
 * path: a non-transactional request with acks, every partition's one batch
 * accepted (known topic, not internal, a partition this node leads, no source, nothing
 * retained, magic v2, no larger than the topic's max.message.bytes, counts that agree, no
 * control or transactional batch, the CRC when --verify-crc
 * asks, the next sequence of an idempotent producer already known on the partition), no
 * fault in force. It decides that
 * before it changes anything; for any other request it answers nothing and the Python
 * path answers it, as it answers every other API, with its own errors and messages.
 *
 * The state it changes is the broker's own, read and written through the attributes the
 * Python code uses (the partitions' offsets and counters, the producers' sequences, the
 * Produce request count and latency histogram): one broker state, never a copy. Those
 * attributes are named once, in produce_lane.h's table, and tests/handlers/test_lane_contract.py
 * checks the table against the Python objects. The lane only ever runs in the broker's one
 * thread. tests/handlers/test_produce_lane.py proves that both paths give the same answers and
 * leave the same state, accounts included.
 */
#include "produce_lane.h"
#include <structmember.h>
#include <time.h>

#define PRODUCE_KEY 0 /* codec.ApiKey.PRODUCE: tests/codec/test_api_keys.py checks every _KEY here */
#define FIRST_VERSION 3
#define FIRST_FLEXIBLE_VERSION 9
#define LAST_VERSION 13
#define FIRST_BY_ID_VERSION 13 /* topics named by their 16-byte id, not their name */
#define TOPIC_ID_BYTES 16
#define MIN_REQUEST_FRAME_BYTES 10
#define BATCH_HEADER_BYTES 61
#define ATTRIBUTES_AT 21
#define TRANSACTIONAL_OR_CONTROL 0x30
#define SEQUENCE_MODULO 2147483648LL /* 2**31: sequences wrap like Kafka's */
#define MAX_PARTITIONS 64            /* a request with more goes the Python way */
#define MAX_TOPICS MAX_PARTITIONS
#define MAX_BOUNDS 128

static PyObject *s_produce_api; /* PRODUCE_API_NAME, interned */
static PyObject *s_other_client_ids; /* OTHER_CLIENT_IDS, interned */
static PyObject *one; /* the int 1 */

typedef struct {
    PyObject_HEAD
    PyObject *topics;        /* dict: name -> topics.Topic (the registry's own) */
    PyObject *topics_by_id;  /* dict: the id's 16 bytes -> topics.Topic (the registry's own) */
    PyObject *sequences;     /* dict: (producer id, topic, partition) -> PartitionSequences */
    PyObject *recent_type;   /* producers.RecentBatch, a NamedTuple */
    /* The accounts (stats.BrokerStats'), read once: reset_counts zeroes them in place. */
    PyObject *node_requests; /* BrokerStats.node_requests: node id -> requests */
    PyObject *apis;          /* BrokerStats.apis: API name -> ApiStats */
    PyObject *api_stats;     /* BrokerStats.api: makes an API's ApiStats on its first request */
    PyObject *client_records; /* BrokerStats.client_records: client id -> records appended */
    PyObject *client_key;    /* the last client id counted, as a str: a producer sends one */
    PyObject *faults;        /* faults.Faults: the lane steps aside while `active` is not empty */
    PyObject *log_growth;    /* broker.LogGrowth: where Fetch requests wait for a log to grow */
    PyObject *crc32c;        /* the CRC-32C function, or None when CRCs are not verified */
    PyObject *cluster;       /* cluster.Cluster of several nodes; None: one node leads all */
    int min_version, max_version;
    Py_ssize_t max_frame_bytes;
    Py_ssize_t bound_count;
    int64_t bounds[MAX_BOUNDS]; /* stats.LATENCY_BOUNDS_NS */
} Lane;

static PyTypeObject LaneType;

typedef struct {
    PyObject *partition; /* topics.Partition */
    PyObject *state;     /* producers.PartitionSequences; NULL: the batch is not idempotent */
    int32_t index;
    int32_t record_count;
    int32_t length;
    int32_t first_sequence, last_sequence;
    int64_t max_timestamp; /* the batch header's: DescribeProducers' last_timestamp, and a
                            * retry's log append time */
    int64_t base_offset; /* the partition's log end before the batch */
    int64_t log_start;
} PlannedBatch;

typedef struct {
    PyObject *name;  /* the topic's name as the request spells it */
    const uint8_t *name_bytes; /* or, from v13, the topic id's 16 bytes */
    Py_ssize_t name_size;
    Py_ssize_t first, count; /* its batches in PlannedRequest.batches */
} PlannedTopic;

typedef struct {
    int version;
    int32_t correlation_id;
    const uint8_t *client_id; /* the header's, ASCII (NULL: null) */
    Py_ssize_t client_id_size;
    PyObject *node; /* the node id the client connected to (borrowed) */
    Py_ssize_t topic_count, batch_count;
    PlannedTopic topics[MAX_TOPICS];
    PlannedBatch batches[MAX_PARTITIONS];
} PlannedRequest;

static void release_plan(PlannedRequest *plan) {
    for (Py_ssize_t i = 0; i < plan->topic_count; i++) Py_CLEAR(plan->topics[i].name);
    for (Py_ssize_t i = 0; i < plan->batch_count; i++) {
        Py_CLEAR(plan->batches[i].partition);
        Py_CLEAR(plan->batches[i].state);
    }
    plan->topic_count = plan->batch_count = 0;
}

/* An attribute that must hold an int fitting 64 bits: 1 and the value, 0 if it does not
 * (the Python way), -1 on an error. */
static int int_attribute(PyObject *object, PyObject *name, int64_t *value) {
    PyObject *number = PyObject_GetAttr(object, name);
    if (number == NULL) return -1;
    int overflow = 0;
    long long read = PyLong_Check(number) ? PyLong_AsLongLongAndOverflow(number, &overflow) : 0;
    int fits = PyLong_Check(number) && !overflow && !(read == -1 && PyErr_Occurred());
    Py_DECREF(number);
    if (PyErr_Occurred()) return -1;
    *value = read;
    return fits;
}

static int set_int_attribute(PyObject *object, PyObject *name, int64_t value) {
    PyObject *number = PyLong_FromLongLong(value);
    if (number == NULL) return -1;
    int result = PyObject_SetAttr(object, name, number);
    Py_DECREF(number);
    return result;
}

/* 1 if the batch's CRC-32C (attributes to the end) matches, 0 if not, -1 on an error. */
static int crc_matches(Lane *lane, const uint8_t *batch, int32_t length) {
    PyObject *view = PyMemoryView_FromMemory((char *)batch + ATTRIBUTES_AT,
                                             length - ATTRIBUTES_AT, PyBUF_READ);
    if (view == NULL) return -1;
    PyObject *crc = PyObject_CallOneArg(lane->crc32c, view);
    Py_DECREF(view);
    if (crc == NULL) return -1;
    unsigned long value = PyLong_AsUnsignedLong(crc);
    Py_DECREF(crc);
    if (value == (unsigned long)-1 && PyErr_Occurred()) return -1;
    return value == be32(batch + 17);
}

/* Whether an idempotent batch is its producer's next on a partition it has written to in
 * this epoch (1), with its sequence state in *state; 0 for anything else (a first batch,
 * another epoch, a duplicate, a gap: the Python way), -1 on an error. */
static int next_in_sequence(Lane *lane, PyObject *name, PlannedBatch *batch, int64_t producer_id,
                            int16_t epoch, PyObject **state) {
    PyObject *key = PyTuple_New(3);
    if (key == NULL) return -1;
    PyTuple_SET_ITEM(key, 0, PyLong_FromLongLong(producer_id));
    PyTuple_SET_ITEM(key, 1, Py_NewRef(name));
    PyTuple_SET_ITEM(key, 2, PyLong_FromLong(batch->index));
    if (PyTuple_GET_ITEM(key, 0) == NULL || PyTuple_GET_ITEM(key, 2) == NULL) {
        Py_DECREF(key);
        return -1;
    }
    PyObject *found = PyDict_GetItemWithError(lane->sequences, key);
    Py_DECREF(key);
    if (found == NULL) return PyErr_Occurred() ? -1 : 0;
    Py_INCREF(found);
    int64_t state_epoch, last_sequence;
    int read = int_attribute(found, ATTRIBUTE(PartitionSequences, epoch), &state_epoch);
    if (read == 1)
        read = int_attribute(found, ATTRIBUTE(PartitionSequences, last_sequence), &last_sequence);
    if (read != 1 || state_epoch != epoch) goto other;
    PyObject *recent = PyObject_GetAttr(found, ATTRIBUTE(PartitionSequences, recent));
    if (recent == NULL) goto failed;
    PyObject *iterator = PyObject_GetIter(recent);
    Py_DECREF(recent);
    if (iterator == NULL) goto failed;
    int duplicate = 0;
    PyObject *item;
    while (!duplicate && (item = PyIter_Next(iterator)) != NULL) {
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != RECENT_BATCH_FIELD_COUNT) {
            duplicate = 1; /* not what the lane knows: the Python way */
        } else {
            long first = PyLong_AsLong(PyTuple_GET_ITEM(item, RECENT_BATCH_first_sequence));
            long last = PyLong_AsLong(PyTuple_GET_ITEM(item, RECENT_BATCH_last_sequence));
            duplicate = first == batch->first_sequence && last == batch->last_sequence;
        }
        Py_DECREF(item);
    }
    Py_DECREF(iterator);
    if (PyErr_Occurred()) goto failed;
    if (duplicate) goto other;
    if (batch->first_sequence != (last_sequence + 1) % SEQUENCE_MODULO) goto other;
    *state = found;
    return 1;
other:
    Py_DECREF(found);
    return PyErr_Occurred() ? -1 : 0;
failed:
    Py_DECREF(found);
    return -1;
}

/* One partition's batch at the cursor: planned (1), the Python way (0), or an error (-1). */
static int plan_batch(Lane *lane, Cursor *c, int flexible, PlannedTopic *topic,
                      PyObject *partitions, PyObject *followed, int64_t max_bytes,
                      PlannedRequest *plan) {
    if (plan->batch_count == MAX_PARTITIONS) return 0;
    int32_t index = read_i32(c);
    Py_ssize_t size;
    if (flexible) {
        uint64_t encoded = read_uvarint(c);
        if (encoded == 0 || encoded - 1 > (uint64_t)(c->end - c->pos)) return 0; /* null */
        size = (Py_ssize_t)(encoded - 1);
    } else {
        size = read_i32(c);
        if (size < 0) return 0; /* null */
    }
    if (!need(c, size)) return 0;
    const uint8_t *records = c->data + c->pos;
    c->pos += size;
    if (flexible) skip_tagged_fields(c);
    if (c->failed || index < 0 || index >= PyList_GET_SIZE(partitions)) return 0;
    if (followed != NULL && PySet_GET_SIZE(followed)) {
        PyObject *key = PyLong_FromLong(index);
        int elsewhere = key == NULL ? -1 : PySet_Contains(followed, key);
        Py_XDECREF(key);
        if (elsewhere) return elsewhere < 0 ? -1 : 0; /* led by another node: the Python way */
    }
    PyObject *partition = PyList_GET_ITEM(partitions, index);
    for (Py_ssize_t i = 0; i < plan->batch_count; i++)
        if (plan->batches[i].partition == partition) return 0; /* twice in one request */
    /* The batch header, as null_sink.append checks it. */
    if (size < BATCH_HEADER_BYTES || records[16] != 2) return 0;
    int32_t length = (int32_t)be32(records + 8) + 12;
    int32_t record_count = (int32_t)be32(records + 57);
    int32_t last_offset_delta = (int32_t)be32(records + 23);
    int16_t attributes = (int16_t)((records[21] << 8) | records[22]);
    if (length != size || length > max_bytes || record_count <= 0 ||
        last_offset_delta != record_count - 1 || (attributes & TRANSACTIONAL_OR_CONTROL))
        return 0; /* a batch over max.message.bytes too: MESSAGE_TOO_LARGE is Python's */
    if (lane->crc32c != Py_None) {
        int matches = crc_matches(lane, records, length);
        if (matches <= 0) return matches;
    }
    PlannedBatch *batch = &plan->batches[plan->batch_count];
    batch->index = index;
    batch->record_count = record_count;
    batch->length = length;
    batch->state = NULL;
    batch->partition = Py_NewRef(partition);
    plan->batch_count++; /* released with the plan from here on */
    PyObject *retained = PyObject_GetAttr(batch->partition, ATTRIBUTE(Partition, retained));
    if (retained == NULL) return -1;
    Py_DECREF(retained);
    if (retained != Py_None) return 0; /* --retain keeps the batch: the Python way */
    int read = int_attribute(batch->partition, ATTRIBUTE(Partition, log_end_offset),
                             &batch->base_offset);
    if (read == 1)
        read = int_attribute(batch->partition, ATTRIBUTE(Partition, log_start_offset),
                             &batch->log_start);
    if (read != 1) return read;
    if (batch->base_offset > INT64_MAX - record_count) return 0;
    int64_t producer_id = (int64_t)be64(records + 43);
    int16_t epoch = (int16_t)((records[51] << 8) | records[52]);
    int32_t base_sequence = (int32_t)be32(records + 53);
    if (producer_id < 0 || base_sequence == -1) return 1; /* not idempotent */
    batch->first_sequence = base_sequence;
    batch->max_timestamp = (int64_t)be64(records + 35);
    int64_t last = ((int64_t)base_sequence + last_offset_delta) % SEQUENCE_MODULO;
    batch->last_sequence = (int32_t)(last < 0 ? last + SEQUENCE_MODULO : last);
    return next_in_sequence(lane, topic->name, batch, producer_id, epoch, &batch->state);
}

static int plan_partitions(Lane *lane, Cursor *c, int flexible, PlannedTopic *topic,
                           PyObject *found, PlannedRequest *plan);

/* One topic at the cursor and its batches. */
static int plan_topic(Lane *lane, Cursor *c, int flexible, PlannedRequest *plan) {
    if (plan->topic_count == MAX_TOPICS) return 0;
    Py_ssize_t size;
    PyObject *found;
    if (plan->version >= FIRST_BY_ID_VERSION) {
        if (!need(c, TOPIC_ID_BYTES)) return 0;
        PlannedTopic *topic = &plan->topics[plan->topic_count];
        topic->name_bytes = c->data + c->pos;
        topic->name_size = TOPIC_ID_BYTES;
        topic->first = plan->batch_count;
        topic->count = 0;
        c->pos += TOPIC_ID_BYTES;
        PyObject *id = PyBytes_FromStringAndSize((const char *)topic->name_bytes, TOPIC_ID_BYTES);
        if (id == NULL) return -1;
        found = PyDict_GetItemWithError(lane->topics_by_id, id);
        Py_DECREF(id);
        if (found == NULL) return PyErr_Occurred() ? -1 : 0; /* unknown: the Python way */
        topic->name = PyObject_GetAttr(found, ATTRIBUTE(Topic, name));
        if (topic->name == NULL) return -1;
        plan->topic_count++;
        return plan_partitions(lane, c, flexible, topic, found, plan);
    }
    if (flexible) {
        uint64_t encoded = read_uvarint(c);
        if (encoded == 0 || encoded - 1 > (uint64_t)(c->end - c->pos)) return 0;
        size = (Py_ssize_t)(encoded - 1);
    } else {
        size = read_i16(c);
    }
    if (size < 0 || !need(c, size)) return 0;
    PlannedTopic *topic = &plan->topics[plan->topic_count];
    topic->name_bytes = c->data + c->pos;
    topic->name_size = size;
    topic->first = plan->batch_count;
    topic->count = 0;
    topic->name = PyUnicode_DecodeUTF8((const char *)topic->name_bytes, size, "strict");
    if (topic->name == NULL) {
        PyErr_Clear(); /* not UTF-8: the Python decoder says so */
        return 0;
    }
    plan->topic_count++;
    c->pos += size;
    found = PyDict_GetItemWithError(lane->topics, topic->name);
    if (found == NULL) return PyErr_Occurred() ? -1 : 0; /* unknown, or auto-created */
    return plan_partitions(lane, c, flexible, topic, found, plan);
}

/* The partitions of a known topic at the cursor, and their batches. */
static int plan_partitions(Lane *lane, Cursor *c, int flexible, PlannedTopic *topic,
                           PyObject *found, PlannedRequest *plan) {
    PyObject *source = PyObject_GetAttr(found, ATTRIBUTE(Topic, source));
    if (source == NULL) return -1;
    Py_DECREF(source);
    if (source != Py_None) return 0; /* read-only: refused the Python way */
    PyObject *internal = PyObject_GetAttr(found, ATTRIBUTE(Topic, internal));
    if (internal == NULL) return -1;
    Py_DECREF(internal);
    if (internal != Py_False) return 0; /* Kafka's own topic: refused the Python way */
    int64_t max_bytes; /* Topic.max_message_bytes, kept in step with the configs */
    int read = int_attribute(found, ATTRIBUTE(Topic, max_message_bytes), &max_bytes);
    if (read != 1) return read;
    PyObject *partitions = PyObject_GetAttr(found, ATTRIBUTE(Topic, partitions));
    if (partitions == NULL) return -1;
    int result = PyList_CheckExact(partitions);
    PyObject *followed = NULL; /* the partitions this node does not lead, on a cluster */
    if (result && lane->cluster != Py_None) {
        PyObject *count = PyLong_FromSsize_t(PyList_GET_SIZE(partitions));
        followed = count == NULL ? NULL
                                 : PyObject_CallMethodObjArgs(lane->cluster,
                                                              ATTRIBUTE(Cluster, followed),
                                                              plan->node, topic->name, count,
                                                              NULL);
        Py_XDECREF(count);
        if (followed != NULL && !PyAnySet_Check(followed)) {
            Py_CLEAR(followed);
            PyErr_SetString(PyExc_TypeError, "Cluster.followed must return a set");
        }
        if (followed == NULL) {
            Py_DECREF(partitions);
            return -1;
        }
    }
    uint64_t count = 0;
    if (result && flexible) {
        count = read_uvarint(c);
        if (count == 0) result = 0; /* null */
        count -= 1;
    } else if (result) {
        int32_t signed_count = read_i32(c);
        if (signed_count < 0) result = 0;
        count = (uint64_t)signed_count;
    }
    for (uint64_t i = 0; result == 1 && i < count; i++) {
        result = plan_batch(lane, c, flexible, topic, partitions, followed, max_bytes, plan);
        topic->count = plan->batch_count - topic->first;
    }
    Py_XDECREF(followed);
    Py_DECREF(partitions);
    if (result == 1 && flexible) skip_tagged_fields(c);
    return result == 1 && c->failed ? 0 : result;
}

/* A whole request frame (no size prefix): planned (1), the Python way (0), an error (-1). */
static int plan_request(Lane *lane, const uint8_t *data, Py_ssize_t size, PlannedRequest *plan) {
    Cursor c = {data, 0, size, 0};
    int16_t key = read_i16(&c);
    int16_t version = read_i16(&c);
    plan->correlation_id = read_i32(&c);
    plan->version = version;
    if (c.failed || key != PRODUCE_KEY || version < lane->min_version ||
        version > lane->max_version || version < FIRST_VERSION || version > LAST_VERSION)
        return 0;
    int flexible = version >= FIRST_FLEXIBLE_VERSION;
    int16_t client_id_size = read_i16(&c);
    if (client_id_size < -1 || !need(&c, client_id_size > 0 ? client_id_size : 0)) return 0;
    for (Py_ssize_t i = 0; i < client_id_size; i++)
        if (data[c.pos + i] & 0x80) return 0; /* not ASCII: the Python decoder judges it */
    plan->client_id = client_id_size >= 0 ? data + c.pos : NULL;
    plan->client_id_size = client_id_size > 0 ? client_id_size : 0;
    c.pos += client_id_size > 0 ? client_id_size : 0;
    if (flexible && read_uvarint(&c) != 0) return 0;  /* header tagged fields */
    if (flexible ? read_uvarint(&c) != 0 : read_i16(&c) != -1) return 0; /* transactional */
    int16_t acks = read_i16(&c);
    (void)read_i32(&c); /* timeout */
    uint64_t count;
    if (flexible) {
        count = read_uvarint(&c);
        if (count == 0) return 0; /* null */
        count -= 1;
    } else {
        int32_t signed_count = read_i32(&c);
        if (signed_count < 0) return 0;
        count = (uint64_t)signed_count;
    }
    if (c.failed || acks == 0) return 0; /* acks=0 is answered with nothing: the Python way */
    for (uint64_t i = 0; i < count; i++) {
        int planned = plan_topic(lane, &c, flexible, plan);
        if (planned != 1) return planned;
    }
    if (flexible) skip_tagged_fields(&c);
    return !c.failed && c.pos == c.end; /* trailing bytes: the Python way */
}

/* The plan carried out: offsets given, counters and sequences moved. */
static int append_planned(Lane *lane, PlannedRequest *plan) {
    for (Py_ssize_t i = 0; i < plan->batch_count; i++) {
        PlannedBatch *batch = &plan->batches[i];
        if (set_int_attribute(batch->partition, ATTRIBUTE(Partition, log_end_offset),
                              batch->base_offset + batch->record_count) < 0)
            return -1;
        PyObject *produced = PyObject_GetAttr(batch->partition, ATTRIBUTE(Partition, produced));
        if (produced == NULL) return -1;
        int failed =
            add_to_attribute(produced, ATTRIBUTE(PartitionCounters, records),
                             batch->record_count) < 0 ||
            add_to_attribute(produced, ATTRIBUTE(PartitionCounters, bytes), batch->length) < 0 ||
            add_to_attribute(produced, ATTRIBUTE(PartitionCounters, batches), 1) < 0;
        Py_DECREF(produced);
        if (failed) return -1;
        if (batch->state == NULL) continue;
        if (set_int_attribute(batch->state, ATTRIBUTE(PartitionSequences, last_sequence),
                              batch->last_sequence) < 0 ||
            set_int_attribute(batch->state, ATTRIBUTE(PartitionSequences, last_timestamp),
                              batch->max_timestamp) < 0)
            return -1;
        /* A RecentBatch, made as tuple.__new__ makes a tuple subclass's instance. */
        PyObject *recent_batch = ((PyTypeObject *)lane->recent_type)->tp_alloc(
            (PyTypeObject *)lane->recent_type, RECENT_BATCH_FIELD_COUNT);
        if (recent_batch == NULL) return -1;
        PyObject *fields[RECENT_BATCH_FIELD_COUNT] = {
            [RECENT_BATCH_first_sequence] = PyLong_FromLong(batch->first_sequence),
            [RECENT_BATCH_last_sequence] = PyLong_FromLong(batch->last_sequence),
            [RECENT_BATCH_base_offset] = PyLong_FromLongLong(batch->base_offset),
            [RECENT_BATCH_timestamp] = PyLong_FromLongLong(batch->max_timestamp),
        };
        int made = 1;
        for (int f = 0; f < RECENT_BATCH_FIELD_COUNT; f++) {
            PyTuple_SET_ITEM(recent_batch, f, fields[f]);
            made = made && fields[f] != NULL;
        }
        if (!made) {
            Py_DECREF(recent_batch);
            return -1;
        }
        PyObject *recent = PyObject_GetAttr(batch->state, ATTRIBUTE(PartitionSequences, recent));
        PyObject *appended =
            recent == NULL ? NULL
                           : PyObject_CallMethodOneArg(recent, ATTRIBUTE(deque, append),
                                                       recent_batch);
        Py_XDECREF(recent);
        Py_DECREF(recent_batch);
        if (appended == NULL) return -1;
        Py_DECREF(appended);
    }
    return 0;
}

/* The response frame, size prefix first, as codec.produce's encoder and
 * codec.messages.encode_response write it for every partition accepted. */
static void write_answer(Output *out, PlannedRequest *plan) {
    int version = plan->version;
    int flexible = version >= FIRST_FLEXIBLE_VERSION;
    Py_ssize_t start = out->size;
    put_be(out, 0, 4); /* the size, written last */
    put_be(out, (uint32_t)plan->correlation_id, 4);
    if (flexible) put_be(out, 0, 1); /* response header v1: no tagged fields */
    if (flexible) put_uvarint(out, (uint64_t)plan->topic_count + 1);
    else put_be(out, (uint64_t)plan->topic_count, 4);
    for (Py_ssize_t t = 0; t < plan->topic_count; t++) {
        PlannedTopic *topic = &plan->topics[t];
        if (version < FIRST_BY_ID_VERSION) {
            if (flexible) put_uvarint(out, (uint64_t)topic->name_size + 1);
            else put_be(out, (uint64_t)topic->name_size, 2);
        }
        put(out, topic->name_bytes, topic->name_size); /* the name, or the topic id */
        if (flexible) put_uvarint(out, (uint64_t)topic->count + 1);
        else put_be(out, (uint64_t)topic->count, 4);
        for (Py_ssize_t i = topic->first; i < topic->first + topic->count; i++) {
            PlannedBatch *batch = &plan->batches[i];
            put_be(out, (uint32_t)batch->index, 4);
            put_be(out, 0, 2); /* no error */
            put_be(out, (uint64_t)batch->base_offset, 8);
            put_be(out, UINT64_MAX, 8); /* log append time: -1 */
            if (version >= 5) put_be(out, (uint64_t)batch->log_start, 8);
            if (flexible) {
                static const char tail[3] = {1, 0, 0}; /* no record errors, null message, tags */
                put(out, tail, 3);
            } else if (version >= 8) {
                put_be(out, 0, 4);      /* no record errors */
                put_be(out, 0xFFFF, 2); /* null message */
            }
        }
        if (flexible) put_be(out, 0, 1); /* the topic's tags */
    }
    put_be(out, 0, 4); /* throttle time */
    if (flexible) put_be(out, 0, 1); /* the response's tags */
    if (out->failed) return;
    uint32_t size = (uint32_t)(out->size - start - 4);
    for (int i = 3; i >= 0; i--, size >>= 8) out->data[start + i] = (char)(size & 0xFF);
}

static int64_t now_ns(void) {
    struct timespec now; /* time.perf_counter_ns's clock */
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* The request accounted as dispatch accounts a request it serves: its node's count, then
 * stats.BrokerStats.served's (Produce's count, and its latency in the histogram, as
 * LatencyHistogram.observe puts it: bisect_left over the bounds). The fields it moves are
 * the `moved` entries of produce_lane.h's accounts, which tests/handlers/test_lane_contract.py
 * holds equal to those the Python path moves. */
/* The request's records counted for its client id, as stats.count_client_records counts
 * them: into BrokerStats.client_records, at most MAX_CLIENT_IDS ids, the rest together. */
static int count_client_records(Lane *lane, PlannedRequest *plan) {
    int64_t records = 0;
    for (Py_ssize_t i = 0; i < plan->batch_count; i++) records += plan->batches[i].record_count;
    Py_ssize_t size = plan->client_id_size;
    const char *id = plan->client_id == NULL ? "" : (const char *)plan->client_id;
    PyObject *key = lane->client_key;
    if (key == NULL || PyUnicode_GET_LENGTH(key) != size ||
        memcmp(PyUnicode_DATA(key), id, (size_t)size) != 0) {
        key = PyUnicode_DecodeASCII(id, size, NULL);
        if (key == NULL) return -1;
        Py_XSETREF(lane->client_key, key);
    }
    PyObject *counted = PyDict_GetItemWithError(lane->client_records, key);
    if (counted == NULL && PyErr_Occurred()) return -1;
    if (counted == NULL && PyDict_GET_SIZE(lane->client_records) >= MAX_CLIENT_IDS) {
        key = s_other_client_ids;
        counted = PyDict_GetItemWithError(lane->client_records, key);
        if (counted == NULL && PyErr_Occurred()) return -1;
    }
    PyObject *added = PyLong_FromLongLong(records);
    if (added == NULL) return -1;
    PyObject *sum = counted == NULL ? Py_NewRef(added) : PyNumber_Add(counted, added);
    Py_DECREF(added);
    if (sum == NULL) return -1;
    int failed = PyDict_SetItem(lane->client_records, key, sum) < 0;
    Py_DECREF(sum);
    return failed ? -1 : 0;
}

static int account(Lane *lane, PyObject *node, int64_t started) {
    int64_t elapsed = now_ns() - started;
    PyObject *requests = PyDict_GetItemWithError(lane->node_requests, node);
    if (requests == NULL && PyErr_Occurred()) return -1;
    PyObject *more = requests == NULL ? Py_NewRef(one) : PyNumber_Add(requests, one);
    if (more == NULL) return -1;
    int failed = PyDict_SetItem(lane->node_requests, node, more) < 0;
    Py_DECREF(more);
    if (failed) return -1;
    /* Produce's ApiStats, made by the broker's accounts on the first Produce request, as
     * the Python path makes it (until then no Produce shows in the summary). */
    PyObject *api = PyDict_GetItemWithError(lane->apis, s_produce_api);
    if (api != NULL) Py_INCREF(api);
    else if (!PyErr_Occurred()) api = PyObject_CallOneArg(lane->api_stats, s_produce_api);
    if (api == NULL) return -1;
    failed = add_to_attribute(api, ATTRIBUTE(ApiStats, requests), 1) < 0;
    PyObject *latency = failed ? NULL : PyObject_GetAttr(api, ATTRIBUTE(ApiStats, latency));
    Py_DECREF(api);
    if (latency == NULL) return -1;
    PyObject *counts = PyObject_GetAttr(latency, ATTRIBUTE(LatencyHistogram, counts));
    Py_ssize_t low = 0, high = lane->bound_count;
    while (low < high) {
        Py_ssize_t middle = (low + high) / 2;
        if (lane->bounds[middle] < elapsed) low = middle + 1;
        else high = middle;
    }
    failed = counts == NULL || !PyList_Check(counts) || low >= PyList_GET_SIZE(counts);
    if (!failed) {
        PyObject *count = PyNumber_Add(PyList_GET_ITEM(counts, low), one);
        failed = count == NULL || PyList_SetItem(counts, low, count) < 0;
    }
    if (!failed)
        failed = add_to_attribute(latency, ATTRIBUTE(LatencyHistogram, sum_ns), elapsed) < 0;
    Py_XDECREF(counts);
    Py_DECREF(latency);
    if (failed && !PyErr_Occurred())
        PyErr_SetString(PyExc_RuntimeError, "the Produce latency histogram is not a list");
    return failed ? -1 : 0;
}

/* One request frame: answered into `out` (1), the Python way (0), an error (-1). */
static int answer_frame(Lane *lane, const uint8_t *data, Py_ssize_t size, PyObject *node,
                        Output *out) {
    int64_t started = now_ns();
    PlannedRequest plan;
    plan.topic_count = plan.batch_count = 0;
    plan.node = node;
    int planned = plan_request(lane, data, size, &plan);
    if (planned == 1) {
        PyObject *active = PyObject_GetAttr(lane->faults, ATTRIBUTE(Faults, active));
        if (active == NULL) planned = -1;
        else {
            int faulty = PyObject_IsTrue(active);
            Py_DECREF(active);
            planned = faulty < 0 ? -1 : !faulty; /* faults answer the Python way */
        }
    }
    if (planned == 1) {
        if (append_planned(lane, &plan) < 0 || count_client_records(lane, &plan) < 0)
            planned = -1;
        else write_answer(out, &plan);
    }
    release_plan(&plan);
    if (planned != 1) return planned;
    int64_t waiting; /* read here: a call of `notify` with no one waiting costs a frame */
    int read = int_attribute(lane->log_growth, ATTRIBUTE(LogGrowth, waiting), &waiting);
    if (read < 0) return -1;
    if (read == 0 || waiting) {
        PyObject *woken = PyObject_CallMethodNoArgs(lane->log_growth, ATTRIBUTE(LogGrowth, notify));
        if (woken == NULL) return -1;
        Py_DECREF(woken);
    }
    if (out->failed) return -1;
    return account(lane, node, started) < 0 ? -1 : 1;
}

/* The bytes of the leading request frames of `data` (size prefixes included) the lane
 * answers, their answers appended to `out`; *failed set (an exception set) if one failed.
 * The reader's way in (produce_lane.h), and answer_prefix's. */
static Py_ssize_t answer_leading(PyObject *object, const uint8_t *data, Py_ssize_t length,
                                 PyObject *node, Output *out, int *failed) {
    Lane *lane = (Lane *)object;
    Py_ssize_t consumed = 0;
    *failed = 0;
    while (length - consumed >= 4 + MIN_REQUEST_FRAME_BYTES) {
        int32_t size = (int32_t)be32(data + consumed);
        if (size < MIN_REQUEST_FRAME_BYTES || size > lane->max_frame_bytes ||
            size > length - consumed - 4 || data[consumed + 4] != 0 ||
            data[consumed + 5] != PRODUCE_KEY)
            break; /* anything but a whole Produce frame: the Python way, which checks it */
        int answered = answer_frame(lane, data + consumed + 4, size, node, out);
        if (answered < 0) *failed = 1;
        if (answered != 1) break;
        consumed += 4 + size;
    }
    return consumed;
}

/* answer_prefix(view, node_id) -> (consumed, answers): the read's leading request frames
 * (each with its size prefix) that the lane answers, and their answers as one bytes object
 * (None if there is none). The Python path takes the read on from `consumed`. */
static PyObject *answer_prefix(Lane *lane, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "answer_prefix(view, node_id)");
        return NULL;
    }
    Py_buffer buffer;
    if (PyObject_GetBuffer(args[0], &buffer, PyBUF_SIMPLE) < 0) return NULL;
    Output out = {NULL, 0, 0, 0};
    int failed;
    Py_ssize_t consumed = answer_leading((PyObject *)lane, buffer.buf, buffer.len, args[1], &out, &failed);
    PyBuffer_Release(&buffer);
    PyObject *result = NULL;
    if (!failed) {
        PyObject *answers = out.size ? PyBytes_FromStringAndSize(out.data, out.size)
                                     : Py_NewRef(Py_None);
        if (answers != NULL) result = Py_BuildValue("(nN)", consumed, answers);
    }
    PyMem_Free(out.data);
    return result;
}

/* answer(frame, node_id) -> bytes | None: one request frame (no size prefix) answered with
 * its response frame, or None: the Python way. */
static PyObject *answer(Lane *lane, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "answer(frame, node_id)");
        return NULL;
    }
    Py_buffer buffer;
    if (PyObject_GetBuffer(args[0], &buffer, PyBUF_SIMPLE) < 0) return NULL;
    Output out = {NULL, 0, 0, 0};
    int answered = answer_frame(lane, buffer.buf, buffer.len, args[1], &out);
    PyBuffer_Release(&buffer);
    PyObject *result = NULL;
    if (answered == 1) result = PyBytes_FromStringAndSize(out.data, out.size);
    else if (answered == 0) result = Py_NewRef(Py_None);
    PyMem_Free(out.data);
    return result;
}

/* The accounts' tables of a stats.BrokerStats, read into the lane, or -1 with an exception. */
static int read_accounts(Lane *lane, PyObject *stats) {
    lane->node_requests = PyObject_GetAttr(stats, ATTRIBUTE(BrokerStats, node_requests));
    lane->apis = PyObject_GetAttr(stats, ATTRIBUTE(BrokerStats, apis));
    lane->api_stats = PyObject_GetAttr(stats, ATTRIBUTE(BrokerStats, api));
    lane->client_records = PyObject_GetAttr(stats, ATTRIBUTE(BrokerStats, client_records));
    if (lane->node_requests == NULL || lane->apis == NULL || lane->api_stats == NULL ||
        lane->client_records == NULL)
        return -1;
    if (!PyDict_Check(lane->node_requests) || !PyDict_Check(lane->apis) ||
        !PyDict_Check(lane->client_records)) {
        PyErr_SetString(PyExc_TypeError,
                        "stats.node_requests, .apis and .client_records must be dicts");
        return -1;
    }
    return 0;
}

/* Lane(topics, topics_by_id, sequences, recent_type, stats, faults, log_growth, crc32c,
 *      cluster, min_version, max_version, max_frame_bytes, latency_bounds) */
static PyObject *lane_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *topics, *topics_by_id, *sequences, *recent_type, *stats, *faults, *log_growth,
        *crc32c, *cluster, *bounds;
    int min_version, max_version;
    Py_ssize_t max_frame_bytes;
    if (!PyArg_ParseTuple(args, "O!O!O!OOOOOOiinO:Lane", &PyDict_Type, &topics, &PyDict_Type,
                          &topics_by_id, &PyDict_Type, &sequences, &recent_type, &stats,
                          &faults, &log_growth, &crc32c, &cluster, &min_version, &max_version,
                          &max_frame_bytes, &bounds))
        return NULL;
    if (!PyType_Check(recent_type) ||
        !PyType_IsSubtype((PyTypeObject *)recent_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "recent_type must be a NamedTuple class");
        return NULL;
    }
    PyObject *sequence = PySequence_Fast(bounds, "latency_bounds must be a sequence of ints");
    if (sequence == NULL) return NULL;
    Py_ssize_t bound_count = PySequence_Fast_GET_SIZE(sequence);
    if (bound_count > MAX_BOUNDS) {
        Py_DECREF(sequence);
        PyErr_SetString(PyExc_ValueError, "too many latency bounds");
        return NULL;
    }
    Lane *lane = (Lane *)type->tp_alloc(type, 0);
    if (lane == NULL) {
        Py_DECREF(sequence);
        return NULL;
    }
    if (read_accounts(lane, stats) < 0) {
        Py_DECREF(sequence);
        Py_DECREF(lane);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < bound_count; i++) {
        lane->bounds[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(sequence, i));
        if (lane->bounds[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(sequence);
            Py_DECREF(lane);
            return NULL;
        }
    }
    Py_DECREF(sequence);
    lane->bound_count = bound_count;
    lane->topics = Py_NewRef(topics);
    lane->topics_by_id = Py_NewRef(topics_by_id);
    lane->sequences = Py_NewRef(sequences);
    lane->recent_type = Py_NewRef(recent_type);
    lane->faults = Py_NewRef(faults);
    lane->log_growth = Py_NewRef(log_growth);
    lane->crc32c = Py_NewRef(crc32c);
    lane->cluster = Py_NewRef(cluster);
    lane->min_version = min_version;
    lane->max_version = max_version;
    lane->max_frame_bytes = max_frame_bytes;
    return (PyObject *)lane;
}

static int lane_traverse(Lane *lane, visitproc visit, void *arg) {
    Py_VISIT(lane->topics);
    Py_VISIT(lane->topics_by_id);
    Py_VISIT(lane->sequences);
    Py_VISIT(lane->recent_type);
    Py_VISIT(lane->node_requests);
    Py_VISIT(lane->client_records);
    Py_VISIT(lane->client_key);
    Py_VISIT(lane->apis);
    Py_VISIT(lane->api_stats);
    Py_VISIT(lane->faults);
    Py_VISIT(lane->log_growth);
    Py_VISIT(lane->crc32c);
    Py_VISIT(lane->cluster);
    return 0;
}

static int lane_clear(Lane *lane) {
    Py_CLEAR(lane->topics);
    Py_CLEAR(lane->topics_by_id);
    Py_CLEAR(lane->sequences);
    Py_CLEAR(lane->recent_type);
    Py_CLEAR(lane->node_requests);
    Py_CLEAR(lane->client_records);
    Py_CLEAR(lane->client_key);
    Py_CLEAR(lane->apis);
    Py_CLEAR(lane->api_stats);
    Py_CLEAR(lane->faults);
    Py_CLEAR(lane->log_growth);
    Py_CLEAR(lane->crc32c);
    Py_CLEAR(lane->cluster);
    return 0;
}

static void lane_dealloc(Lane *lane) {
    PyObject_GC_UnTrack(lane);
    lane_clear(lane);
    Py_TYPE(lane)->tp_free((PyObject *)lane);
}


#define FASTCALL(name) (PyCFunction)(void (*)(void))(name), METH_FASTCALL

static PyMethodDef lane_methods[] = {
    {"answer_prefix", FASTCALL(answer_prefix),
     "answer_prefix(view, node_id) -> (consumed, answers | None): the read's leading "
     "request frames the lane answers."},
    {"answer", FASTCALL(answer),
     "answer(frame, node_id) -> bytes | None: one request frame's response frame, or None "
     "for the Python path."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LaneType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nullbroker.handlers._produce_lane.Lane",
    .tp_basicsize = sizeof(Lane),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The common Produce request answered whole in C (nullbroker/handlers/produce_lane.py).",
    .tp_new = lane_new,
    .tp_traverse = (traverseproc)lane_traverse,
    .tp_clear = (inquiry)lane_clear,
    .tp_dealloc = (destructor)lane_dealloc,
    .tp_methods = lane_methods,
};

static ProduceLaneApi lane_api = {&LaneType, answer_leading};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "nullbroker.handlers._produce_lane",
    "The common Produce request answered whole in C (see nullbroker/handlers/produce_lane.py).", -1,
    NULL,
};

PyMODINIT_FUNC PyInit__produce_lane(void) {
    if (intern_lane_attributes() < 0) return NULL;
    if (s_produce_api == NULL) s_produce_api = PyUnicode_InternFromString(PRODUCE_API_NAME);
    if (s_other_client_ids == NULL)
        s_other_client_ids = PyUnicode_InternFromString(OTHER_CLIENT_IDS);
    if (s_produce_api == NULL) return NULL;
    if (one == NULL) one = PyLong_FromLong(1);
    if (one == NULL || PyType_Ready(&LaneType) < 0) return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) return NULL;
    PyObject *api = PyCapsule_New(&lane_api, PRODUCE_LANE_CAPSULE, NULL);
    if (api == NULL || PyModule_AddObjectRef(module, "Lane", (PyObject *)&LaneType) < 0 ||
        PyModule_AddObjectRef(module, "c_api", api) < 0) {
        Py_XDECREF(api);
        Py_DECREF(module);
        return NULL;
    }
    Py_DECREF(api);
    return module;
}
