/* The drain executor: carries a drain plan out against the Kubernetes API and re-plans as the cluster
 * answers. Everything happens in act(), which runs on the loop after anything changed (coalesced through a
 * zero-delay timer) and at the next instant something is due (a last safe moment, a retry floor, the
 * deadline). act() reads the informers' state, re-plans (the planner is pure and cheap), then issues what
 * the plan and the PDB budgets allow. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "drain/drain_internal.h"
#include "drain/executor_internal.h"
#include "spotdrain/alert.h"
#include "spotdrain/config.h"
#include "spotdrain/engine.h"
#include "spotdrain/keys.h"
#include "spotdrain/kube.h"
#include "spotdrain/metrics.h"
#include "spotdrain/node.h"
#include "spotdrain/surge.h"

#define DEFAULT_FLOOR_USEC   (200 * UINT64_C(1000))
#define DEFAULT_STARTUP_USEC (30 * USEC_PER_SEC)

/* The share of its grace period a pod is expected to take to stop before any of its kind was seen. */
#define DEFAULT_EXPECTED_SHUTDOWN 0.5

/* How long the first plan waits for sibling startup measurements before it goes with the defaults. */
#define STARTUP_WAIT_USEC (500 * UINT64_C(1000))

/* ---- finishing ---- */

static unsigned count_left(const struct drain_exec *x)
{
        unsigned n = 0;
        if (!x->plan)
                return 0;
        for (size_t i = 0; i < x->n_own; i++)
                if (own_plan_pod(x, i)->action != DRAIN_ACTION_LEAVE && x->plan_pods[i]->state != XPOD_GONE)
                        n++;
        return n;
}

/* "ns/name, ..." of the node's pods that were killed at the end of their grace (with_node false) or with
 * their node (true), "" for none; their number in *ret_n. */
static char *killed_names(const struct drain_exec *x, bool with_node, unsigned *ret_n)
{
        _cleanup_(buf_free) struct buf b = { 0 };
        *ret_n = 0;
        if (buf_append(&b, "", 1) < 0)
                return NULL;
        b.len = 0;
        for (size_t i = 0; i < x->n_pods; i++) {
                const struct xpod *p = x->pods[i];
                if (!p->killed || p->gone_with_node != with_node)
                        continue;
                if (buf_printf(&b, "%s%s/%s", b.len ? ", " : "", p->namespace, p->name) < 0)
                        return NULL;
                (*ret_n)++;
        }
        return TAKE_PTR(b.data);
}

char *drain_exec_left_names(const struct drain_exec *x)
{
        _cleanup_(buf_free) struct buf b = { 0 };
        if (buf_append(&b, "", 1) < 0)
                return NULL;
        b.len = 0;
        if (!x->plan)
                return TAKE_PTR(b.data);
        for (size_t i = 0; i < x->n_own; i++) {
                const struct xpod *p = x->plan_pods[i];
                if (own_plan_pod(x, i)->action == DRAIN_ACTION_LEAVE || p->state == XPOD_GONE)
                        continue;
                if (buf_printf(&b, "%s%s/%s", b.len ? ", " : "", p->namespace, p->name) < 0)
                        return NULL;
        }
        return TAKE_PTR(b.data);
}

/* Without userdata: a call still under way when the client goes is freed without its callback. */
static void oos_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        if (r->error < 0 && r->error != -ENOENT)
                log_warning_errno(r->error, "cannot add the %s taint: %s", SPOTDRAIN_TAINT_OUT_OF_SERVICE,
                                  r->message ? r->message : "no answer");
}

/* Whether the node holds nothing but what is never drained (DaemonSet and mirror pods, the agent's own):
 * a pod the configuration keeps there (a skip, emptyDir data) is still running, and the out-of-service
 * taint would have it deleted under it. */
static bool node_empty(const struct drain_exec *x)
{
        for (size_t i = 0; i < x->n_pods; i++)
                if (x->pods[i]->leave && x->pods[i]->state != XPOD_GONE)
                        return false;
        return true;
}

/* drain.out_of_service_taint: a node that is empty or gone (its deadline came) is tainted
 * node.kubernetes.io/out-of-service=nodeshutdown:NoExecute, so that what is left there is deleted and its
 * volumes detach at once rather than after the attach/detach controller's 6 minutes. Sent on its own: it
 * outlives the executor. */
static void taint_out_of_service(struct drain_exec *x, enum drain_exec_outcome outcome)
{
        if (!x->out_of_service || outcome == DRAIN_EXEC_ERROR ||
            (outcome == DRAIN_EXEC_DRAINED && !node_empty(x)))
                return;
        if (node_out_of_service(x->c, x->node, oos_done, NULL, NULL) < 0)
                log_warning("cannot taint %s %s", x->node, SPOTDRAIN_TAINT_OUT_OF_SERVICE);
}

static void finish(struct drain_exec *x, enum drain_exec_outcome outcome, int error, const char *why);
static void surge_restored(void *userdata)
{
        struct drain_exec *x = userdata;
        finish(x, (enum drain_exec_outcome)(x->wait_outcome - 1), x->wait_error, NULL);
}

/* Adds "; " and more (taken) to x->message, which is left as it is out of memory. */
static void message_add(struct drain_exec *x, char *more)
{
        _cleanup_free_ char *m = more;
        char *joined = x->message && m ? strprintf("%s; %s", x->message, m) : NULL;
        if (joined) {
                free(x->message);
                x->message = joined;
        }
}

static void finish(struct drain_exec *x, enum drain_exec_outcome outcome, int error, const char *why)
{
        uint64_t now = clk_now();
        char secs[32], evicted[16], forced[16], left[16];

        if (x->finished)
                return;
        /* Deployments surged for it are put back before it ends (surge.h). */
        if (drain_surge_finish(x->surge, surge_restored, x) > 0) {
                if (!x->wait_outcome)
                        x->wait_outcome = (int)outcome + 1, x->wait_error = error;
                return;
        }
        x->finished = true;
        x->kick = timer_cancel(x->kick);
        x->wake = timer_cancel(x->wake);
        x->surge_verdict = timer_cancel(x->surge_verdict);
        x->startups_wait = timer_cancel(x->startups_wait);
        for (size_t i = 0; i < x->n_pods; i++)
                xpod_cancel(x->pods[i]);
        /* Its pods wait for no slot any more, and the others no longer drain beside it; but the slots its
         * gone pods give back once their replacements are Ready are still to come for them. */
        for (size_t i = 0; x->joined && i < x->n_pods; i++) {
                struct xpod *p = x->pods[i];
                /* Handed over, not copied: the drain plans no more. */
                if (p->ghost && p->ghost_until > now &&
                    drain_ledger_keep_ghost(x->ledger, x->node, x->deadline, x->margin, TAKE_PTR(p->ghost),
                                            p->gone_at, p->ghost_until) < 0)
                        log_debug("out of memory handing the ledger the pods of %s", x->node);
        }
        if (x->joined)
                drain_ledger_leave(x->ledger, x);
        x->joined = false;
        /* The drains of other processes were followed for this one: it no longer drains beside them. */
        x->peers = drain_peers_free(x->peers);

        taint_out_of_service(x, outcome);
        /* The node is going: what the API has not answered of the pods still on it is given up. */
        if (now >= x->deadline)
                for (size_t i = 0; i < x->n_pods; i++)
                        drain_postmortem_flush(x->pods[i]->pm_killed);
        if (outcome == DRAIN_EXEC_ERROR)
                x->kill_timer = timer_cancel(x->kill_timer);
        x->result.outcome = outcome;
        x->result.error = error;
        x->result.finished_usec = now;
        x->result.left = count_left(x);
        x->result.pods_unseen = !kube_informer_synced(x->pods_inf);
        unsigned n_grace_killed, n_node_killed;
        _cleanup_free_ char *grace_killed = killed_names(x, false, &n_grace_killed);
        _cleanup_free_ char *node_killed = killed_names(x, true, &n_node_killed);
        x->result.killed = n_grace_killed + n_node_killed;
        /* An instance's deadline is its end: what is still on the node then dies with it. */
        if (outcome == DRAIN_EXEC_DEADLINE_MISSED && !x->deadline_chosen && !x->result.pods_unseen)
                x->result.killed += x->result.left;
        /* The node went before its pods did: not drained, whatever deadline the drain was given. */
        if (outcome == DRAIN_EXEC_DRAINED && n_node_killed > 0)
                outcome = x->result.outcome = DRAIN_EXEC_DEADLINE_MISSED;
        snprintf(secs, sizeof(secs), "%.1f", (double)(now - x->result.notice_usec) / (double)USEC_PER_SEC);
        snprintf(evicted, sizeof(evicted), "%u", x->result.evicted);
        snprintf(forced, sizeof(forced), "%u", x->result.forced);
        if (x->result.pods_unseen)
                snprintf(left, sizeof(left), "unknown");
        else
                snprintf(left, sizeof(left), "%u", x->result.left);
        /* What happened beside what the drain's first judgement said would (the two estimates). */
        struct drain_outlook_fields of;
        const char *fields[8 + 8 + 1] = {
                "seconds", secs, "evicted", evicted, "forced", forced, "left", left
        };
        fields[drain_outlook_add_fields(&x->result.outlook_first, &of, fields, 8)] = NULL;

        if (outcome == DRAIN_EXEC_DRAINED) {
                char before[64] = "";
                if (!x->no_deadline)
                        snprintf(before, sizeof(before), " (%.1f s before the deadline)",
                                 (double)(x->deadline > now ? x->deadline - now : 0) / (double)USEC_PER_SEC);
                x->message = strprintf(
                    "drained %s %s s after the notice%s: %u evicted, %u forced; cordoned at %.1f s, "
                    "planned at %.1f s",
                    x->node, secs, before, x->result.evicted, x->result.forced,
                    x->result.cordoned_usec
                        ? (double)(x->result.cordoned_usec - x->result.notice_usec) / (double)USEC_PER_SEC
                        : -1.0,
                    x->result.planned_usec
                        ? (double)(x->result.planned_usec - x->result.notice_usec) / (double)USEC_PER_SEC
                        : -1.0);
                if (x->result.lb_held)
                        message_add(x,
                                    strprintf("%u pod%s behind a Service held %.1f s for the load balancers",
                                              x->result.lb_held, x->result.lb_held == 1 ? "" : "s",
                                              (double)(x->lb_dereg) / (double)USEC_PER_SEC));
                if (n_grace_killed > 0)
                        message_add(x, strprintf("%u pod%s killed at the end of %s grace: %s",
                                                 n_grace_killed, n_grace_killed == 1 ? "" : "s",
                                                 n_grace_killed == 1 ? "its" : "their",
                                                 grace_killed ? grace_killed : ""));
                alert_emit(x->bus, ALERT_DRAIN_COMPLETED, x->node, fields, "%s",
                           x->message ? x->message : "drained");
        } else if (outcome == DRAIN_EXEC_DEADLINE_MISSED && n_node_killed > 0) {
                x->message =
                    strprintf("node %s went %s s after the notice with %u pod%s still on it, killed "
                              "with it: %s; %u evicted, %u forced",
                              x->node, secs, n_node_killed, n_node_killed == 1 ? "" : "s",
                              node_killed ? node_killed : "", x->result.evicted, x->result.forced);
                if (n_grace_killed > 0)
                        message_add(x, strprintf("%u more killed at the end of %s grace: %s", n_grace_killed,
                                                 n_grace_killed == 1 ? "its" : "their",
                                                 grace_killed ? grace_killed : ""));
                alert_emit(x->bus, ALERT_DEADLINE_MISSED, x->node, fields, "%s",
                           x->message ? x->message : "deadline missed");
        } else if (outcome == DRAIN_EXEC_DEADLINE_MISSED && x->result.pods_unseen) {
                /* Nothing is known of what was left: no count, which would read as none. */
                x->message = strprintf("deadline of %s passed before its pods could be listed; "
                                       "the API server did not answer in time",
                                       x->node);
                alert_emit(x->bus, ALERT_DEADLINE_MISSED, x->node, fields, "%s",
                           x->message ? x->message : "deadline missed");
        } else if (outcome == DRAIN_EXEC_DEADLINE_MISSED) {
                _cleanup_free_ char *names = drain_exec_left_names(x);
                x->message = strprintf("deadline of %s passed with %u pod%s left: %s", x->node,
                                       x->result.left, x->result.left == 1 ? "" : "s", names ? names : "");
                alert_emit(x->bus, ALERT_DEADLINE_MISSED, x->node, fields, "%s",
                           x->message ? x->message : "deadline missed");
        } else
                x->message = strprintf("cannot drain %s: %s", x->node, error_reason(error, why));
        x->result.message = x->message;
        /* The per-node gauges describe drains under way only. */
        metrics_remove(x->metrics, METRIC_DRAIN_BUDGET_SECONDS, x->node, NULL);
        metrics_remove(x->metrics, METRIC_DRAIN_PREDICTED_SECONDS, x->node, NULL);
        if (x->done)
                x->done(x, &x->result, x->userdata);
}

/* ---- startup estimates: one list per owner, selected by the pod's own labels ---- */

static void startup_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct startup_call *sc = userdata;
        struct drain_exec *x = sc->x;
        struct drain_startup *s = NULL;
        size_t n = 0;

        sc->call = NULL;
        /* Those of them starting (another node's drain's replacements) explain a PDB's shortfall. */
        if (r->error >= 0)
                drain_ledger_note_starting(x->ledger, kube_list_items(r->object));
        if (r->error >= 0 && drain_startups_measure(kube_list_items(r->object), &s, &n) >= 0) {
                if (drain_ledger_add_startups(x->ledger, s, n) < 0)
                        log_debug("out of memory keeping startup estimates");
                drain_startups_free(s, n);
        } else
                log_debug_errno(r->error, "cannot list sibling pods, using the default startup estimate");
        drain_ledger_startup_answered(x->ledger, sc->owner_key);
        x->startups_pending--;
        exec_kick(x);
}

static bool startup_asked(const struct drain_exec *x, const char *key)
{
        for (size_t i = 0; i < x->n_startup_calls; i++)
                if (streq(x->startup_calls[i].owner_key, key))
                        return true;
        return false;
}

static void start_startups(struct drain_exec *x)
{
        x->startups_started = true;
        /* One slot per pod at most; without memory the defaults serve. */
        x->startup_calls = calloc(kube_informer_size(x->pods_inf) + 1, sizeof(*x->startup_calls));
        if (!x->startup_calls)
                return;
        for (size_t i = 0; i < kube_informer_size(x->pods_inf); i++) {
                _cleanup_(kube_pod_clear) struct kube_pod p = { 0 };
                _cleanup_free_ char *key = NULL, *selector = NULL, *path = NULL;

                if (kube_pod_parse(kube_informer_at(x->pods_inf, i), &p) < 0 || !(key = drain_owner_key(&p)))
                        continue;
                drain_surge_learn(x->surge, &p);
                /* DaemonSet and mirror pods are left: their startup does not matter. */
                if (p.mirror || (streq_ptr(p.owner_kind, "DaemonSet") && !x->evict_daemonsets))
                        continue;
                if (startup_asked(x, key))
                        continue;
                /* Another drain of this process measured the owner already. */
                uint64_t known;
                if (drain_ledger_startup(x->ledger, key, &known))
                        continue;
                /* Another drain's list of them is under way: its answer serves both. */
                if (drain_ledger_startup_wait(x->ledger, x, key))
                        continue;
                if (!(selector = drain_sibling_selector(&p)) ||
                    !(path = kube_path(NULL, "v1", p.namespace, "pods", NULL, NULL)))
                        continue;
                struct startup_call *sc = &x->startup_calls[x->n_startup_calls];
                struct kube_list_options lo = { .label_selector = selector };
                sc->x = x;
                if (kube_list(x->c, path, &lo, startup_done, sc, &sc->call) < 0)
                        continue;
                if (drain_ledger_startup_asking(x->ledger, key) < 0)
                        log_debug("out of memory sharing the sibling list of %s", key);
                sc->owner_key = TAKE_PTR(key);
                x->n_startup_calls++;
                x->startups_pending++;
        }
}

/* ---- the heart ---- */

static void act(struct drain_exec *x)
{
        uint64_t now = clk_now();
        int r;

        if (x->finished || !kube_informer_synced(x->pods_inf) || !drain_ledger_synced(x->ledger) ||
            !drain_peers_settled(x->peers)) {
                if (!x->finished && now >= x->deadline)
                        finish(x, DRAIN_EXEC_DEADLINE_MISSED, 0, NULL);
                return;
        }
        if (!x->startups_started)
                start_startups(x);
        /* The first plan acted on waits for the measurements (they answer in one round trip) so that the
         * infeasible verdict is not raised on guesses, but not long: the alert is due within a second of the
         * notice. Later plans use what is known. (The joint plan another drain made may be here already.) */
        if (!x->result.planned_usec &&
            (exec_startups_pending(x) || x->services_call || drain_surge_learning(x->surge)) &&
            now < x->result.started_usec + STARTUP_WAIT_USEC && now < x->deadline) {
                exec_arm_wake(x, MIN(x->result.started_usec + STARTUP_WAIT_USEC, x->deadline));
                return;
        }

        r = exec_sync_pods(x);
        if (r >= 0)
                r = exec_replan(x, now);
        if (r < 0) {
                /* Keep going on the last plan; retry soon. */
                log_debug_errno(r, "cannot plan the drain of %s", x->node);
                if (!x->plan) {
                        if (now >= x->deadline)
                                finish(x, DRAIN_EXEC_ERROR, r, "cannot plan");
                        else
                                exec_arm_wake(x, MIN(now + exec_retry_delay(x), x->deadline));
                        return;
                }
        }
        if (!x->plan) {
                /* The joint plan comes after a burst of changes: the ledger wakes us with it. */
                if (now >= x->deadline)
                        finish(x, DRAIN_EXEC_DEADLINE_MISSED, 0, NULL);
                return;
        }
        if (!x->result.planned_usec) {
                x->result.planned_usec = now;
                x->result.predicted_finish_usec = own_node(x)->finish_usec;
                x->result.killed_predicted = x->no_deadline ? 0 : (unsigned)own_node(x)->n_killed;
                x->result.lb_held = (unsigned)own_node(x)->n_lb_held;
                x->result.lb_held_until_usec = x->result.lb_held ? own_node(x)->lb_hold_usec : 0;
                exec_judge(x, now, true);
        } else if (x->judge_on_surge || x->judge_on_estimates || x->judge_on_startups) {
                bool surge_wait = x->judge_on_surge && drain_surge_learning(x->surge) &&
                                  now < x->result.started_usec + SURGE_VERDICT_WAIT_USEC;
                bool estimates_wait = x->judge_on_estimates && !drain_estimates_loaded(x->estimates) &&
                                      now < x->result.started_usec + ESTIMATES_VERDICT_WAIT_USEC;
                bool startups_wait = x->judge_on_startups && exec_startups_unplanned(x) &&
                                     now < x->result.started_usec + STARTUPS_VERDICT_WAIT_USEC;
                /* Judged once more, whatever the grade: a fitting one ends the waits as an alert does. */
                if (!surge_wait && !estimates_wait && !startups_wait) {
                        x->judge_on_surge = x->judge_on_estimates = x->judge_on_startups = false;
                        x->surge_verdict = timer_cancel(x->surge_verdict);
                        x->estimates_wait = timer_cancel(x->estimates_wait);
                        x->startups_wait = timer_cancel(x->startups_wait);
                        exec_judge(x, now, true);
                }
        } else if (!x->result.infeasible && count_left(x) > 0 &&
                   (x->plan->n_pods > x->judged_pods ||
                    drain_shutdowns_generation(drain_ledger_shutdowns(x->ledger)) != x->judged_shutdowns)) {
                /* More pods drain beside this node's than when it was judged (another drain started or
                 * came to know its pods): PDBs shared with them may not be honoured across all. Or pods
                 * were seen taking longer to stop than expected. Within the ledger's share of the time:
                 * one put off wakes the drain when its turn comes. A drain with no pod left is not judged
                 * again: it finishes below (the stop that was learnt was its last pod's). */
                x->rejudge_at = drain_ledger_rejudge_at(x->ledger);
                if (now >= x->rejudge_at) {
                        uint64_t start = clk_now();
                        x->rejudge_at = 0;
                        exec_judge(x, now, false);
                        drain_ledger_rejudged(x->ledger, start, clk_now());
                }
        }
        /* A node that does not exist has no pods either: wait for the cordon's answer to tell. */
        if (count_left(x) == 0 && !x->cordon_call) {
                finish(x, DRAIN_EXEC_DRAINED, 0, NULL);
                return;
        }
        if (now >= x->deadline) {
                finish(x, DRAIN_EXEC_DEADLINE_MISSED, 0, NULL);
                return;
        }
        /* Beside another drainer: its evictions, not ours; this drain watches the node empty out. */
        if (x->cordon_only) {
                exec_arm_wake(x, x->deadline);
                return;
        }
        drain_surge_round(x->surge, x->inputs, x->plan, x->slice.first_pod, x->n_own);
        r = exec_issue(x, now);
        if (r < 0) {
                log_debug_errno(r, "cannot act on the drain of %s", x->node);
                exec_arm_wake(x, MIN(now + exec_retry_delay(x), x->deadline));
        }
}

/* ---- node: cordon, taint, annotation ---- */

static void cordon_done(struct kube_client *c, struct kube_result *r, void *userdata);
static void marks_start(struct drain_exec *x, const cJSON *node);

static void cordon_again(void *userdata)
{
        struct drain_exec *x = userdata;
        x->cordon_retry = NULL;
        if (x->finished || x->cordon_call)
                return;
        if (node_cordon(x->c, x->node, true, cordon_done, x, &x->cordon_call) < 0)
                x->cordon_call = NULL;
}

static void cordon_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct drain_exec *x = userdata;
        x->cordon_call = NULL;
        if (r->error == -ENOENT) {
                finish(x, DRAIN_EXEC_ERROR, r->error, "no such node");
                return;
        }
        if (r->error < 0) {
                const char *fields[] = { "node", x->node, NULL };
                uint64_t delay = backoff_next(&x->cordon_backoff);
                log_full_reason(LOG_WARNING, r->error, r->message, fields,
                                "cannot cordon %s, draining anyway and trying again in %.1f s", x->node,
                                (double)delay / 1e6);
                /* Until it is cordoned, pods evicted from the node may be scheduled right back onto it. */
                if (timer_start_in(x->loop, delay, cordon_again, x, &x->cordon_retry) < 0)
                        x->cordon_retry = NULL;
                x->cordon_answered = true;
                marks_start(x, NULL);
                exec_kick(x);
                return;
        }
        x->result.cordoned_usec = clk_now();
        x->cordon_answered = true;
        marks_start(x, r->object);
        exec_kick(x);
}

static void taint_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct drain_exec *x = userdata;
        x->taint_call = NULL;
        /* A missing node is reported by the cordon. */
        if (r->error < 0 && r->error != -ENOENT) {
                const char *fields[] = { "node", x->node, NULL };
                log_full_reason(LOG_WARNING, r->error, r->message, fields,
                                "cannot taint %s, draining anyway", x->node);
        }
}

static void annotate_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct drain_exec *x = userdata;
        x->annotate_call = NULL;
        if (r->error < 0)
                log_debug_errno(r->error, "cannot record the drain on node %s", x->node);
}

static void lb_done(struct kube_client *c, struct kube_result *r, void *userdata);

static int lb_label(struct drain_exec *x)
{
        return node_lb_exclude(x->c, x->node, true, lb_done, x, &x->lb_call);
}

static void lb_again(void *userdata)
{
        struct drain_exec *x = userdata;
        x->lb_retry = NULL;
        if (!x->finished && !x->lb_call && lb_label(x) < 0)
                x->lb_call = NULL;
}

static void lb_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct drain_exec *x = userdata;
        x->lb_call = NULL;
        if (r->error < 0 && r->error != -ENOENT) {
                const char *fields[] = { "node", x->node, NULL };
                uint64_t delay = backoff_next(&x->lb_backoff);
                log_full(LOG_WARNING, r->error, fields,
                         "cannot label %s %s (%s), draining anyway and trying again in %.1f s", x->node,
                         SPOTDRAIN_LABEL_EXCLUDE_LB, r->message ? r->message : "no answer",
                         (double)delay / 1e6);
                if (timer_start_in(x->loop, delay, lb_again, x, &x->lb_retry) < 0)
                        x->lb_retry = NULL;
        }
        /* A missing node is reported by the cordon. The deregistration delay counts from here. */
        if (!x->lb_answered && x->lb_dereg)
                x->lb_hold = clk_now() + x->lb_dereg;
        x->lb_answered = true;
        exec_pods_changed(x);
}

/* How many times the marks are read and patched again after a 409, before they go one at a time. */
#define MARKS_CONFLICTS 3

static char *record_value(const struct drain_exec *x)
{
        return drain_record_format(x->kind, x->deadline, x->result.started_usec, x->instance_id, x->event_id,
                                   x->cordoned_before);
}

/* The taint, the load balancers' label and the record, one call each. */
static int marks_each(struct drain_exec *x)
{
        int r;
        if (x->exclude_lb && (r = lb_label(x)) < 0)
                return r;
        r = node_drain_taint(x->c, x->node, x->taint_key, x->kind, x->no_execute, true, taint_done, x,
                             &x->taint_call);
        if (r < 0)
                return r;
        _cleanup_free_ char *value = record_value(x);
        if (!value)
                return -ENOMEM;
        return node_record(x->c, x->node, value, annotate_done, x, &x->annotate_call);
}

static void marks_sent_each(struct drain_exec *x)
{
        int e = marks_each(x);
        if (e < 0)
                log_warning_errno(e, "cannot taint, label or record the drain on %s", x->node);
}

static void marks_done(struct kube_client *c, struct kube_result *r, void *userdata);

/* The marks in one patch on node as read or as its cordon answered; < 0: not sent. */
static int marks_send(struct drain_exec *x, const cJSON *node)
{
        _cleanup_free_ char *value = record_value(x);
        struct node_marks m = {
                .taint_key = x->taint_key,
                .kind = x->kind,
                .no_execute = x->no_execute,
                .lb = x->exclude_lb,
                .record = value,
        };
        if (!value)
                return -ENOMEM;
        return node_drain_marks(x->c, node, &m, marks_done, x, &x->taint_call);
}

static void marks_read_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct drain_exec *x = userdata;
        x->taint_call = NULL;
        if (r->error < 0 || marks_send(x, r->object) < 0)
                marks_sent_each(x);
}

/* The answer to the marks in one patch: as the label's when it carried it. The node changed since it was
 * read (409: a kubelet's status, someone else's label): read again and patch again, a few times. Refused
 * (an admission policy refusing one of them): one at a time, so that each says what failed and retries on
 * its own. */
static void marks_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct drain_exec *x = userdata;
        x->taint_call = NULL;
        if (r->error >= 0 || r->error == -ENOENT) { /* a missing node is reported by the cordon */
                if (x->exclude_lb)
                        lb_done(c, r, x);
                return;
        }
        if (r->http_status == 409 && x->marks_conflicts < MARKS_CONFLICTS) {
                _cleanup_free_ char *path = kube_path(NULL, "v1", NULL, "nodes", x->node, NULL);
                x->marks_conflicts++;
                if (path && kube_get(x->c, path, marks_read_done, x, &x->taint_call) >= 0)
                        return;
        }
        /* Worth a line: an admission policy or webhook refusing one of them, or a node that keeps changing.
         */
        log_info("node %s: the drain's taint, label and record in one patch were refused (%s): making them "
                 "one at a time",
                 x->node, r->message ? r->message : strerror(-r->error));
        marks_sent_each(x);
}

/* After the cordon's first answer (node: the Node as it answered; NULL: the cordon failed): the taint,
 * the label and the record in one patch on the node as cordoned. */
static void marks_start(struct drain_exec *x, const cJSON *node)
{
        if (x->marks_started || x->finished)
                return;
        x->marks_started = true;
        if (!node || marks_send(x, node) < 0)
                marks_sent_each(x);
}

static void lb_targets_changed(void *userdata)
{
        struct drain_exec *x = userdata;
        exec_judge_lb_delays(x);
        exec_pods_changed(x);
}

static void services_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct drain_exec *x = userdata;
        x->services_call = NULL;
        if (r->error >= 0)
                x->services = cJSON_Duplicate(kube_list_items(r->object), true);
        else
                log_warning_errno(r->error,
                                  "cannot list Services (%s): no pod is held for the load balancers on %s",
                                  r->message ? r->message : "no answer", x->node);
        exec_pods_changed(x);
}

/* The cordon first: the marks go out on its answer (marks_start()). */
static int start_node_changes(struct drain_exec *x)
{
        int r;

        x->cordon_backoff = BACKOFF_INIT(200 * 1000ULL, 5 * 1000000ULL);
        x->lb_backoff = BACKOFF_INIT(200 * 1000ULL, 5 * 1000000ULL);
        r = node_cordon(x->c, x->node, true, cordon_done, x, &x->cordon_call);
        if (r < 0)
                return r;
        if (x->lb_dereg &&
            (r = kube_list(x->c, "/api/v1/services", &(struct kube_list_options){ .priority = true },
                           services_done, x, &x->services_call)) < 0)
                return r;
        return 0;
}

static void node_read_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct drain_exec *x = userdata;
        int e;

        x->node_call = NULL;
        if (r->error == -ENOENT) {
                finish(x, DRAIN_EXEC_ERROR, r->error, "no such node");
                return;
        }
        if (r->error < 0) {
                /* Unknown: taken as someone else's, so that no operator's cordon is ever undone. */
                const char *fields[] = { "node", x->node, NULL };
                log_full_reason(LOG_WARNING, r->error, r->message, fields,
                                "cannot read %s before its cordon; it stays cordoned after the maintenance",
                                x->node);
                x->cordoned_before = true;
        } else if (drain_record_is_for(r->object, x->kind, x->event_id))
                /* A resumed drain: the cordon there may be its own, the record knows. */
                x->cordoned_before = drain_record_cordoned_before(r->object);
        else
                x->cordoned_before = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetObjectItemCaseSensitive(r->object, "spec"), "unschedulable"));
        if ((e = start_node_changes(x)) < 0)
                finish(x, DRAIN_EXEC_ERROR, e, "cannot cordon the node");
}

static int read_node_then_change(struct drain_exec *x)
{
        _cleanup_free_ char *path = kube_path(NULL, "v1", NULL, "nodes", x->node, NULL);
        if (!path)
                return -ENOMEM;
        return kube_get(x->c, path, node_read_done, x, &x->node_call);
}

/* ---- life cycle ---- */

struct drain_exec *drain_exec_free(struct drain_exec *x)
{
        if (!x)
                return NULL;
        timer_cancel(x->kick);
        timer_cancel(x->wake);
        timer_cancel(x->surge_verdict);
        timer_cancel(x->cordon_retry);
        timer_cancel(x->lb_retry);
        timer_cancel(x->kill_timer);
        kube_informer_stop(x->pods_inf);
        if (x->joined)
                drain_ledger_leave(x->ledger, x);
        drain_peers_free(x->peers); /* before the ledger they are members of */
        kube_call_cancel(x->node_call);
        kube_call_cancel(x->cordon_call);
        kube_call_cancel(x->taint_call);
        kube_call_cancel(x->annotate_call);
        kube_call_cancel(x->lb_call);
        kube_call_cancel(x->services_call);
        cJSON_Delete(x->services);
        drain_lb_targets_free(x->lbt);
        free(x->lb_said);
        kube_selector_clear(&x->skip_selector);
        strv_free(x->skip_namespaces);
        for (size_t i = 0; i < x->n_startup_calls; i++) {
                if (x->startup_calls[i].call) {
                        kube_call_cancel(x->startup_calls[i].call);
                        drain_ledger_startup_answered(x->ledger, x->startup_calls[i].owner_key);
                }
                free(x->startup_calls[i].owner_key);
        }
        free(x->startup_calls);
        for (size_t i = 0; i < x->n_pods; i++)
                xpod_free(x->pods[i]);
        free(x->pods);
        drain_joint_unref(x->joint);
        free(x->plan_pods);
        free(x->next_map);
        free(x->node);
        free(x->kind);
        free(x->instance_id);
        free(x->event_id);
        free(x->postmortem_dir);
        free(x->taint_key);
        free(x->self_namespace);
        free(x->self_name);
        for (size_t i = 0; i < x->n_critical; i++)
                free(x->critical[i]);
        free(x->critical);
        free(x->message);
        drain_ledger_free(x->own_ledger);
        drain_surge_free(x->surge);
        timer_cancel(x->estimates_wait);
        timer_cancel(x->startups_wait);
        if (x->estimates)
                drain_estimates_on_read(x->estimates, NULL, x); /* if still this drain's */
        free(x);
        return NULL;
}

static int dup_opt(const char *s, char **ret)
{
        *ret = NULL;
        if (!s)
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

/* A copy of a NULL-terminated list (NULL: none), NULL-terminated; elements copied so far stay on failure. */
static int dup_strv(const char *const *src, char ***ret, size_t *ret_n)
{
        *ret_n = 0;
        for (const char *const *s = src; s && *s; s++) {
                char **a = realloc(*ret, (*ret_n + 2) * sizeof(*a));
                if (!a)
                        return -ENOMEM;
                *ret = a;
                a[*ret_n + 1] = NULL;
                if (!(a[*ret_n] = strdup(*s)))
                        return -ENOMEM;
                (*ret_n)++;
        }
        return 0;
}

int drain_exec_start(struct kube_client *c, struct alert_bus *bus, const struct drain_exec_options *o,
                     drain_exec_done_fn done, void *userdata, struct drain_exec **ret)
{
        _cleanup_(drain_exec_freep) struct drain_exec *x = NULL;
        uint64_t now = clk_now();
        int r;

        if (!c || !o || !o->node || !ret)
                return -EINVAL;
        x = calloc(1, sizeof(*x));
        if (!x)
                return -ENOMEM;
        x->act = act;
        x->c = c;
        x->loop = kube_client_loop(c);
        x->bus = bus;
        x->metrics = o->metrics;
        x->done = done;
        x->userdata = userdata;
        /* To the millisecond, as the drain record has it: drains elsewhere order theirs by the record. */
        x->deadline = o->deadline_usec - o->deadline_usec % 1000;
        x->margin = o->margin_usec;
        x->policy = o->policy;
        x->evict_daemonsets = o->evict_daemonsets;
        x->leave_emptydir = o->leave_emptydir;
        x->cordon_only = o->cordon_only;
        x->no_execute = o->taint_no_execute;
        x->out_of_service = o->out_of_service_taint;
        x->deadline_chosen = o->deadline_chosen;
        x->no_deadline = o->no_deadline;
        x->exclude_lb = o->exclude_from_load_balancers;
        x->lb_dereg = x->exclude_lb ? o->lb_deregistration_usec : 0;
        /* Until the label is answered, counted from now; moved to the answer then. */
        x->lb_hold = x->lb_dereg ? now + x->lb_dereg : 0;
        if (!isempty(o->skip_pod_selector) &&
            (r = kube_selector_parse_text(o->skip_pod_selector, &x->skip_selector)) < 0) {
                if (r == -EINVAL)
                        log_error("drain.skip_pod_selector: cannot read the label selector '%s'",
                                  o->skip_pod_selector);
                return r;
        }
        size_t n_skip;
        if (dup_strv(o->skip_namespaces, &x->skip_namespaces, &n_skip) < 0)
                return -ENOMEM;
        x->log_tail_lines = o->log_tail_lines;
        x->default_startup = o->default_startup_usec ? o->default_startup_usec : DEFAULT_STARTUP_USEC;
        x->expected_shutdown_fraction =
            o->expected_shutdown_fraction > 0 ? o->expected_shutdown_fraction : DEFAULT_EXPECTED_SHUTDOWN;
        x->floor = o->retry_floor_usec ? o->retry_floor_usec : DEFAULT_FLOOR_USEC;
        x->result.notice_usec = o->notice_usec ? o->notice_usec : now;
        x->result.started_usec = now;
        if (dup_opt(o->node, &x->node) < 0 || dup_opt(o->kind ? o->kind : "manual", &x->kind) < 0 ||
            dup_opt(o->taint_key ? o->taint_key : SPOTDRAIN_TAINT_INTERRUPTION, &x->taint_key) < 0 ||
            dup_opt(o->self_namespace ? o->self_namespace : getenv("POD_NAMESPACE"), &x->self_namespace) <
                0 ||
            dup_opt(o->self_name ? o->self_name : getenv("POD_NAME"), &x->self_name) < 0 ||
            dup_opt(isempty(o->instance_id) ? NULL : o->instance_id, &x->instance_id) < 0 ||
            dup_opt(isempty(o->event_id) ? NULL : o->event_id, &x->event_id) < 0 ||
            dup_opt(isempty(o->postmortem_dir) ? NULL : o->postmortem_dir, &x->postmortem_dir) < 0)
                return -ENOMEM;
        if (dup_strv(o->critical_classes, &x->critical, &x->n_critical) < 0)
                return -ENOMEM;

        /* A scheduled change comes hours ahead: a read before the cordon costs it nothing. An interruption
         * is cordoned at once. */
        r = streq(x->kind, "scheduled-change") ? read_node_then_change(x) : start_node_changes(x);
        if (r < 0)
                return r;
        if (o->elbv2 && x->instance_id && !x->cordon_only &&
            (r = drain_lb_targets_new(c, o->elbv2, x->instance_id, o->deregister_targets, lb_targets_changed,
                                      x, &x->lbt)) < 0)
                log_warning_errno(r, "%s: cannot look for the target groups of its pods", x->node);
        _cleanup_free_ char *field = strprintf("spec.nodeName=%s", x->node);
        if (!field)
                return -ENOMEM;
        static const struct kube_informer_ops pod_ops = {
                .added = exec_pods_added,
                .modified = exec_pods_modified,
                .deleted = exec_pods_deleted,
                .synced = exec_informer_synced,
        };
        static const struct drain_ledger_member_ops ledger_ops = {
                .wake = exec_ledger_wake,
                .add_inputs = exec_add_inputs,
                .namespaces = exec_add_namespaces,
                .planned = exec_planned,
        };
        /* Patient: its pods may be quiet for long while they wait for PDB slots (watch_check resumes it when
         * it is silent while they stop). Compact: a thousand drains' pods held 49 MiB as trees; the
         * executor reads them within one turn of the loop only. */
        struct kube_watch_options pw = { .path = "/api/v1/pods",
                                         .field_selector = field,
                                         .keep_fields = drain_pod_fields,
                                         .patient = true,
                                         .compact = true };
        r = kube_informer_start(c, &pw, &pod_ops, x, &x->pods_inf);
        if (r < 0)
                return r;
        if (o->surge != DRAIN_SURGE_OFF &&
            (r = drain_surge_new(c, x->node, o->surge, x->bus, exec_surge_changed, x, &x->surge)) < 0)
                return r;
        x->ledger = o->ledger;
        if (!x->ledger) {
                r = drain_ledger_new(c, x->floor, &x->own_ledger);
                if (r < 0)
                        return r;
                x->ledger = x->own_ledger;
                struct drain_peers_options po = { .node = x->node,
                                                  .deadline_usec = x->deadline,
                                                  .margin_usec = x->margin,
                                                  .default_startup_usec = x->default_startup,
                                                  .expected_shutdown_fraction =
                                                      x->expected_shutdown_fraction };
                if (o->follow_peers && (r = drain_peers_new(x->ledger, &po, &x->peers)) < 0)
                        return r;
                if (o->estimates)
                        drain_ledger_use_shutdowns(x->ledger, drain_estimates_store(o->estimates));
        }
        if (o->estimates) {
                x->estimates = o->estimates;
                drain_estimates_on_read(x->estimates, exec_estimates_read, x);
        }
        /* The drains of the ledger learn a Deployment from one read of it. */
        drain_surge_share(x->surge, drain_ledger_surge_reads(x->ledger));
        r = drain_ledger_join(x->ledger, &ledger_ops, x, x->node, x->deadline);
        if (r < 0)
                return r;
        x->joined = true;
        /* The deadline is always due: it ends the drain even when nothing else happens. */
        exec_arm_wake(x, x->deadline);
        /* The pods still there shortly before it are captured, also after a drain that ended early. */
        r = timer_start(x->loop,
                        x->deadline > KILL_CAPTURE_LEAD_USEC ? x->deadline - KILL_CAPTURE_LEAD_USEC : 0,
                        exec_kill_capture_fire, x, &x->kill_timer);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(x);
        return 0;
}

const struct drain_plan *drain_exec_plan(const struct drain_exec *x)
{
        return x ? x->plan : NULL;
}

const struct drain_plan_node *drain_exec_plan_node(const struct drain_exec *x)
{
        return x && x->plan ? own_node(x) : NULL;
}

uint64_t drain_exec_lingers_until(const struct drain_exec *x)
{
        if (!x || !x->finished)
                return 0;
        bool pending = x->kill_timer != NULL;
        for (size_t i = 0; !pending && i < x->n_pods; i++)
                pending = x->pods[i]->pm_killed && !drain_postmortem_emitted(x->pods[i]->pm_killed);
        return pending ? x->deadline : 0;
}

void drain_exec_release_plan(struct drain_exec *x)
{
        if (!x || !x->finished)
                return;
        x->joint = drain_joint_unref(x->joint);
        free(x->plan_pods);
        free(x->next_map);
        x->plan_pods = x->next_map = NULL;
        x->plan = NULL;
        x->inputs = NULL;
        x->n_own = 0;
}

unsigned drain_exec_pods_left(const struct drain_exec *x, int pdb)
{
        unsigned n = 0;
        if (!x || !x->plan)
                return 0;
        for (size_t i = 0; i < x->n_own; i++) {
                const struct drain_plan_pod *pp = own_plan_pod(x, i);
                if (pp->action == DRAIN_ACTION_LEAVE || x->plan_pods[i]->state == XPOD_GONE)
                        continue;
                if (pdb == DRAIN_EXEC_ALL_PDBS || pp->pdb == pdb)
                        n++;
        }
        return n;
}

const struct drain_exec_result *drain_exec_result(const struct drain_exec *x)
{
        return &x->result;
}
