/* controller/launch: launch lifecycle actions completed once their node is Ready (see launch.h). */
#include "controller/launch.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/core.h"
#include "spotdrain/dispatch.h"
#include "spotdrain/kube.h"

#define SEC               UINT64_C(1000000)
#define DEFAULT_TIMEOUT   (600 * SEC)
#define DEFAULT_ATTEMPTS  6u
#define DEFAULT_BASE      (1 * SEC)
#define DEFAULT_MAX       (30 * SEC)
#define SYNC_RECHECK_USEC (1 * SEC) /* a timeout before the node list is known is judged again then */

enum wstate {
        W_WAITING,    /* for the owner's answer and/or the node */
        W_COMPLETING, /* CompleteLifecycleAction in flight, or its retry armed */
};

struct lwait {
        struct launch *la;
        uint64_t id;
        struct notice n;
        uint64_t *tickets;
        size_t n_tickets;
        enum wstate state;
        int owned; /* 1 ours, 0 not, -ENODATA unverified, -EINPROGRESS asking */
        char *node;
        bool ready;
        uint64_t start, last_beat;
        struct timer *deadline, *beat, *retry;
        struct timer *kick; /* the first look, from the loop (never inside launch_submit) */
        int owned_at_once;  /* ops->owned's answer when it came at once */
        struct backoff backoff;
        unsigned attempts;
        const char *result; /* "CONTINUE" | "ABANDON" while completing */
        bool beat_in_flight;
};

struct launch {
        struct loop *loop;
        struct launch_options o;
        struct launch_ops ops;
        void *userdata;
        struct lwait **waits;
        size_t n_waits;
        uint64_t next_id;
        bool synced;
        struct launch_stats stats;
};

const char *launch_result_label(enum launch_result r)
{
        static const char *const names[_LAUNCH_RESULT_MAX] = {
                [LAUNCH_CONTINUED] = "continue", [LAUNCH_ABANDONED] = "abandon",
                [LAUNCH_FOREIGN] = "foreign",    [LAUNCH_GONE] = "gone",
                [LAUNCH_FAILED] = "failed",
        };
        return (unsigned)r < _LAUNCH_RESULT_MAX ? names[r] : NULL;
}

int launch_new(struct loop *l, const struct launch_options *o, const struct launch_ops *ops, void *userdata,
               struct launch **ret)
{
        struct launch *la;

        if (!l || !ops || !ops->owned || !ops->call || !ops->ticket_done || !ret)
                return -EINVAL;
        la = calloc(1, sizeof(*la));
        if (!la)
                return -ENOMEM;
        la->loop = l;
        la->o = o ? *o : (struct launch_options){};
        if (!la->o.ready_timeout_usec)
                la->o.ready_timeout_usec = DEFAULT_TIMEOUT;
        if (!la->o.attempts)
                la->o.attempts = DEFAULT_ATTEMPTS;
        if (!la->o.backoff_base_usec)
                la->o.backoff_base_usec = DEFAULT_BASE;
        if (!la->o.backoff_max_usec)
                la->o.backoff_max_usec = DEFAULT_MAX;
        la->ops = *ops;
        la->userdata = userdata;
        *ret = la;
        return 0;
}

static void wait_free(struct lwait *w)
{
        timer_cancel(w->deadline);
        timer_cancel(w->beat);
        timer_cancel(w->retry);
        timer_cancel(w->kick);
        free(w->tickets);
        free(w->node);
        free(w);
}

static void wait_remove(struct launch *la, struct lwait *w)
{
        for (size_t i = 0; i < la->n_waits; i++)
                if (la->waits[i] == w) {
                        la->waits[i] = la->waits[--la->n_waits];
                        break;
                }
        wait_free(w);
        la->stats.waiting = (unsigned)la->n_waits;
}

void launch_reset(struct launch *la)
{
        while (la && la->n_waits > 0)
                wait_remove(la, la->waits[la->n_waits - 1]);
}

struct launch *launch_free(struct launch *la)
{
        if (!la)
                return NULL;
        launch_reset(la);
        free(la->waits);
        free(la);
        return NULL;
}

static struct lwait *wait_by_id(struct launch *la, uint64_t id)
{
        for (size_t i = 0; i < la->n_waits; i++)
                if (la->waits[i]->id == id)
                        return la->waits[i];
        return NULL;
}

/* Ends the wait: told to finished(), its tickets done with error. */
static void wait_finish(struct lwait *w, enum launch_result r, int error, const char *why)
{
        struct launch *la = w->la;
        _cleanup_free_ uint64_t *tickets = TAKE_PTR(w->tickets);
        size_t n = w->n_tickets;
        struct notice notice = w->n;
        _cleanup_free_ char *node = TAKE_PTR(w->node);

        w->n_tickets = 0;
        la->stats.results[r]++;
        wait_remove(la, w);
        if (la->ops.finished)
                la->ops.finished(la->userdata, &notice, node, r, why);
        for (size_t i = 0; i < n; i++)
                la->ops.ticket_done(la->userdata, tickets[i], error);
}

/* The hook's own times, when known. */
static bool wait_hook(struct lwait *w, uint64_t *heartbeat, uint64_t *global)
{
        struct launch *la = w->la;
        *heartbeat = *global = 0;
        return la->ops.hook && la->ops.hook(la->userdata, &w->n, heartbeat, global) >= 0 && *heartbeat;
}

static uint64_t wait_deadline(struct lwait *w)
{
        uint64_t hb, global, d = w->start + w->la->o.ready_timeout_usec;
        if (wait_hook(w, &hb, &global) && global && w->start + global < d)
                d = w->start + global;
        return d;
}

static void on_deadline(void *userdata);
static void on_beat(void *userdata);

static void arm_deadline(struct lwait *w)
{
        uint64_t now = clk_now(), d = wait_deadline(w);

        w->deadline = timer_cancel(w->deadline);
        if (timer_start_in(w->la->loop, d > now ? d - now : 0, on_deadline, w, &w->deadline) < 0)
                log_debug("launch: cannot arm the timeout of %s", w->n.instance_id);
}

/* Heartbeats only where the hook would run out before the wait does. */
static void arm_beat(struct lwait *w)
{
        struct launch *la = w->la;
        uint64_t hb, global, period = la->o.heartbeat_usec, now = clk_now(), due;

        w->beat = timer_cancel(w->beat);
        if (w->state != W_WAITING)
                return;
        if (wait_hook(w, &hb, &global))
                period = period && period < hb ? period : hb / 2;
        if (!period)
                return;
        due = w->last_beat + period;
        if (due >= wait_deadline(w))
                return;
        if (timer_start_in(la->loop, due > now ? due - now : 0, on_beat, w, &w->beat) < 0)
                log_debug("launch: cannot arm the heartbeat of %s", w->n.instance_id);
}

static void complete(struct lwait *w, const char *result)
{
        struct launch *la = w->la;
        int r;

        w->state = W_COMPLETING;
        w->result = result;
        w->deadline = timer_cancel(w->deadline);
        w->beat = timer_cancel(w->beat);
        w->attempts++;
        r = la->ops.call(la->userdata, &w->n, result, w->id * 2);
        if (r < 0) {
                log_warning_errno(r, "cannot complete the launch lifecycle action of %s", w->n.instance_id);
                wait_finish(w, LAUNCH_FAILED, r, "the call could not be sent");
        }
}

/* The node is Ready and the action ours (or unverified: the node joined here is the proof). */
static void try_continue(struct lwait *w)
{
        if (w->state != W_WAITING || !w->ready || w->owned == -EINPROGRESS || w->owned == 0)
                return;
        log_notice("node %s of instance %s is Ready: completing its launch lifecycle action (group %s, hook "
                   "%s) with CONTINUE",
                   w->node, w->n.instance_id, w->n.asg_name, w->n.lifecycle_hook_name);
        complete(w, "CONTINUE");
}

static void on_deadline(void *userdata)
{
        struct lwait *w = userdata;
        struct launch *la = w->la;

        w->deadline = NULL;
        if (w->state != W_WAITING)
                return;
        if (!la->synced || w->owned == -EINPROGRESS) {
                /* Whether the node joined is not known yet: judged once it is. */
                if (timer_start_in(la->loop, SYNC_RECHECK_USEC, on_deadline, w, &w->deadline) < 0)
                        log_debug("launch: cannot arm the timeout of %s", w->n.instance_id);
                return;
        }
        if (w->owned != 1 && !w->node) {
                log_warning(
                    "instance %s never joined as a node of this cluster and nothing says group %s is "
                    "this cluster's: its launch lifecycle action is left alone",
                    w->n.instance_id, w->n.asg_name);
                wait_finish(w, LAUNCH_FOREIGN, -ENXIO, "never joined as a node of this cluster");
                return;
        }
        log_warning("instance %s %s within %" PRIu64
                    " s of its launch: completing its launch lifecycle action "
                    "(group %s, hook %s) with ABANDON",
                    w->n.instance_id, w->node ? "joined but did not turn Ready" : "did not join as a node",
                    (clk_now() - w->start) / SEC, w->n.asg_name, w->n.lifecycle_hook_name);
        complete(w, "ABANDON");
}

static void on_beat(void *userdata)
{
        struct lwait *w = userdata;
        struct launch *la = w->la;

        w->beat = NULL;
        w->last_beat = clk_now();
        if (w->state == W_WAITING && !w->beat_in_flight) {
                log_info("heartbeat for the launch lifecycle action of %s (group %s, hook %s)",
                         w->n.instance_id, w->n.asg_name, w->n.lifecycle_hook_name);
                if (la->ops.call(la->userdata, &w->n, NULL, w->id * 2 + 1) >= 0) {
                        w->beat_in_flight = true;
                        la->stats.heartbeats++;
                }
        }
        arm_beat(w);
}

static void on_retry(void *userdata)
{
        struct lwait *w = userdata;
        w->retry = NULL;
        complete(w, w->result);
}

void launch_call_answer(struct launch *la, uint64_t id, int error, bool retryable, bool gone,
                        const char *message)
{
        struct lwait *w = la ? wait_by_id(la, id / 2) : NULL;

        if (!w)
                return;
        if (id % 2) {
                w->beat_in_flight = false;
                if (error < 0)
                        log_warning_reason(error, message,
                                           "heartbeat for the launch lifecycle action of %s failed",
                                           w->n.instance_id);
                return;
        }
        if (error >= 0) {
                bool cont = streq(w->result, "CONTINUE");
                wait_finish(w, cont ? LAUNCH_CONTINUED : LAUNCH_ABANDONED, 0,
                            cont ? "its node is Ready" : "its node was not Ready in time");
                return;
        }
        if (gone) {
                log_warning_reason(
                    error, message,
                    "the launch lifecycle action of %s is no longer there (completed, or timed "
                    "out to its default result)",
                    w->n.instance_id);
                wait_finish(w, LAUNCH_GONE, 0, "Auto Scaling has no such action any more");
                return;
        }
        if (retryable && w->attempts < la->o.attempts) {
                uint64_t after = backoff_next(&w->backoff);
                la->stats.retries++;
                log_info("completing the launch lifecycle action of %s failed (%s); again in %" PRIu64 " ms",
                         w->n.instance_id, message ? message : "no answer", after / 1000);
                if (timer_start_in(la->loop, after, on_retry, w, &w->retry) >= 0)
                        return;
        }
        log_warning_reason(error, message,
                           "cannot complete the launch lifecycle action of %s; its message comes back",
                           w->n.instance_id);
        wait_finish(w, LAUNCH_FAILED, error, message ? message : "CompleteLifecycleAction failed");
}

void launch_owned_answer(struct launch *la, uint64_t id, int owned)
{
        struct lwait *w = la ? wait_by_id(la, id) : NULL;

        if (!w || w->owned != -EINPROGRESS)
                return;
        if (owned == 0) {
                wait_finish(w, LAUNCH_FOREIGN, -ENXIO, "the group is not this cluster's");
                return;
        }
        if (owned < 0 && owned != -ENODATA) {
                wait_finish(w, LAUNCH_FAILED, owned, "whether the group is this cluster's is not known");
                return;
        }
        w->owned = owned;
        try_continue(w);
}

static void on_kick(void *userdata)
{
        struct lwait *w = userdata;
        struct launch *la = w->la;
        uint64_t id = w->id;
        const cJSON *node;

        w->kick = NULL;
        if (w->owned_at_once != -EINPROGRESS)
                launch_owned_answer(la, id, w->owned_at_once); /* may free w */
        if (!(w = wait_by_id(la, id)) || !la->ops.node_of)
                return;
        node = la->ops.node_of(la->userdata, w->n.instance_id);
        if (node)
                launch_node_update(la, node);
}

static struct lwait *wait_by_token(struct launch *la, const char *token)
{
        for (size_t i = 0; i < la->n_waits; i++)
                if (streq(la->waits[i]->n.lifecycle_action_token, token))
                        return la->waits[i];
        return NULL;
}

static int add_ticket(struct lwait *w, uint64_t ticket)
{
        uint64_t *v;

        if (ticket == DISPATCH_NO_TICKET)
                return 0;
        v = realloc(w->tickets, (w->n_tickets + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        w->tickets = v;
        w->tickets[w->n_tickets++] = ticket;
        return 0;
}

int launch_submit(struct launch *la, const struct notice *n, uint64_t ticket)
{
        struct lwait *w, **v;
        uint64_t now = clk_now();
        int r;

        if (!la || !n || n->kind != NOTICE_ASG_LIFECYCLE_LAUNCH || isempty(n->lifecycle_action_token) ||
            isempty(n->asg_name) || isempty(n->lifecycle_hook_name))
                return -EINVAL;
        if ((w = wait_by_token(la, n->lifecycle_action_token)))
                return add_ticket(w, ticket); /* delivered again: joins the wait under way */
        v = realloc(la->waits, (la->n_waits + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        la->waits = v;
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        *w = (struct lwait){ .la = la,
                             .id = ++la->next_id,
                             .n = *n,
                             .owned = -EINPROGRESS,
                             .start = n->notice_time && n->notice_time < now ? n->notice_time : now,
                             .backoff = BACKOFF_INIT(la->o.backoff_base_usec, la->o.backoff_max_usec) };
        w->last_beat = w->start;
        if (add_ticket(w, ticket) < 0) {
                free(w);
                return -ENOMEM;
        }
        la->waits[la->n_waits++] = w;
        la->stats.waits++;
        la->stats.waiting = (unsigned)la->n_waits;
        log_info("launch lifecycle action of %s (group %s, hook %s): waiting up to %" PRIu64
                 " s for its node to be Ready",
                 n->instance_id, n->asg_name, n->lifecycle_hook_name,
                 wait_deadline(w) > now ? (wait_deadline(w) - now) / SEC : 0);
        arm_deadline(w);
        arm_beat(w);
        r = la->ops.owned(la->userdata, n, w->id);
        w->owned_at_once = r;
        /* Answers and the node the informer has already are taken from the loop, so that no ticket is
         * done before the caller has counted it. */
        if (timer_start_in(la->loop, 0, on_kick, w, &w->kick) < 0)
                log_debug("launch: cannot arm the first look at %s", n->instance_id);
        return 0;
}

void launch_node_update(struct launch *la, const cJSON *node)
{
        const char *instance = dispatch_instance_from_provider_id(kube_object_str(node, "spec.providerID"));
        const char *name = kube_object_str(node, "metadata.name");

        for (size_t i = 0; la && instance && name && i < la->n_waits; i++) {
                struct lwait *w = la->waits[i];
                if (w->state != W_WAITING || !streq(w->n.instance_id, instance))
                        continue;
                if (!w->node) {
                        la->stats.joined++;
                        log_info("instance %s joined as node %s", instance, name);
                        if (free_and_strdup(&w->node, name) < 0)
                                continue;
                }
                w->ready = dispatch_node_ready(node);
                try_continue(w); /* may free w: nothing after */
                break;
        }
}

void launch_nodes_synced(struct launch *la)
{
        if (la)
                la->synced = true;
}

void launch_hooks_changed(struct launch *la)
{
        for (size_t i = 0; la && i < la->n_waits; i++)
                if (la->waits[i]->state == W_WAITING) {
                        arm_deadline(la->waits[i]);
                        arm_beat(la->waits[i]);
                }
}

void launch_stats(const struct launch *la, struct launch_stats *ret)
{
        *ret = la ? la->stats : (struct launch_stats){};
}
