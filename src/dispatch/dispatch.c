/* dispatch: notices → nodes, one drain per node, dedupe, unknown instances.
 *
 * Everything here is bookkeeping on the loop; the effects (drains, taints, lifecycle calls, message
 * deletion) go through struct dispatch_ops, so that the rules can be tested without a cluster. Node counts
 * are in the thousands at most and notices arrive a few per second, so plain arrays and linear searches
 * keep it simple. Its parts: table.c (the node entries, index and dedupe), act.c (what a known node's
 * notice does), scheduled.c (scheduled changes and reboots); dispatch_internal.h joins them. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/dispatch.h"
#include "spotdrain/engine.h"
#include "spotdrain/keys.h"
#include "spotdrain/kube.h"

#define DEFAULT_UNKNOWN_RETRY    (60 * SEC)
#define DEFAULT_HEARTBEAT        (300 * SEC)
#define DEFAULT_HEARTBEAT_UNTIL  (172800 * SEC)
#define DEFAULT_MAINTENANCE_LEAD (DISPATCH_DEFAULT_MAINTENANCE_LEAD_SECONDS * SEC)
#define DEFAULT_EMERGENCY        (30 * SEC)
#define DEFAULT_DEDUPE_MAX       4096
#define DEFAULT_REVERT           (DISPATCH_DEFAULT_REVERT_SECONDS * SEC)
#define DEFAULT_MIN_BUDGET       (DISPATCH_DEFAULT_MIN_BUDGET_SECONDS * SEC) /* notices.min_budget_seconds */

int dispatch_notice_summary(const struct notice *n, uint64_t now, char **ret)
{
        _cleanup_free_ char *human = NULL;
        uint64_t late = dispatch_late_usec(n, now);
        int r = notice_format_human(n, &human);

        if (r < 0)
                return r;
        if (!late) {
                *ret = TAKE_PTR(human);
                return 0;
        }
        *ret = strprintf("%s; arrived %" PRIu64 " s after its deadline: drained with the minimum budget "
                         "(notices.min_budget_seconds)",
                         human, late / 1000000);
        return *ret ? 0 : -ENOMEM;
}

static int handle_known(struct dispatch *d, const char *node, const struct notice *n, uint64_t ticket,
                        uint64_t *ret_defer_until)
{
        struct dnode *dn = dnode_find(d, node);
        uint64_t now = clk_now();

        switch (n->kind) {
        case NOTICE_REBALANCE_RECOMMENDATION:
                /* Drained (notices.rebalance_recommendation.action), it is planned against the least a spot
                 * warning after it would give. */
                return dispatch_act(d, node, n, now + NOTICE_SPOT_WARNING_USEC, ticket);
        case NOTICE_STATE_CHANGE:
                if (dn && dn->state != DNODE_REBALANCED) {
                        dn->firm = true;      /* the instance is going: no cancellation undoes the drain */
                        return DISPATCH_DONE; /* draining or drained: the state change adds nothing */
                }
                return dispatch_act(d, node, n,
                                    n->deadline > now + d->o.emergency_usec ? n->deadline
                                                                            : now + d->o.emergency_usec,
                                    ticket);
        case NOTICE_SCHEDULED_CHANGE: {
                struct sched *s;
                int r;

                if (scheduled_change_over(n))
                        return on_scheduled_over(d, node, n);
                if (n->deadline > now + d->o.maintenance_lead_usec) {
                        *ret_defer_until = n->deadline - d->o.maintenance_lead_usec;
                        r = sched_add(d, node, n, *ret_defer_until);
                        return r < 0 ? r : DISPATCH_DEFER;
                }
                /* Due now (or the waiting one came back as it fell due): drained at once. */
                if ((s = sched_find(d, n)))
                        sched_remove(d, s);
                return dispatch_act(d, node, n, dispatch_drain_deadline(d, node, n, now), ticket);
        }
        case NOTICE_SPOT_INTERRUPTION:
        case NOTICE_CAPACITY_RESERVATION_INTERRUPTION:
        case NOTICE_ASG_LIFECYCLE_TERMINATE:
                return dispatch_act(d, node, n, dispatch_drain_deadline(d, node, n, now), ticket);
        default:
                return DISPATCH_DONE;
        }
}

/* ---- unknown instances ---- */

static void unknown_remove(struct dispatch *d, struct unknown *u)
{
        for (size_t i = 0; i < d->n_unknowns; i++)
                if (d->unknowns[i] == u) {
                        d->unknowns[i] = d->unknowns[--d->n_unknowns];
                        break;
                }
        timer_cancel(u->expiry);
        free(u);
}

static void on_unknown_expired(void *userdata)
{
        struct unknown *u = userdata;
        struct dispatch *d = u->d;
        uint64_t ticket = u->ticket;
        struct notice n = u->notice;

        u->expiry = NULL;
        unknown_remove(d, u);
        d->stats.unknown_dropped++;
        log_warning("no node has instance %s (providerID); dropping its %s notice (event %s)", n.instance_id,
                    notice_kind_to_string(n.kind), n.event_id);
        if (d->ops.notice_seen)
                d->ops.notice_seen(d->userdata, NULL, &n);
        /* A lifecycle hook of an instance that is no node here is another cluster's (or nobody's): its
         * action is not completed from here, which would cut that cluster's drain short. */
        if (d->ops.ticket_done && ticket != DISPATCH_NO_TICKET)
                d->ops.ticket_done(d->userdata, ticket, -ENXIO);
}

static int unknown_add(struct dispatch *d, const struct notice *n, uint64_t ticket)
{
        struct unknown **v, *u;
        int r;

        v = realloc(d->unknowns, (d->n_unknowns + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        d->unknowns = v;
        u = calloc(1, sizeof(*u));
        if (!u)
                return -ENOMEM;
        *u = (struct unknown){ .d = d, .notice = *n, .ticket = ticket };
        r = timer_start_in(d->loop, d->o.unknown_retry_usec, on_unknown_expired, u, &u->expiry);
        if (r < 0) {
                free(u);
                return r;
        }
        d->unknowns[d->n_unknowns++] = u;
        return DISPATCH_PENDING;
}

/* A node with this instance appeared: its waiting notices are acted on now. */
static void unknown_resolve(struct dispatch *d, const char *instance, const char *node)
{
        for (size_t i = 0; i < d->n_unknowns;) {
                struct unknown *u = d->unknowns[i];
                struct notice n = u->notice;
                uint64_t ticket = u->ticket, defer = 0;
                int r;

                if (!streq(n.instance_id, instance)) {
                        i++;
                        continue;
                }
                unknown_remove(d, u);
                if (!isempty(n.event_id)) {
                        char key[DEDUPE_KEY_SIZE];
                        dedupe_key(&n, key);
                        if (!dedupe_seen(d, key))
                                dedupe_add(d, key);
                }
                if (d->ops.notice_seen)
                        d->ops.notice_seen(d->userdata, node, &n);
                r = handle_known(d, node, &n, ticket, &defer);
                if (r == DISPATCH_PENDING)
                        continue;
                if (d->ops.ticket_done && ticket != DISPATCH_NO_TICKET)
                        d->ops.ticket_done(d->userdata, ticket,
                                           r == DISPATCH_DONE ? 0
                                           : r < 0            ? r
                                                              : -EAGAIN);
        }
}

int dispatch_node_update(struct dispatch *d, const cJSON *node)
{
        const char *name = kube_object_str(node, "metadata.name");
        const char *instance = dispatch_instance_from_provider_id(kube_object_str(node, "spec.providerID"));
        struct index_entry *e;

        int r = 0;

        if (!name)
                return -EINVAL;
        if (instance)
                r = dispatch_node_set(d, name, instance);
        else if ((e = index_find_node(d, name)))
                index_remove(d, e);
        if (r >= 0)
                r = dispatch_node_seen(d, node);
        return r;
}

int dispatch_node_seen(struct dispatch *d, const cJSON *node)
{
        const char *name = kube_object_str(node, "metadata.name");
        _cleanup_free_ char *copy = NULL;

        if (!name)
                return -EINVAL;
        if (!reboot_find(d, name))
                return 0;
        copy = strdup(name); /* the ops may free node */
        if (!copy)
                return -ENOMEM;
        reboot_check(d, copy, node);
        return 0;
}

int dispatch_node_set(struct dispatch *d, const char *name, const char *instance)
{
        struct index_entry *e, *v;

        if (!name || !notice_instance_id_valid(instance))
                return -EINVAL;
        e = index_find_node(d, name);
        if (e && streq(e->instance, instance))
                return 0;
        if (!e) {
                v = realloc(d->index, (d->n_index + 1) * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                d->index = v;
                e = &d->index[d->n_index];
                e->node = strdup(name);
                if (!e->node)
                        return -ENOMEM;
                d->n_index++;
        }
        snprintf(e->instance, sizeof(e->instance), "%s", instance);
        _cleanup_free_ char *copy = strdup(name);
        if (!copy)
                return -ENOMEM;
        unknown_resolve(d, instance, copy);
        return 0;
}

void dispatch_node_delete(struct dispatch *d, const cJSON *node)
{
        struct index_entry *e = index_find_node(d, kube_object_str(node, "metadata.name"));
        if (e)
                index_remove(d, e);
}

/* ---- the entry points ---- */

int dispatch_submit(struct dispatch *d, const struct notice *n, uint64_t ticket, uint64_t *ret_defer_until)
{
        char key[DEDUPE_KEY_SIZE];
        const char *node;
        struct sched *s;
        uint64_t defer = 0;
        int r;

        d->stats.notices++;
        dnode_purge(d);
        dedupe_key(n, key);
        if (!isempty(n->event_id) && dedupe_seen(d, key)) {
                d->stats.duplicates++;
                return DISPATCH_DONE;
        }
        /* Ignored (its kind's action): heard and told, acted on by nothing; its message is handled. */
        if (n->kind != NOTICE_ASG_TEST_NOTIFICATION && kind_action(d, n->kind) == DISPATCH_ACTION_IGNORE) {
                node = dispatch_node_for_instance(d, n->instance_id);
                d->stats.ignored++;
                log_info("%s notice for %s ignored: its kind's action is ignore",
                         notice_kind_to_string(n->kind), node ? node : n->instance_id);
                if (d->ops.notice_seen)
                        d->ops.notice_seen(d->userdata, node, n);
                if (!isempty(n->event_id))
                        dedupe_add(d, key);
                return DISPATCH_DONE;
        }
        if (n->kind == NOTICE_ASG_LIFECYCLE_LAUNCH) {
                if (d->ops.notice_seen)
                        d->ops.notice_seen(d->userdata, dispatch_node_for_instance(d, n->instance_id), n);
                return d->ops.lifecycle_launch ? d->ops.lifecycle_launch(d->userdata, n, ticket)
                                               : DISPATCH_DONE;
        }
        /* A scheduled change waiting to be due is remembered by its entry, not the dedupe table (a message
         * brought back when it is due must be acted on). */
        s = n->kind == NOTICE_SCHEDULED_CHANGE && !scheduled_change_over(n) ? sched_find(d, n) : NULL;
        if (s && s->notice.deadline == n->deadline && n->deadline > clk_now() + d->o.maintenance_lead_usec) {
                d->stats.duplicates++;
                if (ret_defer_until)
                        *ret_defer_until = n->deadline - d->o.maintenance_lead_usec;
                return DISPATCH_DEFER;
        }
        /* A notice for an instance not known as a node yet (the node informer has not caught up, or it is
         * not a node of this cluster) is told once that is settled: with its node when one turns up, without
         * one when it is dropped. */
        bool waits = n->kind != NOTICE_ASG_TEST_NOTIFICATION && n->kind != NOTICE_STATE_CHANGE &&
                     n->kind != NOTICE_SCHEDULED_CHANGE && !dispatch_node_for_instance(d, n->instance_id);
        if (!s && !waits && d->ops.notice_seen)
                d->ops.notice_seen(d->userdata, dispatch_node_for_instance(d, n->instance_id), n);
        if (n->kind == NOTICE_ASG_TEST_NOTIFICATION)
                r = DISPATCH_DONE;
        else if ((node = dispatch_node_for_instance(d, n->instance_id))) {
                _cleanup_free_ char *copy = strdup(node);
                r = copy ? handle_known(d, copy, n, ticket, &defer) : -ENOMEM;
        } else if (n->kind == NOTICE_STATE_CHANGE || n->kind == NOTICE_SCHEDULED_CHANGE)
                /* Not a node of this cluster (a state change says the instance is going anyway; a
                 * maintenance announced for an instance that has not joined yet is not ours). */
                r = DISPATCH_FOREIGN;
        else
                r = unknown_add(d, n, ticket);
        if (r < 0)
                return r;
        /* Remembered once it was taken in: a notice that could not be acted on may come again. One waiting
         * for its instance is remembered when the node turns up (dropped, it is not: it may be another
         * cluster's, whose message must not be taken for a duplicate when it comes back). */
        if (!isempty(n->event_id) && r != DISPATCH_DEFER && r != DISPATCH_FOREIGN &&
            (r != DISPATCH_PENDING || dispatch_node_for_instance(d, n->instance_id)))
                dedupe_add(d, key);
        if (r == DISPATCH_DEFER && ret_defer_until)
                *ret_defer_until = defer;
        return r;
}

int dispatch_resume(struct dispatch *d, const char *node, const char *kind, uint64_t deadline_usec)
{
        struct dnode *dn = dnode_find(d, node);
        struct notice n = { .kind = NOTICE_SPOT_INTERRUPTION };
        int k, r;

        if (dn && dn->state == DNODE_DRAINING)
                return -EALREADY;
        if (deadline_usec <= clk_now())
                return -ETIME;
        k = notice_kind_from_string(kind);
        if (k >= 0)
                n.kind = (enum notice_kind)k;
        for (size_t i = 0; i < d->n_index; i++)
                if (streq(d->index[i].node, node))
                        snprintf(n.instance_id, sizeof(n.instance_id), "%s", d->index[i].instance);
        snprintf(n.source, sizeof(n.source), "resume");
        n.notice_time = clk_now();
        n.deadline = deadline_usec;
        if (!dn) {
                dn = dnode_add(d, node);
                if (!dn)
                        return -ENOMEM;
        }
        r = d->ops.drain(d->userdata, node, &n, deadline_usec);
        if (r < 0) {
                d->stats.action_errors++;
                dnode_remove(d, dn);
                return r;
        }
        dn->state = DNODE_DRAINING;
        dn->since = clk_now();
        dn->notice = n;
        dn->deadline = deadline_usec;
        dn->resumed = true;
        d->stats.drains++;
        d->stats.resumed++;
        return 0;
}

/* The furthest a resumed drain's deadline may be from now, by the kind its record names: what a notice of
 * that kind could have given (a record is only as trustworthy as whoever may patch the node). 0 = a kind
 * that does not drain. */
static uint64_t resume_horizon(const struct dispatch *d, int kind)
{
        switch (kind) {
        case NOTICE_SPOT_INTERRUPTION:
        case NOTICE_CAPACITY_RESERVATION_INTERRUPTION:
                return NOTICE_SPOT_WARNING_USEC;
        case NOTICE_STATE_CHANGE:
                return d->o.emergency_usec;
        case NOTICE_SCHEDULED_CHANGE:
                return d->o.maintenance_lead_usec;
        case NOTICE_ASG_LIFECYCLE_TERMINATE:
                return NOTICE_ASG_DEFAULT_DEADLINE_USEC;
        case NOTICE_REBALANCE_RECOMMENDATION:
                /* Drains only when its action says so, against two minutes. */
                return kind_action(d, kind) == DISPATCH_ACTION_DRAIN ? NOTICE_SPOT_WARNING_USEC : 0;
        default:
                return 0;
        }
}

/* Whether a drain record may be carried on: it names the node's own instance and a kind that drains; its
 * deadline is held to what that kind allows. why gets the reason it may not. */
static int resume_check(const struct dispatch *d, const cJSON *node, const char *kind, const char *instance,
                        uint64_t *deadline, char *why, size_t why_size)
{
        const char *own = dispatch_instance_from_provider_id(kube_object_str(node, "spec.providerID"));
        uint64_t horizon = resume_horizon(d, kind ? notice_kind_from_string(kind) : -EINVAL),
                 now = clk_now();

        if (!horizon) {
                snprintf(why, why_size, "its kind '%s' is not one that drains", kind ? kind : "");
                return -EPERM;
        }
        if (!instance || !own || !streq(instance, own)) {
                snprintf(why, why_size, "it names instance %s, the node's providerID %s",
                         instance ? instance : "none", own ? own : "none");
                return -EPERM;
        }
        if (*deadline > now + horizon) {
                log_warning("the drain recorded on %s has its deadline %" PRIu64 " s out, more than a %s "
                            "notice gives: resumed with %" PRIu64 " s",
                            kube_object_str(node, "metadata.name"), (*deadline - now) / 1000000, kind,
                            horizon / 1000000);
                *deadline = now + horizon;
        }
        return 0;
}

int dispatch_resume_recorded(struct dispatch *d, const cJSON *node)
{
        const char *name = kube_object_str(node, "metadata.name");
        _cleanup_free_ char *kind = NULL, *instance = NULL;
        uint64_t deadline;
        int r = drain_record_read(node, &kind, &deadline, &instance);

        char why[160];

        if (r < 0)
                return r;
        if (!name)
                return -ENOENT;
        r = resume_check(d, node, kind, instance, &deadline, why, sizeof(why));
        if (r < 0) {
                log_full(LOG_WARNING, 0, (const char *[]){ "node", name, NULL },
                         "the drain recorded on %s (%s) is not carried on: %s", name,
                         SPOTDRAIN_ANNOTATION_DRAIN, why);
                return r;
        }
        return dispatch_resume(d, name, kind, deadline);
}

/* Forgets every reboot, unknown instance, scheduled change and node; stop_drains: the drains under way are
 * stopped first (drain_stop), as a reset asks and a free does not. */
static void forget_all(struct dispatch *d, bool stop_drains)
{
        while (d->n_reboots > 0)
                reboot_remove(d, d->reboots[d->n_reboots - 1]);
        while (d->n_unknowns > 0)
                unknown_remove(d, d->unknowns[d->n_unknowns - 1]);
        while (d->n_scheds > 0)
                sched_remove(d, d->scheds[d->n_scheds - 1]);
        for (size_t i = 0; stop_drains && i < d->n_nodes; i++)
                if (d->nodes[i]->state == DNODE_DRAINING && d->ops.drain_stop)
                        d->ops.drain_stop(d->userdata, d->nodes[i]->name);
        while (d->n_nodes > 0)
                dnode_remove(d, d->nodes[d->n_nodes - 1]);
}

void dispatch_reset(struct dispatch *d)
{
        forget_all(d, true);
}

bool dispatch_node_draining(const struct dispatch *d, const char *node)
{
        return dispatch_node_deadline(d, node) != 0;
}

uint64_t dispatch_node_deadline(const struct dispatch *d, const char *node)
{
        for (size_t i = 0; i < d->n_nodes; i++)
                if (streq(d->nodes[i]->name, node) && d->nodes[i]->state == DNODE_DRAINING)
                        return d->nodes[i]->deadline;
        return 0;
}

void dispatch_stats(const struct dispatch *d, struct dispatch_stats *ret)
{
        *ret = d->stats;
        ret->draining = 0;
        for (size_t i = 0; i < d->n_nodes; i++)
                if (d->nodes[i]->state == DNODE_DRAINING)
                        ret->draining++;
        ret->unknown_pending = (unsigned)d->n_unknowns;
        ret->scheduled = (unsigned)d->n_scheds;
        ret->reboots = (unsigned)d->n_reboots;
        ret->nodes_indexed = d->n_index;
}

int dispatch_new(struct loop *l, const struct dispatch_options *o, const struct dispatch_ops *ops,
                 void *userdata, struct dispatch **ret)
{
        struct dispatch *d;

        if (!l || !ops || !ops->drain || !ret)
                return -EINVAL;
        d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        d->loop = l;
        if (o)
                d->o = *o;
        if (!d->o.unknown_retry_usec)
                d->o.unknown_retry_usec = DEFAULT_UNKNOWN_RETRY;
        if (!d->o.heartbeat_usec)
                d->o.heartbeat_usec = DEFAULT_HEARTBEAT;
        if (!d->o.heartbeat_until_usec)
                d->o.heartbeat_until_usec = DEFAULT_HEARTBEAT_UNTIL;
        if (!d->o.maintenance_lead_usec)
                d->o.maintenance_lead_usec = DEFAULT_MAINTENANCE_LEAD;
        if (!d->o.emergency_usec)
                d->o.emergency_usec = DEFAULT_EMERGENCY;
        if (!d->o.min_budget_usec)
                d->o.min_budget_usec = DEFAULT_MIN_BUDGET;
        if (!d->o.dedupe_max)
                d->o.dedupe_max = DEFAULT_DEDUPE_MAX;
        if (!d->o.rebalance_revert_usec)
                d->o.rebalance_revert_usec = DEFAULT_REVERT;
        d->dedupe = calloc(d->o.dedupe_max, sizeof(*d->dedupe));
        if (!d->dedupe) {
                free(d);
                return -ENOMEM;
        }
        d->ops = *ops;
        d->userdata = userdata;
        *ret = d;
        return 0;
}

struct dispatch *dispatch_free(struct dispatch *d)
{
        if (!d)
                return NULL;
        forget_all(d, false);
        free(d->reboots);
        for (size_t i = 0; i < d->n_index; i++)
                free(d->index[i].node);
        free(d->index);
        free(d->nodes);
        free(d->unknowns);
        free(d->scheds);
        free(d->dedupe);
        free(d);
        return NULL;
}
