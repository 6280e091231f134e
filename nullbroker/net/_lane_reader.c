/* A plain-TCP connection's reader on the host loop's epoll, in C (nullbroker/net/lane_reader.py
 * says when a connection uses it): it reads into the loop's receive buffer, hands the read to
 * the Produce lane (nullbroker/handlers/_produce_lane.c) through the lane's C interface
 * (nullbroker/handlers/produce_lane.h), a function pointer, no Python call, and writes the
 * answers. The lane answers; the reader owns the socket: the read size, the reads counted for
 * the idle sweep, the write, and the way back to the connection's Python. The attributes it
 * reads (the buffer's view, the wire's reads) are entries of that header's table, as the
 * lane's are.
 */
#include "../handlers/produce_lane.h"
#include <errno.h>
#include <structmember.h>
#include <unistd.h>

/* A plain-TCP connection's handler on the host loop's epoll (nullbroker/net/hosted_connection.py):
 * called with the event mask, it reads into the loop's receive buffer, answers the read's
 * requests through the lane and writes the answers, all without Python, when the read holds
 * whole Produce frames the lane takes and the socket takes the answers at once. Anything
 * else goes to the connection's Python: `on_readable(events)` reads itself while `ready` is
 * false (a frame is unfinished, or budget held: the Python side keeps it), and
 * `after_read(size, consumed, answers, error)` takes a read on from its first byte the lane
 * did not answer (size 0: the client closed; below 0: minus the errno of a failed read). */

typedef struct {
    PyObject_HEAD
    PyObject *lane;               /* a handlers/_produce_lane.Lane */
    const ProduceLaneApi *api;    /* the lane's C interface */
    PyObject *receive_buffer; /* host_loop.ReceiveBuffer: reads go into its `view` */
    PyObject *wire;           /* connection.Wire: its `reads` count, for the idle sweep */
    PyObject *node;           /* the node id the client connected to */
    PyObject *on_readable;    /* the Python way, reading itself */
    PyObject *after_read;     /* the Python way, from a read made here */
    int fd;
    int ready;                /* set by the Python side: nothing buffered, no budget held */
    Py_ssize_t read_size;     /* as connection.next_read_size moves it, between */
    Py_ssize_t first_read;    /* host_loop.FIRST_RECEIVE_BYTES and */
    Py_ssize_t max_read;      /* host_loop.RECEIVE_BYTES */
    int small_reads;
    int shrink_after;         /* host_loop.SHRINK_AFTER_READS */
    vectorcallfunc vectorcall;
} Reader;

/* connection.next_read_size's twin: a read that filled the size doubles it, so many reads
 * of under a sixteenth of it in a row halve it. */
static void next_read_size(Reader *reader, Py_ssize_t size) {
    if (size == reader->read_size) {
        reader->read_size = reader->read_size * 2 < reader->max_read ? reader->read_size * 2
                                                                      : reader->max_read;
        reader->small_reads = 0;
    } else if (size < reader->read_size >> 4 && reader->read_size > reader->first_read) {
        if (++reader->small_reads >= reader->shrink_after) {
            reader->read_size /= 2;
            reader->small_reads = 0;
        }
    }
}

/* The Python way from here; a handler of the loop never raises (it would end the broker):
 * what the Python raises is logged as unraisable. */
static PyObject *go_python(PyObject *callable, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *result = PyObject_Vectorcall(callable, args, (size_t)nargs, NULL);
    if (result == NULL) {
        PyErr_WriteUnraisable(callable);
        Py_RETURN_NONE;
    }
    return result;
}

static PyObject *after_read(Reader *reader, Py_ssize_t size, Py_ssize_t consumed,
                            const char *answers, Py_ssize_t answers_size, PyObject *error) {
    PyObject *args[4] = {PyLong_FromSsize_t(size), PyLong_FromSsize_t(consumed),
                         answers_size ? PyBytes_FromStringAndSize(answers, answers_size)
                                      : Py_NewRef(Py_None),
                         error ? error : Py_None};
    PyObject *result = NULL;
    if (args[0] && args[1] && args[2]) result = go_python(reader->after_read, args, 4);
    else {
        PyErr_WriteUnraisable(reader->after_read);
        result = Py_NewRef(Py_None);
    }
    Py_XDECREF(args[0]);
    Py_XDECREF(args[1]);
    Py_XDECREF(args[2]);
    return result;
}

static PyObject *reader_call(Reader *reader, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (!reader->ready) return go_python(reader->on_readable, args, nargs);
    PyObject *view = PyObject_GetAttr(reader->receive_buffer, ATTRIBUTE(ReceiveBuffer, view));
    Py_buffer buffer;
    if (view == NULL || PyObject_GetBuffer(view, &buffer, PyBUF_WRITABLE) < 0) {
        Py_XDECREF(view);
        PyErr_WriteUnraisable((PyObject *)reader);
        return go_python(reader->on_readable, args, nargs);
    }
    Py_DECREF(view); /* the loop's buffer holds it */
    Py_ssize_t want = reader->read_size < buffer.len ? reader->read_size : buffer.len;
    ssize_t size;
    do size = read(reader->fd, buffer.buf, (size_t)want);
    while (size < 0 && errno == EINTR);
    int error = errno;
    if (size <= 0) {
        PyBuffer_Release(&buffer);
        if (size < 0 && (error == EAGAIN || error == EWOULDBLOCK)) Py_RETURN_NONE;
        return after_read(reader, size < 0 ? -error : 0, 0, NULL, 0, NULL);
    }
    if (add_to_attribute(reader->wire, ATTRIBUTE(Wire, reads), 1) < 0)
        PyErr_WriteUnraisable(reader->wire);
    next_read_size(reader, size);
    Output out = {NULL, 0, 0, 0};
    int failed;
    Py_ssize_t consumed =
        reader->api->answer_leading(reader->lane, buffer.buf, size, reader->node, &out, &failed);
    PyBuffer_Release(&buffer);
    PyObject *result;
    if (failed) {
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        PyErr_NormalizeException(&type, &value, &traceback);
        if (traceback != NULL) PyException_SetTraceback(value, traceback);
        result = after_read(reader, size, consumed, out.data, out.size, value);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
    } else if (consumed < size || out.size == 0) {
        result = after_read(reader, size, consumed, out.data, out.size, NULL);
    } else {
        /* Every request answered: the answers go now, or what the socket does not take
         * goes to the Python way, which hands it to trio. */
        ssize_t sent;
        do sent = write(reader->fd, out.data, (size_t)out.size);
        while (sent < 0 && errno == EINTR);
        if (sent == out.size) result = Py_NewRef(Py_None);
        else {
            Py_ssize_t skip = sent > 0 ? sent : 0;
            result = after_read(reader, size, size, out.data + skip, out.size - skip, NULL);
        }
    }
    PyMem_Free(out.data);
    return result;
}

/* Reader(lane_api, lane, fd, receive_buffer, wire, node_id, on_readable, after_read,
 *        first_read, max_read, shrink_after); lane_api: the lane module's `c_api` capsule */
static PyObject *reader_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *capsule, *lane, *receive_buffer, *wire, *node, *on_readable, *after;
    int fd, shrink_after;
    Py_ssize_t first_read, max_read;
    if (!PyArg_ParseTuple(args, "OOiOOOOOnni:Reader", &capsule, &lane, &fd, &receive_buffer,
                          &wire, &node, &on_readable, &after, &first_read, &max_read,
                          &shrink_after))
        return NULL;
    const ProduceLaneApi *api = PyCapsule_GetPointer(capsule, PRODUCE_LANE_CAPSULE);
    if (api == NULL) return NULL;
    if (!PyObject_TypeCheck(lane, api->lane_type)) {
        PyErr_SetString(PyExc_TypeError, "Reader: lane must be the lane of lane_api");
        return NULL;
    }
    Reader *reader = (Reader *)type->tp_alloc(type, 0);
    if (reader == NULL) return NULL;
    reader->api = api;
    reader->lane = Py_NewRef(lane);
    reader->fd = fd;
    reader->receive_buffer = Py_NewRef(receive_buffer);
    reader->wire = Py_NewRef(wire);
    reader->node = Py_NewRef(node);
    reader->on_readable = Py_NewRef(on_readable);
    reader->after_read = Py_NewRef(after);
    reader->ready = 1;
    reader->read_size = reader->first_read = first_read;
    reader->max_read = max_read;
    reader->small_reads = 0;
    reader->shrink_after = shrink_after;
    reader->vectorcall = (vectorcallfunc)reader_call;
    return (PyObject *)reader;
}


static int reader_traverse(Reader *reader, visitproc visit, void *arg) {
    Py_VISIT(reader->lane);
    Py_VISIT(reader->receive_buffer);
    Py_VISIT(reader->wire);
    Py_VISIT(reader->node);
    Py_VISIT(reader->on_readable);
    Py_VISIT(reader->after_read);
    return 0;
}

static int reader_clear(Reader *reader) {
    Py_CLEAR(reader->lane);
    Py_CLEAR(reader->receive_buffer);
    Py_CLEAR(reader->wire);
    Py_CLEAR(reader->node);
    Py_CLEAR(reader->on_readable);
    Py_CLEAR(reader->after_read);
    return 0;
}

static void reader_dealloc(Reader *reader) {
    PyObject_GC_UnTrack(reader);
    reader_clear(reader);
    Py_TYPE(reader)->tp_free((PyObject *)reader);
}

static PyMemberDef reader_members[] = {
    {"ready", T_INT, offsetof(Reader, ready), 0,
     "Whether the next read is this reader's: set by the Python side (nothing of a frame "
     "buffered, no read budget held)."},
    {"read_size", T_PYSSIZET, offsetof(Reader, read_size), READONLY,
     "How much the next read takes."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nullbroker.net._lane_reader.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A hosted connection's handler on the host loop: reads, answers through the "
              "lane and writes without Python when it can (nullbroker/net/hosted_connection.py).",
    .tp_new = reader_new,
    .tp_traverse = (traverseproc)reader_traverse,
    .tp_clear = (inquiry)reader_clear,
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_vectorcall_offset = offsetof(Reader, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_members = reader_members,
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "nullbroker.net._lane_reader",
    "A plain-TCP connection's reader in C (see nullbroker/net/lane_reader.py).", -1, NULL,
};

PyMODINIT_FUNC PyInit__lane_reader(void) {
    if (intern_lane_attributes() < 0 || PyType_Ready(&ReaderType) < 0) return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) return NULL;
    if (PyModule_AddObjectRef(module, "Reader", (PyObject *)&ReaderType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
