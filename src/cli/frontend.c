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

int frontend_start(struct frontend *f, struct service_options *o)
{
        o->kubeconfig = f->kubeconfig;
        o->listen = f->metrics_listen;
        return service_new(f->cfg, o, &f->svc) < 0 ? EXIT_ERROR : EXIT_OK;
}

void frontend_done(struct frontend *f)
{
        f->svc = service_free(f->svc);
        f->cfg = config_free(f->cfg);
}
