/*
 * wire - the framed messages between the controller and its workers (wire.h). Every
 * message is a 4-byte big-endian length and that many bytes of JSON text that must be an
 * object. A reader checks the length before it allocates anything; a bad length leaves the
 * stream at an unknown position, so after one the peer is treated as broken.
 */
#include "core/wire.h"

#include "base/buf.h"
#include "base/fdio.h"
#include "base/mem.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Parse a complete message body; it must be one JSON object. */
static enum kevo_status wire_parse(const char *body, size_t len, json_t **out,
                                   struct kevo_wire_result *wr)
{
    json_error_t jerr;
    json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);

    if (!j) {
        snprintf(wr->why, sizeof wr->why, "message is not valid JSON: %s (at byte %d)",
                 jerr.text, jerr.position);
        return KEVO_ERR_PARSE;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        snprintf(wr->why, sizeof wr->why, "message is not a JSON object");
        return KEVO_ERR_PARSE;
    }
    *out = j;
    return KEVO_OK;
}

enum kevo_status kevo_wire_read(int fd, const double *deadline, json_t **out,
                                struct kevo_wire_result *wr)
{
    enum kevo_status st;
    unsigned char hdr[4];
    char *body = NULL;
    size_t got = 0, len;
    int eof = 0;

    *out = NULL;
    memset(wr, 0, sizeof *wr);
    st = kevo_fd_read_full(fd, hdr, sizeof hdr, deadline, &got, &eof);
    if (st) {
        wr->eof = eof && got == 0;
        wr->in_sync = got == 0;
        goto out;
    }
    len = (size_t)((uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 |
                   (uint32_t)hdr[2] << 8 | (uint32_t)hdr[3]);
    if (len == 0 || len > KEVO_WIRE_MAX) {
        /* Checked before allocating: a hostile length must not cost memory. */
        snprintf(wr->why, sizeof wr->why, "message length %zu is out of range (1..%u)",
                 len, KEVO_WIRE_MAX);
        wr->in_sync = len == 0;
        st = KEVO_ERR_PARSE;
        goto out;
    }
    body = kevo_malloc(len);
    if (!body) {
        st = KEVO_ERR_NOMEM;
        goto out;
    }
    st = kevo_fd_read_full(fd, body, len, deadline, &got, &eof);
    if (st)
        goto out;
    wr->in_sync = 1;
    st = wire_parse(body, len, out, wr);
out:
    kevo_free(body);
    return st;
}

enum kevo_status kevo_wire_recv(int fd, json_t **out)
{
    struct kevo_wire_result wr;

    return kevo_wire_read(fd, NULL, out, &wr);
}

enum kevo_status kevo_wire_recv_until(int fd, double deadline, json_t **out)
{
    struct kevo_wire_result wr;

    return kevo_wire_read(fd, &deadline, out, &wr);
}

/* json_dump_callback sink: append to a capped buffer, keeping why it stopped (the cap or
 * memory); returning -1 ends the dump at once. */
struct dump_sink {
    struct kevo_buf b;
    enum kevo_status st;
};

static int dump_to_buf(const char *p, size_t n, void *data)
{
    struct dump_sink *s = data;

    s->st = kevo_buf_add(&s->b, p, n);
    return s->st == KEVO_OK ? 0 : -1;
}

enum kevo_status kevo_wire_send(int fd, json_t *msg)
{
    enum kevo_status st;
    struct dump_sink s;
    size_t len;

    s.st = KEVO_OK;
    kevo_buf_init(&s.b, (size_t)KEVO_WIRE_MAX + 4);
    st = json_is_object(msg) ? kevo_buf_add(&s.b, "\0\0\0\0", 4) : KEVO_ERR_INVALID;
    if (st)
        goto out;
    if (json_dump_callback(msg, dump_to_buf, &s, JSON_COMPACT) != 0) {
        /* The sink stops only at the cap or out of memory; else jansson refused the value
         * (a string that is not UTF-8, a NaN real). */
        st = s.st ? s.st : KEVO_ERR_INVALID;
        goto out;
    }
    len = s.b.len - 4;   /* 1 .. KEVO_WIRE_MAX: an object is at least "{}", the cap holds */
    s.b.data[0] = (char)(len >> 24);
    s.b.data[1] = (char)(len >> 16);
    s.b.data[2] = (char)(len >> 8);
    s.b.data[3] = (char)len;
    st = kevo_fd_write_all(fd, s.b.data, s.b.len);
out:
    kevo_buf_free(&s.b);
    return st;
}
