/* core: the one event loop (sd-event + libcurl multi), the engine clock, HTTP client, backoff, logging. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <syslog.h>

#include "spotdrain/util.h"

typedef struct sd_event sd_event;
typedef struct sd_event_source sd_event_source;

/* ---- engine clock ----
 * Wall-clock microseconds as the engine sees them. Normally the real clock; `simulate --time-scale N` makes
 * it run N times faster from the moment clk_set_scale() is called, so every deadline and duration keeps its
 * meaning. */
void clk_set_scale(double scale);
double clk_scale(void);
uint64_t clk_now(void);
/* Converts an engine-clock instant into the CLOCK_MONOTONIC instant (usec) when it will be reached. */
uint64_t clk_to_monotonic(uint64_t clk_usec);

/* ---- event loop ---- */
struct loop;
int loop_new(struct loop **ret); /* installs SIGTERM/SIGINT handlers that end loop_run() */
struct loop *loop_free(struct loop *l);
static inline void loop_freep(struct loop **l)
{
        loop_free(*l);
}
sd_event *loop_event(struct loop *l);
int loop_run(struct loop *l); /* until loop_exit() or a signal; returns the exit code */
void loop_exit(struct loop *l, int code);
bool loop_stopping(struct loop *l); /* SIGTERM seen: finish what is under way */
/* Runs the loop until *done becomes true or timeout_usec passes (-ETIMEDOUT). For one-shot commands and
 * tests. */
int loop_run_until(struct loop *l, const bool *done, uint64_t timeout_usec);

/* One-shot timer at an engine-clock instant; the callback runs once. Returns a handle that can be cancelled.
 */
typedef void (*timer_fn)(void *userdata);
struct timer;
int timer_start(struct loop *l, uint64_t at_clk_usec, timer_fn fn, void *userdata, struct timer **ret);
int timer_start_in(struct loop *l, uint64_t after_usec, timer_fn fn, void *userdata, struct timer **ret);
struct timer *timer_cancel(struct timer *t); /* NULL-safe; always returns NULL */

/* ---- HTTP client ----
 * Async, on the loop. TLS is always verified. Redirects are not followed. https only, except loopback
 * addresses and the link-local IMDS address (169.254.169.254 / fd00:ec2::254) where plain http is allowed.
 */
struct http_tls {
        const char *ca_file;   /* PEM bundle path; NULL = system default */
        const char *ca_pem;    /* PEM in memory (kubeconfig certificate-authority-data) */
        const char *cert_file; /* client certificate */
        const char *cert_pem;
        const char *key_file;
        const char *key_pem;
};

struct http_request {
        const char *method; /* "GET" if NULL */
        const char *url;
        const char *const *headers; /* NULL-terminated "Name: value" strings */
        const char *body;
        size_t body_len;
        const char *bearer_token; /* sent as Authorization: Bearer; never logged */
        const struct http_tls *tls;
        uint64_t timeout_usec;         /* whole request; 0 = 30 s; streaming requests: 0 = none */
        uint64_t connect_timeout_usec; /* 0 = 5 s */
        size_t max_body;               /* 0 = 64 MiB; larger answers fail with -EFBIG */
        /* Streaming (watch): called with each chunk as it arrives instead of buffering the body. Return <0
         * to abort. */
        int (*on_data)(const char *data, size_t len, void *userdata);
};

struct http_response {
        long status; /* 0 when no answer came */
        int error;   /* negative errno on transport failure (-ETIMEDOUT, -ECONNREFUSED, -EFBIG, ...) */
        char *body;  /* NUL-terminated; NULL when streaming */
        size_t body_len;
        char *content_type;
        char *retry_after; /* Retry-After header, if any */
        char errbuf[256];  /* curl's explanation of a transport failure */
};

typedef void (*http_done_fn)(const struct http_response *resp, void *userdata);
struct http_call;
/* Starts a request. done is called exactly once (unless cancelled), from the loop, never from inside
 * http_send. */
int http_send(struct loop *l, const struct http_request *req, http_done_fn done, void *userdata,
              struct http_call **ret);
struct http_call *http_cancel(struct http_call *c); /* NULL-safe; done is not called after this */
/* Blocking convenience for one-shot commands and tests: runs the loop until the answer. resp must be
 * released with http_response_clear(). */
int http_send_sync(struct loop *l, const struct http_request *req, struct http_response *resp);
void http_response_clear(struct http_response *resp);
/* Maps an HTTP status to a negative errno (one place): 400 EINVAL, 401 EACCES(token), 403 EPERM, 404 ENOENT,
 * 409 EEXIST/ESTALE, 410 ESTALE, 422 EINVAL, 429 EBUSY, 5xx EIO, 503 EAGAIN, 504 ETIMEDOUT. */
int http_status_to_errno(long status);

/* ---- backoff: one shared retry policy (exponential, full jitter) ---- */
struct backoff {
        uint64_t base_usec;
        uint64_t max_usec;
        unsigned attempt;
};
#define BACKOFF_INIT(base, max) ((struct backoff){ .base_usec = (base), .max_usec = (max) })
uint64_t backoff_next(struct backoff *b); /* delay before the next try; grows with each call */
void backoff_reset(struct backoff *b);

/* ---- logging ----
 * Text or JSON lines on stderr, or the journal with structured fields when running under systemd. Library
 * code logs at debug; callers log once with context. Secrets must never be passed in. */
enum log_format {
        LOG_FORMAT_AUTO, /* journal if JOURNAL_STREAM says stderr is the journal, else text */
        LOG_FORMAT_TEXT,
        LOG_FORMAT_JSON,
        LOG_FORMAT_JOURNAL,
};
void log_setup(enum log_format format, int max_level);
int log_parse_level(const char *s);  /* "debug", "info", "warning", "error"; -EINVAL otherwise */
int log_parse_format(const char *s); /* "text", "json", "journal", "auto" */
/* fields: NULL-terminated key, value pairs (e.g. (const char *[]){"node", n, NULL}). Returns -abs(error) so
 * that `return log_full(LOG_ERR, r, NULL, "...")` propagates the error; 0 when error is 0. */
int log_full(int level, int error, const char *const *fields, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define log_debug(...)            log_full(LOG_DEBUG, 0, NULL, __VA_ARGS__)
#define log_info(...)             log_full(LOG_INFO, 0, NULL, __VA_ARGS__)
#define log_notice(...)           log_full(LOG_NOTICE, 0, NULL, __VA_ARGS__)
#define log_warning(...)          log_full(LOG_WARNING, 0, NULL, __VA_ARGS__)
#define log_error(...)            log_full(LOG_ERR, 0, NULL, __VA_ARGS__)
#define log_error_errno(e, ...)   log_full(LOG_ERR, (e), NULL, __VA_ARGS__)
#define log_warning_errno(e, ...) log_full(LOG_WARNING, (e), NULL, __VA_ARGS__)
#define log_debug_errno(e, ...)   log_full(LOG_DEBUG, (e), NULL, __VA_ARGS__)
