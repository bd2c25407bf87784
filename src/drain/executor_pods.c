/* The executor's pods: its own share of the joint plan (own_*), the pods it tracks (struct xpod: added as
 * the informer lists them, those it skips, answered, cancelled, gone) kept in step with the pod informer,
 * and the jittered floor before an eviction is tried again. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "drain/executor_internal.h"

/* Own pod i of the plan (0 ≤ i < n_own), and its input. */
const struct drain_plan_pod *own_plan_pod(const struct drain_exec *x, size_t i)
{
        return &x->plan->pods[x->slice.first_pod + i];
}

const struct drain_pod_in *own_pod_in(const struct drain_exec *x, const struct drain_input *in, size_t i)
{
        return &in->pods[x->slice.first_pod + i];
}

const struct drain_plan_node *own_node(const struct drain_exec *x)
{
        return &x->plan->nodes[x->slice.node];
}

static uint64_t jitter(uint64_t range)
{
        uint32_t v = 0;
        if (range == 0 || getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v))
                return 0;
        return v % range;
}

/* The floor before retrying a blocked eviction when nothing is heard: short, and jittered so that many
 * executors do not retry in step. */
uint64_t exec_retry_delay(const struct drain_exec *x)
{
        return x->floor + jitter(x->floor / 2 + 1);
}

/* ---- pods ---- */

struct xpod *xpod_free(struct xpod *p)
{
        if (!p)
                return NULL;
        kube_call_cancel(p->call);
        drain_postmortem_free(p->pm);
        drain_postmortem_free(p->pm_killed);
        drain_postmortem_free(p->pm_after);
        drain_pod_memo_unref(p->memo);
        drain_pod_memo_unref(p->ghost);
        free(p->grant_pdb);
        free(p->key);
        free(p->namespace);
        free(p->name);
        free(p->uid);
        free(p);
        return NULL;
}

static bool is_self(const struct drain_exec *x, const char *ns, const char *name)
{
        return x->self_name && streq_ptr(x->self_name, name) &&
               (!x->self_namespace || streq_ptr(x->self_namespace, ns));
}

struct xpod *xpod_find(const struct drain_exec *x, const char *ns, const char *name, const char *uid)
{
        for (size_t i = 0; i < x->n_pods; i++) {
                struct xpod *p = x->pods[i];
                if (p->state != XPOD_GONE && streq_ptr(p->namespace, ns) && streq_ptr(p->name, name) &&
                    streq_ptr(p->uid, uid))
                        return p;
        }
        return NULL;
}

static bool has_emptydir(const cJSON *pod)
{
        const cJSON *vol;
        cJSON_ArrayForEach (vol, cJSON_GetObjectItemCaseSensitive(
                                     cJSON_GetObjectItemCaseSensitive(pod, "spec"), "volumes")) {
                if (cJSON_GetObjectItemCaseSensitive(vol, "emptyDir"))
                        return true;
        }
        return false;
}

/* Pods the configuration leaves alone: in a skipped namespace, or matching the skip selector. */
static bool skipped(const struct drain_exec *x, const cJSON *obj, const char *ns)
{
        for (char **n = x->skip_namespaces; n && *n; n++)
                if (streq_ptr(*n, ns))
                        return true;
        if (!x->skip_selector.present)
                return false;
        _cleanup_(kube_pod_clear) struct kube_pod kp = { 0 };
        return kube_pod_parse(obj, &kp) >= 0 &&
               kube_selector_matches(&x->skip_selector, kp.labels, kp.n_labels);
}

static int xpod_add(struct drain_exec *x, const cJSON *obj, const char *ns, const char *name,
                    const char *uid)
{
        struct xpod **a = realloc(x->pods, (x->n_pods + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        x->pods = a;
        struct xpod *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        *p = (struct xpod){ .x = x,
                            .leave = (x->leave_emptydir && has_emptydir(obj)) || skipped(x, obj, ns) };
        if (!(p->namespace = strdup(ns ? ns : "")) || !(p->name = strdup(name)) ||
            !(p->key = strprintf("%s/%s", p->namespace, name)) || (uid && !(p->uid = strdup(uid)))) {
                xpod_free(p);
                return -ENOMEM;
        }
        x->pods[x->n_pods++] = p;
        return 0;
}

/* Tells the ledger how the eviction holding a slot ended. */
void xpod_answer(struct xpod *p, enum drain_ledger_answer a)
{
        if (!p->grant_pdb)
                return;
        drain_ledger_answer(p->x->ledger, p->x, p->grant_pdb, p->key, a);
        free(p->grant_pdb);
        p->grant_pdb = NULL;
}

/* Stops the call under way; an eviction stopped half-way may have gone through. */
void xpod_cancel(struct xpod *p)
{
        p->call = kube_call_cancel(p->call);
        xpod_answer(p, DRAIN_LEDGER_ACCEPTED);
}

void xpod_gone(struct xpod *p)
{
        xpod_cancel(p);
        p->state = XPOD_GONE;
}

/* Brings the pod list in line with the informer: new pods are added, pods whose name is gone or now has
 * another UID (a StatefulSet's successor) are gone. */
int exec_sync_pods(struct drain_exec *x)
{
        unsigned long generation = kube_informer_generation(x->pods_inf);
        if (x->pods_synced && generation == x->synced_generation)
                return 0;
        for (size_t i = 0; i < x->n_pods; i++) {
                struct xpod *p = x->pods[i];
                if (p->state == XPOD_GONE)
                        continue;
                const cJSON *o = kube_informer_get(x->pods_inf, p->namespace, p->name);
                if (!o || !streq_ptr(kube_object_str(o, "metadata.uid"), p->uid))
                        xpod_gone(p);
        }
        for (size_t i = 0; i < kube_informer_size(x->pods_inf); i++) {
                const cJSON *o = kube_informer_at(x->pods_inf, i);
                const char *ns = kube_object_str(o, "metadata.namespace");
                const char *name = kube_object_str(o, "metadata.name");
                const char *uid = kube_object_str(o, "metadata.uid");
                if (!name || is_self(x, ns, name) || xpod_find(x, ns ? ns : "", name, uid))
                        continue;
                int r = xpod_add(x, o, ns, name, uid);
                if (r < 0)
                        return r;
        }
        x->pods_synced = true;
        x->synced_generation = generation;
        return 0;
}
