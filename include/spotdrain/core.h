/* core: the one event loop (sd-event + libcurl multi), the engine clock, HTTP client, backoff, logging. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <syslog.h>

#include "spotdrain/util.h"

/* The log's configuration (log.*). Its keys: log_config_section (its settings.c). */
struct log_settings {
        int format; /* enum log_format (core.h) */
        int level;  /* syslog level: LOG_ERR .. LOG_DEBUG */
};
struct config_section;
extern const struct config_section log_config_section;

typedef struct sd_event sd_event;
typedef struct sd_event_source sd_event_source;

/* ---- engine clock ----
 * Wall-clock microseconds as the engine sees them. Normally the real clock; `simulate --time-scale N` makes
 * it run N times faster from the moment clk_set_scale() is called, so every deadline and duration keeps its
 * meaning. */
void clk_set_scale(double scale);
double clk_scale(void);
uint64_t clk_now(void);
/* Converts an engine-clock instant into the CLOCK_MONOTONIC instant (usec) when it will be reached (instants
 * already passed map to "now"). Timers armed before a scale change keep their monotonic instant. */
uint64_t clk_to_monotonic(uint64_t clk_usec);

/* ---- event loop ---- */
struct loop;
/* Blocks SIGTERM/SIGINT (sigprocmask, so call it before starting threads) and handles them on the loop: the
 * first one sets loop_stopping() and, unless a stop handler is set, ends loop_run() with 0; with a stop
 * handler, the handler runs instead and decides when to call loop_exit(). A second signal always ends the
 * loop with 0. */
int loop_new(struct loop **ret);
/* Frees the loop. HTTP calls still in flight are cancelled (their done callbacks are not called and their
 * handles become invalid); see timer_start() for timers. NULL-safe. */
struct loop *loop_free(struct loop *l);
static inline void loop_freep(struct loop **l)
{
        loop_free(*l);
}
sd_event *loop_event(struct loop *l);
int loop_run(struct loop *l); /* until loop_exit() or a signal; returns the exit code */
void loop_exit(struct loop *l, int code);
bool loop_stopping(struct loop *l); /* SIGTERM seen: finish what is under way */
typedef void (*loop_stop_fn)(struct loop *l, void *userdata);
void loop_set_stop_handler(struct loop *l, loop_stop_fn fn, void *userdata);
/* Runs the loop until *done becomes true (0) or timeout_usec of real time passes (-ETIMEDOUT; UINT64_MAX =
 * no limit). -ECANCELED when loop_exit() or a signal ended the loop first. For one-shot commands and tests.
 */
int loop_run_until(struct loop *l, const bool *done, uint64_t timeout_usec);

/* One-shot timer at an engine-clock instant; the callback runs once. The timer is released when it fires,
 * before the callback runs, so forget the handle in the callback (as with http calls). timer_cancel() stops
 * and releases a timer that has not fired. ret may be NULL. Handles of timers still armed at loop_free()
 * stay valid for timer_cancel() only (loop-owned ones, ret == NULL, are released with the loop). */
typedef void (*timer_fn)(void *userdata);
struct timer;
int timer_start(struct loop *l, uint64_t at_clk_usec, timer_fn fn, void *userdata, struct timer **ret);
int timer_start_in(struct loop *l, uint64_t after_usec, timer_fn fn, void *userdata, struct timer **ret);
struct timer *timer_cancel(struct timer *t); /* NULL-safe; always returns NULL; not after it fired */
/* The timer goes before every ordinary timer due at the same time, as the network's sources do (http.c):
 * what sends requests out must not wait behind a queue of drains' turns. NULL-safe. */
void timer_urgent(struct timer *t);

/* ---- HTTP client ----
 * Async, on the loop, on libcurl's multi-socket API: HTTP/2 multiplexed over TLS where the server offers it,
 * HTTP/1.1 otherwise, connections pooled per loop. TLS (>= 1.2) is always verified against the
 * certificate's subjectAltName (names and IP literals; never the subject's CN). Redirects are not followed.
 * https only, except loopback addresses and the link-local AWS services (IMDS 169.254.169.254 /
 * fd00:ec2::254, EKS Pod Identity 169.254.170.23 / fd00:ec2::23, ECS 169.254.170.2) where plain http is
 * allowed. Proxies come from the environment as libcurl reads it (https_proxy/HTTPS_PROXY, no_proxy/NO_PROXY
 * with names, suffixes and CIDR ranges) or from http_request.proxy; loopback and link-local hosts never go
 * through a proxy. A request on a reused connection that the server closed before any byte of an answer is
 * sent once more on a new one, whatever its method (libcurl's rule): every POST spotdrain makes is safe to
 * repeat (an eviction, an SQS or STS call, CreateFleet with its ClientToken, a webhook alert). A call that
 * timed out before any answer came closes its connection, so that no other call
 * waits on a connection that stopped passing bytes.
 * Transport errors: -ECONNREFUSED (or the socket's errno), -EHOSTUNREACH (name not resolved), -ETIMEDOUT,
 * -ECONNRESET (connection lost before the answer was complete), -EBADMSG (TLS verification or handshake
 * failure; an answer's header block over 64 KiB), -EPROTO (malformed answer), -EFBIG (body over max_body).
 */
struct http_tls {
        const char *ca_file;   /* PEM bundle path, read again when it changes; NULL = system default */
        const char *ca_pem;    /* PEM in memory (kubeconfig certificate-authority-data) */
        const char *cert_file; /* client certificate */
        const char *cert_pem;
        const char *key_file;
        const char *key_pem;
        /* kubeconfig tls-server-name: the name sent (SNI) and verified instead of the URL's host. */
        const char *server_name;
};

struct http_request {
        const char *method; /* "GET" if NULL */
        const char *url;
        const char *const *headers; /* NULL-terminated "Name: value" strings */
        const char *body;
        size_t body_len;          /* 0 = strlen(body) */
        const char *bearer_token; /* sent as Authorization: Bearer; never logged */
        const struct http_tls *tls;
        /* Timeouts are real time, not engine time: the network does not run faster in a simulation. */
        uint64_t timeout_usec;         /* whole request; 0 = 30 s; streaming requests: 0 = none */
        uint64_t connect_timeout_usec; /* 0 = 5 s, shared out over the name's addresses */
        /* No byte of the answer for this long fails the call with -ETIMEDOUT (whole seconds; libcurl's
         * low-speed rule, so silence is noticed within this plus up to 5 s). 0 = none for ordinary requests,
         * 10 s for streaming ones: a watch that the server leaves silent is ended and started again. */
        uint64_t idle_timeout_usec;
        const char *proxy; /* "http://host:port" for this call instead of the environment's; NULL = env */
        size_t max_body;   /* 0 = 16 MiB; larger answers fail with -EFBIG */
        /* Streaming (watch): called with each chunk of a 2xx answer as it arrives instead of buffering the
         * body (other statuses are buffered into resp->body for the error message). Gets the userdata of
         * http_send(). Return <0 to abort: the call then ends with that error. */
        int (*on_data)(const char *data, size_t len, void *userdata);
};

struct http_response {
        long status; /* 0 when no answer came */
        int error;   /* negative errno on transport failure (-ETIMEDOUT, -ECONNREFUSED, -EFBIG, ...) */
        char *body;  /* NUL-terminated ("" when empty); NULL when streaming or when error < 0 */
        size_t body_len;
        char *content_type;
        char *retry_after; /* Retry-After header, if any */
        char errbuf[256];  /* the explanation of a transport failure, in words */
};

typedef void (*http_done_fn)(const struct http_response *resp, void *userdata);
struct http_call;
/* Starts a request. done is called exactly once (unless cancelled), from the loop, never from inside
 * http_send; the call (and resp) is released when done returns, so forget the handle in done. When http_send
 * itself fails (<0: -EPROTONOSUPPORT for http:// to a host that is neither loopback nor IMDS, or another
 * scheme; -EINVAL for a bad URL; -ENOMEM) nothing was sent and done is never called. ret may be NULL. */
int http_send(struct loop *l, const struct http_request *req, http_done_fn done, void *userdata,
              struct http_call **ret);
/* NULL-safe; done is not called after this. May be called from on_data and from any done callback (as may
 * http_send(); http_send_sync() and loop_free() may not). */
struct http_call *http_cancel(struct http_call *c);
/* http_cancel() of a call its owner found silent where bytes were due (a watch whose events are overdue):
 * its connection may have stopped passing bytes, and so may the pooled ones idle meanwhile. As after a call
 * that timed out, only connections used within the last two seconds are reused for a while. */
struct http_call *http_cancel_silent(struct http_call *c);
/* Blocking convenience for one-shot commands and tests: runs the loop until the answer. Returns
 * http_send()'s error, or resp->error (0 when an answer of any status came), or -ECANCELED when the loop was
 * ended. resp is filled whenever a transfer was attempted and must be released with http_response_clear().
 */
int http_send_sync(struct loop *l, const struct http_request *req, struct http_response *resp);
void http_response_clear(struct http_response *resp);
/* Maps an HTTP status to a negative errno (one place): 2xx 0, 400 EINVAL, 401 EACCES(token), 403 EPERM,
 * 404 ENOENT, 409 EEXIST, 410 ESTALE, 422 EINVAL, 429 EBUSY, 5xx EIO, 503 EAGAIN, 504 ETIMEDOUT; other 4xx
 * EINVAL, 1xx/3xx EPROTO, 0 (no answer) EIO. */
int http_status_to_errno(long status);
/* The same, but 409 depends on the method: AlreadyExists on POST (create) is -EEXIST, Conflict on
 * PUT/PATCH/DELETE (stale resourceVersion or precondition) is -ESTALE. */
int http_status_to_errno_method(const char *method, long status);

/* Internal to src/core (http.c on loop.c), not for other modules: the slot where http.c keeps its per-loop
 * state (the curl multi handle, its sources, the PEM file cache), with the teardown loop_free() calls (the
 * loop knows nothing of HTTP). */
void **loop_http_state(struct loop *l, void (*cleanup)(struct loop *l));

/* ---- backoff: one shared retry policy (exponential, full jitter) ---- */
struct backoff {
        uint64_t base_usec;
        uint64_t max_usec;
        unsigned attempt;
};
#define BACKOFF_INIT(base, max) ((struct backoff){ .base_usec = (base), .max_usec = (max) })
/* Delay before the next try: uniform in [floor, min(max, base * 2^attempt)], attempt grows with each call.
 * floor = max(base / 4, 1 usec) so that a retry loop never spins; 0 only when base is 0. max 0 = no cap. */
uint64_t backoff_next(struct backoff *b);
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
void log_setup(enum log_format format, int max_level); /* default: text, LOG_INFO */
enum log_format log_get_format(void);                  /* as set up, auto resolved */
/* Where text/JSON lines go (NULL = stderr); for tests. */
void log_set_output(FILE *f);
int log_parse_level(const char *s);  /* "debug", "info", "warning", "error"; -EINVAL otherwise */
int log_parse_format(const char *s); /* "text", "json", "journal", "auto" */
/* Text: "2026-11-30T06:00:00.123Z info message key=value key2=\"quoted value\"" (engine-clock time).
 * JSON: {"time":..,"level":..,"msg":..,"errno":..,"key":"value"}. Journal: MESSAGE, PRIORITY, ERRNO, and
 * each field upper-cased (node → NODE). An error appends ": strerror(error)" to the message.
 * fields: NULL-terminated key, value pairs (e.g. (const char *[]){"node", n, NULL}). Returns -abs(error) so
 * that `return log_full(LOG_ERR, r, NULL, "...")` propagates the error; 0 when error is 0. */
int log_full(int level, int error, const char *const *fields, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* As log_full, but the reason (an API's message, a parser's error), when there is one, ends the sentence
 * in place of strerror(error): the errno text is only the fallback, never tacked on after a reason. The
 * error still goes into the JSON "errno" and the journal's ERRNO. */
int log_full_reason(int level, int error, const char *reason, const char *const *fields, const char *fmt,
                    ...) __attribute__((format(printf, 5, 6)));
/* The words that say why error happened: reason when there is one, else strerror(-error). */
const char *error_reason(int error, const char *reason);
#define log_debug(...)                  log_full(LOG_DEBUG, 0, NULL, __VA_ARGS__)
#define log_info(...)                   log_full(LOG_INFO, 0, NULL, __VA_ARGS__)
#define log_notice(...)                 log_full(LOG_NOTICE, 0, NULL, __VA_ARGS__)
#define log_warning(...)                log_full(LOG_WARNING, 0, NULL, __VA_ARGS__)
#define log_error(...)                  log_full(LOG_ERR, 0, NULL, __VA_ARGS__)
#define log_error_errno(e, ...)         log_full(LOG_ERR, (e), NULL, __VA_ARGS__)
#define log_warning_errno(e, ...)       log_full(LOG_WARNING, (e), NULL, __VA_ARGS__)
#define log_debug_errno(e, ...)         log_full(LOG_DEBUG, (e), NULL, __VA_ARGS__)
#define log_error_reason(e, why, ...)   log_full_reason(LOG_ERR, (e), (why), NULL, __VA_ARGS__)
#define log_warning_reason(e, why, ...) log_full_reason(LOG_WARNING, (e), (why), NULL, __VA_ARGS__)
#define log_debug_reason(e, why, ...)   log_full_reason(LOG_DEBUG, (e), (why), NULL, __VA_ARGS__)

/* ---- shadow mode (--dry-run) ----
 * Process-wide: once enabled, the Kubernetes client and the AWS request layer send no write (each checks it
 * where its requests leave the process) and answer it themselves as accepted, after logging "would ..." and
 * counting it through the hook (the service layer's spotdrain_dry_run_actions_total{action}). Reads go out
 * as ever, so everything is heard and planned. */
typedef void (*dry_run_count_fn)(const char *action, void *userdata);
void dry_run_enable(dry_run_count_fn count, void *userdata);
void dry_run_disable(void);
bool dry_run_enabled(void);
/* Logs "would " + the formatted text at notice level (field dry_run=ACTION) and counts ACTION. */
void dry_run_would(const char *action, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
