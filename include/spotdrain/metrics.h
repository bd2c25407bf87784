/* metrics: a registry of counters, gauges and histograms with labels, rendered in the Prometheus text
 * exposition format (version 0.0.4). A front end makes one (metrics_new) and hands it to whatever reports
 * into it: the Kubernetes client, the drain executor, the alert sinks, the HTTP server that renders it.
 * Several engines of one process (the simulator's) share one registry. Every function is thread-safe (one
 * mutex per registry): the simulator runs engines on several threads and the HTTP server renders from its
 * own thread.
 *
 * A NULL registry means "not reported": updates and registrations do nothing and return 0, lookups find
 * nothing, and it renders as empty text. Tests and one-shot commands need none.
 *
 * The families are declared up front (the table in src/core/metrics.c, names below); a front end adds its
 * own with metrics_register(). Label values are passed in the order of the family's label names, ended by
 * NULL:
 *
 *     metrics_counter_inc(m, METRIC_DRAINS, "completed", NULL);
 *     metrics_gauge_set(m, METRIC_DRAIN_BUDGET_SECONDS, 118.5, "ip-10-0-1-2", NULL);
 *     metrics_histogram_observe(m, METRIC_DRAIN_DURATION_SECONDS, 41.2, NULL);
 *
 * Updating metrics never fails the caller's work: errors (unknown family, wrong number of labels, ENOMEM)
 * are returned for tests and logged at debug level, and may be ignored. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "spotdrain/util.h"

/* The predeclared families (docs/contracts.md §6.1: names prefixed spotdrain_); labels in braces. */
#define METRIC_NOTICES_RECEIVED        "spotdrain_notices_received_total"         /* {kind,source} */
#define METRIC_DRAINS                  "spotdrain_drains_total"                   /* {result} */
#define METRIC_DRAIN_DURATION_SECONDS  "spotdrain_drain_duration_seconds"         /* histogram */
#define METRIC_DRAIN_PREDICTED_SECONDS "spotdrain_drain_predicted_seconds"        /* {node} gauge */
#define METRIC_DRAIN_BUDGET_SECONDS    "spotdrain_drain_budget_seconds"           /* {node} gauge */
#define METRIC_EVICTIONS               "spotdrain_evictions_total"                /* {code} */
#define METRIC_PODS_FORCED             "spotdrain_pods_forced_total"              /* */
#define METRIC_DEADLINES_MISSED        "spotdrain_deadlines_missed_total"         /* */
#define METRIC_QUEUE_RECEIVE_ERRORS    "spotdrain_queue_receive_errors_total"     /* {reason} */
#define METRIC_MESSAGES                "spotdrain_messages_total"                 /* {outcome} */
#define METRIC_API_REQUESTS            "spotdrain_api_requests_total"             /* {verb,code} */
#define METRIC_REPLACEMENTS            "spotdrain_replacements_total"             /* {result} */
#define METRIC_LEADER                  "spotdrain_leader"                         /* gauge 0/1 */
#define METRIC_BUILD_INFO              "spotdrain_build_info"                     /* {version} gauge, 1 */
#define METRIC_WEBHOOK_DELIVERIES      "spotdrain_alert_webhook_deliveries_total" /* {result} */
#define METRIC_EVENTS_DROPPED          "spotdrain_kube_events_dropped_total"      /* */
#define METRIC_DRY_RUN_ACTIONS         "spotdrain_dry_run_actions_total"          /* {action} */

enum metric_type {
        METRIC_COUNTER,
        METRIC_GAUGE,
        METRIC_HISTOGRAM,
};

#define METRICS_MAX_LABELS 4

struct metric_family_def {
        const char *name; /* [a-zA-Z_:][a-zA-Z0-9_:]* */
        enum metric_type type;
        const char *help;
        const char *labels[METRICS_MAX_LABELS + 1]; /* NULL-terminated label names */
        const double *buckets;                      /* histograms: ascending upper bounds, without +Inf */
        size_t n_buckets;
};

struct metrics;

/* A registry holding the predeclared families, with spotdrain_build_info set. */
int metrics_new(struct metrics **ret);
/* NULL-safe; returns NULL. Whoever was handed the registry must be done with it. */
struct metrics *metrics_free(struct metrics *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct metrics *, metrics_free);

/* Adds a family (the definition, its strings and buckets are copied). -EEXIST when the name is taken with
 * another type or other labels (the same definition again is 0), -EINVAL when malformed. */
int metrics_register(struct metrics *m, const struct metric_family_def *def);

/* Counters only go up: a negative or NaN delta is -EINVAL. The variadic forms take the label values,
 * ended by NULL; the v forms a NULL-terminated array (NULL when the family has no labels). -ENOENT for an
 * unknown family or one of another type, -EINVAL for the wrong number of label values. */
int metrics_counter_add(struct metrics *m, const char *name, double delta, ...) __attribute__((sentinel));
int metrics_counter_inc(struct metrics *m, const char *name, ...) __attribute__((sentinel));
int metrics_counter_addv(struct metrics *m, const char *name, double delta, const char *const *values);
/* A counter brought up to a module's own running count: adds now - before when now is ahead (a snapshot of
 * stats taken since the last one), nothing otherwise. */
int metrics_counter_add_since(struct metrics *m, const char *name, uint64_t now, uint64_t before, ...)
    __attribute__((sentinel));
int metrics_gauge_set(struct metrics *m, const char *name, double value, ...) __attribute__((sentinel));
int metrics_gauge_add(struct metrics *m, const char *name, double delta, ...) __attribute__((sentinel));
int metrics_gauge_setv(struct metrics *m, const char *name, double value, const char *const *values);
int metrics_gauge_addv(struct metrics *m, const char *name, double delta, const char *const *values);
int metrics_histogram_observe(struct metrics *m, const char *name, double value, ...)
    __attribute__((sentinel));
int metrics_histogram_observev(struct metrics *m, const char *name, double value, const char *const *values);
/* Drops one series (e.g. a node's predicted drain time once its drain ended): -ENOENT when absent. */
int metrics_remove(struct metrics *m, const char *name, ...) __attribute__((sentinel));
int metrics_removev(struct metrics *m, const char *name, const char *const *values);

/* The current value of a counter or gauge series, or a histogram's count; -ENOENT when the series does not
 * exist yet (for tests and for front ends that derive readiness from metrics). */
int metrics_get(struct metrics *m, const char *name, double *ret, ...) __attribute__((sentinel));
int metrics_getv(struct metrics *m, const char *name, const char *const *values, double *ret);

/* The whole registry in the Prometheus text format: # HELP and # TYPE for every family, series in the order
 * they were first touched; families without labels always show a sample (0 before the first update). */
int metrics_render(struct metrics *m, char **ret);

/* An alert sink (src/alert/sink_metrics.c) that counts what the alerts report: drains_total{result} and
 * drain_duration_seconds (the "seconds" field) from drain-completed and deadline-missed, which also
 * increments deadlines_missed_total and drops the node's predicted/budget gauges; pods_forced_total from
 * pods-forced ("pods"); replacements_total{result="launched"|"failed"}; drain_predicted_seconds{node} from
 * drain-infeasible ("finish_seconds"). Notices are not counted here: the front ends count them with their
 * source. Adds nothing when m is NULL; m must outlive the bus. */
struct alert_bus;
int metrics_alert_sink_add(struct alert_bus *b, struct metrics *m);

/* Appends s to b escaped for a label value (\ → \\, " → \", newline → \n). Exposed for tests. */
struct buf;
int metrics_escape_label_value(struct buf *b, const char *s);
