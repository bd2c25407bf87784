/* The loop-side services of a front end, built once from the configuration (service.h). */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>

#include "spotdrain/agent.h"
#include "spotdrain/alert.h"
#include "spotdrain/alert_sinks.h"
#include "spotdrain/alert_webhook.h"
#include "spotdrain/config.h"
#include "spotdrain/core.h"
#include "spotdrain/httpd.h"
#include "spotdrain/kube.h"
#include "spotdrain/kubeconfig.h"
#include "spotdrain/metrics.h"
#include "spotdrain/ops.h"
#include "spotdrain/provision.h"
#include "spotdrain/service.h"

#define FLUSH_KUBE_USEC (2ULL * 1000ULL * 1000ULL)

struct service {
        const struct spotdrain_config *cfg;
        struct loop *loop, *own_loop;
        struct kube_config *own_kcfg;
        struct kube_config *kcfg; /* the client's: own_kcfg or the front end's */
        double qps_scale;
        struct metrics *metrics;
        struct kube_client *kube;
        struct alert_bus *bus;
        struct webhook_sink *webhook;
        struct httpd *httpd;
        struct ops_watchdog *watchdog;
        struct agent_engine *engine;
        struct prov_frontend *prov;
        int exit_code;
};

static int start_kube(struct service *s, const struct service_options *o)
{
        _cleanup_free_ char *error = NULL;
        struct kube_config *kcfg = o->kcfg;
        double scale = o->qps_scale > 0 ? o->qps_scale : 1;
        int r;

        if (!kcfg) {
                r = kube_config_load_auto(o->kubeconfig ? o->kubeconfig : s->cfg->kube.kubeconfig,
                                          s->cfg->kube.context, &s->own_kcfg, &error);
                if (r < 0)
                        return log_error_reason(r, error, "cannot load the Kubernetes configuration");
                kcfg = s->own_kcfg;
        }
        s->kcfg = kcfg;
        s->qps_scale = scale;
        r = service_kube_new(s, &s->kube);
        if (r < 0)
                return log_error_errno(r, "cannot set up the Kubernetes client");
        return 0;
}

static int start_alerts(struct service *s, unsigned flags)
{
        int r = alert_bus_new(&s->bus);
        if (r < 0)
                return log_error_errno(r, "cannot set up alerts");
        if (flags & SERVICE_WEBHOOK)
                r = alert_bus_add_standard_sinks(s->bus, s->loop, s->kube, s->metrics, s->cfg, &s->webhook);
        else {
                r = alert_bus_add_log_sink(s->bus);
                if (r >= 0)
                        r = alert_bus_add_kube_event_sink(s->bus, s->kube);
                if (r >= 0)
                        r = metrics_alert_sink_add(s->bus, s->metrics);
        }
        if (r < 0)
                return log_error_errno(r, "cannot set up alerts");
        return 0;
}

static int start_ops(struct service *s, const struct service_options *o)
{
        const char *listen = o->listen                    ? o->listen
                             : s->cfg->ops.metrics_listen ? s->cfg->ops.metrics_listen
                                                          : HTTPD_DEFAULT_LISTEN;
        int r;

        r = httpd_start(listen, s->metrics, &s->httpd);
        if (r < 0)
                return log_error_errno(r, "cannot serve metrics on %s", listen);
        if (!s->httpd || !o->ready_check)
                return 0;
        r = httpd_watch_loop(s->httpd, s->loop, 0);
        if (r >= 0)
                r = httpd_set_ready(s->httpd, o->ready_check, false, o->ready_why);
        if (r < 0)
                return log_error_errno(r, "cannot set up /readyz and /healthz");
        return 0;
}

int service_start_provision(struct service *s, const struct prov_frontend_options *o)
{
        _cleanup_free_ char *error = NULL;
        int r = prov_frontend_new(s->loop, s->kube, s->bus, s->cfg, o, &s->prov, &error);
        if (r < 0)
                return log_error_reason(r, error, "provisioning: cannot set it up");
        /* The engine's drains ask for replacement capacity from now on. */
        agent_engine_set_provision(s->engine, s->prov);
        return 0;
}

int service_new(const struct spotdrain_config *cfg, const struct service_options *o, struct service **ret)
{
        _cleanup_(service_freep) struct service *s = NULL;
        int r;

        s = calloc(1, sizeof(*s));
        if (!s)
                return log_error_errno(-ENOMEM, "out of memory");
        s->cfg = cfg;
        signal(SIGPIPE, SIG_IGN);
        s->loop = o->loop;
        if (!s->loop) {
                r = loop_new(&s->own_loop);
                if (r < 0)
                        return log_error_errno(r, "cannot set up the event loop");
                s->loop = s->own_loop;
        }
        if ((o->flags & SERVICE_METRICS) && (r = metrics_new(&s->metrics)) < 0)
                return log_error_errno(r, "cannot set up the metrics");
        for (size_t i = 0; s->metrics && i < o->n_families; i++)
                if ((r = metrics_register(s->metrics, &o->families[i])) < 0)
                        return log_error_errno(r, "cannot register the metric %s", o->families[i].name);
        r = start_kube(s, o);
        if (r >= 0 && (o->flags & SERVICE_ALERTS))
                r = start_alerts(s, o->flags);
        if (r >= 0 && (o->flags & SERVICE_ENGINE) &&
            (r = agent_engine_new(s->kube, s->bus, cfg, s->metrics, &s->engine)) < 0)
                log_error_errno(r, "cannot set up the drain engine");
        if (r >= 0 && (o->flags & SERVICE_PROVISION))
                r = service_start_provision(s, o->provision);
        if (r >= 0 && (o->flags & SERVICE_OPS))
                r = start_ops(s, o);
        if (r < 0)
                return r;
        if ((o->flags & SERVICE_WATCHDOG) && (r = ops_watchdog_start(s->loop, &s->watchdog)) < 0) {
                if (!o->watchdog_optional)
                        return log_error_errno(r, "cannot arm the watchdog");
                log_warning_errno(r, "cannot arm the watchdog, ignoring");
        }
        *ret = TAKE_PTR(s);
        return 0;
}

void service_stop(struct service *s)
{
        if (!s)
                return;
        s->httpd = httpd_free(s->httpd);
        s->watchdog = ops_watchdog_free(s->watchdog);
        s->prov = prov_frontend_free(s->prov);
        s->engine = agent_engine_free(s->engine);
}

struct service *service_free(struct service *s)
{
        if (!s)
                return NULL;
        service_stop(s);
        alert_bus_free(s->bus);
        /* After the bus (it no longer hands it alerts), before the loop (what it still holds is cancelled
         * on the loop). */
        webhook_sink_free(s->webhook);
        kube_client_free(s->kube);
        metrics_free(s->metrics);
        loop_free(s->own_loop);
        kube_config_free(s->own_kcfg);
        free(s);
        return NULL;
}

struct loop *service_loop(const struct service *s)
{
        return s ? s->loop : NULL;
}

struct metrics *service_metrics(const struct service *s)
{
        return s ? s->metrics : NULL;
}

int service_kube_new(const struct service *s, struct kube_client **ret)
{
        if (!s->kcfg)
                return -ENXIO;
        return kube_client_new(
            s->loop, s->kcfg,
            &(struct kube_client_options){
                .qps = s->cfg->kube.qps > 0 ? s->cfg->kube.qps * s->qps_scale : s->cfg->kube.qps,
                .burst = s->cfg->kube.burst > 0 ? (unsigned)s->cfg->kube.burst : 0,
                .metrics = s->metrics },
            ret);
}

struct kube_client *service_kube(const struct service *s)
{
        return s ? s->kube : NULL;
}

const struct kube_config *service_kube_config(const struct service *s)
{
        return s ? s->kcfg : NULL;
}

struct alert_bus *service_alerts(const struct service *s)
{
        return s ? s->bus : NULL;
}

struct webhook_sink *service_webhook(const struct service *s)
{
        return s ? s->webhook : NULL;
}

struct httpd *service_httpd(const struct service *s)
{
        return s ? s->httpd : NULL;
}

struct agent_engine *service_engine(const struct service *s)
{
        return s ? s->engine : NULL;
}

struct prov_frontend *service_provision(const struct service *s)
{
        return s ? s->prov : NULL;
}

static void on_alerts_flushed(void *userdata, int error)
{
        struct service *s = userdata;

        if (error < 0)
                log_warning("%zu alerts not delivered to the webhook before exit",
                            webhook_sink_pending(s->webhook));
        loop_exit(s->loop, s->exit_code);
}

void service_exit(struct service *s, int code)
{
        size_t pending = webhook_sink_pending(s->webhook);

        s->exit_code = code;
        if (pending > 0)
                log_info("waiting up to %.1f s for %zu alerts to reach the webhook",
                         (double)s->cfg->alerts.webhook_flush_usec / 1e6, pending);
        if (!s->webhook || webhook_sink_when_flushed(s->webhook, s->cfg->alerts.webhook_flush_usec,
                                                     on_alerts_flushed, s) < 0)
                loop_exit(s->loop, code);
}

void service_flush(struct service *s)
{
        uint64_t end = now_monotonic_usec() + FLUSH_KUBE_USEC;
        bool never = false;

        /* Bounded, as the API may be gone with the node. */
        for (;;) {
                struct kube_client_stats st;
                kube_client_stats(s->kube, &st);
                if ((st.in_flight == 0 && st.queued == 0) || now_monotonic_usec() >= end)
                        break;
                if (loop_run_until(s->loop, &never, 20 * 1000) == -ECANCELED)
                        break;
        }
        if (webhook_sink_flush(s->webhook, s->cfg->alerts.webhook_flush_usec) == -ETIMEDOUT)
                log_warning("%zu alerts not delivered to the webhook before exit",
                            webhook_sink_pending(s->webhook));
}
