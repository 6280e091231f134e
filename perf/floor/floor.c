/*
 * floor: the least a Kafka broker can do for a producer, so that perf.compare can measure
 * what the kernel and the wire cost on their own: nullbroker's CPU per GB read as a ratio
 * to this program's is how far the broker is from the floor.
 *
 * It listens on 127.0.0.1 (a port the OS picks), prints
 *
 *     floor listening on 127.0.0.1:PORT (topic T, N partitions; answers recorded from
 *     librdkafka's mock in DIR)
 *
 * and serves every connection from one epoll loop: each read takes what the socket holds
 * into the connection's buffer, every complete request in it is answered, and the answers
 * of a read go out with one send, as nullbroker's loop does. It answers
 *
 *   - ApiVersions, Metadata and InitProducerId with answers recorded from librdkafka's mock
 *     (tests/vectors/frames, see its README), only the correlation id patched, and in
 *     Metadata the port of the one broker it names: this one;
 *   - every Produce with a pre-encoded answer: the correlation id, and the topics and
 *     partitions of the request, each partition answered with the recorded bytes of one
 *     partition of a recorded Produce answer (no error, the same offsets every time);
 *     acks=0 gets no answer, as from Kafka;
 *
 * and nothing else: a request of any other API or version closes its connection, with a
 * line on stderr. It reads every byte of every request (the records are skipped over, never
 * looked at) and keeps no accounts but requests and bytes, printed on stdout at exit:
 *
 *     floor served N requests (P Produce) on C connections: R bytes read, S bytes sent
 *
 * The recorded ApiVersions answers list the mock's APIs, which the floor lists too (clients
 * choose their features by them: librdkafka writes record batches v2 only to a broker that
 * lists Fetch v4+), all but client telemetry: the mock asked for it, nullbroker and Kafka
 * 4.1 (without a metrics plugin) do not list it, and a client told of it sends requests
 * every few seconds that the floor would have to answer.
 *
 * Exits 0 on SIGTERM or SIGINT, and when the process that started it exits.
 *
 * T is the one topic of the recorded Metadata answer: the topic its producers send to.
 *
 *     floor FRAMES_DIR
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

enum { PRODUCE = 0, METADATA = 3, API_VERSIONS = 18, INIT_PRODUCER_ID = 22 };

enum {
    MAX_EVENTS = 64,
    READ_BYTES = 256 * 1024,  /* a read's room, as nullbroker's loop reads at most */
    MAX_FRAME = 100 * 1024 * 1024, /* Kafka's socket.request.max.bytes */
    LISTEN_BACKLOG = 128,
    SIZE_PREFIX = 4,
    CORRELATION_ID = 4,
};

/* A recorded answer: the frame's bytes after its correlation id. */
struct answer {
    int api_key;
    int version;
    const char *file;
    unsigned char *rest;
    size_t rest_len;
};

/* The recorded answers, by API and version: what the clients perf.compare runs ask for,
 * given the version ranges the recorded ApiVersions answers advertise. */
static struct answer answers[] = {
    {API_VERSIONS, 0, "librdkafka-2.16/002-ApiVersions-v0-response.bin", NULL, 0},
    {API_VERSIONS, 2, "java-4.0/002-ApiVersions-v2-response.bin", NULL, 0},
    {METADATA, 13, "librdkafka-2.16/003-Metadata-v13-response.bin", NULL, 0},
    {INIT_PRODUCER_ID, 4, "librdkafka-2.16/020-InitProducerId-v4-response.bin", NULL, 0},
};
#define ANSWERS (sizeof answers / sizeof answers[0])

/* ApiVersions of a version the floor has no answer for gets this one: Kafka's UNSUPPORTED
 * VERSION in a v0 body listing ApiVersions 0-2 (KIP-511), recorded from the shim that sat
 * before the mock; the client asks again with v2. */
static struct answer unsupported_api_versions = {
    API_VERSIONS, -1, "java-4.0/001-ApiVersions-v4-response.bin", NULL, 0};
#define LAST_ANSWERED_API_VERSIONS 2

/* A partition of a recorded Produce v10 answer, after its index: error code, base offset,
 * log append time, log start offset, record errors, error message, tagged fields. */
static const char *recorded_produce = "java-4.0/016-Produce-v10-response.bin";
#define PRODUCE_VERSION 10
enum { PARTITION_TAIL = 2 + 8 + 8 + 8 + 1 + 1 + 1 };
static unsigned char partition_tail[PARTITION_TAIL];

enum { GET_TELEMETRY_SUBSCRIPTIONS = 71, PUSH_TELEMETRY = 72 };

struct counts {
    unsigned long long requests, produce, bytes_read, bytes_sent, connections;
};
static struct counts counts;

struct connection {
    int fd;
    unsigned char *in;
    size_t in_cap, in_start, in_end;
    unsigned char *out;
    size_t out_cap, out_start, out_end;
    int waiting_for_room;
};

static volatile sig_atomic_t stopping;

static void on_stop(int signum) {
    (void)signum;
    stopping = 1;
}

static void fail(const char *what) {
    perror(what);
    exit(1);
}

static unsigned char *read_file(const char *dir, const char *name, size_t *len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *file = fopen(path, "rb");
    if (!file) fail(path);
    if (fseek(file, 0, SEEK_END) != 0) fail(path);
    long size = ftell(file);
    rewind(file);
    unsigned char *data = malloc(size > 0 ? (size_t)size : 1);
    if (!data || fread(data, 1, (size_t)size, file) != (size_t)size) fail(path);
    fclose(file);
    *len = (size_t)size;
    return data;
}

static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_u32(unsigned char *p, uint32_t v) {
    p[0] = v >> 24;
    p[1] = v >> 16;
    p[2] = v >> 8;
    p[3] = v;
}

/* A cursor over a request or a recorded answer; `bad` once a read went past the end. */
struct cursor {
    const unsigned char *p, *end;
    int bad;
};

static const unsigned char *take(struct cursor *c, size_t n) {
    if (c->bad || (size_t)(c->end - c->p) < n) {
        c->bad = 1;
        return NULL;
    }
    const unsigned char *at = c->p;
    c->p += n;
    return at;
}

static uint64_t uvarint(struct cursor *c) {
    uint64_t value = 0;
    for (int shift = 0; shift < 35; shift += 7) {
        const unsigned char *b = take(c, 1);
        if (!b) return 0;
        value |= (uint64_t)(*b & 0x7f) << shift;
        if (!(*b & 0x80)) return value;
    }
    c->bad = 1;
    return 0;
}

static void skip_tagged_fields(struct cursor *c) {
    for (uint64_t n = uvarint(c); n > 0 && !c->bad; n--) {
        uvarint(c);
        take(c, uvarint(c));
    }
}

/* A compact string, bytes or array length: the uvarint N+1 (0 for null) read as N. */
static uint64_t compact_length(struct cursor *c) {
    uint64_t n = uvarint(c);
    return n ? n - 1 : 0;
}

/* Whether a request of this API and version has the flexible header (v2, tagged fields). */
static int flexible_request(int key, int version) {
    switch (key) {
    case PRODUCE: return version >= 9;
    case METADATA: return version >= 9;
    case API_VERSIONS: return version >= 3;
    case INIT_PRODUCER_ID: return version >= 2;
    default: return 0;
    }
}

static int telemetry(int key) {
    return key == GET_TELEMETRY_SUBSCRIPTIONS || key == PUSH_TELEMETRY;
}

/* ApiVersions v0-v2 after the correlation id: error code, an int32 count of 6-byte
 * entries, then (v1+) the throttle time. Drops the entries of client telemetry. */
static void unlist_telemetry(struct answer *a) {
    if (a->rest_len < 6) fail("ApiVersions answer too short");
    uint32_t n = get_u32(a->rest + 2);
    if (6 + (size_t)n * 6 > a->rest_len) fail("ApiVersions answer too short");
    unsigned char *entries = a->rest + 6, *kept = entries;
    uint32_t count = 0;
    for (uint32_t i = 0; i < n; i++) {
        unsigned char *entry = entries + (size_t)i * 6;
        if (!telemetry(entry[0] << 8 | entry[1])) {
            memmove(kept, entry, 6);
            kept += 6;
            count++;
        }
    }
    unsigned char *after = entries + (size_t)n * 6;
    size_t tail = (size_t)(a->rest + a->rest_len - after);
    memmove(kept, after, tail);
    a->rest_len = (size_t)(kept - a->rest) + tail;
    put_u32(a->rest + 2, count);
}

/* The one topic the recorded Metadata answer names, printed on the ready line: the topic
 * producers must send to, since the floor names no other. */
static char topic[256];
static uint64_t topic_partitions;

/* Metadata v10+ after the correlation id: header tagged fields, throttle time, the
 * brokers (node id, host, port, rack, tagged fields), each port made ours; then cluster
 * id, controller id and the topics (error code, name, topic id, is internal, partitions),
 * of which the first is kept as `topic`. */
static void advertise_port(struct answer *a, uint16_t port) {
    struct cursor c = {a->rest, a->rest + a->rest_len, 0};
    skip_tagged_fields(&c);
    take(&c, 4);
    for (uint64_t n = compact_length(&c); n > 0 && !c.bad; n--) {
        take(&c, 4);
        take(&c, compact_length(&c));
        unsigned char *at = (unsigned char *)take(&c, 4);
        if (at) put_u32(at, port);
        take(&c, compact_length(&c));
        skip_tagged_fields(&c);
    }
    take(&c, compact_length(&c));
    take(&c, 4);
    if (compact_length(&c) < 1) c.bad = 1;
    take(&c, 2);
    uint64_t name_len = compact_length(&c);
    const unsigned char *name = take(&c, name_len);
    take(&c, 16 + 1);
    topic_partitions = compact_length(&c);
    if (c.bad || name_len >= sizeof topic) fail("Metadata answer: not laid out as v10+");
    memcpy(topic, name, name_len);
}

/* The recorded Produce v10 answer's first partition, after its index. */
static void load_partition_tail(const char *dir) {
    size_t len;
    unsigned char *frame = read_file(dir, recorded_produce, &len);
    struct cursor c = {frame, frame + len, 0};
    take(&c, CORRELATION_ID);
    skip_tagged_fields(&c);
    if (compact_length(&c) < 1) c.bad = 1;
    take(&c, compact_length(&c));
    if (compact_length(&c) < 1) c.bad = 1;
    take(&c, 4);
    const unsigned char *tail = take(&c, PARTITION_TAIL);
    if (!tail) fail("Produce answer: no partition where v10 has one");
    memcpy(partition_tail, tail, PARTITION_TAIL);
    free(frame);
}

static void load_answer(const char *dir, struct answer *a) {
    size_t len;
    unsigned char *frame = read_file(dir, a->file, &len);
    if (len < CORRELATION_ID) fail(a->file);
    a->rest_len = len - CORRELATION_ID;
    a->rest = malloc(a->rest_len ? a->rest_len : 1);
    if (!a->rest) fail("malloc");
    memcpy(a->rest, frame + CORRELATION_ID, a->rest_len);
    free(frame);
}

static void load_answers(const char *dir, uint16_t port) {
    for (size_t i = 0; i < ANSWERS; i++) {
        load_answer(dir, &answers[i]);
        if (answers[i].api_key == API_VERSIONS) unlist_telemetry(&answers[i]);
        if (answers[i].api_key == METADATA) advertise_port(&answers[i], port);
    }
    load_answer(dir, &unsupported_api_versions);
    load_partition_tail(dir);
}

static const struct answer *recorded(int key, int version) {
    for (size_t i = 0; i < ANSWERS; i++)
        if (answers[i].api_key == key && answers[i].version == version) return &answers[i];
    if (key == API_VERSIONS && version > LAST_ANSWERED_API_VERSIONS)
        return &unsupported_api_versions;
    return NULL;
}

/* Room for `n` more bytes of answers. */
static unsigned char *out_room(struct connection *conn, size_t n) {
    if (conn->out_end + n > conn->out_cap) {
        size_t cap = conn->out_cap ? conn->out_cap : 4096;
        while (conn->out_end + n > cap) cap *= 2;
        unsigned char *grown = realloc(conn->out, cap);
        if (!grown) fail("realloc");
        conn->out = grown;
        conn->out_cap = cap;
    }
    return conn->out + conn->out_end;
}

static void put_bytes(struct connection *conn, const void *bytes, size_t n) {
    memcpy(out_room(conn, n), bytes, n);
    conn->out_end += n;
}

static void put_recorded(struct connection *conn, const unsigned char *correlation,
                         const struct answer *a) {
    unsigned char *at = out_room(conn, SIZE_PREFIX + CORRELATION_ID + a->rest_len);
    put_u32(at, (uint32_t)(CORRELATION_ID + a->rest_len));
    memcpy(at + SIZE_PREFIX, correlation, CORRELATION_ID);
    memcpy(at + SIZE_PREFIX + CORRELATION_ID, a->rest, a->rest_len);
    conn->out_end += SIZE_PREFIX + CORRELATION_ID + a->rest_len;
}

/* Produce v10's body (after the request header): the answer names each topic and
 * partition of the request, in its order, each partition with the recorded tail. Returns
 * 0 on a malformed body. */
static int answer_produce(struct connection *conn, const unsigned char *correlation,
                          struct cursor *c) {
    take(c, compact_length(c)); /* transactional id */
    const unsigned char *acks = take(c, 2);
    take(c, 4); /* timeout */
    if (c->bad) return 0;
    int answered = !(acks[0] == 0 && acks[1] == 0);
    size_t start = conn->out_end;
    if (answered) {
        put_bytes(conn, "\0\0\0\0", SIZE_PREFIX);
        put_bytes(conn, correlation, CORRELATION_ID);
        put_bytes(conn, "", 1); /* response header v1: no tagged fields */
    }
    const unsigned char *topics_at = c->p;
    uint64_t topics = compact_length(c);
    if (answered) put_bytes(conn, topics_at, (size_t)(c->p - topics_at));
    for (; topics > 0 && !c->bad; topics--) {
        const unsigned char *name_at = c->p;
        take(c, compact_length(c));
        uint64_t partitions = compact_length(c);
        if (c->bad) break;
        /* The topic's name and its count of partitions, as the request has them. */
        if (answered) put_bytes(conn, name_at, (size_t)(c->p - name_at));
        for (; partitions > 0 && !c->bad; partitions--) {
            const unsigned char *index = take(c, 4);
            take(c, compact_length(c)); /* the records: skipped, never looked at */
            skip_tagged_fields(c);
            if (answered && index) {
                put_bytes(conn, index, 4);
                put_bytes(conn, partition_tail, PARTITION_TAIL);
            }
        }
        skip_tagged_fields(c);
        if (answered) put_bytes(conn, "", 1); /* the topic's tagged fields */
    }
    skip_tagged_fields(c);
    if (c->bad || c->p != c->end) {
        conn->out_end = start;
        return 0;
    }
    if (answered) {
        put_bytes(conn, "\0\0\0\0", 4); /* throttle time */
        put_bytes(conn, "", 1);         /* tagged fields */
        put_u32(conn->out + start, (uint32_t)(conn->out_end - start - SIZE_PREFIX));
    }
    return 1;
}

/* One request (its bytes after the size prefix): its answer appended to the connection's
 * output. Returns 0 when it is not one the floor answers. */
static int answer(struct connection *conn, const unsigned char *frame, size_t len) {
    struct cursor c = {frame, frame + len, 0};
    const unsigned char *header = take(&c, 8);
    if (!header) return 0;
    int key = header[0] << 8 | header[1];
    int version = header[2] << 8 | header[3];
    const unsigned char *correlation = header + 4;
    const unsigned char *client_id_len = take(&c, 2);
    if (client_id_len) {
        int16_t n = (int16_t)(client_id_len[0] << 8 | client_id_len[1]);
        if (n > 0) take(&c, (size_t)n);
    }
    if (flexible_request(key, version)) skip_tagged_fields(&c);
    if (c.bad) return 0;
    counts.requests++;
    if (key == PRODUCE && version == PRODUCE_VERSION) {
        counts.produce++;
        return answer_produce(conn, correlation, &c);
    }
    const struct answer *a = recorded(key, version);
    if (!a) {
        fprintf(stderr, "floor: no answer for API %d v%d: closing the connection\n", key,
                version);
        return 0;
    }
    put_recorded(conn, correlation, a);
    return 1;
}

static void close_connection(int epoll_fd, struct connection *conn) {
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, conn->fd, NULL);
    close(conn->fd);
    free(conn->in);
    free(conn->out);
    free(conn);
}

/* Sends what answers wait; returns 0 when the connection is gone. Watches for room to
 * write only while answers wait. */
static int flush(int epoll_fd, struct connection *conn) {
    while (conn->out_start < conn->out_end) {
        ssize_t sent = send(conn->fd, conn->out + conn->out_start,
                            conn->out_end - conn->out_start, MSG_NOSIGNAL);
        if (sent < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN) return 0;
            if (!conn->waiting_for_room) {
                struct epoll_event event = {.events = EPOLLIN | EPOLLOUT, .data.ptr = conn};
                epoll_ctl(epoll_fd, EPOLL_CTL_MOD, conn->fd, &event);
                conn->waiting_for_room = 1;
            }
            return 1;
        }
        counts.bytes_sent += (size_t)sent;
        conn->out_start += (size_t)sent;
    }
    conn->out_start = conn->out_end = 0;
    if (conn->waiting_for_room) {
        struct epoll_event event = {.events = EPOLLIN, .data.ptr = conn};
        epoll_ctl(epoll_fd, EPOLL_CTL_MOD, conn->fd, &event);
        conn->waiting_for_room = 0;
    }
    return 1;
}

/* One read of the connection, every complete request in it answered, the answers sent.
 * Returns 0 when the connection is to close. */
static int serve(int epoll_fd, struct connection *conn) {
    if (conn->in_cap - conn->in_end < READ_BYTES / 4 && conn->in_start > 0) {
        memmove(conn->in, conn->in + conn->in_start, conn->in_end - conn->in_start);
        conn->in_end -= conn->in_start;
        conn->in_start = 0;
    }
    ssize_t got = recv(conn->fd, conn->in + conn->in_end, conn->in_cap - conn->in_end, 0);
    if (got <= 0) return got < 0 && (errno == EAGAIN || errno == EINTR);
    counts.bytes_read += (size_t)got;
    conn->in_end += (size_t)got;
    while (conn->in_end - conn->in_start >= SIZE_PREFIX) {
        uint32_t size = get_u32(conn->in + conn->in_start);
        if (size > MAX_FRAME) return 0;
        size_t whole = SIZE_PREFIX + (size_t)size;
        if (conn->in_end - conn->in_start < whole) {
            /* A frame larger than the room left: room for all of it. */
            if (conn->in_cap - conn->in_start < whole) {
                memmove(conn->in, conn->in + conn->in_start, conn->in_end - conn->in_start);
                conn->in_end -= conn->in_start;
                conn->in_start = 0;
                if (conn->in_cap < whole) {
                    unsigned char *grown = realloc(conn->in, whole);
                    if (!grown) fail("realloc");
                    conn->in = grown;
                    conn->in_cap = whole;
                }
            }
            break;
        }
        if (!answer(conn, conn->in + conn->in_start + SIZE_PREFIX, size)) return 0;
        conn->in_start += whole;
    }
    if (conn->in_start == conn->in_end) conn->in_start = conn->in_end = 0;
    return flush(epoll_fd, conn);
}

static void accept_all(int epoll_fd, int listener) {
    for (;;) {
        int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        struct connection *conn = calloc(1, sizeof *conn);
        if (!conn) fail("calloc");
        conn->fd = fd;
        conn->in_cap = READ_BYTES;
        conn->in = malloc(conn->in_cap);
        if (!conn->in) fail("malloc");
        struct epoll_event event = {.events = EPOLLIN, .data.ptr = conn};
        if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) fail("epoll_ctl");
        counts.connections++;
    }
}

static int listen_on_loopback(uint16_t *port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) fail("socket");
    struct sockaddr_in address = {.sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t length = sizeof address;
    if (bind(fd, (struct sockaddr *)&address, length) != 0) fail("bind");
    if (listen(fd, LISTEN_BACKLOG) != 0) fail("listen");
    if (getsockname(fd, (struct sockaddr *)&address, &length) != 0) fail("getsockname");
    *port = ntohs(address.sin_port);
    return fd;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s FRAMES_DIR (tests/vectors/frames)\n", argv[0]);
        return 2;
    }
    /* SIGTERM and SIGINT are let in only while the loop waits: a signal ends the wait. */
    sigset_t stop_signals, waiting;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    sigprocmask(SIG_BLOCK, &stop_signals, &waiting);
    sigdelset(&waiting, SIGTERM);
    sigdelset(&waiting, SIGINT);
    struct sigaction action = {.sa_handler = on_stop};
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
    pid_t parent = getppid();
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) return 0; /* the parent left before we asked to be told */

    uint16_t port;
    int listener = listen_on_loopback(&port);
    load_answers(argv[1], port);
    int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd < 0) fail("epoll_create1");
    struct epoll_event event = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listener, &event) != 0) fail("epoll_ctl");
    printf("floor listening on 127.0.0.1:%u (topic %s, %llu partitions; answers recorded from "
           "librdkafka's mock in %s)\n",
           port, topic, (unsigned long long)topic_partitions, argv[1]);
    fflush(stdout);

    struct epoll_event events[MAX_EVENTS];
    while (!stopping) {
        int ready = epoll_pwait(epoll_fd, events, MAX_EVENTS, -1, &waiting);
        if (ready < 0) {
            if (errno == EINTR) continue;
            fail("epoll_pwait");
        }
        for (int i = 0; i < ready; i++) {
            struct connection *conn = events[i].data.ptr;
            if (!conn) {
                accept_all(epoll_fd, listener);
                continue;
            }
            int open = 1;
            if (events[i].events & EPOLLOUT) open = flush(epoll_fd, conn);
            if (open && events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                open = serve(epoll_fd, conn);
            if (!open) close_connection(epoll_fd, conn);
        }
    }
    printf("floor served %llu requests (%llu Produce) on %llu connections: %llu bytes read, "
           "%llu bytes sent\n",
           counts.requests, counts.produce, counts.connections, counts.bytes_read,
           counts.bytes_sent);
    return 0;
}
