/* The one protobuf body the simulator reads: kubectl's DeleteOptions. */
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdio.h>

#include "sim/server_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

/* ---- protobuf DeleteOptions ---- */

static int pb_varint(const unsigned char **p, const unsigned char *end, uint64_t *ret)
{
        uint64_t v = 0;
        for (unsigned shift = 0; shift < 64; shift += 7) {
                if (*p >= end)
                        return -EBADMSG;
                unsigned char b = *(*p)++;
                v |= (uint64_t)(b & 0x7f) << shift;
                if (!(b & 0x80)) {
                        *ret = v;
                        return 0;
                }
        }
        return -EBADMSG;
}

/* Walks one message; for each length-delimited or varint field calls back with its number and value. */
struct pb_field {
        unsigned number;
        uint64_t varint;
        const unsigned char *data;
        size_t len;
};

static int pb_next(const unsigned char **p, const unsigned char *end, struct pb_field *f)
{
        uint64_t key, len;
        int r;

        r = pb_varint(p, end, &key);
        if (r < 0)
                return r;
        *f = (struct pb_field){ .number = (unsigned)(key >> 3) };
        switch (key & 7) {
        case 0:
                return pb_varint(p, end, &f->varint);
        case 1:
                if (end - *p < 8)
                        return -EBADMSG;
                *p += 8;
                return 0;
        case 2:
                r = pb_varint(p, end, &len);
                if (r < 0)
                        return r;
                if (len > (uint64_t)(end - *p))
                        return -EBADMSG;
                f->data = *p;
                f->len = (size_t)len;
                *p += len;
                return 0;
        case 5:
                if (end - *p < 4)
                        return -EBADMSG;
                *p += 4;
                return 0;
        default:
                return -EBADMSG;
        }
}

int sim_protobuf_delete_options(const void *data, size_t len, int64_t *ret_grace, char **ret_uid)
{
        const unsigned char *p = data, *end = p + len, *raw = NULL, *q, *qend;
        _cleanup_free_ char *uid = NULL;
        int64_t grace = -1;
        size_t raw_len = 0;
        struct pb_field f;
        int r;

        if (len < 4 || memcmp(p, "k8s\0", 4) != 0)
                return -EBADMSG;
        p += 4;
        /* runtime.Unknown: 1 typeMeta, 2 raw, 3 contentEncoding, 4 contentType */
        while (p < end) {
                r = pb_next(&p, end, &f);
                if (r < 0)
                        return r;
                if (f.number == 2 && f.data) {
                        raw = f.data;
                        raw_len = f.len;
                }
        }
        /* DeleteOptions: 1 gracePeriodSeconds, 2 preconditions { 1 uid, 2 resourceVersion } */
        for (q = raw, qend = raw ? raw + raw_len : NULL; q && q < qend;) {
                r = pb_next(&q, qend, &f);
                if (r < 0)
                        return r;
                if (f.number == 1 && !f.data)
                        grace = (int64_t)f.varint;
                else if (f.number == 2 && f.data) {
                        const unsigned char *c = f.data, *cend = f.data + f.len;
                        struct pb_field g;
                        while (c < cend) {
                                r = pb_next(&c, cend, &g);
                                if (r < 0)
                                        return r;
                                if (g.number == 1 && g.data) {
                                        free(uid);
                                        uid = strndup((const char *)g.data, g.len);
                                        if (!uid)
                                                return -ENOMEM;
                                }
                        }
                }
        }
        *ret_grace = grace;
        *ret_uid = TAKE_PTR(uid);
        return 0;
}
