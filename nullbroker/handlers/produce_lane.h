/* The Produce lane's C interface (nullbroker/handlers/_produce_lane.c), for the connection
 * layer's reader (nullbroker/net/_lane_reader.c): the reader hands each read to the lane
 * through a function pointer, so a request costs no Python call between the two. The lane's
 * module publishes the interface as the capsule `c_api`, which handlers/produce_lane.py hands
 * on (`c_interface()`); the reader takes it once, when it is made.
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
