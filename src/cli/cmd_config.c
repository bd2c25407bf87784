/* spotdrain check-config [--config FILE] [--set KEY=VALUE ...]: validates the configuration (file,
 * SPOTDRAIN_* environment, --set) without running anything, and prints the effective values (secrets
 * hidden). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/help.h"
#include "spotdrain/alert.h"
#include "spotdrain/config.h"
#include "spotdrain/core.h"
#include "spotdrain/dispatch.h"
#include "spotdrain/kube.h"
#include "spotdrain/service.h"

int cmd_check_config(int argc, char **argv)
{
        static const struct option options[] = {
                { "config", required_argument, NULL, 'c' },
                { "set", required_argument, NULL, 's' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        _cleanup_(config_freep) struct spotdrain_config *cfg = NULL;
        _cleanup_free_ char *error = NULL, *dump = NULL;
        _cleanup_free_ char **sets = NULL;
        const char *path = NULL;
        size_t n_sets = 0;
        int c, r;

        sets = calloc((size_t)argc + 1, sizeof(char *));
        if (!sets)
                return EXIT_ERROR;
        optind = 1;
        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                switch (c) {
                case 'c':
                        path = optarg;
                        break;
                case 's':
                        sets[n_sets++] = optarg;
                        break;
                case 'h':
                        return cli_help(stdout, "check-config");
                default:
                        fprintf(stderr,
                                "usage: spotdrain check-config [--config FILE] [--set KEY=VALUE ...]\n");
                        return EXIT_USAGE;
                }
        }
        if (optind != argc) {
                fprintf(stderr, "usage: spotdrain check-config [--config FILE] [--set KEY=VALUE ...]\n");
                return EXIT_USAGE;
        }
        r = config_load(path, sets, &cfg, &error);
        if (r < 0) {
                /* A file's errors come one a line, each with its file:line. */
                const char *line = error ? error : strerror(-r);
                for (const char *nl; (nl = strchr(line, '\n')); line = nl + 1)
                        fprintf(stderr, "spotdrain check-config: %.*s\n", (int)(nl - line), line);
                fprintf(stderr, "spotdrain check-config: %s\n", line);
                return EXIT_ERROR;
        }
        /* Values whose form the table cannot check, refused here as at start. */
        struct kube_kv *kv = NULL;
        size_t n = 0;
        r = alert_event_annotations_parse(cfg->alerts.event_annotations, &kv, &n, &error);
        if (r < 0) {
                fprintf(stderr, "spotdrain check-config: %s\n", error ? error : strerror(-r));
                return EXIT_ERROR;
        }
        kube_kv_free_array(kv, n);
        /* Keys that agree in form but not in meaning: told, not refused. */
        const char *note = dispatch_cordon_only_unused(cfg);
        if (note)
                fprintf(stderr, "spotdrain check-config: warning: %s\n", note);
        r = config_dump(cfg, &dump);
        if (r < 0) {
                fprintf(stderr, "spotdrain check-config: %s\n", strerror(-r));
                return EXIT_ERROR;
        }
        fputs(dump, stdout);
        return EXIT_OK;
}
