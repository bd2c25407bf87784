/* The metrics registry and its Prometheus text encoder. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/core.h"
#include "spotdrain/metrics.h"
#include "spotdrain/util.h"

#ifndef SPOTDRAIN_VERSION
#define SPOTDRAIN_VERSION "unknown"
#endif

/* Drains run from seconds to the 2-minute spot budget, and beyond it when PDBs or grace periods say so. */
static const double drain_duration_buckets[] = { 1, 5, 10, 15, 30, 45, 60, 90, 120, 180, 300, 600 };

static const struct metric_family_def builtin_families[] = {
        { METRIC_NOTICES_RECEIVED,
          METRIC_COUNTER,
          "Interruption notices received, by kind and source.",
          { "kind", "source", NULL },
          NULL,
          0 },
        { METRIC_DRAINS, METRIC_COUNTER, "Drains finished, by result.", { "result", NULL }, NULL, 0 },
        { METRIC_DRAIN_DURATION_SECONDS,
          METRIC_HISTOGRAM,
          "Time from notice to an empty node, in seconds.",
          { NULL },
          drain_duration_buckets,
          ARRAY_SIZE(drain_duration_buckets) },
        { METRIC_DRAIN_PREDICTED_SECONDS,
          METRIC_GAUGE,
          "Predicted time for the current drain of a node to finish, in seconds.",
          { "node", NULL },
          NULL,
          0 },
        { METRIC_DRAIN_BUDGET_SECONDS,
          METRIC_GAUGE,
          "Time the current drain of a node has until its deadline, in seconds.",
          { "node", NULL },
          NULL,
          0 },
        { METRIC_EVICTIONS,
          METRIC_COUNTER,
          "Eviction requests, by HTTP response code.",
          { "code", NULL },
          NULL,
          0 },
        { METRIC_PODS_FORCED,
          METRIC_COUNTER,
          "Pods deleted around their PodDisruptionBudget at their last safe "
          "moment.",
          { NULL },
          NULL,
          0 },
        { METRIC_EVENTS_DROPPED,
          METRIC_COUNTER,
          "Kubernetes Events not recorded (the alert still reached every other sink), by reason: "
          "queue_full (1,000 were waiting for the API server already), throttled (the API server's "
          "priority and fairness slowed the client down), backlog (it waited its turn behind the "
          "rate for 10 s).",
          { "reason", NULL },
          NULL,
          0 },
        { METRIC_DRY_RUN_ACTIONS,
          METRIC_COUNTER,
          "Writes to Kubernetes or AWS that --dry-run kept back (would evict, would cordon, ...), by "
          "action.",
          { "action", NULL },
          NULL,
          0 },
        { METRIC_DEADLINES_MISSED,
          METRIC_COUNTER,
          "Drains whose deadline came with pods still on the node.",
          { NULL },
          NULL,
          0 },
        { METRIC_QUEUE_RECEIVE_ERRORS,
          METRIC_COUNTER,
          "Failed receives from the notice queue, by reason.",
          { "reason", NULL },
          NULL,
          0 },
        { METRIC_MESSAGES,
          METRIC_COUNTER,
          "Queue messages handled, by outcome.",
          { "outcome", NULL },
          NULL,
          0 },
        { METRIC_API_REQUESTS,
          METRIC_COUNTER,
          "Kubernetes API requests, by verb and response code.",
          { "verb", "code", NULL },
          NULL,
          0 },
        { METRIC_REPLACEMENTS,
          METRIC_COUNTER,
          "Replacement capacity requests, by result.",
          { "result", NULL },
          NULL,
          0 },
        { METRIC_LEADER,
          METRIC_GAUGE,
          "1 while this process holds the controller's leader lease.",
          { NULL },
          NULL,
          0 },
        { METRIC_BUILD_INFO,
          METRIC_GAUGE,
          "Always 1; the version in a label.",
          { "version", NULL },
          NULL,
          0 },
        { METRIC_WEBHOOK_DELIVERIES,
          METRIC_COUNTER,
          "Alert webhook deliveries, by result.",
          { "result", NULL },
          NULL,
          0 },
};

struct series {
        char **values;
        double value; /* counter, gauge; histogram: the sum */
        uint64_t count;
        uint64_t *buckets; /* per bucket, not cumulative */
};

struct family {
        char *name;
        enum metric_type type;
        char *help;
        char **labels;
        size_t n_labels;
        double *bounds;
        size_t n_bounds;
        struct series **series;
        size_t n_series;
};

struct metrics {
        pthread_mutex_t lock;
        struct family **families; /* in the order added: the exposition's order */
        size_t n_families;
};

static void strv_free_n(char **v, size_t n)
{
        if (!v)
                return;
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

static void series_free(struct series *s, size_t n_labels)
{
        if (!s)
                return;
        strv_free_n(s->values, n_labels);
        free(s->buckets);
        free(s);
}

static void family_free(struct family *f)
{
        if (!f)
                return;
        for (size_t i = 0; i < f->n_series; i++)
                series_free(f->series[i], f->n_labels);
        free(f->series);
        free(f->name);
        free(f->help);
        strv_free_n(f->labels, f->n_labels);
        free(f->bounds);
        free(f);
}

static bool valid_name(const char *s, bool colon)
{
        if (isempty(s))
                return false;
        for (const char *p = s; *p; p++) {
                bool alpha = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' ||
                             (colon && *p == ':');
                if (!alpha && !(p > s && *p >= '0' && *p <= '9'))
                        return false;
        }
        return true;
}

static size_t label_count(const struct metric_family_def *def)
{
        size_t n = 0;
        while (n < METRICS_MAX_LABELS && def->labels[n])
                n++;
        return n;
}

static int def_validate(const struct metric_family_def *def)
{
        size_t n;

        if (!def || !valid_name(def->name, true) || !def->help || def->type > METRIC_HISTOGRAM)
                return -EINVAL;
        n = label_count(def);
        if (def->labels[n])
                return -EINVAL; /* more than METRICS_MAX_LABELS */
        for (size_t i = 0; i < n; i++) {
                /* "__" is reserved by Prometheus; "le" is the histogram bucket label. */
                if (!valid_name(def->labels[i], false) || startswith(def->labels[i], "__") ||
                    (def->type == METRIC_HISTOGRAM && streq(def->labels[i], "le")))
                        return -EINVAL;
                for (size_t j = 0; j < i; j++)
                        if (streq(def->labels[i], def->labels[j]))
                                return -EINVAL;
        }
        if (def->type == METRIC_HISTOGRAM) {
                if (def->n_buckets == 0 || !def->buckets)
                        return -EINVAL;
                for (size_t i = 0; i < def->n_buckets; i++)
                        if (!isfinite(def->buckets[i]) || (i > 0 && def->buckets[i] <= def->buckets[i - 1]))
                                return -EINVAL;
        } else if (def->n_buckets > 0)
                return -EINVAL;
        return 0;
}

static struct family *family_find(const struct metrics *m, const char *name)
{
        for (size_t i = 0; i < m->n_families; i++)
                if (streq(m->families[i]->name, name))
                        return m->families[i];
        return NULL;
}

static bool family_matches(const struct family *f, const struct metric_family_def *def)
{
        size_t n = label_count(def);
        if (f->type != def->type || f->n_labels != n)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!streq(f->labels[i], def->labels[i]))
                        return false;
        if (f->type == METRIC_HISTOGRAM) {
                if (f->n_bounds != def->n_buckets)
                        return false;
                for (size_t i = 0; i < f->n_bounds; i++)
                        if (f->bounds[i] != def->buckets[i])
                                return false;
        }
        return true;
}

/* Under the lock. */
static int family_add_locked(struct metrics *m, const struct metric_family_def *def)
{
        struct family *f, **n;
        int r = def_validate(def);

        if (r < 0)
                return r;
        f = family_find(m, def->name);
        if (f)
                return family_matches(f, def) ? 0 : -EEXIST;

        f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        f->type = def->type;
        f->n_labels = label_count(def);
        f->name = strdup(def->name);
        f->help = strdup(def->help);
        f->labels = calloc(f->n_labels + 1, sizeof(char *));
        if (!f->name || !f->help || !f->labels)
                goto oom;
        for (size_t i = 0; i < f->n_labels; i++)
                if (!(f->labels[i] = strdup(def->labels[i])))
                        goto oom;
        if (def->n_buckets > 0) {
                f->bounds = malloc(def->n_buckets * sizeof(double));
                if (!f->bounds)
                        goto oom;
                memcpy(f->bounds, def->buckets, def->n_buckets * sizeof(double));
                f->n_bounds = def->n_buckets;
        }
        n = realloc(m->families, (m->n_families + 1) * sizeof(*n));
        if (!n)
                goto oom;
        m->families = n;
        m->families[m->n_families++] = f;
        return 0;
oom:
        family_free(f);
        return -ENOMEM;
}

static struct series *series_find(struct family *f, const char *const *values, size_t *ret_index)
{
        for (size_t i = 0; i < f->n_series; i++) {
                bool eq = true;
                for (size_t j = 0; j < f->n_labels && eq; j++)
                        eq = streq(f->series[i]->values[j], values[j]);
                if (eq) {
                        if (ret_index)
                                *ret_index = i;
                        return f->series[i];
                }
        }
        return NULL;
}

static int series_get_or_add(struct family *f, const char *const *values, struct series **ret)
{
        struct series *s = series_find(f, values, NULL), **n;

        if (s) {
                *ret = s;
                return 0;
        }
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->values = calloc(f->n_labels + 1, sizeof(char *));
        if (!s->values)
                goto oom;
        for (size_t i = 0; i < f->n_labels; i++)
                if (!(s->values[i] = strdup(values[i])))
                        goto oom;
        if (f->type == METRIC_HISTOGRAM && !(s->buckets = calloc(f->n_bounds, sizeof(uint64_t))))
                goto oom;
        n = realloc(f->series, (f->n_series + 1) * sizeof(*n));
        if (!n)
                goto oom;
        f->series = n;
        f->series[f->n_series++] = s;
        *ret = s;
        return 0;
oom:
        series_free(s, f->n_labels);
        return -ENOMEM;
}

int metrics_new(struct metrics **ret)
{
        static const char *const version[] = { SPOTDRAIN_VERSION, NULL };
        _cleanup_(metrics_freep) struct metrics *m = NULL;
        struct series *s;
        int r;

        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        r = -pthread_mutex_init(&m->lock, NULL);
        if (r < 0) {
                free(TAKE_PTR(m));
                return r;
        }
        for (size_t i = 0; i < ARRAY_SIZE(builtin_families); i++) {
                r = family_add_locked(m, &builtin_families[i]);
                if (r < 0)
                        return r;
        }
        r = series_get_or_add(family_find(m, METRIC_BUILD_INFO), version, &s);
        if (r < 0)
                return r;
        s->value = 1;
        *ret = TAKE_PTR(m);
        return 0;
}

struct metrics *metrics_free(struct metrics *m)
{
        if (!m)
                return NULL;
        for (size_t i = 0; i < m->n_families; i++)
                family_free(m->families[i]);
        free(m->families);
        pthread_mutex_destroy(&m->lock);
        free(m);
        return NULL;
}

int metrics_register(struct metrics *m, const struct metric_family_def *def)
{
        int r;

        if (!m)
                return 0;
        pthread_mutex_lock(&m->lock);
        r = family_add_locked(m, def);
        pthread_mutex_unlock(&m->lock);
        return r;
}

enum update_op {
        OP_COUNTER_ADD,
        OP_GAUGE_SET,
        OP_GAUGE_ADD,
        OP_OBSERVE,
        OP_REMOVE,
};

static const enum metric_type op_types[] = {
        [OP_COUNTER_ADD] = METRIC_COUNTER,
        [OP_GAUGE_SET] = METRIC_GAUGE,
        [OP_GAUGE_ADD] = METRIC_GAUGE,
        [OP_OBSERVE] = METRIC_HISTOGRAM,
};

static size_t strv_len(const char *const *v)
{
        size_t n = 0;
        while (v && v[n])
                n++;
        return n;
}

static int update_locked(struct metrics *m, const char *name, enum update_op op, double v,
                         const char *const *values)
{
        static const char *const none[] = { NULL };
        struct family *f;
        struct series *s;
        size_t idx;
        int r;

        f = name ? family_find(m, name) : NULL;
        if (!f || (op != OP_REMOVE && f->type != op_types[op]))
                return -ENOENT;
        if (!values)
                values = none;
        if (strv_len(values) != f->n_labels)
                return -EINVAL;
        if (op == OP_REMOVE) {
                s = series_find(f, values, &idx);
                if (!s)
                        return -ENOENT;
                series_free(s, f->n_labels);
                memmove(f->series + idx, f->series + idx + 1, (f->n_series - idx - 1) * sizeof(*f->series));
                f->n_series--;
                return 0;
        }
        if (isnan(v) || (op == OP_COUNTER_ADD && v < 0))
                return -EINVAL;
        r = series_get_or_add(f, values, &s);
        if (r < 0)
                return r;
        switch (op) {
        case OP_COUNTER_ADD:
        case OP_GAUGE_ADD:
                s->value += v;
                break;
        case OP_GAUGE_SET:
                s->value = v;
                break;
        case OP_OBSERVE:
                s->value += v;
                s->count++;
                /* Stored per bucket; the encoder makes them cumulative. Above the last bound: +Inf only. */
                for (size_t i = 0; i < f->n_bounds; i++)
                        if (v <= f->bounds[i]) {
                                s->buckets[i]++;
                                break;
                        }
                break;
        case OP_REMOVE:
                break;
        }
        return 0;
}

static int update(struct metrics *m, const char *name, enum update_op op, double v,
                  const char *const *values)
{
        int r;

        if (!m)
                return 0; /* not reported */
        pthread_mutex_lock(&m->lock);
        r = update_locked(m, name, op, v, values);
        pthread_mutex_unlock(&m->lock);
        if (r < 0)
                log_debug_errno(r, "cannot update metric %s", name ? name : "(null)");
        return r;
}

/* Collects NULL-terminated variadic label values into out (room for METRICS_MAX_LABELS + 1). */
static int collect_values(va_list ap, const char **out)
{
        size_t n = 0;
        const char *v;

        while ((v = va_arg(ap, const char *))) {
                if (n == METRICS_MAX_LABELS)
                        return -EINVAL;
                out[n++] = v;
        }
        out[n] = NULL;
        return 0;
}

static int updatev(struct metrics *m, const char *name, enum update_op op, double v, va_list ap)
{
        const char *values[METRICS_MAX_LABELS + 1];
        int r;

        if (!m)
                return 0;
        r = collect_values(ap, values);
        if (r < 0) {
                log_debug_errno(r, "cannot update metric %s: too many labels", name ? name : "(null)");
                return r;
        }
        return update(m, name, op, v, values);
}

int metrics_counter_addv(struct metrics *m, const char *name, double delta, const char *const *values)
{
        return update(m, name, OP_COUNTER_ADD, delta, values);
}

int metrics_counter_add(struct metrics *m, const char *name, double delta, ...)
{
        va_list ap;
        int r;

        va_start(ap, delta);
        r = updatev(m, name, OP_COUNTER_ADD, delta, ap);
        va_end(ap);
        return r;
}

int metrics_counter_add_since(struct metrics *m, const char *name, uint64_t now, uint64_t before, ...)
{
        va_list ap;
        int r;

        if (now <= before)
                return 0;
        va_start(ap, before);
        r = updatev(m, name, OP_COUNTER_ADD, (double)(now - before), ap);
        va_end(ap);
        return r;
}

int metrics_counter_inc(struct metrics *m, const char *name, ...)
{
        va_list ap;
        int r;

        va_start(ap, name);
        r = updatev(m, name, OP_COUNTER_ADD, 1, ap);
        va_end(ap);
        return r;
}

int metrics_gauge_setv(struct metrics *m, const char *name, double value, const char *const *values)
{
        return update(m, name, OP_GAUGE_SET, value, values);
}

int metrics_gauge_set(struct metrics *m, const char *name, double value, ...)
{
        va_list ap;
        int r;

        va_start(ap, value);
        r = updatev(m, name, OP_GAUGE_SET, value, ap);
        va_end(ap);
        return r;
}

int metrics_gauge_addv(struct metrics *m, const char *name, double delta, const char *const *values)
{
        return update(m, name, OP_GAUGE_ADD, delta, values);
}

int metrics_gauge_add(struct metrics *m, const char *name, double delta, ...)
{
        va_list ap;
        int r;

        va_start(ap, delta);
        r = updatev(m, name, OP_GAUGE_ADD, delta, ap);
        va_end(ap);
        return r;
}

int metrics_histogram_observev(struct metrics *m, const char *name, double value, const char *const *values)
{
        return update(m, name, OP_OBSERVE, value, values);
}

int metrics_histogram_observe(struct metrics *m, const char *name, double value, ...)
{
        va_list ap;
        int r;

        va_start(ap, value);
        r = updatev(m, name, OP_OBSERVE, value, ap);
        va_end(ap);
        return r;
}

int metrics_removev(struct metrics *m, const char *name, const char *const *values)
{
        return update(m, name, OP_REMOVE, 0, values);
}

int metrics_remove(struct metrics *m, const char *name, ...)
{
        va_list ap;
        int r;

        va_start(ap, name);
        r = updatev(m, name, OP_REMOVE, 0, ap);
        va_end(ap);
        return r;
}

int metrics_getv(struct metrics *m, const char *name, const char *const *values, double *ret)
{
        static const char *const none[] = { NULL };
        struct family *f;
        struct series *s = NULL;

        if (!m)
                return -ENOENT;
        pthread_mutex_lock(&m->lock);
        f = name ? family_find(m, name) : NULL;
        if (!values)
                values = none;
        if (f && strv_len(values) == f->n_labels)
                s = series_find(f, values, NULL);
        if (s)
                *ret = f->type == METRIC_HISTOGRAM ? (double)s->count : s->value;
        pthread_mutex_unlock(&m->lock);
        return s ? 0 : -ENOENT;
}

int metrics_get(struct metrics *m, const char *name, double *ret, ...)
{
        const char *values[METRICS_MAX_LABELS + 1];
        va_list ap;
        int r;

        va_start(ap, ret);
        r = collect_values(ap, values);
        va_end(ap);
        if (r < 0)
                return r;
        return metrics_getv(m, name, values, ret);
}

/* ---- the encoder ---- */

int metrics_escape_label_value(struct buf *b, const char *s)
{
        const char *run = s;
        int r;

        for (const char *p = s;; p++) {
                const char *esc = *p == '\\' ? "\\\\" : *p == '"' ? "\\\"" : *p == '\n' ? "\\n" : NULL;
                if (!esc && *p)
                        continue;
                if (p > run && (r = buf_append(b, run, (size_t)(p - run))) < 0)
                        return r;
                if (!*p)
                        return 0;
                if ((r = buf_append(b, esc, 2)) < 0)
                        return r;
                run = p + 1;
        }
}

/* HELP text escapes only backslash and newline. */
static int escape_help(struct buf *b, const char *s)
{
        int r;

        for (const char *p = s; *p; p++) {
                if (*p == '\\')
                        r = buf_append(b, "\\\\", 2);
                else if (*p == '\n')
                        r = buf_append(b, "\\n", 2);
                else
                        r = buf_append(b, p, 1);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Go's float formatting as Prometheus reads it: integers without exponent or point, otherwise the
 * shortest form that reads back as the same double. */
static int format_value(struct buf *b, double v)
{
        char tmp[32];

        if (isnan(v))
                return buf_printf(b, "NaN");
        if (isinf(v))
                return buf_printf(b, v > 0 ? "+Inf" : "-Inf");
        if (v == floor(v) && fabs(v) < 1e15)
                return buf_printf(b, "%.0f", v);
        snprintf(tmp, sizeof(tmp), "%.15g", v);
        if (strtod(tmp, NULL) != v)
                snprintf(tmp, sizeof(tmp), "%.17g", v);
        return buf_printf(b, "%s", tmp);
}

/* name{l1="v1",l2="v2"[,le="bound"]} */
static int format_series_name(struct buf *b, const struct family *f, const char *suffix,
                              const struct series *s, const char *le)
{
        bool any = f->n_labels > 0 || le;
        int r;

        r = buf_printf(b, "%s%s%s", f->name, suffix, any ? "{" : "");
        for (size_t i = 0; r >= 0 && i < f->n_labels; i++) {
                r = buf_printf(b, "%s%s=\"", i > 0 ? "," : "", f->labels[i]);
                if (r >= 0)
                        r = metrics_escape_label_value(b, s->values[i]);
                if (r >= 0)
                        r = buf_append(b, "\"", 1);
        }
        if (r >= 0 && le)
                r = buf_printf(b, "%sle=\"%s\"", f->n_labels > 0 ? "," : "", le);
        if (r >= 0 && any)
                r = buf_append(b, "}", 1);
        return r < 0 ? r : 0;
}

static int format_sample(struct buf *b, const struct family *f, const char *suffix, const struct series *s,
                         const char *le, double v)
{
        int r = format_series_name(b, f, suffix, s, le);
        if (r >= 0)
                r = buf_append(b, " ", 1);
        if (r >= 0)
                r = format_value(b, v);
        if (r >= 0)
                r = buf_append(b, "\n", 1);
        return r < 0 ? r : 0;
}

static int format_histogram(struct buf *b, const struct family *f, const struct series *s)
{
        uint64_t cumulative = 0;
        int r = 0;

        for (size_t i = 0; r >= 0 && i < f->n_bounds; i++) {
                struct buf le = {};
                cumulative += s->buckets ? s->buckets[i] : 0;
                r = format_value(&le, f->bounds[i]);
                if (r >= 0)
                        r = format_sample(b, f, "_bucket", s, le.data, (double)cumulative);
                buf_free(&le);
        }
        if (r >= 0)
                r = format_sample(b, f, "_bucket", s, "+Inf", (double)s->count);
        if (r >= 0)
                r = format_sample(b, f, "_sum", s, NULL, s->value);
        if (r >= 0)
                r = format_sample(b, f, "_count", s, NULL, (double)s->count);
        return r;
}

static int format_family(struct buf *b, const struct family *f)
{
        static const char *const type_names[] = {
                [METRIC_COUNTER] = "counter",
                [METRIC_GAUGE] = "gauge",
                [METRIC_HISTOGRAM] = "histogram",
        };
        /* A family without labels always has its one series, at zero until touched. */
        const struct series zero = {};
        int r;

        r = buf_printf(b, "# HELP %s ", f->name);
        if (r >= 0)
                r = escape_help(b, f->help);
        if (r >= 0)
                r = buf_printf(b, "\n# TYPE %s %s\n", f->name, type_names[f->type]);
        for (size_t i = 0; r >= 0 && i < f->n_series; i++)
                r = f->type == METRIC_HISTOGRAM
                        ? format_histogram(b, f, f->series[i])
                        : format_sample(b, f, "", f->series[i], NULL, f->series[i]->value);
        if (r >= 0 && f->n_series == 0 && f->n_labels == 0)
                r = f->type == METRIC_HISTOGRAM ? format_histogram(b, f, &zero)
                                                : format_sample(b, f, "", &zero, NULL, 0);
        return r < 0 ? r : 0;
}

int metrics_render(struct metrics *m, char **ret)
{
        struct buf b = {};
        int r = 0;

        if (m) {
                pthread_mutex_lock(&m->lock);
                for (size_t i = 0; r >= 0 && i < m->n_families; i++)
                        r = format_family(&b, m->families[i]);
                pthread_mutex_unlock(&m->lock);
        }
        if (r >= 0 && !b.data)
                r = buf_append(&b, "", 0);
        if (r < 0) {
                buf_free(&b);
                return r;
        }
        *ret = b.data;
        return 0;
}
