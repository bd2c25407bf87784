/* The executor's plan and judgement: the drain's inputs given to the ledger (its pods, PDBs and namespaces),
 * each joint plan taken up, the graded verdict at the notice and again as things change (surge, estimates,
 * the load balancers' delays), and the plan's metrics. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "drain/executor_internal.h"

/* A pod behind an instance target group: its instance expected out of healthy by the next answer. */
#define LB_POLL_USEC (1 * USEC_PER_SEC)

/* ---- planning ---- */

/* The budget and the predicted drain time of this node, for spotdrain_drain_{budget,predicted}_seconds. */
static void export_plan_metrics(const struct drain_exec *x)
{
        const struct drain_plan_node *node = own_node(x);
        uint64_t now = x->plan->now_usec;
        double budget = node->deadline_usec > now ? (double)(node->deadline_usec - now) / 1e6 : 0.0;
        double predicted = node->finish_usec == DRAIN_NEVER ? budget
                           : node->finish_usec > now        ? (double)(node->finish_usec - now) / 1e6
                                                            : 0.0;
        metrics_gauge_set(x->metrics, METRIC_DRAIN_BUDGET_SECONDS, budget, node->name, NULL);
        metrics_gauge_set(x->metrics, METRIC_DRAIN_PREDICTED_SECONDS, predicted, node->name, NULL);
}

/* Adds this node's pods (and the ghosts of those whose replacement is still on the way) to di as node
 * index node; map (may be NULL) receives the xpod of each pod added, *n counting them. */
static int add_pods(struct drain_exec *x, struct drain_inputs *di, size_t node, uint64_t now,
                    struct xpod **map, size_t *n)
{
        for (size_t i = 0; i < x->n_pods; i++) {
                struct xpod *p = x->pods[i];
                struct drain_pod_memo *m;
                int r = 0;
                if (p->leave)
                        continue;
                if (p->state == XPOD_GONE) {
                        /* Gone: what it was alive is planned no more. */
                        p->memo = drain_pod_memo_unref(p->memo);
                        if (p->ghost && now >= p->ghost_until)
                                /* Its replacement should be Ready: no slot of it is left to foresee, and a
                                 * thousand drains' ghosts kept to their end held 100 MiB. */
                                p->ghost = drain_pod_memo_unref(p->ghost);
                        if (!(m = p->ghost))
                                continue;
                } else {
                        /* The store's object is parsed (a compact informer's text) only when it changed. */
                        const char *rv = kube_informer_rv(x->pods_inf, p->namespace, p->name);
                        if (!drain_pod_memo_is(p->memo, rv)) {
                                const cJSON *o = kube_informer_get(x->pods_inf, p->namespace, p->name);
                                if (!o)
                                        continue;
                                r = drain_pod_memo_update(&p->memo, o);
                        }
                        m = p->memo;
                }
                size_t idx;
                if (r >= 0)
                        r = drain_inputs_add_pod_memo(di, node, m, &idx);
                if (r == -ENOMEM)
                        return r;
                if (r >= 0 && m == p->ghost)
                        (void)drain_inputs_set_gone(di, idx, p->gone_at);
                /* Accepted, though its watch event has yet to say so: at the scale of hundreds of drains
                 * it comes seconds after the answer, and the PDB's status (another watch) may show the
                 * slot spent before. Planned as waiting, the pod would spend a second slot in the plan
                 * and its replacement's return would not be foreseen. */
                else if (r >= 0 && p->stop_at && (p->state == XPOD_EVICTED || p->state == XPOD_FORCED))
                        (void)drain_inputs_set_deleting(di, idx, p->stop_at);
                if (r >= 0 && drain_surge_input(x->surge, di, idx) == -ENOMEM)
                        return -ENOMEM;
                if (r >= 0) {
                        if (map)
                                map[*n] = p;
                        (*n)++;
                }
        }
        return 0;
}

/* For the ledger's joint plan, asked for namespaces then inputs: its pods as its informer knows them now,
 * though the drain has not acted on them yet (the ledger also plans on its own timer, which may come between
 * a pod list's arrival and the drain's look at it). 1: in line; 0: nothing to plan (finished, or the list
 * not in yet). */
static int pods_for_plan(struct drain_exec *x)
{
        if (x->finished || !kube_informer_synced(x->pods_inf))
                return 0;
        int r = exec_sync_pods(x);
        return r < 0 ? r : 1;
}

/* The ledger's add_inputs: this drain's node and pods in the joint plan. */
int exec_add_inputs(void *userdata, struct drain_inputs *di, struct drain_ledger_slice *slice)
{
        struct drain_exec *x = userdata;
        _cleanup_free_ struct xpod **map = NULL;
        size_t node, n = 0;
        int r;

        r = pods_for_plan(x);
        if (r <= 0)
                return r;
        if (slice && !(map = calloc(x->n_pods + 1, sizeof(*map))))
                return -ENOMEM;
        r = drain_inputs_add_node(di, x->node, x->deadline, x->margin, &node);
        if (r >= 0)
                r = drain_inputs_set_node_start(di, node, x->result.notice_usec);
        if (r < 0)
                return r;
        size_t first = drain_inputs_n_pods(di);
        r = add_pods(x, di, node, drain_inputs_now(di), map, &n);
        if (r >= 0 && x->lb_hold) {
                drain_inputs_mark_services(di, first, x->services);
                r = drain_inputs_set_node_lb_hold(di, node, x->lb_hold);
        }
        for (size_t k = 0; r >= 0 && x->lbt && k < n; k++) {
                long g = drain_lb_targets_find(x->lbt, drain_inputs_pod(di, first + k), true);
                const struct drain_lb_group *grp = g >= 0 ? drain_lb_targets_group(x->lbt, (size_t)g) : NULL;
                /* Not out yet: expected at the next answer about it. */
                if (grp)
                        r = drain_inputs_set_lb_target(di, first + k,
                                                       grp->out ? 0 : drain_inputs_now(di) + LB_POLL_USEC);
        }
        if (r < 0)
                return r;
        if (slice) {
                slice->node = node;
                slice->n_pods = n;
                free(x->next_map);
                x->next_map = TAKE_PTR(map);
        }
        return 0;
}

/* The ledger's namespaces: where this drain's pods are, so that their PDBs are planned. From the same pods
 * as add_inputs: from those the drain last acted on, a plan had new pods and none of their PDBs. */
int exec_add_namespaces(void *userdata, const char ***ns, size_t *n)
{
        struct drain_exec *x = userdata;
        int r = pods_for_plan(x);
        if (r < 0)
                return r;
        for (size_t i = 0; i < x->n_pods; i++) {
                const struct xpod *p = x->pods[i];
                if (p->state == XPOD_GONE && !p->ghost)
                        continue;
                if (*n > 0 && streq((*ns)[*n - 1], p->namespace))
                        continue;
                const char **a = realloc(*ns, (*n + 1) * sizeof(*a));
                if (!a)
                        return -ENOMEM;
                *ns = a;
                (*ns)[(*n)++] = p->namespace;
        }
        return 0;
}

/* Whether the plan asks anything else of this node's pods than the one acted on: what issue_pods() and
 * warn_pod() go by. */
static bool own_schedule_moved(const struct drain_exec *x, const struct drain_plan *plan,
                               const struct drain_ledger_slice *slice, struct xpod *const *map)
{
        if (!x->plan || x->n_own != slice->n_pods)
                return true;
        for (size_t i = 0; i < slice->n_pods; i++) {
                const struct drain_plan_pod *a = own_plan_pod(x, i), *b = &plan->pods[slice->first_pod + i];
                if (x->plan_pods[i] != map[i] || a->action != b->action || a->tier != b->tier ||
                    a->last_safe_usec != b->last_safe_usec || a->forced != b->forced ||
                    a->killed != b->killed || a->warnings != b->warnings)
                        return true;
        }
        return false;
}

/* The ledger's planned: the joint plan to act on from now. A drain acts on a new plan at once when it
 * changes what this node's pods are to do (others' changes alone do not concern it). */
void exec_planned(void *userdata, struct drain_joint *j, const struct drain_ledger_slice *slice)
{
        struct drain_exec *x = userdata;
        if (slice && x->next_map && own_schedule_moved(x, j->plan, slice, x->next_map))
                exec_kick(x);
        x->joint = drain_joint_unref(x->joint);
        free(x->plan_pods);
        x->plan_pods = NULL;
        x->plan = NULL;
        x->inputs = NULL;
        x->n_own = 0;
        if (!slice)
                return;
        x->joint = drain_joint_ref(j);
        x->plan = j->plan;
        x->inputs = j->inputs;
        x->slice = *slice;
        x->n_own = slice->n_pods;
        x->plan_pods = TAKE_PTR(x->next_map);
        if (x->lbt)
                exec_judge_lb_delays(x);
}

static void inputs_options(const struct drain_exec *x, uint64_t now, struct drain_inputs_options *ret)
{
        *ret = (struct drain_inputs_options){
                .now_usec = now,
                .policy = x->policy,
                .surge = drain_surge_get_mode(x->surge),
                .evict_daemonsets = x->evict_daemonsets,
                .default_startup_usec = x->default_startup,
                .critical_classes = (const char *const *)x->critical,
                .n_critical_classes = x->n_critical,
                .shutdowns = drain_ledger_shutdowns(x->ledger),
                .shutdown_basis = DRAIN_SHUTDOWN_SAFE,
                .expected_shutdown_fraction = x->expected_shutdown_fraction,
        };
}

/* The plan acted on (a pod's last safe moment allows it the longest stop it may take): the ledger's joint
 * plan of every node draining, made anew when something changed. */
int exec_replan(struct drain_exec *x, uint64_t now)
{
        struct drain_inputs_options io;
        const struct drain_plan *before = x->plan;
        inputs_options(x, now, &io);
        int r = drain_ledger_plan(x->ledger, x, &io);
        if (r < 0)
                return r;
        if (x->plan && x->plan != before)
                export_plan_metrics(x);
        return 0;
}

/* The graded verdict (drain_grade_node) on the drain as it stands: drain-infeasible when not even instant
 * stops of the pods never seen stopping would fit (or the stops seen say so), drain-at-risk naming the stop
 * time that would still fit, nothing when their whole grace periods fit. The plan acted on being feasible
 * with every unseen pod given its whole grace period, the drain fits and nothing more is planned. */
static void surge_verdict_fire(void *userdata)
{
        struct drain_exec *x = userdata;
        x->surge_verdict = NULL; /* released by the loop as it fired */
        x->act(x);
}

/* The graded verdict of the drain as it stands, its node's index in the plan graded in *ret_node; the
 * pair of estimates it was made from kept in the result (at the first grade, and the latest). */
static int grade_now(struct drain_exec *x, uint64_t now, struct drain_grade_result *g, size_t *ret_node)
{
        const struct drain_input *in = NULL;
        struct drain_inputs_options io;
        struct drain_grade_cache **grades = NULL;
        inputs_options(x, now, &io);
        if (drain_ledger_expected(x->ledger, &io, x->node, &in, ret_node, &grades) < 0) {
                in = drain_inputs_get(x->inputs); /* what is known */
                *ret_node = x->slice.node;
                grades = NULL;
        }
        /* The drains judged on one joint plan share the plans of its input. */
        int r =
            grades ? drain_grade_node_cached(in, *ret_node, grades, g) : drain_grade_node(in, *ret_node, g);
        if (r < 0) {
                log_debug_errno(r, "cannot grade the drain of %s", x->node);
                return r;
        }
        if (!x->result.outlook_first.known && g->outlook.known && x->result.judged_usec) {
                /* The first judgement's predictions are the slow estimate's: one number per fact. Not
                 * before it (the live view asks): it may wait for the startup times. */
                x->result.outlook_first = g->outlook;
                x->result.killed_predicted = (unsigned)g->outlook.slow.n_killed;
                x->result.predicted_finish_usec = g->outlook.slow.finish_usec == DRAIN_NEVER
                                                      ? DRAIN_NEVER
                                                      : now + g->outlook.slow.finish_usec;
        }
        x->result.outlook = g->outlook;
        return 0;
}

int drain_exec_update_outlook(struct drain_exec *x)
{
        _cleanup_(drain_grade_result_clear) struct drain_grade_result g = { 0 };
        size_t node;
        if (!x || !x->plan || x->no_deadline || x->finished)
                return 0;
        return grade_now(x, clk_now(), &g, &node);
}

/* Puts the first judgement off until what it waits for comes (which kicks the drain) or the bound from the
 * drain's start does (fire): true when put off, false when it is to be made now (no timer: out of memory,
 * and better now than late). *on says that it waits. */
static bool judge_later(struct drain_exec *x, bool *on, struct timer **wait, uint64_t bound, timer_fn fire)
{
        *on = true;
        if (*wait || timer_start(x->loop, x->result.started_usec + bound, fire, x, wait) >= 0)
                return true;
        *on = false;
        return false;
}

static void judged(struct drain_exec *x, bool first, uint64_t now)
{
        if (first && !x->result.judged_usec)
                x->result.judged_usec = now;
}

void exec_judge(struct drain_exec *x, uint64_t now, bool first)
{
        _cleanup_(drain_grade_result_clear) struct drain_grade_result g = { 0 };
        size_t node;
        x->judged_pods = x->plan->n_pods;
        x->judged_shutdowns = drain_shutdowns_generation(drain_ledger_shutdowns(x->ledger));
        /* Without a deadline there is no "in time" to judge: pods a PDB holds wait, killed by nobody. */
        if (x->no_deadline) {
                judged(x, first, now);
                return;
        }
        if (first && !x->result.infeasible) {
                /* The operator's rate cap, not the cluster, may be what decides: say so. */
                struct drain_api_budget b;
                double qps;
                unsigned burst;
                kube_client_limit(x->c, &qps, &burst);
                bool short_ = drain_api_budget_short(drain_inputs_get(x->inputs), x->plan, x->slice.node,
                                                     qps, burst, &b) > 0;
                /* Each eviction brings its pod's Event: when the two do not fit the rate before the
                 * deadline, the Events give way to the evictions (the other sinks still have the alerts). */
                if (b.needed > 0 && 2 * b.needed > b.allowed)
                        kube_client_events_yield(x->c, x->deadline);
                if (short_) {
                        x->result.infeasible = true;
                        judged(x, first, now);
                        drain_api_budget_alert(x->bus, x->node, &b);
                        return;
                }
        }
        /* The siblings' startup times are still being listed (or not yet planned with): the plan guessed the
         * default startup for each replacement, which may be all that makes it too long, or too short to
         * show that it cannot fit. Either grade would rest on the guess: the lists' answers kick the drain
         * (the plan made with them wakes it), and with it the first judgement; lists that never answer
         * leave it to the timer at the bound. */
        if (first && exec_startups_unplanned(x) &&
            now < x->result.started_usec + STARTUPS_VERDICT_WAIT_USEC) {
                log_debug("drain of %s: judged once its pods' siblings are listed (startup times)", x->node);
                if (judge_later(x, &x->judge_on_startups, &x->startups_wait, STARTUPS_VERDICT_WAIT_USEC,
                                exec_startups_wait_fire))
                        return;
        }
        judged(x, first, now);
        if (grade_now(x, now, &g, &node) < 0)
                return;
        if (g.grade == DRAIN_GRADE_FITS || (g.grade == DRAIN_GRADE_AT_RISK && x->result.at_risk))
                return;
        /* Judged again mid-drain, a PDB that allows no disruption right now is most often short of a
         * replacement still starting for an eviction elsewhere (another agent's node, an earlier wave) that
         * this plan cannot see coming back: not a reason to cry wolf. A PDB blocked for good was blocked at
         * the notice already, where the first judgement alerts; the deadline confirms the rest. */
        int lb = g.plan ? g.plan->nodes[node].limiting_pdb : -1;
        if (!first && lb >= 0 && g.plan->pdbs[lb].k <= 0) {
                log_debug("drain of %s: PDB %s/%s allows no disruption now; not judged infeasible mid-drain",
                          x->node, g.plan->pdbs[lb].namespace, g.plan->pdbs[lb].name);
                return;
        }
        /* The kept estimates are being read: a grade that learnt stops may lift waits for them. */
        if (first && x->estimates && !drain_estimates_loaded(x->estimates) &&
            now < x->result.started_usec + ESTIMATES_VERDICT_WAIT_USEC) {
                log_debug("drain of %s: judged once the kept estimates are read", x->node);
                x->judge_on_estimates = true;
                if (!x->estimates_wait &&
                    timer_start(x->loop, x->result.started_usec + ESTIMATES_VERDICT_WAIT_USEC,
                                exec_estimates_wait_fire, x, &x->estimates_wait) < 0)
                        x->estimates_wait = NULL;
                return;
        }
        x->judge_on_estimates = false;
        /* A pod whose Deployment is still being read may yet surge (drain.surge), which is what lets a
         * PDB that allows nothing go: the first judgement waits for the reads, within a bound, rather than
         * cry wolf on a slow answer. */
        if (first && g.grade == DRAIN_GRADE_INFEASIBLE && drain_surge_learning(x->surge) &&
            now < x->result.started_usec + SURGE_VERDICT_WAIT_USEC) {
                log_debug("drain of %s: judged once its Deployments are read (surge)", x->node);
                /* Surge's answer kicks the drain, and with it the judgement; reads that never answer
                 * leave it to the timer at the bound. */
                if (judge_later(x, &x->judge_on_surge, &x->surge_verdict, SURGE_VERDICT_WAIT_USEC,
                                surge_verdict_fire))
                        return;
        }
        if (g.grade == DRAIN_GRADE_AT_RISK)
                x->result.at_risk = true;
        else
                x->result.infeasible = true;
        drain_grade_alert(x->bus, x->node, &g, node);
}

/* At the notice, each target group of the node's pods once its delay is known: a delay longer than the time
 * left cannot drain before the instance goes (lb-deregistration-too-slow, with the delay that would fit). */
void exec_judge_lb_delays(struct drain_exec *x)
{
        size_t n = drain_lb_targets_count(x->lbt);
        uint64_t now = clk_now(), end = x->deadline > x->margin ? x->deadline - x->margin : 0;
        if (n == 0 || x->no_deadline || !x->inputs || !x->plan)
                return;
        if (!x->lb_said && !(x->lb_said = calloc(n, sizeof(*x->lb_said))))
                return;
        for (size_t i = 0; i < n; i++) {
                const struct drain_lb_group *g = drain_lb_targets_group(x->lbt, i);
                bool serves = false;
                if (x->lb_said[i] || g->delay_seconds < 0)
                        continue;
                for (size_t k = 0; k < x->n_own && !serves; k++)
                        serves = drain_lb_targets_find(x->lbt,
                                                       drain_inputs_pod(x->inputs, x->slice.first_pod + k),
                                                       false) == (long)i;
                if (!serves)
                        continue;
                x->lb_said[i] = true;
                uint64_t left = end > now ? end - now : 0;
                if ((uint64_t)g->delay_seconds * USEC_PER_SEC <= left)
                        continue;
                char delay[24], fits[24];
                snprintf(delay, sizeof(delay), "%ld", g->delay_seconds);
                snprintf(fits, sizeof(fits), "%" PRIu64, left / USEC_PER_SEC);
                const char *fields[] = {
                        "target_group", g->arn,         "binding", g->binding, "delay_seconds",
                        delay,          "fits_seconds", fits,      NULL
                };
                alert_emit(
                    x->bus, ALERT_LB_DEREGISTRATION_TOO_SLOW, x->node, fields,
                    "target group %s (TargetGroupBinding %s) drains its targets for %s s, longer than "
                    "the %s s %s has left: its pods' connections are cut when the instance goes; a "
                    "deregistration_delay.timeout_seconds of %s or less would fit",
                    g->arn, g->binding, delay, fits, x->node, fits);
        }
}
