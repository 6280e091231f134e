/* The Produce hot path in C: codec/produce.py's request decoder and response encoder and
 * codec/record_batch.py's batch-header reader, for the inputs they take.
 *
 * Each function returns exactly what its Python twin returns (the same NamedTuple classes,
 * handed over by setup(), the same records views), or None for anything it does not
 * decode: a malformed request, a string that is not UTF-8, a batch that is not magic v2.
 * The Python twin is then called and raises its own, worded error, so errors stay the
 * Python code's. Every length is checked against the bytes left before it is used and no
 * count is trusted for an allocation. tests/codec/test_codec_native.py proves both equal.
 */
#include "_kafka_wire.h"

static PyObject *request_view_type;   /* ProduceRequestView */
static PyObject *topic_type;          /* TopicProduceData */
static PyObject *partition_type;      /* PartitionProduceData */
static PyObject *header_type;         /* RecordBatchHeader */
static PyObject *topic_id_of;         /* bytes -> uuid.UUID */
static PyObject *decode_in_python;    /* codec.produce's decoder: (version, frame, offset) */
static PyObject *header_in_python;    /* codec.record_batch's reader: (data, offset) */

/* A string of `size` bytes at the cursor, strictly UTF-8 as str(view, "utf-8") is; NULL
 * with no exception set if it is not, or does not fit. */
static PyObject *read_text(Cursor *c, Py_ssize_t size) {
    if (!need(c, size)) return NULL;
    PyObject *text = PyUnicode_DecodeUTF8((const char *)c->data + c->pos, size, "strict");
    if (text == NULL) {
        PyErr_Clear();
        c->failed = 1;
        return NULL;
    }
    c->pos += size;
    return text;
}

/* A tuple subclass instance of `type` holding `items` (stolen), as tuple.__new__ builds. */
static PyObject *new_named(PyObject *type, PyObject *items) {
    if (items == NULL) return NULL;
    PyObject *args = PyTuple_Pack(1, items);
    Py_DECREF(items);
    if (args == NULL) return NULL;
    PyObject *made = PyTuple_Type.tp_new((PyTypeObject *)type, args, NULL);
    Py_DECREF(args);
    return made;
}

/* One partition: index and records (None if null). */
static PyObject *read_partition(Cursor *c, PyObject *view, int flexible) {
    int32_t index = read_i32(c);
    Py_ssize_t size;
    if (flexible) {
        uint64_t encoded = read_uvarint(c);
        if (c->failed) return NULL;
        size = encoded == 0 ? -1 : (Py_ssize_t)(encoded - 1);
        if (encoded > (uint64_t)PY_SSIZE_T_MAX) c->failed = 1;
    } else {
        size = read_i32(c);
        if (size < -1) c->failed = 1;
    }
    if (c->failed) return NULL;
    PyObject *records;
    if (size == -1) {
        records = Py_NewRef(Py_None);
    } else {
        if (!need(c, size)) return NULL;
        records = PySequence_GetSlice(view, c->pos, c->pos + size);  /* zero-copy */
        if (records == NULL) return NULL;
        c->pos += size;
    }
    if (flexible) {
        skip_tagged_fields(c);
        if (c->failed) {
            Py_DECREF(records);
            return NULL;
        }
    }
    PyObject *index_object = PyLong_FromLong(index);
    if (index_object == NULL) {
        Py_DECREF(records);
        return NULL;
    }
    PyObject *items = PyTuple_New(2);
    if (items == NULL) {
        Py_DECREF(index_object);
        Py_DECREF(records);
        return NULL;
    }
    PyTuple_SET_ITEM(items, 0, index_object);
    PyTuple_SET_ITEM(items, 1, records);
    return new_named(partition_type, items);
}

static PyObject *read_topic(Cursor *c, PyObject *view, int flexible, int by_id) {
    PyObject *name = NULL;
    PyObject *topic_id = NULL;
    if (by_id) {
        if (!need(c, 16)) return NULL;
        PyObject *raw = PyBytes_FromStringAndSize((const char *)c->data + c->pos, 16);
        if (raw == NULL) return NULL;
        c->pos += 16;
        topic_id = PyObject_CallOneArg(topic_id_of, raw);
        Py_DECREF(raw);
        if (topic_id == NULL) return NULL;
        name = Py_NewRef(Py_None);
    } else {
        Py_ssize_t size;
        if (flexible) {
            uint64_t encoded = read_uvarint(c);
            if (c->failed || encoded == 0) {  /* null: not nullable */
                c->failed = 1;
                return NULL;
            }
            size = (Py_ssize_t)(encoded - 1);
        } else {
            size = read_i16(c);
            if (c->failed || size < 0) {
                c->failed = 1;
                return NULL;
            }
        }
        name = read_text(c, size);
        if (name == NULL) return NULL;
        topic_id = Py_NewRef(Py_None);
    }
    PyObject *partitions = PyList_New(0);
    if (partitions == NULL) goto fail;
    uint64_t count;
    if (flexible) {
        count = read_uvarint(c);
        if (c->failed || count == 0) {  /* null: not nullable */
            c->failed = 1;
            goto fail;
        }
        count -= 1;
    } else {
        int32_t signed_count = read_i32(c);
        if (c->failed || signed_count < 0) {
            c->failed = 1;
            goto fail;
        }
        count = (uint64_t)signed_count;
    }
    /* Each partition takes at least 6 bytes: a hostile count ends at the frame's end. */
    for (uint64_t i = 0; i < count; i++) {
        PyObject *partition = read_partition(c, view, flexible);
        if (partition == NULL) goto fail;
        int appended = PyList_Append(partitions, partition);
        Py_DECREF(partition);
        if (appended < 0) goto fail;
    }
    if (flexible) {
        skip_tagged_fields(c);
        if (c->failed) goto fail;
    }
    PyObject *items = PyTuple_New(3);
    if (items == NULL) goto fail;
    PyTuple_SET_ITEM(items, 0, name);
    PyTuple_SET_ITEM(items, 1, topic_id);
    PyTuple_SET_ITEM(items, 2, PyList_AsTuple(partitions));
    Py_DECREF(partitions);
    if (PyTuple_GET_ITEM(items, 2) == NULL) {
        Py_DECREF(items);
        return NULL;
    }
    return new_named(topic_type, items);
fail:
    Py_XDECREF(partitions);
    Py_XDECREF(name);
    Py_XDECREF(topic_id);
    return NULL;
}

/* `result`, unless it is None: then what the Python twin makes of the same arguments
 * (its value, or the error it raises). */
static PyObject *or_in_python(PyObject *result, PyObject *python, PyObject *const *args,
                              Py_ssize_t nargs) {
    if (result != Py_None) return result;
    Py_DECREF(result);
    return PyObject_Vectorcall(python, args, (size_t)nargs, NULL);
}

/* (ProduceRequestView, size), or None (no exception set) for what it does not decode. */
static PyObject *decode_or_none(PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "decode_produce(version, frame, offset)");
        return NULL;
    }
    if (request_view_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "codec._native.setup_produce() was not called");
        return NULL;
    }
    long version = PyLong_AsLong(args[0]);
    Py_ssize_t offset = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) return NULL;
    if (version < 3 || version > 13) Py_RETURN_NONE;
    PyObject *frame = args[1];
    PyObject *view;
    if (PyMemoryView_Check(frame)) {
        view = Py_NewRef(frame);
    } else {
        view = PyMemoryView_FromObject(frame);
        if (view == NULL) return NULL;
    }
    Py_buffer *buffer = PyMemoryView_GET_BUFFER(view);
    if (!PyBuffer_IsContiguous(buffer, 'C') || buffer->itemsize != 1 || offset < 0 ||
        offset > buffer->len) {
        Py_DECREF(view);
        Py_RETURN_NONE;
    }
    Cursor c = {(const uint8_t *)buffer->buf, offset, buffer->len, 0};
    int flexible = version >= 9;
    int by_id = version >= 13;
    PyObject *transactional_id = NULL;
    PyObject *topics = NULL;
    PyObject *result = NULL;

    Py_ssize_t size;
    if (flexible) {
        uint64_t encoded = read_uvarint(&c);
        size = encoded == 0 ? -1 : (Py_ssize_t)(encoded - 1);
        if (encoded > (uint64_t)PY_SSIZE_T_MAX) c.failed = 1;
    } else {
        size = read_i16(&c);
        if (size < -1) c.failed = 1;
    }
    if (c.failed) goto done;
    if (size == -1) {
        transactional_id = Py_NewRef(Py_None);
    } else {
        transactional_id = read_text(&c, size);
        if (transactional_id == NULL) goto done;
    }
    int16_t acks = read_i16(&c);
    int32_t timeout_ms = read_i32(&c);
    uint64_t count;
    if (flexible) {
        count = read_uvarint(&c);
        if (c.failed || count == 0) {
            c.failed = 1;
            goto done;
        }
        count -= 1;
    } else {
        int32_t signed_count = read_i32(&c);
        if (c.failed || signed_count < 0) {
            c.failed = 1;
            goto done;
        }
        count = (uint64_t)signed_count;
    }
    topics = PyList_New(0);
    if (topics == NULL) goto done;
    for (uint64_t i = 0; i < count; i++) {
        PyObject *topic = read_topic(&c, view, flexible, by_id);
        if (topic == NULL) goto done;
        int appended = PyList_Append(topics, topic);
        Py_DECREF(topic);
        if (appended < 0) goto done;
    }
    if (flexible) {
        skip_tagged_fields(&c);
        if (c.failed) goto done;
    }
    PyObject *request = new_named(
        request_view_type,
        Py_BuildValue("(OhiN)", transactional_id, acks, timeout_ms, PyList_AsTuple(topics)));
    if (request == NULL) goto done;
    result = Py_BuildValue("(Nn)", request, c.pos - offset);
done:
    Py_XDECREF(transactional_id);
    Py_XDECREF(topics);
    Py_DECREF(view);
    if (result == NULL && !PyErr_Occurred()) Py_RETURN_NONE;  /* not decoded: Python's turn */
    return result;
}

/* decode_produce(version, frame, offset): decoded here, else by codec.produce's decoder,
 * which raises its error. */
static PyObject *decode_produce(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    return or_in_python(decode_or_none(args, nargs), decode_in_python, args, nargs);
}

/* try_decode_produce(version, frame, offset): decoded here, or None. For the tests. */
static PyObject *try_decode_produce(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    return decode_or_none(args, nargs);
}

/* RecordBatchHeader, or None (no exception set) for what it does not read. */
static PyObject *header_or_none(PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "read_batch_header(data, offset=0)");
        return NULL;
    }
    if (header_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "codec._native.setup_header() was not called");
        return NULL;
    }
    Py_ssize_t offset = nargs == 2 ? PyLong_AsSsize_t(args[1]) : 0;
    if (offset == -1 && PyErr_Occurred()) return NULL;
    Py_buffer buffer;
    if (PyObject_GetBuffer(args[0], &buffer, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = NULL;
    Py_ssize_t available = buffer.len - offset;
    const uint8_t *p = (const uint8_t *)buffer.buf + offset;
    if (offset < 0 || available < 61 || p[16] != 2) goto done;
    int64_t length = (int64_t)(int32_t)be32(p + 8) + 12;
    if (length < 61 || length > available) goto done;
    result = PyTuple_New(12);
    if (result == NULL) goto done;
    PyObject *fields[12] = {
        PyLong_FromLongLong((int64_t)be64(p)),                      /* base offset */
        PyLong_FromLongLong(length),                                /* length */
        PyLong_FromLong((int32_t)be32(p + 12)),                     /* leader epoch */
        PyLong_FromUnsignedLong(be32(p + 17)),                      /* crc */
        PyLong_FromLong((int16_t)((p[21] << 8) | p[22])),           /* attributes */
        PyLong_FromLong((int32_t)be32(p + 23)),                     /* last offset delta */
        PyLong_FromLongLong((int64_t)be64(p + 27)),                 /* base timestamp */
        PyLong_FromLongLong((int64_t)be64(p + 35)),                 /* max timestamp */
        PyLong_FromLongLong((int64_t)be64(p + 43)),                 /* producer id */
        PyLong_FromLong((int16_t)((p[51] << 8) | p[52])),           /* producer epoch */
        PyLong_FromLong((int32_t)be32(p + 53)),                     /* base sequence */
        PyLong_FromLong((int32_t)be32(p + 57)),                     /* record count */
    };
    int ok = 1;
    for (int i = 0; i < 12; i++) {
        if (fields[i] == NULL) ok = 0;
        PyTuple_SET_ITEM(result, i, fields[i] ? fields[i] : Py_NewRef(Py_None));
    }
    if (!ok) {
        Py_CLEAR(result);
        goto done;
    }
    result = new_named(header_type, result);
done:
    PyBuffer_Release(&buffer);
    if (result == NULL && !PyErr_Occurred()) Py_RETURN_NONE;
    return result;
}

/* read_batch_header(data, offset=0): read here, else by codec.record_batch's reader,
 * which raises its error. */
static PyObject *read_batch_header(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    return or_in_python(header_or_none(args, nargs), header_in_python, args, nargs);
}

/* try_read_batch_header(data, offset=0): read here, or None. For the tests. */
static PyObject *try_read_batch_header(PyObject *module, PyObject *const *args,
                                       Py_ssize_t nargs) {
    return header_or_none(args, nargs);
}

/* --- the response -------------------------------------------------------------------- */

static PyObject *encode_in_python;    /* codec.produce's encoder: (version, topics) */

/* The bytes of a long that must fit `bits` bits signed; sets failed if it does not. */
static int64_t as_int(Output *out, PyObject *number, int bits) {
    int overflow = 0;
    long long value = PyLong_AsLongLongAndOverflow(number, &overflow);
    if (value == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        out->failed = 1;
        return 0;
    }
    if (overflow || (bits < 64 && (value < -(1LL << (bits - 1)) || value >= (1LL << (bits - 1))))) {
        out->failed = 1;
        return 0;
    }
    return value;
}

/* One topic's results, or failed for anything the Python encoder must write (a message, a
 * topic of another type, a number out of its field's range). */
static void put_topic(Output *out, long version, PyObject *topic) {
    if (!PyTuple_Check(topic) || PyTuple_GET_SIZE(topic) != 2) {
        out->failed = 1;
        return;
    }
    PyObject *key = PyTuple_GET_ITEM(topic, 0);
    PyObject *partitions = PySequence_Fast(PyTuple_GET_ITEM(topic, 1), "partitions");
    if (partitions == NULL) {
        PyErr_Clear();
        out->failed = 1;
        return;
    }
    int flexible = version >= 9;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(partitions);
    if (version >= 13) {
        if (key == Py_None) {
            static const char zero[16] = {0};
            put(out, zero, 16);
        } else {
            PyObject *raw = PyObject_GetAttrString(key, "bytes");
            if (raw == NULL || !PyBytes_Check(raw) || PyBytes_GET_SIZE(raw) != 16) {
                PyErr_Clear();
                out->failed = 1;
            } else {
                put(out, PyBytes_AS_STRING(raw), 16);
            }
            Py_XDECREF(raw);
        }
    } else {
        Py_ssize_t size;
        const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8AndSize(key, &size) : NULL;
        if (name == NULL || (!flexible && size > 0x7FFF)) {
            PyErr_Clear();
            out->failed = 1;
        } else {
            if (flexible) put_uvarint(out, (uint64_t)size + 1);
            else put_be(out, (uint64_t)size, 2);
            put(out, name, size);
        }
    }
    if (flexible) put_uvarint(out, (uint64_t)count + 1);
    else put_be(out, (uint64_t)count, 4);
    for (Py_ssize_t i = 0; i < count && !out->failed; i++) {
        PyObject *result = PySequence_Fast_GET_ITEM(partitions, i);
        /* PartitionResult(partition, error_code, base_offset, log_start_offset,
         * error_message, log_append_time) */
        if (!PyTuple_Check(result) || PyTuple_GET_SIZE(result) != 6 ||
            PyTuple_GET_ITEM(result, 4) != Py_None) {
            out->failed = 1;  /* an error message: the Python encoder writes it */
            break;
        }
        int64_t index = as_int(out, PyTuple_GET_ITEM(result, 0), 32);
        int64_t error = as_int(out, PyTuple_GET_ITEM(result, 1), 16);
        int64_t base_offset = as_int(out, PyTuple_GET_ITEM(result, 2), 64);
        int64_t append_time = as_int(out, PyTuple_GET_ITEM(result, 5), 64);
        /* Written from v5 only: before, any value goes, as in the Python encoder. */
        int64_t log_start = version >= 5 ? as_int(out, PyTuple_GET_ITEM(result, 3), 64) : 0;
        put_be(out, (uint64_t)index, 4);
        put_be(out, (uint64_t)error, 2);
        put_be(out, (uint64_t)base_offset, 8);
        put_be(out, (uint64_t)append_time, 8);
        if (version >= 5) put_be(out, (uint64_t)log_start, 8);
        if (flexible) {
            static const char tail[3] = {1, 0, 0};  /* no record errors, null message, no tags */
            put(out, tail, 3);
        } else if (version >= 8) {
            put_be(out, 0, 4);       /* no record errors */
            put_be(out, 0xFFFF, 2);  /* null message */
        }
    }
    if (flexible) put_be(out, 0, 1);  /* the topic's tags */
    Py_DECREF(partitions);
}

/* (bytes), or None (no exception set) for what the Python encoder must write. */
static PyObject *encode_or_none(PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "encode_produce_response(version, topics)");
        return NULL;
    }
    long version = PyLong_AsLong(args[0]);
    if (version == -1 && PyErr_Occurred()) return NULL;
    if (version < 3 || version > 13) Py_RETURN_NONE;
    PyObject *topics = PySequence_Fast(args[1], "topics");
    if (topics == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Output out = {PyMem_Malloc(256), 0, 256, 0};
    if (out.data == NULL) {
        Py_DECREF(topics);
        return PyErr_NoMemory();
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(topics);
    if (version >= 9) put_uvarint(&out, (uint64_t)count + 1);
    else put_be(&out, (uint64_t)count, 4);
    for (Py_ssize_t i = 0; i < count && !out.failed; i++)
        put_topic(&out, version, PySequence_Fast_GET_ITEM(topics, i));
    put_be(&out, 0, 4);  /* throttle time */
    if (version >= 9) put_be(&out, 0, 1);  /* the response's tags */
    Py_DECREF(topics);
    PyObject *result = NULL;
    if (!out.failed) result = PyBytes_FromStringAndSize(out.data, out.size);
    PyMem_Free(out.data);
    if (result == NULL && !PyErr_Occurred()) Py_RETURN_NONE;
    return result;
}

/* encode_produce_response(version, topics): written here, else by codec.produce's encoder. */
static PyObject *encode_produce_response(PyObject *module, PyObject *const *args,
                                         Py_ssize_t nargs) {
    return or_in_python(encode_or_none(args, nargs), encode_in_python, args, nargs);
}

/* try_encode_produce_response(version, topics): written here, or None. For the tests. */
static PyObject *try_encode_produce_response(PyObject *module, PyObject *const *args,
                                             Py_ssize_t nargs) {
    return encode_or_none(args, nargs);
}

static int is_tuple_type(PyObject *type) {
    if (PyType_Check(type) && PyType_IsSubtype((PyTypeObject *)type, &PyTuple_Type)) return 1;
    PyErr_SetString(PyExc_TypeError, "results are made of tuple subclasses");
    return 0;
}

/* setup_produce(ProduceRequestView, TopicProduceData, PartitionProduceData, topic_id_of,
 *               decode_in_python, encode_in_python) */
static PyObject *setup_produce(PyObject *module, PyObject *args) {
    PyObject *view, *topic, *partition, *topic_id, *fallback, *encoder;
    if (!PyArg_ParseTuple(args, "OOOOOO", &view, &topic, &partition, &topic_id, &fallback,
                          &encoder))
        return NULL;
    if (!is_tuple_type(view) || !is_tuple_type(topic) || !is_tuple_type(partition)) return NULL;
    Py_XSETREF(request_view_type, Py_NewRef(view));
    Py_XSETREF(topic_type, Py_NewRef(topic));
    Py_XSETREF(partition_type, Py_NewRef(partition));
    Py_XSETREF(topic_id_of, Py_NewRef(topic_id));
    Py_XSETREF(decode_in_python, Py_NewRef(fallback));
    Py_XSETREF(encode_in_python, Py_NewRef(encoder));
    Py_RETURN_NONE;
}

/* setup_header(RecordBatchHeader, header_in_python) */
static PyObject *setup_header(PyObject *module, PyObject *args) {
    PyObject *header, *fallback;
    if (!PyArg_ParseTuple(args, "OO", &header, &fallback)) return NULL;
    if (!is_tuple_type(header)) return NULL;
    Py_XSETREF(header_type, Py_NewRef(header));
    Py_XSETREF(header_in_python, Py_NewRef(fallback));
    Py_RETURN_NONE;
}

/* write_decimals(buffer, places, moves): codec.batch_template's writer of numbers in
 * place. Each place (14 bytes, native order: uint32 position, uint8 width, uint8 kind,
 * int64 base) gets base + moves[kind] in decimal, then spaces to its width. */
#define MAX_MOVES 8
#define PLACE_BYTES 14
#define DECIMAL_LIMIT 1000000000000000000LL /* 18 digits at most: no sum overflows */

static const char DIGIT_PAIRS[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static int place_error(const char *message, Py_ssize_t position) {
    PyErr_Format(PyExc_ValueError, "the place at %zd %s", position, message);
    return -1;
}

static int write_places(unsigned char *data, Py_ssize_t size, const unsigned char *places,
                        Py_ssize_t places_size, const long long *moves, Py_ssize_t move_count) {
    if (places_size % PLACE_BYTES) {
        PyErr_SetString(PyExc_ValueError, "places must be whole 14-byte places");
        return -1;
    }
    for (Py_ssize_t at = 0; at < places_size; at += PLACE_BYTES) {
        uint32_t position;
        long long base;
        memcpy(&position, places + at, 4);
        memcpy(&base, places + at + 6, 8);
        Py_ssize_t width = places[at + 4], kind = places[at + 5];
        if (kind >= move_count) return place_error("has a kind without a move", position);
        if ((Py_ssize_t)position + width > size) return place_error("is past the end", position);
        if (base < 0 || base >= DECIMAL_LIMIT || moves[kind] >= DECIMAL_LIMIT ||
            moves[kind] <= -DECIMAL_LIMIT)
            return place_error("has a base or a move out of range", position);
        long long number = base + moves[kind];
        if (number < 0) return place_error("would hold a negative number", position);
        if (number >= DECIMAL_LIMIT) return place_error("is too narrow for its number", position);
        /* Two digits at a time from the right, straight into the place: snprintf cost
         * three times the whole write, and this runs for every id and time served. */
        unsigned long long value = (unsigned long long)number;
        Py_ssize_t length = 1;
        for (unsigned long long bound = 10; length < 18 && value >= bound; bound *= 10) length++;
        if (length > width) return place_error("is too narrow for its number", position);
        unsigned char *place = data + position, *end = place + length;
        while (value >= 100) {
            unsigned pair = (unsigned)(value % 100);
            value /= 100;
            end -= 2;
            memcpy(end, DIGIT_PAIRS + 2 * pair, 2);
        }
        if (value >= 10) {
            memcpy(end - 2, DIGIT_PAIRS + 2 * value, 2);
        } else {
            end[-1] = (unsigned char)('0' + value);
        }
        memset(place + length, ' ', width - length);
    }
    return 0;
}

static PyObject *write_decimals(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "write_decimals(buffer, places, moves)");
        return NULL;
    }
    long long moves[MAX_MOVES];
    PyObject *sequence = PySequence_Fast(args[2], "moves must be a sequence of ints");
    if (sequence == NULL) return NULL;
    Py_ssize_t move_count = PySequence_Fast_GET_SIZE(sequence);
    if (move_count > MAX_MOVES) move_count = MAX_MOVES;
    for (Py_ssize_t i = 0; i < move_count; i++) {
        moves[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(sequence, i));
        if (moves[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(sequence);
            return NULL;
        }
    }
    Py_DECREF(sequence);
    Py_buffer buffer, places;
    if (PyObject_GetBuffer(args[0], &buffer, PyBUF_WRITABLE) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &places, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&buffer);
        return NULL;
    }
    int failed = write_places(buffer.buf, buffer.len, places.buf, places.len, moves, move_count);
    PyBuffer_Release(&places);
    PyBuffer_Release(&buffer);
    if (failed) return NULL;
    Py_RETURN_NONE;
}

#define FASTCALL(name) (PyCFunction)(void (*)(void))(name), METH_FASTCALL

static PyMethodDef methods[] = {
    {"decode_produce", FASTCALL(decode_produce),
     "decode_produce(version, frame, offset): codec.produce's decoder, in C."},
    {"try_decode_produce", FASTCALL(try_decode_produce),
     "try_decode_produce(version, frame, offset): decoded in C, or None."},
    {"read_batch_header", FASTCALL(read_batch_header),
     "read_batch_header(data, offset=0): codec.record_batch's reader, in C."},
    {"try_read_batch_header", FASTCALL(try_read_batch_header),
     "try_read_batch_header(data, offset=0): read in C, or None."},
    {"encode_produce_response", FASTCALL(encode_produce_response),
     "encode_produce_response(version, topics): codec.produce's encoder, in C."},
    {"try_encode_produce_response", FASTCALL(try_encode_produce_response),
     "try_encode_produce_response(version, topics): written in C, or None."},
    {"write_decimals", FASTCALL(write_decimals),
     "write_decimals(buffer, places, moves): codec.batch_template's writer, in C."},
    {"setup_produce", setup_produce, METH_VARARGS,
     "Hand over the request's classes, topic_id_of and the Python decoder."},
    {"setup_header", setup_header, METH_VARARGS,
     "Hand over RecordBatchHeader and the Python reader."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "codec._native",
    "The Produce hot path's decoders in C (see codec/native.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module_def); }
