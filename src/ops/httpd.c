/* The operations endpoint: /metrics, /healthz, /readyz on libmicrohttpd's own thread (epoll where
 * available: a process with many sockets open must not run into select()'s FD_SETSIZE). */
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
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
        pthread_mutex_t lock; /* the check lists */
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

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type, struct buf *body)
{
        struct MHD_Response *resp;
        enum MHD_Result ret;

        resp = MHD_create_response_from_buffer(body->len, body->data ? body->data : (char *)"",
                                               body->data ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        if (!resp) {
                buf_free(body);
                return MHD_NO;
        }
        body->data = NULL;
        (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        ret = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return ret;
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status, const char *text)
{
        struct buf b = {};
        if (buf_printf(&b, "%s", text) < 0)
                return MHD_NO;
        return reply(c, status, "text/plain; charset=utf-8", &b);
}

static bool loop_alive(struct httpd *h)
{
        uint64_t beat = atomic_load(&h->last_beat);
        return beat == 0 || now_monotonic_usec() - beat <= h->stall_usec;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_data_size,
                              void **con_cls)
{
        struct httpd *h = cls;
        struct buf b = {};
        bool ok;
        int r;

        if (!streq(method, MHD_HTTP_METHOD_GET) && !streq(method, MHD_HTTP_METHOD_HEAD))
                return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");

        if (streq(url, "/metrics")) {
                char *text;
                if (metrics_render(&text) < 0)
                        return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
                b = (struct buf){ .data = text, .len = strlen(text), .cap = strlen(text) + 1 };
                return reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", &b);
        }
        if (streq(url, "/readyz") || streq(url, "/healthz")) {
                bool health = streq(url, "/healthz");

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
                return reply(c, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain; charset=utf-8",
                             &b);
        }
        return reply_text(c, MHD_HTTP_NOT_FOUND, "not found\n");
}

static int parse_listen(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len)
{
        struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
                                  .ai_socktype = SOCK_STREAM },
                        *ai = NULL;
        _cleanup_free_ char *host = NULL;
        const char *colon = strrchr(s, ':');
        size_t n;

        if (!colon || isempty(colon + 1))
                return -EINVAL;
        host = strndup(s, (size_t)(colon - s));
        if (!host)
                return -ENOMEM;
        n = strlen(host);
        if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
                memmove(host, host + 1, n - 2);
                host[n - 2] = '\0';
        } else if (strchr(host, ':'))
                return -EINVAL; /* an IPv6 address needs its brackets */
        if (getaddrinfo(isempty(host) ? NULL : host, colon + 1, &hints, &ai) != 0 || !ai)
                return -EINVAL;
        if (ai->ai_addrlen > sizeof(*ret)) {
                freeaddrinfo(ai);
                return -EINVAL;
        }
        memcpy(ret, ai->ai_addr, ai->ai_addrlen);
        *ret_len = ai->ai_addrlen;
        freeaddrinfo(ai);
        return 0;
}

int httpd_start(const char *listen, struct httpd **ret)
{
        struct sockaddr_storage sa = {};
        socklen_t len;
        const union MHD_DaemonInfo *info;
        struct httpd *h;
        int r;

        if (!listen || isempty(listen) || streq(listen, "off")) {
                *ret = NULL;
                return 0;
        }
        r = parse_listen(listen, &sa, &len);
        if (r < 0)
                return r;
        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        r = pthread_mutex_init(&h->lock, NULL);
        if (r != 0) {
                free(h);
                return -r;
        }
        h->daemon =
            MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | (sa.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0), 0,
                             NULL, NULL, handle, h, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_CONNECTION_LIMIT,
                             32u, MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
        if (!h->daemon) {
                pthread_mutex_destroy(&h->lock);
                free(h);
                return -EADDRINUSE;
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

int httpd_add_ready_check(struct httpd *h, const char *name, httpd_check_fn fn, void *userdata)
{
        int r;

        if (!h)
                return 0;
        if (isempty(name) || !fn)
                return -EINVAL;
        pthread_mutex_lock(&h->lock);
        r = check_list_add(&h->ready, name, fn, userdata, NULL);
        pthread_mutex_unlock(&h->lock);
        return r;
}

int httpd_add_health_check(struct httpd *h, const char *name, httpd_check_fn fn, void *userdata)
{
        int r;

        if (!h)
                return 0;
        if (isempty(name) || !fn)
                return -EINVAL;
        pthread_mutex_lock(&h->lock);
        r = check_list_add(&h->health, name, fn, userdata, NULL);
        pthread_mutex_unlock(&h->lock);
        return r;
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
