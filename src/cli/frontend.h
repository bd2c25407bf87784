/* cli/frontend: the setup `spotdrain agent` and `spotdrain controller` share: their common flags, the
 * configuration, logging, the event loop, the metrics registry, the Kubernetes client, the metrics endpoint
 * and the watchdog. */
#pragma once

#include <getopt.h>
#include <stdbool.h>

#include "spotdrain/alert_webhook.h"
#include "spotdrain/config.h"
#include "spotdrain/core.h"
#include "spotdrain/httpd.h"
#include "spotdrain/kube.h"
#include "spotdrain/kubeconfig.h"
#include "spotdrain/metrics.h"
#include "spotdrain/ops.h"

/* The common flags, for a command's getopt_long table; frontend_option() takes their values. */
/* clang-format off */
#define FRONTEND_OPTIONS                                          \
        { "kubeconfig", required_argument, NULL, 'k' },           \
        { "config", required_argument, NULL, 'c' },               \
        { "metrics-listen", required_argument, NULL, 'm' },       \
        { "log-level", required_argument, NULL, 'L' },            \
        { "log-format", required_argument, NULL, 'F' }
/* clang-format on */

struct frontend {
        const char *name; /* "agent", "controller": prefixes the messages to stderr */
        /* The common flags (NULL when not given). */
        const char *config, *kubeconfig, *metrics_listen, *log_level, *log_format;
        struct spotdrain_config *cfg;
        struct loop *loop;
        struct metrics *metrics; /* the process's registry: what /metrics renders */
        struct kube_config *kcfg;
        struct kube_client *kube;
        struct httpd *httpd; /* NULL with metrics_listen "off" */
        struct ops_watchdog *watchdog;
        struct webhook_sink *webhook; /* borrowed, NULL when none: flushed by frontend_exit() */
        int exit_code;
};

/* True when c (a getopt_long result) is one of FRONTEND_OPTIONS; its value is then stored. */
bool frontend_option(struct frontend *f, int c, const char *arg);
/* Loads the configuration and sets up logging (flags win). Returns EXIT_OK, else the exit code, having said
 * why on stderr. */
int frontend_load_config(struct frontend *f);
/* The event loop, the metrics registry and the Kubernetes client (counting into it). Returns EXIT_OK, else
 * the exit code, having logged why. */
int frontend_start_kube(struct frontend *f);
/* Serves /metrics, /healthz and /readyz on --metrics-listen (else metrics.listen, else the default) with
 * the readiness check ready_name failing (ready_why) until the command says otherwise. Logs why not. */
int frontend_start_httpd(struct frontend *f, const char *ready_name, const char *ready_why);
/* Ends the loop with code, once the webhook (f->webhook) has delivered the alerts it still holds or after
 * alerts.webhook_flush_seconds, whichever comes first: an alert raised in the last moment (drain-completed
 * just before the SIGTERM) still goes out. From inside the loop (a stop handler, a callback). */
void frontend_exit(struct frontend *f, int code);
/* Stops serving and disarms the watchdog (before the command frees what /healthz looks at). */
void frontend_stop(struct frontend *f);
/* Frees everything; the struct may be reused. */
void frontend_done(struct frontend *f);
