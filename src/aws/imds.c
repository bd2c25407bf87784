/* IMDSv2 client: one shared session token, renewed before expiry and on 401; GETs async on the loop. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/core.h"
#include "spotdrain/imds.h"

#define TOKEN_MAX_LEN         4096
#define RENEW_MARGIN_MAX_USEC (60ULL * 1000000ULL)
#define BACKOFF_BASE_USEC     (200ULL * 1000ULL)
#define BACKOFF_MAX_USEC      (5ULL * 1000000ULL)

struct imds_get {
        struct imds_client *client;
        struct imds_get *prev, *next;
        char *url;
        imds_done_fn done;
        void *userdata;
        struct http_call *call;
        struct timer *defer; /* a failure answered from the loop */
        int defer_error;
        bool waiting_token;
        bool in_batch; /* being answered by the token request that just ended */
        bool retried_401;
        unsigned token_gen; /* generation of the token sent (0: none) */
};

struct imds_client {
        struct loop *loop;
        char *endpoint;
        unsigned ttl;
        uint64_t timeout_usec;
        bool allow_v1;

        char *token;
        unsigned token_gen;
        uint64_t token_renew_mono; /* ask for a new token from here on */
        struct http_call *token_call;
        uint64_t token_started_mono;
        uint64_t token_retry_mono; /* no token request before this after a failure */
        int token_error;
        struct backoff backoff;

        struct imds_get *gets;
        struct imds_stats stats;
};

static void token_drop(struct imds_client *c)
{
        if (c->token) {
                explicit_bzero(c->token, strlen(c->token));
                free(c->token);
                c->token = NULL;
        }
        c->token_renew_mono = 0;
}

static void get_unlink(struct imds_get *g)
{
        struct imds_client *c = g->client;
        if (g->prev)
                g->prev->next = g->next;
        else if (c->gets == g)
                c->gets = g->next;
        if (g->next)
                g->next->prev = g->prev;
        g->prev = g->next = NULL;
}

static void get_free(struct imds_get *g)
{
        if (!g)
                return;
        get_unlink(g);
        http_cancel(g->call);
        timer_cancel(g->defer);
        free(g->url);
        free(g);
}

static void get_finish(struct imds_get *g, int error, long status, const char *body, size_t len)
{
        struct imds_reply r = {
                .error = error,
                .status = status,
                .body = error == 0 ? (body ? body : "") : NULL,
                .body_len = error == 0 && body ? len : 0,
        };
        imds_done_fn done = g->done;
        void *userdata = g->userdata;
        struct imds_client *c = g->client;

        get_unlink(g);
        g->call = NULL;
        /* The reply's body belongs to the HTTP call that is still being delivered; g itself goes now. */
        free(g->url);
        free(g);
        done(c, &r, userdata);
}

static void on_defer(void *userdata)
{
        struct imds_get *g = userdata;
        g->defer = NULL;
        get_finish(g, g->defer_error, 0, NULL, 0);
}

/* Fails g from the loop. in_callback: the caller is itself a loop callback, so when no timer can be had the
 * answer may be given right away. */
static void get_fail_later(struct imds_get *g, int error, bool in_callback)
{
        int r;

        g->defer_error = error;
        r = timer_start_in(g->client->loop, 0, on_defer, g, &g->defer);
        if (r >= 0)
                return;
        log_debug_errno(r, "imds: cannot defer a failure");
        if (in_callback)
                get_finish(g, error, 0, NULL, 0);
        else
                /* Left waiting: the next token attempt (another GET's, or a retry) answers it. */
                g->waiting_token = true;
}

static void on_get_done(const struct http_response *resp, void *userdata);
static void token_request(struct imds_client *c, bool in_callback);

static bool token_valid(const struct imds_client *c)
{
        return c->token && now_monotonic_usec() < c->token_renew_mono;
}

static void get_send(struct imds_get *g, bool with_token, bool in_callback)
{
        struct imds_client *c = g->client;
        _cleanup_free_ char *hdr = NULL;
        const char *headers[2] = {};
        int r;

        if (with_token) {
                hdr = strprintf(IMDS_TOKEN_HEADER ": %s", c->token);
                if (!hdr) {
                        get_fail_later(g, -ENOMEM, in_callback);
                        return;
                }
                headers[0] = hdr;
                g->token_gen = c->token_gen;
        } else
                g->token_gen = 0;

        r = http_send(c->loop,
                      &(struct http_request){
                          .url = g->url,
                          .headers = headers,
                          .timeout_usec = c->timeout_usec,
                          .connect_timeout_usec = c->timeout_usec,
                          .max_body = IMDS_BODY_MAX,
                      },
                      on_get_done, g, &g->call);
        if (hdr)
                explicit_bzero(hdr, strlen(hdr));
        if (r < 0) {
                get_fail_later(g, r, in_callback);
                return;
        }
        c->stats.requests++;
        if (!with_token)
                c->stats.v1_requests++;
}

/* Sends g now if a token is at hand (or IMDSv1 is the fallback), else queues it behind a token request. */
static void get_start(struct imds_get *g, bool in_callback)
{
        struct imds_client *c = g->client;

        if (token_valid(c)) {
                get_send(g, true, in_callback);
                return;
        }
        if (!c->token_call && c->token_error < 0 && now_monotonic_usec() < c->token_retry_mono) {
                /* The last token request failed and its retry is not due yet. */
                if (c->allow_v1)
                        get_send(g, false, in_callback);
                else
                        get_fail_later(g, c->token_error, in_callback);
                return;
        }
        g->waiting_token = true;
        token_request(c, in_callback);
}

static void token_finish(struct imds_client *c, const struct http_response *resp, bool in_callback)
{
        int error = resp->error;
        size_t len = resp->body ? strcspn(resp->body, "\r\n") : 0;

        c->token_call = NULL;
        if (error == 0)
                error = http_status_to_errno(resp->status);
        if (error == 0 && (len == 0 || len > TOKEN_MAX_LEN))
                error = -EBADMSG;

        if (error == 0) {
                uint64_t ttl_usec = (uint64_t)c->ttl * 1000000ULL;
                uint64_t margin =
                    ttl_usec / 4 < RENEW_MARGIN_MAX_USEC ? ttl_usec / 4 : RENEW_MARGIN_MAX_USEC;
                char *t = strndup(resp->body, len);

                if (!t)
                        error = -ENOMEM;
                else {
                        token_drop(c);
                        c->token = t;
                        c->token_gen++;
                        if (c->token_gen == 0)
                                c->token_gen = 1;
                        /* From when the request went out: the token's life started no later than that. */
                        c->token_renew_mono = c->token_started_mono + ttl_usec - margin;
                        c->token_error = 0;
                        c->stats.tokens++;
                        c->stats.last_token_error = 0;
                        backoff_reset(&c->backoff);
                }
        }
        if (error < 0) {
                c->token_error = error;
                c->token_retry_mono = now_monotonic_usec() + backoff_next(&c->backoff);
                c->stats.token_failures++;
                c->stats.last_token_error = error;
                log_debug_errno(error, "imds: token request failed (status %ld)", resp->status);
        }

        /* Every GET that waited: send it with the token, as IMDSv1, or fail it. Collected first, as
         * finishing a GET runs its callback, which may start or cancel others. */
        for (struct imds_get *g = c->gets; g; g = g->next)
                g->in_batch = g->waiting_token;
        for (;;) {
                struct imds_get *g = c->gets;
                while (g && !g->in_batch)
                        g = g->next;
                if (!g)
                        break;
                g->in_batch = false;
                g->waiting_token = false;
                if (error == 0)
                        get_send(g, true, in_callback);
                else if (c->allow_v1)
                        get_send(g, false, in_callback);
                else
                        get_fail_later(g, error, in_callback);
        }
}

static void on_token_done(const struct http_response *resp, void *userdata)
{
        token_finish(userdata, resp, true);
}

static void token_request(struct imds_client *c, bool in_callback)
{
        char hdr[sizeof(IMDS_TOKEN_TTL_HEADER) + 16];
        const char *headers[] = { hdr, NULL };
        _cleanup_free_ char *url = NULL;
        int r;

        if (c->token_call)
                return;
        snprintf(hdr, sizeof(hdr), IMDS_TOKEN_TTL_HEADER ": %u", c->ttl);
        url = strprintf("%s/latest/api/token", c->endpoint);
        if (!url)
                r = -ENOMEM;
        else {
                c->token_started_mono = now_monotonic_usec();
                r = http_send(c->loop,
                              &(struct http_request){
                                  .method = "PUT",
                                  .url = url,
                                  .headers = headers,
                                  .timeout_usec = c->timeout_usec,
                                  .connect_timeout_usec = c->timeout_usec,
                                  .max_body = TOKEN_MAX_LEN + 2,
                              },
                              on_token_done, c, &c->token_call);
        }
        if (r < 0) {
                /* Nothing went out: fail the waiting GETs as a failed token request would. */
                struct http_response resp = { .error = r };
                token_finish(c, &resp, in_callback);
        }
}

static void on_get_done(const struct http_response *resp, void *userdata)
{
        struct imds_get *g = userdata;
        struct imds_client *c = g->client;
        int error;

        g->call = NULL;
        if (resp->error < 0) {
                get_finish(g, resp->error, 0, NULL, 0);
                return;
        }
        if (resp->status == 401) {
                c->stats.unauthorized++;
                if (!g->retried_401) {
                        /* Expired or unknown token, or IMDSv2 now required: a new token, one retry. */
                        g->retried_401 = true;
                        if (g->token_gen == 0 || g->token_gen == c->token_gen)
                                token_drop(c);
                        if (g->token_gen == 0)
                                c->token_retry_mono = 0;
                        g->waiting_token = true;
                        if (token_valid(c)) {
                                g->waiting_token = false;
                                get_send(g, true, true);
                        } else
                                token_request(c, true);
                        return;
                }
        }
        error = http_status_to_errno(resp->status);
        get_finish(g, error, resp->status, resp->body, resp->body_len);
}

int imds_get(struct imds_client *c, const char *path, imds_done_fn done, void *userdata,
             struct imds_get **ret)
{
        struct imds_get *g;

        if (!c || !path || !done)
                return -EINVAL;
        if (startswith(path, "/latest/"))
                path += strlen("/latest/");
        while (*path == '/')
                path++;

        g = calloc(1, sizeof(*g));
        if (!g)
                return -ENOMEM;
        g->url = strprintf("%s/latest/%s", c->endpoint, path);
        if (!g->url) {
                free(g);
                return -ENOMEM;
        }
        g->client = c;
        g->done = done;
        g->userdata = userdata;
        g->next = c->gets;
        if (c->gets)
                c->gets->prev = g;
        c->gets = g;

        get_start(g, false);
        if (ret)
                *ret = g;
        return 0;
}

struct imds_get *imds_get_cancel(struct imds_get *g)
{
        get_free(g);
        return NULL;
}

int imds_client_new(struct loop *l, const struct imds_options *o, struct imds_client **ret)
{
        static const struct imds_options defaults = {};
        const char *ep;
        struct imds_client *c;
        size_t len;

        if (!l || !ret)
                return -EINVAL;
        if (!o)
                o = &defaults;
        if (o->token_ttl_seconds > IMDS_TOKEN_TTL_MAX)
                return -EINVAL;
        ep = o->endpoint;
        if (isempty(ep))
                ep = getenv(IMDS_ENDPOINT_ENV);
        if (isempty(ep))
                ep = IMDS_DEFAULT_ENDPOINT;
        if (!startswith(ep, "http://") && !startswith(ep, "https://"))
                return -EINVAL;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->endpoint = strdup(ep);
        if (!c->endpoint) {
                free(c);
                return -ENOMEM;
        }
        len = strlen(c->endpoint);
        while (len > 0 && c->endpoint[len - 1] == '/')
                c->endpoint[--len] = '\0';
        c->loop = l;
        c->ttl = o->token_ttl_seconds ? o->token_ttl_seconds : IMDS_TOKEN_TTL_MAX;
        c->timeout_usec = o->timeout_usec ? o->timeout_usec : IMDS_DEFAULT_TIMEOUT_USEC;
        c->allow_v1 = o->allow_v1;
        c->backoff = BACKOFF_INIT(o->backoff_base_usec ? o->backoff_base_usec : BACKOFF_BASE_USEC,
                                  o->backoff_max_usec ? o->backoff_max_usec : BACKOFF_MAX_USEC);
        *ret = c;
        return 0;
}

struct imds_client *imds_client_free(struct imds_client *c)
{
        if (!c)
                return NULL;
        while (c->gets)
                get_free(c->gets);
        http_cancel(c->token_call);
        token_drop(c);
        free(c->endpoint);
        free(c);
        return NULL;
}

const char *imds_client_endpoint(const struct imds_client *c)
{
        return c->endpoint;
}

void imds_client_forget_token(struct imds_client *c)
{
        token_drop(c);
}

void imds_client_stats(const struct imds_client *c, struct imds_stats *ret)
{
        *ret = c->stats;
}
