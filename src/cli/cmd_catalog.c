/* spotdrain catalog show|refresh: the instance type catalog the provisioner chooses replacements from. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/help.h"
#include "spotdrain/awscreds.h"
#include "spotdrain/core.h"
#include "spotdrain/provision.h"
#include "spotdrain/util.h"

#define CATALOG_DEFAULT_FAMILIES "m5,m6i,m7i,c5,c6i,c7i,r5,r6i,t3"

static void catalog_usage(FILE *f)
{
        fprintf(
            f,
            "usage: spotdrain catalog show [--catalog FILE] [--json]\n"
            "       spotdrain catalog refresh [--output FILE] [--families LIST] [--region R]\n"
            "                                 [--endpoint-url URL]\n"
            "\n"
            "show      the instance types replacements are chosen from: vCPUs, memory, max pods (the EKS\n"
            "          ENI formula), architecture. Default: $SPOTDRAIN_CATALOG, the installed file, else\n"
            "          data/instance-types.json.\n"
            "refresh   rebuilds the catalog from EC2 DescribeInstanceTypes (credentials and region as the\n"
            "          AWS SDKs find them; endpoint $AWS_ENDPOINT_URL_EC2 / $AWS_ENDPOINT_URL) and writes\n"
            "          it to --output (default data/instance-types.json), or stdout with --output -.\n"
            "          --families: comma-separated (default " CATALOG_DEFAULT_FAMILIES "), \"all\" for\n"
            "          every type.\n"
            "\n"
            "exit status: 0 done, 1 error, 2 usage\n");
}

static int catalog_show(int argc, char **argv)
{
        static const struct option options[] = {
                { "catalog", required_argument, NULL, 'c' },
                { "json", no_argument, NULL, 'j' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        _cleanup_(prov_catalog_freep) struct prov_catalog *cat = NULL;
        _cleanup_free_ char *err = NULL, *json = NULL;
        const char *path = NULL;
        bool as_json = false;
        int c, r;

        optind = 0;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'c':
                        path = optarg;
                        break;
                case 'j':
                        as_json = true;
                        break;
                case 'h':
                        return cli_help(stdout, "catalog");
                default:
                        fprintf(stderr, "spotdrain catalog show: unknown option '%s'\n", argv[optind - 1]);
                        return EXIT_USAGE;
                }
        if (optind < argc) {
                fprintf(stderr, "spotdrain catalog show: unexpected argument '%s'\n", argv[optind]);
                return EXIT_USAGE;
        }
        r = prov_catalog_load(path, &cat, &err);
        if (r < 0) {
                fprintf(stderr, "spotdrain catalog show: %s\n", err ? err : strerror(-r));
                return EXIT_ERROR;
        }
        if (as_json) {
                if (prov_catalog_format_json(cat, &json) < 0)
                        return EXIT_ERROR;
                fputs(json, stdout);
                return EXIT_OK;
        }
        /* Sorted as the file is written: by family, then size. */
        if (prov_catalog_format_json(cat, &json) < 0)
                return EXIT_ERROR;
        printf("%-16s %6s %12s %9s  %s\n", "TYPE", "VCPU", "MEMORY_MIB", "MAX_PODS", "ARCH");
        for (size_t i = 0; i < cat->n; i++) {
                const struct prov_itype *t = &cat->types[i];
                printf("%-16s %6d %12lld %9d  %s\n", t->name, t->vcpu, (long long)t->memory_mib, t->max_pods,
                       t->arch);
        }
        return EXIT_OK;
}

struct refresh {
        struct loop *loop;
        struct aws_credentials creds;
        bool have_creds;
        bool done;
        int error;
        char message[512];
        struct prov_catalog *cat;
};

static const struct aws_credentials *refresh_creds(void *userdata)
{
        struct refresh *x = userdata;
        return x->have_creds ? &x->creds : NULL;
}

static void on_creds(int error, const struct aws_credentials *c, const char *message, void *userdata)
{
        struct refresh *x = userdata;
        if (error < 0) {
                x->error = error;
                snprintf(x->message, sizeof(x->message), "credentials: %s",
                         message ? message : strerror(-error));
                x->done = true;
                return;
        }
        if (aws_credentials_copy(&x->creds, c) < 0) {
                x->error = -ENOMEM;
                x->done = true;
                return;
        }
        x->have_creds = true;
        x->done = true;
}

static void on_types(const struct ec2_result *res, struct prov_catalog *cat, void *userdata)
{
        struct refresh *x = userdata;
        x->done = true;
        if (res->error < 0) {
                x->error = res->error;
                snprintf(x->message, sizeof(x->message), "DescribeInstanceTypes: %s%s%s",
                         res->code[0] ? res->code : strerror(-res->error), res->message[0] ? ": " : "",
                         res->message);
                return;
        }
        x->cat = cat;
}

static char **split_families(const char *s)
{
        size_t n = 1;
        for (const char *p = s; *p; p++)
                n += *p == ',';
        char **v = calloc(n + 1, sizeof(char *));
        if (!v)
                return NULL;
        size_t k = 0;
        for (const char *p = s; *p;) {
                size_t l = strcspn(p, ",");
                if (l > 0 && !(v[k++] = strndup(p, l))) {
                        for (size_t i = 0; i < k; i++)
                                free(v[i]);
                        free(v);
                        return NULL;
                }
                p += l + (p[l] == ',');
        }
        return v;
}

static void strv_freep(char ***v)
{
        for (size_t i = 0; *v && (*v)[i]; i++)
                free((*v)[i]);
        free(*v);
}

static int catalog_refresh(int argc, char **argv)
{
        static const struct option options[] = {
                { "output", required_argument, NULL, 'o' }, { "families", required_argument, NULL, 'f' },
                { "region", required_argument, NULL, 'r' }, { "endpoint-url", required_argument, NULL, 'e' },
                { "help", no_argument, NULL, 'h' },         {},
        };
        _cleanup_(loop_freep) struct loop *loop = NULL;
        _cleanup_(aws_creds_provider_freep) struct aws_creds_provider *provider = NULL;
        _cleanup_(ec2_client_freep) struct ec2_client *ec2 = NULL;
        _cleanup_(strv_freep) char **families = NULL;
        _cleanup_free_ char *json = NULL;
        const char *output = "data/instance-types.json", *fam = CATALOG_DEFAULT_FAMILIES, *region = NULL,
                   *endpoint = NULL;
        struct refresh x = {};
        int c, r;

        optind = 0;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "ho:", options, NULL)) >= 0)
                switch (c) {
                case 'o':
                        output = optarg;
                        break;
                case 'f':
                        fam = optarg;
                        break;
                case 'r':
                        region = optarg;
                        break;
                case 'e':
                        endpoint = optarg;
                        break;
                case 'h':
                        return cli_help(stdout, "catalog");
                default:
                        fprintf(stderr, "spotdrain catalog refresh: unknown option '%s'\n",
                                argv[optind - 1]);
                        return EXIT_USAGE;
                }
        if (optind < argc) {
                fprintf(stderr, "spotdrain catalog refresh: unexpected argument '%s'\n", argv[optind]);
                return EXIT_USAGE;
        }
        if (!streq(fam, "all") && !(families = split_families(fam)))
                return EXIT_ERROR;

        r = loop_new(&loop);
        if (r < 0) {
                fprintf(stderr, "spotdrain catalog refresh: event loop: %s\n", strerror(-r));
                return EXIT_ERROR;
        }
        x.loop = loop;
        r = aws_creds_provider_new(loop, &(struct aws_creds_options){}, &provider);
        if (r < 0) {
                fprintf(stderr, "spotdrain catalog refresh: AWS credentials: %s\n", strerror(-r));
                return EXIT_ERROR;
        }
        r = aws_creds_get(provider, on_creds, &x);
        if (r == 0)
                r = loop_run_until(loop, &x.done, UINT64_MAX);
        if (r < 0 || x.error < 0) {
                fprintf(stderr, "spotdrain catalog refresh: %s\n", x.message[0] ? x.message : strerror(-r));
                aws_credentials_clear(&x.creds);
                return EXIT_ERROR;
        }
        struct ec2_config cfg = {
                .endpoint = endpoint, .region = region, .credentials = refresh_creds, .userdata = &x
        };
        r = ec2_client_new(loop, &cfg, &ec2);
        if (r < 0) {
                fprintf(stderr, "spotdrain catalog refresh: %s\n",
                        r == -EDESTADDRREQ ? "no region: set AWS_REGION or --region" : strerror(-r));
                aws_credentials_clear(&x.creds);
                return EXIT_ERROR;
        }
        x.done = false;
        r = ec2_describe_instance_types(ec2, (const char *const *)families, on_types, &x);
        if (r == 0)
                r = loop_run_until(loop, &x.done, UINT64_MAX);
        aws_credentials_clear(&x.creds);
        if (r < 0 || x.error < 0 || !x.cat) {
                fprintf(stderr, "spotdrain catalog refresh: %s\n",
                        x.message[0] ? x.message
                                     : strerror(-(r < 0         ? r
                                                  : x.error < 0 ? x.error
                                                                : EIO)));
                prov_catalog_free(x.cat);
                return EXIT_ERROR;
        }
        if (x.cat->n == 0) {
                fprintf(stderr, "spotdrain catalog refresh: EC2 listed no instance type for '%s'\n", fam);
                prov_catalog_free(x.cat);
                return EXIT_ERROR;
        }
        r = prov_catalog_format_json(x.cat, &json);
        size_t n = x.cat->n;
        prov_catalog_free(x.cat);
        if (r < 0)
                return EXIT_ERROR;
        if (streq(output, "-")) {
                fputs(json, stdout);
                return EXIT_OK;
        }
        r = write_file_atomic(output, json, strlen(json), 0644);
        if (r < 0) {
                fprintf(stderr, "spotdrain catalog refresh: %s: %s\n", output, strerror(-r));
                return EXIT_ERROR;
        }
        fprintf(stderr, "spotdrain catalog refresh: %zu instance types written to %s\n", n, output);
        return EXIT_OK;
}

int cmd_catalog(int argc, char **argv)
{
        if (argc >= 2 && (streq(argv[1], "--help") || streq(argv[1], "-h"))) {
                return cli_help(stdout, "catalog");
        }
        if (argc >= 2 && streq(argv[1], "show"))
                return catalog_show(argc - 1, argv + 1);
        if (argc >= 2 && streq(argv[1], "refresh"))
                return catalog_refresh(argc - 1, argv + 1);
        fprintf(stderr, "spotdrain catalog: expected the subcommand 'show' or 'refresh'\n");
        catalog_usage(stderr);
        return EXIT_USAGE;
}
