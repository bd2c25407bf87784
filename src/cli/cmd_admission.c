/* spotdrain admission: the eviction webhook alone (docs/security.md, "Evictions: the controller's
 * webhook"), for clusters where the chart runs only the agents: a pod informer that keeps each pod's name,
 * namespace and node, and the admission server of src/controller/admission.c. No queue, no Lease, no
 * drains; /readyz once the pod list is complete. Runs until SIGTERM. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "cli/frontend.h"
#include "cli/help.h"
#include "spotdrain/admission.h"
#include "spotdrain/config.h"
#include "spotdrain/core.h"
#include "spotdrain/httpd.h"
#include "spotdrain/ops.h"

#define SYNC_CHECK_USEC (200ULL * 1000ULL)

int frontend_admission_start(struct frontend *f, bool required, struct admission_server **ret)
{
        const struct spotdrain_config *cfg = f->cfg;
        struct service *svc = f->svc;
        int r;

        *ret = NULL;
        if (isempty(cfg->controller.admission_listen) && !required)
                return EXIT_OK;
        r = admission_server_start(
            service_loop(svc),
            &(struct admission_options){ .listen = cfg->controller.admission_listen,
                                         .cert_file = cfg->controller.admission_cert_file,
                                         .key_file = cfg->controller.admission_key_file,
                                         .agent_users = cfg->controller.admission_agent_users,
                                         .kube = service_kube(svc),
                                         .metrics = service_metrics(svc),
                                         .bus = service_alerts(svc) },
            ret);
        if (r < 0) {
                log_error_errno(r, "cannot start the eviction webhook on %s%s",
                                cfg->controller.admission_listen ? cfg->controller.admission_listen : "",
                                r == -EINVAL
                                    ? " (it needs controller.admission_listen, admission_agent_users, "
                                      "admission_cert_file and admission_key_file)"
                                    : "");
                return r == -EINVAL ? EXIT_USAGE : EXIT_ERROR;
        }
        return EXIT_OK;
}

static void admission_usage(FILE *f)
{
        fprintf(f, "usage: spotdrain admission [--kubeconfig FILE] [--config FILE] [--dry-run]\n"
                   "         [--metrics-listen HOST:PORT] [--log-level LEVEL] [--log-format FORMAT]\n"
                   "\n"
                   "Serves the eviction webhook (controller.admission_*) alone: an agent may evict\n"
                   "only pods bound to its own node. /readyz fails until the pod list is complete.\n"
                   "Runs until SIGTERM.\n");
}

struct admission_ops {
        struct admission_server *webhook;
        struct httpd *httpd;
        struct loop *loop;
        struct timer *timer;
        bool notified;
};

static void sync_tick(void *userdata)
{
        struct admission_ops *o = userdata;

        o->timer = NULL;
        if (admission_server_synced(o->webhook)) {
                /* Said before /readyz (served from its own thread) can answer 200, so that whoever sees it
                 * ready finds the line that says why. */
                if (!o->notified)
                        log_info("eviction webhook ready: the pod list is complete");
                (void)httpd_set_ready(o->httpd, "pods", true, NULL);
                if (!o->notified) {
                        o->notified = true;
                        (void)ops_notify_ready("admission running: pod list complete");
                }
                return; /* an informer once synced stays so (it relists behind its cache) */
        }
        if (timer_start_in(o->loop, SYNC_CHECK_USEC, sync_tick, o, &o->timer) < 0)
                log_debug("admission: cannot arm the readiness check");
}

static void on_stop(struct loop *l, void *userdata)
{
        log_info("stopping");
        (void)ops_notify_stopping();
        loop_exit(l, 0);
}

int cmd_admission(int argc, char **argv)
{
        static const struct option options[] = {
                FRONTEND_OPTIONS,
                { "help", no_argument, NULL, 'h' },
                {},
        };
        _cleanup_(frontend_done) struct frontend fe = { .name = "admission" };
        struct admission_ops o = {};
        int c, r;

        optind = 1;
        while ((c = frontend_getopt(&fe, argc, argv, options)) >= 0) {
                if (c == 'h')
                        return cli_help(stdout, "admission");
                admission_usage(stderr);
                return EXIT_USAGE;
        }
        if (optind != argc) {
                admission_usage(stderr);
                return EXIT_USAGE;
        }
        r = frontend_load_config(&fe);
        if (r != EXIT_OK)
                return r;
        r = frontend_start(
            &fe, &(struct service_options){ .flags = SERVICE_METRICS | SERVICE_ALERTS | SERVICE_WEBHOOK |
                                                     SERVICE_OPS | SERVICE_WATCHDOG,
                                            .ready_check = "pods",
                                            .ready_why = "the pod list is not complete yet" });
        if (r != EXIT_OK)
                return r;
        r = frontend_admission_start(&fe, true, &o.webhook);
        if (r != EXIT_OK)
                return r;
        o.httpd = service_httpd(fe.svc);
        o.loop = service_loop(fe.svc);
        loop_set_stop_handler(o.loop, on_stop, &o);
        sync_tick(&o);
        r = loop_run(o.loop);
        o.timer = timer_cancel(o.timer);
        o.webhook = admission_server_free(o.webhook);
        service_stop(fe.svc);
        log_info("spotdrain admission stopped");
        return r == 0 ? EXIT_OK : EXIT_ERROR;
}
