/* The watch stream's decoding, apart from the network so that it can be tested and fuzzed: a line framer
 * (chunks in, complete lines out) and the decoder of one line (an event, a bookmark, an ERROR event or the
 * bare Status of a refused watch). kube_watch.c acts on what they hand over. */
#include <errno.h>
#include <string.h>

#include "spotdrain/kube.h"

void kube_line_framer_init(struct kube_line_framer *f, size_t max_line)
{
        *f = (struct kube_line_framer){ .max_line = max_line };
}

int kube_line_framer_feed(struct kube_line_framer *f, const void *data, size_t len)
{
        if (len == 0)
                return 0;
        /* Drop the lines handed over. What moves is what followed the last of them, which a caller that
         * takes every line before feeding again has fed once: each byte moves at most once. */
        if (f->start > 0) {
                memmove(f->buf.data, f->buf.data + f->start, f->buf.len - f->start);
                f->buf.len -= f->start;
                f->scanned = f->scanned > f->start ? f->scanned - f->start : 0;
                f->start = 0;
        }
        return buf_append(&f->buf, data, len);
}

int kube_line_framer_next(struct kube_line_framer *f, const char **line, size_t *len)
{
        size_t max = f->max_line ? f->max_line : KUBE_WATCH_MAX_LINE;
        size_t from = f->scanned > f->start ? f->scanned : f->start;
        const char *nl = from < f->buf.len ? memchr(f->buf.data + from, '\n', f->buf.len - from) : NULL;
        if (!nl) {
                f->scanned = f->buf.len;
                return f->buf.len - f->start > max ? -EFBIG : 0;
        }
        size_t end = (size_t)(nl - f->buf.data);
        if (end - f->start > max) {
                f->scanned = end; /* so that the next call finds the same line */
                return -EFBIG;
        }
        *line = f->buf.data + f->start;
        *len = end - f->start;
        f->start = f->scanned = end + 1;
        return 1;
}

size_t kube_line_framer_rest(const struct kube_line_framer *f, const char **line)
{
        *line = f->buf.data ? f->buf.data + f->start : "";
        return f->buf.len - f->start;
}

void kube_line_framer_reset(struct kube_line_framer *f)
{
        f->buf.len = f->start = f->scanned = 0;
}

void kube_line_framer_release(struct kube_line_framer *f)
{
        if (f->start == f->buf.len)
                kube_line_framer_free(f);
}

void kube_line_framer_free(struct kube_line_framer *f)
{
        buf_free(&f->buf);
        f->start = f->scanned = 0;
}

static int status_code(const cJSON *status)
{
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(status, "code");
        return cJSON_IsNumber(code) ? code->valueint : 0;
}

enum kube_watch_line kube_watch_decode(const char *line, size_t len, struct kube_watch_decoded *ret)
{
        *ret = (struct kube_watch_decoded){ .kind = KUBE_WATCH_LINE_EMPTY };
        while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' '))
                len--;
        if (len == 0)
                return ret->kind;
        ret->json = cJSON_ParseWithLength(line, len);
        if (!ret->json)
                return ret->kind = KUBE_WATCH_LINE_UNPARSABLE;
        const char *type = kube_object_str(ret->json, "type");
        if (!type) {
                /* Not an event: the Status body of a refused watch (e.g. 410 answered directly). */
                ret->code = status_code(ret->json);
                return ret->kind = KUBE_WATCH_LINE_STATUS;
        }
        ret->object = cJSON_GetObjectItemCaseSensitive(ret->json, "object");
        ret->rv = kube_object_rv(ret->object);
        if (streq(type, "BOOKMARK"))
                ret->kind = KUBE_WATCH_LINE_BOOKMARK;
        else if (streq(type, "ERROR")) {
                ret->kind = KUBE_WATCH_LINE_ERROR;
                ret->code = status_code(ret->object);
        } else if (streq(type, "ADDED") || streq(type, "MODIFIED") || streq(type, "DELETED")) {
                ret->kind = KUBE_WATCH_LINE_EVENT;
                ret->type = type[0] == 'A'   ? KUBE_EVENT_ADDED
                            : type[0] == 'M' ? KUBE_EVENT_MODIFIED
                                             : KUBE_EVENT_DELETED;
        } else
                ret->kind = KUBE_WATCH_LINE_UNKNOWN;
        return ret->kind;
}

void kube_watch_decoded_clear(struct kube_watch_decoded *d)
{
        cJSON_Delete(d->json);
        *d = (struct kube_watch_decoded){ .kind = KUBE_WATCH_LINE_EMPTY };
}
