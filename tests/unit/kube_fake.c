/* Fake Kubernetes API server for tests (see kube_fake.h). Self-contained: only libmicrohttpd and libc. */
#include "kube_fake.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KFAKE_MAX_REQUESTS 4096

struct kfake_answer {
        char *method, *path, *query_contains, *body_contains, *body, *retry_after;
        char **chunks;
        size_t n_chunks;
        int status;
        bool sticky, used, hold_open;
        struct kfake_answer *next;
};

struct kfake {
        struct MHD_Daemon *daemon;
        char url[64];
        pthread_mutex_t lock;
        struct kfake_answer *answers, *answers_tail;
        struct kfake_request *requests[KFAKE_MAX_REQUESTS];
        size_t n_requests;
        void (*hook)(const struct kfake_request *req, void *userdata);
        void *hook_userdata;
        atomic_bool stopping; /* held answers end */
};

/* Per-connection request state, created by the URI log callback with the raw URI. */
struct kfake_conn {
        char *uri;
        char *body;
        size_t body_len;
        bool started; /* the first handler call (headers only) was seen */
};

struct kfake_stream {
        char **chunks;
        size_t n, i, off;
        struct kfake *f;
        bool hold_open;
};

/* Held: 10 ms at a time until the fake stops. */
static bool kfake_hold(struct kfake *f)
{
        if (atomic_load(&f->stopping))
                return false;
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        return true;
}

static char *kfake_strdup(const char *s)
{
        return s ? strdup(s) : NULL;
}

static void kfake_request_free(struct kfake_request *r)
{
        if (!r)
                return;
        free(r->method);
        free(r->path);
        free(r->query);
        free(r->content_type);
        free(r->authorization);
        free(r->body);
        free(r);
}

static void kfake_answer_free(struct kfake_answer *a)
{
        free(a->method);
        free(a->path);
        free(a->query_contains);
        free(a->body_contains);
        free(a->body);
        free(a->retry_after);
        for (size_t i = 0; i < a->n_chunks; i++)
                free(a->chunks[i]);
        free(a->chunks);
        free(a);
}

static void *kfake_uri_log(void *cls, const char *uri, struct MHD_Connection *con)
{
        struct kfake_conn *kc = calloc(1, sizeof(*kc));
        if (kc)
                kc->uri = kfake_strdup(uri);
        return kc;
}

static void kfake_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                            enum MHD_RequestTerminationCode toe)
{
        struct kfake_conn *kc = *con_cls;
        if (!kc)
                return;
        free(kc->uri);
        free(kc->body);
        free(kc);
        *con_cls = NULL;
}

static ssize_t kfake_stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct kfake_stream *s = cls;
        if (s->i >= s->n)
                return s->hold_open && kfake_hold(s->f) ? 0 : MHD_CONTENT_READER_END_OF_STREAM;
        if (s->off == 0 && s->i > 0) {
                /* Pace the chunks so that the client receives them as separate reads. */
                struct timespec ts = { 0, 20 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
        const char *c = s->chunks[s->i];
        size_t left = strlen(c) - s->off;
        size_t n = left < max ? left : max;
        memcpy(buf, c + s->off, n);
        s->off += n;
        if (s->off == strlen(c)) {
                s->i++;
                s->off = 0;
        }
        return (ssize_t)n;
}

static void kfake_stream_free(void *cls)
{
        struct kfake_stream *s = cls;
        for (size_t i = 0; i < s->n; i++)
                free(s->chunks[i]);
        free(s->chunks);
        free(s);
}

static bool kfake_matches(const struct kfake_answer *a, const struct kfake_request *r)
{
        if (a->used && !a->sticky)
                return false;
        if (strcmp(a->method, r->method) != 0 || strcmp(a->path, r->path) != 0)
                return false;
        if (a->body_contains && !strstr(r->body, a->body_contains))
                return false;
        return !a->query_contains || strstr(r->query, a->query_contains);
}

static enum MHD_Result kfake_handler(void *cls, struct MHD_Connection *con, const char *url,
                                     const char *method, const char *version, const char *upload_data,
                                     size_t *upload_data_size, void **con_cls)
{
        struct kfake *f = cls;
        struct kfake_conn *kc = *con_cls;
        if (!kc)
                return MHD_NO;
        if (!kc->started) {
                /* Headers only: the body, if any, comes in the next calls. */
                kc->started = true;
                return MHD_YES;
        }
        if (*upload_data_size > 0) {
                char *n = realloc(kc->body, kc->body_len + *upload_data_size + 1);
                if (!n)
                        return MHD_NO;
                memcpy(n + kc->body_len, upload_data, *upload_data_size);
                kc->body = n;
                kc->body_len += *upload_data_size;
                kc->body[kc->body_len] = 0;
                *upload_data_size = 0;
                return MHD_YES;
        }

        struct kfake_request *req = calloc(1, sizeof(*req));
        if (!req)
                return MHD_NO;
        const char *q = kc->uri ? strchr(kc->uri, '?') : NULL;
        req->method = kfake_strdup(method);
        req->path = kfake_strdup(url);
        req->query = kfake_strdup(q ? q + 1 : "");
        req->content_type = kfake_strdup(MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Content-Type"));
        req->authorization =
            kfake_strdup(MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Authorization"));
        req->body = kfake_strdup(kc->body ? kc->body : "");
        if (!req->method || !req->path || !req->query || !req->body) {
                kfake_request_free(req);
                return MHD_NO;
        }

        int status = 404;
        char *body = NULL, *retry_after = NULL;
        struct kfake_stream *stream = NULL;
        bool hold = false;
        /* The hook runs without the lock: one that holds its request back (a slow answer) must not hold
         * back the others. */
        pthread_mutex_lock(&f->lock);
        void (*hook)(const struct kfake_request *, void *) = f->hook;
        void *hook_userdata = f->hook_userdata;
        pthread_mutex_unlock(&f->lock);
        if (hook)
                hook(req, hook_userdata);
        pthread_mutex_lock(&f->lock);
        for (struct kfake_answer *a = f->answers; a; a = a->next) {
                if (!kfake_matches(a, req))
                        continue;
                a->used = true;
                status = a->status;
                body = kfake_strdup(a->body);
                retry_after = kfake_strdup(a->retry_after);
                hold = a->hold_open && a->n_chunks == 0;
                if (a->n_chunks > 0) {
                        stream = calloc(1, sizeof(*stream));
                        if (stream) {
                                stream->chunks = calloc(a->n_chunks, sizeof(char *));
                                stream->f = f;
                                stream->hold_open = a->hold_open;
                        }
                        for (size_t i = 0; stream && stream->chunks && i < a->n_chunks; i++)
                                stream->chunks[stream->n++] = kfake_strdup(a->chunks[i]);
                }
                break;
        }
        if (f->n_requests < KFAKE_MAX_REQUESTS)
                f->requests[f->n_requests++] = req;
        else
                kfake_request_free(req);
        pthread_mutex_unlock(&f->lock);

        if (hold) {
                while (kfake_hold(f))
                        ;
                status = 503; /* the fake stops */
        }
        if (status == 404 && !body && !stream)
                body = kfake_strdup("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                                    "\"reason\":\"NotFound\",\"code\":404,\"message\":\"not scripted\"}");
        struct MHD_Response *resp;
        if (stream)
                resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, kfake_stream_read, stream,
                                                         kfake_stream_free);
        else
                resp =
                    MHD_create_response_from_buffer(body ? strlen(body) : 0, body ? body : (char *)"",
                                                    body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        if (!resp) {
                free(body);
                free(retry_after);
                if (stream)
                        kfake_stream_free(stream);
                return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "application/json");
        if (retry_after)
                MHD_add_response_header(resp, "Retry-After", retry_after);
        free(retry_after);
        enum MHD_Result ret = MHD_queue_response(con, (unsigned)status, resp);
        MHD_destroy_response(resp);
        return ret;
}

int kfake_start(struct kfake **ret)
{
        struct kfake *f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        pthread_mutex_init(&f->lock, NULL);
        atomic_init(&f->stopping, false);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = 0 };
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        f->daemon = MHD_start_daemon(
            MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG, 0, NULL,
            NULL, kfake_handler, f, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_URI_LOG_CALLBACK, kfake_uri_log, f,
            MHD_OPTION_NOTIFY_COMPLETED, kfake_completed, f, MHD_OPTION_END);
        if (!f->daemon) {
                pthread_mutex_destroy(&f->lock);
                free(f);
                return -EADDRNOTAVAIL;
        }
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(f->daemon, MHD_DAEMON_INFO_BIND_PORT);
        snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%u", info ? (unsigned)info->port : 0u);
        *ret = f;
        return 0;
}

void kfake_stop(struct kfake *f)
{
        if (!f)
                return;
        atomic_store(&f->stopping, true);
        MHD_stop_daemon(f->daemon);
        for (size_t i = 0; i < f->n_requests; i++)
                kfake_request_free(f->requests[i]);
        while (f->answers) {
                struct kfake_answer *a = f->answers;
                f->answers = a->next;
                kfake_answer_free(a);
        }
        pthread_mutex_destroy(&f->lock);
        free(f);
}

const char *kfake_url(const struct kfake *f)
{
        return f->url;
}

int kfake_add(struct kfake *f, const struct kfake_script *s)
{
        struct kfake_answer *a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->method = kfake_strdup(s->method);
        a->path = kfake_strdup(s->path);
        a->query_contains = kfake_strdup(s->query_contains);
        a->body_contains = kfake_strdup(s->body_contains);
        a->body = kfake_strdup(s->body);
        a->retry_after = kfake_strdup(s->retry_after);
        a->status = s->status;
        a->sticky = s->sticky;
        a->hold_open = s->hold_open;
        for (size_t i = 0; s->chunks && s->chunks[i]; i++)
                a->n_chunks++;
        if (a->n_chunks > 0) {
                a->chunks = calloc(a->n_chunks, sizeof(char *));
                for (size_t i = 0; a->chunks && i < a->n_chunks; i++)
                        a->chunks[i] = kfake_strdup(s->chunks[i]);
        }
        if (!a->method || !a->path || (a->n_chunks > 0 && !a->chunks)) {
                kfake_answer_free(a);
                return -ENOMEM;
        }
        pthread_mutex_lock(&f->lock);
        if (f->answers_tail)
                f->answers_tail->next = a;
        else
                f->answers = a;
        f->answers_tail = a;
        pthread_mutex_unlock(&f->lock);
        return 0;
}

int kfake_answer(struct kfake *f, const char *method, const char *path, int status, const char *body)
{
        return kfake_add(
            f, &(struct kfake_script){ .method = method, .path = path, .status = status, .body = body });
}

size_t kfake_count(struct kfake *f)
{
        pthread_mutex_lock(&f->lock);
        size_t n = f->n_requests;
        pthread_mutex_unlock(&f->lock);
        return n;
}

const struct kfake_request *kfake_request(struct kfake *f, size_t i)
{
        pthread_mutex_lock(&f->lock);
        const struct kfake_request *r = i < f->n_requests ? f->requests[i] : NULL;
        pthread_mutex_unlock(&f->lock);
        return r;
}

long kfake_find(struct kfake *f, const char *method, const char *path, size_t start)
{
        long found = -1;
        pthread_mutex_lock(&f->lock);
        for (size_t i = start; i < f->n_requests && found < 0; i++)
                if (strcmp(f->requests[i]->method, method) == 0 && strcmp(f->requests[i]->path, path) == 0)
                        found = (long)i;
        pthread_mutex_unlock(&f->lock);
        return found;
}

void kfake_set_hook(struct kfake *f, void (*hook)(const struct kfake_request *req, void *userdata),
                    void *userdata)
{
        pthread_mutex_lock(&f->lock);
        f->hook = hook;
        f->hook_userdata = userdata;
        pthread_mutex_unlock(&f->lock);
}
