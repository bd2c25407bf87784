/* The operations endpoint: /metrics, /healthz, /readyz on libmicrohttpd, the project's one HTTP server
 * library (DESIGN.md: no hand-written HTTP server in any binary). Request parsing, header limits, timeouts
 * and connection bookkeeping are libmicrohttpd's; this file only routes GET and HEAD to three answers. It
 * runs libmicrohttpd's own thread (epoll), with these bounds:
 *   - at most PER_IP_LIMIT connections from any one address (one more is closed at once, unanswered): a
 *     client that opens many cannot take every slot from the kubelet's probes and Prometheus;
 *   - at most CONN_LIMIT in all: one more waits in the listen queue until a slot frees;
 *   - CONN_TIMEOUT_SEC of silence closes a connection: a silent or slow client holds one slot, never the
 *     thread, and not for long;
 *   - CONN_MEMORY_LIMIT per connection holds the request head: a larger head is refused (414 or 431).
 * Every answer closes its connection: probes and scrapes come seconds apart, so an idle keep-alive would
 * only hold a slot. Plain HTTP: kubelet probes and Prometheus scrape the pod network without TLS. (Debian
 * links libmicrohttpd with GnuTLS all the same; its libraries cost over a MiB of RSS before main().) */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>
#include <time.h>

#include "spotdrain/core.h"
#include "spotdrain/httpd.h"
#include "spotdrain/metrics.h"

#define DEFAULT_STALL_USEC (30ULL * 1000000ULL)

/* Probes (liveness, readiness, startup) come from the node's address, beside whatever else runs there. */
#define CONN_LIMIT       32u
#define PER_IP_LIMIT     8u
#define CONN_TIMEOUT_SEC 5u
/* A probe or a scrape sends a few hundred bytes of request head; the answer's headers come out of the same
 * pool, its body does not. */
#define CONN_MEMORY_LIMIT ((size_t)16 * 1024)

struct check {
        char *name;
        httpd_check_fn fn; /* NULL: a condition published with httpd_set_ready() */
        void *userdata;
        bool ready;
        char *reason;
};

struct check_list {
        struct check *items;
        size_t n;
};

struct httpd {
        struct MHD_Daemon *daemon;
        uint16_t port;
        struct metrics *metrics; /* borrowed; set before the thread starts, never changed */
        pthread_mutex_t lock;    /* the check lists */
        struct check_list ready, health;
        sd_event_source *heartbeat;
        uint64_t stall_usec;
        _Atomic uint64_t last_beat; /* CLOCK_MONOTONIC usec; 0 = no loop watched */
};

static void check_list_clear(struct check_list *l)
{
        for (size_t i = 0; i < l->n; i++) {
                free(l->items[i].name);
                free(l->items[i].reason);
        }
        free(l->items);
        l->items = NULL;
        l->n = 0;
}

static struct check *check_list_find(struct check_list *l, const char *name)
{
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->items[i].name, name))
                        return &l->items[i];
        return NULL;
}

static int check_list_add(struct check_list *l, const char *name, httpd_check_fn fn, void *userdata,
                          struct check **ret)
{
        struct check *n;
        char *copy;

        if (check_list_find(l, name))
                return -EEXIST;
        copy = strdup(name);
        if (!copy)
                return -ENOMEM;
        n = realloc(l->items, (l->n + 1) * sizeof(*n));
        if (!n) {
                free(copy);
                return -ENOMEM;
        }
        l->items = n;
        l->items[l->n] = (struct check){ .name = copy, .fn = fn, .userdata = userdata, .ready = true };
        if (ret)
                *ret = &l->items[l->n];
        l->n++;
        return 0;
}

/* "ok\n", or one line per failing check: "NAME: reason\n". Under h->lock. */
static int check_list_run(const struct check_list *l, struct buf *out, bool *ret_ok)
{
        bool ok = true;
        int r = 0;

        for (size_t i = 0; r >= 0 && i < l->n; i++) {
                const struct check *c = &l->items[i];
                const char *reason = NULL;
                bool pass = c->fn ? c->fn(c->userdata, &reason) : c->ready;

                if (!c->fn)
                        reason = c->reason;
                if (pass)
                        continue;
                ok = false;
                r = buf_printf(out, "%s: %s\n", c->name, reason ? reason : "not ready");
        }
        *ret_ok = ok;
        return r < 0 ? r : 0;
}

static bool loop_alive(struct httpd *h)
{
        uint64_t beat = atomic_load(&h->last_beat);
        return beat == 0 || now_monotonic_usec() - beat <= h->stall_usec;
}

/* ---- answers (on libmicrohttpd's thread) ---- */

#define TEXT_PLAIN   "text/plain; charset=utf-8"
#define TEXT_METRICS "text/plain; version=0.0.4; charset=utf-8"

int httpd_reply(struct MHD_Connection *c, unsigned status, const char *type, char *body, size_t len,
                const char *const *headers)
{
        struct MHD_Response *resp;
        enum MHD_Result ret;

        resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(body);
                return MHD_NO; /* out of memory: libmicrohttpd closes the connection */
        }
        bool ok = MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type) == MHD_YES;
        for (size_t i = 0; ok && headers && headers[i]; i += 2)
                ok = MHD_add_response_header(resp, headers[i], headers[i + 1]) == MHD_YES;
        if (!ok) {
                MHD_destroy_response(resp);
                return MHD_NO;
        }
        ret = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return ret;
}

/* The operations endpoint's answers: never cached, one a connection, and a 405 says what is allowed. */
static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type, char *body,
                             size_t len)
{
        static const char *const headers[] = { MHD_HTTP_HEADER_CACHE_CONTROL, "no-store",
                                               MHD_HTTP_HEADER_CONNECTION, "close", NULL };
        static const char *const headers_405[] = { MHD_HTTP_HEADER_CACHE_CONTROL,
                                                   "no-store",
                                                   MHD_HTTP_HEADER_CONNECTION,
                                                   "close",
                                                   MHD_HTTP_HEADER_ALLOW,
                                                   "GET, HEAD",
                                                   NULL };

        return (enum MHD_Result)httpd_reply(c, status, type, body, len,
                                            status == MHD_HTTP_METHOD_NOT_ALLOWED ? headers_405 : headers);
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status, const char *text)
{
        char *copy = strdup(text);

        if (!copy)
                return MHD_NO;
        return reply(c, status, TEXT_PLAIN, copy, strlen(copy));
}

static enum MHD_Result reply_checks(struct httpd *h, struct MHD_Connection *c, bool health)
{
        struct buf b = {};
        bool ok;
        int r;

        pthread_mutex_lock(&h->lock);
        r = check_list_run(health ? &h->health : &h->ready, &b, &ok);
        pthread_mutex_unlock(&h->lock);
        if (r >= 0 && health && !loop_alive(h)) {
                ok = false;
                r = buf_printf(&b, "loop: no heartbeat for more than %llu s\n",
                               (unsigned long long)(h->stall_usec / 1000000ULL));
        }
        if (r >= 0 && ok)
                r = buf_printf(&b, "ok\n");
        if (r < 0) {
                buf_free(&b);
                return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
        }
        return reply(c, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, TEXT_PLAIN, b.data, b.len);
}

/* Called once the request head is in (url without its query); answers at once, so that a body, which no
 * endpoint takes, is never waited for. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **req_cls)
{
        struct httpd *h = cls;

        if (!streq(method, MHD_HTTP_METHOD_GET) && !streq(method, MHD_HTTP_METHOD_HEAD))
                return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
        if (streq(url, "/metrics")) {
                char *text = NULL;

                if (metrics_render(h->metrics, &text) < 0)
                        return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
                return reply(c, MHD_HTTP_OK, TEXT_METRICS, text, strlen(text));
        }
        if (streq(url, "/readyz"))
                return reply_checks(h, c, false);
        if (streq(url, "/healthz"))
                return reply_checks(h, c, true);
        return reply_text(c, MHD_HTTP_NOT_FOUND, "not found\n");
}

void httpd_mhd_log(void *cls, const char *fmt, va_list ap)
{
        char msg[256];
        size_t n;

        (void)vsnprintf(msg, sizeof(msg), fmt, ap);
        n = strlen(msg);
        while (n > 0 && msg[n - 1] == '\n')
                msg[--n] = '\0';
        log_debug("%s: %s", (const char *)cls, msg);
}

/* ---- the server ---- */

/* Numeric addresses only, parsed by hand: getaddrinfo(), even for a numeric host, costs the process about
 * 380 KiB of RSS for good, and this agent's idle budget is 10 MiB. */
int httpd_parse_listen(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len)
{
        const char *colon = strrchr(s, ':'), *p;
        char host[INET6_ADDRSTRLEN + 2];
        struct sockaddr_in6 sa6 = { .sin6_family = AF_INET6 };
        struct sockaddr_in sa4 = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
        unsigned long port = 0;
        size_t n;

        if (!colon || isempty(colon + 1))
                return -EINVAL;
        for (p = colon + 1; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                port = port * 10 + (unsigned long)(*p - '0');
                if (port > UINT16_MAX)
                        return -EINVAL;
        }
        n = (size_t)(colon - s);
        if (n >= sizeof(host))
                return -EINVAL;
        memcpy(host, s, n);
        host[n] = '\0';

        /* In brackets, an IPv4 address too: "[$(HOST_IP)]:9464" in a pod's arguments is the node's own
         * address whichever family the downward API hands over (the chart's DaemonSet). */
        if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
                host[n - 1] = '\0';
                if (inet_pton(AF_INET, host + 1, &sa4.sin_addr) == 1) {
                        sa4.sin_port = htons((uint16_t)port);
                        memcpy(ret, &sa4, sizeof(sa4));
                        *ret_len = sizeof(sa4);
                        return 0;
                }
                if (inet_pton(AF_INET6, host + 1, &sa6.sin6_addr) != 1)
                        return -EINVAL;
                sa6.sin6_port = htons((uint16_t)port);
                memcpy(ret, &sa6, sizeof(sa6));
                *ret_len = sizeof(sa6);
                return 0;
        }
        /* An IPv6 address needs its brackets; no host is any IPv4 address. */
        if (n > 0 && inet_pton(AF_INET, host, &sa4.sin_addr) != 1)
                return -EINVAL;
        sa4.sin_port = htons((uint16_t)port);
        memcpy(ret, &sa4, sizeof(sa4));
        *ret_len = sizeof(sa4);
        return 0;
}

static bool is_any_address(const struct sockaddr_storage *sa)
{
        return sa->ss_family == AF_INET6 &&
               IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

int httpd_start(const char *listen, struct metrics *m, struct httpd **ret)
{
        struct sockaddr_storage sa = {};
        const union MHD_DaemonInfo *info;
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
        sigset_t all, old;
        socklen_t len;
        struct httpd *h;
        int r;

        if (!listen || isempty(listen) || streq(listen, "off")) {
                *ret = NULL;
                return 0;
        }
        r = httpd_parse_listen(listen, &sa, &len);
        if (r < 0)
                return r;
        /* "[::]" serves IPv4 too (as mapped addresses); another IPv6 address serves IPv6 alone. */
        if (is_any_address(&sa))
                flags |= MHD_USE_DUAL_STACK;
        else if (sa.ss_family == AF_INET6)
                flags |= MHD_USE_IPv6;
        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->metrics = m;
        r = pthread_mutex_init(&h->lock, NULL);
        if (r != 0) {
                free(h);
                return -r;
        }

        /* libmicrohttpd's thread takes no signal: the loop's thread handles them (sd-event blocks them
         * there), and a signal delivered to it instead would find its default action. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        errno = 0;
        h->daemon = MHD_start_daemon(
            flags, 0, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
            MHD_OPTION_CONNECTION_LIMIT, CONN_LIMIT, MHD_OPTION_PER_IP_CONNECTION_LIMIT, PER_IP_LIMIT,
            MHD_OPTION_CONNECTION_TIMEOUT, CONN_TIMEOUT_SEC, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
            CONN_MEMORY_LIMIT, MHD_OPTION_EXTERNAL_LOGGER, httpd_mhd_log, (void *)"operations endpoint",
            MHD_OPTION_END);
        r = errno;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (!h->daemon) {
                pthread_mutex_destroy(&h->lock);
                free(h);
                /* libmicrohttpd says no more than "no server": its errno tells a shortage from a bind that
                 * failed, which is what else it does here. */
                return r == ENOMEM || r == EMFILE || r == ENFILE ? -r : -EADDRINUSE;
        }
        info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
        h->port = info ? info->port : 0;
        *ret = h;
        return 0;
}

struct httpd *httpd_free(struct httpd *h)
{
        if (!h)
                return NULL;
        /* Joins libmicrohttpd's thread and closes every connection, silent ones too. */
        if (h->daemon)
                MHD_stop_daemon(h->daemon);
        h->heartbeat = sd_event_source_disable_unref(h->heartbeat);
        check_list_clear(&h->ready);
        check_list_clear(&h->health);
        pthread_mutex_destroy(&h->lock);
        free(h);
        return NULL;
}

uint16_t httpd_port(const struct httpd *h)
{
        return h ? h->port : 0;
}

/* A check on /readyz, or with health on /healthz. */
static int add_check(struct httpd *h, bool health, const char *name, httpd_check_fn fn, void *userdata)
{
        int r;

        if (!h)
                return 0;
        if (isempty(name) || !fn)
                return -EINVAL;
        pthread_mutex_lock(&h->lock);
        r = check_list_add(health ? &h->health : &h->ready, name, fn, userdata, NULL);
        pthread_mutex_unlock(&h->lock);
        return r;
}

int httpd_add_ready_check(struct httpd *h, const char *name, httpd_check_fn fn, void *userdata)
{
        return add_check(h, false, name, fn, userdata);
}

int httpd_add_health_check(struct httpd *h, const char *name, httpd_check_fn fn, void *userdata)
{
        return add_check(h, true, name, fn, userdata);
}

int httpd_set_ready(struct httpd *h, const char *name, bool ready, const char *reason)
{
        struct check *c;
        char *copy = NULL;
        int r = 0;

        if (!h)
                return 0;
        if (isempty(name))
                return -EINVAL;
        if (!ready && reason && !(copy = strdup(reason)))
                return -ENOMEM;
        pthread_mutex_lock(&h->lock);
        c = check_list_find(&h->ready, name);
        if (c && c->fn)
                r = -EEXIST; /* the name belongs to a check function */
        else if (!c)
                r = check_list_add(&h->ready, name, NULL, NULL, &c);
        if (r >= 0) {
                c->ready = ready;
                free(c->reason);
                c->reason = TAKE_PTR(copy);
        }
        pthread_mutex_unlock(&h->lock);
        free(copy);
        return r;
}

static int on_heartbeat(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct httpd *h = userdata;

        atomic_store(&h->last_beat, now_monotonic_usec());
        /* A quarter of the stall limit: a single late tick never fails /healthz. */
        if (sd_event_source_set_time_relative(s, h->stall_usec / 4) >= 0)
                (void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

int httpd_watch_loop(struct httpd *h, struct loop *l, uint64_t stall_usec)
{
        int r;

        if (!h)
                return 0;
        if (!l || h->heartbeat)
                return -EINVAL;
        h->stall_usec = stall_usec ? stall_usec : DEFAULT_STALL_USEC;
        r = sd_event_add_time_relative(loop_event(l), &h->heartbeat, CLOCK_MONOTONIC, h->stall_usec / 4, 0,
                                       on_heartbeat, h);
        if (r < 0)
                return r;
        (void)sd_event_source_set_description(h->heartbeat, "httpd-heartbeat");
        atomic_store(&h->last_beat, now_monotonic_usec());
        return 0;
}

/* ---- error budget ---- */

#define BUDGET_SLOTS 10

struct budget_slot {
        uint64_t epoch; /* now / slot length, +1 so that 0 means unused */
        unsigned ok, failed;
};

struct error_budget {
        pthread_mutex_t lock;
        uint64_t slot_usec;
        double max_ratio;
        unsigned min_failures;
        struct budget_slot slots[BUDGET_SLOTS];
};

int error_budget_new(uint64_t window_usec, double max_failure_ratio, unsigned min_failures,
                     struct error_budget **ret)
{
        struct error_budget *e;

        if (window_usec < BUDGET_SLOTS || !(max_failure_ratio >= 0 && max_failure_ratio <= 1))
                return -EINVAL;
        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        if (pthread_mutex_init(&e->lock, NULL) != 0) {
                free(e);
                return -ENOMEM;
        }
        e->slot_usec = window_usec / BUDGET_SLOTS;
        e->max_ratio = max_failure_ratio;
        e->min_failures = min_failures;
        *ret = e;
        return 0;
}

struct error_budget *error_budget_free(struct error_budget *e)
{
        if (!e)
                return NULL;
        pthread_mutex_destroy(&e->lock);
        free(e);
        return NULL;
}

void error_budget_record_at(struct error_budget *e, bool ok, uint64_t now_usec)
{
        uint64_t epoch;
        struct budget_slot *s;

        if (!e)
                return;
        epoch = now_usec / e->slot_usec + 1;
        pthread_mutex_lock(&e->lock);
        s = &e->slots[epoch % BUDGET_SLOTS];
        if (s->epoch != epoch)
                *s = (struct budget_slot){ .epoch = epoch };
        if (ok)
                s->ok++;
        else
                s->failed++;
        pthread_mutex_unlock(&e->lock);
}

void error_budget_record(struct error_budget *e, bool ok)
{
        error_budget_record_at(e, ok, now_monotonic_usec());
}

bool error_budget_ok_at(struct error_budget *e, uint64_t now_usec)
{
        uint64_t epoch, ok = 0, failed = 0;

        if (!e)
                return true;
        epoch = now_usec / e->slot_usec + 1;
        pthread_mutex_lock(&e->lock);
        for (size_t i = 0; i < BUDGET_SLOTS; i++) {
                const struct budget_slot *s = &e->slots[i];
                if (s->epoch == 0 || s->epoch > epoch || epoch - s->epoch >= BUDGET_SLOTS)
                        continue;
                ok += s->ok;
                failed += s->failed;
        }
        pthread_mutex_unlock(&e->lock);
        if (failed < e->min_failures)
                return true;
        return (double)failed <= e->max_ratio * (double)(ok + failed);
}

bool error_budget_check(void *userdata, const char **ret_reason)
{
        if (error_budget_ok_at(userdata, now_monotonic_usec()))
                return true;
        if (ret_reason)
                *ret_reason = "too many recent failures";
        return false;
}
