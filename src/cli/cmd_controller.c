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

/* ---- metrics and readiness (ops module): the controller's totals turned into registry deltas ---- */

#define M_RECEIVES         "spotdrain_sqs_receives_total"
#define M_DELETED          "spotdrain_sqs_messages_deleted_total"
#define M_DELETE_FAILURES  "spotdrain_sqs_delete_failures_total"
#define M_EXTENSIONS       "spotdrain_sqs_visibility_extensions_total"
#define M_MALFORMED        "spotdrain_sqs_messages_malformed_total"
#define M_REJECTED         "spotdrain_sqs_messages_rejected_total"
#define M_IN_FLIGHT        "spotdrain_sqs_messages_in_flight"
#define M_UNREADABLE_TOTAL "spotdrain_queue_unreadable_total"
#define M_UNREADABLE       "spotdrain_queue_unreadable"
#define M_DUPLICATES       "spotdrain_notices_duplicate_total"
#define M_IGNORED          "spotdrain_notices_ignored_total"
#define M_SUPERSEDED       "spotdrain_notices_superseded_total"
#define M_DRAINS_STARTED   "spotdrain_drains_started_total"
#define M_DRAINS_RESUMED   "spotdrain_drains_resumed_total"
#define M_UNKNOWN_DROPPED  "spotdrain_unknown_instances_dropped_total"
#define M_DRAINING         "spotdrain_drains_in_progress"
#define M_LAUNCH_HOOKS     "spotdrain_launch_hooks_total"
#define M_LAUNCH_WAITING   "spotdrain_launch_hooks_waiting"

static const struct metric_family_def controller_families[] = {
        { M_RECEIVES, METRIC_COUNTER, "SQS ReceiveMessage calls answered.", {}, NULL, 0 },
        { M_DELETED, METRIC_COUNTER, "SQS messages deleted.", {}, NULL, 0 },
        { M_DELETE_FAILURES, METRIC_COUNTER, "SQS messages that could not be deleted.", {}, NULL, 0 },
        { M_EXTENSIONS,
          METRIC_COUNTER,
          "Visibility extensions of messages held during drains.",
          {},
          NULL,
          0 },
        { M_MALFORMED,
          METRIC_COUNTER,
          "Messages left in the queue unread, by reason: malformed (not JSON, a field missing or "
          "wrong), unrecognized (not a notice spotdrain knows), too-large, too-deep.",
          { "reason" },
          NULL,
          0 },
        { M_REJECTED,
          METRIC_COUNTER,
          "Well-formed messages left in the queue without acting on them, by reason: no-account, "
          "foreign-account, foreign-region, bad-signature (docs/security.md), no-node (not this cluster's), "
          "unmanaged (without controller.managed_tag).",
          { "reason" },
          NULL,
          0 },
        { M_IN_FLIGHT, METRIC_GAUGE, "Messages held while their drains run.", {}, NULL, 0 },
        { M_UNREADABLE_TOTAL, METRIC_COUNTER, "Times the queue turned unreadable.", {}, NULL, 0 },
        { M_UNREADABLE,
          METRIC_GAUGE,
          "1 while the queue is unreadable or not proven readable.",
          {},
          NULL,
          0 },
        { M_DUPLICATES, METRIC_COUNTER, "Duplicate notices absorbed.", {}, NULL, 0 },
        { M_SUPERSEDED,
          METRIC_COUNTER,
          "Notices not acted on because a later one for the same instance was handled first.",
          {},
          NULL,
          0 },
        { M_IGNORED,
          METRIC_COUNTER,
          "Notices whose kind's action is ignore (notices.KIND.action).",
          {},
          NULL,
          0 },
        { M_DRAINS_STARTED, METRIC_COUNTER, "Drains started (restarts included).", {}, NULL, 0 },
        { M_DRAINS_RESUMED, METRIC_COUNTER, "Drains carried on from a node annotation.", {}, NULL, 0 },
        { M_UNKNOWN_DROPPED,
          METRIC_COUNTER,
          "Notices whose instance never turned up as a node.",
          {},
          NULL,
          0 },
        { M_DRAINING, METRIC_GAUGE, "Drains under way.", {}, NULL, 0 },
        { M_LAUNCH_HOOKS,
          METRIC_COUNTER,
          "Auto Scaling launch lifecycle actions ended, by result: continue (the node was Ready), abandon "
          "(not Ready within controller.launch_ready_timeout_seconds), foreign (not this cluster's: left "
          "alone), gone (Auto Scaling held it no more), failed (its message comes back).",
          { "result" },
          NULL,
          0 },
        { M_LAUNCH_WAITING,
          METRIC_GAUGE,
          "Launch lifecycle actions waiting for their node to be Ready.",
          {},
          NULL,
          0 },
};

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

static void add_delta(struct metrics *m, const char *name, uint64_t now, uint64_t before, const char *label)
{
        if (now > before)
                (void)metrics_counter_add(m, name, (double)(now - before), label, NULL);
}

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
        struct controller_stats st;
        struct metrics *m = service_metrics(o->svc);
        bool ready = controller_ready(o->ctl);

        o->timer = NULL;
        controller_stats(o->ctl, &st);
        add_delta(m, M_RECEIVES, st.receives, o->last.receives, NULL);
        add_delta(m, M_DELETED, st.deleted, o->last.deleted, NULL);
        add_delta(m, M_DELETE_FAILURES, st.delete_failures, o->last.delete_failures, NULL);
        add_delta(m, M_EXTENSIONS, st.visibility_extends, o->last.visibility_extends, NULL);
        for (int k = 0; k < _CONTROLLER_MALFORMED_MAX; k++)
                add_delta(m, M_MALFORMED, st.malformed[k], o->last.malformed[k],
                          controller_malformed_label((enum controller_malformed)k));
        for (int k = CONTROLLER_REJECT_NO_ACCOUNT; k < _CONTROLLER_REJECT_MAX; k++)
                add_delta(m, M_REJECTED, st.rejected[k], o->last.rejected[k],
                          controller_reject_label((enum controller_reject)k));
        add_delta(m, M_UNREADABLE_TOTAL, st.unreadable, o->last.unreadable, NULL);
        add_delta(m, M_DUPLICATES, st.dispatch.duplicates, o->last.dispatch.duplicates, NULL);
        add_delta(m, M_IGNORED, st.dispatch.ignored, o->last.dispatch.ignored, NULL);
        add_delta(m, M_SUPERSEDED, st.superseded, o->last.superseded, NULL);
        add_delta(m, M_DRAINS_STARTED, st.dispatch.drains, o->last.dispatch.drains, NULL);
        add_delta(m, M_DRAINS_RESUMED, st.dispatch.resumed, o->last.dispatch.resumed, NULL);
        add_delta(m, M_UNKNOWN_DROPPED, st.dispatch.unknown_dropped, o->last.dispatch.unknown_dropped, NULL);
        add_delta(m, METRIC_QUEUE_RECEIVE_ERRORS, st.unreadable_failures, o->last.unreadable_failures,
                  "unreadable");
        add_delta(m, METRIC_QUEUE_RECEIVE_ERRORS, st.receive_failures - st.unreadable_failures,
                  o->last.receive_failures - o->last.unreadable_failures, "other");
        add_delta(m, METRIC_MESSAGES, st.messages, o->last.messages, "received");
        for (int k = 0; k < _NOTICE_KIND_MAX; k++)
                if (st.notice_counts[k] > o->last.notice_counts[k])
                        (void)metrics_counter_add(m, METRIC_NOTICES_RECEIVED,
                                                  (double)(st.notice_counts[k] - o->last.notice_counts[k]),
                                                  notice_kind_to_string((enum notice_kind)k), "sqs", NULL);
        (void)metrics_gauge_set(m, M_IN_FLIGHT, st.in_flight, NULL);
        (void)metrics_gauge_set(m, M_DRAINING, st.dispatch.draining, NULL);
        for (unsigned k = 0; k < CONTROLLER_LAUNCH_RESULTS; k++)
                add_delta(m, M_LAUNCH_HOOKS, st.launch_results[k], o->last.launch_results[k],
                          controller_launch_result_label(k));
        (void)metrics_gauge_set(m, M_LAUNCH_WAITING, st.launch_waiting, NULL);
        (void)metrics_gauge_set(m, M_UNREADABLE, ready ? 0 : 1, NULL);
        (void)metrics_gauge_set(m, METRIC_LEADER, st.leader ? 1 : 0, NULL);
        (void)httpd_set_ready(o->httpd, "queue", ready,
                              ready ? NULL : "the interruption queue is not readable");
        api_check(o);
        if (ready && !o->notified) {
                o->notified = true;
                (void)ops_notify_ready("controller running: queue readable");
        }
        o->last = st;
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
                                            .families = controller_families,
                                            .n_families = ARRAY_SIZE(controller_families) });
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
