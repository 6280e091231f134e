/* Kafka's wire types, read from and written to C buffers: shared by codec/_native.c (the
 * Produce codec) and nullbroker/_produce_lane.c (the Produce request answered whole).
 *
 * A Cursor reads big-endian integers and unsigned varints, checking every length against
 * the bytes left; once a read fails the cursor stays failed and reads return 0. An Output
 * grows a PyMem buffer; once a write fails (no memory) it stays failed.
 */
#ifndef NULLBROKER_KAFKA_WIRE_H
#define NULLBROKER_KAFKA_WIRE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const uint8_t *data;
    Py_ssize_t pos;
    Py_ssize_t end;
    int failed;
} Cursor;

static inline int need(Cursor *c, Py_ssize_t n) {
    if (c->failed || n < 0 || c->end - c->pos < n) {
        c->failed = 1;
        return 0;
    }
    return 1;
}

static inline int16_t read_i16(Cursor *c) {
    if (!need(c, 2)) return 0;
    const uint8_t *p = c->data + c->pos;
    c->pos += 2;
    return (int16_t)((p[0] << 8) | p[1]);
}

static inline int32_t read_i32(Cursor *c) {
    if (!need(c, 4)) return 0;
    const uint8_t *p = c->data + c->pos;
    c->pos += 4;
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

static inline uint64_t be64(const uint8_t *p) {
    uint64_t value = 0;
    for (int i = 0; i < 8; i++) value = (value << 8) | p[i];
    return value;
}

static inline uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* Kafka's unsigned varint, at most 5 bytes, as codec.produce._read_uvarint reads it. */
static inline uint64_t read_uvarint(Cursor *c) {
    uint64_t value = 0;
    for (int shift = 0; shift <= 28; shift += 7) {
        if (!need(c, 1)) return 0;
        uint8_t byte = c->data[c->pos++];
        value |= (uint64_t)(byte & 0x7F) << shift;
        if (byte <= 0x7F) return value;
    }
    c->failed = 1;
    return 0;
}

static inline void skip_tagged_fields(Cursor *c) {
    uint64_t count = read_uvarint(c);
    for (uint64_t i = 0; i < count && !c->failed; i++) {
        (void)read_uvarint(c);
        uint64_t size = read_uvarint(c);
        if (c->failed || size > (uint64_t)(c->end - c->pos)) {
            c->failed = 1;
            return;
        }
        c->pos += (Py_ssize_t)size;
    }
}

typedef struct {
    char *data;
    Py_ssize_t size;
    Py_ssize_t capacity;
    int failed;
} Output;

static inline int grow(Output *out, Py_ssize_t more) {
    if (out->failed) return 0;
    if (out->size + more <= out->capacity) return 1;
    Py_ssize_t capacity = out->capacity * 2 + more;
    char *data = PyMem_Realloc(out->data, (size_t)capacity);
    if (data == NULL) {
        PyErr_NoMemory();
        out->failed = 1;
        return 0;
    }
    out->data = data;
    out->capacity = capacity;
    return 1;
}

static inline void put(Output *out, const void *bytes, Py_ssize_t n) {
    if (!grow(out, n)) return;
    memcpy(out->data + out->size, bytes, (size_t)n);
    out->size += n;
}

static inline void put_be(Output *out, uint64_t value, int n) {
    if (!grow(out, n)) return;
    for (int i = n - 1; i >= 0; i--) {
        out->data[out->size + i] = (char)(value & 0xFF);
        value >>= 8;
    }
    out->size += n;
}

static inline void put_uvarint(Output *out, uint64_t value) {
    while (value > 0x7F) {
        uint8_t byte = (uint8_t)((value & 0x7F) | 0x80);
        put(out, &byte, 1);
        value >>= 7;
    }
    uint8_t last = (uint8_t)value;
    put(out, &last, 1);
}

#endif
