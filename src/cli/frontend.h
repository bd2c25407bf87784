/* cli/frontend: the setup `spotdrain agent` and `spotdrain controller` share: their common flags, the
 * configuration, logging, and the services they run on (service.h). */
#pragma once

#include <getopt.h>
#include <stdbool.h>

#include "cli/cli.h"
#include "spotdrain/config.h"
#include "spotdrain/core.h"
#include "spotdrain/service.h"

/* The common flags, for a command's getopt_long table; frontend_option() takes their values. */
/* clang-format off */
#define FRONTEND_OPTIONS                                          \
        { "kubeconfig", required_argument, NULL, 'k' },           \
        { "config", required_argument, NULL, 'c' },               \
        { "metrics-listen", required_argument, NULL, 'm' },       \
        { "log-level", required_argument, NULL, 'L' },            \
        { "log-format", required_argument, NULL, 'F' },           \
        { "dry-run", no_argument, NULL, 'D' }
/* clang-format on */

struct frontend {
        const char *name; /* "agent", "controller": prefixes the messages to stderr */
        /* The common flags (NULL when not given). */
        struct cli_common common;
        const char *metrics_listen;
        struct spotdrain_config *cfg;
        struct service *svc;
};

/* True when c (a getopt_long result) is one of FRONTEND_OPTIONS; its value is then stored. */
bool frontend_option(struct frontend *f, int c, const char *arg);
/* getopt_long(argc, argv, "h", options) past FRONTEND_OPTIONS (taken by frontend_option()): the command's
 * next option, or -1 after the last. */
int frontend_getopt(struct frontend *f, int argc, char **argv, const struct option *options);
/* Loads the configuration and sets up logging (flags win). Returns EXIT_OK, else the exit code, having said
 * why on stderr. */
int frontend_load_config(struct frontend *f);
/* The services (service.h) o->flags asks for, from the configuration and the common flags (--kubeconfig,
 * --metrics-listen win); SERVICE_OPS serves on --metrics-listen. Returns EXIT_OK, else the exit code,
 * having logged why. */
int frontend_start(struct frontend *f, struct service_options *o);
/* Frees everything; the struct may be reused. */
void frontend_done(struct frontend *f);

struct admission_server;
/* The eviction webhook from controller.admission_* (admission.h), on the front end's loop, pod informer
 * client, metrics and alerts: what `spotdrain controller` serves beside its queue and `spotdrain admission`
 * serves alone. Returns EXIT_OK (*ret NULL when admission_listen is empty and !required), else the exit
 * code, having logged why. */
int frontend_admission_start(struct frontend *f, bool required, struct admission_server **ret);
