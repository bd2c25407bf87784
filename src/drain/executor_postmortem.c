/* The executor's post-mortems (postmortem.c reads them): a pod's summary once it stopped, and its capture
 * (final container statuses, the log's tail) begun at its eviction, taken again before the node is killed
 * and after its containers stopped. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "drain/executor_internal.h"

/* ---- the pods' own alerts (their Events, where their teams look) and post-mortems ---- */

static char *pod_summary(const struct drain_exec *x, const struct xpod *p, enum alert_kind kind,
                         int64_t grace)
{
        char notice[64], deadline[64];
        if (format_rfc3339(x->result.notice_usec, notice, sizeof(notice)) < 0)
                snprintf(notice, sizeof(notice), "?");
        if (x->no_deadline)
                snprintf(deadline, sizeof(deadline), "none");
        else if (format_rfc3339(x->deadline, deadline, sizeof(deadline)) < 0)
                snprintf(deadline, sizeof(deadline), "?");
        if (kind == ALERT_POD_DELETED)
                return strprintf("pod %s/%s deleted at its last safe moment on node %s (grace %" PRIi64
                                 " s): %s notice at %s, deadline %s",
                                 p->namespace, p->name, x->node, grace, x->kind, notice, deadline);
        return strprintf("pod %s/%s evicted from node %s: %s notice at %s, deadline %s", p->namespace,
                         p->name, x->node, x->kind, notice, deadline);
}

/* Its eviction or delete was accepted: its alert, with the post-mortem once that is in. */
void exec_pod_stopped(struct drain_exec *x, struct xpod *p, enum alert_kind kind)
{
        if (p->pm) {
                drain_postmortem_accepted(p->pm);
                return;
        }
        _cleanup_free_ char *summary = pod_summary(x, p, kind, p->forced_grace);
        const char *fields[] = { "pod", p->name, "namespace", p->namespace, NULL };
        alert_emit_pod(x->bus, kind, x->node, &(struct alert_pod){ p->namespace, p->name, p->uid }, NULL,
                       fields, "%s", summary ? summary : p->name);
}

/* A capture of p (stage: NULL the first, at its delete or eviction), its alert kind once it is in and
 * accepted; NULL when it cannot be taken. last: the pod's last state, of a pod already gone (nothing read
 * from the API); NULL: read now. */
struct drain_postmortem *exec_capture(struct drain_exec *x, const struct xpod *p, enum alert_kind kind,
                                      const char *stage, const char *summary, const cJSON *last,
                                      const cJSON *seen)
{
        struct drain_postmortem *pm = NULL;
        struct drain_postmortem_spec s = {
                .kind = kind,
                .tail_lines = x->log_tail_lines,
                .dir = x->postmortem_dir,
                .node = x->node,
                .namespace = p->namespace,
                .name = p->name,
                .uid = p->uid,
                .summary = summary,
                .stage = stage,
                .seen = seen,
        };
        int r = !summary ? -ENOMEM
                : last   ? drain_postmortem_of_object(x->bus, &s, last, &pm)
                         : drain_postmortem_start(x->c, x->bus, &s, &pm);
        if (r < 0) {
                log_debug_errno(r, "cannot take the post-mortem of %s/%s", p->namespace, p->name);
                return NULL;
        }
        return pm;
}

/* A pod deleted around its PDB, or a Job's or a bare pod (nothing keeps its logs once the node is gone),
 * gets a post-mortem, taken as its delete or eviction goes out. */
void exec_postmortem_begin(struct drain_exec *x, struct xpod *p, const struct kube_pod *kp,
                           enum alert_kind kind, int64_t grace)
{
        if (p->pm || (kind == ALERT_POD_EVICTED && kp && kp->owner_kind && !streq(kp->owner_kind, "Job")))
                return;
        _cleanup_free_ char *summary = pod_summary(x, p, kind, grace);
        p->pm = exec_capture(x, p, kind, NULL, summary, NULL, NULL);
}

/* A later capture of p, alerted as soon as it is in; seen: its object as just seen, if it was. */
static struct drain_postmortem *capture_again(struct drain_exec *x, const struct xpod *p,
                                              enum alert_kind kind, const char *stage, const char *summary,
                                              const cJSON *seen)
{
        struct drain_postmortem *pm = exec_capture(x, p, kind, stage, summary, NULL, seen);
        drain_postmortem_accepted(pm); /* nothing to wait for but the capture */
        return pm;
}

/* Why a pod is still on the node shortly before its end. */
static const char *still_there_why(const struct drain_exec *x, const struct xpod *p)
{
        if (p->leave)
                return "left alone by drain.skip_namespaces, drain.skip_pod_selector or "
                       "drain.delete_emptydir_data: false";
        if (x->cordon_only)
                return "drain.cordon_only: another drainer's to move";
        if (p->stop_at)
                return "its stop has not ended";
        return "the drain could not stop it in time";
}

/* KILL_CAPTURE_LEAD_USEC before the deadline: every pod still on the node (but DaemonSet and mirror pods,
 * which the drain leaves by design and which come back with any node, and pods whose deletion's grace ends
 * before the deadline) goes with the node unless it stops first; its post-mortem is taken now, while the
 * API still serves it (pod-killed). */
static void capture_doomed(struct drain_exec *x)
{
        char deadline[64];
        unsigned n = 0;
        if (format_rfc3339(x->deadline, deadline, sizeof(deadline)) < 0)
                snprintf(deadline, sizeof(deadline), "?");
        for (size_t i = 0; i < x->n_pods; i++) {
                struct xpod *p = x->pods[i];
                _cleanup_(kube_pod_clear) struct kube_pod kp = { 0 };
                const cJSON *o = p->state == XPOD_GONE || p->pm_killed
                                     ? NULL
                                     : kube_informer_get(x->pods_inf, p->namespace, p->name);
                if (!o || !streq_ptr(kube_object_str(o, "metadata.uid"), p->uid) ||
                    kube_pod_parse(o, &kp) < 0 || kp.mirror ||
                    (streq_ptr(kp.owner_kind, "DaemonSet") && !x->evict_daemonsets))
                        continue;
                /* Deleting with a grace that ends before the deadline: its kubelet ends it first, and its
                 * delete's capture (and the one after its stop) tell its story. */
                if (kp.deletion_usec && kp.deletion_usec <= x->deadline)
                        continue;
                _cleanup_free_ char *summary = strprintf(
                    "pod %s/%s still on node %s %.0f s before its end (%s): killed with the node unless it "
                    "stops first; %s notice, deadline %s",
                    p->namespace, p->name, x->node, (double)KILL_CAPTURE_LEAD_USEC / (double)USEC_PER_SEC,
                    still_there_why(x, p), x->kind, deadline);
                p->pm_killed = capture_again(x, p, ALERT_POD_KILLED, "before-node-end", summary, NULL);
                n += p->pm_killed != NULL;
        }
        if (n > 0)
                log_debug("drain of %s: %u pod%s still on the node captured before its end", x->node, n,
                          n == 1 ? "" : "s");
}

void exec_kill_capture_fire(void *userdata)
{
        struct drain_exec *x = userdata;
        uint64_t now = clk_now();
        x->kill_timer = NULL; /* released by the loop as it fired */
        if (kube_informer_synced(x->pods_inf)) {
                (void)exec_sync_pods(x);
                capture_doomed(x);
        } else if (now < x->deadline && timer_start(x->loop, MIN(now + x->floor, x->deadline),
                                                    exec_kill_capture_fire, x, &x->kill_timer) < 0)
                x->kill_timer = NULL;
}

/* Whether every container of a pod has stopped (or it finished). */
static bool containers_stopped(const cJSON *obj)
{
        const char *phase = kube_object_str(obj, "status.phase");
        if (streq_ptr(phase, "Succeeded") || streq_ptr(phase, "Failed"))
                return true;
        const cJSON *cs, *statuses = cJSON_GetObjectItemCaseSensitive(
                             cJSON_GetObjectItemCaseSensitive(obj, "status"), "containerStatuses");
        if (cJSON_GetArraySize(statuses) == 0)
                return false;
        cJSON_ArrayForEach (cs, statuses)
                if (!cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cs, "state"),
                                                      "terminated"))
                        return false;
        return true;
}

/* A pod the drain stopped with a post-mortem, seen with its containers stopped while it is still served
 * (Terminating until the kubelet confirms): its final statuses (exit codes) and last lines, again. */
void exec_capture_after_stop(struct drain_exec *x, const cJSON *obj)
{
        const char *ns = kube_object_str(obj, "metadata.namespace");
        if (!containers_stopped(obj))
                return;
        struct xpod *p = xpod_find(x, ns ? ns : "", kube_object_str(obj, "metadata.name"),
                                   kube_object_str(obj, "metadata.uid"));
        if (!p || !p->pm || !p->stop_at || p->pm_after)
                return;
        _cleanup_free_ char *summary =
            strprintf("pod %s/%s stopped on node %s (%s notice): its containers' last state", p->namespace,
                      p->name, x->node, x->kind);
        p->pm_after = capture_again(x, p, ALERT_POSTMORTEM, "after-stop", summary, obj);
}
