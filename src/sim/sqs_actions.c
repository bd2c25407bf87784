/* The SQS surface's actions on its queue (q->lock held), from request parameters to an outcome. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "sim/aws_request.h"
#include "sim/model.h"
#include "sim/server.h"
#include "sim/sqs_internal.h"
#include "sim/sqs_query.h"
#include "sim/sqs_surface.h"
#include "sim/stop_wake.h"
#include "sim/sts_surface.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

void sim_sqs_outcome_error(struct outcome *o, const struct sqs_err *e, const char *fmt, ...)
{
        va_list ap;

        cJSON_Delete(o->result);
        o->result = NULL;
        o->err = e;
        free(o->message);
        va_start(ap, fmt);
        if (vasprintf(&o->message, fmt, ap) < 0)
                o->message = NULL;
        va_end(ap);
}

/* ---- request parameters ---- */

static bool param_int(const cJSON *p, const char *key, long lo, long hi, long def, long *ret,
                      struct outcome *o)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(p, key);

        if (!v || cJSON_IsNull(v)) {
                *ret = def;
                return true;
        }
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo ||
            v->valuedouble > hi) {
                if (cJSON_IsNumber(v))
                        sim_sqs_outcome_error(
                            o, &err_invalid_value,
                            "Value %g for parameter %s is invalid. Reason: Must be >= %ld and <= %ld, "
                            "if provided.",
                            v->valuedouble, key, lo, hi);
                else
                        sim_sqs_outcome_error(o, &err_invalid_value, "Value for parameter %s is invalid.",
                                              key);
                return false;
        }
        *ret = (long)v->valuedouble;
        return true;
}

/* The queue a request names must be ours; compared by its path (/ACCOUNT/NAME), as the host may be any
 * alias of the endpoint. */
static bool queue_matches(struct sim_sqs *q, const char *url, const char *request_path)
{
        const char *p = url;

        if (isempty(url))
                return streq(request_path, q->path);
        if (startswith(p, "http://") || startswith(p, "https://")) {
                p = strstr(p, "://") + 3;
                p = strchr(p, '/');
                if (!p)
                        return false;
        }
        return streq(p, q->path);
}

static bool check_queue(struct sim_sqs *q, const cJSON *p, const char *request_path, struct outcome *o)
{
        const char *url = sim_sqs_param(p, "QueueUrl");
        if (!url && !streq(request_path, q->path)) {
                sim_sqs_outcome_error(o, &err_missing, "The request must contain the parameter QueueUrl.");
                return false;
        }
        if (!queue_matches(q, url, request_path)) {
                sim_sqs_outcome_error(o, &err_nonexistent, "The specified queue does not exist.");
                return false;
        }
        return true;
}

static const char *const message_attributes[] = { "SenderId", "ApproximateFirstReceiveTimestamp",
                                                  "ApproximateReceiveCount", "SentTimestamp" };

/* Which system attributes a receive asked for: a bit per message_attributes[] entry. */
static unsigned wanted_attributes(const cJSON *p)
{
        static const char *const keys[] = { "AttributeNames", "MessageSystemAttributeNames" };
        unsigned mask = 0;

        for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
                const cJSON *a = cJSON_GetObjectItemCaseSensitive(p, keys[k]), *v;
                cJSON_ArrayForEach (v, (cJSON_IsArray(a) ? a : NULL)) {
                        const char *n = cJSON_GetStringValue(v);
                        if (streq(n, "All"))
                                mask = (1u << ARRAY_SIZE(message_attributes)) - 1;
                        for (size_t i = 0; i < ARRAY_SIZE(message_attributes); i++)
                                if (streq(n, message_attributes[i]))
                                        mask |= 1u << i;
                }
        }
        return mask;
}

/* ---- actions (q->lock held) ---- */

void sim_sqs_monotonic_deadline(uint64_t mono_usec, struct timespec *ts)
{
        ts->tv_sec = (time_t)(mono_usec / 1000000ULL);
        ts->tv_nsec = (long)(mono_usec % 1000000ULL) * 1000L;
}

static int add_message(cJSON *list, const struct queued *m, unsigned mask)
{
        cJSON *o = cJSON_CreateObject(), *attrs;
        char buf[32];

        if (!cJSON_AddItemToArray(list, o) || !cJSON_AddStringToObject(o, "MessageId", m->message_id) ||
            !cJSON_AddStringToObject(o, "ReceiptHandle", m->handle) ||
            !cJSON_AddStringToObject(o, "MD5OfBody", m->md5) || !cJSON_AddStringToObject(o, "Body", m->body))
                return -ENOMEM;
        if (mask == 0)
                return 0;
        attrs = cJSON_AddObjectToObject(o, "Attributes");
        if (!attrs)
                return -ENOMEM;
        for (size_t i = 0; i < ARRAY_SIZE(message_attributes); i++) {
                if (!(mask & (1u << i)))
                        continue;
                if (i == 0)
                        snprintf(buf, sizeof(buf), "AIDAIT2UOQQY3AUEKVGXU");
                else if (i == 1)
                        snprintf(buf, sizeof(buf), "%" PRIu64, m->first_receive_ms);
                else if (i == 2)
                        snprintf(buf, sizeof(buf), "%u", m->receive_count);
                else
                        snprintf(buf, sizeof(buf), "%" PRIu64, m->sent_ms);
                if (!cJSON_AddStringToObject(attrs, message_attributes[i], buf))
                        return -ENOMEM;
        }
        return 0;
}

static void act_receive(struct sim_sqs *q, const cJSON *p, const char *path, struct outcome *o)
{
        long max, wait, vis;
        unsigned mask = wanted_attributes(p);
        double scale, now, deadline_scn, next;
        uint64_t start = now_monotonic_usec(), real_deadline, wall_ms;
        cJSON *list;

        if (!check_queue(q, p, path, o) ||
            !param_int(p, "MaxNumberOfMessages", 1, MAX_MESSAGES, 1, &max, o) ||
            !param_int(p, "WaitTimeSeconds", 0, MAX_WAIT, 0, &wait, o) ||
            !param_int(p, "VisibilityTimeout", 0, MAX_VISIBILITY, SIM_SQS_VISIBILITY, &vis, o))
                return;
        q->stats.receives++;
        q->stats.receive_visibility = (unsigned)vis;
        sim_lock(q->sim);
        scale = sim_time_scale(q->sim);
        sim_unlock(q->sim);
        now = sim_sqs_scenario_now(q, NULL);
        deadline_scn = now + (double)wait;
        real_deadline = start + (uint64_t)((double)wait / scale * 1e6);

        for (;;) {
                size_t found = 0;
                uint64_t wake, mono;
                struct timespec ts;

                next = sim_sqs_sync_model(q);
                now = sim_sqs_scenario_now(q, NULL);
                for (size_t i = 0; i < q->n_msgs; i++)
                        if (q->msgs[i].visible_at <= now)
                                found++;
                mono = now_monotonic_usec();
                if (found > 0 || q->stopping || now >= deadline_scn || mono >= real_deadline)
                        break;
                /* Sleep until the model's next due action, the next message turning visible again, or the
                 * end of the poll, whichever comes first (and look again at least every second). */
                wake = real_deadline;
                if (mono + WAKE_MAX_USEC < wake)
                        wake = mono + WAKE_MAX_USEC;
                for (size_t i = 0; i < q->n_msgs; i++) {
                        uint64_t at = mono + (uint64_t)((q->msgs[i].visible_at - now) / scale * 1e6) + 1;
                        if (at < wake)
                                wake = at;
                }
                if (next >= 0 && next > now) {
                        uint64_t at = mono + (uint64_t)((next - now) / scale * 1e6) + 1;
                        if (at < wake)
                                wake = at;
                }
                sim_sqs_monotonic_deadline(wake, &ts);
                q->stats.waiting++;
                pthread_cond_broadcast(&q->polls_cond);
                pthread_cond_timedwait(&q->cond, &q->lock, &ts);
                q->stats.waiting--;
        }

        o->result = cJSON_CreateObject();
        if (!o->result)
                return;
        now = sim_sqs_scenario_now(q, &wall_ms);
        list = NULL;
        for (size_t i = 0; i < q->n_msgs && max > 0; i++) {
                struct queued *m = &q->msgs[i];
                char *h;
                if (m->visible_at > now)
                        continue;
                h = sim_sqs_new_handle(q, m);
                if (!h)
                        break;
                free(m->handle);
                m->handle = h;
                m->receive_count++;
                if (m->first_receive_ms == 0)
                        m->first_receive_ms = wall_ms;
                m->visible_at = now + (double)vis;
                if (!list)
                        list = cJSON_AddArrayToObject(o->result, "Messages");
                if (!list || add_message(list, m, mask) < 0) {
                        cJSON_Delete(o->result);
                        o->result = NULL;
                        return;
                }
                q->stats.delivered++;
                max--;
        }
}

static void handle_error(struct outcome *o, const char *handle)
{
        sim_sqs_outcome_error(o, &err_handle,
                              "The input receipt handle \"%.12s...\" is not a valid receipt handle.",
                              handle ? handle : "");
}

/* False, answering MissingParameter, when the request names no ReceiptHandle. */
static bool handle_given(const char *handle, struct outcome *o)
{
        if (!isempty(handle))
                return true;
        sim_sqs_outcome_error(o, &err_missing, "The request must contain the parameter ReceiptHandle.");
        return false;
}

static void act_delete(struct sim_sqs *q, const cJSON *p, const char *path, struct outcome *o)
{
        const char *handle = sim_sqs_param(p, "ReceiptHandle");
        struct queued *m;

        if (!check_queue(q, p, path, o) || !handle_given(handle, o))
                return;
        m = sim_sqs_find_handle(q, handle);
        if (!m) {
                handle_error(o, handle);
                return;
        }
        sim_sqs_remove_msg(q, m);
        q->stats.deleted++;
}

static bool batch_id_valid(const char *id)
{
        size_t len = id ? strlen(id) : 0;
        if (len < 1 || len > 80)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!isalnum((unsigned char)id[i]) && id[i] != '-' && id[i] != '_')
                        return false;
        return true;
}

/* One entry of a batch: NULL when it went through (its result fields added to r), else why it failed. */
typedef const struct sqs_err *(*entry_fn)(struct sim_sqs *q, const cJSON *e, size_t index, cJSON *r,
                                          char **ret_why);

/* DeleteMessageBatch, ChangeMessageVisibilityBatch, SendMessageBatch: 1..10 entries with distinct valid
 * ids, each answered in Successful or Failed. */
static void act_batch(struct sim_sqs *q, const cJSON *p, const char *path, const char *action, entry_fn fn,
                      struct outcome *o)
{
        const cJSON *entries = cJSON_GetObjectItemCaseSensitive(p, "Entries"), *e, *e2;
        cJSON *ok, *failed;
        int n = cJSON_IsArray(entries) ? cJSON_GetArraySize(entries) : 0;
        size_t index = 0;

        if (!check_queue(q, p, path, o))
                return;
        if (n == 0) {
                sim_sqs_outcome_error(o, &err_empty_batch,
                                      "There should be at least one %sRequestEntry in the request.", action);
                return;
        }
        if (n > MAX_BATCH) {
                sim_sqs_outcome_error(o, &err_too_many,
                                      "Maximum number of entries per request are 10. You have sent %d.", n);
                return;
        }
        cJSON_ArrayForEach (e, entries) {
                const char *id = sim_sqs_param(e, "Id");
                if (!batch_id_valid(id)) {
                        sim_sqs_outcome_error(
                            o, &err_batch_id,
                            "A batch entry id can only contain alphanumeric characters, hyphens and "
                            "underscores. It can be at most 80 letters long.");
                        return;
                }
                for (e2 = entries->child; e2 != e; e2 = e2->next)
                        if (streq(sim_sqs_param(e2, "Id"), id)) {
                                sim_sqs_outcome_error(o, &err_ids_not_distinct, "Id %s repeated.", id);
                                return;
                        }
        }
        o->result = cJSON_CreateObject();
        ok = cJSON_AddArrayToObject(o->result, "Successful");
        failed = cJSON_AddArrayToObject(o->result, "Failed");
        if (!ok || !failed) {
                cJSON_Delete(o->result);
                o->result = NULL;
                return;
        }
        cJSON_ArrayForEach (e, entries) {
                cJSON *r = cJSON_CreateObject();
                _cleanup_free_ char *why = NULL;
                const struct sqs_err *err = r ? fn(q, e, index++, r, &why) : &err_internal;

                if (!r || !cJSON_AddItemToArray(err ? failed : ok, r) ||
                    !cJSON_AddStringToObject(r, "Id", sim_sqs_param(e, "Id")) ||
                    (err && (!cJSON_AddBoolToObject(r, "SenderFault", streq(err->fault, "Sender")) ||
                             !cJSON_AddStringToObject(r, "Code", err->code) ||
                             !cJSON_AddStringToObject(r, "Message", why ? why : "")))) {
                        cJSON_Delete(o->result);
                        o->result = NULL;
                        return;
                }
        }
        /* The real service leaves out empty lists. */
        if (cJSON_GetArraySize(ok) == 0)
                cJSON_DeleteItemFromObjectCaseSensitive(o->result, "Successful");
        if (cJSON_GetArraySize(failed) == 0)
                cJSON_DeleteItemFromObjectCaseSensitive(o->result, "Failed");
}

static const struct sqs_err *entry_handle(struct sim_sqs *q, const cJSON *e, struct queued **ret,
                                          char **ret_why)
{
        const char *handle = sim_sqs_param(e, "ReceiptHandle");

        *ret = sim_sqs_find_handle(q, handle);
        if (*ret)
                return NULL;
        *ret_why = strprintf("The input receipt handle \"%.12s...\" is not a valid receipt handle.",
                             handle ? handle : "");
        return &err_handle;
}

static const struct sqs_err *entry_delete(struct sim_sqs *q, const cJSON *e, size_t index, cJSON *r,
                                          char **ret_why)
{
        struct queued *m;
        const struct sqs_err *err = entry_handle(q, e, &m, ret_why);

        if (err)
                return err;
        sim_sqs_remove_msg(q, m);
        q->stats.deleted++;
        return NULL;
}

static void act_delete_batch(struct sim_sqs *q, const cJSON *p, const char *path, struct outcome *o)
{
        act_batch(q, p, path, "DeleteMessageBatch", entry_delete, o);
}

/* An entry's number (the JSON protocol's number, or the query protocol's digits): false when malformed or
 * out of lo..hi; def when absent. */
static bool entry_int(const cJSON *e, const char *key, long lo, long hi, long def, long *ret)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);

        *ret = def;
        if (!v || cJSON_IsNull(v))
                return true;
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
                return false;
        *ret = (long)v->valuedouble;
        return *ret >= lo && *ret <= hi;
}

/* Hides an in-flight message for vis seconds from now (a visible one is not in flight). */
static const struct sqs_err *hide(struct sim_sqs *q, struct queued *m, long vis, char **ret_why)
{
        double now = sim_sqs_scenario_now(q, NULL);

        if (m->visible_at <= now) {
                *ret_why =
                    strdup("Message does not exist or is not available for visibility timeout change.");
                return &err_not_inflight;
        }
        m->visible_at = now + (double)vis;
        q->stats.change_visibility = (unsigned)vis;
        /* A message made visible again may be what a waiting poll is waiting for. */
        pthread_cond_broadcast(&q->cond);
        return NULL;
}

static const struct sqs_err *entry_visibility(struct sim_sqs *q, const cJSON *e, size_t index, cJSON *r,
                                              char **ret_why)
{
        struct queued *m;
        const struct sqs_err *err;
        long vis;

        if (!cJSON_GetObjectItemCaseSensitive(e, "VisibilityTimeout")) {
                *ret_why = strdup("The request must contain the parameter VisibilityTimeout.");
                return &err_missing;
        }
        if (!entry_int(e, "VisibilityTimeout", 0, MAX_VISIBILITY, 0, &vis)) {
                *ret_why = strdup("Value for parameter VisibilityTimeout is invalid.");
                return &err_invalid_value;
        }
        err = entry_handle(q, e, &m, ret_why);
        return err ? err : hide(q, m, vis, ret_why);
}

static void act_change_visibility_batch(struct sim_sqs *q, const cJSON *p, const char *path,
                                        struct outcome *o)
{
        act_batch(q, p, path, "ChangeMessageVisibilityBatch", entry_visibility, o);
}

static void act_change_visibility(struct sim_sqs *q, const cJSON *p, const char *path, struct outcome *o)
{
        const char *handle = sim_sqs_param(p, "ReceiptHandle");
        const struct sqs_err *err;
        _cleanup_free_ char *why = NULL;
        struct queued *m;
        long vis;

        if (!check_queue(q, p, path, o) || !handle_given(handle, o))
                return;
        if (!cJSON_GetObjectItemCaseSensitive(p, "VisibilityTimeout")) {
                sim_sqs_outcome_error(o, &err_missing,
                                      "The request must contain the parameter VisibilityTimeout.");
                return;
        }
        if (!param_int(p, "VisibilityTimeout", 0, MAX_VISIBILITY, 0, &vis, o))
                return;
        m = sim_sqs_find_handle(q, handle);
        if (!m) {
                handle_error(o, handle);
                return;
        }
        err = hide(q, m, vis, &why);
        if (err)
                sim_sqs_outcome_error(o, err, "%s", why ? why : "");
}

static const char *const queue_attributes[] = { "QueueArn",
                                                "ApproximateNumberOfMessages",
                                                "ApproximateNumberOfMessagesNotVisible",
                                                "ApproximateNumberOfMessagesDelayed",
                                                "CreatedTimestamp",
                                                "LastModifiedTimestamp",
                                                "VisibilityTimeout",
                                                "MaximumMessageSize",
                                                "MessageRetentionPeriod",
                                                "DelaySeconds",
                                                "ReceiveMessageWaitTimeSeconds",
                                                "SqsManagedSseEnabled" };

static int attribute_value(struct sim_sqs *q, size_t i, double now, char *buf, size_t len)
{
        size_t visible = 0;

        for (size_t k = 0; k < q->n_msgs; k++)
                if (q->msgs[k].visible_at <= now)
                        visible++;
        switch (i) {
        case 0:
                return snprintf(buf, len, "%s", q->arn);
        case 1:
                return snprintf(buf, len, "%zu", visible);
        case 2:
                return snprintf(buf, len, "%zu", q->n_msgs - visible);
        case 3:
        case 9:
        case 10:
                return snprintf(buf, len, "0");
        case 4:
        case 5:
                return snprintf(buf, len, "%" PRIu64, q->created_s);
        case 6:
                return snprintf(buf, len, "%d", SIM_SQS_VISIBILITY);
        case 7:
                return snprintf(buf, len, "%d", MAX_MESSAGE_SIZE);
        case 8:
                return snprintf(buf, len, "%d", RETENTION_SECONDS);
        default:
                return snprintf(buf, len, "true");
        }
}

static void act_get_attributes(struct sim_sqs *q, const cJSON *p, const char *path, struct outcome *o)
{
        const cJSON *names = cJSON_GetObjectItemCaseSensitive(p, "AttributeNames"), *v;
        bool want[ARRAY_SIZE(queue_attributes)] = {};
        double now;
        cJSON *attrs;
        char buf[256];

        if (!check_queue(q, p, path, o))
                return;
        cJSON_ArrayForEach (v, (cJSON_IsArray(names) ? names : NULL)) {
                const char *n = cJSON_GetStringValue(v);
                bool known = streq(n, "All");
                for (size_t i = 0; i < ARRAY_SIZE(queue_attributes); i++)
                        if (known && streq(n, "All"))
                                want[i] = true;
                        else if (streq(n, queue_attributes[i]))
                                want[i] = known = true;
                if (!known) {
                        sim_sqs_outcome_error(o, &err_attribute, "Unknown Attribute %s.", n ? n : "");
                        return;
                }
        }
        (void)sim_sqs_sync_model(q);
        now = sim_sqs_scenario_now(q, NULL);
        o->result = cJSON_CreateObject();
        attrs = cJSON_AddObjectToObject(o->result, "Attributes");
        for (size_t i = 0; attrs && i < ARRAY_SIZE(queue_attributes); i++) {
                if (!want[i])
                        continue;
                attribute_value(q, i, now, buf, sizeof(buf));
                if (!cJSON_AddStringToObject(attrs, queue_attributes[i], buf))
                        attrs = NULL;
        }
        if (!attrs) {
                cJSON_Delete(o->result);
                o->result = NULL;
        }
}

static void act_get_queue_url(struct sim_sqs *q, const cJSON *p, struct outcome *o)
{
        const char *name = sim_sqs_param(p, "QueueName"),
                   *owner = sim_sqs_param(p, "QueueOwnerAWSAccountId");

        if (isempty(name)) {
                sim_sqs_outcome_error(o, &err_missing, "The request must contain the parameter QueueName.");
                return;
        }
        if (!streq(name, q->name) || (owner && !streq(owner, SIM_SQS_ACCOUNT))) {
                sim_sqs_outcome_error(o, &err_nonexistent, "The specified queue does not exist.");
                return;
        }
        o->result = cJSON_CreateObject();
        if (o->result && !cJSON_AddStringToObject(o->result, "QueueUrl", q->queue_url)) {
                cJSON_Delete(o->result);
                o->result = NULL;
        }
}

/* SendMessage: anyone holding the queue's credentials can put any body in it (what issue #15's tests play:
 * a sender spotdrain does not control). DelaySeconds 0..900 as SQS allows; message attributes are not kept.
 */
/* Queues one message (its body checked as SendMessage does); NULL when queued, else why not. */
static const struct sqs_err *send_one(struct sim_sqs *q, const char *body, long delay, size_t index,
                                      char message_id[37], char md5[33], char **ret_why)
{
        char salt[48];
        uint64_t wall_ms = 0;
        double now;

        if (!body) {
                *ret_why = strdup("The request must contain the parameter MessageBody.");
                return &err_missing;
        }
        if (!*body || strlen(body) > 256 * 1024) {
                *ret_why = strdup(
                    "One or more parameters are invalid. Reason: Message must be shorter than 262144 bytes "
                    "and not empty.");
                return &err_invalid_value;
        }
        now = sim_sqs_scenario_now(q, &wall_ms);
        snprintf(salt, sizeof(salt), "send-%" PRIu64 "-%zu", q->stats.requests, index);
        sim_sqs_uuid_from(q->scenario, salt, message_id);
        sim_sqs_md5_hex(body, strlen(body), md5);
        if (sim_sqs_enqueue(q, message_id, strdup(body), wall_ms, now + (double)delay) < 0) {
                *ret_why = strdup("Out of memory.");
                return &err_internal;
        }
        /* A long poll waiting returns as soon as a message is there, as SQS's does. */
        pthread_cond_broadcast(&q->cond);
        return NULL;
}

static void act_send(struct sim_sqs *q, const cJSON *p, const char *path, struct outcome *o)
{
        char message_id[37], md5[33];
        _cleanup_free_ char *why = NULL;
        const struct sqs_err *err;
        long delay = 0;

        if (!check_queue(q, p, path, o) || !param_int(p, "DelaySeconds", 0, 900, 0, &delay, o))
                return;
        err = send_one(q, sim_sqs_param(p, "MessageBody"), delay, 0, message_id, md5, &why);
        if (err) {
                sim_sqs_outcome_error(o, err, "%s", why ? why : "");
                return;
        }
        o->result = cJSON_CreateObject();
        if (o->result && (!cJSON_AddStringToObject(o->result, "MessageId", message_id) ||
                          !cJSON_AddStringToObject(o->result, "MD5OfMessageBody", md5))) {
                cJSON_Delete(o->result);
                o->result = NULL;
        }
}

static const struct sqs_err *entry_send(struct sim_sqs *q, const cJSON *e, size_t index, cJSON *r,
                                        char **ret_why)
{
        char message_id[37], md5[33];
        const struct sqs_err *err;
        long delay;

        if (!entry_int(e, "DelaySeconds", 0, 900, 0, &delay)) {
                *ret_why = strdup("Value for parameter DelaySeconds is invalid.");
                return &err_invalid_value;
        }
        err = send_one(q, sim_sqs_param(e, "MessageBody"), delay, index, message_id, md5, ret_why);
        if (err)
                return err;
        if (!cJSON_AddStringToObject(r, "MessageId", message_id) ||
            !cJSON_AddStringToObject(r, "MD5OfMessageBody", md5)) {
                *ret_why = strdup("Out of memory.");
                return &err_internal;
        }
        return NULL;
}

static void act_send_batch(struct sim_sqs *q, const cJSON *p, const char *path, struct outcome *o)
{
        act_batch(q, p, path, "SendMessageBatch", entry_send, o);
}

/* Whether request number k (1-based) is throttled under the fault's rate: a hash of the seed and k. */
static bool throttle_draw(const struct sim_sqs_fault *f, uint64_t k)
{
        if (f->throttle_rate <= 0)
                return false;
        return (double)(sim_sqs_mix64(f->seed ^ sim_sqs_mix64(k * 0x9e3779b97f4a7c15ULL)) >> 11) /
                   9007199254740992.0 <
               f->throttle_rate;
}

/* Runs one action (q->lock held). */
void sim_sqs_act(struct sim_sqs *q, const char *action, const cJSON *p, const char *path, struct outcome *o)
{
        q->stats.requests++;
        if (q->fault.error_500 > 0) {
                q->fault.error_500--;
                sim_sqs_outcome_error(o, &err_internal,
                                      "We encountered an internal error. Please try again.");
                return;
        }
        if (throttle_draw(&q->fault, q->stats.requests)) {
                q->stats.throttled++;
                if (q->stats.throttled % 2)
                        sim_sqs_outcome_error(o, &err_throttled, "Request is throttled.");
                else
                        sim_sqs_outcome_error(o, &err_throttling, "Rate exceeded");
                return;
        }
        if (q->fault.nonexistent_queue) {
                sim_sqs_outcome_error(o, &err_nonexistent, "The specified queue does not exist.");
                return;
        }
        if (q->fault.access_denied) {
                _cleanup_free_ char *lower = strdup(action);
                for (char *c = lower; c && *c; c++)
                        *c = (char)tolower((unsigned char)*c);
                sim_sqs_outcome_error(
                    o, &err_access_denied,
                    "User: arn:aws:sts::%s:assumed-role/spotdrain-controller/spotdrain is not "
                    "authorized to perform: sqs:%s on resource: %s because no identity-based policy "
                    "allows the sqs:%s action",
                    SIM_SQS_ACCOUNT, lower ? lower : action, q->arn, lower ? lower : action);
                return;
        }
        if (streq(action, "ReceiveMessage"))
                act_receive(q, p, path, o);
        else if (streq(action, "DeleteMessage"))
                act_delete(q, p, path, o);
        else if (streq(action, "DeleteMessageBatch"))
                act_delete_batch(q, p, path, o);
        else if (streq(action, "ChangeMessageVisibility"))
                act_change_visibility(q, p, path, o);
        else if (streq(action, "ChangeMessageVisibilityBatch"))
                act_change_visibility_batch(q, p, path, o);
        else if (streq(action, "SendMessageBatch"))
                act_send_batch(q, p, path, o);
        else if (streq(action, "GetQueueAttributes"))
                act_get_attributes(q, p, path, o);
        else if (streq(action, "GetQueueUrl"))
                act_get_queue_url(q, p, o);
        else if (streq(action, "SendMessage"))
                act_send(q, p, path, o);
        else
                sim_sqs_outcome_error(o, &err_action, "The action %s is not valid for this endpoint.",
                                      action);
}
