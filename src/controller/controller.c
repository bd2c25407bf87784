/* controller: the controller's making and freeing, and the glue between the dispatcher and the drain engine
 * (the dispatcher's ops: drains, node actions, replacements, a held message done). Its other parts:
 * intake.c (receivers and gates), queue.c (held messages), lifecycle.c and launch_ops.c (Auto Scaling
 * lifecycle actions), leadership.c (start, leadership, resume, stop); controller_internal.h joins them.
 *
 * This is the top of queue mode, so it logs what an operator must see at info/warning: notices, malformed
 * messages (with their MessageId), the queue becoming unreadable and readable again, leadership changes. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/controller_internal.h"
#include "controller/launch.h"
#include "controller/managed.h"
#include "controller/quiet.h"
#include "controller/sns_gate.h"
#include "controller/trust.h"
#include "controller/volumes.h"
#include "spotdrain/alert.h"
#include "spotdrain/config.h"
#include "spotdrain/controller.h"
#include "spotdrain/core.h"
#include "spotdrain/elbv2.h"
#include "spotdrain/engine.h"
#include "spotdrain/keys.h"
#include "spotdrain/kube.h"
#include "spotdrain/node.h"
#include "spotdrain/notice.h"
#include "spotdrain/provision.h"
#include "spotdrain/service.h"
#include "spotdrain/sqs.h"
#include "spotdrain/surge.h"

#define DEFAULT_POLLS            10
#define DEFAULT_VISIBILITY       (60 * SEC)
#define DEFAULT_FIRST_VISIBILITY (10 * SEC) /* controller.first_visibility_seconds; see on_extend() */
#define DEFAULT_MALFORMED        (600 * SEC)
#define DEFAULT_ACCESS_CHECK     (60 * SEC)
#define DEFAULT_FAILURES         3
#define POLL_BACKOFF_BASE        (1 * SEC)
#define POLL_BACKOFF_MAX         (30 * SEC)

/* ---- drains (the engine, through the node effects) ---- */

static void on_drain_started(void *userdata, const char *node, const struct notice *n, struct drain_exec *x)
{
        log_notice("draining %s by %s (%s)", node, notice_kind_to_string(n->kind),
                   n->source[0] ? n->source : "sqs");
}

static void on_drain_ended(void *userdata, const char *node, struct drain_exec *x,
                           const struct drain_exec_result *res)
{
        struct controller *c = userdata;

        log_full(res->outcome == DRAIN_EXEC_DRAINED ? LOG_NOTICE : LOG_WARNING, res->error,
                 (const char *[]){ "node", node, NULL },
                 "drain of %s ended: %s (%u evicted, %u forced, %u left)%s%s", node,
                 drain_exec_outcome_to_string(res->outcome), res->evicted, res->forced, res->left,
                 res->message ? ": " : "", res->message ? res->message : "");
        dispatch_drain_finished(c->dispatch, node, res->outcome == DRAIN_EXEC_DRAINED);
}

/* The node as the informer has it last (its Ready condition kept: whether a rebooted or launched node is
 * Ready); its changes reach the dispatcher anyway, this covers a node Ready before the dispatcher asked. */
static void op_node_refresh(void *userdata, const char *node)
{
        struct controller *c = userdata;
        const cJSON *obj = c->nodes ? kube_informer_get(c->nodes, NULL, node) : NULL;

        if (obj && c->dispatch && dispatch_node_update(c->dispatch, obj) < 0)
                log_debug("controller: cannot hand node %s to the dispatcher", node);
}

static void op_ticket_done(void *userdata, uint64_t ticket, int error)
{
        struct controller *c = userdata;
        struct cmsg *m = cmsg_find(c, ticket);

        if (!m)
                return; /* forgotten (it slipped out of hiding, or leadership changed) */
        if (error == -ENXIO)
                m->foreign = true;
        else if (error < 0)
                m->error = error;
        if (m->pending > 0)
                m->pending--;
        if (m->pending == 0)
                cmsg_finish(c, m);
}

struct dispatch *controller_dispatch(struct controller *c)
{
        return c->dispatch;
}

struct leader *controller_leader(struct controller *c)
{
        return c->leader;
}

static const struct aws_credentials *asg_creds(void *userdata)
{
        struct controller *c = userdata;
        return c->o.credentials ? c->o.credentials(c->o.credentials_userdata) : NULL;
}

static int dup_opt(const char *v, char **ret)
{
        *ret = NULL;
        if (!v)
                return 0;
        *ret = strdup(v);
        return *ret ? 0 : -ENOMEM;
}

int controller_new(struct loop *l, struct kube_client *kube, struct alert_bus *bus,
                   const struct controller_options *o, struct controller **ret)
{
        _cleanup_(controller_freep) struct controller *c = NULL;
        const char *ns;
        int r;

        if (!l || !kube || !o || isempty(o->queue_url) || !ret)
                return -EINVAL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->loop = l;
        c->kube = kube;
        c->bus = bus;
        c->cfg = o->cfg;
        c->o = *o;
        if (c->o.polls == 0)
                c->o.polls = o->cfg && o->cfg->controller.receivers > 0
                                 ? (unsigned)o->cfg->controller.receivers
                                 : DEFAULT_POLLS;
        if (c->o.polls > MAX_POLLS)
                c->o.polls = MAX_POLLS;
        if (!c->o.failures_unreadable)
                c->o.failures_unreadable = DEFAULT_FAILURES;
        if (!c->o.visibility_usec)
                c->o.visibility_usec = DEFAULT_VISIBILITY;
        if (c->o.visibility_usec < 2 * SEC)
                c->o.visibility_usec = 2 * SEC;
        c->first_visibility_usec = o->cfg && o->cfg->controller.first_visibility_usec
                                       ? o->cfg->controller.first_visibility_usec
                                       : DEFAULT_FIRST_VISIBILITY;
        if (c->first_visibility_usec > c->o.visibility_usec)
                c->first_visibility_usec = c->o.visibility_usec;
        if (c->first_visibility_usec < 2 * SEC)
                c->first_visibility_usec = 2 * SEC;
        if (!c->o.malformed_visibility_usec)
                c->o.malformed_visibility_usec = DEFAULT_MALFORMED;
        if (!c->o.access_check_usec)
                c->o.access_check_usec = DEFAULT_ACCESS_CHECK;
        c->backoff = BACKOFF_INIT(POLL_BACKOFF_BASE, POLL_BACKOFF_MAX);
        for (unsigned i = 0; i < MAX_POLLS; i++)
                c->polls[i].c = c;

        ns = o->lease_namespace ? o->lease_namespace : getenv("POD_NAMESPACE");
        /* Where the Lease and the kept estimates are, when nobody said: a second controller started
         * elsewhere without POD_NAMESPACE would hold a Lease of its own and drain beside this one. */
        if (isempty(ns))
                log_warning(
                    "POD_NAMESPACE is not set: the Lease spotdrain-controller and the estimates are kept "
                    "in namespace default; set POD_NAMESPACE from the downward API "
                    "(metadata.namespace) or give --lease-namespace");
        if (dup_opt(o->queue_url, &c->queue_url) < 0 ||
            dup_opt(o->region ? o->region
                    : o->cfg  ? o->cfg->aws.region
                              : NULL,
                    &c->region) < 0 ||
            dup_opt(o->sqs_endpoint, &c->sqs_endpoint) < 0 ||
            dup_opt(o->asg_endpoint, &c->asg_endpoint) < 0 ||
            dup_opt(isempty(ns) ? "default" : ns, &c->lease_namespace) < 0 ||
            dup_opt(o->identity, &c->identity) < 0)
                return -ENOMEM;
        c->o.queue_url = c->queue_url;
        c->o.region = c->region;
        c->o.sqs_endpoint = c->sqs_endpoint;
        c->o.asg_endpoint = c->asg_endpoint;
        c->o.lease_namespace = c->lease_namespace;
        c->o.identity = c->identity;

        r = sqs_client_new(l,
                           &(struct sqs_config){ .queue_url = c->queue_url,
                                                 .endpoint = c->sqs_endpoint,
                                                 .region = c->region,
                                                 .credentials = o->credentials,
                                                 .credentials_userdata = o->credentials_userdata },
                           &c->sqs);
        if (r < 0)
                return r;
        if (!c->region && free_and_strdup(&c->region, sqs_client_region(c->sqs)) < 0)
                return -ENOMEM;
        c->o.region = c->region;
        if (trust_queue_account(c->queue_url, c->trust.queue_account) < 0)
                log_warning(
                    "the queue URL %s names no account: only notices from controller.allowed_accounts "
                    "are acted on",
                    c->queue_url);
        c->trust.allowed_accounts = o->cfg ? o->cfg->controller.allowed_accounts : NULL;
        c->trust.region = c->region;
        if (o->cfg && o->cfg->controller.verify_sns_signature) {
                r = sns_gate_new(l, c->region, &c->sns);
                if (r < 0)
                        return log_error_errno(
                            r, "controller.verify_sns_signature: no SNS endpoint for region %s",
                            c->region ? c->region : "(none)");
        }
        r = asg_client_new(l, c->asg_endpoint, c->region, asg_creds, c, &c->asg);
        if (r < 0)
                log_debug_errno(r, "controller: no Auto Scaling client");
        if (o->cfg && o->cfg->drain.target_groups &&
            (r = elbv2_client_new(l, o->elbv2_endpoint, c->region, asg_creds, c, &c->elbv2)) < 0)
                log_warning_errno(r, "controller: no ELBv2 client: no pod waits for its target group");
        if (o->cfg && !isempty(o->cfg->controller.managed_tag)) {
                r = ec2_client_new(l,
                                   &(struct ec2_config){ .region = c->region,
                                                         .credentials = o->credentials,
                                                         .userdata = o->credentials_userdata },
                                   &c->ec2);
                if (r < 0)
                        return log_error_errno(r, "controller.managed_tag: no EC2 client");
                r = managed_gate_new(l, c->ec2, o->cfg->controller.managed_tag, &c->managed);
                if (r < 0)
                        return log_error_errno(r, "controller.managed_tag %s: not KEY or KEY=VALUE",
                                               o->cfg->controller.managed_tag);
        }
        if (c->asg && o->cfg && !isempty(o->cfg->controller.cluster_name) &&
            strv_isempty(o->cfg->controller.asg_names) &&
            (r = asg_owners_new(l, c->asg, o->cfg->controller.cluster_name, &c->owners)) < 0)
                return r;
        if (c->asg && (r = asg_hooks_new(l, c->asg, on_hooks_changed, c, &c->hooks)) < 0)
                return r;
        if (o->cfg) {
                _cleanup_free_ char *error = NULL;
                struct prov_frontend_options po = { .region = c->region,
                                                    .credentials = o->credentials,
                                                    .credentials_userdata = o->credentials_userdata };
                r = prov_frontend_new(l, kube, bus, o->cfg, &po, &c->prov, &error);
                if (r < 0) {
                        log_error_reason(r, error, "provisioning: cannot set it up");
                        return r;
                }
        }

        /* The configuration's rebalance revert and maintenance lead, unless the caller chose. */
        struct dispatch_options dopt = o->dispatch;
        dispatch_options_from_config(o->cfg, &dopt);
        if (o->cfg && !dopt.heartbeat_usec)
                dopt.heartbeat_usec = o->cfg->controller.heartbeat_interval_usec;
        if (o->cfg && !dopt.heartbeat_until_usec)
                dopt.heartbeat_until_usec = o->cfg->controller.heartbeat_until_usec;
        /* One process drains every node: one ledger (made with the first drain; a follower never needs it)
         * for all its drains, planned with the kept stop times (node_effects_drainer(), once learnt). */
        struct node_drainer nd = { .kube = c->kube,
                                   .bus = c->bus,
                                   .cfg = c->cfg,
                                   .metrics = c->o.metrics,
                                   .prov = c->prov,
                                   .shared_ledger = &c->ledger,
                                   .elbv2 = c->elbv2 };
        struct node_effects_hooks hooks = { .drain_started = on_drain_started,
                                            .drain_ended = on_drain_ended,
                                            .ops = { .node_refresh = op_node_refresh,
                                                     .notice_seen = op_notice_seen,
                                                     .lifecycle_heartbeat = op_lifecycle_heartbeat,
                                                     .lifecycle_complete = op_lifecycle_complete,
                                                     .lifecycle_interval = op_lifecycle_interval,
                                                     .lifecycle_deadline = op_lifecycle_deadline,
                                                     .lifecycle_launch = op_lifecycle_launch,
                                                     .ticket_done = op_ticket_done },
                                            .userdata = c };
        struct dispatch_ops ops;
        r = node_effects_new(l, &nd, &hooks, &c->effects);
        if (r < 0)
                return r;
        node_effects_dispatch_ops(c->effects, &ops);
        r = dispatch_new(l, &dopt, &ops, c->effects, &c->dispatch);
        if (r < 0)
                return r;
        if (c->asg) {
                static const struct launch_ops lops = { .owned = launch_op_owned,
                                                        .call = launch_op_call,
                                                        .hook = launch_op_hook,
                                                        .node_of = launch_op_node_of,
                                                        .finished = launch_op_finished,
                                                        .ticket_done = op_ticket_done };
                struct launch_options lo = {
                        .ready_timeout_usec = o->cfg ? o->cfg->controller.launch_ready_timeout_usec : 0,
                        .heartbeat_usec = o->cfg ? o->cfg->controller.heartbeat_interval_usec : 0,
                };
                r = launch_new(l, &lo, &lops, c, &c->launch);
                if (r < 0)
                        return r;
        }
        if (!o->no_leader_election) {
                struct leader_options lo = o->leader;
                lo.namespace = c->lease_namespace;
                lo.identity = c->identity;
                lo.started = on_leader_started;
                lo.stopped = on_leader_stopped;
                lo.userdata = c;
                r = leader_new(kube, &lo, &c->leader);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

struct controller *controller_free(struct controller *c)
{
        if (!c)
                return NULL;
        polls_cancel(c);
        timer_cancel(c->access_timer);
        timer_cancel(c->quiet_timer);
        sqs_op_cancel(c->access_op);
        sqs_op_cancel(c->delete_op);
        timer_cancel(c->delete_timer);
        timer_cancel(c->stop_timer);
        kube_informer_stop(c->nodes);
        leader_free(c->leader);
        while (c->n_msgs > 0)
                cmsg_remove(c, c->msgs[c->n_msgs - 1]);
        free(c->msgs);
        /* dispatch first: it may call drain_stop; then the drains themselves. */
        if (c->dispatch)
                dispatch_reset(c->dispatch);
        dispatch_free(c->dispatch);
        c->launch = launch_free(c->launch);
        sns_gate_free(c->sns);
        while (c->n_lc_waits > 0)
                lc_wait_remove(c, c->lc_waits[c->n_lc_waits - 1]);
        free(c->lc_waits);
        managed_gate_free(c->managed);
        ec2_client_free(c->ec2);
        c->effects = node_effects_free(c->effects);
        drain_ledger_free(c->ledger);
        elbv2_client_free(c->elbv2); /* after the drains that borrowed it */
        drain_estimates_free(c->estimates);
        drain_surge_sweep_free(c->surge_sweep);
        for (size_t i = 0; i < c->n_deletes; i++)
                pending_delete_clear(&c->deletes[i]);
        free(c->deletes);
        for (size_t i = 0; i < c->n_hides; i++)
                free(c->hides[i].handle);
        free(c->hides);
        free(c->seqs);
        for (size_t i = 0; i < c->n_deleting; i++)
                pending_delete_clear(&c->deleting[i]);
        free(c->deleting);
        prov_frontend_free(c->prov);
        asg_owners_free(c->owners);
        asg_hooks_free(c->hooks);
        asg_client_free(c->asg);
        sqs_client_free(c->sqs);
        free(c->queue_url);
        free(c->region);
        free(c->sqs_endpoint);
        free(c->asg_endpoint);
        free(c->lease_namespace);
        free(c->identity);
        free(c);
        return NULL;
}
