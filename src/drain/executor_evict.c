/* The executor's evictions: which pods to stop now and in what order (their slots from the ledger, the
 * plan's times), their evictions and deletes and the answers to them (a PDB's 429, a pod gone), the forced
 * grace, and the wake-up at the next moment something is due. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "drain/executor_internal.h"

/* The longest silence between two resumes of a pods' watch that brought nothing (watch_check) */
#define WATCH_RESUME_MAX_USEC (40ULL * USEC_PER_SEC)

/* Warns once per pod about what the drain costs it (the node is going away, so it goes anyway). */
static void warn_pod(struct drain_exec *x, size_t i)
{
        const struct drain_plan_pod *pp = own_plan_pod(x, i);
        struct xpod *p = x->plan_pods[i];
        if (p->warned || pp->action == DRAIN_ACTION_LEAVE)
                return;
        p->warned = true;
        const char *fields[] = { "node", x->node, "pod", p->name, "namespace", p->namespace, NULL };
        if (pp->warnings & DRAIN_WARN_BARE)
                log_full(LOG_WARNING, 0, fields, "pod %s/%s has no controller: nothing will recreate it",
                         p->namespace, p->name);
        if (pp->warnings & DRAIN_WARN_EMPTYDIR)
                log_full(LOG_WARNING, 0, fields, "pod %s/%s uses emptyDir: its data is lost with the node",
                         p->namespace, p->name);
        if (pp->warnings & DRAIN_WARN_DO_NOT_DISRUPT)
                log_full(LOG_WARNING, 0, fields,
                         "pod %s/%s is marked do-not-disrupt: kept running until its last safe moment, "
                         "then stopped, the node is going away",
                         p->namespace, p->name);
}

/* ---- evictions and deletes ---- */

static void pdb_names(const struct drain_exec *x, const struct xpod *p, struct buf *b)
{
        const struct drain_input *in = x->inputs ? drain_inputs_get(x->inputs) : NULL;
        for (size_t i = 0; in && i < x->n_own; i++) {
                if (x->plan_pods[i] != p)
                        continue;
                const struct drain_pod_in *pin = own_pod_in(x, in, i);
                for (size_t j = 0; j < pin->n_pdbs; j++) {
                        const struct drain_pdb_in *pdb = &in->pdbs[pin->pdbs[j]];
                        if (buf_printf(b, "%s%s/%s", j ? ", " : "", pdb->namespace, pdb->name) < 0)
                                return;
                }
        }
}

static void evict_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct xpod *p = userdata;
        struct drain_exec *x = p->x;
        uint64_t now = clk_now();

        p->call = NULL;
        switch (kube_evict_outcome(r)) {
        case KUBE_EVICT_EVICTED:
                xpod_answer(p, DRAIN_LEDGER_ACCEPTED);
                p->state = XPOD_EVICTED;
                p->stop_at = now;
                x->result.evicted++;
                exec_pod_stopped(x, p, ALERT_POD_EVICTED);
                break;
        case KUBE_EVICT_BLOCKED:
                /* With a slot from the ledger, the status it went by was stale: the ledger distrusts it
                 * until it changes (or for the floor) and the pod waits for a slot again. A pod outside
                 * the accounting waits the floor. */
                if (p->grant_pdb)
                        xpod_answer(p, DRAIN_LEDGER_REFUSED);
                else
                        p->retry_at = now + exec_retry_delay(x);
                p->state = XPOD_BLOCKED;
                x->result.blocked++;
                log_debug("eviction of %s/%s blocked by PDB %s: %s", p->namespace, p->name,
                          r->pdb_name ? r->pdb_name : "?", r->message ? r->message : "");
                break;
        case KUBE_EVICT_MULTIPLE: {
                _cleanup_(buf_free) struct buf names = { 0 };
                xpod_answer(p, DRAIN_LEDGER_FAILED);
                p->state = XPOD_MULTI;
                x->result.multi_pdb++;
                pdb_names(x, p, &names);
                const char *fields[] = { "node",      x->node,      "pod",  p->name,
                                         "namespace", p->namespace, "pdbs", names.data ? names.data : "",
                                         NULL };
                log_full(LOG_WARNING, 0, fields,
                         "pod %s/%s is selected by several PDBs (%s) and cannot be evicted (%s); %s",
                         p->namespace, p->name, names.data ? names.data : "?",
                         r->message ? r->message : "500",
                         x->policy == DRAIN_POLICY_FORCE ? "it is deleted at its last safe moment"
                                                         : "policy respect leaves it");
                break;
        }
        case KUBE_EVICT_GONE:
        case KUBE_EVICT_CONFLICT:
                /* 404: gone, as wanted; 409: a new pod holds the name, ours is gone. Neither took a
                 * disruption. */
                xpod_answer(p, DRAIN_LEDGER_FAILED);
                xpod_gone(p);
                break;
        case KUBE_EVICT_ERROR:
                xpod_answer(p, DRAIN_LEDGER_FAILED);
                p->state = XPOD_BLOCKED;
                p->retry_at = now + 4 * exec_retry_delay(x);
                log_debug_reason(r->error, r->message, "eviction of %s/%s failed", p->namespace, p->name);
                break;
        }
        exec_kick(x);
}

/* grant_pdb: the PDB whose slot the eviction takes (owned: the pod keeps it until the answer), or NULL.
 * grace < 0: the pod's own. last_safe: the pod's last safe moment, which orders the request among every
 * drain's waiting ones. */
static int evict(struct drain_exec *x, struct xpod *p, uint64_t last_safe, char **grant_pdb, int64_t grace)
{
        int r = kube_evict(x->c, p->namespace, p->name, p->uid, grace, evict_done, p, &p->call);
        if (r >= 0)
                kube_call_set_deadline(p->call, last_safe);
        if (r < 0) {
                if (grant_pdb && *grant_pdb) {
                        drain_ledger_answer(x->ledger, x, *grant_pdb, p->key, DRAIN_LEDGER_FAILED);
                        free(*grant_pdb);
                        *grant_pdb = NULL;
                }
                p->state = XPOD_BLOCKED;
                p->retry_at = clk_now() + 4 * exec_retry_delay(x);
                return r;
        }
        p->state = XPOD_EVICTING;
        if (grant_pdb)
                p->grant_pdb = TAKE_PTR(*grant_pdb);
        return 0;
}

static void delete_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct xpod *p = userdata;
        struct drain_exec *x = p->x;

        p->call = NULL;
        if (r->error >= 0) {
                p->state = XPOD_FORCED;
                p->stop_at = clk_now();
                x->result.forced++;
                exec_pod_stopped(x, p, ALERT_POD_DELETED);
        } else if (r->error == -ENOENT || r->error == -ESTALE || r->error == -EEXIST)
                xpod_gone(p); /* gone, or the name now belongs to a successor */
        else {
                p->state = XPOD_BLOCKED;
                p->force_at = clk_now() + 4 * exec_retry_delay(x);
                log_debug_reason(r->error, r->message, "forced delete of %s/%s failed", p->namespace,
                                 p->name);
        }
        exec_kick(x);
}

/* min(its grace, time left - margin), at least 1 s. */
static int64_t force_grace(const struct drain_exec *x, const struct kube_pod *kp, uint64_t now)
{
        uint64_t end = x->deadline > x->margin ? x->deadline - x->margin : 0;
        /* Rounded to the nearest second: the timer fires a little after the last safe moment, and
         * truncating would cost the pod a whole second of its grace. */
        int64_t left = end > now ? (int64_t)((end - now + USEC_PER_SEC / 2) / USEC_PER_SEC) : 0;
        int64_t g = kp->grace_seconds < left ? kp->grace_seconds : left;
        return g < 1 ? 1 : g;
}

struct order {
        size_t i;
        int tier;
        uint64_t last_safe;
};

static int order_cmp(const void *a, const void *b)
{
        const struct order *x = a, *y = b;
        if (x->tier != y->tier)
                return x->tier - y->tier;
        if (x->last_safe != y->last_safe)
                return x->last_safe < y->last_safe ? -1 : 1;
        return x->i < y->i ? -1 : x->i > y->i;
}

/* Asks the ledger for a slot of the pod's PDB: 1 granted (*ret_pdb is its key), 0 wait. */
static int want_slot(struct drain_exec *x, const struct drain_pdb_in *pdb, const struct xpod *p,
                     uint64_t last_safe, char **ret_pdb)
{
        _cleanup_free_ char *key = strprintf("%s/%s", pdb->namespace, pdb->name);
        if (!key)
                return -ENOMEM;
        int r = drain_ledger_want(x->ledger, x, key, p->key, last_safe);
        if (r > 0)
                *ret_pdb = TAKE_PTR(key);
        return r;
}

/* When the pods' watch owes an event of a pod we stopped: at once for its deletionTimestamp once our
 * eviction or delete was accepted (the API server sets it before it answers), at that deletionTimestamp for
 * its removal (its grace is over: its kubelet kills what still runs). UINT64_MAX: nothing owed. */
static uint64_t event_owed_at(const struct drain_exec *x, const struct xpod *p)
{
        if ((p->state != XPOD_EVICTED && p->state != XPOD_FORCED) || !p->stop_at)
                return UINT64_MAX;
        const cJSON *obj = kube_informer_get(x->pods_inf, p->namespace, p->name);
        const char *uid = kube_object_str(obj, "metadata.uid");
        if (!obj || (p->uid && uid && !streq(uid, p->uid)))
                return UINT64_MAX; /* gone: the informer told it */
        const char *ts = kube_object_str(obj, "metadata.deletionTimestamp");
        uint64_t at;
        if (!ts || parse_rfc3339(ts, &at) < 0)
                return p->stop_at;
        return MAX(at, p->stop_at);
}

/* The pods' watch is patient: silent for the minute between bookmarks while the pods are quiet, and while
 * pods we stopped are in their grace. Silence for a request's idle limit after an event was owed (above)
 * may be a connection that stopped passing bytes: the watch resumes then, on a live one. A resume that
 * brought no change of the pods (a kubelet late, or gone with its node) doubles the silence before the next,
 * up to WATCH_RESUME_MAX_USEC: a silent watch is not resumed every few seconds by each of a thousand
 * drains. When to look again. */
static uint64_t watch_check(struct drain_exec *x, uint64_t now)
{
        uint64_t owed = UINT64_MAX;
        for (size_t i = 0; i < x->n_pods; i++)
                owed = MIN(owed, event_owed_at(x, x->pods[i]));
        if (owed == UINT64_MAX)
                return UINT64_MAX;
        unsigned long gen = kube_informer_generation(x->pods_inf);
        if (gen != x->watch_resume_gen)
                x->watch_resume_every = 0;
        uint64_t every = x->watch_resume_every ? x->watch_resume_every : KUBE_IDLE_TIMEOUT_USEC;
        uint64_t heard = kube_informer_heard_at(x->pods_inf);
        uint64_t at = MAX(owed, heard) + KUBE_IDLE_TIMEOUT_USEC;
        if (x->watch_resumed_at)
                at = MAX(at, x->watch_resumed_at + every);
        if (now < at)
                return at;
        log_debug("%s: its pods' watch silent for %" PRIu64 " s, an event owed for %" PRIu64
                  " s: resuming it",
                  x->node, heard && heard < now ? (now - heard) / USEC_PER_SEC : 0,
                  owed < now ? (now - owed) / USEC_PER_SEC : 0);
        kube_informer_resume(x->pods_inf);
        if (x->watch_resumed_at && gen == x->watch_resume_gen)
                x->watch_resume_every = MIN(2 * every, WATCH_RESUME_MAX_USEC);
        x->watch_resumed_at = now;
        x->watch_resume_gen = gen;
        return now + (x->watch_resume_every ? x->watch_resume_every : KUBE_IDLE_TIMEOUT_USEC);
}

static int issue_pods(struct drain_exec *x, uint64_t now)
{
        const struct drain_input *in = drain_inputs_get(x->inputs);
        _cleanup_free_ struct order *order = calloc(x->n_own + 1, sizeof(*order));
        _cleanup_(buf_free) struct buf forced = { 0 }, forced_names = { 0 };
        uint64_t next = x->deadline;
        unsigned n_forced = 0;
        bool tier0_pending = false;
        /* The first judgement waits for a read (the siblings' startup times, the kept estimates, a
         * Deployment's surge), within its bound: no pod goes before it unless its last safe moment comes
         * first, so that the verdict comes before the first eviction. The read's answer, or the timer at
         * the bound, kicks the drain. */
        bool judging =
            !x->result.judged_usec && (x->judge_on_startups || x->judge_on_estimates || x->judge_on_surge);

        if (!order)
                return -ENOMEM;
        for (size_t i = 0; i < x->n_own; i++) {
                const struct drain_plan_pod *pp = own_plan_pod(x, i);
                struct xpod *p = x->plan_pods[i];
                order[i] = (struct order){ .i = i, .tier = pp->tier, .last_safe = pp->last_safe_usec };
                if (pp->tier == 0 && drain_plan_pod_to_evict(pp) && !own_pod_in(x, in, i)->deleting &&
                    (p->state == XPOD_IDLE || p->state == XPOD_BLOCKED || p->state == XPOD_MULTI ||
                     p->state == XPOD_EVICTING))
                        tier0_pending = true;
        }
        qsort(order, x->n_own, sizeof(*order), order_cmp);

        for (size_t o = 0; o < x->n_own; o++) {
                size_t i = order[o].i;
                const struct drain_plan_pod *pp = own_plan_pod(x, i);
                const struct drain_pod_in *pin = own_pod_in(x, in, i);
                struct xpod *p = x->plan_pods[i];

                warn_pod(x, i);
                if (!drain_plan_pod_to_evict(pp) || pin->deleting)
                        continue;
                if (p->state != XPOD_IDLE && p->state != XPOD_BLOCKED && p->state != XPOD_MULTI)
                        continue;

                bool due = x->policy == DRAIN_POLICY_FORCE && now >= pp->last_safe_usec;
                /* A do-not-disrupt pod keeps running until its last safe moment, then goes with a grace
                 * that still fits before the deadline; so does every pod while the first judgement waits. */
                if ((pin->do_not_disrupt || judging) && now < pp->last_safe_usec) {
                        next = MIN(next, pp->last_safe_usec);
                        continue;
                }
                /* Behind an instance target group: until the instance is out of healthy there and the
                 * group's delay was answered (judged first), which the bindings' list must tell first
                 * (until their last safe moment at most). */
                if (x->lbt && now < pp->last_safe_usec) {
                        const struct kube_pod *lkp = drain_inputs_pod(x->inputs, x->slice.first_pod + i);
                        long g =
                            drain_lb_targets_listed(x->lbt) ? drain_lb_targets_find(x->lbt, lkp, true) : 0;
                        const struct drain_lb_group *grp = drain_lb_targets_listed(x->lbt) && g >= 0
                                                               ? drain_lb_targets_group(x->lbt, (size_t)g)
                                                               : NULL;
                        if (g >= 0 && (!grp || !grp->out || grp->delay_seconds == -1)) {
                                next = MIN(next, pp->last_safe_usec);
                                continue;
                        }
                }
                /* Behind a Service: the load balancers deregister the node first (until their last safe
                 * moment at most). */
                uint64_t hold = in->nodes[pin->node].lb_hold_usec;
                if (pin->behind_service && hold > now && now < pp->last_safe_usec) {
                        next = MIN(next, MIN(hold, pp->last_safe_usec));
                        continue;
                }
                const struct kube_pod *kp = drain_inputs_pod(x->inputs, x->slice.first_pod + i);
                int64_t grace = pin->do_not_disrupt ? force_grace(x, kp, now) : -1;
                /* Critical pods go once the normal ones are on their way, or when their own time runs out.
                 */
                bool gated = pp->tier > 0 && tier0_pending && now < pp->last_safe_usec;
                bool takes_slot = drain_pod_takes_slot(pin);

                /* Once its last safe moment has come, a pod is evicted only when that surely works at
                 * once; one that was refused before is forced. A pod under a PDB is evicted only with a
                 * slot from the ledger (shared by every drain of the process, earliest deadline first):
                 * without one it waits, and the ledger wakes us when a slot may be ours. */
                if (!gated && x->cordon_answered && (!x->exclude_lb || x->lb_answered) &&
                    p->state != XPOD_MULTI && (!due || p->state == XPOD_IDLE) && now >= p->retry_at) {
                        _cleanup_free_ char *grant = NULL;
                        bool issued = false;
                        if (!takes_slot) {
                                exec_postmortem_begin(x, p, kp, ALERT_POD_EVICTED, 0);
                                issued = evict(x, p, pp->last_safe_usec, NULL, grace) >= 0;
                        } else {
                                int g = want_slot(x, &in->pdbs[pin->pdbs[0]], p, pp->last_safe_usec, &grant);
                                if (g < 0)
                                        return g;
                                if (g > 0) {
                                        exec_postmortem_begin(x, p, kp, ALERT_POD_EVICTED, 0);
                                        issued = evict(x, p, pp->last_safe_usec, &grant, grace) >= 0;
                                }
                        }
                        if (issued)
                                continue;
                }

                /* Force phase: the last moment a graceful stop still ends before the deadline. */
                if (due && now >= p->force_at) {
                        grace = force_grace(x, kp, now);
                        p->call = kube_call_cancel(p->call);
                        /* A capture taken for its eviction tells another story than its delete's. */
                        if (!p->pm_forced)
                                p->pm = drain_postmortem_free(p->pm);
                        exec_postmortem_begin(x, p, kp, ALERT_POD_DELETED, grace);
                        p->pm_forced = true;
                        if (kube_pod_delete(x->c, p->namespace, p->name, p->uid, grace, delete_done, p,
                                            &p->call) < 0) {
                                p->force_at = now + 4 * exec_retry_delay(x);
                                next = MIN(next, p->force_at);
                                continue;
                        }
                        /* Its last safe moment has come: ahead of every eviction still to come. */
                        kube_call_set_deadline(p->call, pp->last_safe_usec);
                        p->state = XPOD_DELETING;
                        p->forced_grace = grace;
                        n_forced++;
                        if (buf_printf(&forced, "%s%s/%s (grace %" PRIi64 " s)", forced.len ? ", " : "",
                                       p->namespace, p->name, grace) < 0 ||
                            buf_printf(&forced_names, "%s%s/%s", forced_names.len ? "," : "", p->namespace,
                                       p->name) < 0)
                                return -ENOMEM;
                        continue;
                }
                if ((x->policy == DRAIN_POLICY_FORCE || gated) && pp->last_safe_usec > now)
                        next = MIN(next, pp->last_safe_usec);
                if (p->retry_at > now)
                        next = MIN(next, p->retry_at);
                if (due && p->force_at > now)
                        next = MIN(next, p->force_at);
        }

        if (x->rejudge_at > now)
                next = MIN(next, x->rejudge_at);
        next = MIN(next, watch_check(x, now));
        if (n_forced > 0) {
                char n[16];
                snprintf(n, sizeof(n), "%u", n_forced);
                /* names: the pods, for whoever tells their story (the --report timeline). */
                const char *fields[] = { "pods", n, "names", forced_names.data, NULL };
                alert_emit(x->bus, ALERT_PODS_FORCED, x->node, fields,
                           "%u pod%s on %s deleted around their PDB at their last safe moment: %s", n_forced,
                           n_forced == 1 ? "" : "s", x->node, forced.data);
        }
        exec_arm_wake(x, next);
        return 0;
}

/* Issues what the plan and the slots allow; the pods no longer asking for a slot stop waiting. */
int exec_issue(struct drain_exec *x, uint64_t now)
{
        drain_ledger_begin(x->ledger, x);
        int r = issue_pods(x, now);
        drain_ledger_end(x->ledger, x);
        return r;
}

/* ---- the timer for what is due next ---- */

static void wake_fire(void *userdata)
{
        struct drain_exec *x = userdata;
        x->wake = NULL; /* released by the loop as it fired */
        x->wake_at = 0;
        x->act(x);
}

void exec_arm_wake(struct drain_exec *x, uint64_t at)
{
        if (x->wake && x->wake_at == at)
                return;
        x->wake = timer_cancel(x->wake);
        x->wake_at = 0;
        if (timer_start(x->loop, at, wake_fire, x, &x->wake) >= 0)
                x->wake_at = at;
}
