/* The metrics alert sink: the alerts every stage emits, counted. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "spotdrain/alert.h"
#include "spotdrain/metrics.h"

static const char *field(const struct alert *a, const char *name)
{
        for (const char *const *f = a->fields; f && f[0] && f[1]; f += 2)
                if (streq(f[0], name))
                        return f[1];
        return NULL;
}

/* A non-negative number from a field, or NAN when absent or unreadable. */
static double number(const struct alert *a, const char *name)
{
        const char *s = field(a, name);
        char *end;
        double v;

        if (isempty(s))
                return NAN;
        v = strtod(s, &end);
        return *end || !(v >= 0) ? NAN : v;
}

static void drain_ended(struct metrics *m, const struct alert *a, const char *result)
{
        double secs = number(a, "seconds");

        (void)metrics_counter_inc(m, METRIC_DRAINS, result, NULL);
        if (a->kind == ALERT_DRAIN_COMPLETED && !isnan(secs))
                (void)metrics_histogram_observe(m, METRIC_DRAIN_DURATION_SECONDS, secs, NULL);
        if (a->kind == ALERT_DEADLINE_MISSED)
                (void)metrics_counter_inc(m, METRIC_DEADLINES_MISSED, NULL);
        /* The node has no current drain any more; its gauges would otherwise show a stale prediction. */
        if (a->node) {
                (void)metrics_remove(m, METRIC_DRAIN_PREDICTED_SECONDS, a->node, NULL);
                (void)metrics_remove(m, METRIC_DRAIN_BUDGET_SECONDS, a->node, NULL);
        }
}

static void sink_metrics(const struct alert *a, void *userdata)
{
        struct metrics *m = userdata;
        double v;

        switch (a->kind) {
        case ALERT_DRAIN_COMPLETED:
                drain_ended(m, a, "completed");
                break;
        case ALERT_DEADLINE_MISSED:
                drain_ended(m, a, "deadline-missed");
                break;
        case ALERT_PODS_FORCED:
                v = number(a, "pods");
                (void)metrics_counter_add(m, METRIC_PODS_FORCED, isnan(v) ? 1 : v, NULL);
                break;
        case ALERT_REPLACEMENT_LAUNCHED:
                (void)metrics_counter_inc(m, METRIC_REPLACEMENTS, "launched", NULL);
                break;
        case ALERT_REPLACEMENT_FAILED:
                (void)metrics_counter_inc(m, METRIC_REPLACEMENTS, "failed", NULL);
                break;
        case ALERT_DRAIN_INFEASIBLE:
                v = number(a, "finish_seconds");
                if (a->node && !isnan(v))
                        (void)metrics_gauge_set(m, METRIC_DRAIN_PREDICTED_SECONDS, v, a->node, NULL);
                break;
        case ALERT_NOTICE_RECEIVED:
        case ALERT_QUEUE_UNREADABLE:
        case ALERT_NOTICE_REJECTED:
        case ALERT_DRAIN_AT_RISK:
        case ALERT_SURGE_NO_ROOM:
        case ALERT_POD_EVICTED: /* spotdrain_evictions_total counts them at the API */
        case ALERT_POD_DELETED: /* and spotdrain_pods_forced_total, through pods-forced */
        case ALERT_POD_KILLED:
        case ALERT_POSTMORTEM:
        case ALERT_EVICTION_DENIED:
        case ALERT_LAUNCH_ABANDONED: /* spotdrain_launch_hooks_completed_total{result="abandon"} */
        case ALERT_LB_DEREGISTRATION_TOO_SLOW:
        case _ALERT_KIND_MAX:
                break;
        }
}

int metrics_alert_sink_add(struct alert_bus *b, struct metrics *m)
{
        if (!b)
                return -EINVAL;
        if (!m)
                return 0;
        return alert_bus_add_sink(b, sink_metrics, m);
}
