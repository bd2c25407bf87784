/* The executor's informers: the pods of its node added, changed and deleted (a stop observed for the
 * estimates, a ghost kept in the ledger, a pod gone with its node), the informers synced, and the ledger's
 * and the surge's wake-ups; each asks for act() (exec_kick). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "drain/executor_internal.h"

/* ---- informers ---- */

/* A change of this node's pods: the joint plan is to be made anew, and acted on. */
void exec_pods_changed(struct drain_exec *x)
{
        drain_ledger_touch(x->ledger);
        exec_kick(x);
}

void exec_surge_changed(void *userdata)
{
        exec_pods_changed(userdata);
}

void exec_pods_added(void *userdata, const cJSON *obj)
{
        exec_pods_changed(userdata);
}

void exec_pods_modified(void *userdata, const cJSON *old_obj, const cJSON *obj)
{
        exec_capture_after_stop(userdata, obj);
        exec_pods_changed(userdata);
}

/* A pod that was deleting left: keep its last state while its replacement is on the way (see ghost). */
static void keep_ghost(struct drain_exec *x, struct xpod *p, const cJSON *obj, const struct kube_pod *kp,
                       const char *key)
{
        if (drain_pod_memo_update(&p->ghost, obj) < 0) {
                log_debug("out of memory keeping the last state of %s/%s", p->namespace, p->name);
                return;
        }
        p->gone_at = clk_now();
        p->ghost_until = drain_ledger_ghost_until(x->ledger, kp, key, x->default_startup);
}

/* A pod that was stopping is gone: how long its graceful stop took, for the estimates of its siblings. */
static void observe_stop(struct drain_exec *x, const struct xpod *p, const struct kube_pod *kp,
                         const char *key)
{
        if (drain_shutdowns_observe_stop(drain_ledger_shutdowns(x->ledger), kp, key, p ? p->stop_at : 0,
                                         p ? p->forced_grace : 0, x->deadline,
                                         x->expected_shutdown_fraction) < 0)
                log_debug("out of memory keeping shutdown observations");
}

/* When what still ran of a pod we stopped was killed: the end of the grace its delete gave it, counted from
 * that delete (deleted_usec). A DELETED pod's deletionTimestamp does not say it once its kubelet confirmed
 * the stop (kube_pod_stop_grace()); the grace is the one we forced, else the one its object tells. */
static uint64_t kill_usec(const struct xpod *p, const struct kube_pod *kp)
{
        bool forced = p->state == XPOD_DELETING || p->state == XPOD_FORCED;
        int64_t grace = forced ? p->forced_grace : kube_pod_stop_grace(kp);
        return kp->deleted_usec + (grace > 0 ? (uint64_t)grace * USEC_PER_SEC : 0);
}

/* A pod gone with its node while it still ran: killed, whatever the drain had asked of it. Its pod-killed
 * alert goes out now, with the post-mortem of its last state (unless the one taken before the node's end
 * told it already). */
static void gone_with_node(struct drain_exec *x, struct xpod *p, const cJSON *obj)
{
        char deadline[64];
        p->killed = p->gone_with_node = true;
        if (p->pm_killed) {
                drain_postmortem_flush(p->pm_killed);
                return;
        }
        if (format_rfc3339(x->deadline, deadline, sizeof(deadline)) < 0)
                snprintf(deadline, sizeof(deadline), "?");
        _cleanup_free_ char *summary = strprintf(
            "pod %s/%s killed with node %s: the node went while %s; %s notice, deadline %s", p->namespace,
            p->name, x->node, p->stop_at ? "its stop had not ended" : "it still ran", x->kind, deadline);
        p->pm_killed = exec_capture(x, p, ALERT_POD_KILLED, "node-gone", summary, obj, NULL);
        if (!p->pm_killed) {
                const char *fields[] = { "pod", p->name, "namespace", p->namespace, NULL };
                alert_emit_pod(x->bus, ALERT_POD_KILLED, x->node,
                               &(struct alert_pod){ p->namespace, p->name, p->uid }, NULL, fields, "%s",
                               summary ? summary : p->name);
                return;
        }
        drain_postmortem_accepted(p->pm_killed);
}

void exec_pods_deleted(void *userdata, const cJSON *obj)
{
        struct drain_exec *x = userdata;
        _cleanup_(kube_pod_clear) struct kube_pod kp = { 0 };
        _cleanup_free_ char *key = NULL;
        if (kube_pod_parse(obj, &kp) < 0)
                goto done;
        struct xpod *p = xpod_find(x, kp.namespace ? kp.namespace : "", kp.name, kp.uid);
        /* DaemonSet and mirror pods are left by design and come back with any node. */
        bool ours =
            p && !p->killed && !kp.mirror && (!streq_ptr(kp.owner_kind, "DaemonSet") || x->evict_daemonsets);
        if (ours && kube_pod_killed_with_node(obj)) {
                gone_with_node(x, p, obj);
                goto done; /* no stop of its own to learn from */
        }
        if (kp.deletion_usec && (key = drain_owner_key(&kp))) {
                /* How its containers ended says it; without that, that it went only once its grace was
                 * over (which a watch event that came late may also seem to say). */
                int sigkilled = kube_pod_sigkilled(obj);
                if (ours && p->stop_at &&
                    (sigkilled > 0 || (sigkilled < 0 && clk_now() >= kill_usec(p, &kp))))
                        p->killed = true;
                observe_stop(x, p, &kp, key);
                if (p && !p->ghost)
                        keep_ghost(x, p, obj, &kp, key);
        }
done:
        exec_pods_changed(x);
}

void exec_informer_synced(void *userdata)
{
        exec_pods_changed(userdata);
}

/* The ledger's wake: a PDB changed, a drain started or ended beside this one, or a slot may be ours. */
void exec_ledger_wake(void *userdata)
{
        exec_kick(userdata);
}
