/* The webhook alert sink: every alert on the bus becomes one HTTP POST (JSON), sent from the loop, retried
 * with backoff on transport errors, timeouts, 429 and 5xx answers. Emitting never waits for delivery.
 *
 * Formats:
 *   slack (default)  {"text": TEXT}: Slack incoming webhooks, and Mattermost, Rocket.Chat, Teams workflows
 *                    and others that accept the Slack form.
 *   json             every field of the alert:
 *                    {"kind": "drain-infeasible", "reason": "DrainInfeasible", "severity": "warning",
 *                     "node": "ip-10-0-1-2", "message": "...", "time": "2026-11-30T06:00:00Z",
 *                     "deadline": "2026-11-30T06:02:00Z", "fields": {"pdb": "shop/api", ...},
 *                     "text": TEXT, "source": "spotdrain"}
 *                    ("node" and "deadline" are null when the alert has none).
 *
 * TEXT comes from a template; {{NAME}} is replaced by:
 *   {{kind}}      drain-infeasible, deadline-missed, ... (docs/contracts.md §6.2)
 *   {{reason}}    the same in CamelCase (the Kubernetes Event reason)
 *   {{severity}}  "warning" for bad news, else "info"
 *   {{emoji}}     ":warning:" for bad news, else ":information_source:"
 *   {{node}}      the node, "" when none
 *   {{message}}   the one-line message
 *   {{time}}      when the alert was emitted, RFC 3339 (engine clock)
 *   {{deadline}}  the alert's "deadline" field, "" when none
 *   {{NAME}}      any other field of the alert (instance, pdb, pods, ...), "" when absent
 * "{{" without a closing "}}" is copied as is. In the slack format every value put in escapes &, < and >
 * (&amp; &lt; &gt;, as Slack asks), so that a name or message cannot make a link or a mention; the
 * template's own text is sent as written. The default template is
 *   "{{emoji}} spotdrain {{kind}} on {{node}}: {{message}}"  (" on {{node}}" left out without a node).
 *
 * Secrets: the URL (a Slack webhook URL is a credential) and header values may come from files; neither is
 * ever logged, and log lines name the sink only as "alert webhook". */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spotdrain/util.h"

/* The alerts' configuration (alerts.*). Its keys: alerts_config_section (its settings.c). */
struct alerts_settings {
        char *webhook_url;
        int webhook_format; /* enum webhook_format (alert_webhook.h) */
        char *webhook_template;
        char *webhook_headers_file;
        uint64_t webhook_timeout_usec;
        int64_t webhook_max_attempts;
        uint64_t webhook_flush_usec; /* on exit, the wait for alerts still being delivered */
        char *webhook_proxy;         /* the webhook's own proxy; NULL = the environment's */
        char *event_annotations;     /* "key=value,..." on every Event (alert_bus_set_event_annotations) */
        int64_t log_tail_lines;      /* post-mortem: the last lines of each container; 0 = none */
        char *postmortem_dir;        /* post-mortem files, one per pod; NULL = none */
};
struct config_section;
extern const struct config_section alerts_config_section;

struct alert;
struct alert_bus;
struct loop;
struct metrics;
struct spotdrain_config;

enum webhook_format {
        WEBHOOK_FORMAT_SLACK,
        WEBHOOK_FORMAT_JSON,
};

struct webhook_options {
        const char *url;      /* https (http only to loopback), or */
        const char *url_file; /* a file holding the URL (whitespace around it is ignored) */
        enum webhook_format format;
        const char *template_text;  /* NULL = the default above */
        const char *const *headers; /* NULL-terminated "Name: value" strings */
        /* A file of "Name: value" lines (e.g. "Authorization: Bearer ..."); empty lines and # comments are
         * skipped. Read once, at webhook_sink_new(). */
        const char *headers_file;
        uint64_t timeout_usec;      /* per attempt, real time; 0 = 10 s */
        unsigned max_attempts;      /* 0 = 5 */
        uint64_t backoff_base_usec; /* 0 = 1 s */
        uint64_t backoff_max_usec;  /* 0 = 60 s; also caps a Retry-After */
        size_t max_pending;         /* alerts queued or in flight; beyond, new ones are dropped; 0 = 256 */
        /* "http://[user:password@]HOST:PORT": the proxy for the webhook alone (a chat service outside the
         * VPC while the API server is reached directly); NULL = HTTPS_PROXY/NO_PROXY as for every call. */
        const char *proxy;
        /* spotdrain_alert_webhook_deliveries_total{result}; borrowed, must outlive the sink; NULL = none */
        struct metrics *metrics;
};

struct webhook_stats {
        uint64_t delivered; /* answered 2xx */
        uint64_t failed;    /* gave up: a 4xx other than 429, or attempts exhausted */
        uint64_t retries;   /* attempts after the first */
        uint64_t dropped;   /* not queued: max_pending reached or out of memory */
};

struct webhook_sink;
/* -EINVAL for a missing or malformed URL, a bad header or template; errors reading the files as
 * read_file_full() returns them. The loop is borrowed and must outlive the sink. */
int webhook_sink_new(struct loop *l, const struct webhook_options *o, struct webhook_sink **ret);
/* Cancels what is still queued or in flight (see webhook_sink_flush()). NULL-safe; returns NULL. */
struct webhook_sink *webhook_sink_free(struct webhook_sink *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct webhook_sink *, webhook_sink_free);

/* Adds the sink to the bus; the sink must outlive the bus (or the bus must not emit after the sink is
 * freed: the bus has no way to remove a sink). */
int webhook_sink_attach(struct webhook_sink *w, struct alert_bus *b);
/* The alert_sink_fn itself (userdata: the webhook_sink), for callers that add it themselves. */
void webhook_sink_deliver(const struct alert *a, void *userdata);

size_t webhook_sink_pending(const struct webhook_sink *w);
void webhook_sink_stats(const struct webhook_sink *w, struct webhook_stats *ret);
/* Runs the loop until nothing is queued or in flight: for shutdown (SIGTERM after a drain should still
 * tell people how it ended) and tests. -ETIMEDOUT after timeout_usec of real time. */
int webhook_sink_flush(struct webhook_sink *w, uint64_t timeout_usec);
/* The same from inside the loop (a stop handler, a callback), which cannot run the loop itself: fn(userdata,
 * 0) on a later loop turn once nothing is queued or in flight (every alert delivered or given up), or
 * fn(userdata, -ETIMEDOUT) after timeout_usec of real time. Typically fn ends the loop, so that an alert
 * raised in the last moment (drain-completed just before a SIGTERM) still goes out. A later call replaces
 * the request; webhook_sink_free() cancels it without a call. -EINVAL without w or fn. */
typedef void (*webhook_flushed_fn)(void *userdata, int error);
int webhook_sink_when_flushed(struct webhook_sink *w, uint64_t timeout_usec, webhook_flushed_fn fn,
                              void *userdata);

/* The request body for one alert (exposed for tests and `check-config`-style previews). */
int webhook_render(const struct alert *a, enum webhook_format format, const char *template_text, char **ret);
int webhook_format_from_string(const char *s); /* "slack", "json"; -EINVAL otherwise */

/* Options from the configuration: alerts.webhook_url (a value "file:PATH" reads the URL from PATH),
 * alerts.webhook_format, _template, _headers_file, _timeout_seconds and _max_attempts (file, environment
 * SPOTDRAIN_ALERTS_WEBHOOK_* or --set; the configuration table validated them). *ret borrows from c.
 * -ENOENT when no webhook is configured. ret_error (may be NULL) is not set: nothing is left to refuse. */
int webhook_options_from_config(const struct spotdrain_config *c, struct webhook_options *ret,
                                char **ret_error);
