/* controller/lifecycle: the Auto Scaling lifecycle actions of the dispatcher (controller_dispatch_ops): the
 * heartbeats that hold a terminating instance in Terminating:Wait while its drain runs, and the completion
 * once it is over (after the node's VolumeAttachments are gone), for groups of this cluster only. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/controller_internal.h"
#include "spotdrain/keys.h"

#define LC_COMPLETE_ATTEMPTS 8u /* about 3 minutes of backoff: the instance waits in Terminating:Wait */
#define LC_BACKOFF_BASE_USEC (1000ULL * 1000ULL)
#define LC_BACKOFF_MAX_USEC  (60ULL * 1000ULL * 1000ULL)

static void on_asg_done(int error, const char *message, void *userdata)
{
        if (error < 0)
                log_warning_reason(error, message, "Auto Scaling %s failed", (const char *)userdata);
}

static void lc_complete_send(struct lc_wait *lw);

static void on_complete_retry(void *userdata)
{
        struct lc_wait *lw = userdata;

        lw->retry = NULL;
        lc_complete_send(lw);
}

/* The completion's answer. A failure that may pass (throttling, a server or transport error) is retried
 * with backoff while the action can still be completed; ValidationError means Auto Scaling holds no such
 * action any more (completed already, or its hook timed out), which ends it as well. */
static void on_complete_answer(int error, const char *message, void *userdata)
{
        struct lc_wait *lw = userdata;
        struct controller *c = lw->c;

        if (error < 0 && !asg_no_such_action(message) && lw->backoff.attempt + 1 < LC_COMPLETE_ATTEMPTS &&
            timer_start_in(c->loop, backoff_next(&lw->backoff), on_complete_retry, lw, &lw->retry) >= 0) {
                c->stats.lifecycle_retries++;
                log_warning_reason(
                    error, message,
                    "Auto Scaling CompleteLifecycleAction for %s failed, retrying with backoff",
                    lw->n.instance_id);
                return;
        }
        if (error < 0 && asg_no_such_action(message))
                log_warning("Auto Scaling has no lifecycle action for %s (group %s, hook %s) any more: %s",
                            lw->n.instance_id, lw->n.asg_name, lw->n.lifecycle_hook_name, message);
        else if (error < 0) {
                c->stats.lifecycle_failures++;
                log_error_reason(
                    error, message,
                    "Auto Scaling CompleteLifecycleAction for %s failed, giving up (group %s, hook "
                    "%s): the instance waits for the hook's timeout",
                    lw->n.instance_id, lw->n.asg_name, lw->n.lifecycle_hook_name);
        } else {
                c->stats.lifecycle_completions++;
                log_notice("completed the lifecycle action of %s (group %s, hook %s) with CONTINUE",
                           lw->n.instance_id, lw->n.asg_name, lw->n.lifecycle_hook_name);
        }
        lc_wait_remove(c, lw);
}

/* lw: the completion that retries (NULL for a heartbeat, whose next period comes anyway). */
static int lifecycle_send(struct controller *c, const struct notice *n, struct lc_wait *lw)
{
        log_info("%s lifecycle action of %s (group %s, hook %s)", lw ? "completing" : "heartbeat for",
                 n->instance_id, n->asg_name, n->lifecycle_hook_name);
        return lw ? asg_complete_lifecycle(c->asg, n, "CONTINUE", on_complete_answer, lw)
                  : asg_heartbeat(c->asg, n, on_asg_done, (void *)"RecordLifecycleActionHeartbeat");
}

/* A lifecycle action waiting for the answer whether its group is this cluster's. */
struct lifecycle_wait {
        struct controller *c;
        struct notice n;
        struct lc_wait *lw; /* the completion, NULL for a heartbeat */
};

void lifecycle_foreign(const struct notice *n, const char *cluster, int owned)
{
        if (owned == 0)
                log_warning("the lifecycle action of %s is left alone: group %s does not carry the tag "
                            "%s%s (another cluster's)",
                            n->instance_id, n->asg_name, ASG_CLUSTER_TAG_PREFIX, cluster);
        else
                log_warning_errno(owned,
                                  "the lifecycle action of %s is left alone: whether group %s is "
                                  "this cluster's is not known",
                                  n->instance_id, n->asg_name);
}

static void on_owned(int owned, void *userdata)
{
        struct lifecycle_wait *w = userdata;

        if (owned == -ECANCELED) {
                /* The controller is going: its lifecycle waits are freed with it. */
                free(w);
                return;
        }
        if (owned != 1)
                lifecycle_foreign(&w->n, w->c->cfg->controller.cluster_name, owned);
        if ((owned != 1 || lifecycle_send(w->c, &w->n, w->lw) < 0) && w->lw)
                lc_wait_remove(w->c, w->lw);
        free(w);
}

/* 0 when sent or waiting for the group's ownership (a completion's lw then lives on until its answer),
 * < 0 when not sent (the caller still owns lw). */
static int op_lifecycle(struct controller *c, const struct notice *n, struct lc_wait *lw)
{
        struct lifecycle_wait *w;
        int r;

        if (!c->asg) {
                if (!c->asg_warned)
                        log_warning(
                            "no Auto Scaling client (no region): lifecycle hooks are left to time out");
                c->asg_warned = true;
                return -EOPNOTSUPP;
        }
        if (c->cfg && !strv_isempty(c->cfg->controller.asg_names)) {
                if (strv_contains(c->cfg->controller.asg_names, n->asg_name))
                        return lifecycle_send(c, n, lw);
                log_warning("the lifecycle action of %s is left alone: group %s is not one of "
                            "controller.asg_names",
                            n->instance_id, n->asg_name);
                return -EPERM;
        }
        if (!c->owners)
                return lifecycle_send(c, n, lw);
        /* Only a group tagged as this cluster's: a shared queue brings other clusters' hooks too. */
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        *w = (struct lifecycle_wait){ .c = c, .n = *n, .lw = lw };
        r = asg_owners_check(c->owners, n->asg_name, on_owned, w);
        if (r == -EINPROGRESS)
                return 0;
        free(w);
        if (r == 1)
                return lifecycle_send(c, n, lw);
        lifecycle_foreign(n, c->cfg->controller.cluster_name, r);
        return r < 0 ? r : -EPERM;
}

int op_lifecycle_heartbeat(void *userdata, const struct notice *n)
{
        return op_lifecycle(userdata, n, NULL);
}

/* controller.heartbeat_interval_seconds, kept below the hook's HeartbeatTimeout: half of it when the
 * period is 0 or not shorter. While the timeout is being read the dispatcher's period holds, and the
 * answer re-arms it. */
uint64_t op_lifecycle_interval(void *userdata, const struct notice *n)
{
        struct controller *c = userdata;
        uint64_t want = c->cfg ? c->cfg->controller.heartbeat_interval_usec : 0, timeout = 0;
        int r;

        if (!c->hooks)
                return want;
        r = asg_hooks_get(c->hooks, n->asg_name, n->lifecycle_hook_name, &timeout, NULL);
        if (r < 0) {
                if (r != -EINPROGRESS)
                        log_debug_errno(r,
                                        "controller: HeartbeatTimeout of hook %s unknown; heartbeat period "
                                        "stays",
                                        n->lifecycle_hook_name);
                return want;
        }
        return want && want < timeout ? want : timeout / 2;
}

/* What the hook grants with heartbeats: controller.heartbeat_until_seconds from the notice, within the
 * hook's GlobalTimeout; 0 while the hook is not known. */
uint64_t op_lifecycle_deadline(void *userdata, const struct notice *n)
{
        struct controller *c = userdata;
        uint64_t timeout = 0, global = 0, until = c->cfg ? c->cfg->controller.heartbeat_until_usec : 0;

        if (!c->hooks || !n->notice_time ||
            asg_hooks_get(c->hooks, n->asg_name, n->lifecycle_hook_name, &timeout, &global) < 0)
                return 0;
        return n->notice_time + (until && until < global ? until : global);
}

void on_hooks_changed(void *userdata)
{
        struct controller *c = userdata;

        if (c->dispatch)
                dispatch_lifecycle_rearm(c->dispatch);
        launch_hooks_changed(c->launch);
}

void lc_wait_remove(struct controller *c, struct lc_wait *lw)
{
        for (size_t i = 0; i < c->n_lc_waits; i++)
                if (c->lc_waits[i] == lw) {
                        c->lc_waits[i] = c->lc_waits[--c->n_lc_waits];
                        break;
                }
        volume_wait_free(lw->w);
        timer_cancel(lw->retry);
        free(lw->node);
        free(lw);
}

/* A retry: the group was found to be this cluster's before the first attempt. */
static void lc_complete_send(struct lc_wait *lw)
{
        int r = lifecycle_send(lw->c, &lw->n, lw);

        if (r < 0) {
                log_error_errno(r, "cannot complete the lifecycle action of %s", lw->n.instance_id);
                lc_wait_remove(lw->c, lw);
        }
}

/* The completion's first attempt, with the group's ownership checked. */
static void lc_complete(struct lc_wait *lw)
{
        int r = op_lifecycle(lw->c, &lw->n, lw);

        if (r < 0) {
                log_debug_errno(r, "cannot complete the lifecycle action of %s", lw->n.instance_id);
                lc_wait_remove(lw->c, lw);
        }
}

static void lc_volumes_done(struct volume_wait *w, unsigned left, bool timed_out, void *userdata)
{
        struct lc_wait *lw = userdata;

        if (timed_out)
                log_warning("%u VolumeAttachment%s of %s still there at the lifecycle action's time; "
                            "completing it anyway",
                            left, left == 1 ? "" : "s", lw->node);
        else
                log_info("the VolumeAttachments of %s are gone", lw->node);
        lw->w = volume_wait_free(lw->w);
        lc_complete(lw);
}

/* The instance terminates as soon as the action is completed: first its node's volumes are to be
 * detached (within the action's time, the notice's deadline), so that the pods' replacements elsewhere
 * can attach them at once. The completion is retried with backoff (lc_wait until its answer). */
int op_lifecycle_complete(void *userdata, const struct notice *n)
{
        struct controller *c = userdata;
        const char *node = c->dispatch ? dispatch_node_for_instance(c->dispatch, n->instance_id) : NULL;
        struct lc_wait *lw, **a;

        if (!(a = realloc(c->lc_waits, (c->n_lc_waits + 1) * sizeof(*a))))
                return -ENOMEM;
        c->lc_waits = a;
        if (!(lw = calloc(1, sizeof(*lw))) || (node && !(lw->node = strdup(node)))) {
                free(lw);
                return -ENOMEM;
        }
        *lw = (struct lc_wait){ .c = c,
                                .n = *n,
                                .node = lw->node,
                                .backoff = BACKOFF_INIT(LC_BACKOFF_BASE_USEC, LC_BACKOFF_MAX_USEC) };
        c->lc_waits[c->n_lc_waits++] = lw;
        if (node && c->kube) {
                uint64_t now = clk_now();
                int r = volume_wait_start(c->kube, node, n->deadline > now ? n->deadline : now,
                                          lc_volumes_done, lw, &lw->w);
                if (r >= 0)
                        return 0;
                log_debug_errno(r, "cannot wait for the VolumeAttachments of %s", node);
        }
        lc_complete(lw);
        return 0;
}
