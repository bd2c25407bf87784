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

static void on_asg_done(int error, const char *message, void *userdata)
{
        if (error < 0)
                log_warning_reason(error, message, "Auto Scaling %s failed", (const char *)userdata);
}

static int lifecycle_send(struct controller *c, const struct notice *n, bool complete)
{
        log_info("%s lifecycle action of %s (group %s, hook %s)", complete ? "completing" : "heartbeat for",
                 n->instance_id, n->asg_name, n->lifecycle_hook_name);
        return complete ? asg_complete_lifecycle(c->asg, n, "CONTINUE", on_asg_done,
                                                 (void *)"CompleteLifecycleAction")
                        : asg_heartbeat(c->asg, n, on_asg_done, (void *)"RecordLifecycleActionHeartbeat");
}

/* A lifecycle action waiting for the answer whether its group is this cluster's. */
struct lifecycle_wait {
        struct controller *c;
        struct notice n;
        bool complete;
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

        if (owned == 1)
                (void)lifecycle_send(w->c, &w->n, w->complete);
        else if (owned != -ECANCELED)
                lifecycle_foreign(&w->n, w->c->cfg->controller.cluster_name, owned);
        free(w);
}

static int op_lifecycle(struct controller *c, const struct notice *n, bool complete)
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
                        return lifecycle_send(c, n, complete);
                log_warning("the lifecycle action of %s is left alone: group %s is not one of "
                            "controller.asg_names",
                            n->instance_id, n->asg_name);
                return -EPERM;
        }
        if (!c->owners)
                return lifecycle_send(c, n, complete);
        /* Only a group tagged as this cluster's: a shared queue brings other clusters' hooks too. */
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        *w = (struct lifecycle_wait){ .c = c, .n = *n, .complete = complete };
        r = asg_owners_check(c->owners, n->asg_name, on_owned, w);
        if (r == -EINPROGRESS)
                return 0;
        free(w);
        if (r == 1)
                return lifecycle_send(c, n, complete);
        lifecycle_foreign(n, c->cfg->controller.cluster_name, r);
        return r < 0 ? r : -EPERM;
}

int op_lifecycle_heartbeat(void *userdata, const struct notice *n)
{
        return op_lifecycle(userdata, n, false);
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
        free(lw->node);
        free(lw);
}

static void lc_volumes_done(struct volume_wait *w, unsigned left, bool timed_out, void *userdata)
{
        struct lc_wait *lw = userdata;
        struct controller *c = lw->c;
        if (timed_out)
                log_warning("%u VolumeAttachment%s of %s still there at the lifecycle action's time; "
                            "completing it anyway",
                            left, left == 1 ? "" : "s", lw->node);
        else
                log_info("the VolumeAttachments of %s are gone", lw->node);
        if (op_lifecycle(c, &lw->n, true) < 0)
                log_debug("cannot complete the lifecycle action of %s", lw->n.instance_id);
        lc_wait_remove(c, lw);
}

/* The instance terminates as soon as the action is completed: first its node's volumes are to be
 * detached (within the action's time, the notice's deadline), so that the pods' replacements elsewhere
 * can attach them at once. */
int op_lifecycle_complete(void *userdata, const struct notice *n)
{
        struct controller *c = userdata;
        const char *node = c->dispatch ? dispatch_node_for_instance(c->dispatch, n->instance_id) : NULL;
        struct lc_wait *lw, **a;

        if (!node || !c->kube)
                return op_lifecycle(c, n, true);
        if (!(a = realloc(c->lc_waits, (c->n_lc_waits + 1) * sizeof(*a))))
                return -ENOMEM;
        c->lc_waits = a;
        if (!(lw = calloc(1, sizeof(*lw))) || !(lw->node = strdup(node))) {
                free(lw);
                return op_lifecycle(c, n, true);
        }
        lw->c = c;
        lw->n = *n;
        uint64_t now = clk_now();
        int r = volume_wait_start(c->kube, node, n->deadline > now ? n->deadline : now, lc_volumes_done, lw,
                                  &lw->w);
        if (r < 0) {
                free(lw->node);
                free(lw);
                return op_lifecycle(c, n, true);
        }
        c->lc_waits[c->n_lc_waits++] = lw;
        return 0;
}
