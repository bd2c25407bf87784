/* The alert bus: one emit, several sinks. */
#include <ctype.h>
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
        [ALERT_POD_EVICTED] = { "pod-evicted", "Evicted", false },
        [ALERT_POD_DELETED] = { "pod-deleted", "DeletedAtLastSafeMoment", true },
        [ALERT_LAUNCH_ABANDONED] = { "launch-abandoned", "LaunchAbandoned", true },
        [ALERT_POD_KILLED] = { "pod-killed", "KilledWithNode", true },
        [ALERT_POSTMORTEM] = { "postmortem", "PostMortem", false },
        [ALERT_LB_DEREGISTRATION_TOO_SLOW] = { "lb-deregistration-too-slow", "LBDeregistrationTooSlow",
                                               true },
};

struct alert_sink {
        alert_sink_fn fn;
        void *userdata;
};

/* The Kubernetes Event sink's state, owned by the bus. */
struct event_sink {
        struct kube_client *client;
        const struct alert_bus *bus;
        unsigned long dropped, dropped_said; /* Events not recorded (kube_event_create -EBUSY, -EAGAIN) */
};

struct alert_bus {
        struct alert_sink *sinks;
        size_t n_sinks;
        unsigned counts[_ALERT_KIND_MAX];
        struct event_sink *event_sink;
        struct kube_kv *event_annotations;
        size_t n_event_annotations;
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
        free(b->event_sink);
        kube_kv_free_array(b->event_annotations, b->n_event_annotations);
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
        /* A text log is read on a terminal (a drain's live view among them), one line a record: there a
         * post-mortem's lines are counted, and the JSON and journal logs carry them whole. */
        size_t first = strcspn(a->message, "\n");
        if (a->postmortem && a->message[first] && log_get_format() == LOG_FORMAT_TEXT) {
                unsigned more = 0;
                for (const char *p = a->message + first; *p; p++)
                        more += *p == '\n';
                log_full(alert_kind_is_warning(a->kind) ? LOG_WARNING : LOG_NOTICE, 0, fields,
                         "%.*s (post-mortem: %u more lines, whole in the json log format)", (int)first,
                         a->message, more);
                return;
        }
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

/* The message cut to what the API server keeps of an Event's note: at the end of the last whole line
 * that fits (else mid-line, on a UTF-8 character boundary), marked " ...". NULL when it fits as it is. */
static char *event_message_cut(const char *m)
{
        static const char more[] = " ...";
        size_t n = strlen(m), keep = ALERT_EVENT_MESSAGE_MAX - (sizeof(more) - 1);
        if (n <= ALERT_EVENT_MESSAGE_MAX)
                return NULL;
        size_t cut = keep;
        while (cut > 0 && m[cut - 1] != '\n')
                cut--;
        if (cut == 0)
                for (cut = keep; cut > 0 && ((unsigned char)m[cut] & 0xc0) == 0x80; cut--)
                        ;
        else
                cut--; /* the newline goes too */
        return strprintf("%.*s%s", (int)cut, m, more);
}

static void sink_kube_event(const struct alert *a, void *userdata)
{
        struct event_sink *es = userdata;

        /* Events hang off the node or the pod; an alert about neither has nothing to attach to. */
        if (!a->node && !a->pod)
                return;
        _cleanup_free_ char *cut = event_message_cut(a->message);
        struct kube_event_spec e = {
                .involved_kind = a->pod ? "Pod" : "Node",
                .involved_api_version = "v1",
                .involved_namespace = a->pod ? a->pod->namespace : NULL,
                .involved_name = a->pod ? a->pod->name : a->node,
                .involved_uid = a->pod ? a->pod->uid : NULL,
                .reason = alert_kind_reason(a->kind),
                .message = cut ? cut : a->message,
                .warning = alert_kind_is_warning(a->kind),
                .annotations = es->bus->event_annotations,
                .n_annotations = es->bus->n_event_annotations,
        };
        int r = kube_event_create(es->client, &e, event_done, NULL, NULL);
        if (r == -EBUSY || r == -EAGAIN) {
                /* Said at the first and then once per thousand, not per Event. */
                if (es->dropped++ == es->dropped_said) {
                        es->dropped_said += 1000;
                        if (r == -EBUSY)
                                log_warning("%u Kubernetes Events wait for the API server already: the "
                                            "alert's Event is not recorded (%lu so far; the other sinks "
                                            "have them)",
                                            KUBE_EVENTS_IN_FLIGHT, es->dropped);
                        else
                                log_warning("the API server slows spotdrain down: the alert's Kubernetes "
                                            "Event is not recorded, evictions go first (%lu so far; the "
                                            "other sinks have them)",
                                            es->dropped);
                }
        } else if (r < 0)
                log_debug_errno(r, "cannot record alert as a Kubernetes Event");
}

unsigned long alert_bus_events_dropped(const struct alert_bus *b)
{
        return b && b->event_sink ? b->event_sink->dropped : 0;
}

int alert_bus_add_kube_event_sink(struct alert_bus *b, struct kube_client *c)
{
        if (!b || !c || b->event_sink)
                return -EINVAL;
        struct event_sink *es = calloc(1, sizeof(*es));
        if (!es)
                return -ENOMEM;
        *es = (struct event_sink){ .client = c, .bus = b };
        int r = alert_bus_add_sink(b, sink_kube_event, es);
        if (r < 0) {
                free(es);
                return r;
        }
        b->event_sink = es;
        return 0;
}

/* A qualified name as annotation keys are: an optional DNS-subdomain prefix and '/', then a name of at most
 * 63 alphanumerics, '-', '_' and '.', beginning and ending alphanumeric. */
static bool annotation_key_valid(const char *k, size_t n)
{
        const char *slash = memchr(k, '/', n);
        if (slash) {
                size_t pl = (size_t)(slash - k);
                if (pl == 0 || pl > 253)
                        return false;
                for (size_t i = 0; i < pl; i++)
                        if (!(isalnum((unsigned char)k[i]) || k[i] == '-' || k[i] == '.'))
                                return false;
                n -= pl + 1;
                k = slash + 1;
        }
        if (n == 0 || n > 63 || !isalnum((unsigned char)k[0]) || !isalnum((unsigned char)k[n - 1]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!(isalnum((unsigned char)k[i]) || k[i] == '-' || k[i] == '_' || k[i] == '.'))
                        return false;
        return true;
}

int alert_event_annotations_parse(const char *spec, struct kube_kv **ret, size_t *ret_n, char **ret_error)
{
        struct kube_kv *kv = NULL;
        size_t n = 0;

        for (const char *p = spec; p && *p;) {
                size_t len = strcspn(p, ",");
                const char *eq = memchr(p, '=', len);
                size_t kl = eq ? (size_t)(eq - p) : len;
                while (kl > 0 && p[0] == ' ')
                        p++, kl--, len--;
                while (kl > 0 && p[kl - 1] == ' ')
                        kl--;
                if (!eq || !annotation_key_valid(p, kl)) {
                        if (ret_error)
                                *ret_error = strprintf("alerts.event_annotations: \"%.*s\" is not KEY=VALUE "
                                                       "with KEY an annotation name",
                                                       (int)len, p);
                        kube_kv_free_array(kv, n);
                        return -EINVAL;
                }
                struct kube_kv *a = realloc(kv, (n + 1) * sizeof(*a));
                if (!a) {
                        kube_kv_free_array(kv, n);
                        return -ENOMEM;
                }
                kv = a;
                kv[n] = (struct kube_kv){ .key = strndup(p, kl),
                                          .value = strndup(eq + 1, len - (size_t)(eq + 1 - p)) };
                if (!kv[n].key || !kv[n].value) {
                        kube_kv_free_array(kv, n + 1);
                        return -ENOMEM;
                }
                n++;
                p += len;
                if (*p == ',')
                        p++;
        }
        *ret = kv;
        *ret_n = n;
        return 0;
}

int alert_bus_set_event_annotations(struct alert_bus *b, const char *spec, char **ret_error)
{
        struct kube_kv *kv;
        size_t n;

        if (!b)
                return -EINVAL;
        int r = alert_event_annotations_parse(spec, &kv, &n, ret_error);
        if (r < 0)
                return r;
        kube_kv_free_array(b->event_annotations, b->n_event_annotations);
        b->event_annotations = kv;
        b->n_event_annotations = n;
        return 0;
}

static int emit(struct alert_bus *b, enum alert_kind kind, const char *node, const struct alert_pod *pod,
                const cJSON *postmortem, const char *const *fields, const char *fmt, va_list ap)
    __attribute__((format(printf, 7, 0)));

int alert_emitv(struct alert_bus *b, enum alert_kind kind, const char *node, const char *const *fields,
                const char *fmt, va_list ap)
{
        return emit(b, kind, node, NULL, NULL, fields, fmt, ap);
}

int alert_emit_pod(struct alert_bus *b, enum alert_kind kind, const char *node, const struct alert_pod *pod,
                   const cJSON *postmortem, const char *const *fields, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int r = emit(b, kind, node, pod, postmortem, fields, fmt, ap);
        va_end(ap);
        return r;
}

static int emit(struct alert_bus *b, enum alert_kind kind, const char *node, const struct alert_pod *pod,
                const cJSON *postmortem, const char *const *fields, const char *fmt, va_list ap)
{
        if (!b || (unsigned)kind >= _ALERT_KIND_MAX)
                return -EINVAL;
        _cleanup_free_ char *message = NULL, *text = NULL;
        if (vasprintf(&text, fmt, ap) < 0) {
                text = NULL; /* undefined after a failure */
                return -ENOMEM;
        }
        /* Shadow mode: what an alert says happened only would have (docs/operations.md). */
        message = dry_run_enabled() ? strprintf("[dry-run] %s", text) : TAKE_PTR(text);
        if (!message)
                return -ENOMEM;
        struct alert a = {
                .kind = kind,
                .node = node,
                .pod = pod,
                .postmortem = postmortem,
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
