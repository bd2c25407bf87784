/* alert: one bus for everything a stage has to tell people, fanned out to several sinks (the log, a
 * Kubernetes Event on the node, a callback such as the simulator's result). A stage emits; the sinks decide
 * how to deliver. Emitting never fails the caller's work: a sink that cannot deliver logs at debug level. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spotdrain/util.h"

struct kube_client;
struct cJSON;

enum alert_kind {
        ALERT_NOTICE_RECEIVED,
        ALERT_DRAIN_INFEASIBLE, /* predicted at notice time: the PDBs make the deadline impossible */
        ALERT_DEADLINE_MISSED,  /* the deadline came with pods still on the node */
        ALERT_DRAIN_COMPLETED,
        ALERT_PODS_FORCED, /* pods deleted around their PDB at their last safe moment */
        ALERT_REPLACEMENT_LAUNCHED,
        ALERT_REPLACEMENT_FAILED,
        ALERT_QUEUE_UNREADABLE,
        ALERT_NOTICE_REJECTED, /* a queue message refused: untrusted, or not this cluster's (no node) */
        /* predicted at notice time: fits only if pods of unknown stop time stop fast enough (named) */
        ALERT_DRAIN_AT_RISK,
        ALERT_SURGE_NO_ROOM, /* the surged pods of a Deployment fit on no node: the drain waits for capacity
                              */
        /* the controller's webhook refused an agent's eviction of a pod not bound to the agent's node */
        ALERT_EVICTION_DENIED,
        /* One pod of a drain (struct alert.pod): its eviction was accepted, or it was deleted around its PDB
         * at its last safe moment. The Kubernetes Event goes on the pod, where its team looks. */
        ALERT_POD_EVICTED,
        ALERT_POD_DELETED,
        /* A launch lifecycle action completed with ABANDON: the instance's node was not Ready in time
         * (controller.launch_ready_timeout_seconds), Auto Scaling terminates it. */
        ALERT_LAUNCH_ABANDONED,
        /* One pod still on the node shortly before its end (a skipped pod, a cordon-only drain's, one whose
         * stop could not be made to end in time): killed with the node unless it stops first. It carries
         * the pod's post-mortem, taken then. */
        ALERT_POD_KILLED,
        /* The post-mortem of a pod the drain stopped, taken again once its containers stopped while the
         * API still served it (their exit codes and last lines). */
        ALERT_POSTMORTEM,
        /* At the notice: a target group of the node's pods (a TargetGroupBinding's) has a deregistration
         * delay longer than the time left; names it and the delay that would fit. */
        ALERT_LB_DEREGISTRATION_TOO_SLOW,
        _ALERT_KIND_MAX,
};

/* "drain-infeasible" (docs/contracts.md §6.2 spelling), and back (-EINVAL when unknown). */
const char *alert_kind_to_string(enum alert_kind k);
int alert_kind_from_string(const char *s);
/* The Kubernetes Event reason: the kind in CamelCase ("DrainInfeasible"). */
const char *alert_kind_reason(enum alert_kind k);
/* Bad news (Event type Warning, log level warning) rather than information. */
bool alert_kind_is_warning(enum alert_kind k);

/* The pod an alert is about. */
struct alert_pod {
        const char *namespace, *name, *uid; /* uid may be NULL */
};

/* One alert as the sinks see it; everything is borrowed for the duration of the sink call. */
struct alert {
        enum alert_kind kind;
        const char *node;            /* may be NULL (e.g. queue-unreadable) */
        const struct alert_pod *pod; /* the pod it is about, or NULL (an alert about a node) */
        /* The post-mortem of the pods it is about (docs/contracts.md §6.2): a JSON array, one object per
         * pod with its final container statuses and last log lines; NULL when it has none. */
        const struct cJSON *postmortem;
        const char *const *fields; /* NULL-terminated key, value pairs; may be NULL */
        const char *message;       /* one line for humans */
        uint64_t at_usec;          /* engine clock */
};

typedef void (*alert_sink_fn)(const struct alert *a, void *userdata);

struct alert_bus;
int alert_bus_new(struct alert_bus **ret);
/* NULL-safe; returns NULL. Kubernetes Events still in flight are left to the kube client (its callbacks do
 * not reference the bus). */
struct alert_bus *alert_bus_free(struct alert_bus *b);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct alert_bus *, alert_bus_free);

/* Sinks are called in the order added. */
int alert_bus_add_sink(struct alert_bus *b, alert_sink_fn fn, void *userdata);
/* The log: level warning for bad news, notice otherwise, with fields alert=KIND, node=NODE and the alert's
 * own fields (structured in JSON and journal output). */
int alert_bus_add_log_sink(struct alert_bus *b);
/* A core/v1 Event on the Node, or on the pod (in its namespace) of an alert about a pod (reason
 * alert_kind_reason(), type Warning for bad news), carrying the bus's extra annotations. The client is
 * borrowed and must outlive the bus or be removed with it. */
int alert_bus_add_kube_event_sink(struct alert_bus *b, struct kube_client *c);
/* The alerts whose Kubernetes Event was not recorded because KUBE_EVENTS_IN_FLIGHT Events already waited
 * for the API server (a mass reclaim behind the rate limit); the other sinks had them. */
unsigned long alert_bus_events_dropped(const struct alert_bus *b);
/* alerts.event_annotations: "key=value,key=value" (NTH's kubernetesEventsExtraAnnotations), added to the
 * metadata of every Event; NULL or "" none. -EINVAL (with *ret_error, to free) when an item has no key or
 * no '=' or the key is not a qualified name; nothing changes then. */
int alert_bus_set_event_annotations(struct alert_bus *b, const char *spec, char **ret_error);
/* The same parse on its own (check-config): the pairs (free with kube_kv_free_array) or -EINVAL. */
struct kube_kv;
int alert_event_annotations_parse(const char *spec, struct kube_kv **ret, size_t *ret_n, char **ret_error);
/* The longest Event message the sinks write: the API server's limit on a note (1024 bytes,
 * NoteLengthLimit); a longer message is cut at a line's end and marked " ...". */
#define ALERT_EVENT_MESSAGE_MAX 1024

/* Sends one alert to every sink. fields: NULL-terminated key, value pairs (may be NULL). Returns 0, or
 * -ENOMEM when the message could not be formatted (nothing is sent then). */
int alert_emit(struct alert_bus *b, enum alert_kind kind, const char *node, const char *const *fields,
               const char *fmt, ...) __attribute__((format(printf, 5, 6)));
int alert_emitv(struct alert_bus *b, enum alert_kind kind, const char *node, const char *const *fields,
                const char *fmt, va_list ap) __attribute__((format(printf, 5, 0)));
/* The same, about one pod of the node, with its post-mortem (may be NULL). */
int alert_emit_pod(struct alert_bus *b, enum alert_kind kind, const char *node, const struct alert_pod *pod,
                   const struct cJSON *postmortem, const char *const *fields, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
/* Alerts emitted since the bus was made (all sinks). */
unsigned alert_bus_count(const struct alert_bus *b, enum alert_kind kind);
