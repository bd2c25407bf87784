/* aws/request: the one AWS request layer (see awsreq.h). */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "spotdrain/awsreq.h"
#include "spotdrain/awsxml.h"
#include "spotdrain/core.h"

#define DEFAULT_TIMEOUT_USEC (30ULL * 1000000ULL)
#define DEFAULT_BACKOFF_BASE (100ULL * 1000ULL)
#define DEFAULT_BACKOFF_MAX  (20ULL * 1000000ULL)
#define RETRY_AFTER_MAX_USEC (300ULL * 1000000ULL)
#define MAX_HEADERS          16

/* ---- environment and endpoints ---- */

const char *aws_env_get(const char *const *env, const char *name)
{
        size_t n = strlen(name);
        const char *v = NULL;

        if (!env)
                v = getenv(name);
        else
                for (const char *const *e = env; *e; e++)
                        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
                                v = *e + n + 1;
        return isempty(v) ? NULL : v;
}

const char *aws_env_region(const char *const *env)
{
        return aws_env_get(env, "AWS_REGION") ?: aws_env_get(env, "AWS_DEFAULT_REGION");
}

static bool env_true(const char *const *env, const char *name)
{
        const char *v = aws_env_get(env, name);
        return v && strcasecmp(v, "true") == 0;
}

static const char *env_endpoint(const char *const *env, const char *id)
{
        char name[64];

        if (!id)
                return NULL;
        snprintf(name, sizeof(name), "AWS_ENDPOINT_URL_%s", id);
        return aws_env_get(env, name);
}

/* scheme://authority[/path] without trailing slashes; NULL for anything else. */
static char *endpoint_normalize(const char *e)
{
        const char *host = startswith(e, "https://") ? e + 8 : startswith(e, "http://") ? e + 7 : NULL;
        size_t len;

        if (!host || !*host || *host == '/')
                return NULL;
        for (const char *p = host; *p && *p != '/'; p++)
                if (!isalnum((unsigned char)*p) && !strchr(".-:[]_", *p))
                        return NULL;
        len = strlen(e);
        while (len > (size_t)(host - e) && e[len - 1] == '/')
                len--;
        return strndup(e, len);
}

int aws_endpoint_resolve(const struct aws_endpoint_query *q, char **ret)
{
        const char *e = q->configured;
        bool fips, dual;

        if (isempty(e))
                e = NULL;
        if (!e && !env_true(q->env, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"))
                e = env_endpoint(q->env, q->service_id) ?: env_endpoint(q->env, q->legacy_id)
                                                              ?: aws_env_get(q->env, "AWS_ENDPOINT_URL");
        if (!e && !isempty(q->fallback))
                e = q->fallback;
        if (e) {
                *ret = endpoint_normalize(e);
                return *ret ? 0 : -EINVAL;
        }
        if (isempty(q->host))
                return -EINVAL;
        fips = env_true(q->env, "AWS_USE_FIPS_ENDPOINT");
        dual = env_true(q->env, "AWS_USE_DUALSTACK_ENDPOINT");
        if (isempty(q->region))
                *ret = strprintf("https://%s%s.amazonaws.com", q->host, fips ? "-fips" : "");
        else if (dual)
                *ret = strprintf("https://%s%s.%s.%s", q->host, fips ? "-fips" : "", q->region,
                                 startswith(q->region, "cn-") ? "api.amazonwebservices.com.cn" : "api.aws");
        else
                *ret = strprintf("https://%s%s.%s.amazonaws.com%s", q->host, fips ? "-fips" : "", q->region,
                                 startswith(q->region, "cn-") ? ".cn" : "");
        return *ret ? 0 : -ENOMEM;
}

/* ---- errors: the one table ---- */

static const char *const class_names[_AWS_ERR_MAX] = {
        [AWS_ERR_NONE] = "ok",
        [AWS_ERR_THROTTLED] = "throttled",
        [AWS_ERR_EXPIRED_CREDENTIALS] = "expired-credentials",
        [AWS_ERR_INVALID_CREDENTIALS] = "invalid-credentials",
        [AWS_ERR_ACCESS_DENIED] = "access-denied",
        [AWS_ERR_SERVER] = "server-error",
        [AWS_ERR_TRANSPORT] = "transport-error",
        [AWS_ERR_CLIENT] = "client-error",
        [AWS_ERR_PROTOCOL] = "protocol-error",
        [AWS_ERR_NO_CREDENTIALS] = "no-credentials",
        [AWS_ERR_CANCELLED] = "cancelled",
};

const char *aws_error_class_to_string(enum aws_error_class c)
{
        return (unsigned)c < _AWS_ERR_MAX ? class_names[c] : "error";
}

bool aws_error_class_retryable(enum aws_error_class c)
{
        return c == AWS_ERR_THROTTLED || c == AWS_ERR_SERVER || c == AWS_ERR_TRANSPORT;
}

/* Codes without their "Exception" suffix (matched either way). */
static const struct {
        const char *code;
        enum aws_error_class cls;
        bool refresh;
} error_codes[] = {
        { "Throttling", AWS_ERR_THROTTLED, false },
        { "Throttled", AWS_ERR_THROTTLED, false },
        { "RequestThrottled", AWS_ERR_THROTTLED, false },
        { "RequestLimitExceeded", AWS_ERR_THROTTLED, false },
        { "TooManyRequests", AWS_ERR_THROTTLED, false },
        { "SlowDown", AWS_ERR_THROTTLED, false },
        { "PriorRequestNotComplete", AWS_ERR_THROTTLED, false },
        { "BandwidthLimitExceeded", AWS_ERR_THROTTLED, false },
        { "EC2Throttled", AWS_ERR_THROTTLED, false },
        { "ExpiredToken", AWS_ERR_EXPIRED_CREDENTIALS, true },
        { "RequestExpired", AWS_ERR_EXPIRED_CREDENTIALS, true },
        { "InvalidClientTokenId", AWS_ERR_INVALID_CREDENTIALS, true },
        { "UnrecognizedClient", AWS_ERR_INVALID_CREDENTIALS, true },
        { "SignatureDoesNotMatch", AWS_ERR_INVALID_CREDENTIALS, false },
        { "InvalidSignature", AWS_ERR_INVALID_CREDENTIALS, false },
        { "IncompleteSignature", AWS_ERR_INVALID_CREDENTIALS, false },
        { "MissingAuthenticationToken", AWS_ERR_INVALID_CREDENTIALS, false },
        { "MissingClientTokenId", AWS_ERR_INVALID_CREDENTIALS, false },
        { "InvalidSecurity", AWS_ERR_INVALID_CREDENTIALS, false },
        { "AuthFailure", AWS_ERR_INVALID_CREDENTIALS, false },
        { "AccessDenied", AWS_ERR_ACCESS_DENIED, false },
        { "UnauthorizedOperation", AWS_ERR_ACCESS_DENIED, false },
        { "InternalError", AWS_ERR_SERVER, false },
        { "InternalFailure", AWS_ERR_SERVER, false },
        { "InternalServerError", AWS_ERR_SERVER, false },
        { "ServiceUnavailable", AWS_ERR_SERVER, false },
        { "Unavailable", AWS_ERR_SERVER, false },
        { "RequestTimeout", AWS_ERR_SERVER, false },
};

const char *aws_error_code_base(const char *code, char *buf, size_t size)
{
        const char *hash = code ? strrchr(code, '#') : NULL;
        size_t len;

        snprintf(buf, size, "%s", hash ? hash + 1 : code ? code : "");
        len = strlen(buf);
        if (len > strlen("Exception") && streq(buf + len - strlen("Exception"), "Exception"))
                buf[len - strlen("Exception")] = 0;
        return buf;
}

enum aws_error_class aws_error_classify(const char *code, long status, bool *ret_refresh)
{
        char buf[96];

        if (ret_refresh)
                *ret_refresh = false;
        if (!isempty(code)) {
                aws_error_code_base(code, buf, sizeof(buf));
                for (size_t i = 0; i < ARRAY_SIZE(error_codes); i++)
                        if (streq(error_codes[i].code, buf)) {
                                if (ret_refresh)
                                        *ret_refresh = error_codes[i].refresh;
                                return error_codes[i].cls;
                        }
        }
        if (status >= 500)
                return AWS_ERR_SERVER;
        if (status == 429)
                return AWS_ERR_THROTTLED;
        if (isempty(code) && status == 403)
                return AWS_ERR_ACCESS_DENIED;
        if (status >= 200 && status < 300)
                return AWS_ERR_NONE;
        return AWS_ERR_CLIENT;
}

int aws_error_class_errno(enum aws_error_class c, long status)
{
        switch (c) {
        case AWS_ERR_NONE:
                return 0;
        case AWS_ERR_THROTTLED:
                return -EBUSY;
        case AWS_ERR_EXPIRED_CREDENTIALS:
                return -EKEYEXPIRED;
        case AWS_ERR_INVALID_CREDENTIALS:
                return -EKEYREJECTED;
        case AWS_ERR_ACCESS_DENIED:
                return -EACCES;
        case AWS_ERR_PROTOCOL:
                return -EBADMSG;
        case AWS_ERR_NO_CREDENTIALS:
                return -ENOKEY;
        case AWS_ERR_CANCELLED:
                return -ECANCELED;
        case AWS_ERR_SERVER:
        case AWS_ERR_TRANSPORT:
        case AWS_ERR_CLIENT:
        case _AWS_ERR_MAX:
                break;
        }
        return http_status_to_errno(status) ?: -EIO;
}

static void result_set(struct aws_result *r, enum aws_error_class cls, int error, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void result_set(struct aws_result *r, enum aws_error_class cls, int error, const char *fmt, ...)
{
        va_list ap;

        r->cls = cls;
        r->error = error;
        va_start(ap, fmt);
        vsnprintf(r->message, sizeof(r->message), fmt, ap);
        va_end(ap);
}

static const char *json_string(const cJSON *o, const char *a, const char *b)
{
        const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, a));
        return !isempty(v) || !b ? v : cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, b));
}

/* The code and message of an error answer, if its document has them. A JSON 1.0 request answered with the
 * query protocol's XML error document (moto with its signature check on does so for SignatureDoesNotMatch
 * and InvalidClientTokenId; so may a front end before the service) is read as one: its code is what
 * classifies the error (a rejected key, not a bare 403), as botocore reads it. */
static void error_document(enum aws_protocol p, const char *body, size_t len, struct aws_result *r)
{
        if (!body || len == 0)
                return;
        if (p == AWS_PROTOCOL_JSON_10) {
                cJSON *o = cJSON_ParseWithLength(body, len);
                bool object = cJSON_IsObject(o);
                const char *code = json_string(o, "__type", "code"),
                           *msg = json_string(o, "message", "Message");
                if (isempty(code))
                        code = json_string(o, "Code", NULL);
                if (!isempty(code)) {
                        const char *hash = strrchr(code, '#');
                        snprintf(r->code, sizeof(r->code), "%s", hash ? hash + 1 : code);
                }
                if (msg)
                        snprintf(r->message, sizeof(r->message), "%s", msg);
                cJSON_Delete(o);
                size_t i = 0;
                while (i < len && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' || body[i] == '\n'))
                        i++;
                if (object || i == len || body[i] != '<')
                        return;
        }
        struct aws_error e = {};
        if (aws_error_parse(body, len, &e) == 0) {
                snprintf(r->code, sizeof(r->code), "%s", e.code ? e.code : "");
                snprintf(r->message, sizeof(r->message), "%s", e.message ? e.message : "");
        }
        aws_error_clear(&e);
}

void aws_result_from_answer(enum aws_protocol p, int transport_error, long status, const char *body,
                            size_t len, struct aws_result *ret)
{
        *ret = (struct aws_result){ .status = transport_error < 0 ? 0 : status };
        if (transport_error < 0) {
                result_set(ret, AWS_ERR_TRANSPORT, transport_error, "%s", strerror(-transport_error));
                return;
        }
        if (status >= 200 && status < 300)
                return;
        error_document(p, body, len, ret);
        ret->cls = aws_error_classify(ret->code, status, &ret->refresh);
        if (ret->cls == AWS_ERR_NONE)
                ret->cls = AWS_ERR_PROTOCOL; /* 1xx, 3xx */
        ret->error = aws_error_class_errno(ret->cls, status);
        if (!ret->message[0])
                snprintf(ret->message, sizeof(ret->message), "HTTP %ld", status);
}

/* ---- form encoding ---- */

static int form_escape(struct buf *b, const char *s)
{
        for (; *s; s++) {
                unsigned char ch = (unsigned char)*s;
                int r = isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~'
                            ? buf_append(b, s, 1)
                            : buf_printf(b, "%%%02X", ch);
                if (r < 0)
                        return -ENOMEM;
        }
        return 0;
}

int aws_form_add(struct buf *b, const char *key, const char *value)
{
        if ((b->len > 0 && buf_append(b, "&", 1) < 0) || form_escape(b, key) < 0 ||
            buf_append(b, "=", 1) < 0 || form_escape(b, value ? value : "") < 0)
                return -ENOMEM;
        return 0;
}

/* ---- clients ---- */

struct aws_request {
        struct aws_client
            *client; /* NULL once detached (cancelled or freed while waiting for credentials) */
        struct aws_request *prev, *next;
        char *action, *url, *body;
        size_t body_len;
        uint64_t timeout_usec;
        aws_call_fn done;
        void *userdata;
        struct http_call *http;
        struct timer *timer;
        struct backoff backoff;
        unsigned attempts;
        bool refreshed;  /* the one retry after new credentials was used */
        bool refreshing; /* waiting for the refresh callback, which owns the request if detached */
        bool in_done;
        bool cancelled;
};

struct aws_client {
        struct loop *loop;
        struct aws_client_config cfg;
        char *service, *target_prefix, *endpoint, *region;
        char **headers;
        struct aws_request *requests;
        bool freeing;
};

int aws_client_new(struct loop *l, const struct aws_client_config *cfg, struct aws_client **ret)
{
        struct aws_client *c;
        const char *region;
        size_t n = 0;
        int r;

        if (!l || !cfg || isempty(cfg->service) || !ret ||
            (cfg->protocol == AWS_PROTOCOL_JSON_10 && isempty(cfg->target_prefix)))
                return -EINVAL;
        region = cfg->region ?: cfg->endpoint.region ?: aws_env_region(cfg->endpoint.env);
        if (isempty(region))
                return -EDESTADDRREQ;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->loop = l;
        c->cfg = *cfg;
        while (cfg->headers && cfg->headers[n])
                n++;
        c->headers = calloc(n + 1, sizeof(char *));
        c->service = strdup(cfg->service);
        c->region = strdup(region);
        c->target_prefix = cfg->target_prefix ? strdup(cfg->target_prefix) : NULL;
        if (!c->headers || !c->service || !c->region || (cfg->target_prefix && !c->target_prefix))
                goto oom;
        for (size_t i = 0; i < n; i++)
                if (!(c->headers[i] = strdup(cfg->headers[i])))
                        goto oom;
        r = aws_endpoint_resolve(&cfg->endpoint, &c->endpoint);
        if (r < 0) {
                aws_client_free(c);
                return r;
        }
        /* Nothing borrowed is kept but the callbacks. */
        c->cfg.endpoint = (struct aws_endpoint_query){};
        c->cfg.headers = NULL;
        c->cfg.region = NULL;
        c->cfg.service = c->service;
        c->cfg.target_prefix = c->target_prefix;
        if (!c->cfg.timeout_usec)
                c->cfg.timeout_usec = DEFAULT_TIMEOUT_USEC;
        if (!c->cfg.max_attempts)
                c->cfg.max_attempts = 1;
        if (!c->cfg.backoff_base_usec)
                c->cfg.backoff_base_usec = DEFAULT_BACKOFF_BASE;
        if (!c->cfg.backoff_max_usec)
                c->cfg.backoff_max_usec = DEFAULT_BACKOFF_MAX;
        log_debug("aws %s: endpoint %s, region %s", c->service, c->endpoint, c->region);
        *ret = c;
        return 0;
oom:
        aws_client_free(c);
        return -ENOMEM;
}

const char *aws_client_endpoint(const struct aws_client *c)
{
        return c->endpoint;
}

int aws_service_client_new(struct loop *l, const char *region, const struct aws_client_config *cfg,
                           size_t size, void **ret)
{
        struct aws_client **c; /* the service client, through its first member */
        int r;

        if (!l || isempty(region) || !ret || size < sizeof(*c))
                return -EINVAL;
        c = calloc(1, size);
        if (!c)
                return -ENOMEM;
        r = aws_client_new(l, cfg, c);
        if (r < 0) {
                free(c);
                return r;
        }
        *ret = c;
        return 0;
}

const char *aws_client_region(const struct aws_client *c)
{
        return c->region;
}

/* ---- requests ---- */

static void request_unlink(struct aws_request *q)
{
        struct aws_client *c = q->client;

        if (!c)
                return;
        if (q->prev)
                q->prev->next = q->next;
        else if (c->requests == q)
                c->requests = q->next;
        if (q->next)
                q->next->prev = q->prev;
        q->prev = q->next = NULL;
        q->client = NULL;
}

static void request_free(struct aws_request *q)
{
        request_unlink(q);
        q->http = http_cancel(q->http);
        q->timer = timer_cancel(q->timer);
        free(q->action);
        free(q->url);
        if (q->body)
                explicit_bzero(q->body, q->body_len);
        free(q->body);
        free(q);
}

/* Ends the call: done with res (unless cancelled from inside it), then the request is gone. */
static void request_finish(struct aws_request *q, const struct aws_result *res, const char *body, size_t len)
{
        request_unlink(q);
        q->in_done = true;
        q->done(res, body, len, q->userdata);
        request_free(q);
}

static void on_http_done(const struct http_response *resp, void *userdata);

/* Signs (when there are credentials to sign with) and sends one attempt. */
static int request_send(struct aws_request *q)
{
        struct aws_client *c = q->client;
        _cleanup_free_ char *target = NULL;
        const char *headers[MAX_HEADERS + 1];
        char **signed_headers = NULL;
        size_t n = 0;
        int r;

        if (c->cfg.protocol == AWS_PROTOCOL_JSON_10) {
                target = strprintf("X-Amz-Target: %s.%s", c->target_prefix, q->action);
                if (!target)
                        return -ENOMEM;
                headers[n++] = "Content-Type: application/x-amz-json-1.0";
                headers[n++] = target;
        } else
                headers[n++] = "Content-Type: application/x-www-form-urlencoded; charset=utf-8";
        for (size_t i = 0; c->headers[i] && n < MAX_HEADERS - 4; i++)
                headers[n++] = c->headers[i];
        headers[n] = NULL;
        if (c->cfg.credentials) {
                const struct aws_credentials *creds = c->cfg.credentials(c->cfg.credentials_userdata);
                if (!creds || isempty(creds->access_key_id) || isempty(creds->secret_access_key))
                        return -ENOKEY;
                r = sigv4_sign_headers(&(struct sigv4_request){ .method = "POST",
                                                                .url = q->url,
                                                                .headers = headers,
                                                                .body = q->body,
                                                                .body_len = q->body_len,
                                                                .region = c->region,
                                                                .service = c->service,
                                                                .time_usec = now_realtime_usec() },
                                       creds, &signed_headers);
                if (r < 0)
                        return r;
                for (size_t i = 0; signed_headers[i] && n < MAX_HEADERS; i++)
                        headers[n++] = signed_headers[i];
                headers[n] = NULL;
        }
        r = http_send(c->loop,
                      &(struct http_request){ .method = "POST",
                                              .url = q->url,
                                              .headers = headers,
                                              .body = q->body,
                                              .body_len = q->body_len,
                                              .timeout_usec = q->timeout_usec,
                                              .max_body = c->cfg.max_body },
                      on_http_done, q, &q->http);
        sigv4_strv_free(signed_headers);
        if (r < 0)
                return r;
        q->attempts++;
        log_debug("aws %s: %s sent (attempt %u)", c->service, q->action, q->attempts);
        return 0;
}

static void send_failed(struct aws_request *q, int r)
{
        struct aws_result res = { .attempts = q->attempts };

        result_set(&res, r == -ENOKEY ? AWS_ERR_NO_CREDENTIALS : AWS_ERR_TRANSPORT, r,
                   "the request could not be sent: %s", strerror(-r));
        request_finish(q, &res, NULL, 0);
}

static void on_retry_timer(void *userdata)
{
        struct aws_request *q = userdata;
        int r;

        q->timer = NULL;
        r = request_send(q);
        if (r < 0)
                send_failed(q, r);
}

static void on_refreshed(void *ctx)
{
        struct aws_request *q = ctx;

        q->refreshing = false;
        if (!q->client) { /* cancelled or its client freed meanwhile */
                request_free(q);
                return;
        }
        on_retry_timer(q);
}

/* Retry-After: delta-seconds or an HTTP-date. 0 when absent or unreadable. */
static uint64_t retry_after_usec(const char *v)
{
        struct tm tm = {};
        char *end;

        if (isempty(v))
                return 0;
        errno = 0;
        unsigned long long s = strtoull(v, &end, 10);
        if (errno == 0 && end != v && *end == '\0')
                return s > RETRY_AFTER_MAX_USEC / 1000000ULL ? RETRY_AFTER_MAX_USEC : s * 1000000ULL;
        end = strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        if (end && *end == '\0') {
                uint64_t at = (uint64_t)timegm(&tm) * 1000000ULL, now = now_realtime_usec();
                return at <= now ? 0 : at - now > RETRY_AFTER_MAX_USEC ? RETRY_AFTER_MAX_USEC : at - now;
        }
        return 0;
}

static void on_http_done(const struct http_response *resp, void *userdata)
{
        struct aws_request *q = userdata;
        struct aws_client *c = q->client;
        struct aws_result res;
        int r;

        q->http = NULL;
        aws_result_from_answer(c->cfg.protocol, resp->error, resp->status, resp->body, resp->body_len, &res);
        res.attempts = q->attempts;
        if (resp->error < 0 && resp->errbuf[0])
                snprintf(res.message, sizeof(res.message), "%s", resp->errbuf);
        res.retry_after_usec = retry_after_usec(resp->retry_after);
        if (res.error < 0)
                log_debug("aws %s: %s: %s %s (HTTP %ld)", c->service, q->action,
                          aws_error_class_to_string(res.cls), res.code, res.status);

        /* An expired or unknown token: new credentials, then one more try. */
        if (res.refresh && c->cfg.refresh && c->cfg.credentials && !q->refreshed) {
                q->refreshed = true;
                q->refreshing = true;
                r = c->cfg.refresh(c->cfg.credentials_userdata, on_refreshed, q);
                if (r >= 0)
                        return;
                q->refreshing = false;
        }
        if (aws_error_class_retryable(res.cls) && q->attempts < c->cfg.max_attempts && !c->freeing) {
                uint64_t delay = backoff_next(&q->backoff);
                if (res.retry_after_usec > delay)
                        delay = res.retry_after_usec;
                if (timer_start_in(c->loop, delay, on_retry_timer, q, &q->timer) >= 0)
                        return;
        }
        request_finish(q, &res, resp->error < 0 ? NULL : resp->body, resp->error < 0 ? 0 : resp->body_len);
}

/* Whether an action only reads (Receive*, Get*, Describe*, List*, and the STS exchanges of a token for
 * credentials): everything else changes something in AWS, and shadow mode sends none of it. */
static bool action_reads(const char *action)
{
        static const char *const reads[] = { "Receive", "Get", "Describe", "List", "AssumeRole" };
        for (size_t i = 0; i < ARRAY_SIZE(reads); i++)
                if (strncmp(action, reads[i], strlen(reads[i])) == 0)
                        return true;
        return false;
}

/* Shadow mode: the write was not sent; it is answered from the loop as accepted, with no body (what the
 * caller reads from it is what an empty answer says: no instance launched, nothing deleted). */
static void on_dry_run(void *userdata)
{
        struct aws_request *q = userdata;
        struct aws_result res = { .status = 200, .attempts = 0 };
        q->timer = NULL;
        request_finish(q, &res, "", 0);
}

int aws_request_start(struct aws_client *c, const struct aws_call_params *p, aws_call_fn done,
                      void *userdata, struct aws_request **ret)
{
        struct aws_request *q;
        int r;

        if (!c || !p || isempty(p->action) || !p->body || !done)
                return -EINVAL;
        if (c->freeing)
                return -ECANCELED;
        q = calloc(1, sizeof(*q));
        if (!q)
                return -ENOMEM;
        *q = (struct aws_request){
                .client = c,
                .body_len = p->body_len ?: strlen(p->body),
                .timeout_usec = p->timeout_usec ?: c->cfg.timeout_usec,
                .done = done,
                .userdata = userdata,
                .backoff = BACKOFF_INIT(c->cfg.backoff_base_usec, c->cfg.backoff_max_usec),
        };
        q->action = strdup(p->action);
        q->url = strprintf("%s/", c->endpoint);
        q->body = malloc(q->body_len + 1);
        if (!q->action || !q->url || !q->body) {
                request_free(q);
                return -ENOMEM;
        }
        memcpy(q->body, p->body, q->body_len);
        q->body[q->body_len] = 0;
        q->next = c->requests;
        if (c->requests)
                c->requests->prev = q;
        c->requests = q;
        if (dry_run_enabled() && !action_reads(q->action)) {
                _cleanup_free_ char *action = strprintf("%s:%s", c->service, q->action);
                dry_run_would(action ? action : q->action, "call %s %s", c->service, q->action);
                r = timer_start_in(c->loop, 0, on_dry_run, q, &q->timer);
        } else
                r = request_send(q);
        if (r < 0) {
                log_debug_errno(r, "aws %s: %s not sent", c->service, p->action);
                request_free(q);
                return r;
        }
        if (ret)
                *ret = q;
        return 0;
}

struct aws_request *aws_request_cancel(struct aws_request *r)
{
        if (!r || r->in_done || r->cancelled)
                return NULL;
        r->cancelled = true;
        if (r->refreshing) {
                /* The refresh callback still holds it: it frees the request when it comes. */
                request_unlink(r);
                return NULL;
        }
        request_free(r);
        return NULL;
}

struct aws_client *aws_client_free(struct aws_client *c)
{
        if (!c)
                return NULL;
        c->freeing = true;
        while (c->requests) {
                struct aws_request *q = c->requests;
                if (c->cfg.notify_cancel && !q->refreshing) {
                        struct aws_result res = { .attempts = q->attempts };
                        q->http = http_cancel(q->http);
                        q->timer = timer_cancel(q->timer);
                        result_set(&res, AWS_ERR_CANCELLED, -ECANCELED, "the client was freed");
                        request_finish(q, &res, NULL, 0);
                } else
                        aws_request_cancel(q);
        }
        strv_free(c->headers);
        free(c->service);
        free(c->target_prefix);
        free(c->endpoint);
        free(c->region);
        free(c);
        return NULL;
}
