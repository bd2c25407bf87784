/* The simulator's API operations: eviction and delete of pods, exactly as kube-apiserver answers them. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/disruption.h"
#include "sim/model_internal.h"
#include "spotdrain/keys.h"
#include "spotdrain/util.h"

/* ---- eviction and delete ---- */
static int matching_pdbs(struct sim *s, const struct sim_pod *p, struct sim_pdb **ret_first)
{
        int n = 0;
        *ret_first = NULL;
        for (size_t i = 0; i < s->n_pdbs; i++)
                if (sim_pdb_matches(s->pdbs[i], p)) {
                        if (!n)
                                *ret_first = s->pdbs[i];
                        n++;
                }
        return n;
}

static int uid_mismatch(struct sim_answer *ret, const struct sim_pod *p, const char *uid)
{
        _cleanup_free_ char *msg =
            strprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", uid, p->uid);
        if (!msg)
                return -ENOMEM;
        return sim_answer_status(ret, 409, "Conflict", msg, p->name, "pods");
}

static int too_many_requests(struct sim_answer *ret, const struct sim_pdb *d)
{
        _cleanup_free_ char *msg =
            strprintf("The disruption budget %s needs %d healthy pods and has %d currently", d->name,
                      d->desired, d->current);
        if (!msg)
                return -ENOMEM;
        /* No retryAfterSeconds: kubectl's client would retry silently instead of reporting the 429. */
        _cleanup_(cJSON_Deletep) cJSON *body =
            sim_render_status(429, "Failure", "TooManyRequests",
                              "Cannot evict pod as it would violate the pod's disruption budget.");
        if (!body)
                return -ENOMEM;
        cJSON *causes = cJSON_AddArrayToObject(cJSON_AddObjectToObject(body, "details"), "causes");
        cJSON *cause = cJSON_CreateObject();
        if (!causes || !cause || !cJSON_AddItemToArray(causes, cause)) {
                cJSON_Delete(cause);
                return -ENOMEM;
        }
        if (!cJSON_AddStringToObject(cause, "reason", "DisruptionBudget") ||
            !cJSON_AddStringToObject(cause, "message", msg))
                return -ENOMEM;
        *ret = (struct sim_answer){ .status = 429, .body = TAKE_PTR(body) };
        return 0;
}

static int evicted(struct sim *s, struct sim_pod *p, int64_t grace, struct sim_answer *ret)
{
        int r = sim_pod_delete(s, p, grace);
        if (r < 0)
                return r;
        sim_settle(s);
        return sim_answer_status(ret, 201, NULL, NULL, NULL, NULL);
}

int sim_evict(struct sim *s, const char *ns, const char *name, const cJSON *eviction, const char *client,
              struct sim_answer *ret)
{
        sim_begin(s);
        struct sim_pod *p = sim_find_pod(s, ns, name);
        if (!p)
                return sim_answer_not_found(ret, "pods", name);
        const cJSON *opts = cJSON_GetObjectItemCaseSensitive(eviction, "deleteOptions");
        const char *uid = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(opts, "preconditions"), "uid"));
        if (uid && !streq(uid, p->uid))
                return uid_mismatch(ret, p, uid);
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(opts, "gracePeriodSeconds");
        int64_t grace = cJSON_IsNumber(g) && g->valuedouble >= 0 ? (int64_t)g->valuedouble : -1;

        /* Pods that are not running, or already going, are deleted without consulting any budget. */
        if (p->phase != SIM_RUNNING || p->deleting)
                return evicted(s, p, grace, ret);
        struct sim_pdb *d;
        int n = matching_pdbs(s, p, &d);
        if (n > 1)
                return sim_answer_status(
                    ret, 500, "InternalError",
                    "This pod has more than one PodDisruptionBudget, which the eviction "
                    "subresource does not support.",
                    NULL, NULL);
        if (n == 0)
                return evicted(s, p, grace, ret);
        struct sim_budget_status st = {
                .expected = d->expected, .desired = d->desired, .current = d->current, .allowed = d->allowed
        };
        if (!p->ready && sim_budget_allows_unhealthy(&st, d->always_allow))
                return evicted(s, p, grace, ret);
        if (d->allowed <= 0)
                return too_many_requests(ret, d);

        struct sim_disrupted *a = realloc(d->disrupted, (d->n_disrupted + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        d->disrupted = a;
        if (!(d->disrupted[d->n_disrupted].pod = strdup(p->name)))
                return -ENOMEM;
        d->disrupted[d->n_disrupted++].at = s->t;
        d->allowed--;
        if (d->allowed == 0)
                d->cond_since = s->t;
        (void)sim_emit(s, SIM_PDB, "MODIFIED", d);
        return evicted(s, p, grace, ret);
}

int sim_delete_pod(struct sim *s, const char *ns, const char *name, int64_t grace_seconds, const char *uid,
                   const char *client, struct sim_answer *ret)
{
        sim_begin(s);
        struct sim_pod *p = sim_find_pod(s, ns, name);
        if (!p)
                return sim_answer_not_found(ret, "pods", name);
        if (uid && !streq(uid, p->uid))
                return uid_mismatch(ret, p, uid);
        if (!p->deleting && p->phase == SIM_RUNNING) {
                bool covered = false;
                for (size_t i = 0; i < s->n_pdbs; i++) {
                        struct sim_pdb *d = s->pdbs[i];
                        if (!sim_pdb_matches(d, p))
                                continue;
                        covered = true;
                        bool healthy = p->ready && !sim_pdb_is_disrupted(d, p->name);
                        if (healthy && d->current - 1 < d->desired)
                                s->pdb_breaches++;
                }
                if (covered && !p->forced) {
                        p->forced = true;
                        s->nodes[p->node]->pods_forced++;
                }
        }
        int r = sim_pod_delete(s, p, grace_seconds);
        if (r < 0)
                return r;
        r = sim_answer_obj(ret, 200, sim_render_pod(s, p));
        sim_settle(s);
        return r;
}
