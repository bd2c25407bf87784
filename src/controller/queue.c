/* controller/queue: the SQS side of a held message: its visibility (hidden, extended while its drains run,
 * shown again), its deletion in batches, the queue becoming unreadable and readable again, and the alert of
 * a rejected message. The messages come in through intake.c; the controller holds them
 * (controller_internal.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/controller_internal.h"
#include "spotdrain/keys.h"

#define HIDE_CALLS        4         /* ChangeMessageVisibilityBatch calls in flight at once */
#define EXTEND_RETRY_USEC (1 * SEC) /* a failed extension is tried again this soon */
#define DELETE_ATTEMPTS   5

static void flush_deletes(struct controller *c);

/* ---- the log of messages left in the queue ---- */

void quiet_told(const char *reason, const char *sender, uint64_t held, void *userdata)
{
        char count[24];

        snprintf(count, sizeof(count), "%" PRIu64, held);
        log_full(LOG_WARNING, 0,
                 (const char *[]){ "reason", reason, "sender", sender, "count", count, NULL },
                 "%" PRIu64 " more message(s) from %s left in the queue (%s) in the last minute, not logged "
                 "one by one",
                 held, sender, reason);
}

static void on_quiet_timer(void *userdata)
{
        struct controller *c = userdata;
        uint64_t now = clk_now(), next;

        c->quiet_timer = NULL;
        next = quiet_flush(&c->quiet, now, false, quiet_told, c);
        if (next &&
            timer_start_in(c->loop, next > now ? next - now : 0, on_quiet_timer, c, &c->quiet_timer) < 0)
                log_debug("controller: cannot arm the log summary");
}

/* Whether the line about a message left in the queue for reason, from sender, is logged now: at most one
 * per (reason, sender) a minute; the rest are counted and told in one line when the minute ends. */
bool quiet_line(struct controller *c, const char *reason, const char *sender)
{
        if (quiet_allow(&c->quiet, reason, isempty(sender) ? "an unknown sender" : sender, clk_now()))
                return true;
        if (!c->quiet_timer &&
            timer_start_in(c->loop, QUIET_INTERVAL_USEC, on_quiet_timer, c, &c->quiet_timer) < 0)
                log_debug("controller: cannot arm the log summary");
        return false;
}

/* ---- queue health ---- */

void queue_failed(struct controller *c, const struct sqs_result *res, const char *what)
{
        bool unreadable_now = sqs_error_queue_unreadable(res->kind);

        log_debug("controller: %s failed: %s %s %s", what, sqs_error_to_string(res->kind), res->code,
                  res->message);
        /* A throttle says the queue is there and this role may read it, only not this fast: the call is
         * retried after the backoff, and it counts neither toward unreadable nor as proof of readable. */
        if (res->kind == SQS_ERR_THROTTLED)
                return;
        c->failures_in_row++;
        c->failures++;
        if (unreadable_now)
                c->stats.unreadable_failures++;
        if (c->unreadable || (!unreadable_now && c->failures_in_row < c->o.failures_unreadable))
                return;
        c->unreadable = true;
        c->stats.unreadable++;
        log_error("queue %s is unreadable: %s failed: %s%s%s", c->queue_url, what,
                  isempty(res->code) ? sqs_error_to_string(res->kind) : res->code,
                  isempty(res->message) ? "" : ": ", res->message);
        if (c->bus)
                (void)alert_emit(c->bus, ALERT_QUEUE_UNREADABLE, NULL,
                                 (const char *[]){
                                     "queue_url", c->queue_url, "error",
                                     isempty(res->code) ? sqs_error_to_string(res->kind) : res->code, NULL },
                                 "cannot read the interruption queue %s: %s %s", c->queue_url,
                                 isempty(res->code) ? sqs_error_to_string(res->kind) : res->code,
                                 res->message);
}

void queue_ok(struct controller *c)
{
        c->failures_in_row = 0;
        backoff_reset(&c->backoff);
        c->queue_ok = true;
        if (c->unreadable) {
                c->unreadable = false;
                log_notice("queue %s is readable again", c->queue_url);
        }
}

static void on_hidden(struct sqs_client *s, const struct sqs_result *res, const struct sqs_entry_result *e,
                      size_t n, void *userdata)
{
        struct controller *c = userdata;

        c->ops_in_flight--;
        c->hide_calls--;
        /* A message whose change failed comes back when its current visibility ends: nothing is lost. */
        if (res->error < 0)
                log_debug("controller: visibility change failed: %s", sqs_error_to_string(res->kind));
        for (size_t i = 0; i < n; i++)
                if (e[i].error < 0)
                        log_debug("controller: visibility change of one message failed: %s", e[i].code);
        flush_hides(c);
}

/* Sends the waiting changes, up to SQS_MAX_BATCH of one visibility a call, HIDE_CALLS calls at a time. */
void flush_hides(struct controller *c)
{
        while (!c->hold_hides && c->n_hides > 0 && c->hide_calls < HIDE_CALLS) {
                struct sqs_delete_entry entries[SQS_MAX_BATCH];
                struct pending_hide taken[SQS_MAX_BATCH];
                char ids[SQS_MAX_BATCH][8];
                unsigned seconds = c->hides[0].seconds;
                size_t n = 0, kept = 0;

                for (size_t i = 0; i < c->n_hides; i++) {
                        if (n < SQS_MAX_BATCH && c->hides[i].seconds == seconds) {
                                taken[n] = c->hides[i];
                                snprintf(ids[n], sizeof(ids[n]), "h%zu", n);
                                entries[n] = (struct sqs_delete_entry){ .id = ids[n],
                                                                        .receipt_handle = taken[n].handle };
                                n++;
                        } else
                                c->hides[kept++] = c->hides[i];
                }
                c->n_hides = kept;
                if (sqs_change_visibility_batch(c->sqs, entries, n, seconds, on_hidden, c, NULL) >= 0) {
                        c->ops_in_flight++;
                        c->hide_calls++;
                } else
                        log_debug("controller: cannot send %zu visibility changes", n);
                for (size_t i = 0; i < n; i++)
                        free(taken[i].handle);
        }
}

void set_visibility(struct controller *c, const char *handle, uint64_t usec)
{
        uint64_t s = (usec + SEC - 1) / SEC;
        struct pending_hide *v;
        char *h = strdup(handle);

        if (s > SQS_MAX_VISIBILITY)
                s = SQS_MAX_VISIBILITY;
        v = h ? realloc(c->hides, (c->n_hides + 1) * sizeof(*v)) : NULL;
        if (!v) {
                free(h); /* the message comes back when its current visibility ends */
                return;
        }
        c->hides = v;
        c->hides[c->n_hides++] = (struct pending_hide){ .handle = h, .seconds = (unsigned)s };
        flush_hides(c);
}

/* ---- deletes, batched ---- */

static int queue_delete_noflush(struct controller *c, const char *id, const char *handle, unsigned attempts)
{
        struct pending_delete *v = realloc(c->deletes, (c->n_deletes + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        c->deletes = v;
        v[c->n_deletes] = (struct pending_delete){ .id = strdup(id ? id : ""),
                                                   .handle = strdup(handle),
                                                   .attempts = attempts };
        if (!v[c->n_deletes].id || !v[c->n_deletes].handle) {
                free(v[c->n_deletes].id);
                free(v[c->n_deletes].handle);
                return -ENOMEM;
        }
        c->n_deletes++;
        return 0;
}

int queue_delete(struct controller *c, const char *id, const char *handle, unsigned attempts)
{
        int r = queue_delete_noflush(c, id, handle, attempts);
        if (r >= 0)
                flush_deletes(c);
        return r;
}

void pending_delete_clear(struct pending_delete *p)
{
        free(p->id);
        free(p->handle);
}

static void on_delete_timer(void *userdata)
{
        struct controller *c = userdata;
        c->delete_timer = NULL;
        flush_deletes(c);
}

static void on_deleted(struct sqs_client *s, const struct sqs_result *res, const struct sqs_entry_result *e,
                       size_t n, void *userdata)
{
        struct controller *c = userdata;
        struct pending_delete *batch = c->deleting;
        size_t nb = c->n_deleting;
        bool retry_later = false;

        c->delete_op = NULL;
        c->deleting = NULL;
        c->n_deleting = 0;
        for (size_t i = 0; i < nb; i++) {
                int error = res->error < 0 ? res->error : i < n ? e[i].error : -EBADMSG;
                bool retryable = res->error < 0 ? sqs_error_retryable(res->kind)
                                                : i < n && sqs_error_retryable(e[i].kind);
                if (error >= 0) {
                        c->stats.deleted++;
                        log_debug("controller: deleted message %s", batch[i].id);
                } else if (retryable && batch[i].attempts + 1 < DELETE_ATTEMPTS &&
                           queue_delete_noflush(c, batch[i].id, batch[i].handle, batch[i].attempts + 1) >= 0)
                        retry_later = true;
                else {
                        /* A stale handle means the message was received again; that delivery is a
                         * duplicate now and will be deleted at once. */
                        c->stats.delete_failures++;
                        log_warning("cannot delete message %s: %s", batch[i].id,
                                    res->error < 0 ? sqs_error_to_string(res->kind)
                                                   : (i < n ? e[i].code : "no answer for it"));
                }
                pending_delete_clear(&batch[i]);
        }
        free(batch);
        if (res->error < 0)
                queue_failed(c, res, "DeleteMessageBatch");
        if (retry_later && !c->delete_timer) {
                if (timer_start_in(c->loop, backoff_next(&c->backoff), on_delete_timer, c,
                                   &c->delete_timer) < 0)
                        log_debug("controller: cannot arm the delete retry");
                return;
        }
        flush_deletes(c);
}

static void flush_deletes(struct controller *c)
{
        struct sqs_delete_entry entries[SQS_MAX_BATCH];
        char ids[SQS_MAX_BATCH][16];
        size_t n;
        int r;

        if (c->delete_op || c->delete_timer || c->n_deletes == 0)
                return;
        n = c->n_deletes < SQS_MAX_BATCH ? c->n_deletes : SQS_MAX_BATCH;
        c->deleting = malloc(n * sizeof(*c->deleting));
        if (!c->deleting)
                return;
        memcpy(c->deleting, c->deletes, n * sizeof(*c->deleting));
        memmove(c->deletes, c->deletes + n, (c->n_deletes - n) * sizeof(*c->deletes));
        c->n_deletes -= n;
        c->n_deleting = n;
        for (size_t i = 0; i < n; i++) {
                snprintf(ids[i], sizeof(ids[i]), "m%zu", i);
                entries[i] =
                    (struct sqs_delete_entry){ .id = ids[i], .receipt_handle = c->deleting[i].handle };
        }
        r = sqs_delete_batch(c->sqs, entries, n, on_deleted, c, &c->delete_op);
        if (r < 0) {
                log_warning_errno(r, "cannot delete %zu messages", n);
                for (size_t i = 0; i < n; i++)
                        pending_delete_clear(&c->deleting[i]);
                free(c->deleting);
                c->deleting = NULL;
                c->n_deleting = 0;
                c->stats.delete_failures += n;
        }
}

/* ---- held messages ---- */

struct cmsg *cmsg_find(struct controller *c, uint64_t ticket)
{
        for (size_t i = 0; i < c->n_msgs; i++)
                if (c->msgs[i]->ticket == ticket)
                        return c->msgs[i];
        return NULL;
}

static void cmsg_free(struct cmsg *m)
{
        if (!m)
                return;
        timer_cancel(m->extend);
        sqs_op_cancel(m->op);
        free(m->id);
        free(m->handle);
        for (size_t i = 0; i < m->n_instances; i++)
                free(m->instances[i]);
        free(m->instances);
        free(m);
}

void cmsg_remove(struct controller *c, struct cmsg *m)
{
        for (size_t i = 0; i < c->n_msgs; i++)
                if (c->msgs[i] == m) {
                        c->msgs[i] = c->msgs[--c->n_msgs];
                        break;
                }
        cmsg_free(m);
}

static void on_extend(void *userdata);

/* Renews the hold halfway through the visibility last set (after usec when given). */
void arm_extend(struct cmsg *m, uint64_t usec)
{
        m->extend = timer_cancel(m->extend);
        if (timer_start_in(m->c->loop, usec ? usec : m->hidden_usec / 2, on_extend, m, &m->extend) < 0)
                log_debug("controller: cannot arm the visibility extension of %s", m->id);
}

/* Every drain the message waits for is recorded on its node (SPOTDRAIN_ANNOTATION_DRAIN, as the node
 * informer sees it): a later leader would resume it from there. */
static bool cmsg_recorded(struct controller *c, const struct cmsg *m)
{
        if (m->n_instances == 0)
                return false;
        for (size_t i = 0; i < m->n_instances; i++) {
                const char *node = dispatch_node_for_instance(c->dispatch, m->instances[i]);
                const cJSON *obj = node ? kube_informer_get(c->nodes, NULL, node) : NULL;
                const cJSON *ann = cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "annotations");
                if (!cJSON_GetObjectItemCaseSensitive(ann, SPOTDRAIN_ANNOTATION_DRAIN))
                        return false;
        }
        return true;
}

static void on_extended(struct sqs_client *s, const struct sqs_result *res, void *userdata)
{
        struct cmsg *m = userdata;
        struct controller *c = m->c;

        m->op = NULL;
        if (res->error >= 0) {
                c->stats.visibility_extends++;
                m->hidden_usec = m->extending_usec;
                arm_extend(m, 0);
                return;
        }
        c->stats.visibility_failures++;
        if (res->kind == SQS_ERR_RECEIPT_HANDLE || res->kind == SQS_ERR_NOT_INFLIGHT) {
                /* The message became visible and was (or will be) received again; that delivery is
                 * deduplicated and joins the drain. This copy is forgotten. */
                log_warning("message %s slipped out of hiding (%s) while its drain runs", m->id,
                            sqs_error_to_string(res->kind));
                cmsg_remove(c, m);
                c->stats.in_flight = (unsigned)c->n_msgs;
                return;
        }
        log_debug("controller: extending the visibility of %s failed: %s", m->id,
                  sqs_error_to_string(res->kind));
        arm_extend(m, EXTEND_RETRY_USEC);
}

static void on_extend(void *userdata)
{
        struct cmsg *m = userdata;
        struct controller *c = m->c;

        m->extend = NULL;
        if (m->op)
                return;
        /* Short (the first visibility) until the drains are recorded on their nodes, the full visibility
         * after: a controller killed before that costs the notice only the short time, and once recorded
         * the next leader resumes from the node and need not wait for the message. */
        m->extending_usec = cmsg_recorded(c, m) ? c->o.visibility_usec : c->first_visibility_usec;
        if (sqs_change_visibility(c->sqs, m->handle, (unsigned)((m->extending_usec + SEC - 1) / SEC),
                                  on_extended, m, &m->op) < 0)
                arm_extend(m, EXTEND_RETRY_USEC);
}

/* The message's notices are all handled: delete it, or let it come back when one could not be acted on. */
void cmsg_finish(struct controller *c, struct cmsg *m)
{
        uint64_t keep = c->cfg ? c->cfg->controller.delete_unknown_after_usec : 0;
        uint64_t now = clk_now(); /* SentTimestamp is the queue's wall clock (the engine's, simulated) */

        if (m->error < 0) {
                log_warning_errno(m->error, "message %s could not be acted on; it comes back in %d s", m->id,
                                  RETRY_VISIBILITY_SECONDS);
                set_visibility(c, m->handle, RETRY_VISIBILITY_SECONDS * SEC);
        } else if (m->foreign &&
                   !(keep && m->sent_usec && now > m->sent_usec && now - m->sent_usec >= keep)) {
                /* Not this cluster's (a queue or rule shared by several): left for the one it belongs to. */
                char text[160];
                snprintf(
                    text, sizeof(text),
                    "it names an instance that is no node of this cluster; left for the cluster it belongs "
                    "to (controller.delete_unknown_after_seconds deletes such messages)");
                if (quiet_line(c, "no-node", m->account))
                        log_notice("message %s is left in the queue: %s", m->id, text);
                alert_rejected(c, CONTROLLER_REJECT_NO_NODE, m->account, m->id, text);
                set_visibility(c, m->handle, c->o.malformed_visibility_usec);
        } else if (queue_delete(c, m->id, m->handle, 0) < 0)
                log_warning("cannot queue the delete of message %s", m->id);
        cmsg_remove(c, m);
        c->stats.in_flight = (unsigned)c->n_msgs;
}

/* The dispatcher's notice_seen: every notice taken in (not a duplicate), node NULL while unknown. */
void op_notice_seen(void *userdata, const char *node, const struct notice *n)
{
        struct controller *c = userdata;
        _cleanup_free_ char *human = NULL;

        if ((unsigned)n->kind < _NOTICE_KIND_MAX)
                c->stats.notice_counts[n->kind]++;
        (void)dispatch_notice_summary(n, clk_now(), &human);
        log_info("notice: %s%s%s", human ? human : notice_kind_to_string(n->kind), node ? " node " : "",
                 node ? node : "");
        if (c->bus)
                (void)alert_emit(c->bus, ALERT_NOTICE_RECEIVED, node,
                                 (const char *[]){ "kind", notice_kind_to_string(n->kind), "event_id",
                                                   n->event_id, "instance_id", n->instance_id, NULL },
                                 "%s", human ? human : notice_kind_to_string(n->kind));
}

/* Out of memory the instance is not kept: the message then stays on the short visibility, which is safe. */
void cmsg_add_instance(struct cmsg *m, const char *instance_id)
{
        char **v, *id;

        if (isempty(instance_id) || !(id = strdup(instance_id)))
                return;
        v = realloc(m->instances, (m->n_instances + 1) * sizeof(*v));
        if (!v) {
                free(id);
                return;
        }
        m->instances = v;
        m->instances[m->n_instances++] = id;
}

const char *controller_malformed_label(enum controller_malformed why)
{
        static const char *const labels[_CONTROLLER_MALFORMED_MAX] = {
                [CONTROLLER_MALFORMED_BODY] = "malformed",
                [CONTROLLER_MALFORMED_UNRECOGNIZED] = "unrecognized",
                [CONTROLLER_MALFORMED_TOO_LARGE] = "too-large",
                [CONTROLLER_MALFORMED_TOO_DEEP] = "too-deep",
        };
        return (unsigned)why < _CONTROLLER_MALFORMED_MAX ? labels[why] : "malformed";
}

const char *controller_reject_label(enum controller_reject why)
{
        if (why == CONTROLLER_REJECT_NO_NODE)
                return "no-node";
        if (why == CONTROLLER_REJECT_BAD_SIGNATURE)
                return "bad-signature";
        if (why == CONTROLLER_REJECT_UNMANAGED)
                return "unmanaged";
        return trust_verdict_label((enum trust_verdict)why);
}

/* Raises notice-rejected for a refused message, at most once per sender and reason an hour. */
void alert_rejected(struct controller *c, enum controller_reject why, const char *account,
                    const char *message_id, const char *text)
{
        c->stats.rejected[why]++;
        if (!c->bus || !trust_limiter_allow(&c->limiter, account, (int)why, clk_now()))
                return;
        (void)alert_emit(c->bus, ALERT_NOTICE_REJECTED, NULL,
                         (const char *[]){ "reason", controller_reject_label(why), "account", account,
                                           "message_id", message_id, NULL },
                         "message %s left in the queue: %s (further refusals for this sender and reason are "
                         "counted, not alerted, for an hour)",
                         message_id, text);
}
