/* spotdrain event parse [FILE|-] [--json] [--imds PATH] [--instance-id ID] [--region R]: one notice body in,
 * the normalized notices out (docs/contracts.md §2). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/help.h"
#include "spotdrain/notice.h"
#include "spotdrain/util.h"

static void event_usage(FILE *f)
{
        fprintf(f,
                "usage: spotdrain event parse [FILE|-] [OPTIONS]\n"
                "\n"
                "Normalizes one SQS message body, EventBridge event, SNS envelope or IMDS document into\n"
                "notices: a one-line summary each, or one JSON object per line with\n"
                "--json (docs/contracts.md §2).\n"
                "\n"
                "  --json                 JSON output\n"
                "  --imds PATH            the body is the IMDS document at PATH (spot/instance-action,\n"
                "                         spot/termination-time, events/recommendations/rebalance,\n"
                "                         events/maintenance/scheduled, events/maintenance/history,\n"
                "                         autoscaling/target-lifecycle-state); else the form is detected\n"
                "  --instance-id ID       instance of an IMDS document (they name none)\n"
                "  --region R             region when the body names none\n"
                "  --source S             source recorded in the notice (default sqs or imds, by form)\n"
                "  --now RFC3339          notice time of IMDS documents that carry none (default: now)\n"
                "  --asg-deadline SECS    Auto Scaling terminate deadline after the notice (default 3600,\n"
                "                         the lifecycle hook's default heartbeat timeout)\n"
                "\n"
                "exit status: 0 recognized (also when it carries nothing to act on), 65 malformed or\n"
                "unrecognized (stderr says why), 1 I/O error, 2 usage\n");
}

/* Standard input, bounded like a file: one byte more than the limit tells "too large" apart. */
static int read_stdin(size_t max, char **ret, size_t *ret_len)
{
        struct buf b = { 0 };
        char chunk[16384];
        for (;;) {
                ssize_t n = read(STDIN_FILENO, chunk, sizeof(chunk));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        int r = -errno;
                        buf_free(&b);
                        return r;
                }
                if (n == 0)
                        break;
                if (b.len + (size_t)n > max) {
                        buf_free(&b);
                        return -EFBIG;
                }
                if (buf_append(&b, chunk, (size_t)n) < 0) {
                        buf_free(&b);
                        return -ENOMEM;
                }
        }
        if (buf_append(&b, "", 0) < 0) {
                buf_free(&b);
                return -ENOMEM;
        }
        *ret = b.data;
        *ret_len = b.len;
        return 0;
}

static int event_parse(int argc, char **argv)
{
        enum {
                OPT_JSON = 0x100,
                OPT_IMDS,
                OPT_INSTANCE,
                OPT_REGION,
                OPT_SOURCE,
                OPT_NOW,
                OPT_ASG,
                OPT_IGNORED
        };
        static const struct option options[] = {
                { "json", no_argument, NULL, OPT_JSON },
                { "imds", required_argument, NULL, OPT_IMDS },
                { "instance-id", required_argument, NULL, OPT_INSTANCE },
                { "region", required_argument, NULL, OPT_REGION },
                { "source", required_argument, NULL, OPT_SOURCE },
                { "now", required_argument, NULL, OPT_NOW },
                { "asg-deadline", required_argument, NULL, OPT_ASG },
                { "help", no_argument, NULL, 'h' },
                /* Common flags (docs/contracts.md §1) that mean nothing to a pure parser are accepted. */
                { "config", required_argument, NULL, OPT_IGNORED },
                { "kubeconfig", required_argument, NULL, OPT_IGNORED },
                { "log-format", required_argument, NULL, OPT_IGNORED },
                { "log-level", required_argument, NULL, OPT_IGNORED },
                { "dry-run", no_argument, NULL, OPT_IGNORED },
                {},
        };
        struct notice_parse_opts opts = { 0 };
        bool json = false;
        int c;

        optind = 0; /* GNU: full reset, so the verb can run more than once in a process */
        opterr = 0;
        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                switch (c) {
                case OPT_JSON:
                        json = true;
                        break;
                case OPT_IMDS:
                        opts.imds_path = optarg;
                        break;
                case OPT_INSTANCE:
                        if (!notice_instance_id_valid(optarg)) {
                                fprintf(
                                    stderr,
                                    "spotdrain event parse: --instance-id '%s' is not an EC2 instance ID\n",
                                    optarg);
                                return EXIT_USAGE;
                        }
                        opts.instance_id = optarg;
                        break;
                case OPT_REGION:
                        opts.region = optarg;
                        break;
                case OPT_SOURCE:
                        opts.source = optarg;
                        break;
                case OPT_NOW:
                        if (notice_parse_time(optarg, &opts.now_usec) < 0) {
                                fprintf(stderr, "spotdrain event parse: --now '%s' is not a time\n", optarg);
                                return EXIT_USAGE;
                        }
                        break;
                case OPT_ASG: {
                        char *end;
                        errno = 0;
                        unsigned long v = strtoul(optarg, &end, 10);
                        /* Auto Scaling's own bound: a lifecycle action lasts at most 48 hours. */
                        if (errno || end == optarg || *end || v == 0 || v > 172800 || optarg[0] == '-') {
                                fprintf(stderr,
                                        "spotdrain event parse: --asg-deadline takes 1..172800 seconds\n");
                                return EXIT_USAGE;
                        }
                        opts.asg_deadline_usec = (uint64_t)v * 1000000ULL;
                        break;
                }
                case OPT_IGNORED:
                        break;
                case 'h':
                        return cli_help(stdout, "event");
                default:
                        fprintf(stderr, "spotdrain event parse: unknown or incomplete option '%s'\n",
                                argv[optind - 1]);
                        event_usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (argc - optind > 1) {
                fprintf(stderr, "spotdrain event parse: one input at a time\n");
                return EXIT_USAGE;
        }
        const char *path = optind < argc ? argv[optind] : "-";

        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        int r = streq(path, "-") ? read_stdin(NOTICE_BODY_MAX, &data, &len)
                                 : read_file_full(path, NOTICE_BODY_MAX, &data, &len);
        if (r == -EFBIG) {
                fprintf(stderr, "spotdrain event parse: %s: larger than the %u-byte limit\n", path,
                        NOTICE_BODY_MAX);
                return EXIT_DATAERR;
        }
        if (r < 0) {
                fprintf(stderr, "spotdrain event parse: %s: %s\n", path, strerror(-r));
                return EXIT_ERROR;
        }

        _cleanup_free_ struct notice *notices = NULL;
        size_t n = 0;
        char reason[512];
        r = notice_parse(data, len, &opts, &notices, &n, reason, sizeof(reason));
        if (r < 0) {
                fprintf(stderr, "spotdrain event parse: %s: %s\n", path, *reason ? reason : strerror(-r));
                return r == -ENOMEM ? EXIT_ERROR : r == -EINVAL ? EXIT_USAGE : EXIT_DATAERR;
        }
        if (n == 0)
                fprintf(stderr, "spotdrain event parse: %s: no notice: %s\n", path, reason);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *line = NULL;
                r = json ? notice_format_json(&notices[i], &line) : notice_format_human(&notices[i], &line);
                if (r < 0) {
                        fprintf(stderr, "spotdrain event parse: formatting a notice: %s\n", strerror(-r));
                        return EXIT_ERROR;
                }
                puts(line);
        }
        if (fflush(stdout) != 0 || ferror(stdout)) {
                fprintf(stderr, "spotdrain event parse: writing the output failed\n");
                return EXIT_ERROR;
        }
        return EXIT_OK;
}

int cmd_event(int argc, char **argv)
{
        if (argc >= 2 && (streq(argv[1], "--help") || streq(argv[1], "-h"))) {
                return cli_help(stdout, "event");
        }
        if (argc < 2 || !streq(argv[1], "parse")) {
                fprintf(stderr, "spotdrain event: expected the subcommand 'parse'\n");
                event_usage(stderr);
                return EXIT_USAGE;
        }
        return event_parse(argc - 1, argv + 1);
}
