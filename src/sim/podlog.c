/* GET /api/v1/namespaces/NS/pods/NAME/log: the lines a pod's container wrote, made up from what the model
 * knows of it (sim_pod_log_facts): a start line, a ready line, one line every LINE_PERIOD seconds while it
 * serves, the SIGTERM of its delete and, when its shutdown fits its grace period, its exit. They are a pure
 * function of those facts and the time, so every read and every follower sees the same lines.
 *
 * The query parameters are PodLogOptions' (container, follow, previous, sinceSeconds, sinceTime,
 * timestamps, tailLines, limitBytes) with kube-apiserver's validation; timestamps are in scenario time on
 * the wall clock (sim_wall_usec), like every other time the simulator shows. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "sim/server_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

#define LINE_PERIOD      15.0 /* scenario seconds between two "served" lines */
#define FOLLOW_POLL_USEC (200 * 1000)
#define CONTAINER        "app"

typedef void (*line_fn)(double t, const char *text, void *userdata);

static unsigned served_count(const char *uid, long k)
{
        uint64_t h = 1469598103934665603ULL;
        for (const char *p = uid; *p; p++)
                h = (h ^ (unsigned char)*p) * 1099511628211ULL;
        h = (h ^ (uint64_t)k) * 1099511628211ULL;
        return 40 + (unsigned)(h % 160);
}

/* Calls fn for every line written at a time in (after, upto], in order. */
static void pod_lines(const struct sim_pod_log_facts *f, double after, double upto, line_fn fn, void *ud)
{
        char text[1024];
        double alive_until = f->terminating ? f->sigterm_at : upto;

        if (!f->started)
                return;
        if (f->started_at > after && f->started_at <= upto) {
                snprintf(text, sizeof(text), "%s starting on node %s (pod %s)", f->workload, f->node,
                         f->name);
                fn(f->started_at, text, ud);
        }
        if (f->ready_at <= alive_until) {
                if (f->ready_at > after && f->ready_at <= upto)
                        fn(f->ready_at, "ready: listening on :8080", ud);
                long k = after > f->ready_at ? (long)floor((after - f->ready_at) / LINE_PERIOD) : 0;
                for (k = k < 1 ? 1 : k;; k++) {
                        double t = f->ready_at + (double)k * LINE_PERIOD;
                        if (t > upto || t >= alive_until)
                                break;
                        if (t <= after)
                                continue;
                        snprintf(text, sizeof(text), "served %u requests in the last %.0fs",
                                 served_count(f->uid, k), LINE_PERIOD);
                        fn(t, text, ud);
                }
        }
        if (f->terminating && f->sigterm_at > after && f->sigterm_at <= upto) {
                snprintf(text, sizeof(text),
                         "received SIGTERM: draining connections (grace period %" PRId64 "s)", f->grace);
                fn(f->sigterm_at, text, ud);
        }
        if (f->terminating && f->graceful && f->exit_at > after && f->exit_at <= upto)
                fn(f->exit_at, "drained, exiting with status 0", ud);
}

struct log_opts {
        bool follow, timestamps;
        int64_t tail;        /* -1: all */
        double since;        /* scenario time of the first line wanted; -INFINITY: all */
        int64_t limit_bytes; /* -1: no limit */
};

struct collected {
        struct sim *sim;
        const struct log_opts *o;
        struct buf out;
        size_t *starts; /* where each line starts in out, for tailLines */
        size_t n, cap;
        bool failed;
};

/* RFC 3339 with nanoseconds, trailing zeros dropped: Go's time.RFC3339Nano, as the kubelet writes it. */
static void format_nano(uint64_t usec, char *buf, size_t len)
{
        time_t secs = (time_t)(usec / 1000000);
        unsigned frac = (unsigned)(usec % 1000000) * 1000;
        struct tm tm;
        char digits[16];
        size_t n;

        gmtime_r(&secs, &tm);
        n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
        if (frac) {
                snprintf(digits, sizeof(digits), "%09u", frac);
                for (size_t i = strlen(digits); i > 0 && digits[i - 1] == '0'; i--)
                        digits[i - 1] = 0;
                snprintf(buf + n, len - n, ".%sZ", digits);
        } else
                snprintf(buf + n, len - n, "Z");
}

static void collect_line(double t, const char *text, void *userdata)
{
        struct collected *c = userdata;
        char ts[48];

        if (c->failed || t < c->o->since)
                return;
        if (c->n == c->cap) {
                size_t cap = c->cap ? c->cap * 2 : 64;
                size_t *p = reallocarray(c->starts, cap, sizeof(*p));
                if (!p) {
                        c->failed = true;
                        return;
                }
                c->starts = p;
                c->cap = cap;
        }
        c->starts[c->n++] = c->out.len;
        if (c->o->timestamps) {
                format_nano(sim_wall_usec(c->sim, t), ts, sizeof(ts));
                if (buf_printf(&c->out, "%s ", ts) < 0)
                        c->failed = true;
        }
        if (buf_printf(&c->out, "%s\n", text) < 0)
                c->failed = true;
}

/* ---- follow: a stream that ends when the container exits or the pod is gone ---- */

struct follower {
        struct sim_server *srv;
        struct sim_pod_log_facts facts;
        char *ns;
        struct log_opts opts;
        double upto; /* lines up to this time were sent */
        int fd;
        bool ended;
        int64_t sent;
        struct buf out;
        size_t out_pos;
};

static void follower_free(void *p)
{
        struct follower *fl = p;
        if (!fl)
                return;
        free(fl->ns);
        buf_free(&fl->out);
        free(fl);
}

static void follow_line(double t, const char *text, void *userdata)
{
        struct follower *fl = userdata;
        char ts[48];

        if (t < fl->opts.since)
                return;
        if (fl->opts.timestamps) {
                format_nano(sim_wall_usec(fl->srv->sim, t), ts, sizeof(ts));
                (void)buf_printf(&fl->out, "%s ", ts);
        }
        (void)buf_printf(&fl->out, "%s\n", text);
}

static ssize_t follow_read(void *cls, uint64_t pos, char *out, size_t max)
{
        struct follower *fl = cls;
        struct sim *s = fl->srv->sim;

        for (;;) {
                if (fl->out_pos < fl->out.len) {
                        size_t n = fl->out.len - fl->out_pos;
                        if (n > max)
                                n = max;
                        if (fl->opts.limit_bytes >= 0 && (int64_t)n > fl->opts.limit_bytes - fl->sent)
                                n = (size_t)(fl->opts.limit_bytes - fl->sent);
                        if (n == 0)
                                return MHD_CONTENT_READER_END_OF_STREAM;
                        memcpy(out, fl->out.data + fl->out_pos, n);
                        fl->out_pos += n;
                        fl->sent += (int64_t)n;
                        return (ssize_t)n;
                }
                fl->out.len = fl->out_pos = 0;
                if (fl->ended || atomic_load(&fl->srv->stopping))
                        return MHD_CONTENT_READER_END_OF_STREAM;
                if (sim_peer_gone(fl->fd))
                        return MHD_CONTENT_READER_END_WITH_ERROR;

                sim_lock(s);
                uint64_t rv = sim_resource_version(s);
                struct sim_pod_log_facts now_facts;
                double now = sim_now(s);
                int r = sim_pod_log_facts(s, fl->ns, fl->facts.name, &now_facts);
                bool gone = r < 0 || !streq(now_facts.uid, fl->facts.uid); /* or a new pod of that name */
                if (!gone)
                        fl->facts = now_facts;
                if (fl->facts.terminating && fl->facts.exit_at <= now) {
                        now = fl->facts.exit_at;
                        fl->ended = true;
                } else if (gone) {
                        now = fl->upto; /* killed with its node: it wrote nothing more */
                        fl->ended = true;
                }
                if (now > fl->upto) {
                        pod_lines(&fl->facts, fl->upto, now, follow_line, fl);
                        fl->upto = now;
                }
                if (fl->out.len == 0 && !fl->ended)
                        sim_wait(s, rv, FOLLOW_POLL_USEC);
                sim_unlock(s);
        }
}

/* ---- the request ---- */

static enum MHD_Result reply_invalid(struct MHD_Connection *c, const char *name, const char *why)
{
        _cleanup_free_ char *msg = strprintf("PodLogOptions \"%s\" is invalid: %s", name, why);
        return sim_reply_json(
            c, MHD_HTTP_UNPROCESSABLE_CONTENT,
            sim_status_new(MHD_HTTP_UNPROCESSABLE_CONTENT, "Invalid", msg, "PodLogOptions", name));
}

static enum MHD_Result bad_request(struct MHD_Connection *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static enum MHD_Result bad_request(struct MHD_Connection *c, const char *fmt, ...)
{
        _cleanup_free_ char *msg = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        return sim_reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest", msg ? msg : "bad request");
}

static int parse_opts(struct sim_server *srv, struct MHD_Connection *c, const char *name, struct log_opts *o,
                      enum MHD_Result *ret)
{
        int64_t since_s = 0, tail = -1, limit = -1;
        const char *since_time = sim_arg(c, "sinceTime");
        int r1, r2, r3;

        *o = (struct log_opts){ .tail = -1, .since = -INFINITY, .limit_bytes = -1 };
        o->follow = sim_arg_true(c, "follow");
        o->timestamps = sim_arg_true(c, "timestamps");
        if ((r1 = sim_arg_int64(c, "sinceSeconds", &since_s)) < 0) {
                *ret = sim_reply_bad_int(c, "sinceSeconds");
                return -EINVAL;
        }
        if ((r2 = sim_arg_int64(c, "tailLines", &tail)) < 0) {
                *ret = sim_reply_bad_int(c, "tailLines");
                return -EINVAL;
        }
        if ((r3 = sim_arg_int64(c, "limitBytes", &limit)) < 0) {
                *ret = sim_reply_bad_int(c, "limitBytes");
                return -EINVAL;
        }
        if (r1 > 0 && !isempty(since_time)) {
                *ret = reply_invalid(
                    c, name, "[]: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified");
                return -EINVAL;
        }
        if (r1 > 0 && since_s < 1) {
                *ret = reply_invalid(c, name, "sinceSeconds: Invalid value: must be greater than 0");
                return -EINVAL;
        }
        if (r2 > 0 && tail < 0) {
                *ret =
                    reply_invalid(c, name, "tailLines: Invalid value: must be greater than or equal to 0");
                return -EINVAL;
        }
        if (r3 > 0 && limit < 1) {
                *ret = reply_invalid(c, name, "limitBytes: Invalid value: must be greater than 0");
                return -EINVAL;
        }
        o->tail = r2 > 0 ? tail : -1;
        o->limit_bytes = r3 > 0 ? limit : -1;
        if (r1 > 0)
                o->since = sim_now(srv->sim) - (double)since_s;
        else if (!isempty(since_time)) {
                uint64_t usec;
                if (parse_rfc3339(since_time, &usec) < 0) {
                        *ret = bad_request(c, "parsing time \"%s\" as RFC 3339: cannot parse", since_time);
                        return -EINVAL;
                }
                o->since = ((double)usec - (double)sim_wall_usec(srv->sim, 0)) / 1e6;
        }
        return 0;
}

enum MHD_Result sim_serve_pod_log(struct sim_server *srv, struct MHD_Connection *c,
                                  const struct api_path *ap)
{
        struct sim *s = srv->sim;
        const char *container = sim_arg(c, "container");
        struct sim_pod_log_facts f;
        struct log_opts o;
        enum MHD_Result ret;
        int r;

        r = sim_pod_log_facts(s, ap->ns, ap->name, &f);
        if (r == -ENOENT) {
                _cleanup_free_ char *msg = sim_not_found_message(ap);
                return sim_reply_json(c, MHD_HTTP_NOT_FOUND,
                                      sim_status_new(MHD_HTTP_NOT_FOUND, "NotFound", msg, "pods", ap->name));
        }
        if (r < 0)
                return sim_reply_errno(c, r);
        if (parse_opts(srv, c, ap->name, &o, &ret) < 0)
                return ret;
        if (!isempty(container) && !streq(container, CONTAINER))
                return bad_request(c, "container %s is not valid for pod %s", container, ap->name);
        if (sim_arg_true(c, "previous"))
                return bad_request(
                    c, "previous terminated container \"" CONTAINER "\" in pod \"%s\" not found", ap->name);
        if (!f.started)
                return bad_request(c, "container \"" CONTAINER "\" in pod \"%s\" is waiting to start: %s",
                                   ap->name, "ContainerCreating");

        double now = sim_now(s);
        if (f.terminating && f.exit_at < now)
                now = f.exit_at;
        struct collected col = { .sim = s, .o = &o };
        pod_lines(&f, -INFINITY, now, collect_line, &col);
        if (col.failed) {
                buf_free(&col.out);
                free(col.starts);
                return sim_reply_errno(c, -ENOMEM);
        }
        size_t from = 0;
        if (o.tail >= 0 && (size_t)o.tail < col.n)
                from = o.tail == 0 ? col.out.len : col.starts[col.n - (size_t)o.tail];
        free(col.starts);

        if (!o.follow) {
                size_t n = col.out.len - from;
                if (o.limit_bytes >= 0 && (int64_t)n > o.limit_bytes)
                        n = (size_t)o.limit_bytes;
                char *text = strndup(col.out.data ? col.out.data + from : "", n);
                buf_free(&col.out);
                return sim_reply_text(c, MHD_HTTP_OK, "text/plain", text);
        }

        struct follower *fl = calloc(1, sizeof(*fl));
        if (!fl || !(fl->ns = strdup(ap->ns))) {
                follower_free(fl);
                buf_free(&col.out);
                return MHD_NO;
        }
        fl->srv = srv;
        fl->facts = f;
        fl->opts = o;
        fl->upto = now;
        fl->fd = -1;
        fl->ended = f.terminating && f.exit_at <= sim_now(s);
        if (buf_append(&fl->out, col.out.data ? col.out.data + from : "", col.out.len - from) < 0) {
                follower_free(fl);
                buf_free(&col.out);
                return MHD_NO;
        }
        buf_free(&col.out);
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci)
                fl->fd = ci->connect_fd;
        struct MHD_Response *resp =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, follow_read, fl, follower_free);
        if (!resp) {
                follower_free(fl);
                return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "text/plain");
        MHD_add_response_header(resp, "Cache-Control", "no-cache, private");
        ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return ret;
}
