#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/frontend.h"
#include "spotdrain/dispatch.h"
#include "spotdrain/metrics.h"

bool frontend_option(struct frontend *f, int c, const char *arg)
{
        if (c == 'm') {
                f->metrics_listen = arg;
                return true;
        }
        if (c == 'D') {
                f->common.dry_run = true;
                return true;
        }
        return cli_common_option(&f->common, c, arg);
}

int frontend_getopt(struct frontend *f, int argc, char **argv, const struct option *options)
{
        int c;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                if (!frontend_option(f, c, optarg))
                        break;
        return c;
}

bool cli_common_option(struct cli_common *common, int c, const char *arg)
{
        switch (c) {
        case 'c':
                common->config = arg;
                return true;
        case 'k':
                common->kubeconfig = arg;
                return true;
        case 'j':
                common->json = true;
                return true;
        case 'F':
                common->log_format = arg;
                return true;
        case 'L':
                common->log_level = arg;
                return true;
        default:
                return false;
        }
}

int cli_common_log_setup(const struct cli_common *common, const char *verb, int default_level)
{
        int level = default_level, format = LOG_FORMAT_AUTO;

        if (common->log_level && (level = log_parse_level(common->log_level)) < 0) {
                fprintf(stderr, "spotdrain %s: unknown log level '%s'\n", verb, common->log_level);
                return EXIT_USAGE;
        }
        if (common->log_format && (format = log_parse_format(common->log_format)) < 0) {
                fprintf(stderr, "spotdrain %s: unknown log format '%s'\n", verb, common->log_format);
                return EXIT_USAGE;
        }
        log_setup((enum log_format)format, level);
        return -1;
}

int frontend_load_config(struct frontend *f)
{
        _cleanup_free_ char *error = NULL;
        int r, level, format;

        r = config_load(f->common.config, NULL, &f->cfg, &error);
        if (r < 0) {
                fprintf(stderr, "spotdrain %s: %s\n", f->name, error ? error : strerror(-r));
                return EXIT_ERROR;
        }
        level = f->common.log_level ? log_parse_level(f->common.log_level) : f->cfg->log.level;
        format = f->common.log_format ? log_parse_format(f->common.log_format) : f->cfg->log.format;
        if (level < 0 || format < 0) {
                fprintf(stderr, "spotdrain %s: unknown log %s '%s'\n", f->name,
                        level < 0 ? "level" : "format",
                        level < 0 ? f->common.log_level : f->common.log_format);
                return EXIT_USAGE;
        }
        log_setup((enum log_format)format, level);
        const char *note = dispatch_cordon_only_unused(f->cfg);
        if (note)
                log_warning("%s", note);
        return EXIT_OK;
}

static void count_dry_run(const char *action, void *userdata)
{
        struct frontend *f = userdata;
        if (f->svc)
                (void)metrics_counter_inc(service_metrics(f->svc), METRIC_DRY_RUN_ACTIONS, action, NULL);
}

int frontend_start(struct frontend *f, struct service_options *o)
{
        o->kubeconfig = f->common.kubeconfig;
        o->listen = f->metrics_listen;
        /* Before the services exist: nothing they start may slip out. */
        if (f->common.dry_run) {
                dry_run_enable(count_dry_run, f);
                log_notice(
                    "spotdrain %s: shadow mode (--dry-run): nothing is written to the cluster or AWS; "
                    "what would be is logged (\"would ...\") and counted in %s",
                    f->name, METRIC_DRY_RUN_ACTIONS);
        }
        return service_new(f->cfg, o, &f->svc) < 0 ? EXIT_ERROR : EXIT_OK;
}

void frontend_done(struct frontend *f)
{
        if (f->common.dry_run)
                dry_run_disable();
        f->svc = service_free(f->svc);
        f->cfg = config_free(f->cfg);
}
