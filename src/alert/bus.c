/* The alert bus: one emit, several sinks. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/alert.h"
#include "spotdrain/core.h"
#include "spotdrain/kube.h"

static const struct {
        const char *name;
        const char *reason;
        bool warning;
} alert_kinds[_ALERT_KIND_MAX] = {
        [ALERT_NOTICE_RECEIVED] = { "notice-received", "NoticeReceived", false },
        [ALERT_DRAIN_INFEASIBLE] = { "drain-infeasible", "DrainInfeasible", true },
        [ALERT_DEADLINE_MISSED] = { "deadline-missed", "DeadlineMissed", true },
        [ALERT_DRAIN_COMPLETED] = { "drain-completed", "DrainCompleted", false },
        [ALERT_PODS_FORCED] = { "pods-forced", "PodsForced", true },
        [ALERT_REPLACEMENT_LAUNCHED] = { "replacement-launched", "ReplacementLaunched", false },
        [ALERT_REPLACEMENT_FAILED] = { "replacement-failed", "ReplacementFailed", true },
        [ALERT_QUEUE_UNREADABLE] = { "queue-unreadable", "QueueUnreadable", true },
        [ALERT_NOTICE_REJECTED] = { "notice-rejected", "NoticeRejected", true },
        [ALERT_DRAIN_AT_RISK] = { "drain-at-risk", "DrainAtRisk", true },
        [ALERT_SURGE_NO_ROOM] = { "surge-no-room", "SurgeNoRoom", true },
        [ALERT_EVICTION_DENIED] = { "eviction-denied", "EvictionDenied", true },
};

struct alert_sink {
        alert_sink_fn fn;
        void *userdata;
};

struct alert_bus {
        struct alert_sink *sinks;
        size_t n_sinks;
        unsigned counts[_ALERT_KIND_MAX];
};

const char *alert_kind_to_string(enum alert_kind k)
{
        if ((unsigned)k >= _ALERT_KIND_MAX)
                return NULL;
        return alert_kinds[k].name;
}

int alert_kind_from_string(const char *s)
{
        for (int k = 0; k < _ALERT_KIND_MAX; k++)
                if (streq_ptr(s, alert_kinds[k].name))
                        return k;
        return -EINVAL;
}

const char *alert_kind_reason(enum alert_kind k)
{
        if ((unsigned)k >= _ALERT_KIND_MAX)
                return NULL;
        return alert_kinds[k].reason;
}

bool alert_kind_is_warning(enum alert_kind k)
{
        return (unsigned)k < _ALERT_KIND_MAX && alert_kinds[k].warning;
}

int alert_bus_new(struct alert_bus **ret)
{
        struct alert_bus *b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        *ret = b;
        return 0;
}

struct alert_bus *alert_bus_free(struct alert_bus *b)
{
        if (!b)
                return NULL;
        free(b->sinks);
        free(b);
        return NULL;
}

int alert_bus_add_sink(struct alert_bus *b, alert_sink_fn fn, void *userdata)
{
        if (!b || !fn)
                return -EINVAL;
        struct alert_sink *n = realloc(b->sinks, (b->n_sinks + 1) * sizeof(*n));
        if (!n)
                return -ENOMEM;
        b->sinks = n;
        b->sinks[b->n_sinks++] = (struct alert_sink){ .fn = fn, .userdata = userdata };
        return 0;
}

/* The log sink. Alerts are what the operator asked to hear about, so unlike library debug output they go
 * out at warning/notice level. */
static void sink_log(const struct alert *a, void *userdata)
{
        size_t n = 0;
        for (const char *const *f = a->fields; f && f[0] && f[1]; f += 2)
                n += 2;
        _cleanup_free_ const char **fields = calloc(n + 5, sizeof(*fields));
        size_t i = 0;

        if (!fields) {
                log_full(alert_kind_is_warning(a->kind) ? LOG_WARNING : LOG_NOTICE, 0, NULL, "%s: %s",
                         alert_kind_to_string(a->kind), a->message);
                return;
        }
        fields[i++] = "alert";
        fields[i++] = alert_kind_to_string(a->kind);
        if (a->node) {
                fields[i++] = "node";
                fields[i++] = a->node;
        }
        for (const char *const *f = a->fields; f && f[0] && f[1]; f += 2) {
                fields[i++] = f[0];
                fields[i++] = f[1];
        }
        fields[i] = NULL;
        log_full(alert_kind_is_warning(a->kind) ? LOG_WARNING : LOG_NOTICE, 0, fields, "%s", a->message);
}

int alert_bus_add_log_sink(struct alert_bus *b)
{
        return alert_bus_add_sink(b, sink_log, NULL);
}

static void event_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        if (r->error < 0)
                log_debug_reason(r->error, r->message, "cannot record alert as a Kubernetes Event");
}

static void sink_kube_event(const struct alert *a, void *userdata)
{
        struct kube_client *c = userdata;

        /* Events hang off the node; an alert about no node in particular has nothing to attach to. */
        if (!a->node)
                return;
        struct kube_event_spec e = {
                .involved_kind = "Node",
                .involved_api_version = "v1",
                .involved_name = a->node,
                .reason = alert_kind_reason(a->kind),
                .message = a->message,
                .warning = alert_kind_is_warning(a->kind),
        };
        int r = kube_event_create(c, &e, event_done, NULL, NULL);
        if (r < 0)
                log_debug_errno(r, "cannot record alert as a Kubernetes Event");
}

int alert_bus_add_kube_event_sink(struct alert_bus *b, struct kube_client *c)
{
        if (!c)
                return -EINVAL;
        return alert_bus_add_sink(b, sink_kube_event, c);
}

int alert_emitv(struct alert_bus *b, enum alert_kind kind, const char *node, const char *const *fields,
                const char *fmt, va_list ap)
{
        if (!b || (unsigned)kind >= _ALERT_KIND_MAX)
                return -EINVAL;
        _cleanup_free_ char *message = NULL;
        if (vasprintf(&message, fmt, ap) < 0) {
                message = NULL; /* undefined after a failure */
                return -ENOMEM;
        }
        struct alert a = {
                .kind = kind,
                .node = node,
                .fields = fields,
                .message = message,
                .at_usec = clk_now(),
        };
        b->counts[kind]++;
        for (size_t i = 0; i < b->n_sinks; i++)
                b->sinks[i].fn(&a, b->sinks[i].userdata);
        return 0;
}

int alert_emit(struct alert_bus *b, enum alert_kind kind, const char *node, const char *const *fields,
               const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int r = alert_emitv(b, kind, node, fields, fmt, ap);
        va_end(ap);
        return r;
}

unsigned alert_bus_count(const struct alert_bus *b, enum alert_kind kind)
{
        if (!b || (unsigned)kind >= _ALERT_KIND_MAX)
                return 0;
        return b->counts[kind];
}
