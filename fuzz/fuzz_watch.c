/* libFuzzer target for the Kubernetes watch stream's decoding (src/kube/watch_decode.c): any bytes are a
 * watch stream, cut into lines by kube_line_framer and each line decoded by kube_watch_decode as kube_watch
 * does (the last line without its newline too, up to its first NUL). Never a crash, a leak or undefined
 * behaviour; and the same stream however the network cuts it: fed in one piece, cut at points taken from
 * its own bytes, and with its first 1 KiB a byte at a time, the sequence of outcomes (each line's kind,
 * event type, Status code, resourceVersion and a checksum of its object; -EFBIG for a line too long) must
 * be the same. Every line is decoded, also after one at which kube_watch would stop and relist (an
 * unparsable line, a Status, an ERROR): the watch acts on a prefix of this sequence.
 *   make build/fuzz/fuzz_watch && build/fuzz/fuzz_watch CORPUS fuzz/seeds/fuzz_watch
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/kube.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_CUTS 4096
#define BYTEWISE 1024 /* the first bytes fed one at a time */
#define MAX_LINE 8192 /* small, so that -EFBIG is reached too */

struct outcome {
        uint64_t hash;   /* FNV-1a over everything decoded, in order */
        size_t lines;    /* lines handed over (the last one without a newline included) */
        int error;       /* -EFBIG, or -ENOMEM from a feed */
        size_t consumed; /* input bytes handed over as complete lines, newlines included */
};

static void mix(struct outcome *o, const void *p, size_t n)
{
        const unsigned char *b = p;
        for (size_t i = 0; i < n; i++)
                o->hash = (o->hash ^ b[i]) * 1099511628211ULL;
}

static void mix_int(struct outcome *o, long v)
{
        mix(o, &v, sizeof(v));
}

static void mix_str(struct outcome *o, const char *s)
{
        if (s)
                mix(o, s, strlen(s) + 1);
        else
                mix_int(o, -1);
}

/* One line: the decoder's answer must hang together, and goes into the outcome. */
static void decode(struct outcome *o, const char *line, size_t len)
{
        struct kube_watch_decoded d;
        enum kube_watch_line kind = kube_watch_decode(line, len, &d);
        if (kind != d.kind || kind > KUBE_WATCH_LINE_UNPARSABLE)
                abort();
        bool has_json = kind != KUBE_WATCH_LINE_EMPTY && kind != KUBE_WATCH_LINE_UNPARSABLE;
        if (has_json != (d.json != NULL))
                abort();
        if (d.code != 0 && kind != KUBE_WATCH_LINE_ERROR && kind != KUBE_WATCH_LINE_STATUS)
                abort();
        if ((d.object || d.rv) && (kind == KUBE_WATCH_LINE_STATUS || !has_json))
                abort();
        if (kind == KUBE_WATCH_LINE_EVENT && d.type != KUBE_EVENT_ADDED && d.type != KUBE_EVENT_MODIFIED &&
            d.type != KUBE_EVENT_DELETED)
                abort();
        mix_int(o, kind);
        mix_int(o, kind == KUBE_WATCH_LINE_EVENT ? (long)d.type : -1);
        mix_int(o, d.code);
        mix_str(o, d.rv);
        char *printed = d.object ? cJSON_PrintUnformatted(d.object) : NULL;
        mix_str(o, printed);
        free(printed);
        kube_watch_decoded_clear(&d);
        if (d.json || d.object || d.rv)
                abort();
        o->lines++;
}

/* Feeds data in pieces ending at cuts[] (ascending, inside (0, size)), taking every complete line after
 * each piece; then decodes the rest as kube_watch does at the stream's end. */
static void feed(const uint8_t *data, size_t size, const size_t *cuts, size_t n_cuts, struct outcome *o)
{
        *o = (struct outcome){ .hash = 1469598103934665603ULL };
        struct kube_line_framer f;
        kube_line_framer_init(&f, MAX_LINE);
        size_t fed = 0;
        for (size_t i = 0; i <= n_cuts && !o->error; i++) {
                size_t end = i < n_cuts ? cuts[i] : size;
                if (end <= fed)
                        continue;
                int r = kube_line_framer_feed(&f, data + fed, end - fed);
                fed = end;
                if (r < 0) {
                        o->error = r;
                        break;
                }
                const char *line;
                size_t len;
                while ((r = kube_line_framer_next(&f, &line, &len)) > 0) {
                        /* The input's next line, exactly, and within the limit. */
                        if (len > MAX_LINE || o->consumed + len >= fed ||
                            memcmp(line, data + o->consumed, len) != 0 || data[o->consumed + len] != '\n' ||
                            memchr(line, '\n', len))
                                abort();
                        o->consumed += len + 1;
                        decode(o, line, len);
                }
                if (r < 0) {
                        /* Too long, and it stays so. */
                        if (r != -EFBIG || kube_line_framer_next(&f, &line, &len) != -EFBIG)
                                abort();
                        o->error = r;
                        mix_int(o, r);
                }
        }
        if (!o->error) {
                /* The rest is what follows the last newline, at most MAX_LINE of it. */
                const char *rest;
                size_t n = kube_line_framer_rest(&f, &rest);
                if (o->consumed + n != size || n > MAX_LINE || memcmp(rest, data + o->consumed, n) != 0 ||
                    memchr(rest, '\n', n))
                        abort();
                if (n > 0)
                        decode(o, rest, strnlen(rest, n));
        }
        kube_line_framer_free(&f);
}

static void same(const struct outcome *a, const struct outcome *b)
{
        if (a->hash != b->hash || a->lines != b->lines || a->error != b->error)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static size_t cuts[MAX_CUTS];
        struct outcome whole, cut, bytewise;
        feed(data, size, NULL, 0, &whole);

        /* Cut points from the bytes themselves: steps of 1 to 32. */
        size_t n_cuts = 0;
        for (size_t off = 0; n_cuts < MAX_CUTS && off < size;) {
                off += 1 + data[off] % 32;
                if (off < size)
                        cuts[n_cuts++] = off;
        }
        feed(data, size, cuts, n_cuts, &cut);
        same(&whole, &cut);

        /* The first BYTEWISE bytes one at a time, then the rest in one piece. */
        n_cuts = 0;
        for (size_t off = 1; off < size && off <= BYTEWISE; off++)
                cuts[n_cuts++] = off;
        feed(data, size, cuts, n_cuts, &bytewise);
        same(&whole, &bytewise);
        return 0;
}
