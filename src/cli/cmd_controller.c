/* spotdrain controller: queue mode. Long-polls an SQS queue fed by EventBridge / Auto Scaling and drains
 * any node of the cluster, one elected replica at a time, until SIGTERM (then hands over and exits 0). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/frontend.h"
#include "cli/help.h"
#include "spotdrain/admission.h"
#include "spotdrain/awscreds.h"
#include "spotdrain/config.h"
#include "spotdrain/controller.h"
#include "spotdrain/core.h"
#include "spotdrain/httpd.h"
#include "spotdrain/kube.h"
#include "spotdrain/metrics.h"
#include "spotdrain/ops.h"

#define SNAPSHOT_USEC       (1000ULL * 1000ULL)
#define CREDS_REFRESH_AHEAD (300ULL * 1000ULL * 1000ULL)

static void controller_usage(FILE *f)
{
        fprintf(f, "usage: spotdrain controller --queue-url URL [--region R] [--kubeconfig FILE]\n"
                   "         [--config FILE] [--metrics-listen HOST:PORT] [--lease-namespace NS]\n"
                   "         [--identity ID] [--no-leader-election] [--sqs-endpoint URL]\n"
                   "         [--asg-endpoint URL] [--log-level LEVEL] [--log-format FORMAT] [--dry-run]\n"
                   "\n"
                   "Long-polls the SQS queue that EventBridge (spot interruptions, rebalance\n"
                   "recommendations, state changes, AWS Health) and Auto Scaling lifecycle hooks deliver\n"
                   "to, and drains the nodes they name. Only the holder of the Lease spotdrain-controller\n"
                   "(in --lease-namespace, default $POD_NAMESPACE) receives. Runs until SIGTERM.\n"
                   "Serves /metrics, /healthz and /readyz on --metrics-listen (default " HTTPD_DEFAULT_LISTEN
                   ",\n\"off\" for none); /readyz fails while the queue is unreadable.\n");
}

/* ---- credentials: the provider's latest, copied ---- */

struct creds {
        struct aws_creds_provider *provider;
        struct aws_credentials copy;
        bool have, asking;
};

static void creds_store(struct creds *c, const struct aws_credentials *src)
{
        struct aws_credentials n = {};
        if (aws_credentials_copy(&n, src) < 0)
                return;
        aws_credentials_clear(&c->copy);
        c->copy = n;
        c->have = true;
}

static void on_refresh(const struct aws_credentials *src, void *userdata)
{
        creds_store(userdata, src);
}

static void on_creds(int error, const struct aws_credentials *src, const char *message, void *userdata)
{
        struct creds *c = userdata;
        c->asking = false;
        if (error < 0)
                log_warning_reason(error, message, "cannot get AWS credentials");
        else
                creds_store(c, src);
}

static const struct aws_credentials *creds_current(void *userdata)
{
        struct creds *c = userdata;
        bool stale = !c->have || (c->copy.expiration_usec &&
                                  c->copy.expiration_usec < now_realtime_usec() + CREDS_REFRESH_AHEAD);
        if (stale && !c->asking && aws_creds_get(c->provider, on_creds, c) >= 0)
                c->asking = true;
        return c->have ? &c->copy : NULL;
}

/* ---- metrics and readiness (ops module): the controller's totals turned into registry deltas
 * (controller_metrics_count()) ---- */

struct ops {
        struct controller *ctl;
        struct service *svc;
        struct loop *loop;
        struct httpd *httpd;
        struct timer *timer;
        struct controller_stats last;
        bool notified;
        bool api_down; /* the Kubernetes API server was reported unreachable (api_check) */
};

/* The Kubernetes API server unanswered this long is reported: one request lost is no outage. */
#define API_UNREACHABLE_USEC (5 * UINT64_C(1000000))

/* An API server that does not answer stops every drain: said once at warning level with its address and
 * the cause, and by /readyz's check "kubernetes", until it answers again. */
static void api_check(struct ops *o)
{
        struct kube_client_stats ks;
        const struct kube_config *kc = service_kube_config(o->svc);
        const char *url = kc && kc->server ? kc->server : "(no server)";
        kube_client_stats(service_kube(o->svc), &ks);
        bool down = ks.unreachable_since && clk_now() - ks.unreachable_since >= API_UNREACHABLE_USEC;
        if (down && !o->api_down) {
                _cleanup_free_ char *why =
                    strprintf("the Kubernetes API server at %s does not answer (%s)", url, ks.last_error);
                log_warning(
                    "cannot reach the Kubernetes API server at %s (%s): no node can be drained; check "
                    "the server address of the kubeconfig or the in-cluster service, that the server is "
                    "up, and any proxy between (HTTPS_PROXY, NO_PROXY)",
                    url, ks.last_error);
                (void)httpd_set_ready(o->httpd, "kubernetes", false, why ? why : "no answer");
        } else if (!down && o->api_down) {
                log_notice("the Kubernetes API server at %s answers again", url);
                (void)httpd_set_ready(o->httpd, "kubernetes", true, NULL);
        }
        o->api_down = down;
}

static void ops_tick(void *userdata)
{
        struct ops *o = userdata;
        struct metrics *m = service_metrics(o->svc);
        bool ready = controller_ready(o->ctl);

        o->timer = NULL;
        controller_metrics_count(o->ctl, m, &o->last);
        (void)httpd_set_ready(o->httpd, "queue", ready,
                              ready ? NULL : "the interruption queue is not readable");
        api_check(o);
        if (ready && !o->notified) {
                o->notified = true;
                (void)ops_notify_ready("controller running: queue readable");
        }
        if (timer_start_in(o->loop, SNAPSHOT_USEC, ops_tick, o, &o->timer) < 0)
                log_debug("controller: cannot arm the metrics snapshot");
}

/* ---- the command ---- */

static void on_handed_over(void *userdata)
{
        struct ops *o = userdata;
        service_exit(o->svc, 0);
}

static void on_stop_signal(struct loop *l, void *userdata)
{
        struct ops *o = userdata;
        log_info("stopping: handing over what is under way");
        (void)ops_notify_stopping();
        controller_stop(o->ctl, on_handed_over, o);
}

/* A queue named by anything but its URL (its ARN, its bare name) is refused with the URL to give: from an
 * ARN, that queue's own. */
static bool queue_url_usable(const char *q)
{
        char partition[32], region[64], account[32], name[128];
        if (startswith(q, "https://") || startswith(q, "http://"))
                return true;
        if (sscanf(q, "arn:%31[^:]:sqs:%63[^:]:%31[^:]:%127[^:/ ]", partition, region, account, name) == 4)
                fprintf(stderr,
                        "spotdrain controller: give the queue URL, not its ARN: "
                        "https://sqs.%s.amazonaws.com%s/%s/%s\n",
                        region, streq(partition, "aws-cn") ? ".cn" : "", account, name);
        else
                fprintf(stderr,
                        "spotdrain controller: give the queue URL, not its ARN: "
                        "https://sqs.REGION.amazonaws.com/ACCOUNT/NAME (got '%s')\n",
                        q);
        return false;
}

int cmd_controller(int argc, char **argv)
{
        static const struct option options[] = {
                { "queue-url", required_argument, NULL, 'q' },
                { "region", required_argument, NULL, 'r' },
                FRONTEND_OPTIONS,
                { "lease-namespace", required_argument, NULL, 'n' },
                { "identity", required_argument, NULL, 'i' },
                { "no-leader-election", no_argument, NULL, 'N' },
                { "sqs-endpoint", required_argument, NULL, 's' },
                { "asg-endpoint", required_argument, NULL, 'a' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *queue_url = NULL, *region = NULL, *lease_ns = NULL, *identity = NULL,
                   *sqs_endpoint = NULL, *asg_endpoint = NULL;
        bool no_election = false;
        _cleanup_(frontend_done) struct frontend fe = { .name = "controller" };
        struct spotdrain_config *cfg;
        struct service *svc;
        struct loop *l;
        _cleanup_(controller_freep) struct controller *ctl = NULL;
        struct admission_server *webhook = NULL;
        struct creds creds = {};
        struct ops o = {};
        int c, r;

        optind = 1;
        while ((c = frontend_getopt(&fe, argc, argv, options)) >= 0) {
                switch (c) {
                case 'q':
                        queue_url = optarg;
                        break;
                case 'r':
                        region = optarg;
                        break;
                case 'n':
                        lease_ns = optarg;
                        break;
                case 'i':
                        identity = optarg;
                        break;
                case 'N':
                        no_election = true;
                        break;
                case 's':
                        sqs_endpoint = optarg;
                        break;
                case 'a':
                        asg_endpoint = optarg;
                        break;
                case 'h':
                        return cli_help(stdout, "controller");
                default:
                        controller_usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (optind != argc) {
                controller_usage(stderr);
                return EXIT_USAGE;
        }

        r = frontend_load_config(&fe);
        if (r != EXIT_OK)
                return r;
        cfg = fe.cfg;
        if (!queue_url)
                queue_url = cfg->aws.queue_url;
        if (isempty(queue_url)) {
                fprintf(stderr, "spotdrain controller: --queue-url (or aws.queue_url) is required\n");
                return EXIT_USAGE;
        }
        if (!queue_url_usable(queue_url))
                return EXIT_USAGE;

        r = frontend_start(
            &fe, &(struct service_options){ .flags = SERVICE_METRICS | SERVICE_ALERTS | SERVICE_WEBHOOK |
                                                     SERVICE_OPS | SERVICE_WATCHDOG,
                                            .ready_check = "queue",
                                            .ready_why = "the interruption queue is not proven readable yet",
                                            .families = controller_metric_families,
                                            .n_families = controller_n_metric_families });
        if (r != EXIT_OK)
                return r;
        svc = fe.svc;
        l = service_loop(svc);

        r = aws_creds_provider_new(
            l, &(struct aws_creds_options){ .on_refresh = on_refresh, .userdata = &creds }, &creds.provider);
        if (r < 0)
                return log_error_errno(r, "incomplete AWS credentials configuration"), EXIT_USAGE;
        (void)creds_current(&creds);

        r = controller_new(l, service_kube(svc), service_alerts(svc),
                           &(struct controller_options){ .queue_url = queue_url,
                                                         .region = region ? region : cfg->aws.region,
                                                         .sqs_endpoint = sqs_endpoint,
                                                         .asg_endpoint = asg_endpoint,
                                                         .credentials = creds_current,
                                                         .credentials_userdata = &creds,
                                                         .cfg = cfg,
                                                         .metrics = service_metrics(svc),
                                                         .lease_namespace = lease_ns,
                                                         .identity = identity,
                                                         .no_leader_election = no_election },
                           &ctl);
        if (r < 0) {
                log_error_errno(r, "cannot set up the controller for %s%s", queue_url,
                                r == -EDESTADDRREQ ? " (no region: use --region or AWS_REGION)" : "");
                aws_creds_provider_free(creds.provider);
                return r == -EINVAL || r == -EDESTADDRREQ ? EXIT_USAGE : EXIT_ERROR;
        }

        /* Every replica answers the eviction webhook, the leader and the standbys alike (the Service
         * spreads the API server's reviews over them). */
        r = frontend_admission_start(&fe, false, &webhook);
        if (r != EXIT_OK) {
                aws_creds_provider_free(creds.provider);
                return r;
        }

        o = (struct ops){ .ctl = ctl, .svc = svc, .loop = l, .httpd = service_httpd(svc) };

        log_info("spotdrain controller starting: queue %s, AWS credentials from %s", queue_url,
                 aws_creds_provider_source(creds.provider));
        loop_set_stop_handler(l, on_stop_signal, &o);
        r = controller_start(ctl);
        if (r >= 0) {
                ops_tick(&o);
                r = loop_run(l);
        } else
                log_error_errno(r, "cannot start the controller");
        o.timer = timer_cancel(o.timer);
        webhook = admission_server_free(webhook);
        service_stop(svc);
        ctl = controller_free(ctl);
        aws_creds_provider_free(creds.provider);
        aws_credentials_clear(&creds.copy);
        log_info("spotdrain controller stopped");
        return r == 0 ? EXIT_OK : EXIT_ERROR;
}
