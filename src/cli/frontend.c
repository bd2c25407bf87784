#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/frontend.h"

bool frontend_option(struct frontend *f, int c, const char *arg)
{
        switch (c) {
        case 'k':
                f->kubeconfig = arg;
                return true;
        case 'c':
                f->config = arg;
                return true;
        case 'm':
                f->metrics_listen = arg;
                return true;
        case 'L':
                f->log_level = arg;
                return true;
        case 'F':
                f->log_format = arg;
                return true;
        default:
                return false;
        }
}

int frontend_load_config(struct frontend *f)
{
        _cleanup_free_ char *error = NULL;
        int r, level, format;

        r = config_load(f->config, NULL, &f->cfg, &error);
        if (r < 0) {
                fprintf(stderr, "spotdrain %s: %s\n", f->name, error ? error : strerror(-r));
                return EXIT_ERROR;
        }
        level = f->log_level ? log_parse_level(f->log_level) : f->cfg->log.level;
        format = f->log_format ? log_parse_format(f->log_format) : f->cfg->log.format;
        if (level < 0 || format < 0) {
                fprintf(stderr, "spotdrain %s: unknown log %s '%s'\n", f->name,
                        level < 0 ? "level" : "format", level < 0 ? f->log_level : f->log_format);
                return EXIT_USAGE;
        }
        log_setup((enum log_format)format, level);
        return EXIT_OK;
}

int frontend_start_kube(struct frontend *f)
{
        _cleanup_free_ char *error = NULL;
        const struct spotdrain_config *cfg = f->cfg;
        int r;

        signal(SIGPIPE, SIG_IGN);
        r = loop_new(&f->loop);
        if (r < 0)
                return log_error_errno(r, "cannot set up the event loop"), EXIT_ERROR;
        r = metrics_new(&f->metrics);
        if (r < 0)
                return log_error_errno(r, "cannot set up the metrics"), EXIT_ERROR;
        r = kube_config_load_auto(f->kubeconfig ? f->kubeconfig : cfg->kube.kubeconfig, cfg->kube.context,
                                  &f->kcfg, &error);
        if (r < 0) {
                if (error)
                        log_error_errno(r, "cannot load the Kubernetes configuration: %s", error);
                else
                        log_error_errno(r, "cannot load the Kubernetes configuration");
                return EXIT_ERROR;
        }
        r = kube_client_new(
            f->loop, f->kcfg,
            &(struct kube_client_options){ .qps = cfg->kube.qps,
                                           .burst = cfg->kube.burst > 0 ? (unsigned)cfg->kube.burst : 0,
                                           .metrics = f->metrics },
            &f->kube);
        if (r < 0)
                return log_error_errno(r, "cannot set up the Kubernetes client"), EXIT_ERROR;
        return EXIT_OK;
}

int frontend_start_httpd(struct frontend *f, const char *ready_name, const char *ready_why)
{
        const char *listen = f->metrics_listen            ? f->metrics_listen
                             : f->cfg->ops.metrics_listen ? f->cfg->ops.metrics_listen
                                                          : HTTPD_DEFAULT_LISTEN;
        int r;

        r = httpd_start(listen, f->metrics, &f->httpd);
        if (r < 0)
                return log_error_errno(r, "cannot serve metrics on %s", listen), EXIT_ERROR;
        if (!f->httpd)
                return EXIT_OK;
        r = httpd_watch_loop(f->httpd, f->loop, 0);
        if (r >= 0)
                r = httpd_set_ready(f->httpd, ready_name, false, ready_why);
        if (r < 0)
                return log_error_errno(r, "cannot set up /readyz and /healthz"), EXIT_ERROR;
        return EXIT_OK;
}

static void on_alerts_flushed(void *userdata, int error)
{
        struct frontend *f = userdata;

        if (error < 0)
                log_warning("%zu alerts not delivered to the webhook before exit",
                            webhook_sink_pending(f->webhook));
        loop_exit(f->loop, f->exit_code);
}

void frontend_exit(struct frontend *f, int code)
{
        size_t pending = webhook_sink_pending(f->webhook);

        f->exit_code = code;
        if (pending > 0)
                log_info("waiting up to %.1f s for %zu alerts to reach the webhook",
                         (double)f->cfg->alerts.webhook_flush_usec / 1e6, pending);
        if (!f->webhook || webhook_sink_when_flushed(f->webhook, f->cfg->alerts.webhook_flush_usec,
                                                     on_alerts_flushed, f) < 0)
                loop_exit(f->loop, code);
}

void frontend_stop(struct frontend *f)
{
        f->httpd = httpd_free(f->httpd);
        f->watchdog = ops_watchdog_free(f->watchdog);
}

void frontend_done(struct frontend *f)
{
        frontend_stop(f);
        f->kube = kube_client_free(f->kube);
        f->metrics = metrics_free(f->metrics);
        f->loop = loop_free(f->loop);
        f->kcfg = kube_config_free(f->kcfg);
        f->cfg = config_free(f->cfg);
}
