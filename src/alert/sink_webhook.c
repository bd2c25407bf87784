/* The webhook alert sink: render, queue, POST from the loop, retry with backoff. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <systemd/sd-event.h>
#include <time.h>

#include "spotdrain/alert.h"
#include "spotdrain/alert_webhook.h"
#include "spotdrain/config.h"
#include "spotdrain/core.h"
#include "spotdrain/metrics.h"
#include "spotdrain/service.h"

#define DEFAULT_TIMEOUT_USEC      (10ULL * 1000000ULL)
#define DEFAULT_MAX_ATTEMPTS      5u
#define DEFAULT_BACKOFF_BASE_USEC (1ULL * 1000000ULL)
#define DEFAULT_BACKOFF_MAX_USEC  (60ULL * 1000000ULL)
#define DEFAULT_MAX_PENDING       256u
#define MAX_SECRET_FILE           (64u * 1024u)

struct delivery {
        struct webhook_sink *w;
        char *body;
        unsigned attempts;
        struct backoff backoff;
        struct http_call *call;
        sd_event_source *retry;
        struct delivery *prev, *next;
};

struct webhook_sink {
        struct loop *loop;
        char *url; /* secret */
        enum webhook_format format;
        char *template_text;
        char **headers; /* secret values; NULL-terminated, includes Content-Type */
        size_t n_headers;
        uint64_t timeout_usec;
        char *proxy; /* its own proxy URL (may carry credentials), or NULL */
        unsigned max_attempts;
        uint64_t backoff_base_usec, backoff_max_usec;
        size_t max_pending;
        struct metrics *metrics; /* borrowed; NULL: deliveries not counted */
        struct delivery *queue;
        size_t pending;
        bool idle; /* pending == 0; a flag for loop_run_until() */
        struct webhook_stats stats;
        /* webhook_sink_when_flushed(): the callback, its timeout, and the loop turn that reports idle. */
        webhook_flushed_fn flushed_fn;
        void *flushed_userdata;
        sd_event_source *flush_timer, *flush_idle;
};

int webhook_format_from_string(const char *s)
{
        if (streq_ptr(s, "slack"))
                return WEBHOOK_FORMAT_SLACK;
        if (streq_ptr(s, "json"))
                return WEBHOOK_FORMAT_JSON;
        return -EINVAL;
}

/* ---- rendering ---- */

static const char *alert_field(const struct alert *a, const char *name)
{
        for (const char *const *f = a->fields; f && f[0] && f[1]; f += 2)
                if (streq(f[0], name))
                        return f[1];
        return NULL;
}

/* The value of {{name}}; buf holds a formatted time. */
static const char *template_value(const struct alert *a, const char *name, char *buf, size_t len)
{
        bool warning = alert_kind_is_warning(a->kind);
        const char *v;

        if (streq(name, "kind"))
                return alert_kind_to_string(a->kind);
        if (streq(name, "reason"))
                return alert_kind_reason(a->kind);
        if (streq(name, "severity"))
                return warning ? "warning" : "info";
        if (streq(name, "emoji"))
                return warning ? ":warning:" : ":information_source:";
        if (streq(name, "node"))
                return a->node;
        if (streq(name, "message"))
                return a->message;
        if (streq(name, "time"))
                return format_rfc3339(a->at_usec, buf, len) >= 0 ? buf : NULL;
        v = alert_field(a, name);
        return v;
}

/* {{name}}: letters, digits, '_', '-', '.'; short. */
static bool template_name_valid(const char *s, size_t n)
{
        if (n == 0 || n >= 64)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)s[i]) && !strchr("_-.", s[i]))
                        return false;
        return true;
}

/* Slack's mrkdwn gives &, < and > a meaning (<URL|text> links, <!channel> and <@USER> mentions): a value
 * someone else chose (a pod's or a node's name, a message quoting a notice) must not turn into a link or
 * ping the channel. Slack's own rule is to send these three as HTML entities and nothing else. */
static int append_slack_escaped(struct buf *b, const char *v)
{
        int r = 0;

        for (const char *p = v; r >= 0 && *p; p++) {
                size_t n = strcspn(p, "&<>");
                r = buf_append(b, p, n);
                p += n;
                if (r < 0 || !*p)
                        break;
                r = buf_printf(b, "%s", *p == '&' ? "&amp;" : *p == '<' ? "&lt;" : "&gt;");
        }
        return r;
}

/* The template's own text is the operator's and goes out as written (a <URL|link> in it stays a link); with
 * slack, the values put in for {{NAME}} are escaped. */
static int render_template(const struct alert *a, const char *tmpl, bool slack, char **ret)
{
        struct buf b = {};
        const char *p = tmpl;
        int r = 0;

        while (r >= 0 && *p) {
                const char *open = strstr(p, "{{"), *close;
                if (!open) {
                        r = buf_append(&b, p, strlen(p));
                        break;
                }
                close = strstr(open + 2, "}}");
                if (!close) {
                        r = buf_append(&b, p, strlen(p));
                        break;
                }
                r = buf_append(&b, p, (size_t)(open - p));
                if (r < 0)
                        break;
                if (!template_name_valid(open + 2, (size_t)(close - open - 2))) {
                        /* Text that happens to hold braces: copy the "{{" and look further on. */
                        r = buf_append(&b, "{{", 2);
                        p = open + 2;
                        continue;
                }
                {
                        char name[64], tbuf[64];
                        const char *v;

                        memcpy(name, open + 2, (size_t)(close - open - 2));
                        name[close - open - 2] = '\0';
                        v = template_value(a, name, tbuf, sizeof(tbuf));
                        if (v)
                                r = slack ? append_slack_escaped(&b, v) : buf_append(&b, v, strlen(v));
                }
                p = close + 2;
        }
        if (r >= 0 && !b.data)
                r = buf_append(&b, "", 0);
        if (r < 0) {
                buf_free(&b);
                return -ENOMEM;
        }
        *ret = b.data;
        return 0;
}

static cJSON *add_string_or_null(cJSON *o, const char *key, const char *v)
{
        return v ? cJSON_AddStringToObject(o, key, v) : cJSON_AddNullToObject(o, key);
}

int webhook_render(const struct alert *a, enum webhook_format format, const char *template_text, char **ret)
{
        _cleanup_free_ char *text = NULL;
        cJSON *o, *fields;
        char tbuf[64];
        char *out;
        int r;

        if (!a || (unsigned)a->kind >= _ALERT_KIND_MAX || !a->message)
                return -EINVAL;
        if (!template_text)
                template_text = a->node ? "{{emoji}} spotdrain {{kind}} on {{node}}: {{message}}"
                                        : "{{emoji}} spotdrain {{kind}}: {{message}}";
        r = render_template(a, template_text, format == WEBHOOK_FORMAT_SLACK, &text);
        if (r < 0)
                return r;
        o = cJSON_CreateObject();
        if (!o)
                return -ENOMEM;
        if (format == WEBHOOK_FORMAT_SLACK) {
                if (!cJSON_AddStringToObject(o, "text", text))
                        goto oom;
        } else {
                if (format_rfc3339(a->at_usec, tbuf, sizeof(tbuf)) < 0)
                        tbuf[0] = '\0';
                if (!cJSON_AddStringToObject(o, "kind", alert_kind_to_string(a->kind)) ||
                    !cJSON_AddStringToObject(o, "reason", alert_kind_reason(a->kind)) ||
                    !cJSON_AddStringToObject(o, "severity",
                                             alert_kind_is_warning(a->kind) ? "warning" : "info") ||
                    !add_string_or_null(o, "node", a->node) ||
                    !cJSON_AddStringToObject(o, "message", a->message) ||
                    !add_string_or_null(o, "time", tbuf[0] ? tbuf : NULL) ||
                    !add_string_or_null(o, "deadline", alert_field(a, "deadline")) ||
                    !(fields = cJSON_AddObjectToObject(o, "fields")) ||
                    !cJSON_AddStringToObject(o, "text", text) ||
                    !cJSON_AddStringToObject(o, "source", "spotdrain"))
                        goto oom;
                for (const char *const *f = a->fields; f && f[0] && f[1]; f += 2)
                        if (!cJSON_GetObjectItemCaseSensitive(fields, f[0]) &&
                            !cJSON_AddStringToObject(fields, f[0], f[1]))
                                goto oom;
                if (a->pod && (!cJSON_AddStringToObject(o, "pod", a->pod->name) ||
                               !cJSON_AddStringToObject(o, "namespace", a->pod->namespace)))
                        goto oom;
                if (a->postmortem) {
                        cJSON *pm = cJSON_Duplicate(a->postmortem, true);
                        if (!pm || !cJSON_AddItemToObject(o, "postmortem", pm)) {
                                cJSON_Delete(pm);
                                goto oom;
                        }
                }
        }
        out = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (!out)
                return -ENOMEM;
        *ret = out;
        return 0;
oom:
        cJSON_Delete(o);
        return -ENOMEM;
}

/* ---- the queue ---- */

static void flush_finish(struct webhook_sink *w, int error)
{
        webhook_flushed_fn fn = w->flushed_fn;
        void *userdata = w->flushed_userdata;

        w->flushed_fn = NULL;
        w->flushed_userdata = NULL;
        w->flush_timer = sd_event_source_disable_unref(w->flush_timer);
        w->flush_idle = sd_event_source_disable_unref(w->flush_idle);
        if (fn)
                fn(userdata, error);
}

static int on_flush_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
        flush_finish(userdata, -ETIMEDOUT);
        return 0;
}

static int on_flush_idle(sd_event_source *s, void *userdata)
{
        struct webhook_sink *w = userdata;

        /* An alert may have been queued since the turn was armed: then wait for it too. */
        if (w->pending == 0)
                flush_finish(w, 0);
        else
                w->flush_idle = sd_event_source_disable_unref(w->flush_idle);
        return 0;
}

/* Reports idle to a waiting webhook_sink_when_flushed() on the next loop turn, never from inside the
 * delivery callback that emptied the queue. */
static void flush_check(struct webhook_sink *w)
{
        if (!w->flushed_fn || w->pending > 0 || w->flush_idle)
                return;
        if (sd_event_add_defer(loop_event(w->loop), &w->flush_idle, on_flush_idle, w) < 0)
                flush_finish(w, 0);
}

static void delivery_free(struct delivery *d)
{
        struct webhook_sink *w = d->w;

        if (d->prev)
                d->prev->next = d->next;
        else
                w->queue = d->next;
        if (d->next)
                d->next->prev = d->prev;
        w->pending--;
        w->idle = w->pending == 0;
        http_cancel(d->call);
        sd_event_source_disable_unref(d->retry);
        free(d->body);
        free(d);
        flush_check(w);
}

static void delivery_send(struct delivery *d);

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct delivery *d = userdata;

        d->retry = sd_event_source_disable_unref(d->retry);
        delivery_send(d);
        return 0;
}

/* Retry-After in seconds (the HTTP-date form is not worth it for a webhook); 0 when absent or unreadable. */
static uint64_t retry_after_usec(const char *s)
{
        char *end;
        unsigned long v;

        if (isempty(s) || !isdigit((unsigned char)*s))
                return 0;
        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno || *end)
                return 0;
        return v > 86400 ? 86400ULL * 1000000ULL : (uint64_t)v * 1000000ULL;
}

static void delivery_finish(struct delivery *d, bool ok)
{
        struct webhook_sink *w = d->w;

        if (ok) {
                w->stats.delivered++;
                metrics_counter_inc(w->metrics, METRIC_WEBHOOK_DELIVERIES, "delivered", NULL);
        } else {
                w->stats.failed++;
                metrics_counter_inc(w->metrics, METRIC_WEBHOOK_DELIVERIES, "failed", NULL);
        }
        delivery_free(d);
}

static void on_done(const struct http_response *resp, void *userdata)
{
        struct delivery *d = userdata;
        struct webhook_sink *w = d->w;
        uint64_t delay, after;
        bool retry;
        int r;

        d->call = NULL;
        if (resp->error == 0 && resp->status >= 200 && resp->status < 300) {
                delivery_finish(d, true);
                return;
        }
        retry = resp->error < 0 || resp->status == 429 || resp->status >= 500;
        /* Never the URL nor curl's explanation: either may carry the URL, which is a secret. */
        if (resp->error < 0)
                log_debug_errno(resp->error, "alert webhook: attempt %u of %u failed", d->attempts,
                                w->max_attempts);
        else
                log_debug("alert webhook: attempt %u of %u answered HTTP %ld", d->attempts, w->max_attempts,
                          resp->status);
        if (!retry || d->attempts >= w->max_attempts) {
                delivery_finish(d, false);
                return;
        }
        delay = backoff_next(&d->backoff);
        after = retry_after_usec(resp->retry_after);
        if (after > delay)
                delay = after < w->backoff_max_usec ? after : w->backoff_max_usec;
        r = sd_event_add_time_relative(loop_event(w->loop), &d->retry, CLOCK_MONOTONIC, delay, 0, on_retry,
                                       d);
        if (r < 0) {
                log_debug_errno(r, "alert webhook: cannot schedule a retry");
                delivery_finish(d, false);
                return;
        }
        w->stats.retries++;
        metrics_counter_inc(w->metrics, METRIC_WEBHOOK_DELIVERIES, "retried", NULL);
}

static void delivery_send(struct delivery *d)
{
        struct webhook_sink *w = d->w;
        struct http_request req = {
                .method = "POST",
                .url = w->url,
                .headers = (const char *const *)w->headers,
                .body = d->body,
                .body_len = strlen(d->body),
                .timeout_usec = w->timeout_usec,
                .max_body = 64 * 1024,
                .proxy = w->proxy,
        };
        int r;

        d->attempts++;
        r = http_send(w->loop, &req, on_done, d, &d->call);
        if (r < 0) {
                log_debug_errno(r, "alert webhook: cannot send");
                delivery_finish(d, false);
        }
}

void webhook_sink_deliver(const struct alert *a, void *userdata)
{
        struct webhook_sink *w = userdata;
        struct delivery *d;
        int r;

        if (!w || !a)
                return;
        /* A pod evicted as planned is its Event's news, not a page; one that leaves no trace (a post-mortem
         * goes with it) is both. */
        if (a->kind == ALERT_POD_EVICTED && !alert_field(a, "postmortem"))
                return;
        if (w->pending >= w->max_pending) {
                log_debug("alert webhook: %zu alerts pending, dropping %s", w->pending,
                          alert_kind_to_string(a->kind));
                goto drop;
        }
        d = calloc(1, sizeof(*d));
        if (!d)
                goto drop;
        r = webhook_render(a, w->format, w->template_text, &d->body);
        if (r < 0) {
                free(d);
                log_debug_errno(r, "alert webhook: cannot render %s", alert_kind_to_string(a->kind));
                goto drop;
        }
        d->w = w;
        d->backoff = BACKOFF_INIT(w->backoff_base_usec, w->backoff_max_usec);
        d->next = w->queue;
        if (w->queue)
                w->queue->prev = d;
        w->queue = d;
        w->pending++;
        w->idle = false;
        delivery_send(d);
        return;
drop:
        w->stats.dropped++;
        metrics_counter_inc(w->metrics, METRIC_WEBHOOK_DELIVERIES, "dropped", NULL);
}

/* ---- setup ---- */

static char *trim(char *s)
{
        char *e;

        while (isspace((unsigned char)*s))
                s++;
        e = s + strlen(s);
        while (e > s && isspace((unsigned char)e[-1]))
                *--e = '\0';
        return s;
}

static bool header_valid(const char *h)
{
        const char *colon = strchr(h, ':');

        if (!colon || colon == h)
                return false;
        for (const char *p = h; p < colon; p++)
                if (!isgraph((unsigned char)*p))
                        return false;
        return !strpbrk(h, "\r\n");
}

static bool header_is(const char *h, const char *name)
{
        size_t n = strlen(name);
        return strncasecmp(h, name, n) == 0 && h[n] == ':';
}

static int headers_add(struct webhook_sink *w, const char *h)
{
        char **n;
        char *copy;

        if (!header_valid(h))
                return -EINVAL;
        copy = strdup(h);
        if (!copy)
                return -ENOMEM;
        n = realloc(w->headers, (w->n_headers + 2) * sizeof(*n));
        if (!n) {
                free(copy);
                return -ENOMEM;
        }
        w->headers = n;
        w->headers[w->n_headers++] = copy;
        w->headers[w->n_headers] = NULL;
        return 0;
}

static void secret_free(char *s)
{
        if (!s)
                return;
        explicit_bzero(s, strlen(s));
        free(s);
}

static int headers_load_file(struct webhook_sink *w, const char *path)
{
        char *text = NULL, *line, *save = NULL;
        size_t len;
        int r;

        r = read_file_full(path, MAX_SECRET_FILE, &text, &len);
        if (r < 0)
                return r;
        for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *t = trim(line);
                if (!*t || *t == '#')
                        continue;
                r = headers_add(w, t);
                if (r < 0)
                        break;
        }
        explicit_bzero(text, len);
        free(text);
        return r < 0 ? r : 0;
}

static int url_load(struct webhook_sink *w, const struct webhook_options *o)
{
        char *text = NULL, *t;
        size_t len;
        int r;

        if (o->url_file) {
                r = read_file_full(o->url_file, MAX_SECRET_FILE, &text, &len);
                if (r < 0)
                        return r;
                t = trim(text);
                w->url = strdup(t);
                explicit_bzero(text, len);
                free(text);
        } else if (o->url)
                w->url = strdup(o->url);
        else
                return -EINVAL;
        if (!w->url)
                return -ENOMEM;
        /* http_send() has the last word (https only, except loopback); this catches the obvious early. */
        if (!startswith(w->url, "https://") && !startswith(w->url, "http://"))
                return -EINVAL;
        if (strpbrk(w->url, " \t\r\n"))
                return -EINVAL;
        return 0;
}

int webhook_sink_new(struct loop *l, const struct webhook_options *o, struct webhook_sink **ret)
{
        _cleanup_(webhook_sink_freep) struct webhook_sink *w = NULL;
        bool content_type = false;
        int r;

        if (!l || !o || (unsigned)o->format > WEBHOOK_FORMAT_JSON)
                return -EINVAL;
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->loop = l;
        w->idle = true;
        w->format = o->format;
        w->timeout_usec = o->timeout_usec ? o->timeout_usec : DEFAULT_TIMEOUT_USEC;
        w->max_attempts = o->max_attempts ? o->max_attempts : DEFAULT_MAX_ATTEMPTS;
        w->backoff_base_usec = o->backoff_base_usec ? o->backoff_base_usec : DEFAULT_BACKOFF_BASE_USEC;
        w->backoff_max_usec = o->backoff_max_usec ? o->backoff_max_usec : DEFAULT_BACKOFF_MAX_USEC;
        w->max_pending = o->max_pending ? o->max_pending : DEFAULT_MAX_PENDING;
        w->metrics = o->metrics;
        if (o->template_text && !(w->template_text = strdup(o->template_text)))
                return -ENOMEM;
        if (!isempty(o->proxy) && !(w->proxy = strdup(o->proxy)))
                return -ENOMEM;
        r = url_load(w, o);
        if (r < 0)
                return r;
        for (const char *const *h = o->headers; h && *h; h++)
                if ((r = headers_add(w, *h)) < 0)
                        return r;
        if (o->headers_file && (r = headers_load_file(w, o->headers_file)) < 0)
                return r;
        for (size_t i = 0; i < w->n_headers; i++)
                content_type = content_type || header_is(w->headers[i], "Content-Type");
        if (!content_type && (r = headers_add(w, "Content-Type: application/json")) < 0)
                return r;
        *ret = TAKE_PTR(w);
        return 0;
}

struct webhook_sink *webhook_sink_free(struct webhook_sink *w)
{
        if (!w)
                return NULL;
        /* A waiting webhook_sink_when_flushed() is not called back. */
        w->flushed_fn = NULL;
        w->flush_timer = sd_event_source_disable_unref(w->flush_timer);
        w->flush_idle = sd_event_source_disable_unref(w->flush_idle);
        while (w->queue)
                delivery_free(w->queue);
        secret_free(w->url);
        for (size_t i = 0; i < w->n_headers; i++)
                secret_free(w->headers[i]);
        free(w->headers);
        free(w->template_text);
        secret_free(w->proxy);
        free(w);
        return NULL;
}

int webhook_sink_attach(struct webhook_sink *w, struct alert_bus *b)
{
        if (!w)
                return -EINVAL;
        return alert_bus_add_sink(b, webhook_sink_deliver, w);
}

size_t webhook_sink_pending(const struct webhook_sink *w)
{
        return w ? w->pending : 0;
}

void webhook_sink_stats(const struct webhook_sink *w, struct webhook_stats *ret)
{
        *ret = w ? w->stats : (struct webhook_stats){};
}

int webhook_sink_flush(struct webhook_sink *w, uint64_t timeout_usec)
{
        if (!w)
                return 0;
        w->idle = w->pending == 0;
        return loop_run_until(w->loop, &w->idle, timeout_usec);
}

int webhook_sink_when_flushed(struct webhook_sink *w, uint64_t timeout_usec, webhook_flushed_fn fn,
                              void *userdata)
{
        int r;

        if (!w || !fn)
                return -EINVAL;
        w->flush_timer = sd_event_source_disable_unref(w->flush_timer);
        w->flush_idle = sd_event_source_disable_unref(w->flush_idle);
        w->flushed_fn = fn;
        w->flushed_userdata = userdata;
        r = sd_event_add_time_relative(loop_event(w->loop), &w->flush_timer, CLOCK_MONOTONIC, timeout_usec,
                                       0, on_flush_timeout, w);
        if (r < 0) {
                w->flushed_fn = NULL;
                w->flushed_userdata = NULL;
                return r;
        }
        flush_check(w);
        return 0;
}

int webhook_options_from_config(const struct spotdrain_config *c, struct webhook_options *ret,
                                char **ret_error)
{
        const char *url = c ? c->alerts.webhook_url : NULL;
        struct webhook_options o = { .format = WEBHOOK_FORMAT_SLACK };

        if (isempty(url))
                return -ENOENT;
        if (startswith(url, "file:"))
                o.url_file = url + strlen("file:");
        else
                o.url = url;
        /* The configuration table validated the values (file, SPOTDRAIN_ALERTS_WEBHOOK_* and --set alike).
         */
        o.format = (enum webhook_format)c->alerts.webhook_format;
        o.template_text = c->alerts.webhook_template;
        o.headers_file = c->alerts.webhook_headers_file;
        o.timeout_usec = c->alerts.webhook_timeout_usec;
        o.max_attempts = (unsigned)c->alerts.webhook_max_attempts;
        o.proxy = c->alerts.webhook_proxy;
        *ret = o;
        return 0;
}
