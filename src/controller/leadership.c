/* controller/leadership: what the controller does as it starts, gains and loses leadership and stops: the
 * node informer, the receivers started as leader and stopped when it ends (their messages shown again), the
 * drains of cordoned nodes resumed from their records, and the readiness and stats it reports. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/controller_internal.h"
#include "spotdrain/keys.h"

#define STOP_BOUND_USEC (5 * SEC)
#define STOP_CHECK_USEC (20 * 1000)

/* ---- resume: drains recorded on nodes by an earlier leader ---- */

static void resume_drains(struct controller *c)
{
        c->resume_pending = false;
        for (size_t i = 0; i < kube_informer_size(c->nodes); i++) {
                const cJSON *node = kube_informer_at(c->nodes, i);
                const char *name = kube_object_str(node, "metadata.name");
                int r = dispatch_resume_recorded(c->dispatch, node);

                if (r >= 0)
                        log_notice("resuming the drain of %s recorded by an earlier leader", name);
                else if (r == -EBADMSG)
                        log_warning("node %s has an unreadable %s annotation, ignoring", name,
                                    SPOTDRAIN_ANNOTATION_DRAIN);
                else if (r != -ETIME && r != -EALREADY && r != -ENOENT && r != -EPERM) /* -EPERM: said */
                        log_warning_errno(r, "cannot resume the drain of %s", name);
        }
        dispatch_stats(c->dispatch, &c->stats.dispatch);
        /* After the resumes: a record whose drain carries on is that drain's to restore. */
        int r = c->surge_sweep ? 0 : drain_surge_sweep_new(c->kube, NULL, &c->surge_sweep);
        if (r < 0)
                log_warning_errno(r, "cannot look for deployments left surged, ignoring");
}

/* ---- node informer ---- */

static void node_added(void *userdata, const cJSON *obj)
{
        struct controller *c = userdata;
        if (dispatch_node_update(c->dispatch, obj) < 0)
                log_debug("controller: cannot index node %s", kube_object_str(obj, "metadata.name"));
        launch_node_update(c->launch, obj);
}

static void node_modified(void *userdata, const cJSON *old_obj, const cJSON *obj)
{
        node_added(userdata, obj);
}

static void node_deleted(void *userdata, const cJSON *obj)
{
        struct controller *c = userdata;
        dispatch_node_delete(c->dispatch, obj);
}

static void nodes_synced(void *userdata)
{
        struct controller *c = userdata;
        launch_nodes_synced(c->launch);
        if (c->active && c->resume_pending)
                resume_drains(c);
}

/* ---- activity (leadership) ---- */

static void activate(struct controller *c)
{
        if (c->active)
                return;
        c->active = true;
        c->stats.leader = true;
        c->resume_pending = true;
        if (kube_informer_synced(c->nodes))
                resume_drains(c);
        log_info("receiving from %s", c->queue_url);
        if (c->queue_ok)
                poll_all(c);
}

/* Stops receiving and hands what is under way over: held messages visible again, drains stopped (their
 * node annotation lets the next leader carry them on). */
static void deactivate(struct controller *c)
{
        if (!c->active)
                return;
        c->active = false;
        c->stats.leader = false;
        polls_cancel(c);
        dispatch_reset(c->dispatch);
        launch_reset(c->launch); /* their messages come back to the next leader */
        c->surge_sweep = drain_surge_sweep_free(c->surge_sweep); /* the next leader sweeps again */
        while (c->n_msgs > 0) {
                struct cmsg *m = c->msgs[c->n_msgs - 1];
                set_visibility(c, m->handle, 0);
                cmsg_remove(c, m);
        }
        c->stats.in_flight = 0;
        access_schedule(c, c->o.access_check_usec);
}

void on_leader_started(void *userdata)
{
        activate(userdata);
}

void on_leader_stopped(void *userdata)
{
        deactivate(userdata);
}

/* ---- life cycle ---- */

int controller_start(struct controller *c)
{
        struct kube_informer_ops ops = { .added = node_added,
                                         .modified = node_modified,
                                         .deleted = node_deleted,
                                         .synced = nodes_synced };
        int r;

        if (c->started)
                return -EALREADY;
        c->started = true;
        /* What the controller reads of a Node is what kube_node_parse() reads (providerID for the notices'
         * instances, the drain record annotation, its Ready condition for a launch action and a reboot's
         * end). */
        r = kube_informer_start(c->kube,
                                &(struct kube_watch_options){ .path = "/api/v1/nodes",
                                                              .keep_fields = kube_node_fields,
                                                              .patient = true },
                                &ops, c, &c->nodes);
        if (r < 0)
                return r;
        /* Learnt from the whole cluster, leader or not: a follower that takes over knows them already. */
        if (c->cfg && !isempty(c->cfg->drain.estimates_configmap)) {
                struct drain_estimates_options eo = {
                        .namespace = c->lease_namespace,
                        .name = c->cfg->drain.estimates_configmap,
                        .keep = true,
                        .expected_shutdown_fraction = c->cfg->drain.expected_shutdown_fraction,
                };
                r = drain_estimates_start(c->kube, &eo, &c->estimates);
                if (r < 0)
                        log_warning_errno(r, "controller: cannot learn stop and startup times, ignoring");
                else if (c->effects)
                        node_effects_drainer(c->effects)->shared_estimates = c->estimates;
        }
        access_schedule(c, 0);
        if (c->o.no_leader_election) {
                activate(c);
                return 0;
        }
        return leader_start(c->leader);
}

static void stop_finish(struct controller *c)
{
        void (*cb)(void *) = c->stop_done;
        c->stop_done = NULL;
        if (cb)
                cb(c->stop_userdata);
}

static void on_stop_check(void *userdata)
{
        struct controller *c = userdata;

        c->stop_timer = NULL;
        if ((c->ops_in_flight == 0 && c->n_hides == 0 && !c->delete_op && c->n_deletes == 0 &&
             (!c->leader || leader_released(c->leader))) ||
            clk_now() - c->stop_started > STOP_BOUND_USEC * (clk_scale() > 1 ? clk_scale() : 1))
                return stop_finish(c);
        if (timer_start_in(c->loop, STOP_CHECK_USEC, on_stop_check, c, &c->stop_timer) < 0)
                stop_finish(c);
}

void controller_stop(struct controller *c, void (*done_cb)(void *userdata), void *userdata)
{
        c->stop_done = done_cb;
        c->stop_userdata = userdata;
        c->stop_started = clk_now();
        deactivate(c);
        (void)quiet_flush(&c->quiet, clk_now(), true, quiet_told, c);
        c->access_timer = timer_cancel(c->access_timer);
        c->access_op = sqs_op_cancel(c->access_op);
        if (c->leader)
                leader_stop(c->leader);
        c->nodes = kube_informer_stop(c->nodes);
        if (timer_start_in(c->loop, 0, on_stop_check, c, &c->stop_timer) < 0)
                stop_finish(c);
}

bool controller_ready(const struct controller *c)
{
        return c && c->queue_ok && !c->unreadable;
}

bool controller_is_leader(const struct controller *c)
{
        return c->active;
}

void controller_stats(const struct controller *c, struct controller_stats *ret)
{
        *ret = c->stats;
        dispatch_stats(c->dispatch, &ret->dispatch);
        ret->leader = c->active;
        ret->receiving = false;
        for (unsigned i = 0; i < MAX_POLLS; i++)
                ret->receiving = ret->receiving || c->polls[i].op;
        ret->queue_ok = controller_ready(c);
        ret->in_flight = (unsigned)c->n_msgs;
        ret->launch_waiting = 0;
        if (c->launch) {
                struct launch_stats ls;
                launch_stats(c->launch, &ls);
                ret->launch_waiting = ls.waiting;
        }
}
