/* dispatch: notices → nodes, one drain per node, dedupe, unknown instances.
 *
 * Everything here is bookkeeping on the loop; the effects (drains, taints, lifecycle calls, message
 * deletion) go through struct dispatch_ops, so that the rules can be tested without a cluster. Node counts
 * are in the thousands at most and notices arrive a few per second, so plain arrays and linear searches
 * keep it simple. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/core.h"
#include "spotdrain/dispatch.h"
#include "spotdrain/engine.h"
#include "spotdrain/keys.h"
#include "spotdrain/kube.h"

#define SEC                      UINT64_C(1000000)
#define DEFAULT_UNKNOWN_RETRY    (60 * SEC)
#define DEFAULT_HEARTBEAT        (300 * SEC)
#define DEFAULT_HEARTBEAT_UNTIL  (172800 * SEC)
#define DEFAULT_MAINTENANCE_LEAD (DISPATCH_DEFAULT_MAINTENANCE_LEAD_SECONDS * SEC)
#define DEFAULT_EMERGENCY        (30 * SEC)
#define DEFAULT_DEDUPE_MAX       4096
#define DEFAULT_REVERT           (DISPATCH_DEFAULT_REVERT_SECONDS * SEC)
/* A finished or rebalanced node is remembered this long, so that late duplicates and state changes of the
 * instance are recognized as such. */
#define NODE_KEEP_USEC     (3600 * SEC)
#define DEFAULT_MIN_BUDGET (DISPATCH_DEFAULT_MIN_BUDGET_SECONDS * SEC) /* notices.min_budget_seconds */
#define DEDUPE_KEY_SIZE    (NOTICE_ID_SIZE + NOTICE_INSTANCE_ID_SIZE + NOTICE_STATE_SIZE + 2)
/* A completed reboot: how often its node is asked for, and how long it may take to be Ready again. */
#define REBOOT_REFRESH_USEC (5 * SEC)
#define REBOOT_WAIT_USEC    (3600 * SEC)

struct index_entry {
        char *node;
        char instance[NOTICE_INSTANCE_ID_SIZE];
};

enum dnode_state {
        DNODE_REBALANCED,
        DNODE_DRAINING,
        DNODE_FINISHED,
};

struct dnode {
        struct dispatch *d;
        char *name;
        enum dnode_state state;
        struct notice notice; /* the notice that drives the drain (or the rebalance) */
        uint64_t deadline;
        uint64_t since; /* state entered (engine clock) */
        uint64_t *tickets;
        size_t n_tickets;
        struct notice *asg; /* lifecycle actions to heartbeat and complete */
        size_t n_asg;
        struct timer *heartbeat;
        uint64_t asg_since, last_beat; /* first lifecycle action taken, last heartbeat (engine clock) */
        struct timer *revert;          /* rebalanced: the soft taint's removal */
        bool soft_tainted;
        bool cordoned; /* by a notice whose action is cordon */
        bool firm;     /* a notice other than a scheduled change drives or joined the drain */
        bool resumed;  /* the drain was resumed from its record (an earlier controller's) */
};

/* An active scheduled change not due yet. */
struct sched {
        struct dispatch *d;
        char *node;
        struct notice notice;
        struct timer *due;
};

/* A reboot that completed, its node not Ready again yet. */
struct reboot {
        struct dispatch *d;
        char *node;
        struct notice notice;
        uint64_t since;
        struct timer *refresh;
};

struct unknown {
        struct dispatch *d;
        struct notice notice;
        uint64_t ticket;
        struct timer *expiry;
};

struct dispatch {
        struct loop *loop;
        struct dispatch_options o;
        struct dispatch_ops ops;
        void *userdata;

        struct index_entry *index;
        size_t n_index;
        struct dnode **nodes;
        size_t n_nodes;
        struct unknown **unknowns;
        size_t n_unknowns;
        struct sched **scheds;
        size_t n_scheds;
        struct reboot **reboots;
        size_t n_reboots;

        char (*dedupe)[DEDUPE_KEY_SIZE]; /* a ring of the most recent keys */
        size_t n_dedupe, dedupe_next;

        struct dispatch_stats stats;
};

/* ---- providerID index ---- */

const char *dispatch_instance_from_provider_id(const char *provider_id)
{
        const char *slash;

        /* aws:///ZONE/i-..., also aws:///i-... and the rarer aws://ZONE/i-... */
        if (!startswith(provider_id, "aws://"))
                return NULL;
        slash = strrchr(provider_id, '/');
        if (!slash || !notice_instance_id_valid(slash + 1))
                return NULL;
        return slash + 1;
}

static struct index_entry *index_find_node(struct dispatch *d, const char *node)
{
        for (size_t i = 0; i < d->n_index; i++)
                if (streq(d->index[i].node, node))
                        return &d->index[i];
        return NULL;
}

static void index_remove(struct dispatch *d, struct index_entry *e)
{
        size_t i = (size_t)(e - d->index);
        free(e->node);
        d->index[i] = d->index[--d->n_index];
}

const char *dispatch_node_for_instance(const struct dispatch *d, const char *instance_id)
{
        for (size_t i = 0; i < d->n_index; i++)
                if (streq(d->index[i].instance, instance_id))
                        return d->index[i].node;
        return NULL;
}

/* ---- node entries ---- */

static struct dnode *dnode_find(struct dispatch *d, const char *name)
{
        for (size_t i = 0; i < d->n_nodes; i++)
                if (streq(d->nodes[i]->name, name))
                        return d->nodes[i];
        return NULL;
}

static void dnode_free(struct dnode *n)
{
        if (!n)
                return;
        timer_cancel(n->heartbeat);
        timer_cancel(n->revert);
        free(n->name);
        free(n->tickets);
        free(n->asg);
        free(n);
}

static void dnode_remove(struct dispatch *d, struct dnode *n)
{
        for (size_t i = 0; i < d->n_nodes; i++)
                if (d->nodes[i] == n) {
                        d->nodes[i] = d->nodes[--d->n_nodes];
                        break;
                }
        dnode_free(n);
}

static struct dnode *dnode_add(struct dispatch *d, const char *name)
{
        struct dnode **v, *n;

        v = realloc(d->nodes, (d->n_nodes + 1) * sizeof(*v));
        if (!v)
                return NULL;
        d->nodes = v;
        n = calloc(1, sizeof(*n));
        if (!n)
                return NULL;
        n->d = d;
        n->name = strdup(name);
        if (!n->name) {
                free(n);
                return NULL;
        }
        d->nodes[d->n_nodes++] = n;
        return n;
}

/* Forgets finished and rebalanced nodes that are old enough. */
static void dnode_purge(struct dispatch *d)
{
        uint64_t now = clk_now();
        for (size_t i = 0; i < d->n_nodes;) {
                struct dnode *n = d->nodes[i];
                if (n->state != DNODE_DRAINING && !n->revert && now - n->since > NODE_KEEP_USEC)
                        dnode_remove(d, n);
                else
                        i++;
        }
}

static int dnode_add_ticket(struct dnode *n, uint64_t ticket)
{
        uint64_t *v;

        if (ticket == DISPATCH_NO_TICKET)
                return 0;
        v = realloc(n->tickets, (n->n_tickets + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        n->tickets = v;
        n->tickets[n->n_tickets++] = ticket;
        return 0;
}

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

static uint64_t drain_deadline(const struct dispatch *d, const char *node, const struct notice *n,
                               uint64_t now);

/* A drain driven by its lifecycle action: planned again when the time its hook grants is known now. */
static void lifecycle_replan(struct dnode *n)
{
        struct dispatch *d = n->d;
        uint64_t deadline;

        if (n->state != DNODE_DRAINING || n->n_asg == 0 ||
            n->notice.kind != NOTICE_ASG_LIFECYCLE_TERMINATE || !d->ops.lifecycle_deadline ||
            !d->ops.lifecycle_deadline(d->userdata, &n->asg[0]))
                return;
        deadline = drain_deadline(d, n->name, &n->asg[0], clk_now());
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

/* ---- dedupe ---- */

static void dedupe_key(const struct notice *n, char key[static DEDUPE_KEY_SIZE])
{
        snprintf(key, DEDUPE_KEY_SIZE, "%s|%s|%s", n->event_id, n->instance_id,
                 n->kind == NOTICE_SCHEDULED_CHANGE ? n->state : "");
}

static bool dedupe_seen(const struct dispatch *d, const char *key)
{
        for (size_t i = 0; i < d->n_dedupe; i++)
                if (streq(d->dedupe[i], key))
                        return true;
        return false;
}

static void dedupe_add(struct dispatch *d, const char *key)
{
        snprintf(d->dedupe[d->dedupe_next], DEDUPE_KEY_SIZE, "%s", key);
        d->dedupe_next = (d->dedupe_next + 1) % d->o.dedupe_max;
        if (d->n_dedupe < d->o.dedupe_max)
                d->n_dedupe++;
}

/* ---- acting on a notice for a known node ---- */

static bool scheduled_change_over(const struct notice *n)
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
static enum dispatch_action kind_action(const struct dispatch *d, enum notice_kind k)
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
        /* A new recommendation after the taint was reverted taints again; one while tainted only moves the
         * revert. */
        if (!dn->soft_tainted) {
                dn->soft_tainted = true;
                if (d->ops.soft_taint && (r = d->ops.soft_taint(d->userdata, node, true)) < 0) {
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
static int act(struct dispatch *d, const char *node, const struct notice *n, uint64_t deadline,
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

/* ---- scheduled changes ---- */

static struct sched *sched_find(struct dispatch *d, const struct notice *n)
{
        for (size_t i = 0; i < d->n_scheds; i++)
                if (streq(d->scheds[i]->notice.event_id, n->event_id) &&
                    streq(d->scheds[i]->notice.instance_id, n->instance_id))
                        return d->scheds[i];
        return NULL;
}

static void sched_remove(struct dispatch *d, struct sched *s)
{
        for (size_t i = 0; i < d->n_scheds; i++)
                if (d->scheds[i] == s) {
                        d->scheds[i] = d->scheds[--d->n_scheds];
                        break;
                }
        timer_cancel(s->due);
        free(s->node);
        free(s);
}

static void dedupe_key(const struct notice *n, char key[static DEDUPE_KEY_SIZE]);
static void dedupe_add(struct dispatch *d, const char *key);

static void on_sched_due(void *userdata)
{
        struct sched *s = userdata;
        struct dispatch *d = s->d;
        struct notice n = s->notice;
        _cleanup_free_ char *node = TAKE_PTR(s->node);
        char key[DEDUPE_KEY_SIZE];
        int r;

        s->due = NULL;
        sched_remove(d, s);
        /* From now on the event is a plain duplicate. */
        dedupe_key(&n, key);
        dedupe_add(d, key);
        if (!node)
                return;
        r = act(d, node, &n, n.deadline, DISPATCH_NO_TICKET);
        if (r < 0)
                log_warning_errno(r, "cannot act on the scheduled change of %s", node);
}

/* Kept until it is due (the timer drains it then); the same event again moves it if its window moved. */
static int sched_add(struct dispatch *d, const char *node, const struct notice *n, uint64_t due)
{
        struct sched *s = sched_find(d, n), **v;
        int r;

        if (!s) {
                v = realloc(d->scheds, (d->n_scheds + 1) * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                d->scheds = v;
                s = calloc(1, sizeof(*s));
                if (!s || !(s->node = strdup(node))) {
                        free(s);
                        return -ENOMEM;
                }
                s->d = d;
                d->scheds[d->n_scheds++] = s;
        }
        s->notice = *n;
        s->due = timer_cancel(s->due);
        r = timer_start(d->loop, due, on_sched_due, s, &s->due);
        if (r < 0)
                sched_remove(d, s);
        return r;
}

/* ---- reboots: uncordon when the node is back ---- */

static bool is_reboot(const struct notice *n)
{
        return streq(n->action, "system-reboot") || streq(n->action, "instance-reboot") ||
               (startswith(n->action, "AWS_EC2_") && strstr(n->action, "_REBOOT_MAINTENANCE_"));
}

bool dispatch_notice_reboot_done(const struct notice *n)
{
        return n->kind == NOTICE_SCHEDULED_CHANGE && is_reboot(n) &&
               (streq(n->state, "completed") || streq(n->state, "closed"));
}

static struct reboot *reboot_find(struct dispatch *d, const char *node)
{
        for (size_t i = 0; i < d->n_reboots; i++)
                if (streq(d->reboots[i]->node, node))
                        return d->reboots[i];
        return NULL;
}

static void reboot_remove(struct dispatch *d, struct reboot *b)
{
        for (size_t i = 0; i < d->n_reboots; i++)
                if (d->reboots[i] == b) {
                        d->reboots[i] = d->reboots[--d->n_reboots];
                        break;
                }
        timer_cancel(b->refresh);
        free(b->node);
        free(b);
}

static void on_reboot_refresh(void *userdata)
{
        struct reboot *b = userdata;
        struct dispatch *d = b->d;
        _cleanup_free_ char *node = NULL;

        b->refresh = NULL;
        if (clk_now() - b->since > REBOOT_WAIT_USEC) {
                log_warning("node %s is not Ready %" PRIu64
                            " min after its reboot (%s) completed; leaving it "
                            "cordoned",
                            b->node, REBOOT_WAIT_USEC / (60 * SEC), b->notice.event_id);
                reboot_remove(d, b);
                return;
        }
        if (timer_start_in(d->loop, REBOOT_REFRESH_USEC, on_reboot_refresh, b, &b->refresh) < 0)
                log_debug("dispatch: cannot arm the reboot check of %s", b->node);
        /* The refresh may settle (and free) b: nothing of it is used after. */
        node = strdup(b->node);
        if (node && d->ops.node_refresh)
                d->ops.node_refresh(d->userdata, node);
}

/* Completed: its node is waited on until it is Ready (reboot_check()). */
static int reboot_add(struct dispatch *d, const char *node, const struct notice *n)
{
        struct reboot *b = reboot_find(d, node), **v;

        if (!b) {
                v = realloc(d->reboots, (d->n_reboots + 1) * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                d->reboots = v;
                b = calloc(1, sizeof(*b));
                if (!b || !(b->node = strdup(node))) {
                        free(b);
                        return -ENOMEM;
                }
                b->d = d;
                d->reboots[d->n_reboots++] = b;
        }
        log_info("the reboot of node %s (%s) completed; it is made schedulable once Ready", node,
                 n->event_id);
        b->notice = *n;
        b->since = clk_now();
        b->refresh = timer_cancel(b->refresh);
        /* At once (and from the loop: the caller may be mid-submit), then every few seconds. */
        return timer_start_in(d->loop, 0, on_reboot_refresh, b, &b->refresh);
}

bool dispatch_node_ready(const cJSON *node)
{
        const cJSON *conds =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(node, "status"), "conditions");
        const cJSON *c;

        cJSON_ArrayForEach (c, conds)
                if (streq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "type")), "Ready"))
                        return streq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "status")),
                                     "True");
        return false;
}

/* A node update: a node whose reboot completed and that is Ready again is made schedulable, if spotdrain
 * cordoned it for that reboot (its drain record names the event) and nothing else drains it now. */
static void reboot_check(struct dispatch *d, const char *name, const cJSON *node)
{
        struct reboot *b = reboot_find(d, name);
        struct dnode *dn = dnode_find(d, name);
        const char *why = NULL;
        int r;

        if (!b || !dispatch_node_ready(node))
                return;
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(node, "spec"),
                                                           "unschedulable")))
                why = "it is schedulable already";
        else if (!drain_record_is_for(node, notice_kind_to_string(NOTICE_SCHEDULED_CHANGE),
                                      b->notice.event_id))
                why = "its cordon is not spotdrain's for this maintenance (no drain record of it)";
        else if (drain_record_cordoned_before(node))
                why = "it was cordoned before spotdrain drained it for this maintenance";
        else if (dn && dn->state == DNODE_DRAINING &&
                 (dn->firm || !streq(dn->notice.event_id, b->notice.event_id)))
                why = "another notice drains it";
        if (why) {
                log_info("node %s is Ready after its reboot (%s); left as it is: %s", name,
                         b->notice.event_id, why);
                reboot_remove(d, b);
                return;
        }
        log_notice("node %s is Ready after its reboot (%s); making it schedulable", name,
                   b->notice.event_id);
        reboot_remove(d, b);
        d->stats.reboot_uncordoned++;
        if (dn && dn->state == DNODE_DRAINING) {
                /* The reboot came before the drain ended: it has nothing left to do. */
                if (d->ops.drain_stop)
                        d->ops.drain_stop(d->userdata, name);
                dispatch_drain_finished(d, name, false);
        }
        /* Schedulable again, the node is free for later notices (a drained one would absorb them). */
        if ((dn = dnode_find(d, name)) && dn->state != DNODE_DRAINING)
                dnode_remove(d, dn);
        if (d->ops.uncordon && (r = d->ops.uncordon(d->userdata, name)) < 0) {
                d->stats.action_errors++;
                log_debug_errno(r, "dispatch: cannot make %s schedulable", name);
        }
}

/* Canceled, completed or closed. AWS Health has no `canceled` (its statuses are upcoming, open and closed):
 * an event closed before its window's start is one that will not happen, a cancellation. */
static int on_scheduled_over(struct dispatch *d, const char *node, const struct notice *n)
{
        struct sched *s = sched_find(d, n);
        struct dnode *dn = dnode_find(d, node);
        _cleanup_free_ uint64_t *tickets = NULL;
        size_t n_tickets;
        bool canceled = streq(n->state, "canceled") ||
                        (streq(n->state, "closed") && n->notice_time && n->notice_time < n->start_time);
        int r;

        if (s) {
                sched_remove(d, s); /* not due yet: nothing was done */
                return DISPATCH_DONE;
        }
        if (!canceled && is_reboot(n)) {
                r = reboot_add(d, node, n);
                return r < 0 ? r : DISPATCH_DONE;
        }
        if (canceled && dn && dn->state == DNODE_REBALANCED && dn->cordoned &&
            dn->notice.kind == NOTICE_SCHEDULED_CHANGE && streq(dn->notice.event_id, n->event_id)) {
                /* Cordoned for it (its action), and nothing else came since. */
                log_info("scheduled change %s was canceled; uncordoning node %s", n->event_id, node);
                dn->cordoned = false;
                d->stats.canceled++;
                if (d->ops.uncordon && (r = d->ops.uncordon(d->userdata, node)) < 0) {
                        d->stats.action_errors++;
                        log_debug_errno(r, "dispatch: cannot make %s schedulable", node);
                }
                return DISPATCH_DONE;
        }
        /* Undone whether its drain is under way or finished already (the drain of a maintenance ends well
         * before its window): the node stays in service. */
        if (!canceled || !dn || (dn->state != DNODE_DRAINING && dn->state != DNODE_FINISHED) || dn->firm ||
            dn->notice.kind != NOTICE_SCHEDULED_CHANGE || !streq(dn->notice.event_id, n->event_id))
                return DISPATCH_DONE;
        log_info("scheduled change %s was canceled; making node %s schedulable", n->event_id, node);
        d->stats.canceled++;
        if (dn->state == DNODE_DRAINING && d->ops.drain_stop)
                d->ops.drain_stop(d->userdata, node);
        if (d->ops.uncordon && (r = d->ops.uncordon(d->userdata, node)) < 0) {
                d->stats.action_errors++;
                log_debug_errno(r, "dispatch: cannot make %s schedulable", node);
        }
        tickets = TAKE_PTR(dn->tickets);
        n_tickets = dn->n_tickets;
        dnode_remove(d, dn);
        for (size_t i = 0; i < n_tickets; i++)
                if (d->ops.ticket_done)
                        d->ops.ticket_done(d->userdata, tickets[i], 0);
        return DISPATCH_DONE;
}

uint64_t dispatch_late_usec(const struct notice *n, uint64_t now)
{
        if (n->kind == NOTICE_STATE_CHANGE || !n->deadline || n->deadline >= now)
                return 0; /* a state change's deadline is its own time: going now is what it says */
        return now - n->deadline;
}

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

/* The deadline a drain is planned against (issue #15): never further out than the kind allows (a spot
 * or Capacity Reservation warning gives two minutes from the event, or from now if the event claims a later
 * time), and never nearer than min_budget_usec from now, so that a notice that arrives late (a backlog, a
 * retry) or back-dated still drains gracefully instead of forcing pods out in its last second. */
static uint64_t drain_deadline(const struct dispatch *d, const char *node, const struct notice *n,
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

static int handle_known(struct dispatch *d, const char *node, const struct notice *n, uint64_t ticket,
                        uint64_t *ret_defer_until)
{
        struct dnode *dn = dnode_find(d, node);
        uint64_t now = clk_now();

        switch (n->kind) {
        case NOTICE_REBALANCE_RECOMMENDATION:
                /* Drained (notices.rebalance_recommendation.action), it is planned against the least a spot
                 * warning after it would give. */
                return act(d, node, n, now + NOTICE_SPOT_WARNING_USEC, ticket);
        case NOTICE_STATE_CHANGE:
                if (dn && dn->state != DNODE_REBALANCED) {
                        dn->firm = true;      /* the instance is going: no cancellation undoes the drain */
                        return DISPATCH_DONE; /* draining or drained: the state change adds nothing */
                }
                return act(d, node, n,
                           n->deadline > now + d->o.emergency_usec ? n->deadline : now + d->o.emergency_usec,
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
                return act(d, node, n, drain_deadline(d, node, n, now), ticket);
        }
        case NOTICE_SPOT_INTERRUPTION:
        case NOTICE_CAPACITY_RESERVATION_INTERRUPTION:
        case NOTICE_ASG_LIFECYCLE_TERMINATE:
                return act(d, node, n, drain_deadline(d, node, n, now), ticket);
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

void dispatch_reset(struct dispatch *d)
{
        while (d->n_reboots > 0)
                reboot_remove(d, d->reboots[d->n_reboots - 1]);
        while (d->n_unknowns > 0)
                unknown_remove(d, d->unknowns[d->n_unknowns - 1]);
        while (d->n_scheds > 0)
                sched_remove(d, d->scheds[d->n_scheds - 1]);
        for (size_t i = 0; i < d->n_nodes; i++)
                if (d->nodes[i]->state == DNODE_DRAINING && d->ops.drain_stop)
                        d->ops.drain_stop(d->userdata, d->nodes[i]->name);
        while (d->n_nodes > 0)
                dnode_remove(d, d->nodes[d->n_nodes - 1]);
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
        while (d->n_reboots > 0)
                reboot_remove(d, d->reboots[d->n_reboots - 1]);
        while (d->n_unknowns > 0)
                unknown_remove(d, d->unknowns[d->n_unknowns - 1]);
        while (d->n_scheds > 0)
                sched_remove(d, d->scheds[d->n_scheds - 1]);
        while (d->n_nodes > 0)
                dnode_remove(d, d->nodes[d->n_nodes - 1]);
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
