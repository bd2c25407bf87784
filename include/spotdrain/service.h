/* service: the loop-side services a front end (agent, controller, drain, simulate) runs on, built once from
 * the configuration by service_new():
 *
 *   loop        the event loop (or the front end's own, borrowed)
 *   metrics     the process's registry: what /metrics renders; the client and the sinks count into it
 *   kube        the Kubernetes client (kube.kubeconfig, kube.context, kube.qps, kube.burst)
 *   alerts      the alert bus with its standard sinks: log, Kubernetes Events, metrics and, when
 *               alerts.webhook_url is set, the webhook (alert_sinks.h)
 *   ops         the ops endpoint: /metrics, /healthz, /readyz (httpd.h) and the systemd watchdog (ops.h)
 *   engine      the drain engine behind the agent's actions (agent.h)
 *   provision   replacement capacity (provision.h), when provision.enabled
 *
 * What a front end does not ask for stays NULL. service_free() takes it down in the reverse order: what
 * acts (provisioning, the engine) first, then the endpoint, the bus, the webhook, the client, the registry
 * and the loop. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spotdrain/agent.h"
#include "spotdrain/alert_webhook.h"
#include "spotdrain/awsreq.h"
#include "spotdrain/config.h"
#include "spotdrain/controller.h"
#include "spotdrain/core.h"
#include "spotdrain/dispatch.h"
#include "spotdrain/engine.h"
#include "spotdrain/httpd.h"
#include "spotdrain/imds.h"
#include "spotdrain/kube.h"
#include "spotdrain/provision.h"
#include "spotdrain/util.h"

struct agent_engine;
struct alert_bus;
struct httpd;
struct kube_client;
struct kube_config;
struct loop;
struct metric_family_def;
struct metrics;
struct prov_frontend;
struct prov_frontend_options;
struct webhook_sink;

/* Every module's configuration, each in the module's own struct (declared in its header, its keys in its
 * own src/MODULE/settings.c); config_sections (src/service/config_sections.c) lists where each section's
 * values lie in here. */
struct spotdrain_config {
        struct log_settings log;
        struct kube_settings kube;
        struct ops_settings ops;
        struct agent_settings agent;
        struct drain_settings drain;
        struct aws_settings aws;
        struct controller_settings controller;
        struct imds_settings imds;
        struct alerts_settings alerts;
        struct provision_settings provision;
        struct notices_settings notices;
};

enum {
        SERVICE_METRICS = 1u << 0, /* the metrics registry */
        SERVICE_ALERTS = 1u << 1,  /* the alert bus, its log, Kubernetes Event and metrics sinks */
        SERVICE_WEBHOOK = 1u << 2, /* with SERVICE_ALERTS: the webhook sink when alerts.webhook_url is set */
        SERVICE_OPS = 1u << 3,     /* the ops endpoint (see listen) */
        SERVICE_WATCHDOG = 1u << 4,  /* the systemd watchdog */
        SERVICE_ENGINE = 1u << 5,    /* the agent's drain engine (needs SERVICE_ALERTS) */
        SERVICE_PROVISION = 1u << 6, /* provisioning, when provision.enabled (needs SERVICE_ALERTS) */
};

struct service_options {
        unsigned flags;
        struct loop *loop;        /* borrowed; NULL: the service's own */
        struct kube_config *kcfg; /* borrowed; NULL: loaded from kubeconfig, else kube.kubeconfig */
        const char *kubeconfig;   /* a --kubeconfig flag, NULL when not given */
        double qps_scale;         /* kube.qps is per this many seconds of real time; 0: 1 */
        const char *listen;       /* the ops endpoint: NULL: ops.metrics_listen, else
                                   * HTTPD_DEFAULT_LISTEN; "off": none */
        /* With SERVICE_OPS: the loop is watched (/healthz) and readiness check ready_check fails with
         * ready_why until the front end says otherwise (httpd_set_ready()). NULL: neither. */
        const char *ready_check, *ready_why;
        bool watchdog_optional;                        /* a watchdog that cannot be armed: a warning */
        const struct prov_frontend_options *provision; /* SERVICE_PROVISION's options, may be NULL */
        /* With SERVICE_METRICS: the front end's own metric families, registered with the registry. */
        const struct metric_family_def *families;
        size_t n_families;
};

struct service;
/* cfg is borrowed and must outlive the service. Every failure is logged; returns 0 or a negative errno. */
int service_new(const struct spotdrain_config *cfg, const struct service_options *o, struct service **ret);
/* Stops the endpoint, the watchdog, provisioning and the engine: before the front end frees what they
 * look at or call. NULL-safe. */
void service_stop(struct service *s);
struct service *service_free(struct service *s); /* NULL-safe */
DEFINE_TRIVIAL_CLEANUP_FUNC(struct service *, service_free);

/* Provisioning after service_new() (a front end that first adjusts the provision.* keys). 0 with nothing
 * built when provision.enabled is false; logs why not. */
int service_start_provision(struct service *s, const struct prov_frontend_options *o);

struct loop *service_loop(const struct service *s);
struct metrics *service_metrics(const struct service *s);
struct kube_client *service_kube(const struct service *s);
/* The configuration service_kube() was made from (server URL, kubeconfig, context), for messages. */
const struct kube_config *service_kube_config(const struct service *s);
/* Another Kubernetes client like service_kube() (its configuration, its own rate limit, the registry): for
 * the simulator's agents, which are one process each in a cluster. Free it before the service. -ENXIO when
 * the service has no client. */
int service_kube_new(const struct service *s, struct kube_client **ret);
struct alert_bus *service_alerts(const struct service *s);
struct webhook_sink *service_webhook(const struct service *s);
struct httpd *service_httpd(const struct service *s); /* NULL with listen "off" */
struct agent_engine *service_engine(const struct service *s);
struct prov_frontend *service_provision(const struct service *s); /* NULL when provisioning is off */

/* Ends the loop with code once the webhook has delivered the alerts it still holds, or after
 * alerts.webhook_flush_seconds, whichever comes first: an alert raised in the last moment (drain-completed
 * just before the SIGTERM) still goes out. From inside the loop (a stop handler, a callback). */
void service_exit(struct service *s, int code);
/* The same for a one-shot command whose loop has stopped: runs the loop until the Kubernetes requests still
 * queued (the alerts' Events) are out, for at most 2 s, then until the webhook is flushed or
 * alerts.webhook_flush_seconds have passed. */
void service_flush(struct service *s);
