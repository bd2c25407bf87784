/* dispatch/scheduled: scheduled changes: the drain deferred until the maintenance lead before the event, the
 * event over (cancelled or completed), and a scheduled reboot watched until its node is Ready again. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch_internal.h"
#include "spotdrain/keys.h"

/* A completed reboot: how often its node is asked for, and how long it may take to be Ready again. */
#define REBOOT_REFRESH_USEC (5 * SEC)
#define REBOOT_WAIT_USEC    (3600 * SEC)

/* ---- scheduled changes ---- */

struct sched *sched_find(struct dispatch *d, const struct notice *n)
{
        for (size_t i = 0; i < d->n_scheds; i++)
                if (streq(d->scheds[i]->notice.event_id, n->event_id) &&
                    streq(d->scheds[i]->notice.instance_id, n->instance_id))
                        return d->scheds[i];
        return NULL;
}

void sched_remove(struct dispatch *d, struct sched *s)
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
        r = dispatch_act(d, node, &n, n.deadline, DISPATCH_NO_TICKET);
        if (r < 0)
                log_warning_errno(r, "cannot act on the scheduled change of %s", node);
}

/* Kept until it is due (the timer drains it then); the same event again moves it if its window moved. */
int sched_add(struct dispatch *d, const char *node, const struct notice *n, uint64_t due)
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

struct reboot *reboot_find(struct dispatch *d, const char *node)
{
        for (size_t i = 0; i < d->n_reboots; i++)
                if (streq(d->reboots[i]->node, node))
                        return d->reboots[i];
        return NULL;
}

void reboot_remove(struct dispatch *d, struct reboot *b)
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
void reboot_check(struct dispatch *d, const char *name, const cJSON *node)
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
int on_scheduled_over(struct dispatch *d, const char *node, const struct notice *n)
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
