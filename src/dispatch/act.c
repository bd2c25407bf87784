/* dispatch/act: what the dispatcher does for a notice of a known node, by its kind's rule: start or
 * upgrade its drain (with the deadline it gets), the soft taint of a rebalance recommendation (reverted
 * later), a cordon, the heartbeats of its lifecycle action, and the end of its drain. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch_internal.h"
#include "spotdrain/keys.h"

static void on_heartbeat(void *userdata);

static uint64_t heartbeat_period(struct dnode *n)
{
        struct dispatch *d = n->d;
        uint64_t p = d->o.heartbeat_usec;

        for (size_t i = 0; i < n->n_asg && d->ops.lifecycle_interval; i++) {
                uint64_t q = d->ops.lifecycle_interval(d->userdata, &n->asg[i]);
                if (q && q < p)
                        p = q;
        }
        return p;
}

static void heartbeat_arm(struct dnode *n)
{
        uint64_t now = clk_now(), due;

        if (n->heartbeat || n->n_asg == 0 || n->state != DNODE_DRAINING)
                return;
        due = n->last_beat + heartbeat_period(n);
        if (due > n->asg_since + n->d->o.heartbeat_until_usec) {
                log_info("dispatch: lifecycle heartbeats of %s stop: %llu s after its action "
                         "(controller.heartbeat_until_seconds)",
                         n->name, (unsigned long long)(n->d->o.heartbeat_until_usec / SEC));
                return;
        }
        if (timer_start_in(n->d->loop, due > now ? due - now : 0, on_heartbeat, n, &n->heartbeat) < 0)
                log_debug("dispatch: cannot arm the lifecycle heartbeat of %s", n->name);
}

static void on_heartbeat(void *userdata)
{
        struct dnode *n = userdata;
        struct dispatch *d = n->d;

        n->heartbeat = NULL;
        if (n->state != DNODE_DRAINING)
                return;
        n->last_beat = clk_now();
        for (size_t i = 0; i < n->n_asg; i++)
                if (d->ops.lifecycle_heartbeat && d->ops.lifecycle_heartbeat(d->userdata, &n->asg[i]) < 0)
                        d->stats.action_errors++;
        heartbeat_arm(n);
}

/* A drain driven by its lifecycle action: planned again when the time its hook grants is known now. */
static void lifecycle_replan(struct dnode *n)
{
        struct dispatch *d = n->d;
        uint64_t deadline;

        if (n->state != DNODE_DRAINING || n->n_asg == 0 ||
            n->notice.kind != NOTICE_ASG_LIFECYCLE_TERMINATE || !d->ops.lifecycle_deadline ||
            !d->ops.lifecycle_deadline(d->userdata, &n->asg[0]))
                return;
        deadline = dispatch_drain_deadline(d, n->name, &n->asg[0], clk_now());
        if (deadline == n->deadline)
                return;
        log_info("dispatch: the drain of %s is planned against the time its lifecycle hook grants: %" PRIu64
                 " s from now",
                 n->name, deadline > clk_now() ? (deadline - clk_now()) / SEC : 0);
        if (d->ops.drain(d->userdata, n->name, &n->asg[0], deadline) < 0) {
                d->stats.action_errors++;
                return;
        }
        n->deadline = deadline;
        d->stats.drains++;
}

void dispatch_lifecycle_rearm(struct dispatch *d)
{
        for (size_t i = 0; d && i < d->n_nodes; i++) {
                struct dnode *n = d->nodes[i];
                lifecycle_replan(n);
                n->heartbeat = timer_cancel(n->heartbeat);
                heartbeat_arm(n);
        }
}

/* A lifecycle action spotdrain can heartbeat and complete: named by its token (a queue's lifecycle message),
 * or by its hook and instance (the agent's IMDS target-lifecycle-state with agent.lifecycle_hook_name set;
 * the API takes InstanceId in place of the token). */
static bool lifecycle_actionable(const struct notice *n)
{
        return !isempty(n->lifecycle_action_token) ||
               (!isempty(n->lifecycle_hook_name) && !isempty(n->asg_name) && !isempty(n->instance_id));
}

static bool lifecycle_same(const struct notice *a, const struct notice *b)
{
        if (!isempty(a->lifecycle_action_token) || !isempty(b->lifecycle_action_token))
                return streq(a->lifecycle_action_token, b->lifecycle_action_token);
        return streq(a->lifecycle_hook_name, b->lifecycle_hook_name) && streq(a->asg_name, b->asg_name) &&
               streq(a->instance_id, b->instance_id);
}

static int dnode_add_asg(struct dnode *n, const struct notice *notice)
{
        struct notice *v;

        if (!lifecycle_actionable(notice))
                return 0; /* nothing to heartbeat or complete (IMDS state without a hook name) */
        for (size_t i = 0; i < n->n_asg; i++)
                if (lifecycle_same(&n->asg[i], notice))
                        return 0;
        v = realloc(n->asg, (n->n_asg + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        n->asg = v;
        if (n->n_asg == 0) {
                uint64_t now = clk_now();
                n->last_beat = now;
                /* heartbeat_until counts from the notice (a restarted controller's too), not from now. */
                n->asg_since = notice->notice_time && notice->notice_time < now ? notice->notice_time : now;
                /* A resumed drain's action comes back with its message, up to a visibility timeout after
                 * the earlier controller's last heartbeat: one goes out at once. */
                if (n->resumed)
                        n->last_beat = 0;
        }
        n->asg[n->n_asg++] = *notice;
        /* A shorter period may come with this action: counted from the last heartbeat. */
        n->heartbeat = timer_cancel(n->heartbeat);
        heartbeat_arm(n);
        return 0;
}

static void lifecycle_complete(struct dispatch *d, const struct notice *n)
{
        if (d->ops.lifecycle_complete && d->ops.lifecycle_complete(d->userdata, n) < 0)
                d->stats.action_errors++;
}

/* ---- acting on a notice for a known node ---- */

bool scheduled_change_over(const struct notice *n)
{
        return streq(n->state, "canceled") || streq(n->state, "completed") || streq(n->state, "closed");
}

const char *dispatch_action_to_string(enum dispatch_action a)
{
        static const char *const names[_DISPATCH_ACTION_MAX] = {
                [DISPATCH_ACTION_DEFAULT] = "default", [DISPATCH_ACTION_DRAIN] = "drain",
                [DISPATCH_ACTION_CORDON] = "cordon",   [DISPATCH_ACTION_TAINT] = "taint",
                [DISPATCH_ACTION_IGNORE] = "ignore",
        };
        return (unsigned)a < _DISPATCH_ACTION_MAX ? names[a] : NULL;
}

/* What a notice of kind k does: the configured action, else the kind's own. */
enum dispatch_action kind_action(const struct dispatch *d, enum notice_kind k)
{
        if ((unsigned)k >= _NOTICE_KIND_MAX || k == NOTICE_ASG_TEST_NOTIFICATION)
                return DISPATCH_ACTION_IGNORE;
        if (d->o.actions[k] > DISPATCH_ACTION_DEFAULT && d->o.actions[k] < _DISPATCH_ACTION_MAX)
                return d->o.actions[k];
        return k == NOTICE_REBALANCE_RECOMMENDATION ? DISPATCH_ACTION_TAINT : DISPATCH_ACTION_DRAIN;
}

static int start_drain(struct dispatch *d, const char *node, const struct notice *n, uint64_t deadline,
                       uint64_t ticket)
{
        struct dnode *dn = dnode_find(d, node);
        bool created = false;
        int r;

        if (dn && dn->state == DNODE_FINISHED) {
                /* The node is drained already: a late notice (or a lifecycle hook after the spot warning)
                 * needs nothing more than the hook's completion; a scheduled change's cancellation no longer
                 * undoes it. */
                dn->firm = dn->firm || n->kind != NOTICE_SCHEDULED_CHANGE;
                if (n->kind == NOTICE_ASG_LIFECYCLE_TERMINATE && lifecycle_actionable(n))
                        lifecycle_complete(d, n);
                return DISPATCH_DONE;
        }
        if (dn && dn->state == DNODE_DRAINING) {
                if (dnode_add_ticket(dn, ticket) < 0)
                        return -ENOMEM;
                dn->firm = dn->firm || n->kind != NOTICE_SCHEDULED_CHANGE;
                if (isempty(dn->notice.event_id))
                        dn->notice = *n; /* resumed: the notice it was for turned up */
                if (n->kind == NOTICE_ASG_LIFECYCLE_TERMINATE && dnode_add_asg(dn, n) < 0) {
                        if (ticket != DISPATCH_NO_TICKET)
                                dn->n_tickets--;
                        return -ENOMEM;
                }
                if (deadline < dn->deadline) {
                        /* The earlier deadline wins: the drain is planned again against it. */
                        r = d->ops.drain(d->userdata, node, n, deadline);
                        if (r < 0) {
                                d->stats.action_errors++;
                                log_debug_errno(r, "dispatch: cannot restart the drain of %s", node);
                        } else {
                                dn->deadline = deadline;
                                dn->notice = *n;
                                d->stats.drains++;
                                d->stats.upgrades++;
                        }
                }
                return DISPATCH_PENDING;
        }
        if (!dn) {
                dn = dnode_add(d, node);
                if (!dn)
                        return -ENOMEM;
                created = true;
        }
        r = d->ops.drain(d->userdata, node, n, deadline);
        if (r < 0) {
                d->stats.action_errors++;
                if (created)
                        dnode_remove(d, dn);
                return r;
        }
        if (!created)
                d->stats.upgrades++; /* rebalanced, now interrupted */
        d->stats.drains++;
        /* The soft taint stays: the node is going, nothing should land there. */
        dn->revert = timer_cancel(dn->revert);
        dn->firm = n->kind != NOTICE_SCHEDULED_CHANGE;
        dn->resumed = false;
        dn->state = DNODE_DRAINING;
        dn->since = clk_now();
        dn->notice = *n;
        dn->deadline = deadline;
        /* The drain runs whatever happens to the bookkeeping below: an allocation failure only loses the
         * ticket (its message comes back and joins the drain). */
        if (dnode_add_ticket(dn, ticket) < 0)
                return -ENOMEM;
        if (n->kind == NOTICE_ASG_LIFECYCLE_TERMINATE)
                (void)dnode_add_asg(dn, n);
        return DISPATCH_PENDING;
}

static void on_revert(void *userdata)
{
        struct dnode *dn = userdata;
        struct dispatch *d = dn->d;
        int r;

        dn->revert = NULL;
        if (dn->state != DNODE_REBALANCED || !dn->soft_tainted)
                return;
        log_info("no interruption followed the rebalance recommendation of %s; removing the soft taint",
                 dn->name);
        dn->soft_tainted = false;
        dn->since = clk_now();
        d->stats.reverted++;
        if (d->ops.soft_taint && (r = d->ops.soft_taint(d->userdata, dn->name, false)) < 0) {
                d->stats.action_errors++;
                log_debug_errno(r, "dispatch: cannot remove the soft taint of %s", dn->name);
        }
}

/* The entry of a node that a notice acts on without draining it (the soft taint, a cordon): in *ret, made if
 * need be, with the notice; NULL when the node is draining or drained already (nothing to add). */
static int soft_entry(struct dispatch *d, const char *node, const struct notice *n, struct dnode **ret)
{
        struct dnode *dn = dnode_find(d, node);

        *ret = NULL;
        if (dn && dn->state != DNODE_REBALANCED)
                return DISPATCH_DONE;
        if (!dn) {
                dn = dnode_add(d, node);
                if (!dn)
                        return -ENOMEM;
                dn->state = DNODE_REBALANCED;
        }
        dn->since = clk_now();
        dn->notice = *n;
        *ret = dn;
        return DISPATCH_DONE;
}

/* The soft taint: a rebalance recommendation's default action, any kind's whose action is taint. */
static int on_rebalance(struct dispatch *d, const char *node, const struct notice *n)
{
        struct dnode *dn;
        int r = soft_entry(d, node, n, &dn);

        if (r < 0 || !dn)
                return r;
        /* Seen once its revert time is past (a late delivery, a restart): nothing followed it in time, so it
         * is reverted now, without the taint. Adding the taint and removing it at once raced: the removal
         * could read the node before the add's write landed, and the taint stayed for good. */
        bool late = n->notice_time + d->o.rebalance_revert_usec <= clk_now();
        /* A new recommendation after the taint was reverted taints again; one while tainted only moves the
         * revert. */
        if (!dn->soft_tainted) {
                dn->soft_tainted = true;
                if (!late && d->ops.soft_taint && (r = d->ops.soft_taint(d->userdata, node, true)) < 0) {
                        d->stats.action_errors++;
                        log_debug_errno(r, "dispatch: cannot taint %s", node);
                }
                if (d->ops.replacement_request &&
                    (r = d->ops.replacement_request(d->userdata, node, n)) < 0) {
                        d->stats.action_errors++;
                        log_debug_errno(r, "dispatch: replacement request for %s failed", node);
                }
        }
        dn->revert = timer_cancel(dn->revert);
        if (late) {
                on_revert(dn);
                return DISPATCH_DONE;
        }
        if ((r = timer_start(d->loop, n->notice_time + d->o.rebalance_revert_usec, on_revert, dn,
                             &dn->revert)) < 0) {
                d->stats.action_errors++;
                log_debug_errno(r, "dispatch: cannot arm the soft taint's revert on %s", node);
        }
        return DISPATCH_DONE;
}

/* A notice whose action is cordon: the node takes no new pods, none is evicted. A later notice that drains
 * upgrades it (start_drain). */
static int on_cordon(struct dispatch *d, const char *node, const struct notice *n)
{
        struct dnode *dn;
        int r = soft_entry(d, node, n, &dn);

        if (r < 0 || !dn || dn->cordoned)
                return r; /* a drain cordoned it already, or this did */
        log_info("%s notice for %s: cordoning it, no pod evicted (its kind's action is cordon)",
                 notice_kind_to_string(n->kind), node);
        dn->cordoned = true;
        d->stats.cordoned++;
        if (d->ops.cordon && (r = d->ops.cordon(d->userdata, node)) < 0) {
                d->stats.action_errors++;
                log_debug_errno(r, "dispatch: cannot cordon %s", node);
        }
        return DISPATCH_DONE;
}

/* Acts on a notice of a known node by its kind's action, where a drain would start by deadline. A lifecycle
 * hook is completed once nothing is left to wait for: at once when the node is only cordoned or tainted,
 * when the drain ends if one is under way. */
int dispatch_act(struct dispatch *d, const char *node, const struct notice *n, uint64_t deadline,
                 uint64_t ticket)
{
        enum dispatch_action a = kind_action(d, n->kind);
        struct dnode *dn = dnode_find(d, node);
        int r;

        if (a == DISPATCH_ACTION_DRAIN ||
            (n->kind == NOTICE_ASG_LIFECYCLE_TERMINATE && dn && dn->state != DNODE_REBALANCED))
                /* A drain under way (or done) takes the hook in as it would a draining one's. */
                return start_drain(d, node, n, deadline, ticket);
        r = a == DISPATCH_ACTION_CORDON ? on_cordon(d, node, n) : on_rebalance(d, node, n);
        if (r >= 0 && n->kind == NOTICE_ASG_LIFECYCLE_TERMINATE && lifecycle_actionable(n))
                lifecycle_complete(d, n);
        return r;
}

uint64_t dispatch_late_usec(const struct notice *n, uint64_t now)
{
        if (n->kind == NOTICE_STATE_CHANGE || !n->deadline || n->deadline >= now)
                return 0; /* a state change's deadline is its own time: going now is what it says */
        return now - n->deadline;
}

/* The deadline a drain is planned against (issue #15): never further out than the kind allows (a spot
 * or Capacity Reservation warning gives two minutes from the event, or from now if the event claims a later
 * time), and never nearer than min_budget_usec from now, so that a notice that arrives late (a backlog, a
 * retry) or back-dated still drains gracefully instead of forcing pods out in its last second. */
uint64_t dispatch_drain_deadline(const struct dispatch *d, const char *node, const struct notice *n,
                                 uint64_t now)
{
        uint64_t deadline = n->deadline ? n->deadline : now + d->o.emergency_usec;

        /* A lifecycle action holds the instance as long as its hook grants (with heartbeats), not the
         * notice's provisional hour, once the front end knows the hook. */
        if (n->kind == NOTICE_ASG_LIFECYCLE_TERMINATE && !isempty(n->lifecycle_action_token) &&
            d->ops.lifecycle_deadline) {
                uint64_t granted = d->ops.lifecycle_deadline(d->userdata, n);
                if (granted)
                        deadline = granted;
        }
        if (n->kind == NOTICE_SPOT_INTERRUPTION || n->kind == NOTICE_CAPACITY_RESERVATION_INTERRUPTION) {
                uint64_t from = n->notice_time && n->notice_time < now ? n->notice_time : now;
                if (deadline > from + NOTICE_SPOT_WARNING_USEC) {
                        log_warning("the %s warning for %s (event %s) claims a deadline %" PRIu64
                                    " s out; such a warning gives two minutes",
                                    notice_kind_to_string(n->kind), node, n->event_id,
                                    (deadline - now) / 1000000);
                        deadline = from + NOTICE_SPOT_WARNING_USEC;
                }
        }
        if (deadline < now + d->o.min_budget_usec) {
                uint64_t late = dispatch_late_usec(n, now);
                if (late)
                        log_full(
                            LOG_WARNING, 0, (const char *[]){ "node", node, "event_id", n->event_id, NULL },
                            "the %s notice for %s arrived %" PRIu64 " s after its deadline: drained with "
                            "the minimum budget of %" PRIu64 " s (notices.min_budget_seconds)",
                            notice_kind_to_string(n->kind), node, late / 1000000,
                            d->o.min_budget_usec / 1000000);
                deadline = now + d->o.min_budget_usec;
        }
        return deadline;
}

void dispatch_drain_finished(struct dispatch *d, const char *node, bool drained)
{
        struct dnode *dn = dnode_find(d, node);
        _cleanup_free_ uint64_t *tickets = NULL;
        size_t n_tickets;

        if (!dn || dn->state != DNODE_DRAINING)
                return;
        dn->state = DNODE_FINISHED;
        dn->since = clk_now();
        dn->heartbeat = timer_cancel(dn->heartbeat);
        log_debug("dispatch: drain of %s ended (%s)", node, drained ? "drained" : "not drained");
        for (size_t i = 0; i < dn->n_asg; i++)
                lifecycle_complete(d, &dn->asg[i]);
        dn->n_asg = 0;
        /* Callbacks may submit again; work on a copy. */
        tickets = TAKE_PTR(dn->tickets);
        n_tickets = dn->n_tickets;
        dn->n_tickets = 0;
        for (size_t i = 0; i < n_tickets; i++)
                if (d->ops.ticket_done)
                        d->ops.ticket_done(d->userdata, tickets[i], 0);
}
