/* controller/intake: the messages coming in: the receivers' long polls, the queue's access check, and the
 * gates a message passes before its notices reach the dispatcher (the SNS signature, the account and
 * managed-tag checks, a notice superseded by a later one). What is kept goes on as a held message (queue.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/controller_internal.h"
#include "spotdrain/keys.h"

#define SEQ_SLOTS 1024 /* instances whose latest notice time is kept (the oldest forgotten) */

/* ---- sequencing by the notice's time ---- */

/* Kinds whose later notice revises an earlier one: a state change (the instance's latest state), a
 * scheduled change (its Health event's latest status), a rebalance recommendation. An interruption warning
 * is never superseded: an earlier one carries the earlier deadline, which the drain takes. */
static bool seq_kind(enum notice_kind k)
{
        return k == NOTICE_STATE_CHANGE || k == NOTICE_SCHEDULED_CHANGE ||
               k == NOTICE_REBALANCE_RECOMMENDATION;
}

/* True when a notice of the same kind for the same instance (and Health event), with a later time, was
 * already handled: this one came late (parallel receivers, a standard queue's order) and must not undo it.
 * Otherwise records n's time. */
static bool notice_superseded(struct controller *c, const struct notice *n)
{
        char key[sizeof(c->seqs[0].key)];
        struct seq *lru = NULL;

        if (!seq_kind(n->kind) || isempty(n->instance_id) || !n->notice_time)
                return false;
        if (!c->seqs && !(c->seqs = calloc(SEQ_SLOTS, sizeof(*c->seqs))))
                return false;
        snprintf(key, sizeof(key), "%d|%s|%s", (int)n->kind, n->instance_id,
                 n->kind == NOTICE_SCHEDULED_CHANGE ? n->event_id : "");
        for (size_t i = 0; i < SEQ_SLOTS; i++) {
                struct seq *x = &c->seqs[i];
                if (x->used && streq(x->key, key)) {
                        if (n->notice_time < x->notice_time)
                                return true;
                        x->notice_time = n->notice_time;
                        x->used = ++c->seq_clock;
                        return false;
                }
                if (!lru || x->used < lru->used)
                        lru = x;
        }
        memcpy(lru->key, key, sizeof(key));
        lru->notice_time = n->notice_time;
        lru->used = ++c->seq_clock;
        return false;
}

/* A notice the queue's sender may not make us act on (trust.h): the whole message is left in the queue,
 * where its redrive policy takes it to the dead-letter queue. */
static bool message_untrusted(struct controller *c, const struct sqs_message *msg, const struct notice *v,
                              size_t n)
{
        char why[256];

        for (size_t i = 0; i < n; i++) {
                enum trust_verdict t = trust_check(&c->trust, &v[i], why, sizeof(why));
                if (t == TRUST_OK)
                        continue;
                if (quiet_line(c, trust_verdict_label(t), v[i].account))
                        log_full(LOG_WARNING, 0,
                                 (const char *[]){ "message_id", msg->message_id, "reason",
                                                   trust_verdict_label(t), "account", v[i].account, NULL },
                                 "message %s is not acted on, left in the queue: %s", msg->message_id, why);
                _Static_assert((int)TRUST_NO_ACCOUNT == (int)CONTROLLER_REJECT_NO_ACCOUNT &&
                                   (int)TRUST_FOREIGN_REGION == (int)CONTROLLER_REJECT_FOREIGN_REGION,
                               "trust verdicts are controller reject reasons");
                alert_rejected(c, (enum controller_reject)t, v[i].account, msg->message_id, why);
                set_visibility(c, msg->receipt_handle, c->o.malformed_visibility_usec);
                return true;
        }
        return false;
}

static void handle_received(struct controller *c, struct sqs_message *msg);

/* A message parked for its SNS signing certificate: checked again now that it came, or left to come back. */
static void sns_resumed(void *userdata, struct sqs_message *m, int error, const char *why)
{
        struct controller *c = userdata;

        if (error < 0) {
                log_warning("message %s comes back in %d s: %s", m->message_id, RETRY_VISIBILITY_SECONDS,
                            why);
                set_visibility(c, m->receipt_handle, RETRY_VISIBILITY_SECONDS * SEC);
        } else
                handle_received(c, m);
        sqs_message_clear(m);
}

/* A message parked for its instances' managed tag: checked again now that they are known, or left to come
 * back. */
static void managed_resumed(void *userdata, struct sqs_message *m, int error)
{
        struct controller *c = userdata;

        if (error < 0) {
                log_warning_errno(error, "message %s comes back in %d s: its instances' tags are not known",
                                  m->message_id, RETRY_VISIBILITY_SECONDS);
                set_visibility(c, m->receipt_handle, RETRY_VISIBILITY_SECONDS * SEC);
        } else
                handle_received(c, m);
        sqs_message_clear(m);
}

/* controller.managed_tag: true when the message is not to be acted on now (parked, refused, retried). */
static bool message_unmanaged(struct controller *c, struct sqs_message *msg, const struct notice *v,
                              size_t n)
{
        char why[256] = "";
        enum managed_verdict g;

        if (!c->managed)
                return false;
        g = managed_gate_check(c->managed, msg, v, n, managed_resumed, c, why, sizeof(why));
        if (g == MANAGED_PASS)
                return false;
        if (g == MANAGED_REFUSE) {
                if (quiet_line(c, "unmanaged", v[0].account))
                        log_full(
                            LOG_WARNING, 0,
                            (const char *[]){ "message_id", msg->message_id, "reason", "unmanaged", NULL },
                            "message %s is not acted on, left in the queue: %s", msg->message_id, why);
                alert_rejected(c, CONTROLLER_REJECT_UNMANAGED, v[0].account, msg->message_id, why);
                set_visibility(c, msg->receipt_handle, c->o.malformed_visibility_usec);
        } else if (g == MANAGED_RETRY) {
                log_warning("message %s comes back in %d s: %s", msg->message_id, RETRY_VISIBILITY_SECONDS,
                            why);
                set_visibility(c, msg->receipt_handle, RETRY_VISIBILITY_SECONDS * SEC);
        }
        return true;
}

static void handle_message(struct controller *c, struct sqs_message *msg)
{
        c->stats.messages++;
        handle_received(c, msg);
}

static void handle_received(struct controller *c, struct sqs_message *msg)
{
        _cleanup_free_ struct notice *notices = NULL;
        struct cmsg *m = NULL, **v;
        uint64_t defer = 0;
        size_t n = 0;
        char reason[320] = "";
        int r;

        if (c->sns) {
                enum sns_gate_verdict g =
                    sns_gate_check(c->sns, msg, sns_resumed, c, reason, sizeof(reason));
                if (g == SNS_GATE_PARKED)
                        return;
                if (g == SNS_GATE_REFUSE) {
                        if (quiet_line(c, "bad-signature", msg->sender_id))
                                log_full(LOG_WARNING, 0,
                                         (const char *[]){ "message_id", msg->message_id, "reason",
                                                           "bad-signature", NULL },
                                         "message %s is not acted on, left in the queue: %s",
                                         msg->message_id, reason);
                        alert_rejected(c, CONTROLLER_REJECT_BAD_SIGNATURE, "sns", msg->message_id, reason);
                        set_visibility(c, msg->receipt_handle, c->o.malformed_visibility_usec);
                        return;
                }
                reason[0] = 0;
        }
        r = notice_parse(msg->body, msg->body_len, &(struct notice_parse_opts){ .region = c->region },
                         &notices, &n, reason, sizeof(reason));
        if (r < 0) {
                enum controller_malformed why = r == -EOPNOTSUPP ? CONTROLLER_MALFORMED_UNRECOGNIZED
                                                : r == -EMSGSIZE ? CONTROLLER_MALFORMED_TOO_LARGE
                                                : r == -ELOOP    ? CONTROLLER_MALFORMED_TOO_DEEP
                                                                 : CONTROLLER_MALFORMED_BODY;
                char count[16];
                /* Left for the redrive policy: hidden long enough not to be received over and over. */
                c->stats.malformed[why]++;
                snprintf(count, sizeof(count), "%u", msg->receive_count);
                if (quiet_line(c, controller_malformed_label(why), msg->sender_id))
                        log_full(LOG_WARNING, 0,
                                 (const char *[]){ "message_id", msg->message_id, "receive_count", count,
                                                   "reason", controller_malformed_label(why), "sender",
                                                   msg->sender_id ? msg->sender_id : "", NULL },
                                 "message %s is %s, left in the queue: %s", msg->message_id,
                                 r == -EOPNOTSUPP ? "not a notice spotdrain knows" : "malformed", reason);
                set_visibility(c, msg->receipt_handle, c->o.malformed_visibility_usec);
                return;
        }
        if (n == 0) {
                log_debug("controller: message %s carries nothing to act on: %s", msg->message_id, reason);
                (void)queue_delete(c, msg->message_id, msg->receipt_handle, 0);
                return;
        }
        if (message_untrusted(c, msg, notices, n) || message_unmanaged(c, msg, notices, n))
                return;

        m = calloc(1, sizeof(*m));
        v = m ? realloc(c->msgs, (c->n_msgs + 1) * sizeof(*v)) : NULL;
        if (!v) {
                free(m);
                return; /* the message comes back when its visibility runs out */
        }
        c->msgs = v;
        m->c = c;
        m->ticket = ++c->next_ticket;
        m->id = TAKE_PTR(msg->message_id);
        m->handle = TAKE_PTR(msg->receipt_handle);
        m->hidden_usec = c->first_visibility_usec;
        m->sent_usec = msg->sent_usec;
        memcpy(m->account, notices[0].account, sizeof(m->account));
        c->msgs[c->n_msgs++] = m;

        for (size_t i = 0; i < n; i++) {
                uint64_t d = 0;

                if (notice_superseded(c, &notices[i])) {
                        c->stats.superseded++;
                        log_info(
                            "the %s notice for %s of %s (message %s) comes after a later one was handled: "
                            "superseded",
                            notice_kind_to_string(notices[i].kind), notices[i].instance_id,
                            notices[i].event_id, m->id);
                        continue;
                }
                r = dispatch_submit(c->dispatch, &notices[i], m->ticket, &d);
                dispatch_stats(c->dispatch, &c->stats.dispatch);
                if (r == DISPATCH_PENDING) {
                        m->pending++;
                        cmsg_add_instance(m, notices[i].instance_id);
                } else if (r == DISPATCH_FOREIGN)
                        m->foreign = true;
                else if (r == DISPATCH_DEFER)
                        defer = defer && defer < d ? defer : d;
                else if (r < 0)
                        m->error = r;
        }
        if (m->pending > 0) {
                arm_extend(m, 0);
                c->stats.in_flight = (unsigned)c->n_msgs;
                return;
        }
        if (defer && m->error >= 0) {
                uint64_t now = clk_now();
                log_info("message %s is due at a later time; it comes back then", m->id);
                set_visibility(c, m->handle, defer > now ? defer - now : 0);
                cmsg_remove(c, m);
                return;
        }
        cmsg_finish(c, m);
}

/* ---- receiving ---- */

static void poll_one(struct poll_slot *p);

static void on_poll_retry(void *userdata)
{
        struct poll_slot *p = userdata;
        p->retry = NULL;
        poll_one(p);
}

/* Oldest first by SentTimestamp, those sent at once (or without it) in the order received. */
static void messages_sort(struct sqs_message *msgs, size_t n)
{
        for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0 && msgs[j - 1].sent_usec > msgs[j].sent_usec; j--) {
                        struct sqs_message t = msgs[j - 1];
                        msgs[j - 1] = msgs[j];
                        msgs[j] = t;
                }
}

static void on_received(struct sqs_client *s, const struct sqs_result *res, struct sqs_message *msgs,
                        size_t n, void *userdata)
{
        struct poll_slot *p = userdata;
        struct controller *c = p->c;

        p->op = NULL;
        if (res->error < 0) {
                c->stats.receive_failures++;
                queue_failed(c, res, "ReceiveMessage");
                if (c->active &&
                    timer_start_in(c->loop, backoff_next(&c->backoff), on_poll_retry, p, &p->retry) < 0)
                        log_debug("controller: cannot arm the poll retry");
                return;
        }
        c->stats.receives++;
        /* A long poll sent before a call failed may still come back empty from before that failure:
         * only one sent after it shows the queue readable again. */
        if (p->failures_seen == c->failures)
                queue_ok(c);
        /* Oldest first (SQS hands out a standard queue's messages in no set order), and the visibility
         * changes they ask for sent together. */
        messages_sort(msgs, n);
        c->hold_hides = true;
        for (size_t i = 0; i < n && c->active; i++)
                handle_message(c, &msgs[i]);
        c->hold_hides = false;
        flush_hides(c);
        if (c->active)
                poll_one(p);
}

static void poll_one(struct poll_slot *p)
{
        struct controller *c = p->c;
        struct sqs_receive_opts opts = SQS_RECEIVE_OPTS_DEFAULT;
        int r;

        if (!c->active || p->op || p->retry)
                return;
        opts.visibility_timeout = (int)((c->first_visibility_usec + SEC - 1) / SEC);
        p->failures_seen = c->failures;
        r = sqs_receive(c->sqs, &opts, on_received, p, &p->op);
        if (r < 0 && timer_start_in(c->loop, backoff_next(&c->backoff), on_poll_retry, p, &p->retry) < 0)
                log_debug_errno(r, "controller: cannot poll");
}

void poll_all(struct controller *c)
{
        for (unsigned i = 0; i < c->o.polls; i++)
                poll_one(&c->polls[i]);
}

void polls_cancel(struct controller *c)
{
        for (unsigned i = 0; i < MAX_POLLS; i++) {
                c->polls[i].op = sqs_op_cancel(c->polls[i].op);
                c->polls[i].retry = timer_cancel(c->polls[i].retry);
        }
}

/* ---- proving access (at start, and periodically while not receiving) ---- */

static void access_check(void *userdata);

void access_schedule(struct controller *c, uint64_t after)
{
        c->access_timer = timer_cancel(c->access_timer);
        if (timer_start_in(c->loop, after, access_check, c, &c->access_timer) < 0)
                log_debug("controller: cannot arm the access check");
}

static void on_attributes(struct sqs_client *s, const struct sqs_result *res, const struct sqs_attribute *a,
                          size_t n, void *userdata)
{
        struct controller *c = userdata;

        c->access_op = NULL;
        if (res->error < 0) {
                queue_failed(c, res, "GetQueueAttributes");
                access_schedule(c, backoff_next(&c->backoff));
                return;
        }
        if (!c->queue_ok)
                log_info("queue %s is readable (%s messages waiting)", c->queue_url,
                         sqs_attribute_get(a, n, "ApproximateNumberOfMessages")
                             ? sqs_attribute_get(a, n, "ApproximateNumberOfMessages")
                             : "?");
        queue_ok(c);
        access_schedule(c, c->o.access_check_usec);
        /* Receiving starts once access is proven. */
        poll_all(c);
}

static void access_check(void *userdata)
{
        struct controller *c = userdata;
        static const char *const names[] = { "QueueArn", "ApproximateNumberOfMessages", NULL };

        c->access_timer = NULL;
        /* While receiving, every poll proves access. */
        if (c->access_op || (c->active && c->queue_ok))
                return access_schedule(c, c->o.access_check_usec);
        if (sqs_get_attributes(c->sqs, names, on_attributes, c, &c->access_op) < 0)
                access_schedule(c, backoff_next(&c->backoff));
}
