/* controller/launch_ops: the glue between the dispatcher's launch lifecycle actions and the launch waits
 * (launch.h): whether the group is this cluster's, the Auto Scaling calls, the node of an instance, and the
 * result of each wait. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/controller_internal.h"
#include "spotdrain/keys.h"

/* ---- launch lifecycle actions (controller/launch.h) ---- */

const char *controller_launch_result_label(unsigned i)
{
        _Static_assert(CONTROLLER_LAUNCH_RESULTS == _LAUNCH_RESULT_MAX, "one label per launch result");
        return launch_result_label((enum launch_result)i);
}

struct launch_owner {
        struct controller *c;
        uint64_t id;
        struct notice n;
};

static void on_launch_owned(int owned, void *userdata)
{
        struct launch_owner *o = userdata;

        if (owned != -ECANCELED) {
                if (owned != 1)
                        lifecycle_foreign(&o->n, o->c->cfg->controller.cluster_name, owned);
                launch_owned_answer(o->c->launch, o->id, owned);
        }
        free(o);
}

/* The same trust as a terminate hook's: controller.asg_names, else the group's cluster tag. */
int launch_op_owned(void *userdata, const struct notice *n, uint64_t id)
{
        struct controller *c = userdata;
        struct launch_owner *o;
        int r;

        if (c->cfg && !strv_isempty(c->cfg->controller.asg_names)) {
                if (strv_contains(c->cfg->controller.asg_names, n->asg_name))
                        return 1;
                log_warning("the launch lifecycle action of %s is left alone: group %s is not one of "
                            "controller.asg_names",
                            n->instance_id, n->asg_name);
                return 0;
        }
        if (!c->owners)
                return -ENODATA;
        if (!(o = calloc(1, sizeof(*o))))
                return -ENOMEM;
        *o = (struct launch_owner){ .c = c, .id = id, .n = *n };
        r = asg_owners_check(c->owners, n->asg_name, on_launch_owned, o);
        if (r == -EINPROGRESS)
                return r;
        free(o);
        if (r != 1)
                lifecycle_foreign(n, c->cfg->controller.cluster_name, r);
        return r;
}

struct launch_call {
        struct controller *c;
        uint64_t id;
};

static void on_launch_call(const struct aws_result *res, const char *body, size_t len, void *userdata)
{
        struct launch_call *call = userdata;
        _cleanup_free_ char *message = NULL;

        if (res->cls != AWS_ERR_CANCELLED) {
                /* Auto Scaling's answer for an action it holds no more (completed, or timed out). */
                bool gone = res->error < 0 && streq(res->code, "ValidationError") &&
                            strstr(res->message, "No active Lifecycle Action");
                if (res->error < 0)
                        message = res->code[0] ? strprintf("%s: %s", res->code, res->message)
                                               : strdup(res->message);
                launch_call_answer(call->c->launch, call->id, res->error,
                                   aws_error_class_retryable(res->cls), gone, message);
        }
        free(call);
}

int launch_op_call(void *userdata, const struct notice *n, const char *result, uint64_t id)
{
        struct controller *c = userdata;
        _cleanup_free_ char *body = NULL;
        struct launch_call *call;
        int r;

        r = asg_lifecycle_body(n, result ? "CompleteLifecycleAction" : "RecordLifecycleActionHeartbeat",
                               result, &body);
        if (r < 0)
                return r;
        if (!(call = calloc(1, sizeof(*call))))
                return -ENOMEM;
        *call = (struct launch_call){ .c = c, .id = id };
        r = asg_call(c->asg, body, on_launch_call, call);
        if (r < 0)
                free(call);
        return r;
}

int launch_op_hook(void *userdata, const struct notice *n, uint64_t *ret_heartbeat_usec,
                   uint64_t *ret_global_usec)
{
        struct controller *c = userdata;
        return c->hooks ? asg_hooks_get(c->hooks, n->asg_name, n->lifecycle_hook_name, ret_heartbeat_usec,
                                        ret_global_usec)
                        : -EOPNOTSUPP;
}

const cJSON *launch_op_node_of(void *userdata, const char *instance_id)
{
        struct controller *c = userdata;
        const char *node = c->dispatch ? dispatch_node_for_instance(c->dispatch, instance_id) : NULL;
        return node && c->nodes ? kube_informer_get(c->nodes, NULL, node) : NULL;
}

void launch_op_finished(void *userdata, const struct notice *n, const char *node, enum launch_result r,
                        const char *why)
{
        struct controller *c = userdata;

        c->stats.launch_results[r]++;
        if (r == LAUNCH_CONTINUED)
                log_notice("launch lifecycle action of %s completed with CONTINUE: %s", n->instance_id, why);
        if (r != LAUNCH_ABANDONED || !c->bus)
                return;
        (void)alert_emit(
            c->bus, ALERT_LAUNCH_ABANDONED, node,
            (const char *[]){ "instance_id", n->instance_id, "group", n->asg_name, "hook",
                              n->lifecycle_hook_name, NULL },
            "launch lifecycle action of %s (group %s) completed with ABANDON: %s%s%s; Auto Scaling "
            "terminates the instance",
            n->instance_id, n->asg_name, why, node ? ", node " : "", node ? node : "");
}

int op_lifecycle_launch(void *userdata, const struct notice *n, uint64_t ticket)
{
        struct controller *c = userdata;
        int r;

        if (!c->launch) {
                if (!c->asg_warned)
                        log_warning(
                            "no Auto Scaling client (no region): lifecycle hooks are left to time out");
                c->asg_warned = true;
                return DISPATCH_DONE;
        }
        r = launch_submit(c->launch, n, ticket);
        return r < 0 ? r : DISPATCH_PENDING;
}
